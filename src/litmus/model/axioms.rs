//! The axioms of the PTX memory model over one candidate execution, split by what they need:
//! reads-from alone (No-Thin-Air), the causality order (built from reads-from, the Fence-SC
//! order and the barrier synchronisation), and, per location, the coherence order.
//!
//! Each location gets a total order of its writes (initial write first) that decides its final
//! value; PTX's coherence order is that order kept only between writes that are morally strong
//! or related by causality (racing writes stay unordered), closed transitively. Every axiom
//! that mentions coherence order relates accesses to one location, so each location's orders
//! are checked on their own: an execution is consistent when every location has one that
//! passes.

use super::execution::Skeleton;
use super::relation::{bits, Relation};

/// Reads-from: the write each read (by event index) reads from.
pub type ReadsFrom = Vec<Option<usize>>;

pub fn rf_relation(sk: &Skeleton, rf: &ReadsFrom) -> Relation {
    let mut rel = Relation::empty(sk.len());
    for (r, w) in rf.iter().enumerate() {
        if let Some(w) = w {
            rel.add(*w, r);
        }
    }
    rel
}

/// No-Thin-Air: reads-from and dependencies together have no cycle.
pub fn no_thin_air(sk: &Skeleton, rf: &Relation) -> bool {
    let mut r = rf.clone();
    r.union_with(&sk.dep);
    r.acyclic()
}

/// Observation order: morally strong reads-from, extended through atomic operations that read
/// one write and are read in turn.
pub fn observation(sk: &Skeleton, rf: &Relation) -> Relation {
    let mut msrf = rf.clone();
    msrf.intersect_with(&sk.ms);
    let mut obs = msrf.clone();
    loop {
        let mut through = Relation::empty(sk.len());
        for w in 0..sk.len() {
            for z in bits(obs.row(w)) {
                if sk.events[z].is_rmw() {
                    for r in bits(msrf.row(z)) {
                        through.add(w, r);
                    }
                }
            }
        }
        let before = obs.clone();
        obs.union_with(&through);
        if obs == before {
            return obs;
        }
    }
}

/// Synchronisation of release patterns with acquire patterns: the first event of a pattern
/// whose write is observed by the read of an acquire pattern synchronises with the pattern's
/// last event when the two are morally strong.
pub fn release_acquire(sk: &Skeleton, obs: &Relation) -> Relation {
    let mut sw = Relation::empty(sk.len());
    for w in 0..sk.len() {
        let firsts = sk.release_first[w];
        if firsts == 0 {
            continue;
        }
        for r in bits(obs.row(w)) {
            for x in bits(firsts) {
                for y in bits(sk.acquire_last[r]) {
                    if sk.ms.has(x, y) {
                        sw.add(x, y);
                    }
                }
            }
        }
    }
    sw
}

/// Base causality order (program order, the start of the kernel and synchronisation, closed
/// transitively) and causality order (base causality, and observation followed by it).
pub struct Causality {
    pub base: Relation,
    pub cause: Relation,
}

impl Causality {
    pub fn new(sk: &Skeleton, obs: &Relation, sw: &Relation) -> Causality {
        let mut step = sk.po.clone();
        step.union_with(&sk.init);
        step.union_with(sw);
        let base = step.closure();
        let mut cause = base.clone();
        cause.union_with(&obs.then(&base));
        Causality { base, cause }
    }

    /// Base causality is an order: no memory operation or fence precedes itself (a barrier may,
    /// since barrier events synchronise with each other both ways).
    pub fn is_order(&self, sk: &Skeleton) -> bool {
        (0..sk.len()).all(|e| {
            matches!(sk.events[e].kind, super::program::EventKind::Barrier { .. })
                || !self.base.has(e, e)
        })
    }

    /// Causality, first part: no read precedes in causality order the write it reads from.
    pub fn respects_rf(&self, rf: &Relation) -> bool {
        !rf.cycle_with(&self.cause)
    }
}

/// Fence-SC: no morally strong pair of `fence.sc` is ordered by causality against the chosen
/// Fence-SC order (`order` lists the fences first to last).
pub fn fence_sc(sk: &Skeleton, order: &[usize], cause: &Relation) -> bool {
    order.iter().enumerate().all(|(i, &early)| {
        order[i + 1..]
            .iter()
            .all(|&late| !(sk.ms.has(early, late) && cause.has(late, early)))
    })
}

