//! `gpuwmm replay`: re-run one journaled run in this process and say whether it came out the
//! same, so that a failure found by `check`, `campaign` or `harden` can be looked at again.
//!
//! Everything random in a run derives from its seed (see [`RunPlan`]), and the journal's sidecar
//! records the target, environment and stress iterations, and its rows the fences (a hardening
//! tries a fence set per query), so the run is rebuilt from the journal alone.

use super::journals::refuse_changed_sites;
use super::target::setup_failure;
use super::{CmdResult, Failure};
use crate::cli::ReplayArgs;
use gpuwmm::check::journal::{meta_path, read_meta, read_rows, JournalError};
use gpuwmm::check::local::RunPlan;
use gpuwmm::check::{
    BackendChoice, CheckMeta, Executor, Fences, LocalExecutor, RunRecord, RunRequest, Target,
};
use gpuwmm::env::Environment;
use gpuwmm::harden::run::{HardenMeta, HardenRow, SiteSummary};
use serde::de::DeserializeOwned;
use std::path::Path;

pub fn run(args: &ReplayArgs) -> CmdResult {
    let mut subject = open_subject(&args.journal, args.run, args.query)?;
    if let Some(dir) = &args.app_dir {
        if subject.target.app_dir.is_none() {
            return Err(Failure::bad_input(anyhow::anyhow!(
                "{}: a journal of the built-in app {}, which takes no --app-dir",
                args.journal.display(),
                subject.target.app
            )));
        }
        subject.target.app_dir = Some(std::path::absolute(dir)?);
    }
    let mut executor = LocalExecutor::open(&subject.target).map_err(setup_failure)?;
    if !subject.sites.is_empty() {
        let now = executor.sites()?;
        refuse_changed_sites(&args.journal, "replay a run of", &subject.sites, &now)?;
    }
    outln!("{}", executor.provenance())?;
    print_run(&args.journal, &subject)?;
    let r = &subject.recorded;
    let request = RunRequest {
        run: r.run,
        seed: r.seed,
        env: r.env,
        fences: subject.fences.clone(),
        stress_iterations: r.stress_iterations,
    };
    let replayed = executor.execute(&request)?;
    print_comparison(&subject, &replayed)?;
    Ok(())
}

/// A journaled run and what it ran: the journal's target and the run's fences.
struct Subject {
    target: Target,
    env: Environment,
    /// The check's (or hardening's) seed, from which the run's was drawn.
    seed: u64,
    provenance: String,
    /// `harden query 3 (linear, round 0), ` (a prefix for the journal line), or empty for a check.
    query: String,
    fences: Fences,
    /// The candidate sites the journal recorded (a check journal with `--fences as-is`, or from
    /// before sites were recorded, has none).
    sites: Vec<SiteSummary>,
    recorded: RunRecord,
}

/// The run `run` (of query `query`, for a harden journal) and what it ran.
fn open_subject(journal: &Path, run: u64, query: Option<usize>) -> Result<Subject, Failure> {
    let meta = read_sidecar(journal)?;
    if let Ok(check) = serde_json::from_value::<CheckMeta>(meta.clone()) {
        if query.is_some() {
            return Err(Failure::bad_input(anyhow::anyhow!(
                "{} is a check journal: its runs need no --query",
                journal.display()
            )));
        }
        return check_subject(journal, check, run);
    }
    match serde_json::from_value::<HardenMeta>(meta) {
        Ok(harden) => harden_subject(journal, harden, run, query),
        Err(e) => Err(unsupported(journal, &e.to_string())),
    }
}

fn check_subject(journal: &Path, meta: CheckMeta, run: u64) -> Result<Subject, Failure> {
    let rows: Vec<RunRecord> = journal_rows(journal)?;
    let span = span(rows.iter().map(|r| r.run));
    let recorded = rows
        .into_iter()
        .find(|r| r.run == run)
        .ok_or_else(|| not_there(journal, &format!("run {run}"), &span))?;
    Ok(Subject {
        target: meta.target,
        env: meta.env,
        seed: meta.seed,
        provenance: meta.provenance,
        query: String::new(),
        fences: meta.fences,
        sites: meta.sites,
        recorded,
    })
}

fn harden_subject(
    journal: &Path,
    meta: HardenMeta,
    run: u64,
    query: Option<usize>,
) -> Result<Subject, Failure> {
    let Some(query) = query else {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "{} is a harden journal: name the run's query with --query (the `query` column; \
             harden shows it as #Q)",
            journal.display()
        )));
    };
    let rows: Vec<HardenRow> = journal_rows(journal)?;
    let in_query: Vec<HardenRow> = rows.into_iter().filter(|r| r.query == query).collect();
    let span = span(in_query.iter().map(|r| r.run));
    let row = in_query
        .into_iter()
        .find(|r| r.run == run)
        .ok_or_else(|| not_there(journal, &format!("run {run} of query {query}"), &span))?;
    let fences = row.fences.parse().map_err(|e: String| {
        Failure::bad_input(anyhow::anyhow!("{}: query {query}: {e}", journal.display()))
    })?;
    Ok(Subject {
        target: meta.target,
        env: meta.env,
        seed: meta.seed,
        provenance: meta.provenance,
        query: format!(
            "harden query {query} ({}, round {}), ",
            row.phase, row.round
        ),
        fences,
        sites: meta.sites,
        recorded: row.record(),
    })
}

/// The journal's sidecar, as JSON; a missing journal or sidecar is bad input that says so.
fn read_sidecar(journal: &Path) -> Result<serde_json::Value, Failure> {
    if !journal.is_file() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "no journal at {}",
            journal.display()
        )));
    }
    if !meta_path(journal).is_file() {
        return Err(unsupported(journal, "no such file"));
    }
    read_meta(journal).map_err(Failure::bad_input)
}

fn unsupported(journal: &Path, why: &str) -> Failure {
    Failure::bad_input(anyhow::anyhow!(
        "{} is not a check, campaign or harden journal ({}: {why}); replay supports those",
        journal.display(),
        meta_path(journal).display()
    ))
}

fn journal_rows<R: DeserializeOwned>(journal: &Path) -> Result<Vec<R>, Failure> {
    read_rows(journal).map_err(|e| match e {
        JournalError::BadRow { message, .. } => unsupported(journal, &message),
        other => Failure::bad_input(other),
    })
}

/// `runs 0 to 199`, or `no runs`.
fn span(mut runs: impl Iterator<Item = u64>) -> String {
    match runs.next() {
        Some(first) => format!("runs {first} to {}", runs.last().unwrap_or(first)),
        None => "no runs".to_string(),
    }
}

fn not_there(journal: &Path, what: &str, span: &str) -> Failure {
    Failure::bad_input(anyhow::anyhow!(
        "{what} is not in {}: it records {span}",
        journal.display()
    ))
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

fn determinism_note(backend: BackendChoice) -> &'static str {
    match backend {
        BackendChoice::Sim => {
            "the simulator replays a run exactly: its scheduler and memory model are reseeded \
             from the run's seed"
        }
        BackendChoice::Cuda | BackendChoice::Auto => {
            "on a GPU weak behaviour is not deterministic: the seed fixes the inputs, stressing \
             blocks, permutations and stress locations, not the hardware's interleaving, so a \
             replay may differ"
        }
    }
}
