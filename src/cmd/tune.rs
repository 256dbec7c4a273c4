//! `gpuwmm tune`: the three tuning stages on the chosen backend, with a progress bar per stage;
//! writes the chip's stress profile, and the journal, summary and charts of the run (the
//! tuning's folder, sidecar and outputs are [`gpuwmm::job::tune`]'s).

use super::{open, say, CmdResult, Failure};
use crate::cli::TuneArgs;
use gpuwmm::backend::select::provenance;
use gpuwmm::job::naming::Output;
use gpuwmm::job::tune::{
    given, open_tuning, runner_settings, write_profile, write_results, TuneOptions,
};
use gpuwmm::job::tune_text::{start_text, summary_text};
use gpuwmm::job::JobError;
use gpuwmm::profile;
use gpuwmm::tune::runner::BackendRunner;
use gpuwmm::tune::{tune, Budgets, Progress, Tuner};
use indicatif::ProgressBar;

pub fn run(args: &TuneArgs) -> CmdResult {
    if args.slurm.slurm {
        return super::tune_slurm::submit(args);
    }
    let options = tune_options(args);
    given(&options)?;
    let mut opened = open(&args.backend)?;
    let info = opened.backend.info().clone();
    let chip = profile::chip_of(&info);
    let device = provenance(opened.backend.as_ref());
    let tuning = open_tuning(&options, &info, &chip, device, &say)?;
    let (meta, out, given) = (tuning.meta, tuning.out, tuning.given);
    let fallback = profile::default_for(&info);
    eprintln!("{}", start_text(&meta, &out, tuning.recorded.len()));
    let settings = runner_settings(&meta, &given, &fallback);
    let mut runner = BackendRunner::new(opened.backend.as_mut(), settings)?;
    let budgets = meta.budgets.clone();
    let mut tuner = Tuner::new(
        &mut runner,
        budgets,
        meta.seed,
        tuning.journal,
        tuning.recorded,
    )
    .map_err(|e| Failure::bad_input(JobError::from(e)))?;
    let mut bars = StageBars::default();
    let outcome = tune(&mut tuner, &given, &fallback, &mut |p| bars.update(p))?;
    bars.finish();
    drop(tuner);
    runner.release()?;
    write_results(&out, &meta, &outcome)?;
    let profile = write_profile(&tuning.profile_path, &outcome, &meta, &chip)?;
    outln!(
        "{}",
        summary_text(&outcome, &profile, &tuning.profile_path, &out)
    )?;
    Ok(())
}

fn tune_options(args: &TuneArgs) -> TuneOptions<'_> {
    TuneOptions {
        seed: args.backend.seed,
        budgets: Budgets {
            distances: args.distances,
            distance_step: args.distance_step,
            locations: args.locations,
            executions: args.executions,
            max_sequence: args.max_sequence,
            max_spread: args.max_spread,
            epsilon: args.epsilon,
            tests: args.tests.clone(),
        },
        patch_words: args.patch_words,
        sequence: args.sequence.as_deref(),
        instances: args.instances,
        block_threads: args.block_threads,
        max_threads: args.max_threads,
        stress_iterations: args.stress_iterations,
        out: Output::new(args.out.as_deref(), args.resume),
        profile_out: args.profile_out.as_deref(),
        force: args.force,
    }
}

/// One progress bar per stage.
#[derive(Default)]
struct StageBars {
    bar: Option<(u8, ProgressBar)>,
}

impl StageBars {
    fn update(&mut self, p: Progress) {
        if self.bar.as_ref().map(|(s, _)| *s) != Some(p.stage) {
            self.finish();
            let bar = super::progress::bar(p.cells, "{pos}/{len} configurations");
            bar.set_prefix(format!("stage {} ", p.stage));
            self.bar = Some((p.stage, bar));
        }
        if let Some((_, bar)) = &self.bar {
            bar.set_position(p.done);
            bar.set_message(format!("{} weak", p.weak));
        }
    }

    fn finish(&mut self) {
        if let Some((_, bar)) = self.bar.take() {
            bar.finish();
        }
    }
}
