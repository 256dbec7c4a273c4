//! `gpuwmm check`: run an app under a testing environment, journal every run, sum up (in words,
//! or as one JSON document with `--json`). The journal naming and `--resume` rules here (numbered
//! default names, the newest unfinished journal; see [`super::journals`]) are shared by `harden`
//! and `campaign`, and opening a check ([`super::check_job`]) by `campaign`.

use super::check_job::{given_stop, open_check, record_confidence, CheckJob};
use super::journals::{choose_journal, print_json, resuming_note};
use super::progress::{stop_length, stop_position};
use super::target::Executors;
use super::CmdResult;
use crate::cli::CheckArgs;
use gpuwmm::check::journal::{read_meta, read_rows};
use gpuwmm::check::races::{describe, races_path, summarise, RaceReport};
use gpuwmm::check::{BackendChoice, CheckMeta, RunRecord, Stop, Tally};
use gpuwmm::env::Environment;
use gpuwmm::plot::{running_rate, running_rate_chart, MAX_POINTS};
use gpuwmm::stats::{Rate, ZeroErrorBound};
use indicatif::ProgressBar;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub fn run(args: &CheckArgs) -> CmdResult {
    let stop = given_stop(&args.stop);
    let path = choose_journal(
        "check",
        &args.app,
        args.env,
        &args.journal,
        &args.target.backend,
        &|journal| check_unfinished(journal, stop),
    )?;
    let spec = CheckJob {
        app: &args.app,
        env: args.env,
        fences: &args.fences,
        stop,
        journal: &path,
        resume: args.journal.resume,
        target: &args.target,
        races: args.races,
    };
    let mut executors = Executors::new(args.target.in_process);
    let mut check = open_check(&spec, &mut executors)?;
    report_start(&check.meta, &path, check.done.len());
    let bar = progress_bar(&check.meta.stop);
    let stop = check.meta.stop;
    let tally = check.run(&mut executors, &mut |tally| update(&bar, &stop, tally))?;
    bar.finish_and_clear();
    let confidence = record_confidence(&path, &tally);
    let chart = write_chart(&check.meta, &path);
    let races = match check.meta.races {
        Some(mode) => {
            let runs = read_rows::<RunRecord>(&path)?.into_iter().map(|r| r.run);
            Some(summarise(&path, runs, mode)?)
        }
        None => None,
    };
    if args.json {
        let mut document = CheckDocument::new(&check.meta, &tally, &path, chart);
        document.races = races;
        return print_json(&document);
    }
    print_summary(&check.meta, &tally, &path, confidence.as_ref())?;
    if let Some(chart) = chart {
        outln!("chart: {}", chart.display())?;
    }
    if let Some(races) = &races {
        for line in describe(races, tally.runs) {
            outln!("{line}")?;
        }
        outln!("races journal: {}", races_path(&path).display())?;
    }
    Ok(())
}

/// `check --json`: the check's results as one document.
#[derive(Debug, Serialize)]
struct CheckDocument<'a> {
    app: &'a str,
    env: Environment,
    /// `as-is`, `all`, `none`, or the site ids.
    fences: String,
    /// The backend asked for (`auto`, `cuda`, `sim`); `provenance` says what ran.
    backend: BackendChoice,
    provenance: &'a str,
    seed: u64,
    stop: Stop,
    runs: u64,
    /// The runs' wall time, seconds.
    elapsed_s: f64,
    outcomes: Outcomes,
    errors: u64,
    /// Errors out of runs, with the 95% Wilson interval (`low`, `high`).
    error_rate: Rate,
    /// Whether the error rate is above 5% (the paper's threshold).
    effective: bool,
    /// With 0 errors: what the runs support about the error rate; else `null`.
    confidence: Option<ZeroErrorBound>,
    first_error: Option<FirstError>,
    journal: &'a Path,
    chart: Option<PathBuf>,
    /// With `--races`: the races summed over the runs (simulator).
    #[serde(skip_serializing_if = "Option::is_none")]
    races: Option<Vec<RaceReport>>,
}

/// Runs per outcome.
#[derive(Debug, Serialize)]
struct Outcomes {
    pass: u64,
    fail: u64,
    timeout: u64,
    crash: u64,
}

impl Outcomes {
    fn of(tally: &Tally) -> Outcomes {
        use gpuwmm::check::Outcome::{Crash, Fail, Pass, Timeout};
        Outcomes {
            pass: tally.count(Pass),
            fail: tally.count(Fail),
            timeout: tally.count(Timeout),
            crash: tally.count(Crash),
        }
    }
}

/// The first run that did not pass, and the command that replays it.
#[derive(Debug, Serialize)]
struct FirstError {
    run: u64,
    outcome: gpuwmm::check::Outcome,
    reason: String,
    replay: String,
}

