//! `gpuwmm check`: run an app under a testing environment, journal every run, sum up (in words,
//! or as one JSON document with `--json`). Journal naming, `--resume` and the document are the
//! library's (see [`gpuwmm::job::check`]).

use super::progress::{stop_length, stop_position};
use super::{print_json, say, target_options, CmdResult};
use crate::cli::CheckArgs;
use gpuwmm::check::races::{describe, races_path};
use gpuwmm::check::{CheckMeta, Stop, Tally};
use gpuwmm::job::check::{
    check_journal, open_check, race_summary, record_confidence, stop_of, write_chart,
    CheckDocument, CheckJob,
};
use gpuwmm::job::naming::resuming_note;
use gpuwmm::job::settings::GivenOptions;
use gpuwmm::job::target::Executors;
use gpuwmm::stats::ZeroErrorBound;
use indicatif::ProgressBar;
use std::path::Path;

pub fn run(args: &CheckArgs, given: GivenOptions) -> CmdResult {
    let stop = stop_of(args.stop.runs, args.stop.duration);
    let target = target_options(&args.target, given);
    let (app, env) = (args.app.as_str(), args.env);
    let output = super::output(&args.journal);
    let path = check_journal((app, env), output, stop, &target, &say)?;
    let spec = CheckJob {
        app,
        env,
        fences: &args.fences,
        stop,
        journal: &path,
        resume: args.journal.resume,
        target: &target,
        races: args.races,
    };
    let mut executors = Executors::new(target.in_process);
    let mut check = open_check(&spec, &mut executors, &say)?;
    report_start(&check.meta, &path, check.done.len());
    let bar = progress_bar(&check.meta.stop);
    let stop = check.meta.stop;
    let tally = check.run(&mut executors, &mut |tally| update(&bar, &stop, tally))?;
    bar.finish_and_clear();
    let confidence = record_confidence(&path, &tally, &say);
    let chart = write_chart(&check.meta, &path, &say);
    let races = race_summary(&check.meta, &path)?;
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
