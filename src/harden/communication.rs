//! What runs recording races tell `harden` beyond what fails: the scope floor of kind
//! minimisation, the races that guide the search, the partners PTX requires, and the races no
//! fence can order.
//!
//! A fence orders its thread's accesses for the threads its scope contains, and a pair of
//! accesses of two threads that communicated between them is ordered by a release pattern on
//! the first thread's side and an acquire pattern on the second's, of a scope with both (PTX
//! ISA, "Causality Order"). Runs alone cannot show all of it: a `.cta` fence between two CTAs,
//! or a missing acquire after a spin, may never make a run fail on the simulator (or on
//! today's GPUs) and still leave the program racy under PTX. So a few runs record races
//! (simulator, [`crate::backend::sim::RaceLog`]; a [`Recorder`]), and:
//!
//! - [`cross_cta_sites`]: every site whose accesses communicated with another CTA (a morally
//!   strong read of a write from another CTA), or conflicted with one unordered, keeps at least
//!   GPU scope, whatever the runs say; so does the point (a barrier, an acquire) where an
//!   access reached a third thread that passed it on to another CTA;
//! - [`OrderablePairs`]: the pairs that fences can order (a data race or an unsynchronised
//!   pair between threads that communicated between the two accesses) left unordered with a
//!   fence set; the search keeps a fence whose removal adds one
//!   ([`super::algorithm::FenceChecker::unordered_without`]) and asks about the sites in them
//!   first;
//! - [`required_partners`]: with the fences kept, a pair still unordered gets the side it
//!   lacks, reported as required by the PTX model rather than seen failing (a relayed pair's
//!   release goes where its first access reached the relaying thread);
//! - [`unorderable_races`]: pairs no fence can order are reported with their advice, never
//!   "fixed" with fences.
//!
//! The runs are not journaled: their seeds derive from the hardening's, so a resumed hardening
//! records the same again.

use crate::backend::sim::{Conflict, RaceLog, RaceSite};
use crate::check::driver::CheckError;
use crate::check::outcome::Outcome;
use crate::check::races::{classify, fences_cannot_order, lack, run_races, site_place, RaceClass};
use crate::check::spec::{run_seed, Fences, RunRequest, SiteSummary};
use crate::check::Executor;
use crate::ptx::passes::fences::FenceKind;
use std::collections::{BTreeMap, BTreeSet};

/// Runs per recording.
pub const COMMUNICATION_RUNS: u64 = 20;

/// Records races in runs of one app: the hardening's environment, stress and seed.
pub struct Recorder<'a> {
    pub executor: &'a mut dyn Executor,
    pub env: crate::env::Environment,
    pub seed: u64,
    pub stress_iterations: u32,
}

/// The seed streams of the recordings, one per purpose.
const CROSS_CTA_STREAM: u64 = 0xc0_11ec7;
const PARTNER_STREAM: u64 = 0x5a_17e5;
/// The race checks of the search: every fence set with the same seeds, so that two sets'
/// recordings differ by their fences rather than by their schedules.
pub const GUIDE_STREAM: u64 = 0x6d_1de5;

impl Recorder<'_> {
    /// Whether the executor records races at all.
    pub fn records(&self) -> bool {
        self.executor.records_races()
    }

    /// The race logs of [`COMMUNICATION_RUNS`] runs with `fences`, seeded from `stream` (runs
    /// `first..`); `None` when the executor brings none back. Runs that need a restart (the
    /// simulator's budget ran out) are left out.
    pub fn record(
        &mut self,
        fences: &Fences,
        stream: u64,
        first: u64,
    ) -> Result<Option<Vec<RaceLog>>, CheckError> {
        let runs = self.record_with_outcomes(fences, stream, first)?;
        Ok(runs.map(|runs| runs.into_iter().map(|(_, log)| log).collect()))
    }

    /// As [`Recorder::record`], each log with its run's outcome.
    pub fn record_with_outcomes(
        &mut self,
        fences: &Fences,
        stream: u64,
        first: u64,
    ) -> Result<Option<Vec<(Outcome, RaceLog)>>, CheckError> {
        if !self.records() {
            return Ok(None);
        }
        let requests: Vec<RunRequest> = (first..first + COMMUNICATION_RUNS)
            .map(|run| RunRequest {
                run,
                seed: run_seed(self.seed ^ stream, run),
                env: self.env,
                fences: fences.clone(),
                stress_iterations: self.stress_iterations,
                races: true,
            })
            .collect();
        let mut logs = Vec::new();
        for record in self.executor.execute_many(&requests) {
            let record = record?;
            match record.races {
                Some(log) => logs.push((record.outcome, log)),
                None if record.outcome.needs_restart() => {}
                None => return Ok(None),
            }
        }
        Ok(Some(logs))
    }
}