impl<'a> CheckDocument<'a> {
    fn new(
        meta: &'a CheckMeta,
        tally: &Tally,
        journal: &'a Path,
        chart: Option<PathBuf>,
    ) -> CheckDocument<'a> {
        let rate = tally.error_rate();
        CheckDocument {
            app: &meta.target.app,
            env: meta.env,
            fences: meta.fences.label(),
            backend: meta.target.backend,
            provenance: &meta.provenance,
            seed: meta.seed,
            stop: meta.stop,
            runs: tally.runs,
            elapsed_s: tally.elapsed_ms / 1e3,
            outcomes: Outcomes::of(tally),
            errors: tally.errors(),
            error_rate: rate,
            effective: rate.is_effective(),
            confidence: ZeroErrorBound::of(tally.runs, tally.errors()),
            first_error: tally
                .first_error
                .as_ref()
                .map(|(run, outcome, reason)| FirstError {
                    run: *run,
                    outcome: *outcome,
                    reason: reason.clone(),
                    replay: format!("gpuwmm replay {} {run}", journal.display()),
                }),
            journal,
            chart,
            races: None,
        }
    }
}

/// Draws the running error rate of the whole journal next to it (`<journal>.svg`) and returns
/// its path. The journal holds the results, so a chart that cannot be made is a warning, not a
/// failed check.
fn write_chart(meta: &CheckMeta, journal: &Path) -> Option<PathBuf> {
    let chart_path = journal.with_extension("svg");
    let drawn = read_rows(journal)
        .map_err(anyhow::Error::from)
        .and_then(|rows| {
            let errors: Vec<bool> = rows
                .iter()
                .map(|r: &RunRecord| r.outcome.is_error())
                .collect();
            let title = format!("{} under {}: running error rate", meta.target.app, meta.env);
            let points = running_rate(&errors, MAX_POINTS);
            Ok(running_rate_chart(&title, &meta.provenance, &points)?)
        })
        .and_then(|svg| Ok(std::fs::write(&chart_path, svg)?));
    match drawn {
        Ok(()) => Some(chart_path),
        Err(e) => {
            eprintln!("warning: no chart at {}: {e:#}", chart_path.display());
            None
        }
    }
}

/// Whether the check journaled at `path` has not reached its stop (`stop`, or the one it
/// records). A journal whose rows cannot be read (e.g. one cut short) counts as unfinished, so
/// that resuming it repairs it or says what is wrong; one without a check's sidecar does not.
fn check_unfinished(path: &Path, stop: Option<Stop>) -> bool {
    let Ok(meta) = read_meta::<CheckMeta>(path) else {
        return false;
    };
    read_rows::<RunRecord>(path).map_or(true, |rows| {
        !stop.unwrap_or(meta.stop).reached(&Tally::of(&rows))
    })
}

fn report_start(meta: &CheckMeta, path: &Path, done: usize) {
    eprintln!("{}", meta.provenance);
    eprintln!(
        "checking {} under {} with fences {}: {}, seed {}, stress {} (profile {}), journal {}{}",
        meta.target.app,
        meta.env,
        meta.fences.label(),
        meta.stop,
        meta.seed,
        stress_text(meta),
        meta.profile_source,
        path.display(),
        resuming_note(done)
    );
}

fn stress_text(meta: &CheckMeta) -> String {
    if !meta.env.stresses() {
        return "none".into();
    }
    let p = &meta.target.profile;
    format!(
        "{} iterations of '{}' x spread {} x patch {}",
        meta.stress.stress_iterations, p.sequence, p.spread, p.patch_words
    )
}

fn progress_bar(stop: &Stop) -> ProgressBar {
    let (len, unit) = stop_length(stop);
    super::progress::bar(len, &format!("{{pos}}/{{len}} {unit}"))
}

fn update(bar: &ProgressBar, stop: &Stop, tally: &Tally) {
    bar.set_position(stop_position(stop, tally));
    bar.set_message(format!(
        "{} runs, {} errors, rate {:.2}%",
        tally.runs,
        tally.errors(),
        100.0 * tally.error_rate().rate
    ));
}

fn print_summary(
    meta: &CheckMeta,
    tally: &Tally,
    path: &Path,
    confidence: Option<&ZeroErrorBound>,
) -> std::io::Result<()> {
    outln!("{}", meta.provenance)?;
    outln!(
        "app {} | env {} | fences {}",
        meta.target.app,
        meta.env,
        meta.fences.label()
    )?;
    outln!("runs {} in {:.1} s", tally.runs, tally.elapsed_ms / 1e3)?;
    let kinds: Vec<String> = gpuwmm::check::Outcome::ALL
        .iter()
        .map(|o| format!("{o} {}", tally.count(*o)))
        .collect();
    outln!("outcomes: {}", kinds.join(", "))?;
    let rate = tally.error_rate();
    outln!(
        "error rate {rate} (95% Wilson interval){}",
        if rate.is_effective() {
            " — effective (above 5%)"
        } else {
            ""
        }
    )?;
    if let Some(confidence) = confidence {
        outln!("confidence: {confidence}")?;
    }
    if let Some((run, outcome, reason)) = &tally.first_error {
        outln!("first error: run {run}, {outcome}: {reason}")?;
        outln!("replay it with: gpuwmm replay {} {run}", path.display())?;
    }
    outln!("journal: {}", path.display())?;
    Ok(())
}
