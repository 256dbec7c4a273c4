//! A store that takes effect before its thread's deferred load of the same bytes: load
//! buffering on one location (PTX model).
//!
//! PTX keeps program order between accesses of one location only among accesses that are
//! pairwise morally strong (axiom "SC per location"). In `ld.weak r0, [x]; st.weak [x], 1`
//! racing with another thread's `ld.weak r1, [x]; st.weak [x], 2`, the first load may read 2
//! and the second 1: each load reads a write that follows its own thread's store in coherence,
//! and no set of pairwise morally strong accesses sees the cycle. Dat3M's ticket-lock tests
//! with a weak critical section end this way.
//!
//! So a global store that neither releases nor acquires, whose address and value are known
//! and that touches only deferred plain loads of exactly its bytes, may take effect before
//! them. Each such load then reads as from the coherence position its thread had before the
//! store, never a write of its own thread newer than that, and no write morally strong with
//! it that follows the store in coherence: reading that one would observe it, and
//! observation then program order put it before the store in causality, so in coherence
//! ([`PtxMemory::load_before_own`](super::super::ptx_model::PtxMemory::load_before_own));
//! where nothing qualifies any more, a value it could have read before the store. The store
//! carries no view of its thread's that the load could be caused by (it does not release),
//! and anything after it that could synchronise (a fence, release or acquire) waits for the
//! load first, so the load never reads a write its own store caused.

use super::super::isa::*;
use super::super::sched::{BeforeOwn, Deferred, Machine};
use super::{resolve, Region};
use rand::Rng;

impl Machine<'_> {
    /// Whether `inst` is a store that may take effect before the thread's deferred loads of
    /// its bytes (see the module documentation).
    pub(super) fn may_overtake_own_loads(&self, t: usize, base: usize, inst: &Inst) -> bool {
        let Op::St { s, mem } = inst.op else {
            return false;
        };
        let known = |r: Reg| !self.unknown(t, r);
        if mem.n != 1
            || mem.order.releases
            || mem.order.acquires
            || (inst.guard != NO_GUARD && !known(inst.guard & !GUARD_NEGATED))
            || matches!(s[0], Src::Reg(r) if !known(r))
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

    /// On the dice, lets the store `inst` (for which [`Machine::may_overtake_own_loads`]
    /// holds) take effect before the thread's deferred loads of its bytes, recording for each
    /// what it may still read; false when they must be performed first.
    pub(super) fn overtake_own_loads(&mut self, t: usize, base: usize, inst: &Inst) -> bool {
        let Op::St { mem, .. } = inst.op else {
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
            let Some(fallback) = self.effectless_value(t, at, size, p.order) else {
                return false;
            };
            *slot = Some(BeforeOwn { floor, fallback });
        }
        for (i, b) in before.into_iter().enumerate().take(n) {
            if b.is_some() {
                self.threads[t].pending[i].before_own = b;
            }
        }
        true
    }

    /// Whether a deferred load of thread `t` waits for what a store overtook (a fence,
    /// release or acquire must not overtake it then).
    pub(super) fn overtaken_by_own_store(&self, t: usize) -> bool {
        let th = &self.threads[t];
        th.pending[..th.deferred as usize]
            .iter()
            .any(|p| p.before_own.is_some())
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
    /// it is a plain (unrestricted, not read-modify-write) load of exactly those bytes, else
    /// `None`.
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
                let plain = p.rmw.is_none() && p.restricted.is_none();
                (plain && p.addr == at && u64::from(p.ty.bytes()) == size).then_some(p)
            })
    }
}
