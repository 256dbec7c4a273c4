//! `gpuwmm check`: run an app under a testing environment, journal every run, sum up (in words,
//! or as one JSON document with `--json`). The journal naming and `--resume` rules here (numbered
//! default names, the newest unfinished journal) are shared by `harden` and `campaign`.

use super::journals::{choose_journal, now, print_json, refuse_another_journal};
use super::target::{calibrate, resolve, Executors};
use super::{CmdResult, Failure};
use crate::cli::{CheckArgs, StopArgs, TargetArgs};
use gpuwmm::check::journal::{read_meta, read_rows, set_meta_entry};
use gpuwmm::check::{run_check, BackendChoice, CheckMeta, Fences, Journal, RunRecord, Stop, Tally};
use gpuwmm::env::Environment;
use gpuwmm::plot::{running_rate, running_rate_chart, MAX_POINTS};
use gpuwmm::ptx::passes::fences::select_sites;
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
    if args.json {
        return print_json(&CheckDocument::new(&check.meta, &tally, &path, chart));
    }
    print_summary(&check.meta, &tally, &path, confidence.as_ref());
    if let Some(chart) = chart {
        println!("chart: {}", chart.display());
    }
    Ok(())
}

/// What a check with 0 errors supports, also written to the journal's sidecar as `confidence`
/// (removed there when the runs had an error, e.g. after a resume). The journal holds the
/// results, so a sidecar that cannot be updated is a warning.
pub fn record_confidence(journal: &Path, tally: &Tally) -> Option<ZeroErrorBound> {
    let confidence = ZeroErrorBound::of(tally.runs, tally.errors());
    if let Err(e) = set_meta_entry(journal, "confidence", &confidence) {
        eprintln!(
            "warning: the sidecar of {} has no confidence entry: {e}",
            journal.display()
        );
    }
    confidence
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

/// One check to start, or to resume from its journal: what `check` runs, and each cell of
/// `campaign`.
pub struct CheckJob<'a> {
    pub app: &'a str,
    pub env: Environment,
    /// `as-is`, `all`, `none` or site ids (see [`parse_fences`]); ignored on resume.
    pub fences: &'a str,
    /// The stop; `None` keeps the one recorded on resume, and is 1000 runs for a new check.
    pub stop: Option<Stop>,
    pub journal: &'a Path,
    pub resume: bool,
    pub target: &'a TargetArgs,
}

/// A check whose journal is open: what it is and the runs recorded so far.
pub struct OpenCheck {
    pub journal: Journal<RunRecord>,
    pub meta: CheckMeta,
    pub done: Vec<RunRecord>,
}

impl OpenCheck {
    /// Whether the runs recorded already reach the stop.
    pub fn finished(&self) -> bool {
        self.meta.stop.reached(&Tally::of(&self.done))
    }

    /// Runs the check to its stop (a finished one needs no executor), calling `progress` after
    /// each run; returns the tally of all its runs, those before a resume included.
    pub fn run(
        &mut self,
        executors: &mut Executors,
        progress: &mut dyn FnMut(&Tally),
    ) -> Result<Tally, Failure> {
        if self.finished() {
            return Ok(Tally::of(&self.done));
        }
        let executor = executors.get(&self.meta.target)?;
        Ok(run_check(
            executor,
            &mut self.journal,
            &self.meta,
            &self.done,
            &mut |_, tally| progress(tally),
            &|| false,
        )?)
    }
}

/// Starts the check `spec` describes (resolving the target, calibrating stress, creating the
/// journal), or with `resume` reopens its journal.
pub fn open_check(spec: &CheckJob, executors: &mut Executors) -> Result<OpenCheck, Failure> {
    if spec.resume {
        return resume(spec);
    }
    let resolved = resolve(spec.app, spec.target)?;
    let fences = parse_fences(spec.fences, &resolved.target)?;
    let calibrator = executors.get(&resolved.target)?;
    let seed = spec.target.backend.seed;
    let (stress_iterations, calibration, calibration_error) =
        calibrate(calibrator, spec.env, &fences, seed)?;
    let meta = CheckMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        target: resolved.target,
        env: spec.env,
        fences,
        seed,
        stop: spec.stop.unwrap_or(DEFAULT_STOP),
        stress_iterations,
        calibration,
        calibration_error,
        provenance: calibrator.provenance(),
        profile_source: resolved.profile_source,
    };
    let journal = Journal::create(spec.journal, &meta).map_err(Failure::bad_input)?;
    Ok(OpenCheck {
        journal,
        meta,
        done: Vec::new(),
    })
}

