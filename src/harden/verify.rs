//! Checking harden's own patch before handing it out.
//!
//! The search inserts fences into the PTX; the patch writes them into the source, where the
//! statement structure decides where each goes. The two can part: a fence the patch left out, a
//! placement that does not compile, or one that no longer sits between the accesses it ordered.
//! So the app is rebuilt from the patched texts of its files (in memory: the user's files are
//! never written), compiled like any app, and run under the hardening's environment and stress,
//! stopping at the first run that does not pass. Its runs go in this process, with seeds of
//! their own (see [`patch_run_seed`]), each journaled ([`super::patch_journal`]) so that a
//! resumed hardening goes on from the last run made.

use crate::apps::PatchedFile;
use crate::backend::sim::RaceLog;
use crate::check::executor::Executor;
use crate::check::local::{open_target_backend, target_app, LocalExecutor};
use crate::check::outcome::Outcome;
use crate::check::races::run_races;
use crate::check::spec::{run_seed, Fences, RunRequest, Target};
use crate::env::Environment;
use crate::harden::patch_journal::{PatchJournal, PatchJournalHead, PatchRunRecord};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The default number of runs of the patched app.
pub const DEFAULT_PATCH_RUNS: u64 = 1000;

/// What the check of a patch asks for.
#[derive(Debug, Clone)]
pub struct PatchCheckPlan {
    /// Runs of the patched app; 0 checks nothing.
    pub runs: u64,
    pub env: Environment,
    /// The hardening's seed.
    pub seed: u64,
    /// Stress loop iterations of every run (the hardening's calibration).
    pub stress_iterations: u32,
    /// Where the runs are journaled (`None`: nowhere, each check starts at run 0).
    pub journal: Option<PathBuf>,
}

/// The seed of run `run` of a patch check of a hardening seeded with `seed`: a stream of its
/// own, apart from every query's (which use `run_seed(seed, query)` with small query numbers).
pub fn patch_run_seed(seed: u64, run: u64) -> u64 {
    run_seed(run_seed(seed, u64::MAX), run)
}

/// What came of checking a patch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum PatchCheck {
    /// There is no patch (no fence kept, or none could be written).
    NoPatch,
    /// The search was not stable: its fences are not a result to check.
    NotStable,
    /// Not asked for (`--patch-runs 0`).
    NotAsked,
    /// The app cannot be rebuilt from the patch here.
    NotPossible { why: String },
    /// The patched source does not compile (or its PTX does not load).
    DoesNotBuild { error: String },
    /// The patched app ran.
    Ran(PatchRuns),
}

/// The runs of a patched app.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatchRuns {
    /// Runs asked for, and runs made (fewer when one did not pass).
    pub asked: u64,
    pub made: u64,
    /// Of the runs made, those its journal held from an earlier check that was interrupted.
    #[serde(skip_serializing_if = "is_zero")]
    pub journaled: u64,
    /// The run that did not pass, if one did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<PatchFailure>,
    /// The races recorded (simulator, PTX model), each as its two places in the patched
    /// source (`file:line and file:line`, class); `None` where runs record no races.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub races: Option<Vec<String>>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A run of the patched app that did not pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatchFailure {
    pub run: u64,
    pub seed: u64,
    pub outcome: Outcome,
    pub reason: String,
}

impl PatchCheck {
    /// Whether the check found the patch wrong: it does not build, or a run did not pass.
    pub fn failed(&self) -> bool {
        match self {
            PatchCheck::DoesNotBuild { .. } => true,
            PatchCheck::Ran(runs) => runs.failure.is_some(),
            _ => false,
        }
    }
}

/// Builds the target's app from `patched` (each changed file with its new text) and runs it
/// as `plan` says, after the runs its journal already holds; `progress` hears of each run made
/// (runs made, runs asked).
pub fn check_patch(
    target: &Target,
    patched: &[PatchedFile],
    plan: PatchCheckPlan,
    progress: &mut dyn FnMut(u64, u64),
) -> PatchCheck {
    if patched.is_empty() {
        return PatchCheck::NoPatch;
    }
    if plan.runs == 0 {
        return PatchCheck::NotAsked;
    }
    let mut runs = match PatchRunsSoFar::open(patched, &plan) {
        Ok(runs) => runs,
        Err(e) => return PatchCheck::NotPossible { why: e },
    };
    let recorded = target.races_recordable();
    if runs.decided(plan.runs) {
        return PatchCheck::Ran(runs.finish(plan.runs, recorded));
    }
    let app = match target_app(target) {
        Ok(app) => app,
        Err(e) => return PatchCheck::NotPossible { why: e.to_string() },
    };
    let app = match app.patched(patched) {
        Ok(app) => app,
        Err(e) => return PatchCheck::NotPossible { why: e.to_string() },
    };
    let backend = match open_target_backend(target) {
        Ok(backend) => backend,
        Err(e) => return PatchCheck::NotPossible { why: e.to_string() },
    };
    // The executor compiles the app's module: a patch that does not build shows here, not as
    // a failed run.
    let executor = match LocalExecutor::with_app(target, backend, app) {
        Ok(executor) => executor,
        Err(e) => {
            return PatchCheck::DoesNotBuild {
                error: e.to_string(),
            }
        }
    };
    match run_patched(executor, target, &plan, &mut runs, progress) {
        Ok(()) => PatchCheck::Ran(runs.finish(plan.runs, recorded)),
        Err(e) => PatchCheck::NotPossible { why: e },
    }
}

