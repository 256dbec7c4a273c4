//! Instructions held back behind a thread's deferred loads (PTX model).
//!
//! PTX orders nothing by program order alone: a later store that does not use a loaded value
//! may take effect before the load reads (load buffering). Compiled code nearly always
//! computes with a loaded value, or stores it, before its next independent store, so a thread
//! that waited at the first use of a deferred load's value would never show it. Arithmetic on
//! such a value, and plain or relaxed global stores of it, are held back instead and
//! performed in program order right after the loads, with the registers they read as they
//! were when issued; what uses none of them runs on. An instruction still waits when it needs
//! a held result, overwrites one or a register held arithmetic reads, or touches the address
//! of a deferred load or held store; a release, acquire or fence waits while a store is held,
//! so that the store stays before it. While races are recorded, a held store keeps the access
//! number it was issued with, as a deferred load does.

use super::super::isa::*;
use super::super::sched::{Held, HeldStore, Machine, MAX_HELD};
use super::{alu, resolve, Access, Hazard, Region};
use crate::device::BackendError;

impl Machine<'_> {
    /// How `inst`, which uses a value not yet known or touches an unperformed access, meets
    /// the deferred loads: held back (`Hold`) when it may be, skipped (`None`) when its known
    /// guard is false, else `Wait`.
    pub(super) fn hold_or_wait(&self, t: usize, base: usize, inst: &Inst) -> Hazard {
        if self.threads[t].n_held == MAX_HELD || !self.may_hold(t, base, inst) {
            return Hazard::Wait;
        }
        if inst.guard == NO_GUARD {
            return Hazard::Hold;
        }
        let slot = inst.guard & !GUARD_NEGATED;
        if self.unknown(t, slot) {
            return Hazard::Wait;
        }
        let negated = inst.guard & GUARD_NEGATED != 0;
        match (self.regs[base + slot as usize] != 0) == negated {
            true => Hazard::None,
            false => Hazard::Hold,
        }
    }

    /// Whether `inst` may be held back: arithmetic whose results no deferred load or held
    /// instruction still needs, or a global store that neither releases nor touches an
    /// unperformed access.
    fn may_hold(&self, t: usize, base: usize, inst: &Inst) -> bool {
        match inst.op {
            Op::St { mem, .. } => {
                !self.orders_others(t, mem.order)
                    && !self.touches_unperformed(t, base, mem)
                    && self
                        .vector_start(base, inst.line, Access::Store, mem)
                        .is_ok_and(|(at, _)| resolve(mem.space, at).0 == Region::Global)
            }
            op => op.dataflow().is_some_and(|f| {
                !f.writes
                    .into_iter()
                    .flatten()
                    .any(|r| self.overwrites(t, r))
            }),
        }
    }

    /// Holds `inst` back (a store with where it goes and the values already known).
    pub(super) fn hold(&mut self, t: usize, base: usize, inst: &Inst) {
        let held = match inst.op {
            Op::St { s, mem } => {
                let (_, at) = resolve(mem.space, self.address(base, mem.addr));
                let known = s.map(|src| match src {
                    Src::Reg(r) if self.unknown(t, r) => None,
                    src => Some(self.val(base, t, src)),
                });
                // Numbered now, so that the recorder takes it in program order.
                let race_pos = match &mut self.races {
                    Some(races) => (0..mem.n).map(|_| races.reserve(t)).min().unwrap_or(0),
                    None => 0,
                };
                Held::Store(HeldStore {
                    line: inst.line,
                    mem,
                    at,
                    s,
                    known,
                    race_pos,
                })
            }
            _ => Held::Arith(Inst {
                guard: NO_GUARD,
                ..*inst
            }),
        };
        let th = &mut self.threads[t];
        th.held[th.n_held as usize] = held;
        th.n_held += 1;
    }

    /// Performs the instructions held back behind the thread's deferred loads, in program
    /// order, once those loads are performed.
    #[inline(never)]
    pub(super) fn perform_held(&mut self, t: usize, base: usize) -> Result<(), BackendError> {
        let n = std::mem::take(&mut self.threads[t].n_held) as usize;
        for i in 0..n {
            match self.threads[t].held[i] {
                Held::Arith(inst) => {
                    self.step(t, base, &inst)?;
                }
                Held::Store(store) => self.perform_held_store(t, base, store)?,
            }
        }
        Ok(())
    }

    fn perform_held_store(
        &mut self,
        t: usize,
        base: usize,
        store: HeldStore,
    ) -> Result<(), BackendError> {
        let size = store.mem.size();
        for k in 0..store.mem.n as usize {
            let v = match store.known[k] {
                Some(v) => v,
                None => self.val(base, t, store.s[k]),
            };
            let at = store.at.wrapping_add(k as u64 * size);
            let v = v & alu::mask(size as u8 * 8);
            self.deferred_race_pos = (store.race_pos != 0).then(|| store.race_pos + k as u32);
            self.store_global(t, store.line, at, size, v, store.mem.order)?;
        }
        Ok(())
    }

    /// Whether thread `t` holds a store back.
    pub(super) fn holds_stores(&self, t: usize) -> bool {
        let th = &self.threads[t];
        th.held[..th.n_held as usize]
            .iter()
            .any(|h| matches!(h, Held::Store(_)))
    }

    /// Whether register `r` of thread `t` waits for a deferred load or held arithmetic.
    pub(super) fn unknown(&self, t: usize, r: Reg) -> bool {
        let th = &self.threads[t];
        th.pending[..th.deferred as usize].iter().any(|p| p.d == r)
            || self.held_arith(t).any(|f| f.writes.contains(&Some(r)))
    }

    /// Whether writing register `r` of thread `t` now would change what a deferred load or
    /// held arithmetic writes or reads.
    pub(super) fn overwrites(&self, t: usize, r: Reg) -> bool {
        let th = &self.threads[t];
        th.pending[..th.deferred as usize].iter().any(|p| p.d == r)
            || self
                .held_arith(t)
                .any(|f| f.writes.contains(&Some(r)) || f.reads.contains(&Some(Src::Reg(r))))
    }

    /// The dataflow of thread `t`'s held arithmetic.
    fn held_arith(&self, t: usize) -> impl Iterator<Item = Dataflow> + '_ {
        let th = &self.threads[t];
        th.held[..th.n_held as usize]
            .iter()
            .filter_map(|h| match h {
                Held::Arith(inst) => inst.op.dataflow(),
                Held::Store(_) => None,
            })
    }

    /// Whether an access through `mem` needs a register not yet known for its address, or
    /// overlaps a deferred load or held store of thread `t`.
    pub(super) fn touches_unperformed(&self, t: usize, base: usize, mem: MemRef) -> bool {
        if mem.addr.base.is_some_and(|r| self.unknown(t, r)) {
            return true;
        }
        let (target, at) = resolve(mem.space, self.address(base, mem.addr));
        if target != Region::Global {
            return false;
        }
        let end = at + mem.size() * u64::from(mem.n);
        let overlaps = |from: u64, bytes: u64| from < end && at < from + bytes;
        let th = &self.threads[t];
        th.pending[..th.deferred as usize]
            .iter()
            .any(|p| overlaps(p.addr, u64::from(p.ty.bytes())))
            || th.held[..th.n_held as usize].iter().any(|h| match h {
                Held::Store(s) => overlaps(s.at, s.mem.size() * u64::from(s.mem.n)),
                Held::Arith(_) => false,
            })
    }
}
