//! A litmus file's threads as the finite sets of traces they can execute: each trace is the
//! list of events one thread performs when its reads return given values, with the values
//! written, the registers it ends with, and on which earlier reads each event depends.
//!
//! Reads may return any value some write of the test can store to their location (the values
//! are found by iterating to a fixed point, so values computed from other reads count too).
//! Branches are followed. A spin loop (loads and exits only) is left on its first iteration,
//! which loses no final state (see `Walker::spin`); any other backward jump is taken at most
//! [`LOOP_BOUND`] times, and a trace that would need more is dropped as an execution that does
//! not finish within the bound (herd and Dat3M unroll loops the same way).

use crate::litmus::file::ast::*;
use crate::litmus::file::kernel::{initial_registers, refuse, Refusal};
use std::collections::{BTreeMap, BTreeSet};

/// Times one thread may jump backwards in a trace.
pub const LOOP_BOUND: usize = 2;
/// Ways of computing a location's values before the test is refused.
const MAX_VALUES: usize = 4096;
/// Events one thread may perform in a trace.
const MAX_THREAD_EVENTS: usize = 48;

/// How strong a memory operation is: `weak`, or strong at a scope (`volatile` is relaxed at
/// system scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strength {
    Weak,
    Strong(Scope),
}

/// What a memory operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// A read and a write performed as one atomic operation (`atom`, `red`).
    Rmw,
}

/// One event of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    Memory {
        access: Access,
        loc: usize,
        /// The value read (reads and RMWs).
        read: u32,
        /// The value written (writes and RMWs).
        write: u32,
        strength: Strength,
        release: bool,
        acquire: bool,
        /// `atom` or `red` (including a `cas` that failed and only read).
        atomic: bool,
        /// A `red`: its read is not a read operation (it returns nothing and forms no
        /// acquire pattern).
        red: bool,
    },
    Fence {
        sc: bool,
        scope: Scope,
    },
    Barrier {
        arrive: bool,
        /// The operands as evaluated: the barrier id, then any further operands.
        operands: Vec<u32>,
    },
}

/// An event with the line it comes from and the reads (indices into the trace) it depends on
/// through data or control.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    pub line: usize,
    pub kind: EventKind,
    pub deps: u64,
}

/// One way a thread can run to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub events: Vec<TraceEvent>,
    /// Final value of every register the thread wrote or was given.
    pub registers: BTreeMap<String, u32>,
}

/// The test as the model sees it.
#[derive(Debug, Clone)]
pub struct Program {
    pub locations: Vec<String>,
    pub initial: Vec<u32>,
    /// Per thread: its CTA and its traces.
    pub threads: Vec<ThreadTraces>,
}

#[derive(Debug, Clone)]
pub struct ThreadTraces {
    /// The thread's CTA, numbered across GPUs (CTA 0 of GPU 0 and CTA 0 of GPU 1 differ).
    pub cta: u32,
    pub gpu: u32,
    pub traces: Vec<Trace>,
}

/// Builds the traces of every thread, or refuses the test.
pub fn build(test: &LitmusFile) -> Result<Program, Refusal> {
    check_placement(test)?;
    let locations = test.locations();
    let initial = locations
        .iter()
        .map(|loc| match test.initial(loc) {
            None => Ok(0),
            Some(InitValue::Int(v)) => Ok(*v as u32),
            Some(InitValue::Address(a)) => Err(refuse(
                test,
                init_line(test, loc),
                format!("{loc}={a}"),
                "initial values that are addresses",
            )),
            Some(InitValue::Alias { proxy, target }) => Err(refuse(
                test,
                init_line(test, loc),
                format!("{loc} @ {proxy} aliases {target}"),
                "proxy aliases (a location seen through another proxy)",
            )),
        })
        .collect::<Result<Vec<u32>, Refusal>>()?;
    for t in &test.threads {
        for step in &t.code {
            if let Instr::Unknown(text) = &step.instr {
                return Err(refuse(
                    test,
                    step.line,
                    text.clone(),
                    "an instruction the model does not know",
                ));
            }
        }
    }
    let domains = value_domains(test, &locations, &initial)?;
    let plain: Vec<Domain> = domains
        .iter()
        .map(|d| d.iter().map(|(v, _)| (*v, Prov::new())).collect())
        .collect();
    let ctas: Vec<CtaId> = test
        .threads
        .iter()
        .map(Thread::cta_id)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let threads = test
        .threads
        .iter()
        .map(|t| {
            let (traces, _) = thread_traces(test, t, &locations, &plain, false)?;
            Ok(ThreadTraces {
                cta: ctas
                    .iter()
                    .position(|c| *c == t.cta_id())
                    .unwrap_or_default() as u32,
                gpu: t.gpu,
                traces,
            })
        })
        .collect::<Result<Vec<_>, Refusal>>()?;
    Ok(Program {
        locations,
        initial,
        threads,
    })
}

