//! The paper's Algorithm 1, empirical fence insertion, exactly as written.
//!
//! Starting from a fence at every candidate site, the algorithm removes fences while the
//! application still runs without errors: first by halves (binary reduction), then one at a time
//! (linear reduction), each check running the application `I` times. The result then faces a
//! longer stability check; if it fails, the search starts again from *all* fences with `I`
//! doubled:
//!
//! ```text
//! procedure EmpiricalFenceInsertion(A, F, I):
//!   do
//!     Fb <- BinaryReduction(A, F, I)
//!     Fl <- LinearReduction(A, Fb, I)
//!     I <- 2 * I
//!   while not EmpiricallyStable(A, Fl)
//!   return Fl
//! ```
//!
//! How a set is checked (running the application, or reading a recorded answer) is left to a
//! [`FenceChecker`]. The algorithm is deterministic: the same answers produce the same
//! [`Query`]s in the same order, numbered by [`Query::index`], so a journal of answers keyed by
//! index can replay an interrupted search up to where it stopped.

use crate::ptx::passes::fences::FenceKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// Fence-site ids, sorted ascending. Ids are ordered by code location.
pub type FenceSet = Vec<usize>;

/// The number of runs per check in the first round, `I` in the paper.
pub const INITIAL_ITERATIONS: u64 = 32;

/// The part of the algorithm that asks a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// `CheckApplication` from `BinaryReduction`.
    Binary,
    /// `CheckApplication` from `LinearReduction`.
    Linear,
    /// `EmpiricallyStable`.
    Stable,
    /// Beyond the paper: whether a kept fence may be of a weaker kind ([`minimise_kinds`]).
    Kind,
    /// Beyond the paper, asked once before the search: whether the app passes with a fence at
    /// every site at all ([`fences_can_help`]). If not, no fence set can make it pass.
    All,
}

impl Phase {
    const ALL: [Phase; 5] = [
        Phase::Binary,
        Phase::Linear,
        Phase::Stable,
        Phase::Kind,
        Phase::All,
    ];

    fn name(self) -> &'static str {
        match self {
            Phase::Binary => "binary",
            Phase::Linear => "linear",
            Phase::Stable => "stable",
            Phase::Kind => "kind",
            Phase::All => "all",
        }
    }
}

display_by_name!(Phase, name);

/// A phase name that is not `binary`, `linear` or `stable`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown phase '{0}': expected 'binary', 'linear', 'stable', 'kind' or 'all'")]
pub struct ParsePhaseError(pub String);

parse_by_name!(Phase, name, ParsePhaseError, |s| ParsePhaseError(
    s.to_string()
));

/// One question to a [`FenceChecker`]: does the application run without errors with `fences`?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Query {
    /// The position of this query among all queries of one search: 0, 1, 2, ...
    pub index: usize,
    /// The part of the algorithm asking.
    pub phase: Phase,
    /// The do-while iteration, 0 for the first.
    pub round: u32,
    /// `I`, the runs for `CheckApplication`; `None` for the stability check, whose length the
    /// checker decides (a time or a run count).
    pub iterations: Option<u64>,
    /// The fences to run with.
    pub fences: FenceSet,
    /// Sites whose fence is of another kind than the hardening's (only [`Phase::Kind`] asks
    /// with some); absent in journals written before kinds were minimised.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kinds: BTreeMap<usize, FenceKind>,
}

/// Answers [`Query`]s: `Ok(true)` iff no error was observed.
pub trait FenceChecker {
    /// Why a check could not be made (I/O, interruption); the algorithm passes it on unchanged.
    type Error;

    /// Runs (or looks up) the check described by `query`.
    fn check(&mut self, query: &Query) -> Result<bool, Self::Error>;

    /// Beyond the paper: a pair of accesses that fences can order which dropping the fences of
    /// `current` not in `reduced` leaves unordered under PTX (recorded unordered with `reduced`,
    /// not with `current`), named `file:line -> file:line`; `None` when there is none or races
    /// are not recorded. The reductions keep such fences without asking a query.
    fn unordered_without(
        &mut self,
        _current: &[usize],
        _reduced: &[usize],
    ) -> Result<Option<String>, Self::Error> {
        Ok(None)
    }

    /// Beyond the paper: the sites whose accesses take part in races that fences can order,
    /// which each round asks about first; empty when races are not recorded.
    fn race_sites(&mut self) -> Result<Vec<usize>, Self::Error> {
        Ok(Vec::new())
    }
}

/// A fence the last round kept because removing it leaves a pair unordered under PTX.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceKept {
    pub site: usize,
    /// The pair, `file:line -> file:line`.
    pub pair: String,
}

/// The outcome of [`empirical_fence_insertion`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Insertion {
    /// The fences kept: `Fl` of the last round.
    pub fences: FenceSet,
    /// The do-while iterations made.
    pub rounds: u32,
    /// `I` as used by the checks of the last round (before its doubling).
    pub final_iterations: u64,
    /// The queries asked, stability checks included.
    pub queries: usize,
    /// Whether the last stability check passed.
    pub stable: bool,
    /// Fences of the last round's linear reduction kept for a race rather than a failing run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub race_kept: Vec<RaceKept>,
}

