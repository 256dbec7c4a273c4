//! Whether a litmus test can end at all under PTX's barriers, as the translation runs it (each
//! litmus thread a warp of its own): the proof the conformance table needs before it calls a
//! test whose runs all deadlocked "no final state", rather than a guess from launches that hung.
//!
//! The proof covers tests whose barrier steps do not depend on memory: no branches, and every
//! barrier operand an immediate or a register whose value at that step is fixed (initial
//! values, `ld r, imm`, arithmetic on fixed values). Each thread then meets a fixed sequence of
//! barriers, and a search over every order in which the threads take their next barrier step
//! or exit decides whether some order lets every thread end. The rules are the simulator's: a
//! barrier completes once its count of litmus threads, or else every live thread of the CTA,
//! has arrived; `sync` waits for the completion and `arrive` does not; a completion starts a
//! new phase; a thread that exited is not waited for.

use super::ast::{Arith, CtaId, Instr, LitmusFile, Thread, Value};
use super::kernel::initial_registers;
use std::collections::{BTreeMap, HashSet};

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finishing {
    /// No order of the barrier steps lets every thread end: every execution deadlocks.
    Never,
    /// Some order does.
    Possible,
    /// Not decided, and why.
    Unproved(String),
}

/// One barrier step of a thread, its operands evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct BarStep {
    id: i64,
    /// Litmus threads that complete the barrier; `None`: every live thread of the CTA.
    count: Option<i64>,
    wait: bool,
}

/// Whether `test` can end (see the module doc).
pub fn finishing(test: &LitmusFile) -> Finishing {
    let mut plans = Vec::new();
    for t in &test.threads {
        match barrier_plan(test, t) {
            Ok(plan) => plans.push(plan),
            Err(why) => return Finishing::Unproved(why),
        }
    }
    if plans.iter().all(Vec::is_empty) {
        return Finishing::Possible;
    }
    let ctas: Vec<CtaId> = test.threads.iter().map(Thread::cta_id).collect();
    let search = Search {
        plans: &plans,
        ctas: &ctas,
    };
    let start = State {
        pos: vec![0; plans.len()],
        waiting: vec![false; plans.len()],
        exited: vec![false; plans.len()],
        barriers: BTreeMap::new(),
    };
    match search.can_end(start) {
        true => Finishing::Possible,
        false => Finishing::Never,
    }
}

/// The barrier steps thread `t` takes, or why they are not fixed.
fn barrier_plan(test: &LitmusFile, t: &Thread) -> Result<Vec<BarStep>, String> {
    let mut regs: BTreeMap<String, Option<i64>> = initial_registers(test, t)
        .map_err(|r| r.reason)?
        .into_iter()
        .map(|(r, v)| (r, Some(i64::from(v as i32))))
        .collect();
    let cta_threads = test
        .threads
        .iter()
        .filter(|u| u.cta_id() == t.cta_id())
        .count() as i64;
    let mut plan = Vec::new();
    for step in &t.code {
        let value = |regs: &BTreeMap<String, Option<i64>>, v: &Value| match v {
            Value::Imm(i) => Some(*i),
            Value::Reg(r) => regs.get(r).copied().unwrap_or(Some(0)),
        };
        match &step.instr {
            Instr::Branch { .. } | Instr::Goto(_) => {
                return Err(format!(
                    "line {}: a branch (the barriers a thread meets may depend on memory)",
                    step.line
                ))
            }
            Instr::Load { dst, .. } | Instr::Atom { dst, .. } => {
                regs.insert(dst.clone(), None);
            }
            Instr::Move { dst, value } => {
                regs.insert(dst.clone(), Some(*value));
            }
            Instr::Arith { op, dst, a, b } => {
                let v = value(&regs, a)
                    .zip(value(&regs, b))
                    .and_then(|(a, b)| arith(*op, a, b));
                regs.insert(dst.clone(), v);
            }
            Instr::Barrier { arrive, operands } => {
                let (id, count) = match operands.as_slice() {
                    [id] | [_, id] => (id, None),
                    [_, id, count] => (id, Some(count)),
                    _ => return Err(format!("line {}: a barrier's operands", step.line)),
                };
                let fixed = |v| {
                    value(&regs, v).ok_or_else(|| {
                        format!("line {}: a barrier operand read from memory", step.line)
                    })
                };
                let id = fixed(id)?;
                let count = count.map(fixed).transpose()?;
                if !(0..16).contains(&id) || count.is_some_and(|n| n < 1) {
                    return Err(format!("line {}: a barrier that faults", step.line));
                }
                plan.push(BarStep {
                    id,
                    count: count.or(arrive.then_some(cta_threads)),
                    wait: !arrive,
                });
            }
            _ => {}
        }
    }
    Ok(plan)
}