/// The dynamic writes (thread, instruction, loop iteration) a value was computed through.
type Prov = BTreeSet<(usize, usize, usize)>;
/// The values a location may hold, each with the writes it was computed through.
type Domain = BTreeSet<(u32, Prov)>;
/// Values written, by location, with their provenance.
type Produced = Vec<(usize, (u32, Prov))>;

/// The values each location can hold. A value stored is computed from values read, each
/// written by an earlier write; No-Thin-Air keeps these chains acyclic, so a chain that would
/// pass through the same dynamic write twice gives no value. Iterating to the fixed point with
/// that rule ends, and finds every value an execution can see.
fn value_domains(
    test: &LitmusFile,
    locations: &[String],
    initial: &[u32],
) -> Result<Vec<Domain>, Refusal> {
    let mut domains: Vec<Domain> = initial
        .iter()
        .map(|v| BTreeSet::from([(*v, Prov::new())]))
        .collect();
    loop {
        let mut grown = domains.clone();
        for t in &test.threads {
            let (_, produced) = thread_traces(test, t, locations, &domains, true)?;
            for (loc, entry) in produced {
                insert_minimal(&mut grown[loc], entry);
            }
        }
        if let Some(l) = grown.iter().position(|d| d.len() > MAX_VALUES) {
            return Err(refuse(
                test,
                test.header_line,
                locations[l].clone(),
                format!("a location whose value can be computed in more than {MAX_VALUES} ways"),
            ));
        }
        if grown == domains {
            return Ok(domains);
        }
        domains = grown;
    }
}

/// Adds `(v, prov)` to `domain` unless a way of computing `v` through a subset of `prov` is
/// there already, and drops the ways through supersets of `prov`. A chain through fewer writes
/// meets the no-cycle rule whenever a chain through more does and gives the same value, so the
/// values found are the same; without this, RMW loops (each iteration a new provenance of the
/// same value) grow a domain exponentially.
fn insert_minimal(domain: &mut Domain, (v, prov): (u32, Prov)) {
    if domain.iter().any(|(w, p)| *w == v && p.is_subset(&prov)) {
        return;
    }
    domain.retain(|(w, p)| *w != v || !prov.is_subset(p));
    domain.insert((v, prov));
}

fn check_placement(test: &LitmusFile) -> Result<(), Refusal> {
    if let Some(t) = test.threads.iter().find(|t| t.cta.is_none()) {
        return Err(refuse(
            test,
            test.header_line,
            format!("P{}", t.id),
            "a thread without placement (`P0@cta 0,gpu 0`)",
        ));
    }
    Ok(())
}

fn init_line(test: &LitmusFile, name: &str) -> usize {
    test.init
        .iter()
        .find(|i| i.name == name)
        .map_or(test.header_line, |i| i.line)
}

/// The state of a thread part-way through a trace.
#[derive(Clone)]
struct Walk {
    pc: usize,
    regs: BTreeMap<String, Val>,
    ctrl: u64,
    events: Vec<TraceEvent>,
    back_jumps: usize,
}

struct Walker<'a> {
    test: &'a LitmusFile,
    thread: &'a Thread,
    locations: &'a [String],
    domains: &'a [Domain],
    labels: BTreeMap<&'a str, usize>,
    out: Vec<Trace>,
    /// Whether to follow the provenance of values (finding domains) rather than list traces.
    track: bool,
    /// With `track`: the values written, by location.
    produced: Produced,
}

/// A register: its value, the reads of the trace it depends on, and (when tracking) the writes
/// its value was computed through.
#[derive(Clone)]
struct Val {
    v: u32,
    deps: u64,
    prov: Prov,
}

impl Val {
    fn constant(v: u32) -> Val {
        Val {
            v,
            deps: 0,
            prov: Prov::new(),
        }
    }
}

