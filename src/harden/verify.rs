//! Checking harden's own patch before handing it out.
//!
//! The search inserts fences into the PTX; the patch writes them into the source, where the
//! statement structure decides where each goes. The two can part: a fence the patch left out, a
//! placement that does not compile, or one that no longer sits between the accesses it ordered.
//! So the app is rebuilt from the patched texts of its files (in memory: the user's files are
//! never written), compiled like any app, and run under the hardening's environment and stress,
//! stopping at the first run that does not pass. Its runs go in this process, with seeds of
//! their own (see [`patch_run_seed`]), and are not journaled: a resumed hardening runs them anew.

use crate::apps::PatchedFile;
use crate::check::executor::Executor;
use crate::check::local::{open_target_backend, target_app, LocalExecutor};
use crate::check::outcome::Outcome;
use crate::check::races::run_races;
use crate::check::spec::{run_seed, Fences, RunRequest, Target};
use crate::env::Environment;
use serde::Serialize;
use std::collections::BTreeSet;

/// The default number of runs of the patched app.
pub const DEFAULT_PATCH_RUNS: u64 = 1000;

/// What the check of a patch asks for.
#[derive(Debug, Clone, Copy)]
pub struct PatchCheckPlan {
    /// Runs of the patched app; 0 checks nothing.
    pub runs: u64,
    pub env: Environment,
    /// The hardening's seed.
    pub seed: u64,
    /// Stress loop iterations of every run (the hardening's calibration).
    pub stress_iterations: u32,
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
    /// The run that did not pass, if one did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<PatchFailure>,
    /// The races recorded (simulator, PTX model), each as its two places in the patched
    /// source (`file:line and file:line`, class); `None` where runs record no races.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub races: Option<Vec<String>>,
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
/// as `plan` says; `progress` hears of each run made (runs made, runs asked).
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
    match LocalExecutor::with_app(target, backend, app) {
        Ok(executor) => PatchCheck::Ran(run_patched(executor, target, plan, progress)),
        Err(e) => PatchCheck::DoesNotBuild {
            error: e.to_string(),
        },
    }
}

/// Runs the patched app until a run does not pass or `plan.runs` are made.
fn run_patched(
    mut executor: LocalExecutor,
    target: &Target,
    plan: PatchCheckPlan,
    progress: &mut dyn FnMut(u64, u64),
) -> PatchRuns {
    let races = target.races_recordable();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut made = 0;
    let mut failure = None;
    for run in 0..plan.runs {
        let request = RunRequest {
            run,
            seed: patch_run_seed(plan.seed, run),
            env: plan.env,
            fences: Fences::AsIs,
            stress_iterations: plan.stress_iterations,
            races,
        };
        let record = match executor.execute(&request) {
            Ok(record) => record,
            Err(e) => {
                failure = Some(PatchFailure {
                    run,
                    seed: request.seed,
                    outcome: Outcome::Crash,
                    reason: e.to_string(),
                });
                break;
            }
        };
        made += 1;
        progress(made, plan.runs);
        if let Some(log) = &record.races {
            seen.extend(run_races(run, log).races.iter().map(|r| {
                let (first, second) = (r.first.place(), r.second.place());
                format!("{first} and {second} ({})", r.class.describe())
            }));
        }
        if record.outcome != Outcome::Pass {
            failure = Some(PatchFailure {
                run,
                seed: request.seed,
                outcome: record.outcome,
                reason: record.reason,
            });
            break;
        }
    }
    PatchRuns {
        asked: plan.runs,
        made,
        failure,
        races: races.then(|| seen.into_iter().collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_runs_have_seeds_of_their_own() {
        let queries: BTreeSet<u64> = (0..64)
            .flat_map(|q| (0..64).map(move |r| run_seed(run_seed(1, q), r)))
            .collect();
        assert!((0..64).all(|r| !queries.contains(&patch_run_seed(1, r))));
        assert_ne!(patch_run_seed(1, 0), patch_run_seed(2, 0));
    }

    #[test]
    fn only_a_patch_that_does_not_build_or_fails_a_run_is_a_failed_check() {
        let ran = |failure: Option<PatchFailure>| {
            PatchCheck::Ran(PatchRuns {
                asked: 10,
                made: 10,
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