/// `fences` (site → kind) as the release/acquire fences of their scopes, for recording which
/// pairs release and acquire patterns order. A sequentially consistent fence also orders by
/// the order in which the fences of a run happen to execute (fence-SC order), which orders a
/// pair in most schedules and not in the rare one where the writer's fence runs late: the
/// pairs that fences can order need a release between the first access and the write the
/// other thread reads, and an acquire after that read, which is what the recording then sees.
pub fn as_release_acquire(fences: impl IntoIterator<Item = (usize, FenceKind)>) -> Fences {
    let release_acquire = |kind: FenceKind| match kind.is_cta_scoped() {
        true => FenceKind::AcqRelCta,
        false => FenceKind::AcqRelGpu,
    };
    Fences::Kinded(
        fences
            .into_iter()
            .map(|(site, kind)| (site, release_acquire(kind)))
            .collect(),
    )
}

/// What the recorded runs say about the candidate sites.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CrossCta {
    /// Sites whose accesses met another CTA's: no fence there may be of CTA scope.
    pub sites: BTreeSet<usize>,
    /// Runs recorded.
    pub runs: u64,
}

/// Records races in runs of the app without inserted fences and returns the sites of `sites`
/// whose source lines met another CTA; `None` when the executor records no races (a GPU).
pub fn cross_cta_sites(
    recorder: &mut Recorder,
    sites: &[SiteSummary],
) -> Result<Option<CrossCta>, CheckError> {
    let Some(logs) = recorder.record(&Fences::Sites(Vec::new()), CROSS_CTA_STREAM, 0)? else {
        return Ok(None);
    };
    let mut met: BTreeSet<usize> = BTreeSet::new();
    for log in &logs {
        for c in log.communication.iter().filter(|c| !c.same_cta) {
            met.extend(sites_at(sites, &c.writer));
            met.extend(sites_at(sites, &c.reader));
        }
        for c in log.conflicts.iter().filter(|c| !c.facts.same_cta) {
            // A forwarded pair's first access is released to the thread that read its
            // thread's write, and its second acquired from the last forwarder: each needs
            // another CTA's scope only when that link crosses CTAs (PTX's causality order is
            // transitive: a .cta release read in its CTA, then passed on by a .gpu one, orders
            // the access for the far CTA).
            let (first, second) = match &c.forward {
                Some(_) => (!c.release_in_cta(), !c.acquire_in_cta()),
                None => (true, true),
            };
            if first {
                met.extend(sites_at(sites, &c.first.site));
            }
            if second {
                met.extend(sites_at(sites, &c.second.site));
            }
        }
        // Where a pair's first access reached a thread that then wrote to another CTA: the
        // release after that point has the other CTA to reach.
        for c in log.conflicts.iter() {
            if let (Some(relay), false) = (&c.relay, c.facts.communication_in_cta) {
                met.extend(sites_at(sites, relay));
            }
            // Likewise where a thread read the first thread's write and passed it on.
            if let (Some(forward), false) = (&c.forward, c.facts.communication_in_cta) {
                met.extend(sites_at(sites, &forward.read));
            }
        }
    }
    Ok(Some(CrossCta {
        sites: met,
        runs: logs.len() as u64,
    }))
}

/// Whether fences can order `c`: a data race or an unsynchronised pair whose threads
/// communicated between the two accesses (so a release pattern after the first and an acquire
/// pattern after the read the communication went through would order them).
fn fence_orderable(c: &Conflict) -> bool {
    c.via.is_some()
        && matches!(
            classify(c),
            Some(RaceClass::DataRace | RaceClass::FenceCanOrder)
        )
}