fn thread_traces(
    test: &LitmusFile,
    thread: &Thread,
    locations: &[String],
    domains: &[Domain],
    track: bool,
) -> Result<(Vec<Trace>, Produced), Refusal> {
    let labels = thread
        .code
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match &s.instr {
            Instr::Label(l) => Some((l.as_str(), i)),
            _ => None,
        })
        .collect();
    let regs = initial_registers(test, thread)?
        .into_iter()
        .map(|(name, v)| (name, Val::constant(v)))
        .collect();
    let mut walker = Walker {
        test,
        thread,
        locations,
        domains,
        labels,
        out: Vec::new(),
        track,
        produced: Vec::new(),
    };
    walker.walk(Walk {
        pc: 0,
        regs,
        ctrl: 0,
        events: Vec::new(),
        back_jumps: 0,
    })?;
    Ok((walker.out, walker.produced))
}

impl Walker<'_> {
    fn walk(&mut self, mut w: Walk) -> Result<(), Refusal> {
        while let Some(step) = self.thread.code.get(w.pc) {
            if w.events.len() > MAX_THREAD_EVENTS {
                return Err(refuse(
                    self.test,
                    step.line,
                    step.text.clone(),
                    format!("a thread performing more than {MAX_THREAD_EVENTS} events"),
                ));
            }
            w.pc += 1;
            match &step.instr {
                Instr::Load { sem, dst, loc } => {
                    let (strength, acquire) = strength(*sem);
                    let l = self.loc(loc);
                    for (v, prov) in self.domains[l].clone() {
                        let mut next = w.clone();
                        let deps = 1u64 << next.events.len();
                        next.regs.insert(dst.clone(), Val { v, deps, prov });
                        next.push(step, read_kind(l, v, strength, acquire), 0);
                        self.walk(next)?;
                    }
                    return Ok(());
                }
                Instr::Store { sem, loc, value } => {
                    let (strength, release) = strength(*sem);
                    let val = w.value(value);
                    let l = self.loc(loc);
                    if !self.produce(&w, l, val.v, val.prov.clone()) {
                        return Ok(());
                    }
                    let (v, deps) = (val.v, val.deps);
                    let kind = EventKind::Memory {
                        access: Access::Write,
                        loc: l,
                        read: 0,
                        write: v,
                        strength,
                        release,
                        acquire: false,
                        atomic: false,
                        red: false,
                    };
                    w.push(step, kind, deps);
                }
                instr @ (Instr::Atom { .. } | Instr::Red { .. }) => {
                    let Some(rmw) = instr.rmw() else {
                        unreachable!("atom and red are read-modify-writes")
                    };
                    return self.rmw(w, step, rmw);
                }
                Instr::Fence(f) => {
                    let (sc, scope) = match *f {
                        Fence::Sc(s) | Fence::Membar(s) => (true, s),
                        Fence::AcqRel(s) => (false, s),
                    };
                    w.push(step, EventKind::Fence { sc, scope }, 0);
                }
                Instr::Barrier { arrive, operands } => {
                    let mut deps = 0;
                    let values = operands
                        .iter()
                        .map(|o| {
                            let val = w.value(o);
                            deps |= val.deps;
                            val.v
                        })
                        .collect();
                    let kind = EventKind::Barrier {
                        arrive: *arrive,
                        operands: values,
                    };
                    w.push(step, kind, deps);
                }
                Instr::Branch { cmp, a, b, target } => {
                    let (x, y) = (w.value(a), w.value(b));
                    w.ctrl |= x.deps | y.deps;
                    if cmp.holds_s32(x.v as i32, y.v as i32) && !self.jump(&mut w, step, target)? {
                        return Ok(());
                    }
                }
                Instr::Goto(target) => {
                    if !self.jump(&mut w, step, target)? {
                        return Ok(());
                    }
                }
                Instr::Label(_) => {}
                Instr::Move { dst, value } => {
                    w.regs.insert(dst.clone(), Val::constant(*value as u32));
                }
                Instr::Arith { op, dst, a, b } => {
                    let (
                        Val {
                            v: x,
                            deps: dx,
                            prov: px,
                        },
                        Val {
                            v: y,
                            deps: dy,
                            prov: py,
                        },
                    ) = (w.value(a), w.value(b));
                    let v = match op {
                        Arith::Add => x.wrapping_add(y),
                        Arith::Sub => x.wrapping_sub(y),
                        Arith::Mul => x.wrapping_mul(y),
                        Arith::Div => (x as i32).checked_div(y as i32).unwrap_or(0) as u32,
                    };
                    let prov = px.union(&py).cloned().collect();
                    w.regs.insert(
                        dst.clone(),
                        Val {
                            v,
                            deps: dx | dy,
                            prov,
                        },
                    );
                }
                Instr::Unknown(_) => unreachable!("refused before the walk"),
            }
        }
        let registers = w.regs.into_iter().map(|(r, val)| (r, val.v)).collect();
        self.out.push(Trace {
            events: w.events,
            registers,
        });
        Ok(())
    }

    fn rmw(&mut self, w: Walk, step: &Step, rmw: Rmw<'_>) -> Result<(), Refusal> {
        let l = self.loc(rmw.loc);
        let release = matches!(rmw.sem, RmwSem::Release | RmwSem::AcqRel);
        let acquire = matches!(rmw.sem, RmwSem::Acquire | RmwSem::AcqRel);
        let mut deps = 0;
        let mut arg_prov = Prov::new();
        let args: Vec<u32> = rmw
            .operands
            .iter()
            .map(|o| {
                let val = w.value(o);
                deps |= val.deps;
                arg_prov.extend(val.prov);
                val.v
            })
            .collect();
        for (old, old_prov) in self.domains[l].clone() {
            let mut next = w.clone();
            let me = 1u64 << next.events.len();
            let new = apply(rmw.op, old, &args);
            if let Some(v) = new {
                // The value an exchange or compare-and-swap writes is an operand; the old value
                // decides only whether a `cas` writes (control, not data).
                let prov = if matches!(rmw.op, RmwOp::Exch | RmwOp::Cas) {
                    arg_prov.clone()
                } else {
                    old_prov.union(&arg_prov).cloned().collect()
                };
                if !self.produce(&next, l, v, prov) {
                    continue;
                }
            }
            let kind = EventKind::Memory {
                access: if new.is_some() {
                    Access::Rmw
                } else {
                    Access::Read
                },
                loc: l,
                read: old,
                write: new.unwrap_or(0),
                strength: Strength::Strong(rmw.scope),
                release: release && new.is_some(),
                acquire,
                atomic: true,
                red: rmw.dst.is_none(),
            };
            next.push(step, kind, deps);
            if let Some(d) = rmw.dst {
                next.regs.insert(
                    d.to_string(),
                    Val {
                        v: old,
                        deps: me,
                        prov: old_prov,
                    },
                );
            }
            self.walk(next)?;
        }
        Ok(())
    }

    /// When tracking, records that the write at the walk's position stores `v` computed through
    /// `prov`; false when `prov` already passes through this very write (a cycle).
    fn produce(&mut self, w: &Walk, loc: usize, v: u32, mut prov: Prov) -> bool {
        if !self.track {
            return true;
        }
        if !prov.insert((self.thread.id, w.pc, w.back_jumps)) {
            return false;
        }
        self.produced.push((loc, (v, prov)));
        true
    }

    /// Moves to `target`; false when the trace is dropped for exceeding the loop bound.
    fn jump(&self, w: &mut Walk, step: &Step, target: &str) -> Result<bool, Refusal> {
        let Some(&to) = self.labels.get(target) else {
            return Err(refuse(
                self.test,
                step.line,
                step.text.clone(),
                format!("no label `{target}` in this thread"),
            ));
        };
        if to < w.pc {
            if self.spin(to, w.pc - 1) {
                return Ok(false);
            }
            w.back_jumps += 1;
            if w.back_jumps > LOOP_BOUND {
                return Ok(false);
            }
        }
        w.pc = to;
        Ok(true)
    }

    /// Whether steps `from..=jump` (a backward jump to `from`) are a spin loop: loads,
    /// register arithmetic and branches out of it only. An iteration of such a loop that jumps
    /// back changes nothing but registers the next iteration sets again, and only adds reads
    /// (which can only constrain an execution), so the traces that leave it at once give every
    /// final state; those that jump back are dropped.
    fn spin(&self, from: usize, jump: usize) -> bool {
        let code = &self.thread.code;
        let inside = |label: &String| {
            self.labels
                .get(label.as_str())
                .is_some_and(|&t| (from..=jump).contains(&t))
        };
        code[from..=jump]
            .iter()
            .enumerate()
            .all(|(i, s)| match &s.instr {
                Instr::Load { .. } | Instr::Move { .. } | Instr::Arith { .. } => true,
                Instr::Label(_) => i == 0,
                Instr::Branch { target, .. } => !inside(target) || from + i == jump,
                Instr::Goto(target) => {
                    from + i == jump && self.labels.get(target.as_str()) == Some(&from)
                }
                _ => false,
            })
    }

    fn loc(&self, name: &str) -> usize {
        self.locations
            .iter()
            .position(|l| l == name)
            .expect("every location of the code is in locations()")
    }
}

