//! Read-modify-writes that a later fence or release of their thread overtakes, while other
//! threads of that ordering's scope live (load buffering through an RMW before a fence).
//!
//! It exists because PTX lets such an RMW be performed after the release in time as long as no
//! execution axiom sees the difference, and two halves of the RMW need two arguments:
//!
//! - *Its read* happens, in PTX terms, before the release in program order, so it may not read
//!   a write that release caused (Causality), nor a write it is morally strong with: that read
//!   would be an observation (or, for an acquire RMW, a synchronisation) whose effects the
//!   release and the accesses after it already went without. So it reads, like a restricted
//!   deferred load, only writes it is not morally strong with, no older than what bound it
//!   when it was overtaken (its *floor*, a coherence key).
//! - *Its write* precedes the release in program order, so every thread that synchronises
//!   with that release (or a later one of the thread: base causality is transitive) must see
//!   it (Coherence, Causality). The write gets its number among its block's writes when it is
//!   overtaken ([`PtxMemory::reserve`]) and becomes the thread's newest: every view the thread
//!   passes on from then on holds it. Before any thread joins a view that holds it into its
//!   causal past (an acquire, a `fence.sc`; barriers the thread cannot reach with deferred
//!   accesses), the scheduler performs the RMW ([`PtxMemory::must_perform_first`]), so the
//!   write exists, with the number the view holds, before anybody must see it. As nobody
//!   synchronises with the release while the RMW waits, no write it may read was caused by
//!   that release.
//!
//! Morally strong writes of other threads to its location, and writes of another width there,
//! also make the scheduler perform it first; writes of its own thread there wait for it. So
//! the newest message of the location is always one it may read, and it stays atomic. At most
//! one RMW in a launch is overtaken at a time.

use super::tier::{tiers_of, Tier};
use super::{Access, Gpus, PtxMemory, Released};
use crate::isa::Reach;

/// The one overtaken read-modify-write of a launch: its thread, access and reserved write.
#[derive(Debug, Clone, Copy)]
pub struct Overtaken {
    access: Access,
    addr: u64,
    size: u64,
    /// The write's number among its block's writes.
    seq: u32,
}

/// A synchronisation or write that an overtaken RMW of another thread must precede.
#[derive(Debug, Clone, Copy)]
pub enum Syncing {
    /// An acquire fence at `reach` (a `fence.sc` also joins the fence-SC frontiers) by a
    /// thread of `block`.
    Fence { block: u32, reach: Reach, sc: bool },
    /// An acquire operation `access` on `[addr, addr + size)`.
    Acquire {
        access: Access,
        addr: u64,
        size: u64,
    },
    /// A write of `access` to `[addr, addr + size)`.
    Write {
        access: Access,
        addr: u64,
        size: u64,
    },
}

/// Whether accesses at `a` and `b` are morally strong by scope (both strong, each scope
/// including the other's thread).
fn strong_pair(gpus: &Gpus, a: Access, b: Access) -> bool {
    let tier = gpus.tier(a.block, b.block);
    tier.within(a.reach) && tier.within(b.reach)
}

impl PtxMemory {
    /// Whether some RMW is overtaken now (a cheap test before the others).
    pub fn has_overtaken(&self) -> bool {
        self.overtaken.is_some()
    }

    /// The floor of RMW `a` at `[addr, addr + size)` if it may be overtaken now: no other RMW
    /// is, no location of another width overlaps it, and it has a message it may read that it
    /// is not morally strong with (newer than every morally strong one, not its thread's).
    /// The floor is the coherence key of the oldest message its causal past and coherence let
    /// it read (0 when the location has no history).
    pub fn rmw_floor(&self, a: Access, addr: u64, size: u64) -> Option<u64> {
        if self.overtaken.is_some() || self.overlapping(addr, size).1 > 0 {
            return None;
        }
        let Some(loc) = self.tracked_location(addr, size) else {
            return Some(0);
        };
        let lower = loc.lower_bound(
            a.thread,
            self.past[a.thread as usize].as_ref(),
            self.late_floor(a.thread, addr),
        );
        let floor = loc.msgs[lower].co;
        (!self.overtaken_choices(a, addr, size, floor).is_empty()).then_some(floor)
    }

    /// Reserves the write of RMW `a` at `[addr, addr + size)`, overtaken now: its number
    /// among its block's writes, made the thread's newest, so that every view the thread
    /// passes on from now holds it. Returns the number.
    pub fn reserve(&mut self, a: Access, addr: u64, size: u64) -> u32 {
        let b = a.block as usize;
        self.seq[b] += 1;
        let seq = self.seq[b];
        self.own[a.thread as usize] = (a.block, seq);
        self.overtaken = Some(Overtaken {
            access: a,
            addr,
            size,
            seq,
        });
        seq
    }

