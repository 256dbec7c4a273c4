//! Which final states sequential consistency reaches: every interleaving of the threads'
//! traces in which each read returns the value memory holds at that moment, with barriers as
//! rendezvous (a `sync` waits until the barrier's count of arrivals, its quorum or else every
//! thread of the CTA, is reached; phases restart after each completion). As PTX's `exit` says,
//! a barrier of every thread of the CTA is released when the only threads it still waits for
//! have finished.
//!
//! This is the `sc_reachable` column of `expected.csv`: an allowed state SC cannot reach needs
//! a weak behaviour.

use super::barriers::name_and_quorum;
use super::explore::{add_states, next_choice};
use super::program::{Access, EventKind, Program};
use crate::litmus::file::ast::Observed;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// A barrier's identity for the rendezvous: CTA and name.
type BarrierKey = (u32, Vec<u32>);
/// A barrier's current phase: its arrivals, the threads that arrived (a bit each), and its
/// quorum (`None`: every thread of the CTA).
type Arrivals = (u32, u64, Option<u32>);

/// The final states SC reaches (empty when no interleaving finishes).
pub fn sc_states(program: &Program, observed: &[Observed]) -> BTreeSet<Vec<u32>> {
    let mut out = BTreeSet::new();
    if program.threads.iter().any(|t| t.traces.is_empty()) {
        return out;
    }
    let mut choice = vec![0; program.threads.len()];
    loop {
        let mut search = Search {
            program,
            choice: &choice,
            seen: HashSet::new(),
            finals: BTreeSet::new(),
        };
        let start = State {
            pos: vec![0; choice.len()],
            waiting: 0,
            memory: program.initial.clone(),
            arrived: BTreeMap::new(),
        };
        search.visit(start);
        for memory in &search.finals {
            let finals: Vec<Vec<u32>> = memory.iter().map(|v| vec![*v]).collect();
            add_states(program, &choice, &finals, observed, &mut out);
        }
        if !next_choice(program, &mut choice) {
            return out;
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    pos: Vec<usize>,
    /// Threads that arrived at the `sync` at their position and wait for it to complete.
    waiting: u64,
    memory: Vec<u32>,
    arrived: BTreeMap<BarrierKey, Arrivals>,
}

struct Search<'a> {
    program: &'a Program,
    choice: &'a [usize],
    seen: HashSet<State>,
    finals: BTreeSet<Vec<u32>>,
}

impl Search<'_> {
    fn events(&self, t: usize) -> &[super::program::TraceEvent] {
        &self.program.threads[t].traces[self.choice[t]].events
    }

    fn visit(&mut self, state: State) {
        if !self.seen.insert(state.clone()) {
            return;
        }
        let threads = self.choice.len();
        if (0..threads).all(|t| state.pos[t] == self.events(t).len()) {
            self.finals.insert(state.memory);
            return;
        }
        for t in 0..threads {
            if state.waiting >> t & 1 == 1 {
                continue;
            }
            if let Some(next) = self.step(&state, t) {
                self.visit(next);
            }
        }
    }

    /// Thread `t` performs its next event, if it can.
    fn step(&self, state: &State, t: usize) -> Option<State> {
        let event = self.events(t).get(state.pos[t])?;
        let mut next = state.clone();
        match &event.kind {
            EventKind::Memory {
                access,
                loc,
                read,
                write,
                ..
            } => {
                if *access != Access::Write && state.memory[*loc] != *read {
                    return None;
                }
                if *access != Access::Read {
                    next.memory[*loc] = *write;
                }
                next.pos[t] += 1;
            }
            EventKind::Fence { .. } => next.pos[t] += 1,
            EventKind::Barrier { arrive, operands } => {
                let cta = self.program.threads[t].cta;
                let (name, quorum) = name_and_quorum(operands);
                let key = (cta, name.to_vec());
                let phase = next.arrived.entry(key).or_insert((0, 0, quorum));
                phase.0 += 1;
                phase.1 |= 1 << t;
                if *arrive {
                    next.pos[t] += 1;
                } else {
                    next.waiting |= 1 << t;
                }
            }
        }
        self.complete_barriers(&mut next, self.program.threads[t].cta);
        Some(next)
    }

    /// Releases every barrier of `cta` whose phase is complete: its quorum of arrivals, or
    /// without one, every thread of the CTA arrived or finished.
    fn complete_barriers(&self, state: &mut State, cta: u32) {
        let threads = &self.program.threads;
        let complete: Vec<BarrierKey> = (state.arrived.iter())
            .filter(|(key, _)| key.0 == cta)
            .filter(|(_, &(arrivals, arrived, quorum))| match quorum {
                Some(k) => arrivals >= k,
                None => (0..threads.len())
                    .filter(|&u| threads[u].cta == cta)
                    .all(|u| arrived >> u & 1 == 1 || state.pos[u] == self.events(u).len()),
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in complete {
            state.arrived.remove(&key);
            self.release(state, &key);
        }
    }

    /// Lets every thread waiting at barrier `key` go on.
    fn release(&self, state: &mut State, key: &BarrierKey) {
        for u in 0..self.choice.len() {
            if state.waiting >> u & 1 == 0 {
                continue;
            }
            let Some(EventKind::Barrier { operands, .. }) =
                self.events(u).get(state.pos[u]).map(|e| &e.kind)
            else {
                continue;
            };
            let (name, _) = name_and_quorum(operands);
            if self.program.threads[u].cta == key.0 && name == key.1.as_slice() {
                state.waiting &= !(1 << u);
                state.pos[u] += 1;
            }
        }
    }
}