impl Walk {
    fn value(&self, v: &Value) -> Val {
        match v {
            Value::Imm(i) => Val::constant(*i as u32),
            Value::Reg(r) => self.regs.get(r).cloned().unwrap_or(Val::constant(0)),
        }
    }

    fn push(&mut self, step: &Step, kind: EventKind, deps: u64) {
        self.events.push(TraceEvent {
            line: step.line,
            kind,
            deps: deps | self.ctrl,
        });
    }
}

fn read_kind(loc: usize, value: u32, strength: Strength, acquire: bool) -> EventKind {
    EventKind::Memory {
        access: Access::Read,
        loc,
        read: value,
        write: 0,
        strength,
        release: false,
        acquire,
        atomic: false,
        red: false,
    }
}

/// The value an RMW writes over `old`, or `None` for a `cas` whose comparison failed.
fn apply(op: RmwOp, old: u32, args: &[u32]) -> Option<u32> {
    let a = args.first().copied().unwrap_or(0);
    Some(match op {
        RmwOp::Add => old.wrapping_add(a),
        RmwOp::Sub => old.wrapping_sub(a),
        RmwOp::Exch => a,
        RmwOp::Cas => {
            if old != a {
                return None;
            }
            args.get(1).copied().unwrap_or(0)
        }
        RmwOp::Inc => {
            if old >= a {
                0
            } else {
                old + 1
            }
        }
        RmwOp::Dec => {
            if old == 0 || old > a {
                a
            } else {
                old - 1
            }
        }
        RmwOp::And => old & a,
        RmwOp::Or => old | a,
        RmwOp::Xor => old ^ a,
        // Signed, as the kernel's `atom.min.s32` (a litmus value may be negative).
        RmwOp::Min => (old as i32).min(a as i32) as u32,
        RmwOp::Max => (old as i32).max(a as i32) as u32,
    })
}

