//! The check loop: run the app again and again until a run count or a duration is reached,
//! journaling every run, and sum up what came of it.
//!
//! A check is fully described by its [`CheckMeta`] (stored beside the journal), so
//! `--resume` needs nothing but the journal: it reads what was done, and goes on with the next run
//! number and the time left.

use super::calibrate::Calibration;
use super::executor::{ExecError, Executor};
use super::journal::{Journal, JournalError};
use super::outcome::{Outcome, RunRecord};
use super::races::RaceMode;
use super::spec::{run_seed, CalibrationRequest, Fences, RunRequest, SiteSummary, Target};
use crate::env::Environment;
use crate::stats::Rate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

/// Stress iterations used when calibration cannot measure the app (it hangs or crashes without
/// stress): a run still gets stress, and the journal records how much.
pub const FALLBACK_ITERATIONS: u32 = 64;

/// Runs of a check (and of a campaign cell) when neither a run count nor a duration is given.
pub const DEFAULT_RUNS: u64 = 1000;

/// When a check stops.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    /// After this many runs.
    Runs(u64),
    /// Once the runs' wall time adds up to this many seconds.
    Seconds(f64),
}

impl Stop {
    /// Whether a check with `tally` is done.
    pub fn reached(&self, tally: &Tally) -> bool {
        match *self {
            Stop::Runs(n) => tally.runs >= n,
            Stop::Seconds(s) => tally.elapsed_ms >= s * 1e3,
        }
    }

    /// Progress towards the stop in [0, 1].
    pub fn fraction(&self, tally: &Tally) -> f64 {
        let f = match *self {
            Stop::Runs(0) => 1.0,
            Stop::Runs(n) => tally.runs as f64 / n as f64,
            Stop::Seconds(s) => tally.elapsed_ms / (s * 1e3),
        };
        f.clamp(0.0, 1.0)
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Stop::Runs(n) => write!(f, "{n} runs"),
            Stop::Seconds(s) => write!(f, "{:?}", Duration::from_secs_f64(s)),
        }
    }
}

/// Everything a check is, stored beside its journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckMeta {
    pub tool_version: String,
    /// When the check started (UTC, RFC 3339).
    pub started: String,
    pub target: Target,
    pub env: Environment,
    pub fences: Fences,
    /// The app's candidate sites when `fences` names sites by id (absent for `as-is`, and in
    /// journals from before sites were recorded): a resume or replay checks them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteSummary>,
    /// The check's seed; run `r` has seed [`run_seed`]`(seed, r)`.
    pub seed: u64,
    pub stop: Stop,
    /// The stress iterations every run uses, and how they were found.
    #[serde(flatten)]
    pub stress: CalibratedStress,
    /// What ran the check (the simulator says it is one).
    pub provenance: String,
    /// Where the stress profile came from.
    pub profile_source: String,
    /// `check --races`: every run records its races (simulator) into the races journal
    /// beside the check's ([`super::races`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub races: Option<RaceMode>,
    /// The app's sources and PTX, hashed (absent in journals from before they were recorded):
    /// a resume or replay compares them (see [`crate::job::settings`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_hash: Option<crate::apps::hash::AppHash>,
}

/// Counts of a series of runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tally {
    pub runs: u64,
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Sum of the runs' wall time.
    pub elapsed_ms: f64,
    /// The first run that did not pass: run number and reason.
    pub first_error: Option<(u64, Outcome, String)>,
}

impl Tally {
    pub fn of(records: &[RunRecord]) -> Tally {
        let mut tally = Tally::default();
        for r in records {
            tally.add(r);
        }
        tally
    }

    pub fn add(&mut self, record: &RunRecord) {
        self.runs += 1;
        *self.outcomes.entry(record.outcome).or_default() += 1;
        self.elapsed_ms += record.wall_ms;
        if record.outcome.is_error() && self.first_error.is_none() {
            self.first_error = Some((record.run, record.outcome, record.reason.clone()));
        }
    }

    /// `fail at run 3: <the whole reason>`, or `no error recorded`; the reason is never cut, so
    /// a check kernel's words after the code stay readable.
    pub fn first_error_text(&self) -> String {
        match &self.first_error {
            Some((run, outcome, reason)) => format!("{outcome} at run {run}: {reason}"),
            None => "no error recorded".to_string(),
        }
    }

    pub fn count(&self, outcome: Outcome) -> u64 {
        self.outcomes.get(&outcome).copied().unwrap_or(0)
    }

    /// Runs that did not pass.
    pub fn errors(&self) -> u64 {
        self.runs - self.count(Outcome::Pass)
    }

    /// The error rate (failures, timeouts and crashes) with its 95% Wilson interval.
    pub fn error_rate(&self) -> Rate {
        Rate::new(self.errors(), self.runs)
    }
}

