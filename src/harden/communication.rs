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
//! The same recording completes the synchronisation afterwards ([`required_partners`]): with
//! the fences kept, a pair that a release/acquire pair would order but that is still unordered
//! gets the side it lacks, reported as required by the PTX model rather than seen failing.
//!
//! The runs are not journaled: their seeds derive from the hardening's, so a resumed hardening
//! records the same graph again.

use crate::backend::sim::{RaceSite, Strength};
use crate::check::driver::CheckError;
use crate::check::spec::{run_seed, Fences, RunRequest, SiteSummary};
use crate::check::Executor;
use crate::ptx::passes::fences::FenceKind;
use std::collections::{BTreeMap, BTreeSet};

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
    if !executor.records_races() {
        return Ok(None);
    }
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
        for c in log.conflicts.iter().filter(|c| !c.facts.same_cta) {
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

/// A fence the PTX model requires beside the kept ones, though no run failed without it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RequiredFence {
    pub site: usize,
    pub kind: FenceKind,
    /// `release` (after the first access of a pair) or `acquire` (after the read the
    /// communication went through).
    pub role: &'static str,
    /// The pair it orders, `file:line -> file:line`.
    pub orders: String,
}

/// Passes of [`required_partners`] at most (each adds the fences the last one's runs asked
/// for).
const PARTNER_PASSES: usize = 3;

/// Completes the synchronisation of `kept` (site → kind): records races in runs with those
/// fences, and for every pair that a release/acquire pair would order (the threads
/// communicated between the two accesses) but that is still unordered, adds the missing side:
/// a release fence after the first access, an acquire fence after the read the communication
/// went through, of GPU scope between CTAs and CTA scope inside one. Repeats with the new set
/// until nothing is missing. `None` when the executor records no races.
pub fn required_partners(
    executor: &mut dyn Executor,
    sites: &[SiteSummary],
    kept: &BTreeMap<usize, FenceKind>,
    env: crate::env::Environment,
    seed: u64,
    stress_iterations: u32,
) -> Result<Option<Vec<RequiredFence>>, CheckError> {
    if !executor.records_races() {
        return Ok(None);
    }
    let mut fences = kept.clone();
    let mut required: Vec<RequiredFence> = Vec::new();
    for pass in 0..PARTNER_PASSES {
        let mut added = false;
        for run in 0..COMMUNICATION_RUNS {
            let request = RunRequest {
                run,
                seed: run_seed(seed ^ 0x5a_17e5, pass as u64 * COMMUNICATION_RUNS + run),
                env,
                fences: Fences::Kinded(fences.clone()),
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
            for c in &log.conflicts {
                for need in missing_sides(c, sites) {
                    if upgrade(&mut fences, need.site, need.kind) {
                        required.retain(|r| r.site != need.site);
                        required.push(need);
                        added = true;
                    }
                }
            }
        }
        if !added {
            break;
        }
    }
    required.sort_by_key(|r| r.site);
    Ok(Some(required))
}

/// Puts a fence of at least `kind`'s scope at `site`; whether that changed anything.
fn upgrade(fences: &mut BTreeMap<usize, FenceKind>, site: usize, kind: FenceKind) -> bool {
    match fences.get(&site) {
        Some(k) if !k.is_cta_scoped() || kind.is_cta_scoped() => false,
        _ => {
            fences.insert(site, kind);
            true
        }
    }
}

/// The release and acquire fences a conflict still lacks, at candidate sites.
fn missing_sides(c: &crate::backend::sim::Conflict, sites: &[SiteSummary]) -> Vec<RequiredFence> {
    use crate::check::races::{classify, RaceClass};
    let Some((_, read)) = &c.via else {
        return Vec::new();
    };
    if !matches!(
        classify(c),
        Some(RaceClass::DataRace | RaceClass::FenceCanOrder)
    ) {
        return Vec::new();
    }
    let kind = if c.facts.same_cta {
        FenceKind::AcqRelCta
    } else {
        FenceKind::AcqRelGpu
    };
    let too_narrow = |s: Option<Strength>| match s {
        None => true,
        Some(Strength::Cta) => !c.facts.same_cta,
        Some(_) => false,
    };
    let place = |s: &RaceSite| match (&s.file, s.line) {
        (Some(file), Some(line)) => format!(
            "{}:{line}",
            std::path::Path::new(file)
                .file_name()
                .map_or(file.clone(), |n| n.to_string_lossy().into_owned())
        ),
        _ => format!("PTX line {}", s.ptx_line),
    };
    let orders = format!("{} -> {}", place(&c.first.site), place(&c.second.site));
    let mut out = Vec::new();
    let mut need = |at: &RaceSite, role: &'static str| {
        if let Some(site) = site_at(sites, at) {
            out.push(RequiredFence {
                site,
                kind,
                role,
                orders: orders.clone(),
            });
        }
    };
    if too_narrow(c.facts.first_release) {
        need(&c.first.site, "release");
    }
    if too_narrow(c.facts.second_acquire) {
        need(read, "acquire");
    }
    out
}

/// The candidate site at `at`'s source line.
fn site_at(sites: &[SiteSummary], at: &RaceSite) -> Option<usize> {
    let (file, line) = (at.file.as_ref()?, at.line?);
    sites
        .iter()
        .find(|s| s.file.as_ref() == Some(file) && s.line == Some(line))
        .map(|s| s.id)
}