/// `a op b` as the translation computes it (32-bit signed), `None` for a division by 0.
fn arith(op: Arith, a: i64, b: i64) -> Option<i64> {
    let (a, b) = (a as i32, b as i32);
    let v = match op {
        Arith::Add => a.wrapping_add(b),
        Arith::Sub => a.wrapping_sub(b),
        Arith::Mul => a.wrapping_mul(b),
        Arith::Div => a.checked_div(b)?,
    };
    Some(i64::from(v))
}

/// The threads' progress through their barrier steps.
#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    pos: Vec<usize>,
    waiting: Vec<bool>,
    exited: Vec<bool>,
    /// Per (CTA, barrier id) in its current phase: arrivals, and the count the last gave.
    barriers: BTreeMap<(CtaId, i64), (i64, Option<i64>)>,
}

struct Search<'a> {
    plans: &'a [Vec<BarStep>],
    ctas: &'a [CtaId],
}

impl Search<'_> {
    /// Whether some order of steps from `start` lets every thread end.
    fn can_end(&self, start: State) -> bool {
        let mut seen = HashSet::new();
        let mut todo = vec![start];
        while let Some(state) = todo.pop() {
            if state.exited.iter().all(|&e| e) {
                return true;
            }
            if !seen.insert(state.clone()) {
                continue;
            }
            for t in 0..self.plans.len() {
                if !state.waiting[t] && !state.exited[t] {
                    todo.push(self.step(&state, t));
                }
            }
        }
        false
    }

    /// Thread `t` takes its next barrier step, or exits after its last.
    fn step(&self, state: &State, t: usize) -> State {
        let mut next = state.clone();
        let cta = self.ctas[t];
        let Some(step) = self.plans[t].get(state.pos[t]) else {
            next.exited[t] = true;
            let ids: Vec<i64> = next
                .barriers
                .keys()
                .filter(|k| k.0 == cta)
                .map(|k| k.1)
                .collect();
            for id in ids {
                self.complete_if_due(&mut next, cta, id);
            }
            return next;
        };
        let entry = next.barriers.entry((cta, step.id)).or_insert((0, None));
        entry.0 += 1;
        entry.1 = step.count;
        match step.wait {
            true => next.waiting[t] = true,
            false => next.pos[t] += 1,
        }
        self.complete_if_due(&mut next, cta, step.id);
        next
    }

    /// Completes barrier `id` of `cta` if its count, or every live thread of the CTA, arrived:
    /// the threads waiting there go on and the barrier starts a new phase.
    fn complete_if_due(&self, state: &mut State, cta: CtaId, id: i64) {
        let Some(&(arrived, count)) = state.barriers.get(&(cta, id)) else {
            return;
        };
        let live = (0..self.plans.len())
            .filter(|&u| self.ctas[u] == cta && !state.exited[u])
            .count() as i64;
        if arrived < count.unwrap_or(live) {
            return;
        }
        state.barriers.remove(&(cta, id));
        for u in 0..self.plans.len() {
            let here = self.plans[u].get(state.pos[u]).map(|s| s.id);
            if state.waiting[u] && self.ctas[u] == cta && here == Some(id) {
                state.waiting[u] = false;
                state.pos[u] += 1;
            }
        }
    }
}
