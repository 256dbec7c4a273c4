//! `gpuwmm check`: run an app under a testing environment, journal every run, sum up (in words,
//! or as one JSON document with `--json`). Journal naming, `--resume` and the document are the
//! library's (see [`gpuwmm::job::check`]).

use super::progress::{stop_length, stop_position};
use super::{print_json, say, target_options, CmdResult};
use crate::cli::CheckArgs;
use gpuwmm::check::races::{describe, races_path};
use gpuwmm::check::{Stop, Tally};
use gpuwmm::job::check::{
    blind_loops_after, check_journal, open_check, race_summary, record_confidence, stop_of,
    write_chart, CheckDocument, CheckJob,
};
use gpuwmm::job::check_text::{blind_loop_lines, start_text, summary_text};
use gpuwmm::job::settings::GivenOptions;
use gpuwmm::job::target::Executors;
use indicatif::ProgressBar;

pub fn run(args: &CheckArgs, given: GivenOptions) -> CmdResult {
    let stop = stop_of(args.stop.runs, args.stop.duration);
    let target = target_options(&args.target, given);
    let app = gpuwmm::job::target::app_name(args.app.as_deref(), args.target.app_dir.as_deref())?;
    let (app, env) = (app.as_str(), args.env);
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
    eprintln!("{}", start_text(&check.meta, &path, check.done.len()));
    let bar = progress_bar(&check.meta.stop);
    let stop = check.meta.stop;
    let tally = check.run(&mut executors, &mut |tally| update(&bar, &stop, tally))?;
    bar.finish_and_clear();
    let confidence = record_confidence(&path, &tally, &say);
    let chart = write_chart(&check.meta, &path, &say);
    let races = race_summary(&check.meta, &path)?;
    let blind_loops = blind_loops_after(&check.meta, &tally);
    if args.json {
        let mut document = CheckDocument::new(&check.meta, &tally, &path, chart);
        document.races = races;
        document.blind_loops = blind_loops;
        return print_json(&document);
    }
    outln!(
        "{}",
        summary_text(&check.meta, &tally, &path, confidence.as_ref())
    )?;
    for line in blind_loop_lines(&blind_loops) {
        outln!("{line}")?;
    }
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