/// `file:line -> file:line` of a pair.
fn pair_name(c: &Conflict) -> String {
    format!(
        "{} -> {}",
        site_place(&c.first.site),
        site_place(&c.second.site)
    )
}

/// The pairs that fences can order left unordered in some recorded run, by name, with the
/// sites of their accesses and of the communication between them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderablePairs {
    pub pairs: BTreeSet<String>,
    pub sites: BTreeSet<usize>,
}

impl OrderablePairs {
    /// The orderable pairs of `logs`, with the candidate sites of `sites` they touch.
    pub fn of<'a>(
        logs: impl IntoIterator<Item = &'a RaceLog>,
        sites: &[SiteSummary],
    ) -> OrderablePairs {
        let mut out = OrderablePairs::default();
        for c in logs.into_iter().flat_map(|l| &l.conflicts) {
            if !fence_orderable(c) {
                continue;
            }
            out.pairs.insert(pair_name(c));
            let forward = (c.forward.iter()).flat_map(|f| f.write.iter().chain([&f.read]));
            let via = (c.via.iter().flat_map(|(w, r)| [w, r]))
                .chain(&c.relay)
                .chain(forward);
            for at in [&c.first.site, &c.second.site].into_iter().chain(via) {
                out.sites.extend(sites_at(sites, at));
            }
        }
        out
    }

    /// A pair unordered here and not in `before`.
    pub fn new_since(&self, before: &OrderablePairs) -> Option<String> {
        self.pairs.difference(&before.pairs).next().cloned()
    }
}

/// A fence the PTX model requires beside the kept ones, though no run failed without it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RequiredFence {
    pub site: usize,
    pub kind: FenceKind,
    /// `release` (after the first access of a pair), `acquire` (after the read the
    /// communication went through) or `forwarding` (after a third thread's read of the first
    /// thread's write, before its own write that the second thread reads).
    pub role: &'static str,
    /// The pair it orders, `file:line -> file:line`.
    pub orders: String,
}

/// A pair no fence can order, recorded with the final fences, and what would order it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnorderableRace {
    /// `file:line -> file:line`.
    pub pair: String,
    pub advice: String,
}

/// Passes of [`required_partners`] at most (each adds the fences the last one's runs asked
/// for).
const PARTNER_PASSES: usize = 3;

/// What [`required_partners`] found: the fences added, and the races of the last pass's runs
/// that no fence can order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    pub required: Vec<RequiredFence>,
    pub unorderable: Vec<UnorderableRace>,
    /// Set when the release/acquire stand-ins for the kept fences failed in some of the
    /// recorded runs, whose pairs were then left out.
    pub stand_ins_failed: Option<StandInsFailed>,
}

/// Why a recording of release/acquire stand-ins counts only the runs that passed: with the
/// stand-ins in place of a fence set, some runs failed. The app needs what only the set's own
/// kinds give (`fence.sc` order: a flag handshake, Peterson's lock, a work-stealing deque's
/// owner and thief); with the stand-ins that order breaks, and the failing runs' pairs are those
/// of the broken algorithm (two threads taking one task, critical sections overlapping), which
/// the set's own fences are there to forbid, not pairs its fences leave unordered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StandInsFailed {
    /// The fence set whose stand-ins failed.
    pub fences: Vec<usize>,
    /// Its recorded runs that failed, of `runs`.
    pub failed: u64,
    pub runs: u64,
}