/// A check that cannot go on.
#[derive(Debug, Error)]
pub enum CheckError {
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("--races needs the simulator's PTX model: {0} records no races")]
    NoRaces(String),
    #[error("cannot write the races journal: {0}")]
    RacesJournal(std::io::Error),
}

/// The stress iterations every run of a check or hardening uses, and how they were found; the
/// sidecars of both hold these three keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibratedStress {
    pub stress_iterations: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// Set when calibration failed and [`FALLBACK_ITERATIONS`] are used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_error: Option<String>,
}

impl CalibratedStress {
    /// No stress: an environment without stressing blocks.
    pub const NONE: CalibratedStress = CalibratedStress {
        stress_iterations: 0,
        calibration: None,
        calibration_error: None,
    };
}

/// Calibrates stress for `env` (when it stresses), falling back to [`FALLBACK_ITERATIONS`] when
/// the app cannot be measured, and saying why.
pub fn calibrate_stress(
    executor: &mut dyn Executor,
    env: Environment,
    fences: &Fences,
    seed: u64,
    measured: &mut dyn FnMut(u32, f64),
) -> Result<CalibratedStress, ExecError> {
    if !env.stresses() {
        return Ok(CalibratedStress::NONE);
    }
    let request = CalibrationRequest {
        env,
        fences: fences.clone(),
        seed,
    };
    match executor.calibrate(&request, measured) {
        Ok(c) => Ok(CalibratedStress {
            stress_iterations: c.iterations,
            calibration: Some(c),
            calibration_error: None,
        }),
        Err(ExecError::Calibration(e)) => Ok(CalibratedStress {
            stress_iterations: FALLBACK_ITERATIONS,
            calibration: None,
            calibration_error: Some(e),
        }),
        Err(e) => Err(e),
    }
}

/// Runs the check that `meta` describes from where `done` ends, appending every run to
/// `journal`, calling `progress` after each; `interrupted` is polled between runs.
pub fn run_check(
    executor: &mut dyn Executor,
    journal: &mut Journal<RunRecord>,
    meta: &CheckMeta,
    done: &[RunRecord],
    progress: &mut dyn FnMut(&RunRecord, &Tally),
    interrupted: &dyn Fn() -> bool,
) -> Result<Tally, CheckError> {
    let mut tally = Tally::of(done);
    let mut next = done.iter().map(|r| r.run + 1).max().unwrap_or(0);
    while !meta.stop.reached(&tally) && !interrupted() {
        let request = RunRequest {
            run: next,
            seed: run_seed(meta.seed, next),
            env: meta.env,
            fences: meta.fences.clone(),
            stress_iterations: meta.stress.stress_iterations,
            races: meta.races.is_some(),
        };
        let mut record = executor.execute(&request)?;
        if meta.races.is_some() {
            journal_races(journal.path(), &mut record, &meta.provenance)?;
        }
        journal.append(&record)?;
        tally.add(&record);
        progress(&record, &tally);
        next += 1;
    }
    Ok(tally)
}