/// Reopens a journal; the app and environment given must be the ones it records.
fn resume(spec: &CheckJob) -> Result<OpenCheck, Failure> {
    let path = spec.journal;
    let (journal, mut meta, done): (_, CheckMeta, _) =
        Journal::resume(path).map_err(Failure::bad_input)?;
    refuse_another_journal(
        path,
        "check",
        (&meta.target.app, meta.env),
        (spec.app, spec.env),
    )?;
    // A new stop given with --resume extends (or shortens) the check.
    if let Some(stop) = spec.stop {
        meta.stop = stop;
    }
    Ok(OpenCheck {
        journal,
        meta,
        done,
    })
}

/// A check's stop when none is given.
pub const DEFAULT_STOP: Stop = Stop::Runs(1000);

/// The stop given on the command line, if any.
pub fn given_stop(args: &StopArgs) -> Option<Stop> {
    match (args.runs, args.duration) {
        (_, Some(d)) => Some(Stop::Seconds(d.as_secs_f64())),
        (Some(n), None) => Some(Stop::Runs(n)),
        (None, None) => None,
    }
}

/// `as-is`, or a site selection checked against the app's sites.
pub fn parse_fences(spec: &str, target: &gpuwmm::check::Target) -> Result<Fences, Failure> {
    if spec.trim() == "as-is" {
        return Ok(Fences::AsIs);
    }
    let sites = gpuwmm::check::local::target_sites(target).map_err(Failure::bad_input)?;
    let chosen = select_sites(&sites, spec).map_err(|e| Failure::bad_input(anyhow::anyhow!(e)))?;
    Ok(Fences::Sites(chosen.iter().map(|s| s.id).collect()))
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
        if done > 0 {
            format!(" (resuming after {done} runs)")
        } else {
            String::new()
        }
    );
}

fn stress_text(meta: &CheckMeta) -> String {
    if !meta.env.stresses() {
        return "none".into();
    }
    let p = &meta.target.profile;
    format!(
        "{} iterations of '{}' x spread {} x patch {}",
        meta.stress_iterations, p.sequence, p.spread, p.patch_words
    )
}

fn progress_bar(stop: &Stop) -> ProgressBar {
    let (len, unit) = match *stop {
        Stop::Runs(n) => (n, "runs"),
        Stop::Seconds(s) => ((s * 1e3) as u64, "ms"),
    };
    super::progress::bar(len, &format!("{{pos}}/{{len}} {unit}"))
}

fn update(bar: &ProgressBar, stop: &Stop, tally: &Tally) {
    let position = match stop {
        Stop::Runs(_) => tally.runs,
        Stop::Seconds(_) => tally.elapsed_ms as u64,
    };
    bar.set_position(position);
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
) {
    println!("{}", meta.provenance);
    println!(
        "app {} | env {} | fences {}",
        meta.target.app,
        meta.env,
        meta.fences.label()
    );
    println!("runs {} in {:.1} s", tally.runs, tally.elapsed_ms / 1e3);
    let kinds: Vec<String> = gpuwmm::check::Outcome::ALL
        .iter()
        .map(|o| format!("{o} {}", tally.count(*o)))
        .collect();
    println!("outcomes: {}", kinds.join(", "));
    let rate = tally.error_rate();
    println!(
        "error rate {rate} (95% Wilson interval){}",
        if rate.is_effective() {
            " — effective (above 5%)"
        } else {
            ""
        }
    );
    if let Some(confidence) = confidence {
        println!("confidence: {confidence}");
    }
    if let Some((run, outcome, reason)) = &tally.first_error {
        println!("first error: run {run}, {outcome}: {reason}");
        println!("replay it with: gpuwmm replay {} {run}", path.display());
    }
    println!("journal: {}", path.display());
}