/// An access's strength, and whether it is an acquire (load) or release (store).
fn strength(sem: AccessSem) -> (Strength, bool) {
    match sem {
        AccessSem::Weak => (Strength::Weak, false),
        AccessSem::Volatile => (Strength::Strong(Scope::Sys), false),
        AccessSem::Relaxed(s) => (Strength::Strong(s), false),
        AccessSem::Ordered(s) => (Strength::Strong(s), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QA: the model compared min and max unsigned while the kernel runs `atom.min.s32`, so a
    /// min with -1 was forbidden by the model and reached on the simulator (a false UNSOUND).
    #[test]
    fn min_and_max_compare_signed_values_as_the_kernel_does() {
        let minus_one = (-1i32) as u32;
        assert_eq!(apply(RmwOp::Min, 5, &[minus_one]), Some(minus_one));
        assert_eq!(apply(RmwOp::Max, minus_one, &[3]), Some(3));
        assert_eq!(apply(RmwOp::Max, 7, &[3]), Some(7));
    }

    #[test]
    fn a_domain_keeps_only_the_minimal_ways_of_computing_each_value() {
        let prov = |ids: &[usize]| ids.iter().map(|&i| (0, i, 0)).collect::<Prov>();
        let mut domain = Domain::new();
        insert_minimal(&mut domain, (1, prov(&[1, 2])));
        insert_minimal(&mut domain, (1, prov(&[1, 2, 3])));
        insert_minimal(&mut domain, (2, prov(&[1, 2, 3])));
        assert_eq!(
            domain.len(),
            2,
            "a superset way to the same value is not kept"
        );
        insert_minimal(&mut domain, (1, prov(&[2])));
        assert_eq!(
            domain,
            Domain::from([(1, prov(&[2])), (2, prov(&[1, 2, 3]))]),
            "a subset way replaces the ways through more writes"
        );
    }
}