/// Where a reduction's queries belong: the round, `I`, and the running query count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The do-while iteration.
    pub round: u32,
    /// `I` for `CheckApplication`.
    pub iterations: u64,
    /// The index the next query gets: the queries asked so far. Incremented per query.
    pub next_index: usize,
    /// Fences this round's linear reduction kept for a race.
    pub race_kept: Vec<RaceKept>,
}

/// Runs Algorithm 1 over the candidate sites `all`, starting with `initial_iterations` runs per
/// check (normally [`INITIAL_ITERATIONS`]).
///
/// `all` is sorted and deduplicated first. `max_rounds` bounds the do-while loop, since a real
/// search cannot double `I` forever: when `max_rounds` rounds have run and the last stability
/// check still failed, the last round's `Fl` is returned with `stable: false`. At least one round
/// always runs (a `max_rounds` of 0 counts as 1). With no candidate sites the reductions ask
/// nothing, but the stability check still runs on the empty set: whether the application is
/// stable without fences is still worth knowing. `I` doubles saturating.
///
/// Beyond the paper: when the stability check fails with a fence at every site, the search ends
/// there, unstable. Each round returns a subset of `all`, so no later round can do better, and a
/// subset that passed its stability check after that would pass by luck.
pub fn empirical_fence_insertion<C: FenceChecker>(
    checker: &mut C,
    all: &[usize],
    initial_iterations: u64,
    max_rounds: u32,
) -> Result<Insertion, C::Error> {
    empirical_fence_insertion_from(checker, all, initial_iterations, max_rounds, 0)
}

/// [`empirical_fence_insertion`] whose queries are numbered from `first_index` (the queries
/// asked before it, e.g. by [`fences_can_help`]).
pub fn empirical_fence_insertion_from<C: FenceChecker>(
    checker: &mut C,
    all: &[usize],
    initial_iterations: u64,
    max_rounds: u32,
    first_index: usize,
) -> Result<Insertion, C::Error> {
    let all = normalise(all);
    let mut context = Context {
        round: 0,
        iterations: initial_iterations,
        next_index: first_index,
        race_kept: Vec::new(),
    };
    let race_sites = normalise(&checker.race_sites()?);
    loop {
        context.race_kept.clear();
        let start = races_first(checker, &all, &race_sites, &mut context)?;
        let reduced = binary_reduction(checker, start, &mut context)?;
        let fences = linear_reduction(checker, reduced, &mut context)?;
        let stable = ask(checker, &mut context, Phase::Stable, &fences)?;
        let every_site_failed = !stable && fences == all;
        if stable || every_site_failed || context.round + 1 >= max_rounds.max(1) {
            return Ok(Insertion {
                fences,
                rounds: context.round + 1,
                final_iterations: context.iterations,
                queries: context.next_index,
                stable,
                race_kept: std::mem::take(&mut context.race_kept),
            });
        }
        context.round += 1;
        context.iterations = context.iterations.saturating_mul(2);
    }
}

/// Beyond the paper: asks once, as query 0 ([`Phase::All`], `initial_iterations` runs),
/// whether the app passes with a fence at every site. Algorithm 1 only ever removes fences, so
/// when this fails no set it could return passes, and searching is pointless: the caller stops
/// and says so. The search's own queries then start at index 1.
pub fn fences_can_help<C: FenceChecker>(
    checker: &mut C,
    all: &[usize],
    initial_iterations: u64,
) -> Result<bool, C::Error> {
    let query = Query {
        index: 0,
        phase: Phase::All,
        round: 0,
        iterations: Some(initial_iterations),
        fences: normalise(all),
        kinds: BTreeMap::new(),
    };
    checker.check(&query)
}

/// What [`minimise_kinds`] decided for one kept fence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindChoice {
    pub site: usize,
    /// The weakest kind that passed (the hardening's own kind when none weaker did).
    pub kind: FenceKind,
    /// Weaker kinds that failed, each with the index of the query whose runs refuted it.
    pub rejected: Vec<(FenceKind, usize)>,
    /// Weaker kinds not tried: of CTA scope, at a site that met another CTA in the recorded
    /// runs ([`super::communication`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_for_scope: Vec<FenceKind>,
}

