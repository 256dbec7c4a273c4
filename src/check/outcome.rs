//! What one run of an application under test came to, as the journal records it.

use super::spec::RunRequest;
use crate::env::Environment;
use serde::{Deserialize, Serialize};

/// The outcome of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The post-condition held.
    Pass,
    /// The post-condition did not hold: a weak-memory bug (or another bug) showed.
    Fail,
    /// A kernel did not finish in time (the deadline on a GPU, the instruction budget on the
    /// simulator), or the worker stopped answering.
    Timeout,
    /// A CUDA error (a fault, a failed launch) or a worker that died.
    Crash,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::Pass,
        Outcome::Fail,
        Outcome::Timeout,
        Outcome::Crash,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Timeout => "timeout",
            Outcome::Crash => "crash",
        }
    }

    /// Anything but a pass counts as an error of the run (the paper's "errors").
    pub fn is_error(self) -> bool {
        self != Outcome::Pass
    }

    /// After a timeout or a crash the worker's device state cannot be trusted: restart it.
    pub fn needs_restart(self) -> bool {
        matches!(self, Outcome::Timeout | Outcome::Crash)
    }
}

display_by_name!(Outcome, name);
parse_by_name!(Outcome, name, String, |s| format!("unknown outcome '{s}'"));

/// One run, as the journal records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Run number, from 0.
    pub run: u64,
    /// The run's seed: inputs, stress blocks, permutations, scratchpad locations and the
    /// simulator's scheduler all derive from it, so the run can be replayed.
    pub seed: u64,
    pub env: Environment,
    /// Stressing blocks of each app launch, space-separated (empty without stress).
    pub stress_blocks: String,
    pub stress_iterations: u32,
    pub outcome: Outcome,
    /// Why the run failed, timed out or crashed (empty for a pass).
    pub reason: String,
    /// Kernel time of the app launches in microseconds (CUDA events on a GPU; interpretation
    /// wall time on the simulator).
    pub kernel_us: f64,
    /// Wall time of the whole run in milliseconds, set-up and check included.
    pub wall_ms: f64,
    /// What the simulator recorded of races, when the request asked for them (not a column of
    /// the journal: `check --races` keeps its own, see [`super::races`]).
    #[serde(skip)]
    pub races: Option<crate::backend::sim::RaceLog>,
}

impl RunRecord {
    /// A run of `request` that ended in `outcome` with nothing measured: no stress blocks, no
    /// reason, no time (a worker that never answered fills in what it knows; unit tests' mock
    /// executors what they test).
    pub fn unmeasured(request: &RunRequest, outcome: Outcome) -> RunRecord {
        RunRecord {
            run: request.run,
            seed: request.seed,
            env: request.env,
            stress_blocks: String::new(),
            stress_iterations: request.stress_iterations,
            outcome,
            reason: String::new(),
            kernel_us: 0.0,
            wall_ms: 0.0,
            races: None,
        }
    }

    /// A run of the unit tests: run `run` with that seed under no-str-, taking 1 ms.
    #[cfg(test)]
    pub(crate) fn for_test(run: u64, outcome: Outcome) -> RunRecord {
        RunRecord {
            run,
            seed: run,
            env: "no-str-".parse().unwrap(),
            stress_blocks: String::new(),
            stress_iterations: 0,
            outcome,
            reason: String::new(),
            kernel_us: 0.0,
            wall_ms: 1.0,
            races: None,
        }
    }
}
