//! One candidate execution's fixed part: the events of one trace per thread, with program order,
//! the morally-strong relation, dependencies, and the release/acquire pattern ends of each
//! write and read. What is chosen later (reads-from, Fence-SC order, barrier arrivals, coherence
//! order) is not here.

use super::program::{Access, EventKind, Program, Strength, Trace};
use super::relation::{bits, Relation};
use crate::litmus::file::ast::Scope;

/// An event of the execution: an initial write (no thread) or an event of a thread's trace.
#[derive(Debug, Clone)]
pub struct Event {
    pub thread: Option<usize>,
    /// The CTA, numbered across GPUs, and the GPU.
    pub cta: u32,
    pub gpu: u32,
    pub kind: EventKind,
}

impl Event {
    pub fn loc(&self) -> Option<usize> {
        match self.kind {
            EventKind::Memory { loc, .. } => Some(loc),
            _ => None,
        }
    }

    pub fn reads(&self) -> bool {
        matches!(
            self.kind,
            EventKind::Memory {
                access: Access::Read | Access::Rmw,
                ..
            }
        )
    }

    pub fn writes(&self) -> bool {
        matches!(
            self.kind,
            EventKind::Memory {
                access: Access::Write | Access::Rmw,
                ..
            }
        )
    }

    pub fn is_rmw(&self) -> bool {
        matches!(
            self.kind,
            EventKind::Memory {
                access: Access::Rmw,
                ..
            }
        )
    }

    pub fn is_sc_fence(&self) -> bool {
        matches!(self.kind, EventKind::Fence { sc: true, .. })
    }

    pub fn read_value(&self) -> u32 {
        match self.kind {
            EventKind::Memory { read, .. } => read,
            _ => 0,
        }
    }

    pub fn write_value(&self) -> u32 {
        match self.kind {
            EventKind::Memory { write, .. } => write,
            _ => 0,
        }
    }

    /// The scope of a strong operation (fences are strong), `None` for weak ones and barriers.
    fn scope(&self) -> Option<Scope> {
        match self.kind {
            EventKind::Memory {
                strength: Strength::Strong(s),
                ..
            } => Some(s),
            EventKind::Fence { scope, .. } => Some(scope),
            _ => None,
        }
    }

    /// Whether a strong operation of this event's scope includes the thread of `other`.
    fn includes(&self, other: &Event) -> bool {
        match self.scope() {
            // Litmus files have no `.cluster` (the parser refuses it); were one to come, a cluster
            // of one CTA is the narrowest reading, which can only allow more.
            Some(Scope::Cta | Scope::Cluster) => self.cta == other.cta,
            Some(Scope::Gpu) => self.gpu == other.gpu,
            Some(Scope::Sys) => true,
            None => false,
        }
    }
}

/// The fixed part of a candidate execution.
#[derive(Debug, Clone)]
pub struct Skeleton {
    pub events: Vec<Event>,
    /// Program order, transitive, within each thread.
    pub po: Relation,
    /// Initial writes before every event of a thread (the start of the kernel).
    pub init: Relation,
    pub ms: Relation,
    /// Data and control dependencies from reads to later events of their thread.
    pub dep: Relation,
    /// Per location: its initial write, and the other writes.
    pub init_write: Vec<usize>,
    pub writes: Vec<Vec<usize>>,
    /// Per write: the events that can start a release pattern whose write it is.
    pub release_first: Vec<u64>,
    /// Per read: the events that can end an acquire pattern whose read it is.
    pub acquire_last: Vec<u64>,
}

