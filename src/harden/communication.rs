//! Which fence sites talk to other CTAs: the scope floor of `harden`'s kind minimisation.
//!
//! A fence orders its thread's accesses for the threads its scope contains. Whether a weaker
//! scope suffices cannot be left to runs alone: a `.cta` fence between two CTAs orders nothing
//! under PTX, yet on the simulator (and very likely on today's GPUs) nothing may ever fail
//! because of it. So before kinds are minimised, a few runs of the app without inserted fences
//! record races (simulator, [`crate::backend::sim::RaceLog`]): every site whose accesses
//! communicated with another CTA (a morally strong read of a write from another CTA), or
//! conflicted with one unordered, keeps at least GPU scope, whatever the runs say.
//!
//! The runs are not journaled: their seeds derive from the hardening's, so a resumed hardening
//! records the same graph again.

use crate::check::driver::CheckError;
use crate::check::spec::{run_seed, Fences, RunRequest, SiteSummary};
use crate::check::Executor;
use std::collections::BTreeSet;

/// Runs recorded for the graph.
pub const COMMUNICATION_RUNS: u64 = 20;

/// What the recorded runs say about the candidate sites.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CrossCta {
    /// Sites whose accesses met another CTA's: no fence there may be of CTA scope.
    pub sites: BTreeSet<usize>,
    /// Runs recorded.
    pub runs: u64,
}

/// Records races in [`COMMUNICATION_RUNS`] runs of the app without inserted fences (seeds
/// from `seed`, environment `env` as the hardening's) and returns the sites of `sites`
/// whose source lines met another CTA; `None` when the executor records no races (a GPU).
pub fn cross_cta_sites(
    executor: &mut dyn Executor,
    sites: &[SiteSummary],
    env: crate::env::Environment,
    seed: u64,
    stress_iterations: u32,
) -> Result<Option<CrossCta>, CheckError> {
    let mut lines: BTreeSet<(String, u32)> = BTreeSet::new();
    let mut recorded = 0;
    for run in 0..COMMUNICATION_RUNS {
        let request = RunRequest {
            run,
            seed: run_seed(seed ^ 0xc0_11ec7, run),
            env,
            fences: Fences::Sites(Vec::new()),
            stress_iterations,
            races: true,
        };
        let record = executor.execute(&request)?;
        let Some(log) = record.races else {
            if record.outcome.needs_restart() {
                continue;
            }
            return Ok(None);
        };
        recorded += 1;
        let mut note = |site: &crate::backend::sim::RaceSite| {
            if let (Some(file), Some(line)) = (&site.file, site.line) {
                lines.insert((file.clone(), line));
            }
        };
        for c in log.communication.iter().filter(|c| !c.same_cta) {
            note(&c.writer);
            note(&c.reader);
        }
        for c in log.conflicts.iter().filter(|c| !c.same_cta) {
            note(&c.first.site);
            note(&c.second.site);
        }
    }
    let meets = |s: &SiteSummary| match (&s.file, s.line) {
        (Some(file), Some(line)) => lines.contains(&(file.clone(), line)),
        _ => false,
    };
    Ok(Some(CrossCta {
        sites: sites.iter().filter(|s| meets(s)).map(|s| s.id).collect(),
        runs: recorded,
    }))
}