/// Appends the races `record` carries to the races journal beside `journal` (before the run's
/// row, so that every run the journal has has its races). A run that crashed or timed out may
/// carry none: it counts with no races.
fn journal_races(
    journal: &std::path::Path,
    record: &mut RunRecord,
    provenance: &str,
) -> Result<(), CheckError> {
    let log = match record.races.take() {
        Some(log) => log,
        None if record.outcome.needs_restart() => Default::default(),
        None => return Err(CheckError::NoRaces(provenance.to_string())),
    };
    let run = super::races::run_races(record.run, &log);
    super::races::append_run(journal, &run).map_err(CheckError::RacesJournal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::executor::{MockExecutor, MOCK_CALIBRATION_ERROR};
    use crate::check::journal::read_rows;

    #[test]
    fn harden_does_not_cut_failure_reasons() {
        let reason = format!(
            "check kernel k reported code 1; status[1..]: {}",
            "7, ".repeat(80)
        );
        let mut record = RunRecord::for_test(3, Outcome::Fail);
        record.reason = reason.clone();
        let tally = Tally::of(&[RunRecord::for_test(2, Outcome::Pass), record]);
        assert_eq!(tally.first_error_text(), format!("fail at run 3: {reason}"));
        assert_eq!(Tally::default().first_error_text(), "no error recorded");
    }

    /// Fails every third run (10 ms each); keeps the run numbers it is asked for.
    fn mock() -> MockExecutor<Vec<u64>> {
        MockExecutor {
            state: Vec::new(),
            answer: |runs, r| {
                runs.push(r.run);
                let outcome = if r.run % 3 == 2 {
                    Outcome::Fail
                } else {
                    Outcome::Pass
                };
                RunRecord {
                    kernel_us: 1.0,
                    wall_ms: 10.0,
                    ..RunRecord::unmeasured(r, outcome)
                }
            },
        }
    }

    /// A new check journaled at `j.csv` in a temporary folder (kept while the folder lives).
    fn new_check(stop: Stop) -> (tempfile::TempDir, CheckMeta, Journal<RunRecord>) {
        let dir = tempfile::tempdir().unwrap();
        let meta = meta(stop);
        let journal = Journal::create(&dir.path().join("j.csv"), &meta).unwrap();
        (dir, meta, journal)
    }

    fn meta(stop: Stop) -> CheckMeta {
        CheckMeta {
            tool_version: "test".into(),
            started: "now".into(),
            target: crate::check::spec::test_target(),
            env: "sys-str+".parse().unwrap(),
            fences: Fences::AsIs,
            sites: Vec::new(),
            seed: 5,
            stop,
            stress: CalibratedStress {
                stress_iterations: 7,
                ..CalibratedStress::NONE
            },
            provenance: "mock".into(),
            profile_source: "test".into(),
            races: None,
            app_hash: None,
        }
    }

    #[test]
    fn a_resumed_check_goes_on_from_the_next_run_and_loses_nothing() {
        let (dir, meta, mut journal) = new_check(Stop::Runs(10));
        let path = dir.path().join("j.csv");
        let mut mock = mock();
        let stop_after_4 = |_: &RunRecord, t: &Tally| assert!(t.runs <= 4);
        let runs_so_far = std::cell::Cell::new(0);
        let interrupted = || {
            runs_so_far.set(runs_so_far.get() + 1);
            runs_so_far.get() > 4
        };
        run_check(
            &mut mock,
            &mut journal,
            &meta,
            &[],
            &mut { stop_after_4 },
            &interrupted,
        )
        .unwrap();
        drop(journal);
        let (mut journal, meta, done) = Journal::resume::<CheckMeta>(&path).unwrap();
        assert_eq!(done.len(), 4);
        let tally = run_check(
            &mut mock,
            &mut journal,
            &meta,
            &done,
            &mut |_, _| {},
            &|| false,
        )
        .unwrap();
        assert_eq!(mock.state, (0..10).collect::<Vec<_>>());
        assert_eq!((tally.runs, tally.errors()), (10, 3));
        let rows: Vec<RunRecord> = read_rows(&path).unwrap();
        let numbers: Vec<u64> = rows.iter().map(|r| r.run).collect();
        assert_eq!(numbers, (0..10).collect::<Vec<_>>());
        assert!(rows.iter().all(|r| r.seed == run_seed(5, r.run)));
        assert!(rows.iter().all(|r| r.stress_iterations == 7));
    }

    #[test]
    fn a_timed_check_stops_when_the_runs_add_up_to_its_duration() {
        let (_dir, meta, mut journal) = new_check(Stop::Seconds(0.095));
        let mut mock = mock();
        let tally = run_check(&mut mock, &mut journal, &meta, &[], &mut |_, _| {}, &|| {
            false
        })
        .unwrap();
        assert_eq!(tally.runs, 10); // 10 ms each
        assert!(meta.stop.reached(&tally));
    }

    #[test]
    fn calibration_that_fails_falls_back_and_says_why() {
        let mut mock = mock();
        let env = "sys-str-".parse().unwrap();
        let fallback = calibrate_stress(&mut mock, env, &Fences::AsIs, 1, &mut |_, _| {}).unwrap();
        let why = Some(MOCK_CALIBRATION_ERROR.to_string());
        assert_eq!(
            fallback,
            CalibratedStress {
                stress_iterations: FALLBACK_ITERATIONS,
                calibration: None,
                calibration_error: why
            }
        );
        let none = calibrate_stress(
            &mut mock,
            "no-str+".parse().unwrap(),
            &Fences::AsIs,
            1,
            &mut |_, _| {},
        );
        assert_eq!(none.unwrap(), CalibratedStress::NONE);
    }

    #[test]
    fn the_tally_counts_every_outcome_kind_as_an_error_but_pass() {
        let mut record = mock()
            .execute(&RunRequest {
                run: 0,
                seed: 0,
                env: "no-str-".parse().unwrap(),
                fences: Fences::AsIs,
                stress_iterations: 0,
                races: false,
            })
            .unwrap();
        let mut records = Vec::new();
        for outcome in Outcome::ALL {
            record.outcome = outcome;
            records.push(record.clone());
        }
        let tally = Tally::of(&records);
        assert_eq!((tally.runs, tally.errors()), (4, 3));
        assert_eq!(tally.first_error.as_ref().map(|e| e.1), Some(Outcome::Fail));
        assert_eq!(tally.error_rate().count, 3);
    }
}