/// Completes the synchronisation of `kept` (site → kind): records races in runs with those
/// fences, and for every pair that a release/acquire pair would order (the threads
/// communicated between the two accesses) but that is still unordered, adds the missing side:
/// a release fence after the first access, an acquire fence after the read the communication
/// went through, of GPU scope between CTAs and CTA scope inside one. Repeats with the new set
/// until nothing is missing. `None` when the executor records no races.
///
/// The runs record release/acquire stand-ins ([`as_release_acquire`]) for the fences; where
/// the stand-ins are weaker than the fences and a run fails with them, that run's pairs are not
/// asked ([`StandInsFailed`]): a partner is required only by a pair of a run that passed.
pub fn required_partners(
    recorder: &mut Recorder,
    sites: &[SiteSummary],
    kept: &BTreeMap<usize, FenceKind>,
) -> Result<Option<Completion>, CheckError> {
    let mut fences = kept.clone();
    let mut required: Vec<RequiredFence> = Vec::new();
    let mut last = Vec::new();
    let mut failed = StandInsFailed {
        fences: kept.keys().copied().collect(),
        failed: 0,
        runs: 0,
    };
    for pass in 0..PARTNER_PASSES {
        let first = pass as u64 * COMMUNICATION_RUNS;
        let kinded = as_release_acquire(fences.clone());
        let Some(runs) = recorder.record_with_outcomes(&kinded, PARTNER_STREAM, first)? else {
            return Ok(None);
        };
        let weaker = kinded != Fences::Kinded(fences.clone());
        let asked = |(outcome, _): &&(Outcome, RaceLog)| !(weaker && outcome.is_error());
        failed.runs += runs.len() as u64;
        failed.failed += runs.iter().filter(|run| !asked(run)).count() as u64;
        let mut added = false;
        for c in runs.iter().filter(asked).flat_map(|(_, l)| &l.conflicts) {
            for need in missing_sides(c, sites) {
                if upgrade(&mut fences, need.site, need.kind) {
                    required.retain(|r| r.site != need.site);
                    required.push(need);
                    added = true;
                }
            }
        }
        last = runs.into_iter().map(|(_, log)| log).collect();
        if !added {
            break;
        }
    }
    required.sort_by_key(|r| r.site);
    // The pairs no fence can order are those left with the fences as kept: release/acquire
    // stand-ins for sequentially consistent fences order less (a flag handshake's lock fails
    // with them, and its critical sections then race with nothing passed between them).
    let kept = Fences::Kinded(fences.clone());
    if kept != as_release_acquire(fences) {
        let first = PARTNER_PASSES as u64 * COMMUNICATION_RUNS;
        let Some(logs) = recorder.record(&kept, PARTNER_STREAM, first)? else {
            return Ok(None);
        };
        last = logs;
    }
    Ok(Some(Completion {
        required,
        unorderable: unorderable_races(&last),
        stand_ins_failed: (failed.failed > 0).then_some(failed),
    }))
}

/// The pairs of `logs` that no fence can order ([`fences_cannot_order`]), each once, with
/// `check --races`' advice: pairs of morally strong accesses with no communication between
/// them, pairs of strong accesses whose scope leaves one thread out (a `.cta` flag between
/// CTAs: no fence widens a scope), and data races with nothing passed between their threads (a
/// plain flag spun on: it must become strong first).
pub fn unorderable_races(logs: &[RaceLog]) -> Vec<UnorderableRace> {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for log in logs {
        let unorderable = RaceLog {
            conflicts: (log.conflicts.iter())
                .filter(|c| fences_cannot_order(c))
                .cloned()
                .collect(),
            communication: Vec::new(),
        };
        for race in run_races(0, &unorderable).races {
            let pair = format!("{} -> {}", race.first.place(), race.second.place());
            seen.entry(pair).or_insert(race.missing);
        }
    }
    seen.into_iter()
        .map(|(pair, advice)| UnorderableRace { pair, advice })
        .collect()
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
fn missing_sides(c: &Conflict, sites: &[SiteSummary]) -> Vec<RequiredFence> {
    let Some((_, read)) = &c.via else {
        return Vec::new();
    };
    if !fence_orderable(c) {
        return Vec::new();
    }
    // Each side's scope holds the two threads of its link: the pair's own, for a relayed pair
    // the relaying writer's and the reader's, for a forwarded one the first link's (release),
    // every link's (forwarding threads) and the last link's (acquire).
    let kind = |in_cta: bool| match in_cta {
        true => FenceKind::AcqRelCta,
        false => FenceKind::AcqRelGpu,
    };
    let orders = pair_name(c);
    let mut out = Vec::new();
    let mut need = |at: &RaceSite, role: &'static str, in_cta: bool| {
        for site in sites_at(sites, at) {
            out.push(RequiredFence {
                site,
                kind: kind(in_cta),
                role,
                orders: orders.clone(),
            });
        }
    };
    // A forwarded access that reached its first forwarder causally needs no release of its own.
    let reached_causally = c.forward.as_ref().is_some_and(|f| f.write.is_none());
    let release_in_cta = c.release_in_cta();
    if lack(c.facts.first_release, release_in_cta).is_some() && !reached_causally {
        // Relayed: after the point where the first access reached the thread that writes
        // what the second thread reads (its barrier or acquire), not beside the access.
        let at = c.relay.as_ref().unwrap_or(&c.first.site);
        need(at, "release", release_in_cta);
    }
    let chain_in_cta = c.facts.communication_in_cta;
    if let Some(forward) = (c.forward.as_ref()).filter(|f| lack(f.fenced, chain_in_cta).is_some()) {
        // Forwarded: the thread that read the first thread's write and wrote what the second
        // thread reads acquires after its read and releases before its write.
        need(&forward.read, "forwarding", chain_in_cta);
    }
    if lack(c.facts.second_acquire, c.acquire_in_cta()).is_some() {
        need(read, "acquire", c.acquire_in_cta());
    }
    out
}