/// The coherence orders of location `loc` that pass Coherence, Atomicity, Causality and
/// SC-per-location, as the value each leaves in memory.
pub fn final_values(sk: &Skeleton, loc: usize, rf: &ReadsFrom, cause: &Relation) -> Vec<u32> {
    let writes = &sk.writes[loc];
    let init = sk.init_write[loc];
    let accesses: Vec<usize> = (0..sk.len())
        .filter(|&e| sk.events[e].loc() == Some(loc))
        .collect();
    let mut out = Vec::new();
    each_order(&[init], writes, &mut |order| {
        let mut rank = vec![usize::MAX; sk.len()];
        for (i, &w) in order.iter().enumerate() {
            rank[w] = i;
        }
        if coherent(sk, order, &rank, &accesses, rf, cause) {
            let last = *order.last().expect("the initial write is always there");
            let v = sk.events[last].write_value();
            if !out.contains(&v) {
                out.push(v);
            }
        }
    });
    out
}

/// Calls `visit` with `prefix` followed by each ordering of `items`.
pub(super) fn each_order(prefix: &[usize], items: &[usize], visit: &mut impl FnMut(&[usize])) {
    fn extend(
        items: &[usize],
        used: &mut [bool],
        order: &mut Vec<usize>,
        left: usize,
        visit: &mut impl FnMut(&[usize]),
    ) {
        if left == 0 {
            visit(order);
            return;
        }
        for i in 0..items.len() {
            if !used[i] {
                used[i] = true;
                order.push(items[i]);
                extend(items, used, order, left - 1, visit);
                order.pop();
                used[i] = false;
            }
        }
    }
    let mut order = Vec::with_capacity(prefix.len() + items.len());
    order.extend_from_slice(prefix);
    extend(
        items,
        &mut vec![false; items.len()],
        &mut order,
        items.len(),
        visit,
    );
}

fn coherent(
    sk: &Skeleton,
    order: &[usize],
    rank: &[usize],
    accesses: &[usize],
    rf: &ReadsFrom,
    cause: &Relation,
) -> bool {
    // Coherence: causality between writes is coherence order.
    for &w in order {
        for &v in order {
            if cause.has(w, v) && rank[w] >= rank[v] {
                return false;
            }
        }
    }
    let co = ptx_coherence(sk, order, cause);
    // Atomicity: no morally strong write between an RMW and the write it reads from.
    // Causality: a read does not read a write coherence-before one that precedes it causally.
    for &r in accesses {
        let Some(src) = rf[r] else { continue };
        for w in bits(co.row(src)) {
            if w == r {
                continue;
            }
            if sk.events[r].is_rmw() && sk.ms.has(r, w) && co.has(w, r) {
                return false;
            }
            if cause.has(w, r) {
                return false;
            }
        }
    }
    sc_per_location(sk, &co, accesses, rf)
}

/// PTX's coherence order: the chosen total order kept only between writes that are morally
/// strong or related by causality (racing writes are unordered), closed transitively.
fn ptx_coherence(sk: &Skeleton, order: &[usize], cause: &Relation) -> Relation {
    let mut co = Relation::empty(sk.len());
    for (i, &a) in order.iter().enumerate() {
        for &b in &order[i + 1..] {
            if sk.ms.has(a, b) || cause.has(a, b) {
                co.add(a, b);
            }
        }
    }
    co.closure()
}

/// SC-per-location: program order between accesses of the location and the morally strong
/// communication edges (reads-from, coherence, from-reads) have no cycle.
fn sc_per_location(sk: &Skeleton, co: &Relation, accesses: &[usize], rf: &ReadsFrom) -> bool {
    let mut g = Relation::empty(sk.len());
    for &a in accesses {
        for &b in accesses {
            if a == b {
                continue;
            }
            if sk.po.has(a, b) {
                g.add(a, b);
            }
            if !sk.ms.has(a, b) {
                continue;
            }
            let from_read = rf[a].is_some_and(|src| co.has(src, b));
            if rf[b] == Some(a) || co.has(a, b) || from_read {
                g.add(a, b);
            }
        }
    }
    g.acyclic()
}