/// Beyond the paper: the weakest fence that suffices. For each kept fence in turn (by site id),
/// tries the kinds of [`FenceKind::WEAKENING`] weaker than its current kind, in that order, with
/// every other fence as chosen so far. A kind is kept when `I` runs (the last round's) and then
/// the stability check pass with it; a failure of either rejects it. At a site of
/// `gpu_floor` (one that communicated with another CTA) kinds of CTA scope are not tried: PTX
/// gives them no effect there, whatever runs say. The queries continue `context`'s numbering,
/// in phase [`Phase::Kind`], so a journal replays them like the rest.
///
/// With `grouped`, each weaker kind is first tried at every fence it may weaken at once (`I`
/// runs and a stability check, as for one fence); if that passes, they all take it and the
/// fence-by-fence trials start from there. One stability check then stands for several.
pub fn minimise_kinds<C: FenceChecker>(
    checker: &mut C,
    fences: &[usize],
    base: FenceKind,
    gpu_floor: &std::collections::BTreeSet<usize>,
    grouped: bool,
    context: &mut Context,
) -> Result<Vec<KindChoice>, C::Error> {
    let mut kinds: BTreeMap<usize, FenceKind> = BTreeMap::new();
    if grouped {
        kinds = weaken_together(checker, fences, base, gpu_floor, context)?;
    }
    let mut choices = Vec::new();
    for &site in fences {
        let mut choice = KindChoice {
            site,
            kind: kinds.get(&site).copied().unwrap_or(base),
            rejected: Vec::new(),
            refused_for_scope: Vec::new(),
        };
        for candidate in FenceKind::WEAKENING {
            if !candidate.is_weaker_than(choice.kind) {
                continue;
            }
            if candidate.is_cta_scoped() && gpu_floor.contains(&site) {
                choice.refused_for_scope.push(candidate);
                continue;
            }
            let mut trial = kinds.clone();
            trial.insert(site, candidate);
            let iterations = Some(context.iterations);
            let quick = ask_kinds(checker, context, fences, &trial, iterations)?;
            let passed = quick.0 && ask_kinds(checker, context, fences, &trial, None)?.0;
            if passed {
                choice.kind = candidate;
                kinds = trial;
            } else {
                choice.rejected.push((candidate, context.next_index - 1));
            }
        }
        choices.push(choice);
    }
    Ok(choices)
}

/// The group trials of [`minimise_kinds`]: each kind of [`FenceKind::WEAKENING`] at once at
/// every fence where it is weaker than the fence's kind so far and not refused for scope,
/// when that is more than one fence; the kinds that passed.
fn weaken_together<C: FenceChecker>(
    checker: &mut C,
    fences: &[usize],
    base: FenceKind,
    gpu_floor: &std::collections::BTreeSet<usize>,
    context: &mut Context,
) -> Result<BTreeMap<usize, FenceKind>, C::Error> {
    let mut kinds: BTreeMap<usize, FenceKind> = BTreeMap::new();
    for candidate in FenceKind::WEAKENING {
        let weakens = |site: &usize| {
            let now = kinds.get(site).copied().unwrap_or(base);
            candidate.is_weaker_than(now)
                && !(candidate.is_cta_scoped() && gpu_floor.contains(site))
        };
        let group: Vec<usize> = fences.iter().copied().filter(weakens).collect();
        if group.len() < 2 {
            continue;
        }
        let mut trial = kinds.clone();
        trial.extend(group.iter().map(|&site| (site, candidate)));
        let iterations = Some(context.iterations);
        if ask_kinds(checker, context, fences, &trial, iterations)?.0
            && ask_kinds(checker, context, fences, &trial, None)?.0
        {
            kinds = trial;
        }
    }
    Ok(kinds)
}

/// Asks a [`Phase::Kind`] query; returns its answer (and the index it had).
fn ask_kinds<C: FenceChecker>(
    checker: &mut C,
    context: &mut Context,
    fences: &[usize],
    kinds: &BTreeMap<usize, FenceKind>,
    iterations: Option<u64>,
) -> Result<(bool, usize), C::Error> {
    let query = Query {
        index: context.next_index,
        phase: Phase::Kind,
        round: context.round,
        iterations,
        fences: fences.to_vec(),
        kinds: kinds.clone(),
    };
    context.next_index += 1;
    Ok((checker.check(&query)?, query.index))
}

/// Beyond the paper: the set a round's reduction starts from. When races were recorded, the
/// sites in races that fences can order are asked about first (a [`Phase::Binary`] query with
/// those fences alone): if they suffice, and dropping the others leaves no such race
/// unordered, the reduction starts from them; otherwise from `all`.
fn races_first<C: FenceChecker>(
    checker: &mut C,
    all: &[usize],
    race_sites: &[usize],
    context: &mut Context,
) -> Result<FenceSet, C::Error> {
    let guided: FenceSet = race_sites
        .iter()
        .copied()
        .filter(|s| all.contains(s))
        .collect();
    if guided.is_empty() || guided.len() == all.len() {
        return Ok(all.to_vec());
    }
    if checker.unordered_without(all, &guided)?.is_none()
        && ask(checker, context, Phase::Binary, &guided)?
    {
        return Ok(guided);
    }
    Ok(all.to_vec())
}

/// Whether `reduced` may replace `fences`: dropping the others leaves no race that fences can
/// order unordered ([`FenceChecker::unordered_without`]) and the runs pass. Returns the pair a
/// race check found, if one did, and the answer.
fn try_reduce<C: FenceChecker>(
    checker: &mut C,
    context: &mut Context,
    phase: Phase,
    fences: &[usize],
    reduced: &[usize],
) -> Result<(Option<String>, bool), C::Error> {
    if let Some(pair) = checker.unordered_without(fences, reduced)? {
        return Ok((Some(pair), false));
    }
    Ok((None, ask(checker, context, phase, reduced)?))
}

