//! One journaled run rebuilt from its journal alone, for `gpuwmm replay`: everything random in
//! a run derives from its seed (see [`crate::check::local::RunPlan`]), the sidecar records the
//! target, environment and stress iterations, and the rows the fences (a hardening tries a
//! fence set per query). Which rows a journal has is its sidecar's `kind`.

use super::settings::{
    app_hash, hash_at, hash_differences, refuse_unless_forced, AppHash, Forced, GivenOptions,
    FORCED_ENTRY,
};
use super::sidecar::{kind_in, JobKind};
use super::{JobError, Say};
use crate::check::journal::{meta_path, read_meta, read_rows, JournalError};
use crate::check::spec::SiteSummary;
use crate::check::{BackendKind, CheckMeta, Fences, RunRecord, RunRequest, Target};
use crate::env::Environment;
use crate::harden::run::{HardenMeta, HardenRow};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::path::Path;

/// A journaled run and what it ran: the journal's target and the run's fences.
pub struct Subject {
    pub target: Target,
    pub env: Environment,
    /// The check's (or hardening's) seed, from which the run's was drawn.
    pub seed: u64,
    pub provenance: String,
    /// `harden query 3 (linear, round 0), ` (a prefix for the journal line), or empty for a
    /// check.
    pub query: String,
    pub fences: Fences,
    /// The candidate sites the journal recorded (a check journal with `--fences as-is`, or
    /// from before sites were recorded, has none).
    pub sites: Vec<SiteSummary>,
    pub recorded: RunRecord,
    /// The app's hashes the run ran with (`None`: the journal recorded none).
    pub app_hash: Option<AppHash>,
    /// The run recorded races (`check --races`): while it records, the simulator defers no
    /// read-modify-write, so the run is replayed recording them too.
    pub races: bool,
}

impl Subject {
    /// The request that runs the recorded run again.
    pub fn request(&self) -> RunRequest {
        let r = &self.recorded;
        RunRequest {
            run: r.run,
            seed: r.seed,
            env: r.env,
            fences: self.fences.clone(),
            stress_iterations: r.stress_iterations,
            races: self.races,
        }
    }
}

/// The run `run` (of query `query`, for a harden journal) and what it ran.
pub fn open_subject(journal: &Path, run: u64, query: Option<usize>) -> Result<Subject, JobError> {
    let meta = read_sidecar(journal)?;
    let forced: Vec<Forced> = match meta.get(FORCED_ENTRY) {
        Some(list) => serde_json::from_value(list.clone())
            .map_err(|e| unsupported(journal, &format!("{FORCED_ENTRY}: {e}")))?,
        None => Vec::new(),
    };
    let (mut subject, row) = match kind_in(&meta) {
        Some(JobKind::Check) => {
            if query.is_some() {
                return Err(JobError::refused(format!(
                    "{} is a check journal: its runs need no --query",
                    journal.display()
                )));
            }
            check_subject(journal, parse(journal, meta)?, run)?
        }
        Some(JobKind::Harden) => harden_subject(journal, parse(journal, meta)?, run, query)?,
        Some(other) => return Err(unsupported(journal, &format!("a {} journal", other.noun()))),
        None => {
            return Err(unsupported(
                journal,
                &HardenMeta::deserialize(&meta).map_or_else(|e| e.to_string(), |_| String::new()),
            ))
        }
    };
    subject.app_hash = hash_at(subject.app_hash.take(), &forced, row);
    Ok(subject)
}

/// A replay refuses an app whose sources or PTX are not those the run ran with (or a journal
/// that recorded none), unless `--force` (see [`super::settings`]).
pub fn refuse_changed_app(
    journal: &Path,
    subject: &Subject,
    given: &GivenOptions,
    say: Say,
) -> Result<(), JobError> {
    let now = app_hash(&subject.target)?;
    let changed = hash_differences(subject.app_hash.as_ref(), &now);
    let consequence = "the run replayed would not be the one recorded";
    refuse_unless_forced(
        ("replay a run of", journal),
        &changed,
        (given, consequence),
        say,
    )
}

/// Points `subject` at its app's folder moved to `dir` (recorded absolute, as a new journal
/// records it); a built-in app has no folder to move.
pub fn move_app_dir(journal: &Path, subject: &mut Subject, dir: &Path) -> Result<(), JobError> {
    if subject.target.app_dir.is_none() {
        return Err(JobError::refused(format!(
            "{}: a journal of the built-in app {}, which takes no --app-dir",
            journal.display(),
            subject.target.app
        )));
    }
    subject.target.app_dir = Some(crate::places::absolute(dir)?);
    Ok(())
}

