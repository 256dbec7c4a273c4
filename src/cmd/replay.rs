//! `gpuwmm replay`: re-run one journaled run in this process and say whether it came out the
//! same, so that a failure found by `check` or `campaign` can be looked at again.
//!
//! Everything random in a run derives from its seed (see [`RunPlan`]), and the journal's sidecar
//! records the target, environment, fences and stress iterations, so the run is rebuilt from
//! the journal alone.

use super::target::setup_failure;
use super::{Failure, Outcome};
use crate::cli::ReplayArgs;
use gpuwmm::check::journal::{meta_path, read_meta, read_rows, JournalError};
use gpuwmm::check::local::RunPlan;
use gpuwmm::check::{BackendName, CheckMeta, Executor, LocalExecutor, RunRecord, RunRequest};
use std::path::Path;

pub fn run(args: &ReplayArgs) -> Outcome {
    let meta = read_check_meta(&args.journal)?;
    let recorded = find_run(&args.journal, args.run)?;
    let mut executor = LocalExecutor::open(&meta.target).map_err(setup_failure)?;
    println!("{}", executor.provenance());
    print_run(&args.journal, &meta, &recorded);
    let request = RunRequest {
        run: recorded.run,
        seed: recorded.seed,
        env: recorded.env,
        fences: meta.fences.clone(),
        stress_iterations: recorded.stress_iterations,
    };
    let replayed = executor.execute(&request)?;
    print_comparison(&meta, &recorded, &replayed);
    Ok(())
}

/// The sidecar of a check or campaign journal; anything else is bad input that says so.
fn read_check_meta(journal: &Path) -> Result<CheckMeta, Failure> {
    if !journal.is_file() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "no journal at {}",
            journal.display()
        )));
    }
    if !meta_path(journal).is_file() {
        return Err(not_a_check(journal, "no such file"));
    }
    let value: serde_json::Value = read_meta(journal).map_err(Failure::bad_input)?;
    serde_json::from_value(value).map_err(|e| not_a_check(journal, &e.to_string()))
}

fn not_a_check(journal: &Path, why: &str) -> Failure {
    Failure::bad_input(anyhow::anyhow!(
        "{} is not a check or campaign journal ({}: {why}); replay supports check and campaign \
         journals",
        journal.display(),
        meta_path(journal).display()
    ))
}

/// The journal's row of run `run`.
fn find_run(journal: &Path, run: u64) -> Result<RunRecord, Failure> {
    let rows: Vec<RunRecord> = read_rows(journal).map_err(|e| match e {
        JournalError::BadRow { message, .. } => not_a_check(journal, &message),
        other => Failure::bad_input(other),
    })?;
    let span = match (rows.first(), rows.last()) {
        (Some(first), Some(last)) => format!("runs {} to {}", first.run, last.run),
        _ => "no runs".to_string(),
    };
    rows.into_iter().find(|r| r.run == run).ok_or_else(|| {
        Failure::bad_input(anyhow::anyhow!(
            "run {run} is not in {}: it records {span}",
            journal.display()
        ))
    })
}

/// What the run was: the check it belongs to, its seed and everything drawn from it.
fn print_run(journal: &Path, meta: &CheckMeta, r: &RunRecord) {
    let plan = RunPlan::from_seed(r.seed);
    println!(
        "journal {}: {} under {}, check seed {}, recorded by: {}",
        journal.display(),
        meta.target.app,
        meta.env,
        meta.seed,
        meta.provenance
    );
    println!("run {}", r.run);
    println!("  seed          {}", r.seed);
    println!("  environment   {}", r.env);
    println!("  fences        {}", meta.fences.label());
    if r.env.stresses() {
        println!(
            "  stress        {} iterations of '{}', {}% of each launch's blocks added as \
             stressing blocks (per launch: {})",
            r.stress_iterations, meta.target.profile.sequence, plan.stress_percent, r.stress_blocks
        );
    } else {
        println!("  stress        none");
    }
    println!(
        "  run plan      stress percent {}, input seed {}, control seed {}, backend seed {}",
        plan.stress_percent, plan.input_seed, plan.control_seed, plan.backend_seed
    );
}

/// The recorded and replayed outcomes side by side, and whether they agree.
fn print_comparison(meta: &CheckMeta, recorded: &RunRecord, replayed: &RunRecord) {
    println!("recorded      {}", outcome_text(recorded));
    println!("replayed      {}", outcome_text(replayed));
    if recorded.stress_blocks != replayed.stress_blocks {
        println!(
            "  stressing blocks differ: recorded {}, replayed {}",
            recorded.stress_blocks, replayed.stress_blocks
        );
    }
    if recorded.outcome == replayed.outcome {
        let detail = if recorded.reason == replayed.reason {
            ""
        } else {
            " (with a different reason)"
        };
        println!("reproduced: {}{detail}", replayed.outcome);
    } else {
        println!(
            "differs: recorded {}, replayed {}",
            recorded.outcome, replayed.outcome
        );
    }
    println!("note: {}", determinism_note(meta.target.backend));
}

fn outcome_text(r: &RunRecord) -> String {
    if r.reason.is_empty() {
        r.outcome.to_string()
    } else {
        format!("{}: {}", r.outcome, r.reason)
    }
}

fn determinism_note(backend: BackendName) -> &'static str {
    match backend {
        BackendName::Sim => {
            "the simulator replays a run exactly: its scheduler and memory model are reseeded \
             from the run's seed"
        }
        BackendName::Cuda | BackendName::Auto => {
            "on a GPU weak behaviour is not deterministic: the seed fixes the inputs, stressing \
             blocks, permutations and stress locations, not the hardware's interleaving, so a \
             replay may differ"
        }
    }
}
