//! `gpuwmm replay`: re-run one journaled run in this process and say whether it came out the
//! same, so that a failure found by `check`, `campaign` or `harden` can be looked at again. The
//! run is rebuilt from the journal by [`gpuwmm::job::replay`].

use super::CmdResult;
use crate::cli::ReplayArgs;
use gpuwmm::check::local::RunPlan;
use gpuwmm::check::{Executor, LocalExecutor, RunRecord};
use gpuwmm::job::replay::{
    determinism_note, move_app_dir, open_subject, refuse_changed_app, Subject,
};
use gpuwmm::job::settings::GivenOptions;
use gpuwmm::job::sidecar::refuse_changed_sites;
use gpuwmm::job::JobError;
use std::path::Path;

pub fn run(args: &ReplayArgs, given: &GivenOptions) -> CmdResult {
    let mut subject = open_subject(&args.journal, args.run, args.query)?;
    if let Some(dir) = &args.app_dir {
        move_app_dir(&args.journal, &mut subject, dir)?;
    }
    refuse_changed_app(&args.journal, &subject, given, &super::say)?;
    let mut executor = LocalExecutor::open(&subject.target).map_err(JobError::Setup)?;
    if !subject.sites.is_empty() {
        let now = executor.sites()?;
        refuse_changed_sites(&args.journal, "replay a run of", &subject.sites, &now)?;
    }
    outln!("{}", executor.provenance())?;
    print_run(&args.journal, &subject)?;
    let replayed = executor.execute(&subject.request())?;
    print_device_output(executor.device_output())?;
    print_comparison(&subject, &replayed)?;
    Ok(())
}

/// What the run was: the check or query it belongs to, its seed and everything drawn from it.
fn print_run(journal: &Path, subject: &Subject) -> std::io::Result<()> {
    let r = &subject.recorded;
    let plan = RunPlan::from_seed(r.seed);
    outln!(
        "journal {}: {} under {}, {}seed {}, recorded by: {}",
        journal.display(),
        subject.target.app,
        subject.env,
        subject.query,
        subject.seed,
        subject.provenance
    )?;
    outln!("run {}", r.run)?;
    outln!("  seed          {}", r.seed)?;
    outln!("  environment   {}", r.env)?;
    outln!("  fences        {}", subject.fences.label())?;
    if subject.races {
        outln!("  races         recorded, as in the check (it changes how the simulator defers read-modify-writes)")?;
    }
    if r.env.stresses() {
        outln!(
            "  stress        {} iterations of '{}', {}% of each launch's blocks added as \
             stressing blocks (per launch: {})",
            r.stress_iterations,
            subject.target.profile.sequence,
            plan.stress_percent,
            r.stress_blocks
        )?;
    } else {
        outln!("  stress        none")?;
    }
    outln!(
        "  run plan      stress percent {}, input seed {}, control seed {}, backend seed {}",
        plan.stress_percent,
        plan.input_seed,
        plan.control_seed,
        plan.backend_seed
    )?;
    Ok(())
}

/// What the replayed run's kernels printed on the simulator, as they printed it (a GPU's
/// `printf` output is already on standard output).
fn print_device_output(text: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    if text.is_empty() {
        return Ok(());
    }
    outln!("device output (printf, in the simulator's execution order):")?;
    let mut out = std::io::stdout().lock();
    out.write_all(text)?;
    if !text.ends_with(b"\n") {
        writeln!(out)?;
    }
    Ok(())
}

/// The recorded and replayed outcomes side by side, and whether they agree.
fn print_comparison(subject: &Subject, replayed: &RunRecord) -> std::io::Result<()> {
    let recorded = &subject.recorded;
    outln!("recorded      {}", outcome_text(recorded))?;
    outln!("replayed      {}", outcome_text(replayed))?;
    if recorded.stress_blocks != replayed.stress_blocks {
        outln!(
            "  stressing blocks differ: recorded {}, replayed {}",
            recorded.stress_blocks,
            replayed.stress_blocks
        )?;
    }
    if recorded.outcome == replayed.outcome {
        let detail = if recorded.reason == replayed.reason {
            ""
        } else {
            " (with a different reason)"
        };
        outln!("reproduced: {}{detail}", replayed.outcome)?;
    } else {
        outln!(
            "differs: recorded {}, replayed {}",
            recorded.outcome,
            replayed.outcome
        )?;
    }
    outln!("note: {}", determinism_note(subject.target.backend))?;
    Ok(())
}

fn outcome_text(r: &RunRecord) -> String {
    if r.reason.is_empty() {
        r.outcome.to_string()
    } else {
        format!("{}: {}", r.outcome, r.reason)
    }
}
