//! The enumeration of candidate executions: one trace per thread, then reads-from (each read
//! from a write of its value to its location, never from a write later in its own thread), then
//! the Fence-SC order and the barrier arrivals, and last each location's coherence order. The
//! cheap axioms run first, so most candidates die before coherence orders are tried.

use super::axioms::{self, Causality, ReadsFrom};
use super::barriers;
use super::execution::Skeleton;
use super::program::Program;
use super::relation::Relation;
use crate::litmus::file::ast::Observed;
use std::collections::BTreeSet;

/// What the enumeration found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    /// Final states of consistent executions, laid out as the observed values.
    pub states: BTreeSet<Vec<u32>>,
    /// Candidate executions up to the coherence order (traces, reads-from, Fence-SC order,
    /// barrier arrivals) that were tried, and how many of them were consistent.
    pub candidates: u64,
    pub consistent: u64,
}

/// Candidate executions the enumeration tries before it gives up on a test (the largest test of
/// the shared suite, the generated families and Dat3M's loop tests needs about 2.5 million: a
/// three-CTA exchange lock).
pub const MAX_CANDIDATES: u64 = 20_000_000;

/// Why a test is too big to model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooBig {
    /// An execution has more events than a relation holds.
    Events,
    /// More than [`MAX_CANDIDATES`] candidate executions.
    Candidates,
}

/// Every final state the model allows.
pub fn allowed(program: &Program, observed: &[Observed]) -> Result<Found, TooBig> {
    allowed_within(program, observed, MAX_CANDIDATES)
}

/// Every final state the model allows, giving up after `budget` candidate executions.
pub fn allowed_within(
    program: &Program,
    observed: &[Observed],
    budget: u64,
) -> Result<Found, TooBig> {
    let mut found = Found::default();
    let mut choice = vec![0; program.threads.len()];
    if program.threads.iter().any(|t| t.traces.is_empty()) {
        return Ok(found);
    }
    loop {
        let sk = Skeleton::new(program, &choice).ok_or(TooBig::Events)?;
        explore_rf(program, &choice, &sk, observed, &mut found, budget);
        if found.candidates > budget {
            return Err(TooBig::Candidates);
        }
        if !next_choice(program, &mut choice) {
            return Ok(found);
        }
    }
}

/// Advances to the next combination of traces; false after the last.
pub fn next_choice(program: &Program, choice: &mut [usize]) -> bool {
    for (t, c) in choice.iter_mut().enumerate() {
        *c += 1;
        if *c < program.threads[t].traces.len() {
            return true;
        }
        *c = 0;
    }
    false
}

fn explore_rf(
    program: &Program,
    choice: &[usize],
    sk: &Skeleton,
    observed: &[Observed],
    found: &mut Found,
    budget: u64,
) {
    let reads: Vec<usize> = (0..sk.len()).filter(|&e| sk.events[e].reads()).collect();
    let mut candidates = Vec::with_capacity(reads.len());
    for &r in &reads {
        let e = &sk.events[r];
        let from: Vec<usize> = (0..sk.len())
            .filter(|&w| {
                w != r
                    && sk.events[w].writes()
                    && sk.events[w].loc() == e.loc()
                    && sk.events[w].write_value() == e.read_value()
                    && !sk.po.has(r, w)
            })
            .collect();
        if from.is_empty() {
            return;
        }
        candidates.push(from);
    }
    let mut rf: ReadsFrom = vec![None; sk.len()];
    let mut visit = |rf: &ReadsFrom| {
        check(program, choice, sk, rf, observed, found);
        found.candidates <= budget
    };
    assign_rf(sk, &reads, &candidates, &mut rf, &mut visit);
}

/// Gives `reads[0]`, then the next reads, each source in turn from its `candidates`, calling
/// `visit` with each whole reads-from until it returns false (then false); a source two RMWs
/// would both read is skipped (see [`both_read_atomically`]), so the loops of RMWs that
/// lock-free code unrolls do not multiply out.
fn assign_rf(
    sk: &Skeleton,
    reads: &[usize],
    candidates: &[Vec<usize>],
    rf: &mut ReadsFrom,
    visit: &mut impl FnMut(&ReadsFrom) -> bool,
) -> bool {
    let Some((&r, rest)) = reads.split_first() else {
        return visit(rf);
    };
    for &src in &candidates[0] {
        let taken =
            (0..sk.len()).any(|o| rf[o] == Some(src) && both_read_atomically(sk, src, o, r));
        if taken {
            continue;
        }
        rf[r] = Some(src);
        let go_on = assign_rf(sk, rest, &candidates[1..], rf, visit);
        rf[r] = None;
        if !go_on {
            return false;
        }
    }
    true
}