/// `BinaryReduction`: while more than one fence is left, drop the first half (by location) if
/// the rest suffices, else the second half if the rest suffices, else stop. Beyond the paper,
/// a half whose removal leaves a race that fences can order is kept without a query.
///
/// [`split_fences`] gives the halves. `fences` is expected sorted (see [`FenceSet`]).
pub fn binary_reduction<C: FenceChecker>(
    checker: &mut C,
    mut fences: FenceSet,
    context: &mut Context,
) -> Result<FenceSet, C::Error> {
    while fences.len() > 1 {
        let (first, second) = split_fences(&fences);
        let (first, second) = (first.to_vec(), second.to_vec());
        if try_reduce(checker, context, Phase::Binary, &fences, &second)?.1 {
            fences = second;
        } else if try_reduce(checker, context, Phase::Binary, &fences, &first)?.1 {
            fences = first;
        } else {
            break;
        }
    }
    Ok(fences)
}

/// `LinearReduction`: for each fence in order, drop it if the rest suffices. Beyond the paper,
/// a fence whose removal leaves a race that fences can order is kept without a query, and
/// noted in `context.race_kept`.
pub fn linear_reduction<C: FenceChecker>(
    checker: &mut C,
    mut fences: FenceSet,
    context: &mut Context,
) -> Result<FenceSet, C::Error> {
    for fence in fences.clone() {
        let without: FenceSet = fences.iter().copied().filter(|&f| f != fence).collect();
        match try_reduce(checker, context, Phase::Linear, &fences, &without)? {
            (Some(pair), _) => context.race_kept.push(RaceKept { site: fence, pair }),
            (None, true) => fences = without,
            (None, false) => {}
        }
    }
    Ok(fences)
}

/// `SplitFences`: the first `n / 2` fences (rounded down) and the rest, so that 5 fences split
/// into 2 and 3.
pub fn split_fences(fences: &[usize]) -> (&[usize], &[usize]) {
    fences.split_at(fences.len() / 2)
}

/// Builds the next query for `fences`, numbers it, and asks it.
fn ask<C: FenceChecker>(
    checker: &mut C,
    context: &mut Context,
    phase: Phase,
    fences: &[usize],
) -> Result<bool, C::Error> {
    let query = Query {
        index: context.next_index,
        phase,
        round: context.round,
        iterations: (phase != Phase::Stable).then_some(context.iterations),
        fences: fences.to_vec(),
        kinds: BTreeMap::new(),
    };
    context.next_index += 1;
    checker.check(&query)
}