    /// How far below the newest each message the overtaken RMW `a` may read lies (0: the
    /// newest), oldest first: at or above `floor`, newer than every message morally strong
    /// with it, and not its thread's.
    pub fn overtaken_choices(&self, a: Access, addr: u64, size: u64, floor: u64) -> Vec<usize> {
        let Some(loc) = self.tracked_location(addr, size) else {
            return vec![0];
        };
        let strong =
            |m: &super::Message| super::morally_strong(&self.gpus, m, a.thread, a.block, a.reach);
        let from = loc.msgs.iter().rposition(strong).map_or(0, |i| i + 1);
        let last = loc.msgs.len() - 1;
        (from..=last)
            .filter(|&i| {
                let m = &loc.msgs[i];
                m.co >= floor && (m.ts == 0 || m.writer != a.thread)
            })
            .map(|i| last - i)
            .collect()
    }

    /// Performs the overtaken RMW `a` with its reserved write number `seq`: as
    /// [`PtxMemory::atomic`], reading the message `back` places below the newest (one of
    /// [`PtxMemory::overtaken_choices`], which it is not morally strong with: no observation,
    /// no acquire). Returns whether memory must hold `new`.
    #[allow(clippy::too_many_arguments)]
    pub fn perform_overtaken(
        &mut self,
        a: Access,
        addr: u64,
        size: u64,
        back: usize,
        before: u64,
        new: Option<u64>,
        seq: u32,
        place: impl FnOnce(usize) -> usize,
    ) -> bool {
        self.overtaken = None;
        self.reserved_seq = Some(seq);
        let newest = self.atomic(a, addr, size, back, before, new, place);
        self.reserved_seq = None;
        newest
    }

    /// The thread whose overtaken RMW must be performed before thread `t` does `what`: when
    /// `what` would join a view holding that RMW's reserved write into `t`'s causal past, or
    /// is a write to its location that is morally strong with it or of another width.
    pub fn must_perform_first(&self, t: u32, what: Syncing) -> Option<u32> {
        let o = self.overtaken?;
        if o.access.thread == t {
            return None;
        }
        let holds = |v: &Released| v.as_ref().is_some_and(|v| v.covers(o.access.block, o.seq));
        let s = &self.sync[t as usize];
        // What an acquire at `reach` takes of what the thread collected.
        let collected = |reach: Reach| tiers_of(reach).any(|t| holds(&s.acq[t as usize]));
        let reached = match what {
            Syncing::Fence { block, reach, sc } => {
                let frontier = |t: Tier| {
                    let v = self.sc.get(&self.gpus.group(t, block));
                    v.is_some_and(|v| v.covers(o.access.block, o.seq))
                };
                collected(reach) || (sc && tiers_of(reach).any(frontier))
            }
            Syncing::Acquire { access, addr, size } => {
                collected(access.reach) || self.released_here(access, addr, size, &holds)
            }
            Syncing::Write { access, addr, size } => {
                let overlaps = addr < o.addr + o.size && o.addr < addr + size;
                overlaps
                    && (addr != o.addr
                        || size != o.size
                        || strong_pair(&self.gpus, access, o.access))
            }
        };
        reached.then_some(o.access.thread)
    }