/// Whether RMWs `a` and `b`, both reading `src`, break Atomicity in every coherence order: when
/// the three are pairwise morally strong, SC-per-location puts both after `src`, and the one
/// coherence puts first is a morally strong write between `src` and the other.
fn both_read_atomically(sk: &Skeleton, src: usize, a: usize, b: usize) -> bool {
    let rmw = |e: usize| sk.events[e].is_rmw();
    a != b && rmw(a) && rmw(b) && sk.ms.has(a, b) && sk.ms.has(src, a) && sk.ms.has(src, b)
}

fn check(
    program: &Program,
    choice: &[usize],
    sk: &Skeleton,
    rf: &ReadsFrom,
    observed: &[Observed],
    found: &mut Found,
) {
    let rf_rel = axioms::rf_relation(sk, rf);
    if !axioms::no_thin_air(sk, &rf_rel) {
        found.candidates += 1;
        return;
    }
    let obs = axioms::observation(sk, &rf_rel);
    let release_acquire = axioms::release_acquire(sk, &obs);
    let fence_orders = fence_sc_orders(sk);
    let Some(barrier_syncs) = barriers::synchronisations(sk) else {
        found.candidates += 1;
        return;
    };
    for (order, fence_sync) in &fence_orders {
        for barrier_sync in &barrier_syncs {
            found.candidates += 1;
            let mut sw = release_acquire.clone();
            sw.union_with(fence_sync);
            sw.union_with(barrier_sync);
            let causality = Causality::new(sk, &obs, &sw);
            if !causality.is_order(sk)
                || !causality.respects_rf(&rf_rel)
                || !axioms::fence_sc(sk, order, &causality.cause)
            {
                continue;
            }
            let mut finals = Vec::with_capacity(program.locations.len());
            for loc in 0..program.locations.len() {
                let values = axioms::final_values(sk, loc, rf, &causality.cause);
                if values.is_empty() {
                    break;
                }
                finals.push(values);
            }
            if finals.len() < program.locations.len() {
                continue;
            }
            found.consistent += 1;
            add_states(program, choice, &finals, observed, &mut found.states);
        }
    }
}

/// Every total order of the `fence.sc` events that gives a different synchronisation (only
/// morally strong pairs synchronise), with that synchronisation.
fn fence_sc_orders(sk: &Skeleton) -> Vec<(Vec<usize>, Relation)> {
    let fences: Vec<usize> = (0..sk.len())
        .filter(|&e| sk.events[e].is_sc_fence())
        .collect();
    let mut out: Vec<(Vec<usize>, Relation)> = Vec::new();
    axioms::each_order(&[], &fences, &mut |order| {
        let mut sync = Relation::empty(sk.len());
        for (i, &a) in order.iter().enumerate() {
            for &b in &order[i + 1..] {
                if sk.ms.has(a, b) {
                    sync.add(a, b);
                }
            }
        }
        if !out.iter().any(|(_, s)| *s == sync) {
            out.push((order.to_vec(), sync));
        }
    });
    out
}

/// The final states of one consistent execution: registers from the traces, locations from
/// any of their possible final values.
pub fn add_states(
    program: &Program,
    choice: &[usize],
    finals: &[Vec<u32>],
    observed: &[Observed],
    out: &mut BTreeSet<Vec<u32>>,
) {
    let mut states: Vec<Vec<u32>> = vec![Vec::with_capacity(observed.len())];
    for o in observed {
        match o {
            Observed::Reg { thread, reg } => {
                let v = register(program, choice, *thread, reg);
                for s in &mut states {
                    s.push(v);
                }
            }
            Observed::Loc(name) => {
                let l = program.locations.iter().position(|x| x == name);
                let values = l.map_or_else(|| vec![0], |l| finals[l].clone());
                states = states
                    .into_iter()
                    .flat_map(|s| {
                        values.iter().map(move |v| {
                            let mut s = s.clone();
                            s.push(*v);
                            s
                        })
                    })
                    .collect();
            }
        }
    }
    out.extend(states);
}

pub fn register(program: &Program, choice: &[usize], thread: usize, reg: &str) -> u32 {
    program
        .threads
        .get(thread)
        .and_then(|t| t.traces[choice[thread]].registers.get(reg))
        .copied()
        .unwrap_or(0)
}
