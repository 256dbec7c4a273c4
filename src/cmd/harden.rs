//! `gpuwmm harden`: run the paper's empirical fence insertion on an app, journaling every run,
//! and show the fences it keeps as source lines and a patch (or, with `--json`, one JSON
//! document); what it came to is also recorded in the journal's sidecar (see
//! [`gpuwmm::job::harden`]).

use super::progress::{stop_length, stop_position};
use super::{print_json, say, CmdResult};
use crate::cli::HardenArgs;
use gpuwmm::harden::run::QueryProgress;
use gpuwmm::job::check::stop_of;
use gpuwmm::job::harden::{
    answer_text, not_stable, open_hardening, patch_checked, query_text, record_result,
    HardenDocument, HardenOptions, StabilityRuns,
};
use gpuwmm::job::harden_text::{start_text, HardenText};
use gpuwmm::job::settings::GivenOptions;
use indicatif::ProgressBar;
use std::time::Instant;

pub fn run(args: &HardenArgs, given: GivenOptions) -> CmdResult {
    let clock = Instant::now();
    let target = super::target_options(&args.target, given);
    let app = gpuwmm::job::target::app_name(args.app.as_deref(), args.target.app_dir.as_deref())?;
    let options = HardenOptions {
        app: &app,
        env: args.env,
        stable: stop_of(args.stable.stable_runs, args.stable.stable_duration),
        iterations: args.iterations,
        max_rounds: args.max_rounds,
        minimise_kinds: args.minimise_kind,
        jobs: args.jobs,
        journal: super::output(&args.journal),
        target: &target,
        fence_style: args.fence_style,
        patch_runs: args.patch_runs,
    };
    let opened = open_hardening(&options, &say)?;
    eprintln!(
        "{}",
        start_text(&opened.meta, &opened.path, opened.done.len())
    );
    let mut printer = Printer::new(args.json);
    let patch_bar = super::progress::bar(args.patch_runs, "{pos}/{len} runs");
    patch_bar.set_prefix("checking the patch ");
    let query_bar = printer.bar.clone();
    let hardening = opened.run(&mut |p| printer.update(p), &mut |made, _| {
        query_bar.finish_and_clear();
        patch_bar.set_position(made)
    })?;
    patch_bar.finish_and_clear();
    printer.bar.finish_and_clear();
    let wall_s = clock.elapsed().as_secs_f64();
    let document = HardenDocument::new(&hardening, printer.stability, wall_s);
    record_result(&hardening.path, &document, &say);
    if let Some(closed) = printer.stdout_error {
        return Err(closed.into());
    }
    if args.json {
        print_json(&document)?;
    } else {
        out!(
            "{}",
            HardenText::new(&hardening, wall_s, document.confidence.as_ref())?
        )?;
    }
    match hardening.hardened.insertion.stable {
        true => patch_checked(&hardening).map_err(Into::into),
        false => Err(not_stable(&hardening.hardened.insertion).into()),
    }
}

/// One line per answered query (on stderr with `--json`), and a bar for the query being run;
/// takes note of the stability checks' run counts.
struct Printer {
    bar: ProgressBar,
    current: Option<usize>,
    to_stderr: bool,
    stability: StabilityRuns,
    /// The first failed write of a line to stdout (a closed pipe); the hardening goes on and
    /// ends with it once its result is recorded.
    stdout_error: Option<std::io::Error>,
}

impl Printer {
    fn new(to_stderr: bool) -> Printer {
        // The unit (runs or ms, as the stability check counts) is the bar's message.
        let bar = super::progress::bar(1, "{pos}/{len}");
        Printer {
            bar,
            current: None,
            to_stderr,
            stability: StabilityRuns::default(),
            stdout_error: None,
        }
    }

    fn update(&mut self, p: &QueryProgress) {
        if self.current != Some(p.query.index) {
            self.current = Some(p.query.index);
            self.bar.set_prefix(format!("{} ", query_text(p)));
            let (length, unit) = stop_length(&p.stop);
            self.bar.set_length(length);
            self.bar.set_message(unit);
        }
        self.bar.set_position(stop_position(&p.stop, p.tally));
        self.stability.update(p);
        if let Some(answer) = p.answer {
            let line = format!("{} -> {}", query_text(p), answer_text(p, answer));
            match self.to_stderr {
                true => self.bar.suspend(|| eprintln!("{line}")),
                false => {
                    if let Err(e) = self.bar.suspend(|| outln!("{line}")) {
                        self.stdout_error.get_or_insert(e);
                    }
                }
            }
        }
    }
}