/// The runs of a patch check made so far, and the journal the next ones go to.
struct PatchRunsSoFar {
    done: Vec<PatchRunRecord>,
    /// How many of `done` the journal held when it was opened.
    journaled: usize,
    journal: Option<PatchJournal>,
}

impl PatchRunsSoFar {
    /// The runs `plan`'s journal holds for `patched` (none without a journal).
    fn open(patched: &[PatchedFile], plan: &PatchCheckPlan) -> Result<PatchRunsSoFar, String> {
        let Some(path) = &plan.journal else {
            return Ok(PatchRunsSoFar {
                done: Vec::new(),
                journaled: 0,
                journal: None,
            });
        };
        let head = PatchJournalHead::new(patched, plan.env, plan.seed, plan.stress_iterations);
        let (journal, done) = PatchJournal::open(path, &head).map_err(|e| {
            format!(
                "cannot open the patch check's journal {}: {e}",
                path.display()
            )
        })?;
        Ok(PatchRunsSoFar {
            journaled: done.len(),
            done,
            journal: Some(journal),
        })
    }

    /// Whether the runs made decide the check of `asked` runs: one did not pass, or all ran.
    fn decided(&self, asked: u64) -> bool {
        self.done.len() as u64 >= asked || self.failure().is_some()
    }

    fn failure(&self) -> Option<&PatchRunRecord> {
        self.done.iter().find(|r| r.outcome != Outcome::Pass)
    }

    /// Keeps (and journals) one more run.
    fn push(&mut self, run: PatchRunRecord) -> Result<(), String> {
        if let Some(journal) = &mut self.journal {
            journal.append(&run).map_err(|e| {
                let path = journal.path().display();
                format!("cannot write the patch check's journal {path}: {e}")
            })?;
        }
        self.done.push(run);
        Ok(())
    }

    /// The check of `asked` runs: up to the first that did not pass; `recorded`: whether its
    /// runs record races.
    fn finish(self, asked: u64, recorded: bool) -> PatchRuns {
        let mut done = &self.done[..self.done.len().min(asked as usize)];
        let failed = done.iter().position(|r| r.outcome != Outcome::Pass);
        if let Some(i) = failed {
            done = &done[..=i];
        }
        let failure = failed.map(|i| PatchFailure {
            run: done[i].run,
            seed: done[i].seed,
            outcome: done[i].outcome,
            reason: done[i].reason.clone(),
        });
        let races: BTreeSet<String> = done.iter().flat_map(|r| r.races.clone()).collect();
        PatchRuns {
            asked,
            made: done.len() as u64,
            journaled: self.journaled.min(done.len()) as u64,
            failure,
            races: recorded.then(|| races.into_iter().collect()),
        }
    }
}

/// Runs the patched app after the runs made, until one does not pass or `plan.runs` are made.
fn run_patched(
    mut executor: LocalExecutor,
    target: &Target,
    plan: &PatchCheckPlan,
    runs: &mut PatchRunsSoFar,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), String> {
    let races = target.races_recordable();
    for run in runs.done.len() as u64..plan.runs {
        let request = patch_run_request(plan, run, races);
        let record = match executor.execute(&request) {
            Ok(record) => PatchRunRecord {
                run,
                seed: request.seed,
                outcome: record.outcome,
                reason: record.reason,
                races: record
                    .races
                    .as_ref()
                    .map_or_else(Vec::new, |log| races_seen(run, log)),
            },
            Err(e) => PatchRunRecord {
                run,
                seed: request.seed,
                outcome: Outcome::Crash,
                reason: e.to_string(),
                races: Vec::new(),
            },
        };
        let passed = record.outcome == Outcome::Pass;
        runs.push(record)?;
        progress(run + 1, plan.runs);
        if !passed {
            break;
        }
    }
    Ok(())
}

