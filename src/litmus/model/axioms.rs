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
    /// What a read precedes is what base causality orders after it: observation order starts
    /// at a write, so for a read-modify-write only its write half is observed, and a reader of
    /// that write does not put the RMW's own read after what the reader's thread does next
    /// (a relaxed RMW may read a weak write that a later reader of its own write caused).
    pub fn respects_rf(&self, rf: &Relation) -> bool {
        !rf.cycle_with(&self.base)
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
    let rmws: Vec<usize> = accesses
        .iter()
        .copied()
        .filter(|&r| sk.events[r].is_rmw())
        .collect();
    let may_follow =
        |placed: &[bool], x: usize| may_place(sk, rf, cause, (writes, &rmws), placed, x);
    each_order_where(sk.len(), &[init], writes, &may_follow, &mut |order| {
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

/// Whether write `x` may come next after `order` in a coherence order of one location without
/// a violation the full check would find anyway (a pruning only: every order it keeps is still
/// checked whole). `placed` marks the events already in `order`. `x` may not come before a write
/// that precedes it in causality (Coherence), nor between an RMW in `rmws` and the write it
/// reads from where both edges of coherence are direct and `x` is morally strong with the RMW
/// (Atomicity): without this, the RMWs of a loop unrolled a few times make the enumeration
/// factorial in their number.
fn may_place(
    sk: &Skeleton,
    rf: &ReadsFrom,
    cause: &Relation,
    (writes, rmws): (&[usize], &[usize]),
    placed: &[bool],
    x: usize,
) -> bool {
    let after_its_causes = writes
        .iter()
        .all(|&w| placed[w] || w == x || !cause.has(w, x));
    let direct = |a: usize, b: usize| sk.ms.has(a, b) || cause.has(a, b);
    let splits_no_rmw = rmws.iter().all(|&r| {
        let Some(src) = rf[r] else { return true };
        let open = placed[src] && !placed[r] && r != x && x != src;
        !(open && sk.ms.has(r, x) && direct(src, x) && direct(x, r))
    });
    after_its_causes && splits_no_rmw
}

/// Calls `visit` with `prefix` followed by each ordering of `items`.
pub(super) fn each_order(prefix: &[usize], items: &[usize], visit: &mut impl FnMut(&[usize])) {
    let universe = prefix.iter().chain(items).max().map_or(0, |m| m + 1);
    each_order_where(universe, prefix, items, &|_, _| true, visit);
}

/// Calls `visit` with `prefix` followed by each ordering of `items` (numbers below `universe`)
/// in which every item passes `may_follow(items placed so far, item)` where it is placed.
pub(super) fn each_order_where(
    universe: usize,
    prefix: &[usize],
    items: &[usize],
    may_follow: &impl Fn(&[bool], usize) -> bool,
    visit: &mut impl FnMut(&[usize]),
) {
    struct Search<'a, F, V> {
        items: &'a [usize],
        used: Vec<bool>,
        placed: Vec<bool>,
        order: Vec<usize>,
        may_follow: &'a F,
        visit: &'a mut V,
    }
    impl<F: Fn(&[bool], usize) -> bool, V: FnMut(&[usize])> Search<'_, F, V> {
        fn extend(&mut self, left: usize) {
            if left == 0 {
                (self.visit)(&self.order);
                return;
            }
            for i in 0..self.items.len() {
                let x = self.items[i];
                if self.used[i] || !(self.may_follow)(&self.placed, x) {
                    continue;
                }
                self.used[i] = true;
                self.placed[x] = true;
                self.order.push(x);
                self.extend(left - 1);
                self.order.pop();
                self.placed[x] = false;
                self.used[i] = false;
            }
        }
    }
    let mut placed = vec![false; universe];
    for &p in prefix {
        placed[p] = true;
    }
    let mut order = Vec::with_capacity(prefix.len() + items.len());
    order.extend_from_slice(prefix);
    let mut search = Search {
        items,
        used: vec![false; items.len()],
        placed,
        order,
        may_follow,
        visit,
    };
    search.extend(items.len());
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