impl Skeleton {
    /// The skeleton of `program` with trace `choice[t]` for thread `t`; `None` with more events
    /// than a relation holds.
    pub fn new(program: &Program, choice: &[usize]) -> Option<Skeleton> {
        let traces: Vec<&Trace> = program
            .threads
            .iter()
            .zip(choice)
            .map(|(t, &c)| &t.traces[c])
            .collect();
        let n = program.locations.len() + traces.iter().map(|t| t.events.len()).sum::<usize>();
        if n > super::relation::MAX_EVENTS {
            return None;
        }
        let mut events = Vec::with_capacity(n);
        for (loc, &value) in program.initial.iter().enumerate() {
            events.push(Event {
                thread: None,
                cta: 0,
                gpu: 0,
                kind: EventKind::Memory {
                    access: Access::Write,
                    loc,
                    read: 0,
                    write: value,
                    strength: Strength::Strong(Scope::Sys),
                    release: false,
                    acquire: false,
                    atomic: false,
                    red: false,
                },
            });
        }
        let mut po = Relation::empty(n);
        let mut dep = Relation::empty(n);
        for (t, trace) in traces.iter().enumerate() {
            let base = events.len();
            for (i, e) in trace.events.iter().enumerate() {
                for j in 0..i {
                    po.add(base + j, base + i);
                }
                for d in bits(e.deps) {
                    dep.add(base + d, base + i);
                }
                events.push(Event {
                    thread: Some(t),
                    cta: program.threads[t].cta,
                    gpu: program.threads[t].gpu,
                    kind: e.kind.clone(),
                });
            }
        }
        let locs = program.locations.len();
        let mut init = Relation::empty(n);
        for i in 0..locs {
            for e in locs..n {
                init.add(i, e);
            }
        }
        let ms = morally_strong(&events);
        let mut writes = vec![Vec::new(); locs];
        for (i, e) in events.iter().enumerate().skip(locs) {
            if let (true, Some(l)) = (e.writes(), e.loc()) {
                writes[l].push(i);
            }
        }
        let release_first = (0..n).map(|w| release_first(&events, &po, w)).collect();
        let acquire_last = (0..n).map(|r| acquire_last(&events, &po, r)).collect();
        Some(Skeleton {
            events,
            po,
            init,
            ms,
            dep,
            init_write: (0..locs).collect(),
            writes,
            release_first,
            acquire_last,
        })
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// PTX's morally strong relation: same thread, or both strong with scopes including each
/// other's thread; memory operations must also be to the same location (every location here
/// is one whole word, so overlapping means equal). Initial writes are morally strong with
/// every access to their location.
fn morally_strong(events: &[Event]) -> Relation {
    let n = events.len();
    let mut ms = Relation::empty(n);
    for a in 0..n {
        for b in 0..n {
            if a != b && strong_pair(&events[a], &events[b]) {
                ms.add(a, b);
            }
        }
    }
    ms
}

fn strong_pair(a: &Event, b: &Event) -> bool {
    let memory = |e: &Event| matches!(e.kind, EventKind::Memory { .. });
    if memory(a) && memory(b) && a.loc() != b.loc() {
        return false;
    }
    if matches!(a.kind, EventKind::Barrier { .. }) || matches!(b.kind, EventKind::Barrier { .. }) {
        return a.thread == b.thread;
    }
    if a.thread.is_none() || b.thread.is_none() {
        return memory(a) && memory(b);
    }
    a.thread == b.thread || (a.includes(b) && b.includes(a))
}

/// For a strong write `w`: `w` if it is a release; release operations on its location before
/// it; release fences (`fence.acq_rel`, `fence.sc`) before it.
fn release_first(events: &[Event], po: &Relation, w: usize) -> u64 {
    let e = &events[w];
    let EventKind::Memory {
        strength: Strength::Strong(_),
        release,
        ..
    } = e.kind
    else {
        return 0;
    };
    if !e.writes() || e.thread.is_none() {
        return 0;
    }
    let releases = |kind: &EventKind| matches!(kind, EventKind::Memory { release: true, .. });
    let before = fences_and(events, e.loc(), |p| po.has(p, w), releases);
    before | if release { 1 << w } else { 0 }
}

/// For a strong read `r` (not a `red`): `r` if it is an acquire; acquire operations on its
/// location after it; acquire fences after it.
fn acquire_last(events: &[Event], po: &Relation, r: usize) -> u64 {
    let e = &events[r];
    let EventKind::Memory {
        strength: Strength::Strong(_),
        acquire,
        red: false,
        ..
    } = e.kind
    else {
        return 0;
    };
    if !e.reads() {
        return 0;
    }
    let acquires = |kind: &EventKind| matches!(kind, EventKind::Memory { acquire: true, .. });
    let after = fences_and(events, e.loc(), |q| po.has(r, q), acquires);
    after | if acquire { 1 << r } else { 0 }
}

/// The events `near` picks that are fences, or operations on `loc` that `picked` picks.
fn fences_and(
    events: &[Event],
    loc: Option<usize>,
    near: impl Fn(usize) -> bool,
    picked: impl Fn(&EventKind) -> bool,
) -> u64 {
    let mut out = 0;
    for (p, event) in events.iter().enumerate().filter(|(p, _)| near(*p)) {
        match event.kind {
            EventKind::Fence { .. } => out |= 1 << p,
            EventKind::Memory { loc: l, .. } if Some(l) == loc && picked(&event.kind) => {
                out |= 1 << p
            }
            _ => {}
        }
    }
    out
}