    /// Whether a message acquire `a` of `[addr, addr + size)` may read (of its location or one
    /// it overlaps) and synchronise with released a view that `holds` accepts and `a` would
    /// take: one it is morally strong with, its view to the reader's tier.
    fn released_here(
        &self,
        a: Access,
        addr: u64,
        size: u64,
        holds: &impl Fn(&Released) -> bool,
    ) -> bool {
        let (keys, n) = self.overlapping(addr, size);
        std::iter::once(addr)
            .chain(keys[..n].iter().copied())
            .filter_map(|at| self.locations.get(&at))
            .flat_map(|loc| loc.msgs.iter())
            .filter(|m| super::morally_strong(&self.gpus, m, a.thread, a.block, a.reach))
            .any(|m| holds(&m.views[self.gpus.tier(a.block, m.block) as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx_model::tests::{access, as_newest as newest};

    const X: u64 = 0x1000;
    const Y: u64 = 0x2000;

    /// Thread 0 of block 0 overtakes its relaxed cta-scope RMW of `X` (add 1 to 0) with
    /// `fence.acq_rel.cta` and a flag store to `Y`; returns the RMW's access and reserved number.
    fn overtake_then_publish(m: &mut PtxMemory) -> (Access, u32) {
        let rmw = access(0, 0, Reach::Cta);
        let floor = m.rmw_floor(rmw, X, 4).expect("X has a message it may read");
        assert_eq!(floor, 0);
        let seq = m.reserve(rmw, X, 4);
        m.fence_acq_rel(0, Reach::Cta);
        m.store(access(0, 0, Reach::Cta), Y, 4, 0, 1, newest);
        (rmw, seq)
    }

    /// Regression (load buffering through an RMW before a fence that a live thread of its CTA
    /// could synchronise with was never shown): the RMW may be performed after the fence, but
    /// a thread that synchronises with the fence makes it be performed first and then never
    /// reads below its write.
    #[test]
    fn a_thread_that_synchronises_with_the_overtaking_release_sees_the_overtaken_write() {
        let mut m = PtxMemory::new(3, 2);
        let (rmw, seq) = overtake_then_publish(&mut m);
        // Thread 1 (block 0) reads the flag strongly: no synchronisation yet.
        let reader = access(1, 0, Reach::Cta);
        assert_eq!(m.load(reader, Y, 4, 1, u32::MAX, 0), 1);
        let fence = Syncing::Fence {
            block: 0,
            reach: Reach::Cta,
            sc: false,
        };
        // Its acquire fence would take the release: the RMW must be performed first.
        assert_eq!(m.must_perform_first(1, fence), Some(0));
        // It reads the value X held (the only message it may read) and writes 1.
        assert_eq!(m.overtaken_choices(rmw, X, 4, 0), vec![0]);
        m.perform_overtaken(rmw, X, 4, 0, 0, Some(1), seq, newest);
        assert_eq!(m.must_perform_first(1, fence), None);
        m.fence_acq_rel(1, Reach::Cta);
        // Thread 1 now reads X at or after the RMW's write only; thread 2 (no
        // synchronisation) may still read the value before it.
        let reads = |m: &PtxMemory, t: u32, block: u32| {
            let mut v: Vec<u64> = (0..5)
                .map(|pick| {
                    let mut c = crate::ptx_model::tests::clone(m);
                    let older = if pick == 4 { 0 } else { u32::MAX };
                    c.load(access(t, block, Reach::Weak), X, 4, 1, pick, older)
                })
                .collect();
            v.sort();
            v.dedup();
            v
        };
        assert_eq!(reads(&m, 1, 0), vec![1]);
        assert_eq!(reads(&m, 2, 1), vec![0, 1]);
    }

    #[test]
    fn an_overtaken_rmw_reads_no_write_it_is_morally_strong_with() {
        let mut m = PtxMemory::new(3, 2);
        m.store(access(1, 0, Reach::Cta), X, 4, 0, 1, newest);
        // The newest message of X is morally strong with a cta-scope RMW of block 0: it may
        // not be overtaken now.
        assert_eq!(m.rmw_floor(access(0, 0, Reach::Cta), X, 4), None);
        // A weak write after it may be read.
        m.store(access(2, 1, Reach::Weak), X, 4, 1, 2, newest);
        let rmw = access(0, 0, Reach::Cta);
        let floor = m.rmw_floor(rmw, X, 4).expect("the weak write");
        assert_eq!(m.overtaken_choices(rmw, X, 4, floor), vec![0]);
    }

    #[test]
    fn a_morally_strong_write_of_another_thread_waits_for_the_overtaken_rmw() {
        let mut m = PtxMemory::new(3, 2);
        overtake_then_publish(&mut m);
        // The thread that must perform its overtaken RMW before `access` writes `size` bytes at X.
        let first_before_write = |access: Access, size| {
            let write = Syncing::Write {
                access,
                addr: X,
                size,
            };
            m.must_perform_first(access.thread, write)
        };
        assert_eq!(first_before_write(access(1, 0, Reach::Cta), 4), Some(0));
        assert_eq!(first_before_write(access(2, 1, Reach::Gpu), 4), None);
        assert_eq!(first_before_write(access(2, 1, Reach::Weak), 8), Some(0));
        // Its own thread's accesses wait in the scheduler instead.
        assert_eq!(first_before_write(access(0, 0, Reach::Cta), 4), None);
        // Another block's acquire of the flag cannot take a cta-scope release.
        let acquire = Syncing::Acquire {
            access: access(2, 1, Reach::Gpu),
            addr: Y,
            size: 4,
        };
        assert_eq!(m.must_perform_first(2, acquire), None);
    }
}