fn parse<M: DeserializeOwned>(journal: &Path, meta: serde_json::Value) -> Result<M, JobError> {
    serde_json::from_value(meta).map_err(|e| unsupported(journal, &e.to_string()))
}

/// The subject, and its row's index in the journal.
fn check_subject(journal: &Path, meta: CheckMeta, run: u64) -> Result<(Subject, usize), JobError> {
    let rows: Vec<RunRecord> = journal_rows(journal)?;
    let span = span(rows.iter().map(|r| r.run));
    let (row, recorded) = rows
        .into_iter()
        .enumerate()
        .find(|(_, r)| r.run == run)
        .ok_or_else(|| not_there(journal, &format!("run {run}"), &span))?;
    let subject = Subject {
        target: meta.target,
        env: meta.env,
        seed: meta.seed,
        provenance: meta.provenance,
        query: String::new(),
        fences: meta.fences,
        sites: meta.sites,
        recorded,
        app_hash: meta.app_hash,
        races: meta.races.is_some(),
    };
    Ok((subject, row))
}

fn harden_subject(
    journal: &Path,
    meta: HardenMeta,
    run: u64,
    query: Option<usize>,
) -> Result<(Subject, usize), JobError> {
    let Some(query) = query else {
        return Err(JobError::refused(format!(
            "{} is a harden journal: name the run's query with --query (the `query` column; \
             harden shows it as #Q)",
            journal.display()
        )));
    };
    let rows: Vec<HardenRow> = journal_rows(journal)?;
    let in_query: Vec<(usize, HardenRow)> = rows
        .into_iter()
        .enumerate()
        .filter(|(_, r)| r.query == query)
        .collect();
    let span = span(in_query.iter().map(|(_, r)| r.run));
    let (index, row) = in_query
        .into_iter()
        .find(|(_, r)| r.run == run)
        .ok_or_else(|| not_there(journal, &format!("run {run} of query {query}"), &span))?;
    let fences = row.fences.parse().map_err(|e: String| {
        JobError::refused(format!("{}: query {query}: {e}", journal.display()))
    })?;
    let subject = Subject {
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
        app_hash: meta.app_hash,
        // A hardening journals only runs that record no races (those that do guide the search
        // and are not journaled).
        races: false,
    };
    Ok((subject, index))
}

/// The journal's sidecar, as JSON; a missing journal or sidecar is bad input that says so.
fn read_sidecar(journal: &Path) -> Result<serde_json::Value, JobError> {
    if !journal.is_file() {
        return Err(JobError::refused(format!(
            "no journal at {}",
            journal.display()
        )));
    }
    if !meta_path(journal).is_file() {
        return Err(unsupported(journal, "no such file"));
    }
    read_meta(journal).map_err(JobError::BadJournal)
}

fn unsupported(journal: &Path, why: &str) -> JobError {
    JobError::refused(format!(
        "{} is not a check, campaign or harden journal ({}: {why}); replay supports those",
        journal.display(),
        meta_path(journal).display()
    ))
}

fn journal_rows<R: DeserializeOwned>(journal: &Path) -> Result<Vec<R>, JobError> {
    read_rows(journal).map_err(|e| match e {
        JournalError::BadRow { message, .. } => unsupported(journal, &message),
        other => JobError::BadJournal(other),
    })
}

/// `runs 0 to 199`, or `no runs`.
fn span(mut runs: impl Iterator<Item = u64>) -> String {
    match runs.next() {
        Some(first) => format!("runs {first} to {}", runs.last().unwrap_or(first)),
        None => "no runs".to_string(),
    }
}

fn not_there(journal: &Path, what: &str, span: &str) -> JobError {
    JobError::refused(format!(
        "{what} is not in {}: it records {span}",
        journal.display()
    ))
}

/// How far a replay on `backend` can be trusted to repeat the run.
pub fn determinism_note(backend: BackendKind) -> &'static str {
    match backend {
        BackendKind::Sim => {
            "the simulator replays a run exactly: its scheduler and memory model are reseeded \
             from the run's seed"
        }
        BackendKind::Cuda => {
            "on a GPU weak behaviour is not deterministic: the seed fixes the inputs, stressing \
             blocks, permutations and stress locations, not the hardware's interleaving, so a \
             replay may differ"
        }
    }
}
