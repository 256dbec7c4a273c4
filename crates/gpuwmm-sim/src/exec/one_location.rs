//! Accesses that need not wait for their thread's deferred load of the same bytes: load
//! buffering on one location (PTX model).
//!
//! PTX keeps program order between accesses of one location only among accesses that are
//! pairwise morally strong (axiom "SC per location"). In `ld.weak r0, [x]; st.weak [x], 1`
//! racing with another thread's `ld.weak r1, [x]; st.weak [x], 2`, the first load may read 2
//! and the second 1: each load reads a write that follows its own thread's store in coherence,
//! and no set of pairwise morally strong accesses sees the cycle. Dat3M's ticket-lock tests
//! with a weak critical section end this way; so does `ld x; atom.exch x` racing with the same.
//!
//! So a global store or RMW whose address and operands are known, that acquires nothing, and
//! that touches only deferred loads of exactly its bytes (not RMWs), may take effect before
//! them. Each such load then reads as from the coherence position its thread had before the
//! write, never a write of its own thread newer than that, and no write morally strong with
//! it that follows the write in coherence: reading that one would observe it, and
//! observation then program order put it before the write in causality, so in coherence
//! ([`PtxMemory::load_before_own`](super::super::ptx_model::PtxMemory::load_before_own));
//! where nothing qualifies any more, a value it could have read before the write. The write
//! carries no view of its thread's that the load could be caused by: a release store, and any
//! fence, release or acquire after it, also restricts the load as one that overtakes a
//! deferred load does (it reads no write that release may have caused, `exec.rs`), and the
//! floor then bounds that restricted read too.
//!
//! A second load of the same bytes that orders nothing joins the deferred ones behind the
//! first instead of waiting for it ([`Machine::may_queue_behind_loads`]): both are performed
//! later, oldest first, so a store after them may overtake both (`ld x; ld x; st x`).

use super::super::isa::*;
use super::super::sched::{BeforeOwn, Deferred, Machine};
use super::{resolve, Region};
use rand::Rng;