/// The set sorted by location, without duplicates.
fn normalise(all: &[usize]) -> FenceSet {
    let mut fences = all.to_vec();
    fences.sort_unstable();
    fences.dedup();
    fences
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::convert::Infallible;

    /// Answers from a function of the query, and records every query.
    struct Mock<F> {
        answer: F,
        queries: Vec<Query>,
    }

    impl<F: FnMut(&Query) -> bool> Mock<F> {
        fn new(answer: F) -> Mock<F> {
            Mock {
                answer,
                queries: Vec::new(),
            }
        }
    }

    impl<F: FnMut(&Query) -> bool> FenceChecker for Mock<F> {
        type Error = Infallible;

        fn check(&mut self, query: &Query) -> Result<bool, Infallible> {
            self.queries.push(query.clone());
            Ok((self.answer)(query))
        }
    }

    /// A truthful oracle: the application is correct iff every fence in `needed` is present.
    fn needs(needed: &'static [usize]) -> impl FnMut(&Query) -> bool {
        move |query| has_all(query, needed)
    }

    fn has_all(query: &Query, needed: &[usize]) -> bool {
        needed.iter().all(|f| query.fences.contains(f))
    }

    fn run<F: FnMut(&Query) -> bool>(mock: &mut Mock<F>, all: &[usize]) -> Insertion {
        let Ok(insertion) = empirical_fence_insertion(mock, all, INITIAL_ITERATIONS, 8);
        insertion
    }

    fn query(
        index: usize,
        phase: Phase,
        round: u32,
        iterations: Option<u64>,
        fences: &[usize],
    ) -> Query {
        Query {
            index,
            phase,
            round,
            iterations,
            fences: fences.to_vec(),
            kinds: BTreeMap::new(),
        }
    }

    fn context(next_index: usize) -> Context {
        Context {
            round: 0,
            iterations: 32,
            next_index,
            race_kept: Vec::new(),
        }
    }

    #[test]
    fn one_needed_fence_hand_trace() {
        let mut mock = Mock::new(needs(&[2]));
        let insertion = run(&mut mock, &[0, 1, 2, 3, 4]);
        let i = Some(32);
        let expected = vec![
            query(0, Phase::Binary, 0, i, &[2, 3, 4]),
            query(1, Phase::Binary, 0, i, &[3, 4]),
            query(2, Phase::Binary, 0, i, &[2]),
            query(3, Phase::Linear, 0, i, &[]),
            query(4, Phase::Stable, 0, None, &[2]),
        ];
        assert_eq!(mock.queries, expected);
        let expected = Insertion {
            fences: vec![2],
            rounds: 1,
            final_iterations: 32,
            queries: 5,
            stable: true,
            race_kept: Vec::new(),
        };
        assert_eq!(insertion, expected);
    }

    #[test]
    fn needed_fences_in_both_halves() {
        let mut mock = Mock::new(needs(&[1, 3]));
        let insertion = run(&mut mock, &[0, 1, 2, 3]);
        let sets: Vec<(Phase, FenceSet)> = mock
            .queries
            .iter()
            .map(|q| (q.phase, q.fences.clone()))
            .collect();
        let expected = vec![
            (Phase::Binary, vec![2, 3]),
            (Phase::Binary, vec![0, 1]),
            (Phase::Linear, vec![1, 2, 3]),
            (Phase::Linear, vec![2, 3]),
            (Phase::Linear, vec![1, 3]),
            (Phase::Linear, vec![1]),
            (Phase::Stable, vec![1, 3]),
        ];
        assert_eq!(sets, expected);
        assert_eq!(insertion.fences, vec![1, 3]);
        assert!(insertion.stable);
    }

    #[test]
    fn binary_reduction_stops_when_neither_half_suffices() {
        let mut mock = Mock::new(needs(&[0, 5]));
        let mut context = context(0);
        let Ok(reduced) = binary_reduction(&mut mock, (0..6).collect(), &mut context);
        assert_eq!(reduced, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(context.next_index, 2);
    }

    #[test]
    fn binary_reduction_keeps_one_fence() {
        let mut mock = Mock::new(|_: &Query| true);
        let mut context = context(0);
        let Ok(reduced) = binary_reduction(&mut mock, vec![0, 1, 2, 3], &mut context);
        assert_eq!(reduced, vec![3]);
        assert_eq!(context.next_index, 2);
    }

    #[test]
    fn linear_reduction_tries_each_fence_in_order() {
        let mut mock = Mock::new(needs(&[4]));
        let mut context = context(10);
        let Ok(reduced) = linear_reduction(&mut mock, vec![1, 4, 7], &mut context);
        assert_eq!(reduced, vec![4]);
        let sets: Vec<FenceSet> = mock.queries.iter().map(|q| q.fences.clone()).collect();
        assert_eq!(sets, vec![vec![4, 7], vec![7], vec![4]]);
        let indices: Vec<usize> = mock.queries.iter().map(|q| q.index).collect();
        assert_eq!(indices, vec![10, 11, 12]);
        assert_eq!(context.next_index, 13);
    }

    #[test]
    fn split_puts_the_smaller_half_first() {
        assert_eq!(
            split_fences(&[0, 1, 2, 3, 4]),
            (&[0, 1][..], &[2, 3, 4][..])
        );
        assert_eq!(split_fences(&[0, 1, 2, 3]), (&[0, 1][..], &[2, 3][..]));
        assert_eq!(split_fences(&[7]), (&[][..], &[7][..]));
    }

    #[test]
    fn flaky_first_round_restarts_from_all_fences_with_double_iterations() {
        let lies_in_round_0 = |q: &Query| q.round == 0 && q.phase != Phase::Stable;
        let mut mock = Mock::new(|q: &Query| lies_in_round_0(q) || has_all(q, &[1, 3]));
        let insertion = run(&mut mock, &[0, 1, 2, 3]);
        let round0: Vec<&Query> = mock.queries.iter().filter(|q| q.round == 0).collect();
        assert_eq!(round0.last().unwrap().phase, Phase::Stable);
        assert_eq!(round0.last().unwrap().fences, Vec::<usize>::new());
        let round1: Vec<&Query> = mock.queries.iter().filter(|q| q.round == 1).collect();
        assert_eq!(
            round1[0],
            &query(round0.len(), Phase::Binary, 1, Some(64), &[2, 3])
        );
        assert_eq!(round1[1].fences, vec![0, 1]);
        assert!(round1
            .iter()
            .all(|q| q.iterations == Some(64) || q.phase == Phase::Stable));
        let expected = Insertion {
            fences: vec![1, 3],
            rounds: 2,
            final_iterations: 64,
            queries: mock.queries.len(),
            stable: true,
            race_kept: Vec::new(),
        };
        assert_eq!(insertion, expected);
    }

    #[test]
    fn round_limit_returns_unstable() {
        let mut mock = Mock::new(|q: &Query| q.phase != Phase::Stable);
        let Ok(insertion) = empirical_fence_insertion(&mut mock, &[0, 1, 2], 32, 3);
        let expected = Insertion {
            fences: vec![],
            rounds: 3,
            final_iterations: 128,
            queries: mock.queries.len(),
            stable: false,
            race_kept: Vec::new(),
        };
        assert_eq!(insertion, expected);
        let stability = mock.queries.iter().filter(|q| q.phase == Phase::Stable);
        assert_eq!(stability.count(), 3);
    }

    #[test]
    fn a_stability_failure_with_every_fence_ends_the_search() {
        // Checks pass only with all four fences, and every stability check fails: rounds after
        // the first could only return a subset of them, so the search stops after one.
        // (`round_limit_returns_unstable`: a subset failing goes on to the next round.)
        let mut mock = Mock::new(|q: &Query| q.phase != Phase::Stable && q.fences.len() == 4);
        let Ok(insertion) = empirical_fence_insertion(&mut mock, &[0, 1, 2, 3], 32, 8);
        assert!(!insertion.stable);
        assert_eq!(insertion.fences, vec![0, 1, 2, 3]);
        assert_eq!(insertion.rounds, 1);
        let stability = mock.queries.iter().filter(|q| q.phase == Phase::Stable);
        assert_eq!(stability.count(), 1);
    }

    #[test]
    fn zero_max_rounds_runs_one_round() {
        let mut mock = Mock::new(|_: &Query| false);
        let Ok(insertion) = empirical_fence_insertion(&mut mock, &[0], 32, 0);
        assert_eq!(insertion.rounds, 1);
        assert!(!insertion.stable);
    }

    #[test]
    fn no_candidates_still_checks_stability() {
        let mut mock = Mock::new(|_: &Query| true);
        let insertion = run(&mut mock, &[]);
        assert_eq!(mock.queries, vec![query(0, Phase::Stable, 0, None, &[])]);
        assert_eq!(insertion.fences, Vec::<usize>::new());
        assert!(insertion.stable);
    }

    #[test]
    fn one_candidate_goes_straight_to_linear() {
        let mut mock = Mock::new(needs(&[9]));
        let insertion = run(&mut mock, &[9]);
        let expected = vec![
            query(0, Phase::Linear, 0, Some(32), &[]),
            query(1, Phase::Stable, 0, None, &[9]),
        ];
        assert_eq!(mock.queries, expected);
        assert_eq!(insertion.fences, vec![9]);
    }

    #[test]
    fn candidates_are_sorted_and_deduplicated() {
        let mut mock = Mock::new(needs(&[2]));
        run(&mut mock, &[4, 2, 0, 3, 1, 2]);
        assert_eq!(mock.queries[0].fences, vec![2, 3, 4]);
    }

    struct Failing {
        fail_at: usize,
        asked: usize,
    }

    #[derive(Debug, PartialEq)]
    struct Interrupted(usize);

    impl FenceChecker for Failing {
        type Error = Interrupted;

        fn check(&mut self, query: &Query) -> Result<bool, Interrupted> {
            self.asked += 1;
            if query.index == self.fail_at {
                return Err(Interrupted(query.index));
            }
            Ok(false)
        }
    }

    #[test]
    fn checker_errors_propagate_and_stop_the_search() {
        let mut checker = Failing {
            fail_at: 2,
            asked: 0,
        };
        let result = empirical_fence_insertion(&mut checker, &[0, 1, 2, 3], 32, 4);
        assert_eq!(result, Err(Interrupted(2)));
        assert_eq!(checker.asked, 3);
    }

    /// An arbitrary but deterministic answer, so that runs take an irregular path.
    fn scrambled(query: &Query) -> bool {
        let sum: usize = query.fences.iter().map(|f| f * 7 + 3).sum();
        !(sum + query.index + query.round as usize).is_multiple_of(3)
    }

    #[test]
    fn same_answers_give_same_queries() {
        let all: Vec<usize> = (0..13).collect();
        let mut first = Mock::new(scrambled);
        let mut second = Mock::new(scrambled);
        let a = empirical_fence_insertion(&mut first, &all, 32, 6);
        let b = empirical_fence_insertion(&mut second, &all, 32, 6);
        assert_eq!(a, b);
        assert_eq!(first.queries, second.queries);
        assert!(first.queries.len() > 10);
    }

    #[test]
    fn answers_replayed_by_index_give_same_queries() {
        let all: Vec<usize> = (0..13).collect();
        let mut live = Mock::new(scrambled);
        let Ok(expected) = empirical_fence_insertion(&mut live, &all, 32, 6);
        let journal: Vec<bool> = live.queries.iter().map(scrambled).collect();
        let mut replay = Mock::new(|q: &Query| journal[q.index]);
        let Ok(replayed) = empirical_fence_insertion(&mut replay, &all, 32, 6);
        assert_eq!(replayed, expected);
        assert_eq!(replay.queries, live.queries);
    }

    #[test]
    fn phase_names_round_trip() {
        for phase in [Phase::Binary, Phase::Linear, Phase::Stable] {
            assert_eq!(phase.to_string().parse::<Phase>(), Ok(phase));
            let json = serde_json::to_string(&phase).unwrap();
            assert_eq!(json, format!("\"{phase}\""));
        }
        let err = "Binary".parse::<Phase>().unwrap_err();
        assert_eq!(err, ParsePhaseError("Binary".into()));
    }

    #[test]
    fn query_serialises() {
        let q = query(3, Phase::Stable, 1, None, &[4, 5]);
        let json = serde_json::to_string(&q).unwrap();
        let expected = r#"{"index":3,"phase":"stable","round":1,"iterations":null,"fences":[4,5]}"#;
        assert_eq!(json, expected);
        assert_eq!(serde_json::from_str::<Query>(&json).unwrap(), q);
    }

    /// An oracle for kinds: site 1 needs gpu scope (it talks across blocks) but not sequential
    /// consistency; site 2 is satisfied by any fence.
    fn kinds_oracle(query: &Query) -> bool {
        let kind = |site| query.kinds.get(&site).copied().unwrap_or(FenceKind::ScGpu);
        !matches!(kind(1), FenceKind::MembarCta | FenceKind::AcqRelCta)
    }

    #[test]
    fn kinds_weaken_to_the_weakest_that_passes_in_the_documented_order() {
        let mut mock = Mock::new(kinds_oracle);
        let mut context = Context {
            round: 1,
            iterations: 64,
            next_index: 10,
            race_kept: Vec::new(),
        };
        let Ok(choices) = minimise_kinds(
            &mut mock,
            &[1, 2],
            FenceKind::ScGpu,
            &BTreeSet::new(),
            false,
            &mut context,
        );
        assert_eq!(choices[0].kind, FenceKind::AcqRelGpu);
        // membar.cta is not weaker than fence.acq_rel.gpu, so only fence.acq_rel.cta is tried.
        assert_eq!(choices[0].rejected, vec![(FenceKind::AcqRelCta, 12)]);
        assert_eq!(choices[1].kind, FenceKind::AcqRelCta);
        assert!(choices[1].rejected.is_empty());
        // Each accepted kind costs `I` runs and a stability check; a rejected one its `I` runs.
        let asked: Vec<(usize, Option<u64>)> = mock
            .queries
            .iter()
            .map(|q| (q.index, q.iterations))
            .collect();
        assert_eq!(
            asked,
            vec![
                (10, Some(64)),
                (11, None),
                (12, Some(64)),
                (13, Some(64)),
                (14, None),
                (15, Some(64)),
                (16, None)
            ]
        );
        assert!(mock
            .queries
            .iter()
            .all(|q| q.phase == Phase::Kind && q.round == 1));
        // Site 2's trials keep site 1 at the kind it settled on.
        assert_eq!(mock.queries[3].kinds.get(&1), Some(&FenceKind::AcqRelGpu));
        assert_eq!(context.next_index, 17);
    }

    #[test]
    fn a_fence_that_needs_sequential_consistency_keeps_its_kind() {
        let mut mock = Mock::new(|q: &Query| q.kinds.is_empty());
        let mut context = context(0);
        let Ok(choices) = minimise_kinds(
            &mut mock,
            &[3],
            FenceKind::MembarGl,
            &BTreeSet::new(),
            false,
            &mut context,
        );
        assert_eq!(choices[0].kind, FenceKind::MembarGl);
        let tried: Vec<FenceKind> = choices[0].rejected.iter().map(|r| r.0).collect();
        assert_eq!(tried, FenceKind::WEAKENING.to_vec());
    }

    /// The load-buffering slot recycler of issue 25: runs cannot refute a CTA-scoped fence
    /// between two CTAs, so the communication graph must.
    #[test]
    fn a_site_that_met_another_cta_never_keeps_a_cta_scoped_fence_even_when_runs_pass() {
        let mut mock = Mock::new(|_: &Query| true);
        let mut context = context(0);
        let floor = BTreeSet::from([1]);
        let Ok(choices) = minimise_kinds(
            &mut mock,
            &[1, 2],
            FenceKind::ScGpu,
            &floor,
            false,
            &mut context,
        );
        assert_eq!(choices[0].kind, FenceKind::AcqRelGpu);
        // membar.cta is not weaker than the fence.acq_rel.gpu kept first, so only
        // fence.acq_rel.cta is left to refuse.
        assert_eq!(choices[0].refused_for_scope, vec![FenceKind::AcqRelCta]);
        assert!(mock
            .queries
            .iter()
            .all(|q| q.kinds.get(&1).is_none_or(|k| !k.is_cta_scoped())));
        assert_eq!(choices[1].kind, FenceKind::AcqRelCta);
        assert!(choices[1].refused_for_scope.is_empty());
    }

    /// A checker whose runs answer by `answer` and whose race recordings say that each pair of
    /// `races` is ordered while any one of its fences is in.
    struct RaceMock<F> {
        runs: Mock<F>,
        races: Vec<(&'static str, Vec<usize>)>,
        race_sites: Vec<usize>,
    }

    impl<F: FnMut(&Query) -> bool> FenceChecker for RaceMock<F> {
        type Error = Infallible;

        fn check(&mut self, query: &Query) -> Result<bool, Infallible> {
            self.runs.check(query)
        }

        fn unordered_without(
            &mut self,
            current: &[usize],
            reduced: &[usize],
        ) -> Result<Option<String>, Infallible> {
            let ordered = |set: &[usize], by: &[usize]| by.iter().any(|f| set.contains(f));
            Ok(self
                .races
                .iter()
                .find(|(_, by)| ordered(current, by) && !ordered(reduced, by))
                .map(|(pair, _)| pair.to_string()))
        }

        fn race_sites(&mut self) -> Result<Vec<usize>, Infallible> {
            Ok(self.race_sites.clone())
        }
    }

    fn race_mock<F: FnMut(&Query) -> bool>(
        answer: F,
        races: Vec<(&'static str, Vec<usize>)>,
    ) -> RaceMock<F> {
        RaceMock {
            runs: Mock::new(answer),
            races,
            race_sites: Vec::new(),
        }
    }

    /// Issue 25: a fence PTX needs for a pair that no run makes fail (an acquire after a spin)
    /// was dropped because every query passed.
    #[test]
    fn a_fence_whose_removal_leaves_a_race_unordered_is_kept_though_no_run_fails() {
        let mut mock = race_mock(|_: &Query| true, vec![("k.cu:11 -> k.cu:17", vec![2])]);
        let Ok(insertion) = empirical_fence_insertion(&mut mock, &[0, 1, 2, 3, 4], 32, 8);
        assert_eq!(insertion.fences, vec![2]);
        let kept = RaceKept {
            site: 2,
            pair: "k.cu:11 -> k.cu:17".into(),
        };
        assert_eq!(insertion.race_kept, vec![kept]);
        // No query ran without fence 2: the race answered first.
        assert!(mock.runs.queries.iter().all(|q| q.fences.contains(&2)));
    }

    /// Item 2 of issue 31: beside what runs and races need, nothing is kept.
    #[test]
    fn a_fence_neither_a_failing_run_nor_a_race_needs_is_dropped() {
        let pair = "k.cu:3 -> k.cu:9";
        let mut mock = race_mock(needs(&[4]), vec![(pair, vec![1])]);
        let Ok(insertion) =
            empirical_fence_insertion(&mut mock, &(0..8).collect::<Vec<_>>(), 32, 8);
        assert_eq!(insertion.fences, vec![1, 4]);
        let kept: Vec<usize> = insertion.race_kept.iter().map(|k| k.site).collect();
        assert_eq!(kept, vec![1]);
        assert!(insertion.stable);
    }

    /// A pair that either of two fences orders keeps one of them, not both.
    #[test]
    fn a_race_two_fences_can_order_keeps_only_one_of_them() {
        let mut mock = race_mock(|_: &Query| true, vec![("k.cu:1 -> k.cu:5", vec![1, 2])]);
        let Ok(insertion) = empirical_fence_insertion(&mut mock, &[0, 1, 2, 3], 32, 8);
        assert_eq!(insertion.fences.len(), 1, "{insertion:?}");
    }

    #[test]
    fn the_sites_in_races_are_asked_about_first() {
        let mut mock = race_mock(needs(&[3]), vec![("k.cu:3 -> k.cu:9", vec![3])]);
        mock.race_sites = vec![3, 5];
        let Ok(insertion) =
            empirical_fence_insertion(&mut mock, &(0..8).collect::<Vec<_>>(), 32, 8);
        assert_eq!(mock.runs.queries[0].fences, vec![3, 5]);
        assert_eq!(mock.runs.queries[0].phase, Phase::Binary);
        assert_eq!(insertion.fences, vec![3]);
        // From {3 5}, binary reduction drops 5, never 3: dropping 3 leaves the race.
        assert!(mock.runs.queries.iter().all(|q| q.fences.contains(&3)));
    }

    /// Weakening every fence's kind one at a time costs a stability check per fence; together,
    /// one for all when they all pass.
    #[test]
    fn kinds_weakened_together_take_one_stability_check_for_all_fences() {
        let mut mock = Mock::new(kinds_oracle);
        let mut context = context(0);
        let floor = BTreeSet::from([1, 2, 3]);
        let Ok(choices) = minimise_kinds(
            &mut mock,
            &[1, 2, 3],
            FenceKind::ScGpu,
            &floor,
            true,
            &mut context,
        );
        assert!(choices.iter().all(|c| c.kind == FenceKind::AcqRelGpu));
        let stability = mock.queries.iter().filter(|q| q.iterations.is_none());
        assert_eq!(stability.count(), 1);
        assert_eq!(mock.queries.len(), 2);
    }

    #[test]
    fn a_group_of_kinds_that_fails_falls_back_to_one_fence_at_a_time() {
        let mut mock = Mock::new(kinds_oracle);
        let mut context = context(0);
        let Ok(choices) = minimise_kinds(
            &mut mock,
            &[1, 2],
            FenceKind::ScGpu,
            &BTreeSet::new(),
            true,
            &mut context,
        );
        // Together at fence.acq_rel.gpu (passes), at fence.acq_rel.cta (fails: site 1 needs
        // gpu scope); then one at a time: site 2 alone takes fence.acq_rel.cta.
        assert_eq!(choices[0].kind, FenceKind::AcqRelGpu);
        assert_eq!(choices[1].kind, FenceKind::AcqRelCta);
    }

    #[test]
    fn fence_kinds_are_ordered_by_scope_and_strength() {
        use FenceKind::*;
        assert!(AcqRelGpu.is_weaker_than(ScGpu));
        assert!(MembarCta.is_weaker_than(ScGpu));
        assert!(AcqRelCta.is_weaker_than(AcqRelGpu) && AcqRelCta.is_weaker_than(MembarCta));
        assert!(!MembarCta.is_weaker_than(AcqRelGpu) && !AcqRelGpu.is_weaker_than(MembarCta));
        assert!(!MembarGl.is_weaker_than(ScGpu) && !ScGpu.is_weaker_than(MembarGl));
        assert!(ScGpu.is_weaker_than(ScSys));
    }
}