/// The candidate sites of the access `at`: those at its source line (at inner-line
/// granularity, the line inside the helper it is written on) that hold its instruction, or all
/// of them when none does. At instruction granularity a line has a site per access, and the
/// one the race is about is not always the first of them.
fn sites_at(sites: &[SiteSummary], at: &RaceSite) -> Vec<usize> {
    let (Some(file), Some(line)) = (at.file.as_ref(), at.line) else {
        return Vec::new();
    };
    let is_at = |s: &SiteSummary, file: &String, line: u32| {
        s.file.as_ref() == Some(file) && s.line == Some(line)
    };
    let inner: Vec<&SiteSummary> = (at.inner.iter())
        .flat_map(|i| {
            (sites.iter()).filter(|s| s.function == at.function && is_at(s, &i.file, i.line))
        })
        .collect();
    let on_line = match inner.is_empty() {
        true => sites.iter().filter(|s| is_at(s, file, line)).collect(),
        false => inner,
    };
    let holding: Vec<usize> = (on_line.iter())
        .filter(|s| s.ptx.contains(&at.ptx))
        .map(|s| s.id)
        .collect();
    match holding.is_empty() {
        true => on_line.iter().map(|s| s.id).collect(),
        false => holding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(id: usize, ptx: &str) -> SiteSummary {
        SiteSummary {
            id,
            function: "k".into(),
            file: Some("k.cu".into()),
            line: Some(8),
            ptx: vec![ptx.into()],
            frames: Vec::new(),
            fence_after: vec![0],
        }
    }

    fn access(ptx: &str) -> RaceSite {
        RaceSite {
            function: "k".into(),
            ptx_line: 40,
            ptx: ptx.into(),
            file: Some("k.cu".into()),
            line: Some(8),
            inner: None,
        }
    }

    /// QA (`data[0] = 1; data[1] = 2; *flag = 1;` hardened at instruction granularity): a race
    /// on the line's second store was put on the line's first site, so the site of `data[1]`
    /// was not known to meet another CTA and a `.cta` fence was tried there. An access goes to
    /// the site holding its instruction; to every site of its line when none does.
    #[test]
    fn a_race_goes_to_the_site_of_its_own_access_among_several_on_a_line() {
        let sites = [
            site(0, "st.global.u32 \t[%rd1], %r1"),
            site(1, "st.global.u32 \t[%rd1+4], %r2"),
            site(2, "st.volatile.global.u32 \t[%rd2], %r1"),
        ];
        assert_eq!(
            sites_at(&sites, &access("st.global.u32 \t[%rd1+4], %r2")),
            [1]
        );
        assert_eq!(
            sites_at(&sites, &access("st.global.u32 \t[%rd9], %r9")),
            [0, 1, 2]
        );
    }
}