/// One run in this many of a patch check records races (where runs can): a run that records
/// races defers no load or RMW (see the simulator's README), so it cannot show load
/// buffering, and a patch check whose every run recorded races passed a patch that hung 1.6%
/// of its plain runs.
pub const RACE_RECORDING_EVERY: u64 = 4;

/// The request of run `run` of the patch check `plan`; `races`: whether the target's runs can
/// record races (then every [`RACE_RECORDING_EVERY`]th run does).
fn patch_run_request(plan: &PatchCheckPlan, run: u64, races: bool) -> RunRequest {
    RunRequest {
        run,
        seed: patch_run_seed(plan.seed, run),
        env: plan.env,
        fences: Fences::AsIs,
        stress_iterations: plan.stress_iterations,
        races: races && run.is_multiple_of(RACE_RECORDING_EVERY),
    }
}

/// A run's races as the patch check lists them: `first and second (class)`.
fn races_seen(run: u64, log: &RaceLog) -> Vec<String> {
    let races = run_races(run, log).races;
    let listed = races.iter().map(|r| {
        let (first, second) = (r.first.place(), r.second.place());
        format!("{first} and {second} ({})", r.class.describe())
    });
    listed.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QA: every run of a patch check recorded races, and a run that records races defers no
    /// load: a patch that hung 1.6% of its plain runs (by load buffering) passed 1000 of 1000.
    #[test]
    fn most_patch_runs_record_no_races_so_that_they_show_load_buffering() {
        let plan = PatchCheckPlan {
            runs: 8,
            env: "sys-str+".parse().unwrap(),
            seed: 1,
            stress_iterations: 1,
            journal: None,
        };
        let recording: Vec<u64> = (0..8)
            .filter(|&run| patch_run_request(&plan, run, true).races)
            .collect();
        assert_eq!(recording, [0, 4]);
        assert!((0..8).all(|run| !patch_run_request(&plan, run, false).races));
    }

    #[test]
    fn patch_runs_have_seeds_of_their_own() {
        let queries: BTreeSet<u64> = (0..64)
            .flat_map(|q| (0..64).map(move |r| run_seed(run_seed(1, q), r)))
            .collect();
        assert!((0..64).all(|r| !queries.contains(&patch_run_seed(1, r))));
        assert_ne!(patch_run_seed(1, 0), patch_run_seed(2, 0));
    }

    /// A check resumed from its journal ends as the journaled runs say: at the run that did
    /// not pass, or with fewer runs asked, before it.
    #[test]
    fn journaled_runs_end_the_check_at_the_first_that_did_not_pass() {
        let record = |run, outcome| PatchRunRecord {
            run,
            seed: 7 + run,
            outcome,
            reason: String::new(),
            races: vec![format!("race {run}")],
        };
        let so_far = || PatchRunsSoFar {
            done: vec![record(0, Outcome::Pass), record(1, Outcome::Fail)],
            journaled: 2,
            journal: None,
        };
        assert!(so_far().decided(10));
        let runs = so_far().finish(10, true);
        assert_eq!((runs.made, runs.journaled), (2, 2));
        assert_eq!(runs.failure.map(|f| (f.run, f.seed)), Some((1, 8)));
        assert_eq!(runs.races.unwrap(), ["race 0", "race 1"]);
        let fewer = so_far().finish(1, false);
        assert_eq!((fewer.made, fewer.journaled), (1, 1));
        assert!(fewer.failure.is_none() && fewer.races.is_none());
    }

    #[test]
    fn only_a_patch_that_does_not_build_or_fails_a_run_is_a_failed_check() {
        let ran = |failure: Option<PatchFailure>| {
            PatchCheck::Ran(PatchRuns {
                asked: 10,
                made: 10,
                journaled: 0,
                failure,
                races: None,
            })
        };
        let failure = PatchFailure {
            run: 3,
            seed: 9,
            outcome: Outcome::Fail,
            reason: "wrong sum".into(),
        };
        assert!(ran(Some(failure)).failed());
        assert!(PatchCheck::DoesNotBuild { error: "x".into() }.failed());
        assert!(!ran(None).failed());
        assert!(!PatchCheck::NoPatch.failed());
        assert!(!PatchCheck::NotStable.failed());
        assert!(!PatchCheck::NotAsked.failed());
        let why = "not built from a CUDA source".to_string();
        assert!(!PatchCheck::NotPossible { why }.failed());
    }
}