impl Machine<'_> {
    /// Whether `inst` is a store or RMW that may take effect before the thread's deferred
    /// loads of its bytes (see the module documentation).
    pub(super) fn may_overtake_own_loads(&self, t: usize, base: usize, inst: &Inst) -> bool {
        let known = |s: Src| !matches!(s, Src::Reg(r) if self.unknown(t, r));
        match inst.op {
            Op::St { s, mem } if mem.n == 1 && !mem.order.acquires && known(s[0]) => {
                self.touches_only_loads_of_its_bytes(t, base, inst.guard, mem)
            }
            Op::Atom { d, b, c, mem, .. }
                if !mem.order.releases
                    && !mem.order.acquires
                    && known(b)
                    && known(c)
                    && !self.overwrites(t, d) =>
            {
                self.touches_only_loads_of_its_bytes(t, base, inst.guard, mem)
            }
            _ => false,
        }
    }

    /// Whether `inst` is a load of exactly the bytes of the thread's deferred loads of its
    /// address (none an RMW, no store held) that orders nothing, with room behind them: it is
    /// deferred behind them rather than waiting ([`Machine::must_defer_load`]).
    pub(super) fn may_queue_behind_loads(&self, t: usize, base: usize, inst: &Inst) -> bool {
        let Op::Ld { d, mem } = inst.op else {
            return false;
        };
        mem.n == 1
            && !self.orders_others(t, mem.order)
            && !self.overwrites(t, d[0])
            && self.threads[t].deferred < super::super::sched::MAX_DEFERRED
            && self.touches_only_loads_of_its_bytes(t, base, inst.guard, mem)
    }

    /// Whether an access through `mem` under `guard`, whose guard and address registers are
    /// known, while thread `t` holds no store, touches deferred accesses of `t` and only loads
    /// (not RMWs) of exactly its global bytes.
    fn touches_only_loads_of_its_bytes(
        &self,
        t: usize,
        base: usize,
        guard: Reg,
        mem: MemRef,
    ) -> bool {
        let known = |r: Reg| !self.unknown(t, r);
        if (guard != NO_GUARD && !known(guard & !GUARD_NEGATED))
            || mem.addr.base.is_some_and(|r| !known(r))
            || self.holds_stores(t)
        {
            return false;
        }
        let (region, at) = resolve(mem.space, self.address(base, mem.addr));
        if region != Region::Global {
            return false;
        }
        let mut same = self.overlapping_loads(t, at, mem.size()).peekable();
        same.peek().is_some() && same.all(|p| p.is_some())
    }

    /// Whether a load of thread `t` through `mem` touches its deferred loads, so that it must
    /// be deferred behind them ([`Machine::may_queue_behind_loads`] let it through): performed
    /// now, it would overtake a load of its own bytes.
    pub(super) fn must_defer_load(&self, t: usize, base: usize, mem: MemRef) -> bool {
        self.threads[t].deferred != 0 && self.touches_unperformed(t, base, mem)
    }

    /// On the dice, lets the store or RMW `inst` (for which
    /// [`Machine::may_overtake_own_loads`] holds) take effect before the thread's deferred
    /// loads of its bytes, recording for each what it may still read (and, for a release
    /// store, restricting the thread's deferred loads as a release that overtakes them does);
    /// false when they must be performed first.
    pub(super) fn overtake_own_loads(&mut self, t: usize, base: usize, inst: &Inst) -> bool {
        let (Op::St { mem, .. } | Op::Atom { mem, .. }) = inst.op else {
            return false;
        };
        if !self.rng.sample(self.half_coin) {
            return false;
        }
        let (_, at) = resolve(mem.space, self.address(base, mem.addr));
        let size = mem.size();
        let floor = self.model.position(t as u32, at, size);
        let n = self.threads[t].deferred as usize;
        let mut before = [None; super::super::sched::MAX_DEFERRED as usize];
        for (i, slot) in before.iter_mut().enumerate().take(n) {
            let p = self.threads[t].pending[i];
            // A load a store overtook already keeps that store's floor.
            if p.addr != at || p.before_own.is_some() {
                continue;
            }
            // A restricted load keeps the value it could read when it was overtaken.
            let fallback = match p.restricted {
                Some(r) => r.fallback,
                None => match self.effectless_value(t, at, size, p.order) {
                    Some(v) => v,
                    None => return false,
                },
            };
            *slot = Some(BeforeOwn { floor, fallback });
        }
        if self.orders_others(t, mem.order) && !self.overtake_deferred(t, false) {
            return false;
        }
        for (i, b) in before.into_iter().enumerate().take(n) {
            if b.is_some() {
                self.threads[t].pending[i].before_own = b;
            }
        }
        true
    }

    /// A deferred load of thread `t` that its own store overtook, performed now.
    pub(super) fn load_before_own(&mut self, t: usize, p: &Deferred, b: BeforeOwn) -> u64 {
        let size = u64::from(p.ty.bytes());
        let pick = self.rng.random::<u32>();
        let a = self.model_access(t, p.order);
        let v = self
            .model
            .load_before_own(a, (p.addr, size), (pick, self.older), b.floor);
        self.record_deferred_load(t, p);
        v.unwrap_or(b.fallback)
    }

    /// For each deferred access of thread `t` overlapping `[at, at + size)`: the load, when
    /// it is a load (not a read-modify-write) of exactly those bytes, else `None`.
    fn overlapping_loads(
        &self,
        t: usize,
        at: u64,
        size: u64,
    ) -> impl Iterator<Item = Option<&Deferred>> + '_ {
        let th = &self.threads[t];
        th.pending[..th.deferred as usize]
            .iter()
            .filter(move |p| p.addr < at + size && at < p.addr + u64::from(p.ty.bytes()))
            .map(move |p| {
                let load = p.rmw.is_none();
                (load && p.addr == at && u64::from(p.ty.bytes()) == size).then_some(p)
            })
    }
}
