//! The PTX memory model of the simulator ([`MemoryModel::Ptx`](super::MemoryModel::Ptx)), the
//! default: per-location histories of writes, and per-thread views of them as vector clocks over
//! the launch's blocks.
//!
//! It exists so that what gpuwmm reports without a GPU (weak outcomes, failing runs, the fences
//! `harden` keeps) is what the PTX memory consistency model (PTX ISA, "Memory Consistency
//! Model") allows, rather than what one store-buffer machine happens to do. It is operational,
//! so whole applications run on it, and it only produces executions the PTX model allows
//! (measured on the litmus suite of `../shared/litmus/ptx/`, see the README).
//!
//! # State
//!
//! - Every global write is a [`Message`]: its value, a timestamp of the launch-wide clock, a
//!   coherence key, and the writer's block with a per-block sequence number. A [`Location`] (an
//!   address written in this launch, with the width of its writes: 1, 2, 4 or 8 bytes) keeps
//!   its newest messages in coherence order.
//!   Global memory always holds the coherence-last value, so the first write of a launch also
//!   records the value it replaced, as a message everybody may read.
//! - Every thread has a *causal past*, a [`View`](view::View): a vector clock with one
//!   sequence number per block ("every write of block `b` up to number `n` happened before
//!   me") and a few single writes. The clock grows with synchronisation (acquire, fences,
//!   barriers). The thread's own writes are not in it: they bound its own reads only through
//!   coherence (per location), and they join what it passes on (releases, `fence.sc`,
//!   barriers). So two threads of one block do not see each other's writes by writing
//!   themselves (store buffering inside a CTA). A write the thread observes through a
//!   morally strong read, or receives from a thread that observed it, is a single write: PTX
//!   puts it in causality order (observation, then base causality) but not the writes its
//!   writer made before it, which only a release of the writer carries.
//! - Every thread also has what it may acquire (the views released by the writers of messages
//!   it read strongly, for a later acquire fence) and what it releases (its causal past at its
//!   last release fence or release operation), per scope.
//! - A location remembers, per thread, the coherence key of the newest message the thread
//!   wrote or read strongly there (coherence). A thread that no longer fits moves the location's floor up instead
//!   (everybody must read at least that), which is stronger, never weaker.
//!
//! # Rules
//!
//! - A load returns a kept message of its location no older than the newest message in its
//!   causal past (or the one before that, when the two are racing weak writes, which PTX leaves
//!   unordered in coherence) and its coherence position (or the one before it, likewise); with
//!   `older_value_probability` an
//!   older one of those it may read. So a write becomes visible to each reader by itself, not to all at once
//!   (no multi-copy atomicity), and a weak load may read an older value than a load before it
//!   (PTX keeps coherence only between morally strong accesses).
//! - A morally strong read (same thread, or both strong with scopes that include each other)
//!   puts the write it reads, as a single write, into what the reader passes on (its own later
//!   reads are held by coherence) and collects the writer's released view; a later acquire
//!   operation (whatever it reads: `ld.relaxed [M]; ld.acquire [M]` is an acquire pattern) or
//!   acquire fence of a matching scope takes what was collected.
//! - Strong writes carry the view of the thread's last release (pattern `fence; st.relaxed`);
//!   release writes release the causal past; weak writes release nothing. A read-modify-write
//!   carries the view of the message it read forward (release sequences); a `cas` that does not
//!   change the value is a read. An RMW reads the newest message, or (with
//!   `older_value_probability`) an older one it may read by causality and coherence that no
//!   newer write morally strong with it follows: atomicity binds only morally strong RMWs, so
//!   two blocks' `atom.cta` on one word can lose an update, and an RMW can read before a racing
//!   weak write.
//! - A write goes above every message it must follow in coherence: the initial value, its
//!   thread's own writes and strong reads there, the writes in its causal past or observed,
//!   and a morally strong RMW it would split from the write that RMW read. Below the newer
//!   ones, which PTX leaves unordered with it or free to follow it, it goes with
//!   `older_value_probability` ([`PtxMemory::store`]): so a store that executes later can
//!   precede a racing store in coherence (2+2W, S, `Manual/CoRW-WW`), and memory keeps the
//!   coherence-last value.
//! - Loads and relaxed RMWs may be deferred (`exec.rs`): later accesses to other addresses
//!   overtake them, and arithmetic on their values and stores of them are held back with
//!   them (`exec/held.rs`). A store of the same bytes that acquires nothing, or such an RMW
//!   that releases nothing either, may overtake a deferred load too
//!   ([`PtxMemory::load_before_own`], `exec/one_location.rs`): the load then reads from its
//!   thread's position before that write, never its own newer writes (load buffering on one
//!   location), and is restricted as below as well where the store releases or a fence or
//!   release follows. A fence, release store or acquire load may overtake a deferred load too;
//!   the load is then *restricted* ([`PtxMemory::restricted_load`]): it reads only a write it
//!   forms no synchronisation with and that no thread wrote after the thread's first
//!   overtaking release ([`PtxMemory::mark`]) with that release in its causal past, or else a
//!   value it could read that way when it was overtaken. Acquire loads are deferred only
//!   restricted; until a fence or release overtakes one, it may also observe a write that
//!   releases nothing (load buffering with acquire loads and relaxed stores). So the load
//!   never synchronises with what it reads, and never reads a write its own later release
//!   caused (which PTX's Causality axiom forbids). It observes a write
//!   (reads one it is morally strong with) only when no fence overtook it (with one it would
//!   form an acquire pattern), no write below that one in coherence may have been caused by
//!   the release, and no read of the location since the release read it or older while its
//!   thread held the release or had seen a newer write ([`PtxMemory::observable_late`], from a
//!   log of the newest 64 reads); every thread holding the release then reads and writes after
//!   it ([`PtxMemory::late_floor`]).
//! - A fence, release or acquire that can synchronise with no other thread
//!   ([`PtxMemory::synchronises_with_nobody`]: at cta scope, its thread is the block's only
//!   live thread and no other thread of the block wrote; at gpu scope, its GPU runs no other
//!   thread) orders nothing another thread can
//!   see: it overtakes deferred loads and RMWs without restricting them, and acq_rel RMWs
//!   and acquire loads at that scope are deferred like relaxed ones.
//! - One that may synchronise may overtake a deferred RMW too, and acq_rel RMWs at its scope
//!   are deferred on these terms (`overtaken.rs`): the RMW reads only a write it is not
//!   morally strong with, no older than what bound it when overtaken; its write's number
//!   among its block's writes is reserved then ([`PtxMemory::reserve`]), so every view its
//!   thread passes on holds it; and the scheduler performs it before any thread acquires
//!   such a view, joins a `fence.sc` frontier holding it, or writes its word morally strongly
//!   or with another width ([`PtxMemory::must_perform_first`]). So a thread that
//!   synchronises with the release sees the RMW's write, and the RMW stays atomic.
//! - `fence.acq_rel` acquires and releases; `fence.sc` also joins the fence-SC frontiers of its
//!   scope (its block's for `.cta`, also its GPU's for `.gpu`, also the system's for `.sys`),
//!   so two morally strong `fence.sc` are ordered one way or the other.
//! - Scopes (`tier.rs`): a launch runs on one GPU unless its blocks are placed on several
//!   (litmus tests across GPUs); then `.gpu` includes only the threads of the same GPU, and
//!   morally strong pairs, released views (kept per tier: same CTA, same GPU, another GPU) and
//!   fence-SC frontiers follow. On one GPU `.sys` reaches what `.gpu` does.
//! - A CTA barrier (ids 0 to 15, `bar.sync`, `bar.red`, `bar.arrive`) collects what
//!   every arriving thread passes on and gives it to the threads that wait there when it
//!   completes; `bar.warp.sync` does the same for the lanes of its mask. A cta-scope release
//!   reaches only readers in the same block.
//!
//! # Where it differs from PTX
//!
//! Only in the stronger direction (it can miss a weak behaviour, and so a bug; it never
//! reports an outcome PTX forbids, measured on `../shared/litmus/ptx/`: 0 UNSOUND; the
//! classes fuzzing found, all fixed, are listed in the crate's README):
//! causality gained through synchronisation is tracked per block, so acquiring one write of a
//! block means seeing every earlier write of that block (by any of its threads), and a release
//! passes on the releasing thread's block's earlier writes with its own; a view keeps observed
//! single writes for at most [`POINTS`](view::POINTS) locations (the newest of each) and folds
//! the rest into its clock, with the same effect for them; coherence order is total, and a
//! reader steps back over a racing write only to the write just before it; a write goes below
//! newer ones only within the kept messages; a release that overtakes a deferred load marks
//! its block's clock (a write number without a message), so views holding it hold the block's
//! earlier writes; only the newest [`KEPT`] messages of a location can be read; an access
//! that overlaps a location written with another width reads the newest value of each
//! location it overlaps (observing those it is morally strong with), and a write of another
//! width forgets their histories; shared memory is sequentially consistent.
//!
//! Weak behaviours PTX allows that it never shows, by reason:
//! - *An overtaken RMW never observes, is performed before anybody synchronises with the
//!   release that overtook it, and is the launch's only one*: load buffering where an RMW
//!   after a fence or release must read a write it is morally strong with, or must still be
//!   unperformed when another thread synchronises with that release, or where two RMWs must
//!   be overtaken at once, is not shown. (A view that holds its write only through the
//!   per-block clock also makes it be performed: stronger, never weaker.)
//! - *A restricted deferred load observes only past a release store, on the terms above*:
//!   load buffering where the load observes another thread's write without synchronising,
//!   past a fence that other threads of its scope could synchronise with, is not shown, nor
//!   where the read log (64 reads) no longer reaches back to the release. (Before 2026-11-28 a
//!   restricted load never observed, and `tests/litmus/RMW-chain+weak-source`, Dat3M's
//!   `rmw-chain-2a` and `LB+RMW-a`, were never reached.)
//! - *No speculation*: a load whose value decides a branch is performed before the branch, so
//!   shapes that need a later access to overtake it past the branch are not shown.
//! - *Per-block synchronisation* (above): MP or WRC shapes among threads of one CTA where a
//!   synchronised thread must still miss an unsynchronised write of its own block.

mod ordering;
mod overtaken;
mod tier;
mod view;

pub use self::ordering::{access_order, fence_order};
pub use self::overtaken::Syncing;
pub use self::tier::Gpus;

use self::tier::{tiers_of, Tier, TIERS};
use self::view::{Point, View};

use super::isa::Reach;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

/// Messages kept per location, the newest included.
pub const KEPT: usize = 4;
/// Threads whose coherence position a location remembers one by one.
const READERS: usize = 8;
/// Reads remembered once a release has overtaken a deferred load (see [`ReadNote`]).
const READ_LOG: usize = 64;
/// Coherence keys of appended writes are their timestamps shifted by this much, so that a write
/// placed between two others gets a key between theirs (up to this many times in one gap).
const CO_SHIFT: u32 = 20;

/// A released view, shared by the messages that carry it.
type Released = Option<Rc<View>>;

/// Released views by the tier of their readers ([`Tier`] as index): what reaches a reader in
/// the writer's CTA, elsewhere on its GPU, and on another GPU. A narrower tier's view holds
/// every wider one's.
type Views = [Released; 3];

/// One write to a location.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// Launch clock; 0 for the value a location held before its first write of the launch.
    pub ts: u32,
    /// Coherence key: messages of a location are in coherence order, which is also the order of
    /// their keys. An appended write's key is its timestamp shifted by [`CO_SHIFT`]; a write
    /// placed below newer ones gets a key between its neighbours'. Keys of a location never
    /// change, so positions and views can hold them.
    pub co: u64,
    pub value: u64,
    pub writer: u32,
    pub block: u32,
    /// The write's number among its block's writes.
    pub seq: u32,
    /// The write's scope if it was strong.
    pub reach: Reach,
    /// What it releases to readers of each tier.
    pub views: Views,
    /// Not ordered after the message before it in coherence: a weak write racing with it (not
    /// morally strong, not causally after it), which PTX leaves unordered.
    pub racing: bool,
    /// For a write of a read-modify-write, the value it read (atomicity binds it to the write
    /// it read).
    pub rmw: Option<u64>,
}

/// A word written during the launch: its newest messages and who has seen how far.
#[derive(Debug, Clone)]
pub struct Location {
    size: u8,
    /// Oldest first.
    msgs: Vec<Message>,
    /// (thread, coherence key of the newest message it wrote or strongly read here).
    readers: [(u32, u64); READERS],
    nreaders: u8,
    floor: u64,
    /// The newest timestamp among messages no longer kept (and, for a location made anew for
    /// another width, the clock when it was made): what a restricted load cannot look at.
    dropped_ts: u32,
}

impl Location {
    /// A location first written when the launch clock reads `clock`, which held `value`;
    /// `dropped_ts` as the field says.
    fn new(size: u8, value: u64, clock: u32, dropped_ts: u32) -> Location {
        let mut msgs = Vec::with_capacity(KEPT);
        msgs.push(Message {
            value,
            co: u64::from(clock) << CO_SHIFT,
            ..Message::default()
        });
        Location {
            size,
            msgs,
            readers: [(0, 0); READERS],
            nreaders: 0,
            floor: 0,
            dropped_ts,
        }
    }

    #[cfg(test)]
    fn newest(&self) -> &Message {
        &self.msgs[self.msgs.len() - 1]
    }

    fn push(&mut self, m: Message) {
        if self.msgs.len() == KEPT {
            let gone = self.msgs.remove(0);
            self.dropped_ts = self.dropped_ts.max(gone.ts);
        }
        self.msgs.push(m);
    }

    /// The coherence key of the newest message thread `t` has written or strongly read here.
    fn position(&self, t: u32) -> u64 {
        self.readers[..self.nreaders as usize]
            .iter()
            .find(|r| r.0 == t)
            .map_or(0, |r| r.1)
            .max(self.floor)
    }

    /// Records that thread `t` has seen the message with coherence key `co`.
    fn advance(&mut self, t: u32, co: u64) {
        let n = self.nreaders as usize;
        if let Some(r) = self.readers[..n].iter_mut().find(|r| r.0 == t) {
            r.1 = r.1.max(co);
        } else if n < READERS {
            self.readers[n] = (t, co);
            self.nreaders += 1;
        } else {
            // No room: everybody must now read at least the smallest position remembered.
            let (i, smallest) = (0..READERS)
                .map(|i| (i, self.readers[i].1))
                .min_by_key(|r| r.1)
                .unwrap_or((0, 0));
            self.floor = self.floor.max(smallest);
            self.readers[i] = (t, co);
        }
    }

    /// Index of the oldest message thread `t`, with causal past `past`, may read; `late` is
    /// the coherence key of the newest message its past holds through a late observation
    /// ([`PtxMemory::late_floor`]; 0 for none).
    fn lower_bound(&self, t: u32, past: Option<&View>, late: u64) -> usize {
        self.lower_bound_from(self.position(t), past, late)
    }

    /// [`Location::lower_bound`] for a reader whose coherence position here is `position`.
    fn lower_bound_from(&self, position: u64, past: Option<&View>, late: u64) -> usize {
        let seen = |m: &Message| past.is_some_and(|p| p.covers(m.block, m.seq)) || m.co <= late;
        let mut by_causality = self
            .msgs
            .iter()
            .rposition(|m| m.ts == 0 || seen(m))
            .unwrap_or(0);
        // A write racing with the one before it does not hide that one: coherence leaves the
        // two unordered, so a reader that must see the newer may still read the older.
        if by_causality > 0 && self.msgs[by_causality].racing {
            by_causality -= 1;
        }
        let mut by_coherence = self
            .msgs
            .iter()
            .position(|m| m.co >= position)
            .unwrap_or(self.msgs.len() - 1);
        // The same holds for the newest message the thread wrote or strongly read: a write
        // racing with it is not coherence-ordered with it (CoWR with a racing write).
        if by_coherence > 0
            && self.msgs[by_coherence].co == position
            && self.msgs[by_coherence].racing
        {
            by_coherence -= 1;
        }
        by_causality.max(by_coherence)
    }

    /// How many of the newest messages a new write may be placed below: those it need not
    /// follow in coherence (`must_follow` false for each), with room for a key between.
    /// A write placed below one it is morally strong with (`orders`) and above one it
    /// follows orders the two through itself (PTX's coherence is transitive): it does not go
    /// there when the history leaves those two unordered (`fixed` says which pairs of writes
    /// coherence orders by themselves), since a reader may already have read the older after
    /// the newer, which that order forbids. It follows the writes `must_follow` names and,
    /// where it goes right above one it `orders`, that one.
    fn placements(
        &self,
        must_follow: impl Fn(&Message) -> bool,
        orders: impl Fn(&Message) -> bool,
        fixed: impl Fn(&Message, &Message) -> bool,
    ) -> usize {
        // Bit k: the write goes below message k, which it orders (morally strong with it).
        let mut ordered: u32 = 0;
        // Bit j: a message it must follow (not the initial value); found when first needed.
        let mut follows: Option<u32> = None;
        let mut n = 0;
        for i in (1..self.msgs.len()).rev() {
            let (m, before) = (&self.msgs[i], &self.msgs[i - 1]);
            if must_follow(m) || m.co - before.co < 2 {
                break;
            }
            if orders(m) {
                ordered |= 1 << i;
            }
            if ordered != 0 {
                let below = (1u32 << i) - 1;
                let mut followed = below & *follows.get_or_insert_with(|| self.bits(&must_follow));
                if before.ts != 0 && orders(before) {
                    followed |= 1 << (i - 1);
                }
                if self.would_order_unordered(followed, ordered, &fixed) {
                    break;
                }
            }
            n += 1;
        }
        n
    }

    /// The messages `which` names (not the initial value), as bits by index.
    fn bits(&self, which: impl Fn(&Message) -> bool) -> u32 {
        (0..self.msgs.len())
            .filter(|&j| self.msgs[j].ts != 0 && which(&self.msgs[j]))
            .fold(0, |bits, j| bits | 1 << j)
    }

    /// Whether a new write after each message of `followed` and before each of `ordered`
    /// (bits by index, the first all below the second) would order two the history leaves
    /// unordered.
    fn would_order_unordered(
        &self,
        followed: u32,
        ordered: u32,
        fixed: &impl Fn(&Message, &Message) -> bool,
    ) -> bool {
        let set = |bits: u32| (0..self.msgs.len()).filter(move |&k| bits & (1 << k) != 0);
        set(followed).any(|f| set(ordered).any(|o| !self.ordered_before(f, o, fixed)))
    }

    /// Whether the history orders message `f` before the newer message `o` in coherence: a
    /// chain of messages each ordered after the one before it (not racing with it) or after
    /// an earlier one of the chain by `fixed` (morally strong writes, one thread's writes).
    fn ordered_before(
        &self,
        f: usize,
        o: usize,
        fixed: &impl Fn(&Message, &Message) -> bool,
    ) -> bool {
        // Bit k: message k follows message f.
        let mut after_f: u32 = 1 << f;
        for k in f + 1..=o {
            let m = &self.msgs[k];
            let chained = after_f & (1 << (k - 1)) != 0 && !m.racing;
            let by_pair = (f..k).any(|j| after_f & (1 << j) != 0 && fixed(&self.msgs[j], m));
            if chained || by_pair {
                after_f |= 1 << k;
            }
        }
        after_f & (1 << o) != 0
    }
}

/// Whether a strong access at `reach` by thread `t` of `block` and message `m` are morally
/// strong (the same thread, or scopes that include each other's thread).
fn morally_strong(gpus: &Gpus, m: &Message, t: u32, block: u32, reach: Reach) -> bool {
    if m.ts == 0 {
        return false;
    }
    let tier = gpus.tier(block, m.block);
    m.writer == t || (tier.within(reach) && tier.within(m.reach))
}

/// What a read-modify-write releases: its own releases, `rel`, and what the message it read
/// released, `read` (release sequences), each to its tier, a narrower tier also getting every
/// wider one's.
fn carry_views(rel: &Views, read: &Views) -> Views {
    let mut views = Views::default();
    let mut wider: Released = None;
    for tier in TIERS.iter().rev() {
        let i = *tier as usize;
        wider = join_released(&join_released(&rel[i], &wider), &read[i]);
        views[i] = wider.clone();
    }
    views
}

/// Whether `views` release nothing to any tier.
fn released_nothing(views: &Views) -> bool {
    views.iter().all(Option::is_none)
}

/// `acc` joined with `more`, sharing where one contains the other.
fn join_released(acc: &Released, more: &Released) -> Released {
    match (acc, more) {
        (None, x) | (x, None) => x.clone(),
        (Some(a), Some(b)) if Rc::ptr_eq(a, b) => Some(a.clone()),
        (Some(a), Some(b)) => {
            let mut v = View::clone(a);
            v.join(b);
            Some(Rc::new(v))
        }
    }
}

/// What a thread may acquire and what it releases.
#[derive(Debug, Clone, Default)]
struct Sync {
    /// Views released to it by the writers of messages it read strongly, by the writer's tier
    /// (its block, its GPU, another GPU).
    acq: Views,
    /// What its strong writes release to readers of each tier (a narrower tier's holds the
    /// wider ones').
    rel: Views,
}

/// Where a thread stood when a release of it overtook one of its deferred loads: the launch
/// clock, and its newest write (which every view it releases from then on holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub ts: u32,
    pub block: u32,
    pub seq: u32,
}

/// What a restricted deferred load may read ([`PtxMemory::restricted_load`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadLimits {
    /// The reader's first release that overtook the load: no write it may have caused.
    pub mark: Option<Mark>,
    /// No fence overtook the load (which is no acquire): it may observe a morally strong write
    /// late ([`PtxMemory::observable_late`]).
    pub observing: bool,
    /// A later access of its thread to the same bytes took effect first (load buffering on
    /// one location, `exec/one_location.rs`): the thread's coherence position there before that
    /// access. The load reads nothing older, and no morally strong write newer (see
    /// [`PtxMemory::load_before_own`]).
    pub floor: Option<u64>,
}

/// A read remembered for restricted loads that may observe ([`PtxMemory::restricted_load`]):
/// where, by whom, when (the launch clock) and the coherence key of the message it read (0
/// when unknown).
#[derive(Debug, Clone, Copy)]
struct ReadNote {
    addr: u64,
    co: u64,
    ts: u32,
    thread: u32,
}

/// A write about to join a location's history.
struct Write {
    /// What memory held before (the value everybody may read if the location is new).
    old: u64,
    value: u64,
    views: Views,
    /// The value a read-modify-write read; `None` for a store.
    rmw: Option<u64>,
}

/// How a global access takes part in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub thread: u32,
    pub block: u32,
    pub reach: Reach,
    pub acquires: bool,
    pub releases: bool,
    /// A `red`: its read forms no acquire pattern.
    pub reduction: bool,
}

/// A multiplicative hash for addresses (SipHash costs more than the lookup).
#[derive(Default)]
pub struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, v: u64) {
        // The table indexes by the low bits: fold the high half of the product into them, so
        // that addresses that are multiples of 4 or 8 spread over every bucket.
        let h = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 32);
    }
}

/// The model's state for one launch.
#[derive(Debug)]
pub struct PtxMemory {
    blocks: usize,
    /// The GPU each block runs on.
    gpus: Gpus,
    clock: u32,
    /// Writes so far per block.
    seq: Vec<u32>,
    /// Histories by address.
    locations: HashMap<u64, Location, BuildHasherDefault<WordHasher>>,
    /// Whether a 1- or 2-byte location has been written (else every location starts at a
    /// multiple of 4).
    narrow: bool,
    /// Whether an 8-byte location has been written (else, with no narrow one either, every
    /// location is one aligned word).
    wide: bool,
    /// Causal past per thread, made when the thread first needs one.
    past: Vec<Option<View>>,
    /// Writes each thread has observed with morally strong reads: in the causal past of what
    /// the thread does next, but not of their writers' earlier writes, so they join what the
    /// thread passes on (releases, fence-SC, barriers) and not what it must read itself. Each
    /// is a single write of the view ([`View::add_point`]), never its block's history.
    observed: Vec<Option<View>>,
    sync: Vec<Sync>,
    /// Each thread's newest write as (block, number). A thread's own writes are in the causal
    /// past of what it passes on (releases, fence-SC, barriers), not in the view that bounds
    /// its own reads: program order to another location orders nothing for the thread itself
    /// (its reads of a location it wrote are held by coherence), and keeping them out of its
    /// clock keeps it from seeing, through its block's clock, the earlier writes of the other
    /// threads of its block (store buffering between threads of one CTA).
    own: Vec<(u32, u32)>,
    /// Which threads of each block have written global memory.
    writers: Vec<Writers>,
    /// Fence-SC frontiers, made on first use: each block's, each GPU's and the system's
    /// (keyed by [`Gpus::group`]).
    sc: HashMap<(Tier, u32), View>,
    /// What each CTA barrier passes on in its current phase (keyed by block and id).
    barriers: HashMap<u32, View>,
    /// The timestamp of the message the last [`PtxMemory::load`] returned or the last
    /// [`PtxMemory::atomic`] read (`None`: the newest value of a location the model does not
    /// track), for the race recorder.
    pub last_read: Option<u32>,
    /// The read-modify-write a later fence or release of its thread overtook, not yet
    /// performed (see `overtaken.rs`).
    overtaken: Option<overtaken::Overtaken>,
    /// The write number the next appended write takes instead of a new one (an overtaken
    /// RMW's reserved number).
    reserved_seq: Option<u32>,
    /// Late observations: a restricted load overtaken by the release at the mark observed the
    /// write with this coherence key at this address. Every thread whose causal past holds
    /// the mark must read, and write after, that write ([`PtxMemory::late_floor`]).
    late: Vec<(Mark, u64, u64)>,
    /// The newest reads, from the launch's first mark on, in a ring ([`READ_LOG`]).
    reads: Vec<ReadNote>,
    reads_next: usize,
    /// The newest timestamp among reads the ring no longer holds.
    reads_lost: Option<u32>,
    /// Whether reads are being remembered (some release overtook a deferred load).
    watching: bool,
}

/// The threads of a block that have written global memory: none, one (which), or several.
#[derive(Debug, Clone, Copy, Default)]
struct Writers {
    count: u8,
    first: u32,
}

impl Writers {
    fn add(&mut self, t: u32) {
        match self.count {
            0 => *self = Writers { count: 1, first: t },
            1 if self.first != t => self.count = 2,
            _ => {}
        }
    }

    /// Whether no thread but `t` has written.
    fn only(&self, t: u32) -> bool {
        self.count == 0 || (self.count == 1 && self.first == t)
    }
}

/// Whether an access of this size has a history (every scalar size PTX has: 1, 2, 4, 8 bytes).
pub(crate) fn tracked(size: u64) -> bool {
    matches!(size, 1 | 2 | 4 | 8)
}

impl PtxMemory {
    /// The model of a launch of `threads` threads in `blocks` blocks, all on one GPU.
    pub fn new(threads: usize, blocks: usize) -> PtxMemory {
        PtxMemory::on_gpus(threads, blocks, Gpus::default())
    }

    /// The model of a launch whose blocks run on the GPUs `gpus` says.
    pub fn on_gpus(threads: usize, blocks: usize, gpus: Gpus) -> PtxMemory {
        PtxMemory {
            blocks,
            gpus,
            clock: 0,
            seq: vec![0; blocks],
            locations: HashMap::default(),
            narrow: false,
            wide: false,
            past: vec![None; threads],
            observed: vec![None; threads],
            sync: vec![Sync::default(); threads],
            own: vec![(0, 0); threads],
            writers: vec![Writers::default(); blocks],
            sc: HashMap::new(),
            barriers: HashMap::new(),
            last_read: None,
            overtaken: None,
            reserved_seq: None,
            late: Vec::new(),
            reads: Vec::new(),
            reads_next: 0,
            reads_lost: None,
            watching: false,
        }
    }

    /// Whether a fence, release or acquire at `reach` by thread `t` of `block` can synchronise
    /// with no other thread, when `live` threads of its block (itself included) have not
    /// exited: at cta scope, when it is the block's only live thread and no other thread of
    /// the block wrote global memory (so none can still acquire what it releases, and none
    /// released anything it could acquire); at gpu scope, when the grid has one thread. PTX
    /// synchronisation (release and acquire patterns, the Fence-SC order) needs morally strong
    /// partners, whose scopes include each other, so such an ordering puts nothing of its
    /// thread in another thread's causality order: no other thread can tell it from none, and
    /// later accesses may overtake earlier ones across it. At gpu scope it asks for a GPU of
    /// one thread, at sys scope for a grid of one. Once true it stays true.
    pub fn synchronises_with_nobody(&self, t: u32, block: u32, live: u32, reach: Reach) -> bool {
        match reach {
            Reach::Weak => false,
            Reach::Cta => live == 1 && self.writers[block as usize].only(t),
            Reach::Gpu => self.threads_on_gpu_of(block) == 1,
            Reach::Sys => self.past.len() == 1,
        }
    }

    /// How many threads run on the GPU of block `block` (counted only when the launch runs on
    /// several GPUs, which litmus tests of a few blocks do).
    fn threads_on_gpu_of(&self, block: u32) -> usize {
        if self.gpus.is_one() {
            return self.past.len();
        }
        let gpu = self.gpus.of(block);
        let blocks = (0..self.blocks as u32)
            .filter(|b| self.gpus.of(*b) == gpu)
            .count();
        blocks * self.past.len() / self.blocks.max(1)
    }

    /// The launch clock: the timestamp of the newest message appended.
    pub fn clock(&self) -> u32 {
        self.clock
    }

    fn past_mut(&mut self, t: u32) -> &mut View {
        let blocks = self.blocks;
        self.past[t as usize].get_or_insert_with(|| View::new(blocks))
    }

    /// What thread `t` passes on: its causal past, the writes it has observed and its own.
    fn passed_on(&mut self, t: u32) -> View {
        let mut v = self.past_mut(t).clone();
        self.join_passed_on(t, &mut v);
        v
    }

    /// Adds to `v` what thread `t` passes on besides its causal past: the writes it has
    /// observed and its own (with, as the clock is per block, its block's earlier writes).
    fn join_passed_on(&self, t: u32, v: &mut View) {
        if let Some(o) = &self.observed[t as usize] {
            v.join(o);
        }
        let (block, seq) = self.own[t as usize];
        if seq > 0 {
            v.advance(block, seq);
        }
    }

    /// Which value a load of `[addr, addr + size)` returns; `newest` is the value in memory,
    /// `pick` a random number, `older` the chance (out of `u32::MAX`) to read an older message
    /// than the newest when the thread may.
    #[allow(clippy::too_many_arguments)]
    pub fn load(
        &mut self,
        a: Access,
        addr: u64,
        size: u64,
        newest: u64,
        pick: u32,
        older: u32,
    ) -> u64 {
        let value = self.read(a, addr, size, newest, pick, older);
        self.acquire_pattern(a);
        value
    }

    /// An acquire operation ends an acquire pattern whatever it reads: after a strong read of
    /// its location (PTX's second acquire pattern, `ld.relaxed [M]; ld.acquire [M]`) it takes
    /// what that read collected. The simulator takes everything its thread collected, from
    /// any location (stronger than PTX, as an acquire that observes already did).
    pub fn acquire_pattern(&mut self, a: Access) {
        if a.acquires && !a.reduction {
            self.acquire(a.thread, a.reach);
        }
    }

    /// [`PtxMemory::load`] without the acquire.
    fn read(&mut self, a: Access, addr: u64, size: u64, newest: u64, pick: u32, older: u32) -> u64 {
        self.last_read = None;
        if !tracked(size) {
            return newest;
        }
        let late = self.late_floor(a.thread, addr);
        let Some(loc) = self
            .locations
            .get_mut(&addr)
            .filter(|l| u64::from(l.size) == size)
        else {
            if self.may_overlap(size) {
                self.read_overlapping(a, addr, size);
            }
            // What the location held before the launch wrote it: before every write of it.
            self.note_read(addr, a.thread, 0);
            return newest;
        };
        let lower = loc.lower_bound(a.thread, self.past[a.thread as usize].as_ref(), late);
        let last = loc.msgs.len() - 1;
        let i = if lower < last && pick < older {
            lower + (pick as usize) % (last - lower)
        } else {
            last
        };
        self.read_message(a, addr, i)
    }

    /// The coherence key of the newest message of `[addr, addr + size)` that thread `t` has
    /// written or strongly read (0: none, or no history of that width).
    pub fn position(&self, t: u32, addr: u64, size: u64) -> u64 {
        self.tracked_location(addr, size)
            .map_or(0, |loc| loc.position(t))
    }

    /// A deferred load `a` of `[addr, addr + size)` that a later store of its own thread to
    /// the same bytes overtook (load buffering on one location), performed now: as
    /// [`PtxMemory::load`] from the coherence position `floor` its thread had there before
    /// that store, never reading a write of its own thread newer than `floor`. PTX allows it
    /// to read another thread's write that follows its own store in coherence, but not one it
    /// is morally strong with: reading that one observes it, and observation then program
    /// order put it before the store in causality, so in coherence too. Such writes are read
    /// only at or below `floor` (stronger than PTX, which also allows those between `floor`
    /// and the store: reading one would order it before the store, which a racing store
    /// placed above it does not record). `None` when no kept message qualifies.
    pub fn load_before_own(
        &mut self,
        a: Access,
        (addr, size): (u64, u64),
        (pick, older): (u32, u32),
        floor: u64,
    ) -> Option<u64> {
        self.last_read = None;
        let late = self.late_floor(a.thread, addr);
        let past = self.past[a.thread as usize].as_ref();
        let loc = self.tracked_location(addr, size)?;
        let lower = loc.lower_bound_from(floor, past, late);
        let observed = |m: &Message| {
            a.reach != Reach::Weak && morally_strong(&self.gpus, m, a.thread, a.block, a.reach)
        };
        let excluded =
            |m: &Message| m.ts != 0 && m.co > floor && (m.writer == a.thread || observed(m));
        let choices: Vec<usize> = (lower..loc.msgs.len())
            .filter(|&i| !excluded(&loc.msgs[i]))
            .collect();
        let last = choices.len().checked_sub(1)?;
        let i = match last > 0 && pick < older {
            true => choices[(pick as usize) % last],
            false => choices[last],
        };
        Some(self.read_message(a, addr, i))
    }

    /// Thread `a` reads message `i` of the tracked location at `addr`: coherence, the read
    /// log and (for a morally strong read) observation follow. Returns the value.
    fn read_message(&mut self, a: Access, addr: u64, i: usize) -> u64 {
        let loc = self.locations.get_mut(&addr).expect("a tracked location");
        self.last_read = Some(loc.msgs[i].ts);
        let own = loc.msgs[i].writer == a.thread && loc.msgs[i].ts != 0;
        let strong = a.reach != Reach::Weak
            && morally_strong(&self.gpus, &loc.msgs[i], a.thread, a.block, a.reach);
        if strong || own {
            loc.advance(a.thread, loc.msgs[i].co);
        }
        let m = &loc.msgs[i];
        let (co, value) = (m.co, m.value);
        let m = strong.then(|| m.clone());
        self.note_read(addr, a.thread, co);
        if let Some(m) = m {
            self.observe(a, addr, &m, !a.reduction, a.acquires);
        }
        value
    }

    /// Marks where thread `t` of `block` stands, for a release of it that overtakes a deferred
    /// load: a write number of its block that no message has, made its newest, so that every
    /// view it passes on from now holds it and views from before do not. (Views that hold it
    /// hold the block's earlier writes too: stronger, never weaker.)
    pub fn mark(&mut self, t: u32, block: u32) -> Mark {
        self.watching = true;
        self.seq[block as usize] += 1;
        let seq = self.seq[block as usize];
        self.own[t as usize] = (block, seq);
        Mark {
            ts: self.clock,
            block,
            seq,
        }
    }

    /// The messages of `[addr, addr + size)` that load `a` may read now, by index, each with
    /// whether reading it is an observation. Without limits: those that would make no
    /// synchronisation, not morally strong with it (any, for a weak load), so reading one is
    /// no observation and no acquire. With a `mark`, none written after it by a thread whose
    /// causal past holds what the reader passed on at the mark: the reader's release that
    /// overtook the load may have caused those. With `observing` too (no fence overtook the
    /// load, which is no acquire), also the morally strong ones it may observe late
    /// ([`PtxMemory::observable_late`]), but with a `floor` none above it; for an acquire
    /// load with `observing` and no mark, those that release nothing. `None` for a location
    /// without history (its value in memory is such a read).
    fn restricted_choices(
        &self,
        a: Access,
        addr: u64,
        size: u64,
        limits: ReadLimits,
    ) -> Option<Vec<(usize, bool)>> {
        let ReadLimits {
            mark,
            observing,
            floor,
        } = limits;
        let loc = self.tracked_location(addr, size)?;
        let past = self.past[a.thread as usize].as_ref();
        let late = self.late_floor(a.thread, addr);
        let lower = match floor {
            Some(f) => loc.lower_bound_from(f, past, late),
            None => loc.lower_bound(a.thread, past, late),
        };
        // A deferred acquire load that nothing ordering overtook may observe a write that
        // releases nothing: it synchronises with nobody, and nothing after it that could pass
        // the observation on has run yet.
        let acquire_of_nothing = observing && a.acquires && !a.reduction && mark.is_none();
        let observing = observing && !a.acquires && !a.reduction;
        let choice = |i: usize| {
            let m = &loc.msgs[i];
            if (m.ts != 0 && m.writer == a.thread) || mark.is_some_and(|k| self.caused(k, m)) {
                return None;
            }
            if a.reach == Reach::Weak || !morally_strong(&self.gpus, m, a.thread, a.block, a.reach)
            {
                return Some((i, false));
            }
            if floor.is_some_and(|f| m.co > f) {
                return None;
            }
            if acquire_of_nothing && released_nothing(&m.views) {
                return Some((i, true));
            }
            let k = mark.filter(|_| observing)?;
            self.observable_late(k, loc, addr, i, a.thread)
                .then_some((i, true))
        };
        Some((lower..loc.msgs.len()).filter_map(choice).collect())
    }

    /// Restricted load `a`, overtaken by the release at mark `k`, observes message `i` at
    /// `addr` (see [`PtxMemory::observable_late`]): it joins what the load's thread passes on,
    /// every thread holding the mark must read it or later from now on, and a write the mark
    /// caused just above it is ordered after it (no longer racing with it).
    fn observe_late(&mut self, a: Access, addr: u64, i: usize, k: Mark) {
        let loc = &self.locations[&addr];
        let m = loc.msgs[i].clone();
        let caused_above = loc.msgs.get(i + 1).is_some_and(|up| self.caused(k, up));
        let loc = self.locations.get_mut(&addr).expect("read above");
        loc.advance(a.thread, m.co);
        if caused_above {
            loc.msgs[i + 1].racing = false;
        }
        self.observe(a, addr, &m, true, false);
        self.late.push((k, addr, m.co));
    }

    /// Whether write `m` may have been caused by the release at mark `k`: written after it by
    /// a thread whose causal past now holds it.
    fn caused(&self, k: Mark, m: &Message) -> bool {
        m.ts > k.ts && self.holds_mark(m.writer, k)
    }

    /// Whether thread `t`'s causal past holds mark `k`.
    fn holds_mark(&self, t: u32, k: Mark) -> bool {
        self.past[t as usize]
            .as_ref()
            .is_some_and(|p| p.covers(k.block, k.seq))
    }

    /// Whether a restricted load of `reader` overtaken by the release at mark `k` may observe
    /// message `i` of `loc` (at `addr`), which it is morally strong with. The observation puts
    /// that write before, in causality order, everything after the load in program order: the
    /// release and whatever synchronised with it since. So no write of the location that one
    /// of those may have made may precede it in coherence (none below it is caused by the
    /// mark, and none such is gone from the history), and a caused write above it becomes
    /// ordered after it: no read of the location since the mark (every one is in the log) may
    /// have read it or an older write while its thread holds the mark or had seen a newer one
    /// (such a read would now read before a write it must see). What those threads do from
    /// now on sees it through [`PtxMemory::late_floor`].
    fn observable_late(&self, k: Mark, loc: &Location, addr: u64, i: usize, reader: u32) -> bool {
        let co = loc.msgs[i].co;
        let none_caused_below = loc.msgs[..i].iter().all(|m| !self.caused(k, m));
        let log_whole = self.reads_lost.is_none_or(|lost| lost < k.ts);
        let no_stale_read = self.reads.iter().all(|r| {
            r.addr != addr
                || r.ts < k.ts
                || r.thread == reader
                || r.co > co
                || !(self.holds_mark(r.thread, k) || loc.position(r.thread) > co)
        });
        loc.dropped_ts <= k.ts && none_caused_below && log_whole && no_stale_read
    }

    /// The coherence key of the newest write at `addr` that thread `t` must read or write after
    /// through a late observation: one made by a restricted load whose overtaking release its
    /// causal past holds (0 for none).
    fn late_floor(&self, t: u32, addr: u64) -> u64 {
        self.late
            .iter()
            .filter(|(k, at, _)| *at == addr && self.holds_mark(t, *k))
            .map(|late| late.2)
            .max()
            .unwrap_or(0)
    }

    /// Remembers a read of the message with coherence key `co` (0: unknown) at `addr` by
    /// thread `t`, once some release has overtaken a deferred load.
    fn note_read(&mut self, addr: u64, t: u32, co: u64) {
        if !self.watching {
            return;
        }
        let note = ReadNote {
            addr,
            co,
            ts: self.clock,
            thread: t,
        };
        if self.reads.len() < READ_LOG {
            self.reads.push(note);
        } else {
            let gone = std::mem::replace(&mut self.reads[self.reads_next], note);
            self.reads_lost = Some(self.reads_lost.map_or(gone.ts, |l| l.max(gone.ts)));
        }
        self.reads_next = (self.reads_next + 1) % READ_LOG;
    }

    /// A value load `a` may read now with no effect on the model (see
    /// [`PtxMemory::restricted_choices`]), chosen by `pick`; `newest` (memory) for a location
    /// without history; `None` when every message it may read would synchronise. The caller
    /// keeps it as the value a deferred load reads when nothing else qualifies later, so it
    /// is logged as a read now: a late observation made before the load is performed must
    /// not leave that value stale for a thread that holds its mark.
    pub fn effectless_value(
        &mut self,
        a: Access,
        addr: u64,
        size: u64,
        newest: u64,
        pick: u32,
    ) -> Option<u64> {
        if !tracked(size) {
            return Some(newest);
        }
        let Some(v) = self.restricted_choices(a, addr, size, ReadLimits::default()) else {
            self.note_read(addr, a.thread, 0);
            return Some(newest);
        };
        let loc = self.tracked_location(addr, size)?;
        let (i, _) = *v.get(pick as usize % v.len().max(1))?;
        let (co, value) = (loc.msgs[i].co, loc.msgs[i].value);
        self.note_read(addr, a.thread, co);
        Some(value)
    }

    /// A restricted deferred load `a` of `[addr, addr + size)` (overtaken by a fence or
    /// release, see `sched.rs`) performed now: the newest message it may read (see
    /// [`PtxMemory::restricted_choices`]: with no effect and not caused by the release at
    /// `mark`, or, when `observing`, observed late; with a `floor`, as from there) or, with
    /// the chance `older` out of `u32::MAX` against `pick`, an older such one; `None` when
    /// there is none. A late observation is remembered for the threads holding the mark.
    /// `newest` (memory) is read where the location has no history, unless a later access of
    /// the thread's took effect first (a floor): memory may hold its write then.
    pub fn restricted_load(
        &mut self,
        a: Access,
        (addr, size): (u64, u64),
        newest: u64,
        (pick, older): (u32, u32),
        limits: ReadLimits,
    ) -> Option<u64> {
        self.last_read = None;
        let untracked = limits.floor.is_none().then_some(newest);
        if !tracked(size) {
            return untracked;
        }
        let Some(v) = self.restricted_choices(a, addr, size, limits) else {
            return untracked;
        };
        let Some(last) = v.len().checked_sub(1) else {
            self.note_read(addr, a.thread, 0);
            return None;
        };
        let (i, observes) = if last > 0 && pick < older {
            v[(pick as usize) % last]
        } else {
            v[last]
        };
        let m = self.locations[&addr].msgs[i].clone();
        self.last_read = Some(m.ts);
        self.note_read(addr, a.thread, m.co);
        match (observes, limits.mark) {
            (true, Some(k)) => self.observe_late(a, addr, i, k),
            (true, None) => {
                let loc = self.locations.get_mut(&addr).expect("read above");
                loc.advance(a.thread, m.co);
                self.observe(a, addr, &m, false, false);
            }
            (false, _) => {}
        }
        Some(m.value)
    }

    /// A morally strong read of `m` at `addr`: the write alone joins what the reader passes on,
    /// and its released view is collected for an acquire (unless the read cannot form an
    /// acquire pattern) and taken at once by an acquire read.
    fn observe(&mut self, a: Access, addr: u64, m: &Message, collect: bool, acquire_now: bool) {
        let blocks = self.blocks;
        self.observed[a.thread as usize]
            .get_or_insert_with(|| View::new(blocks))
            .add_point(Point {
                block: m.block,
                seq: m.seq,
                location: addr,
                co: m.co,
            });
        if collect {
            let tier = self.gpus.tier(a.block, m.block) as usize;
            let s = &mut self.sync[a.thread as usize];
            s.acq[tier] = join_released(&s.acq[tier], &m.views[tier]);
            if acquire_now {
                self.acquire(a.thread, a.reach);
            }
        }
    }

    /// The acquire half of a fence or acquire operation at `reach`: what it collected from
    /// writers its scope includes (those of its own block always, as `reach` is strong).
    pub fn acquire(&mut self, t: u32, reach: Reach) {
        let acq = self.sync[t as usize].acq.clone();
        let past = self.past_mut(t);
        for tier in tiers_of(reach) {
            if let Some(v) = &acq[tier as usize] {
                past.join(v);
            }
        }
    }

    /// The release half: later strong writes pass on the thread's causal past to the readers
    /// `reach` includes.
    fn release(&mut self, t: u32, reach: Reach) {
        let now = Rc::new(self.passed_on(t));
        let s = &mut self.sync[t as usize];
        for tier in tiers_of(reach) {
            s.rel[tier as usize] = Some(now.clone());
        }
    }

    /// `fence.acq_rel` at `reach`.
    pub fn fence_acq_rel(&mut self, t: u32, reach: Reach) {
        self.acquire(t, reach);
        self.release(t, reach);
    }

    /// `fence.sc` at `reach`: an acq_rel fence that also joins, both ways, the fence-SC
    /// frontier of its block and of every wider group `reach` includes (its GPU, the system).
    pub fn fence_sc(&mut self, t: u32, block: u32, reach: Reach) {
        self.acquire(t, reach);
        let blocks = self.blocks;
        let passed = self.passed_on(t);
        let mut before = View::new(blocks);
        for tier in tiers_of(reach) {
            let group = self.gpus.group(tier, block);
            let frontier = self.sc.entry(group).or_insert_with(|| View::new(blocks));
            before.join(frontier);
            frontier.join(&passed);
        }
        self.past_mut(t).join(&before);
        self.release(t, reach);
    }

    /// A thread arrives at CTA barrier `key` (waiting or not): what it passes on joins what
    /// the barrier will pass to the threads waiting there.
    pub fn barrier_arrive(&mut self, t: u32, key: u32) {
        let blocks = self.blocks;
        let mut view = self
            .barriers
            .remove(&key)
            .unwrap_or_else(|| View::new(blocks));
        if let Some(past) = &self.past[t as usize] {
            view.join(past);
        }
        self.join_passed_on(t, &mut view);
        self.barriers.insert(key, view);
    }

    /// CTA barrier `key` completes: every thread in `waiters` (all arrived) gets the joined
    /// causal past of every thread that arrived in this phase, and the next phase starts empty.
    pub fn barrier_complete(&mut self, key: u32, waiters: &[u32]) {
        let Some(all) = self.barriers.remove(&key) else {
            return;
        };
        self.share_past(waiters, &all);
    }

    /// `bar.sync` (or `bar.warp.sync`) where every thread in `threads` arrives and waits: each
    /// gets the joined causal past of them all.
    pub fn barrier(&mut self, threads: &[u32]) {
        let mut all = View::new(self.blocks);
        for &t in threads {
            if let Some(past) = &self.past[t as usize] {
                all.join(past);
            }
            self.join_passed_on(t, &mut all);
        }
        self.share_past(threads, &all);
    }

    /// Every thread in `threads` gets `all` as its causal past; an empty `all` changes nothing.
    fn share_past(&mut self, threads: &[u32], all: &View) {
        if all.is_empty() {
            return;
        }
        for &t in threads {
            match &mut self.past[t as usize] {
                Some(past) => past.clone_from(all),
                none => *none = Some(all.clone()),
            }
        }
    }

    /// Records a store of `value` where memory held `old`. `place` chooses, from the number
    /// `n > 0` of newer messages the write may go below in coherence (see
    /// [`PtxMemory::placements`]), how many it goes below (0 to `n`); it is not called when
    /// there is no choice. Returns whether the write is the newest, so memory must hold it.
    pub fn store(
        &mut self,
        a: Access,
        addr: u64,
        size: u64,
        old: u64,
        value: u64,
        place: impl FnOnce(usize) -> usize,
    ) -> bool {
        if a.releases {
            self.release(a.thread, a.reach);
        }
        let views = match a.reach {
            Reach::Weak => Views::default(),
            _ => self.sync[a.thread as usize].rel.clone(),
        };
        let below = self.choose_placement(a, addr, size, place);
        let write = Write {
            old,
            value,
            views,
            rmw: None,
        };
        self.append(a, addr, size, write, below);
        below == 0
    }

    /// How many of the newest messages of `addr` a write of `a` may be placed below in
    /// coherence: PTX orders a write after the writes it must follow (coherence is consistent
    /// with causality: its causal past, the writes it observed, its own, what it has read
    /// strongly here) and keeps morally strong writes atomic with what they read, and leaves
    /// it unordered with, or free to precede, the others. So a later store can take effect
    /// before a racing store that executed earlier: 2+2W, S and `CoRW-WW` end with the older
    /// value.
    fn placements(&self, a: Access, addr: u64, loc: &Location) -> usize {
        let position = loc.position(a.thread).max(self.late_floor(a.thread, addr));
        let must_follow = |m: &Message| {
            m.ts == 0
                || m.co <= position
                || (m.rmw.is_some() && morally_strong(&self.gpus, m, a.thread, a.block, a.reach))
                || m.writer == a.thread
                || self.knows(a.thread, m)
        };
        let orders = |m: &Message| {
            a.reach != Reach::Weak && morally_strong(&self.gpus, m, a.thread, a.block, a.reach)
        };
        loc.placements(must_follow, orders, |x, y| self.fixed_pair(x, y))
    }

    /// Whether coherence orders writes `x` and `y` by themselves: one thread's, or morally
    /// strong.
    fn fixed_pair(&self, x: &Message, y: &Message) -> bool {
        x.writer == y.writer || morally_strong(&self.gpus, x, y.writer, y.block, y.reach)
    }

    fn choose_placement(
        &self,
        a: Access,
        addr: u64,
        size: u64,
        place: impl FnOnce(usize) -> usize,
    ) -> usize {
        let Some(loc) = self.tracked_location(addr, size) else {
            return 0;
        };
        match self.placements(a, addr, loc) {
            0 => 0,
            n => place(n).min(n),
        }
    }

    /// Whether write `m` is in thread `t`'s causal past or among the writes it observed.
    fn knows(&self, t: u32, m: &Message) -> bool {
        let covers = |v: &Option<View>| v.as_ref().is_some_and(|v| v.covers(m.block, m.seq));
        covers(&self.past[t as usize]) || covers(&self.observed[t as usize])
    }

    /// Which messages before the newest a read-modify-write `a` at `addr` may read instead of
    /// the newest, as places below the newest (1: the one before it), oldest first; `writes`
    /// gives what it writes when it reads a value (`None`: a `cas` that changes nothing, a
    /// read). Empty when the location has no history (the newest value is read).
    ///
    /// It may read what its causal past and coherence position allow. PTX's atomicity axiom
    /// holds only between morally strong operations, and only between an RMW's read and its
    /// write: so a `.cta` RMW may skip the RMWs of another block (a lost update), and any RMW
    /// may skip weak writes of other threads. Below a write morally strong with it, it reads
    /// only where its write can go directly above the message it read
    /// ([`PtxMemory::fits_directly_above`]): message passing through relaxed RMWs alone reads
    /// a stale payload, as PTX allows.
    pub fn rmw_choices(
        &self,
        a: Access,
        addr: u64,
        size: u64,
        writes: impl Fn(u64) -> Option<u64>,
    ) -> Vec<usize> {
        let Some(loc) = self.tracked_location(addr, size) else {
            return Vec::new();
        };
        let lower = loc.lower_bound(
            a.thread,
            self.past[a.thread as usize].as_ref(),
            self.late_floor(a.thread, addr),
        );
        let last = loc.msgs.len() - 1;
        let free = self.newest_strong_with(a, loc).unwrap_or(0);
        (lower..last)
            .filter(|&i| {
                i >= free
                    || match writes(loc.msgs[i].value) {
                        None => true,
                        Some(new) => self.fits_directly_above(a, addr, loc, i, new),
                    }
            })
            .map(|i| last - i)
            .collect()
    }

    /// The index of the newest message of `loc` morally strong with access `a`.
    fn newest_strong_with(&self, a: Access, loc: &Location) -> Option<usize> {
        loc.msgs
            .iter()
            .rposition(|m| morally_strong(&self.gpus, m, a.thread, a.block, a.reach))
    }

    /// Whether RMW `a`, reading message `i` of `loc` and writing `new`, may place its write
    /// directly above that message, below every newer one, so that no write comes between
    /// its read and its write (atomicity). It need not follow a newer message: none is its
    /// own, known to it, or at or below its coherence position, and there is room for a key.
    /// Nor does it go there when the history leaves a write it follows (message `i`, or one
    /// below that it must follow) unordered with a newer one morally strong with it (it would
    /// order the two). It splits no other RMW morally strong with it from what
    /// that RMW read: none is newer,
    /// but for the one directly above, which then reads `a`'s write instead of message `i`:
    /// allowed when it read the value `a` writes and `a` carries it no release it lacks (the
    /// read message released nothing, or that RMW read it and carries its release, and `a`
    /// releases nothing of its own).
    fn fits_directly_above(
        &self,
        a: Access,
        addr: u64,
        loc: &Location,
        i: usize,
        new: u64,
    ) -> bool {
        let position = loc.position(a.thread).max(self.late_floor(a.thread, addr));
        let newer = &loc.msgs[i + 1..];
        if newer
            .iter()
            .any(|m| m.co <= position || m.writer == a.thread || self.knows(a.thread, m))
            || newer[0].co - loc.msgs[i].co < 2
        {
            return false;
        }
        let atomic_with = |m: &Message| {
            m.rmw.is_some() && morally_strong(&self.gpus, m, a.thread, a.block, a.reach)
        };
        // A morally strong RMW further up may have read message `i` or one below it, over
        // weak writes: `a`'s write would come between its read and its write.
        if newer[1..].iter().any(atomic_with) {
            return false;
        }
        let (read, above) = (&loc.msgs[i], &newer[0]);
        // `a`'s write follows the one it read (and those below it that `a` must follow) and
        // precedes every newer one morally strong with it: it orders each pair of those, which
        // the history may leave unordered; a reader may already have read the older after the
        // newer (as for stores, see [`Location::placements`]).
        let below_newer = (1u32 << (i + 1)) - 1;
        let ordered =
            !below_newer & loc.bits(|m| morally_strong(&self.gpus, m, a.thread, a.block, a.reach));
        if ordered != 0 {
            // The initial value precedes every write (`bits` leaves it out).
            let must_follow =
                |m: &Message| m.co <= position || m.writer == a.thread || self.knows(a.thread, m);
            let read_bit = if read.ts != 0 { 1 << i } else { 0 };
            let followed = below_newer & (loc.bits(must_follow) | read_bit);
            if loc.would_order_unordered(followed, ordered, &|x, y| self.fixed_pair(x, y)) {
                return false;
            }
        }
        let Some(above_read) = above.rmw.filter(|_| atomic_with(above)) else {
            return true;
        };
        let above_carries_read = released_nothing(&read.views)
            || morally_strong(&self.gpus, read, above.writer, above.block, above.reach);
        above_read == new
            && above_carries_read
            && !a.releases
            && released_nothing(&self.sync[a.thread as usize].rel)
    }

    /// The value a read-modify-write reads when it takes the message `back` places before the
    /// newest (`newest`, the value in memory, when `back` is 0 or the word has no history).
    pub fn rmw_value(&self, addr: u64, size: u64, back: usize, newest: u64) -> u64 {
        match self.tracked_location(addr, size) {
            Some(loc) if back > 0 => loc.msgs[loc.msgs.len() - 1 - back].value,
            _ => newest,
        }
    }

    /// A read-modify-write that read the message `back` places before the newest (see
    /// [`PtxMemory::rmw_choices`]) while memory held `before`, and wrote `new` (`None` for a
    /// `cas` that changed nothing, which is a read): it observes the message it read and
    /// places `new` as [`PtxMemory::store`] does (after the newest unless `place` chooses
    /// otherwise), carrying the read message's views forward (release sequences). Returns
    /// whether memory must hold `new`.
    #[allow(clippy::too_many_arguments)]
    pub fn atomic(
        &mut self,
        a: Access,
        addr: u64,
        size: u64,
        back: usize,
        before: u64,
        new: Option<u64>,
        place: impl FnOnce(usize) -> usize,
    ) -> bool {
        let read_value = self.rmw_value(addr, size, back, before);
        let read = self
            .tracked_location(addr, size)
            .map(|loc| loc.msgs[loc.msgs.len() - 1 - back].clone());
        self.last_read = read.as_ref().map(|m| m.ts);
        let read = match read {
            Some(m) => {
                self.note_read(addr, a.thread, m.co);
                let own = m.writer == a.thread && m.ts != 0;
                let strong = morally_strong(&self.gpus, &m, a.thread, a.block, a.reach);
                if strong || own {
                    // Its thread's later accesses here follow what it read, written or not
                    // (a failed `cas` writes nothing, yet SC per location binds it).
                    if let Some(loc) = self.locations.get_mut(&addr) {
                        loc.advance(a.thread, m.co);
                    }
                }
                if strong {
                    self.observe(a, addr, &m, !a.reduction, a.acquires);
                }
                m
            }
            None => {
                self.note_read(addr, a.thread, 0);
                self.read_overlapping(a, addr, size)
            }
        };
        self.acquire_pattern(a);
        let Some(new) = new else {
            return false;
        };
        if a.releases {
            self.release(a.thread, a.reach);
        }
        let views = carry_views(&self.sync[a.thread as usize].rel, &read.views);
        let below = match self.read_below_strong(a, addr, size, back) {
            true => back,
            false => self.choose_placement(a, addr, size, place),
        };
        let write = Write {
            old: before,
            value: new,
            views,
            rmw: Some(read_value),
        };
        self.append(a, addr, size, write, below);
        below == 0
    }

    /// Whether the message `back` places below the newest at `addr` has a newer one morally
    /// strong with `a`: an RMW that reads it writes directly above it.
    fn read_below_strong(&self, a: Access, addr: u64, size: u64, back: usize) -> bool {
        let loc = match back {
            0 => None,
            _ => self.tracked_location(addr, size),
        };
        loc.is_some_and(|loc| {
            self.newest_strong_with(a, loc)
                .is_some_and(|i| i >= loc.msgs.len() - back)
        })
    }

    /// The timestamps of the messages kept at `addr`, oldest first in coherence (`None`: a
    /// location the model does not track at that width).
    pub fn kept(&self, addr: u64, size: u64) -> Option<Vec<u32>> {
        let loc = self.tracked_location(addr, size)?;
        Some(loc.msgs.iter().map(|m| m.ts).collect())
    }

    /// The history of the word at `addr` if it is tracked with this size.
    fn tracked_location(&self, addr: u64, size: u64) -> Option<&Location> {
        let loc = self.locations.get(&addr)?;
        (tracked(size) && u64::from(loc.size) == size).then_some(loc)
    }

    /// Appends `w` to the history of `addr`, `below` messages below the newest (0: as the
    /// newest). A message it goes below was not ordered before it, so it races with it unless
    /// the two are morally strong.
    fn append(&mut self, a: Access, addr: u64, size: u64, w: Write, below: usize) {
        self.writers[a.block as usize].add(a.thread);
        let forgot = self.forget_overlapping(addr, size);
        if !tracked(size) {
            return;
        }
        let clock = self.clock;
        // A location made anew for another width starts with the newest value: the history it
        // forgot may hold any write up to now.
        let dropped = if forgot { clock } else { 0 };
        self.clock += 1;
        let ts = self.clock;
        let b = a.block as usize;
        let seq = match self.reserved_seq.take() {
            Some(seq) => seq,
            None => {
                self.seq[b] += 1;
                self.seq[b]
            }
        };
        let key = addr;
        self.narrow |= size < 4;
        self.wide |= size == 8;
        self.locations
            .entry(key)
            .or_insert_with(|| Location::new(size as u8, w.old, clock, dropped));
        let loc = &self.locations[&key];
        let at = loc.msgs.len() - below;
        let prev = &loc.msgs[at - 1];
        let co = match below {
            0 => u64::from(ts) << CO_SHIFT,
            _ => prev.co + (loc.msgs[at].co - prev.co) / 2,
        };
        let ordered = prev.ts == 0
            || (a.reach != Reach::Weak
                && morally_strong(&self.gpus, prev, a.thread, a.block, a.reach))
            || prev.writer == a.thread
            || self.knows(a.thread, prev)
            || prev.co <= self.late_floor(a.thread, key);
        let own = &mut self.own[a.thread as usize];
        *own = (a.block, seq.max(own.1));
        let m = Message {
            racing: !ordered,
            ts,
            co,
            value: w.value,
            writer: a.thread,
            block: a.block,
            seq,
            reach: a.reach,
            views: w.views,
            rmw: w.rmw,
        };
        let loc = self.locations.get_mut(&key).expect("made above");
        if below == 0 {
            loc.push(m);
        } else {
            let mut at = at;
            if loc.msgs.len() == KEPT {
                let gone = loc.msgs.remove(0);
                loc.dropped_ts = loc.dropped_ts.max(gone.ts);
                at -= 1;
            }
            loc.msgs.insert(at, m);
            let above = &mut loc.msgs[at + 1];
            above.racing = !morally_strong(&self.gpus, above, a.thread, a.block, a.reach);
        }
        loc.advance(a.thread, co);
    }

    /// Drops the histories of locations that `[addr, addr + size)` overlaps with another
    /// extent: afterwards everybody reads the newest value there. Accesses are naturally
    /// aligned and at most 8 bytes wide, so an overlapping location starts in the aligned 8
    /// bytes around `addr` or inside the access; until a 1- or 2-byte location exists, every
    /// location starts at a multiple of 4.
    fn forget_overlapping(&mut self, addr: u64, size: u64) -> bool {
        let (keys, n) = self.overlapping(addr, size);
        for at in &keys[..n] {
            self.locations.remove(at);
        }
        n > 0
    }

    /// The locations that `[addr, addr + size)` overlaps with another extent (up to 8, and how
    /// many). Accesses are naturally aligned and at most 8 bytes wide, so such a location
    /// starts in the aligned 8 bytes around `addr` or inside the access; until a 1- or 2-byte
    /// location exists, every location starts at a multiple of 4, and while every location is
    /// a word, a word access overlaps none but its own.
    fn overlapping(&self, addr: u64, size: u64) -> ([u64; 8], usize) {
        let (mut keys, mut n) = ([0; 8], 0);
        if !self.may_overlap(size) || self.locations.is_empty() {
            return (keys, n);
        }
        let step = if self.narrow { 1 } else { 4 };
        let mut at = addr & !7;
        while at < addr + size && n < keys.len() {
            let overlaps = self.locations.get(&at).is_some_and(|l| {
                let end = at + u64::from(l.size);
                end > addr && (at != addr || u64::from(l.size) != size)
            });
            if overlaps {
                keys[n] = at;
                n += 1;
            }
            at += step;
        }
        (keys, n)
    }

    /// Whether an access of `size` bytes may overlap a location of another extent: not while
    /// every location is a word and so is the access (the common case, kept cheap).
    #[inline]
    fn may_overlap(&self, size: u64) -> bool {
        self.narrow || self.wide || size != 4
    }

    /// A load of `[addr, addr + size)` that no history of its own extent covers reads memory:
    /// the newest write of every location it overlaps. It observes each of those it is
    /// morally strong with (so an acquire through a flag written with another width
    /// synchronises, as PTX's byte-wise model has it) and may not read older ones there
    /// afterwards. Returns the views those writes released, joined (what an RMW carries on).
    fn read_overlapping(&mut self, a: Access, addr: u64, size: u64) -> Message {
        let (keys, n) = self.overlapping(addr, size);
        let mut carried = Message::default();
        for &at in &keys[..n] {
            let loc = self.locations.get_mut(&at).expect("listed above");
            let m = loc.msgs[loc.msgs.len() - 1].clone();
            let strong = a.reach != Reach::Weak
                && morally_strong(&self.gpus, &m, a.thread, a.block, a.reach);
            if strong || (m.writer == a.thread && m.ts != 0) {
                loc.advance(a.thread, m.co);
            }
            if strong {
                self.observe(a, at, &m, !a.reduction, a.acquires);
            }
            for (c, v) in carried.views.iter_mut().zip(&m.views) {
                *c = join_released(c, v);
            }
        }
        carried
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: u64 = 0x1000;

    /// A placement choice that keeps every write the newest of its location.
    pub(super) fn as_newest(_: usize) -> usize {
        0
    }
    const Y: u64 = 0x2000;

    pub(super) fn access(thread: u32, block: u32, reach: Reach) -> Access {
        Access {
            thread,
            block,
            reach,
            acquires: false,
            releases: false,
            reduction: false,
        }
    }

    fn acquiring(a: Access) -> Access {
        Access {
            acquires: true,
            ..a
        }
    }

    fn releasing(a: Access) -> Access {
        Access {
            releases: true,
            ..a
        }
    }

    pub(super) fn clone(m: &PtxMemory) -> PtxMemory {
        PtxMemory {
            blocks: m.blocks,
            gpus: m.gpus.clone(),
            clock: m.clock,
            seq: m.seq.clone(),
            locations: m.locations.clone(),
            narrow: m.narrow,
            wide: m.wide,
            past: m.past.clone(),
            observed: m.observed.clone(),
            sync: m.sync.clone(),
            own: m.own.clone(),
            writers: m.writers.clone(),
            sc: m.sc.clone(),
            barriers: m.barriers.clone(),
            last_read: None,
            overtaken: m.overtaken,
            reserved_seq: None,
            late: m.late.clone(),
            reads: m.reads.clone(),
            reads_next: m.reads_next,
            reads_lost: m.reads_lost,
            watching: m.watching,
        }
    }

    /// Every value `a` may read at `addr` (trying every pick, and the newest).
    fn readable(m: &PtxMemory, a: Access, addr: u64, newest: u64) -> Vec<u64> {
        let mut out: Vec<u64> = (0..=KEPT as u32)
            .map(|p| {
                let (pick, older) = if p == KEPT as u32 {
                    (0, 0)
                } else {
                    (p, u32::MAX)
                };
                clone(m).load(a, addr, 4, newest, pick, older)
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn newest_load(m: &mut PtxMemory, a: Access, addr: u64, newest: u64) -> u64 {
        m.load(a, addr, 4, newest, u32::MAX, 0)
    }

    /// Thread `t` of `block` reads the flag `Y` with an acquire load at gpu scope: `value`.
    fn acquire_flag(m: &mut PtxMemory, t: u32, block: u32, value: u64) {
        let read = newest_load(m, acquiring(access(t, block, Reach::Gpu)), Y, value);
        assert_eq!(read, value);
    }

    /// Thread `t` of `block` reads the flag `Y` with a relaxed load at gpu scope: 1.
    fn read_flag(m: &mut PtxMemory, t: u32, block: u32) {
        assert_eq!(newest_load(m, access(t, block, Reach::Gpu), Y, 1), 1);
    }

    /// Asserts that thread `t` of `block` may still read the payload `X` as 0 or 1.
    fn payload_may_be_stale(m: &PtxMemory, t: u32, block: u32) {
        assert_eq!(readable(m, access(t, block, Reach::Weak), X, 1), vec![0, 1]);
    }

    /// Asserts that thread `t` of `block` reads the payload `X` as 1 only.
    fn payload_is_seen(m: &PtxMemory, t: u32, block: u32) {
        assert_eq!(readable(m, access(t, block, Reach::Weak), X, 1), vec![1]);
    }

    /// Message passing from thread 0 of block 0: the payload `X` (weak), `fence.acq_rel` at
    /// `reach`, then the flag `Y` (relaxed, gpu scope), both 1.
    fn publish_with_release_fence(m: &mut PtxMemory, reach: Reach) {
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.fence_acq_rel(0, reach);
        m.store(access(0, 0, Reach::Gpu), Y, 4, 0, 1, as_newest);
    }

    /// Thread `t` of `block` reads the flag `Y` (relaxed at `reach`), then `fence.acq_rel` at
    /// `reach`.
    fn read_flag_then_fence(m: &mut PtxMemory, t: u32, block: u32, reach: Reach) {
        newest_load(m, access(t, block, reach), Y, 1);
        m.fence_acq_rel(t, reach);
    }

    #[test]
    fn a_fence_after_the_flag_store_does_not_publish_the_payload() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(access(0, 0, Reach::Gpu), Y, 4, 0, 1, as_newest);
        m.fence_sc(0, 0, Reach::Gpu);
        acquire_flag(&mut m, 1, 1, 1);
        payload_may_be_stale(&m, 1, 1);
    }

    #[test]
    fn release_pattern_and_acquire_pattern_publish_the_payload() {
        let mut m = PtxMemory::new(2, 2);
        publish_with_release_fence(&mut m, Reach::Gpu);
        read_flag(&mut m, 1, 1);
        // Before the acquire fence the payload may still be old; after it, never.
        payload_may_be_stale(&m, 1, 1);
        m.fence_acq_rel(1, Reach::Gpu);
        payload_is_seen(&m, 1, 1);
    }

    #[test]
    fn a_weak_flag_forms_no_release_pattern() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.fence_sc(0, 0, Reach::Gpu);
        m.store(access(0, 0, Reach::Weak), Y, 4, 0, 1, as_newest);
        read_flag_then_fence(&mut m, 1, 1, Reach::Gpu);
        payload_may_be_stale(&m, 1, 1);
    }

    #[test]
    fn a_cta_scope_release_does_not_reach_another_block() {
        let mut m = PtxMemory::new(3, 2);
        publish_with_release_fence(&mut m, Reach::Cta);
        read_flag_then_fence(&mut m, 1, 1, Reach::Gpu);
        payload_may_be_stale(&m, 1, 1);
        read_flag_then_fence(&mut m, 2, 0, Reach::Cta);
        payload_is_seen(&m, 2, 0);
    }

    #[test]
    fn strong_reads_are_coherent_and_weak_reads_need_not_be() {
        let mut m = PtxMemory::new(3, 2);
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 1, as_newest);
        let strong = access(1, 1, Reach::Gpu);
        assert_eq!(newest_load(&mut m, strong, X, 1), 1);
        assert_eq!(readable(&m, strong, X, 1), vec![1]);
        let weak = access(2, 1, Reach::Weak);
        assert_eq!(newest_load(&mut m, weak, X, 1), 1);
        assert_eq!(readable(&m, weak, X, 1), vec![0, 1]);
    }

    #[test]
    fn a_thread_reads_its_own_writes_or_newer() {
        let mut m = PtxMemory::new(2, 2);
        let a = access(0, 0, Reach::Weak);
        m.store(a, X, 4, 0, 1, as_newest);
        m.store(access(1, 1, Reach::Weak), X, 4, 1, 2, as_newest);
        assert_eq!(readable(&m, a, X, 2), vec![1, 2]);
    }

    #[test]
    fn fence_sc_orders_store_buffering() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.fence_sc(0, 0, Reach::Gpu);
        m.store(access(1, 1, Reach::Weak), Y, 4, 0, 1, as_newest);
        m.fence_sc(1, 1, Reach::Gpu);
        // The later fence sees the earlier one's store.
        payload_is_seen(&m, 1, 1);
    }

    /// Store buffering between threads 0 and 1 of one block, with `fence` at `reach`
    /// between each store and load; returns what each may then read.
    fn store_buffering_in_one_block(fence: impl Fn(&mut PtxMemory, u32)) -> [Vec<u64>; 2] {
        let mut m = PtxMemory::new(2, 1);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        fence(&mut m, 0);
        m.store(access(1, 0, Reach::Weak), Y, 4, 0, 1, as_newest);
        fence(&mut m, 1);
        [
            readable(&m, access(0, 0, Reach::Weak), Y, 1),
            readable(&m, access(1, 0, Reach::Weak), X, 1),
        ]
    }

    /// Regression (issue 26: SB with `fence.acq_rel.cta` between two threads of one CTA was
    /// never weak): a thread's own write went into its block's clock, so the later writer saw
    /// every earlier write of its block.
    #[test]
    fn acq_rel_fences_do_not_order_store_buffering_inside_a_block() {
        let [r0, r1] = store_buffering_in_one_block(|m, t| m.fence_acq_rel(t, Reach::Cta));
        assert_eq!((r0, r1), (vec![0, 1], vec![0, 1]));
    }

    #[test]
    fn cta_scope_fence_sc_orders_store_buffering_inside_a_block() {
        let [_, r1] = store_buffering_in_one_block(|m, t| m.fence_sc(t, 0, Reach::Cta));
        assert_eq!(r1, vec![1]);
    }

    #[test]
    fn a_barrier_passes_on_the_writes_of_the_threads_that_arrive() {
        let mut m = PtxMemory::new(2, 1);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        payload_may_be_stale(&m, 1, 0);
        m.barrier_arrive(0, 3);
        m.barrier_arrive(1, 3);
        m.barrier_complete(3, &[1]);
        payload_is_seen(&m, 1, 0);
        // The own write is still its writer's to read, by coherence.
        payload_is_seen(&m, 0, 0);
    }

    #[test]
    fn fence_acq_rel_does_not_order_store_buffering() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.fence_acq_rel(0, Reach::Gpu);
        m.store(access(1, 1, Reach::Weak), Y, 4, 0, 1, as_newest);
        m.fence_acq_rel(1, Reach::Gpu);
        payload_may_be_stale(&m, 1, 1);
    }

    /// Thread 0 (block 0) stores the payload `X` (weak) and then the flag `Y` (relaxed, gpu)
    /// with nothing between; thread 1 (block 1) reads the flag with a relaxed gpu load.
    fn relaxed_message_passing_read_by_thread_1(threads: usize, blocks: usize) -> PtxMemory {
        let mut m = PtxMemory::new(threads, blocks);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(access(0, 0, Reach::Gpu), Y, 4, 0, 1, as_newest);
        read_flag(&mut m, 1, 1);
        m
    }

    /// Regression (observed writes passed on as their block's history): a relaxed flag read
    /// then two `fence.sc` made the second fence take the flag back from the fence-SC
    /// frontier as "every write of the writer's block up to the flag", data included.
    #[test]
    fn two_fence_sc_after_a_relaxed_flag_read_do_not_acquire_the_unreleased_payload() {
        let mut m = relaxed_message_passing_read_by_thread_1(2, 2);
        m.fence_sc(1, 1, Reach::Gpu);
        m.fence_sc(1, 1, Reach::Cta);
        m.fence_sc(1, 1, Reach::Gpu);
        payload_may_be_stale(&m, 1, 1);
        assert_eq!(readable(&m, access(1, 1, Reach::Gpu), Y, 1), vec![1]);
    }

    /// Regression (same bug, through `bar.sync`): the barrier joined the observed flag into
    /// the block's causal pasts as its writer's block history.
    #[test]
    fn a_barrier_after_a_relaxed_flag_read_does_not_acquire_the_unreleased_payload() {
        let mut m = relaxed_message_passing_read_by_thread_1(3, 2);
        m.barrier(&[1, 2]);
        payload_may_be_stale(&m, 1, 1);
        payload_may_be_stale(&m, 2, 1);
        // The flag itself is passed on: the other thread reads it or newer.
        assert_eq!(readable(&m, access(2, 1, Reach::Weak), Y, 1), vec![1]);
    }

    /// Regression (same bug, through a release): a third thread that acquires from the
    /// observer gets the observed write, and not the writes before it.
    #[test]
    fn a_release_passes_on_an_observed_write_without_its_writers_earlier_writes() {
        let mut m = relaxed_message_passing_read_by_thread_1(3, 3);
        m.fence_acq_rel(1, Reach::Gpu);
        m.store(access(1, 1, Reach::Gpu), Y + 4, 4, 0, 1, as_newest);
        assert_eq!(newest_load(&mut m, access(2, 2, Reach::Gpu), Y + 4, 1), 1);
        m.fence_acq_rel(2, Reach::Gpu);
        payload_may_be_stale(&m, 2, 2);
        assert_eq!(readable(&m, access(2, 2, Reach::Weak), Y, 1), vec![1]);
    }

    #[test]
    fn atomics_carry_a_release_forward() {
        let mut m = PtxMemory::new(3, 3);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(releasing(access(0, 0, Reach::Gpu)), Y, 4, 0, 1, as_newest);
        m.atomic(access(1, 1, Reach::Gpu), Y, 4, 0, 1, Some(2), as_newest);
        acquire_flag(&mut m, 2, 2, 2);
        payload_is_seen(&m, 2, 2);
    }

    #[test]
    fn a_relaxed_ticket_does_not_publish_other_blocks_writes() {
        // sdk-red's idiom without fences: blocks store a partial, then take a ticket.
        let mut m = PtxMemory::new(3, 3);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 5, as_newest);
        m.atomic(access(0, 0, Reach::Gpu), Y, 4, 0, 0, Some(1), as_newest);
        m.atomic(access(1, 1, Reach::Gpu), Y, 4, 0, 1, Some(2), as_newest);
        m.atomic(access(2, 2, Reach::Gpu), Y, 4, 0, 2, Some(3), as_newest);
        m.barrier(&[2]);
        assert_eq!(readable(&m, access(2, 2, Reach::Weak), X, 5), vec![0, 5]);
    }

    /// A release store of a 1-byte flag and an acquire load of it: the payload's history, the
    /// flag's width.
    fn byte_flag_handoff(m: &mut PtxMemory, reader_width: u64) {
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(releasing(access(0, 0, Reach::Gpu)), Y, 1, 0, 1, as_newest);
        let read = m.load(
            acquiring(access(1, 1, Reach::Gpu)),
            Y,
            reader_width,
            1,
            0,
            0,
        );
        assert_eq!(read, 1, "a {reader_width}-byte acquire of the flag");
    }

    #[test]
    fn an_acquire_of_a_one_byte_released_flag_synchronises() {
        let cases = [
            // Regression: 1- and 2-byte accesses had no history, so an acquire of a `bool` or
            // `char` flag took nothing and the reader could still read the payload as 0 (233 of
            // 300 runs of a correct release/acquire handoff failed on the simulator).
            ("release and acquire through a one-byte flag synchronise", 1),
            // The 4-byte read has no history of its own width there: it reads the byte's newest
            // write and observes it.
            ("a wider acquire over a one-byte release synchronises", 4),
        ];
        for (case, reader_width) in cases {
            let mut m = PtxMemory::new(2, 2);
            byte_flag_handoff(&mut m, reader_width);
            let payload = readable(&m, access(1, 1, Reach::Weak), X, 1);
            assert_eq!(payload, vec![1], "{case}");
        }
    }

    #[test]
    fn a_relaxed_one_byte_flag_does_not_synchronise() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(access(0, 0, Reach::Gpu), Y, 1, 0, 1, as_newest);
        assert_eq!(m.load(access(1, 1, Reach::Gpu), Y, 1, 1, 0, 0), 1);
        payload_may_be_stale(&m, 1, 1);
    }

    #[test]
    fn a_word_acquire_inside_an_eight_byte_release_synchronises() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(
            releasing(access(0, 0, Reach::Gpu)),
            Y,
            8,
            0,
            1 << 32,
            as_newest,
        );
        let upper = acquiring(access(1, 1, Reach::Gpu));
        assert_eq!(m.load(upper, Y + 4, 4, 1, 0, 0), 1);
        payload_is_seen(&m, 1, 1);
    }

    #[test]
    fn bytes_of_one_word_keep_histories_of_their_own() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Gpu), X, 1, 0, 1, as_newest);
        m.store(access(0, 0, Reach::Gpu), X + 1, 1, 0, 2, as_newest);
        assert_eq!(m.locations[&X].msgs.len(), 2);
        assert_eq!(m.locations[&(X + 1)].msgs.len(), 2);
        // A 4-byte write over both forgets them: one history of its own width.
        m.store(access(0, 0, Reach::Gpu), X, 4, 0x0201, 7, as_newest);
        assert!(!m.locations.contains_key(&(X + 1)));
        assert_eq!(m.locations[&X].size, 4);
    }

    #[test]
    fn bar_sync_passes_a_causal_past_to_the_block() {
        let mut m = PtxMemory::new(3, 2);
        publish_with_release_fence(&mut m, Reach::Gpu);
        read_flag_then_fence(&mut m, 1, 1, Reach::Gpu);
        payload_may_be_stale(&m, 2, 1);
        m.barrier(&[1, 2]);
        payload_is_seen(&m, 2, 1);
    }

    #[test]
    fn racing_weak_writes_stay_unordered_for_a_reader_that_saw_both() {
        // Co-Total: two weak writes to x, each published by a release; a reader that acquired
        // both may read either, since coherence does not order racing weak writes.
        let mut m = PtxMemory::new(3, 3);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(access(1, 1, Reach::Weak), X, 4, 1, 2, as_newest);
        m.fence_acq_rel(0, Reach::Gpu);
        m.fence_acq_rel(1, Reach::Gpu);
        m.store(access(0, 0, Reach::Gpu), Y, 4, 0, 1, as_newest);
        m.store(access(1, 1, Reach::Gpu), Y + 4, 4, 0, 1, as_newest);
        newest_load(&mut m, acquiring(access(2, 2, Reach::Gpu)), Y, 1);
        newest_load(&mut m, acquiring(access(2, 2, Reach::Gpu)), Y + 4, 1);
        assert_eq!(readable(&m, access(2, 2, Reach::Weak), X, 2), vec![1, 2]);
    }

    #[test]
    fn writes_ordered_by_causality_hide_the_older_one() {
        let mut m = PtxMemory::new(3, 3);
        publish_with_release_fence(&mut m, Reach::Gpu);
        read_flag_then_fence(&mut m, 1, 1, Reach::Gpu);
        m.store(access(1, 1, Reach::Weak), X, 4, 1, 2, as_newest);
        m.fence_acq_rel(1, Reach::Gpu);
        m.store(access(1, 1, Reach::Gpu), Y + 4, 4, 0, 1, as_newest);
        newest_load(&mut m, acquiring(access(2, 2, Reach::Gpu)), Y + 4, 1);
        assert_eq!(readable(&m, access(2, 2, Reach::Weak), X, 2), vec![2]);
    }

    /// Two increments of `X` (from 0): thread 0 of block 0, then thread 1 of `block` with
    /// `reach`; returns how many messages before the newest the second may read.
    fn second_increment_choices(block: u32, first: Reach, second: Reach) -> usize {
        let mut m = PtxMemory::new(2, 2);
        m.atomic(access(0, 0, first), X, 4, 0, 0, Some(1), as_newest);
        choices_at_x(&m, access(1, block, second), increment).len()
    }

    /// Which messages RMW `a`, writing `writes` of the value it reads, may read at `X` instead
    /// of the newest ([`PtxMemory::rmw_choices`]).
    fn choices_at_x(m: &PtxMemory, a: Access, writes: impl Fn(u64) -> Option<u64>) -> Vec<usize> {
        m.rmw_choices(a, X, 4, writes)
    }

    /// What `atomicAdd(p, 1)` writes when it reads `old`.
    fn increment(old: u64) -> Option<u64> {
        Some(old + 1)
    }

    /// What `atomicAdd(p, 0)` writes when it reads `old`: the value it read.
    fn add_zero(old: u64) -> Option<u64> {
        Some(old)
    }

    /// Regression (issue 30: `atomicAdd_block` from two blocks never lost an update): PTX
    /// gives atomicity only between morally strong RMWs.
    #[test]
    fn a_cta_scope_rmw_may_read_before_another_blocks_rmw() {
        assert_eq!(second_increment_choices(1, Reach::Cta, Reach::Cta), 1);
        assert_eq!(second_increment_choices(1, Reach::Gpu, Reach::Cta), 1);
        assert_eq!(second_increment_choices(1, Reach::Cta, Reach::Gpu), 1);
        let mut m = PtxMemory::new(2, 2);
        m.atomic(access(0, 0, Reach::Cta), X, 4, 0, 0, Some(1), as_newest);
        let lost = m.rmw_value(X, 4, 1, 1);
        assert_eq!(lost, 0);
        m.atomic(
            access(1, 1, Reach::Cta),
            X,
            4,
            1,
            1,
            Some(lost + 1),
            as_newest,
        );
        assert_eq!(m.locations[&X].newest().value, 1);
    }

    #[test]
    fn morally_strong_rmws_read_the_newest() {
        assert_eq!(second_increment_choices(1, Reach::Gpu, Reach::Gpu), 0);
        assert_eq!(second_increment_choices(0, Reach::Cta, Reach::Cta), 0);
        // A thread never reads before its own write, whatever the scope.
        let mut m = PtxMemory::new(2, 2);
        m.atomic(access(1, 1, Reach::Cta), X, 4, 0, 0, Some(1), as_newest);
        m.atomic(access(0, 0, Reach::Cta), X, 4, 0, 1, Some(2), as_newest);
        assert_eq!(choices_at_x(&m, access(1, 1, Reach::Cta), increment), [1]);
        assert!(choices_at_x(&m, access(0, 0, Reach::Cta), increment).is_empty());
    }

    /// Before a write morally strong with it, an RMW reads only where its own write can go
    /// directly above what it read, so that nothing comes between the two (PTX's atomicity
    /// axiom); before weak writes of other threads it reads freely.
    #[test]
    fn an_rmw_reads_before_a_strong_write_only_with_its_write_directly_above_what_it_read() {
        let mut m = PtxMemory::new(3, 3);
        m.atomic(access(0, 0, Reach::Gpu), X, 4, 0, 0, Some(1), as_newest);
        m.store(access(1, 1, Reach::Weak), X, 4, 1, 5, as_newest);
        assert_eq!(choices_at_x(&m, access(2, 2, Reach::Gpu), increment), [1]);
        m.store(access(1, 1, Reach::Gpu), X, 4, 5, 6, as_newest);
        // Not the initial value: the first increment read it, and a write between the two
        // would split that increment.
        assert_eq!(
            choices_at_x(&m, access(2, 2, Reach::Gpu), increment),
            [2, 1]
        );
        m.atomic(access(2, 2, Reach::Gpu), X, 4, 2, 6, Some(2), lowest);
        // The oldest goes: a location keeps `KEPT` messages.
        assert_eq!(values_of_x(&m), [1, 2, 5, 6]);
    }

    /// Regression (a sense-reversing grid barrier hung: an increment read the count below a
    /// weak reset and below an increment that had read that count over the reset, so two
    /// morally strong increments read one value).
    #[test]
    fn an_rmw_never_goes_between_a_morally_strong_rmw_and_what_it_read_over_weak_writes() {
        let mut m = PtxMemory::new(4, 4);
        m.atomic(access(0, 0, Reach::Gpu), X, 4, 0, 0, Some(3), as_newest);
        m.store(access(1, 1, Reach::Weak), X, 4, 3, 0, as_newest);
        m.atomic(access(2, 2, Reach::Gpu), X, 4, 1, 0, Some(4), as_newest);
        assert_eq!(values_of_x(&m), [0, 3, 0, 4]);
        assert!(choices_at_x(&m, access(3, 3, Reach::Gpu), increment).is_empty());
    }

    /// The values of `X`'s messages, oldest first.
    fn values_of_x(m: &PtxMemory) -> Vec<u64> {
        m.locations[&X].msgs.iter().map(|msg| msg.value).collect()
    }

    /// Regression (message passing through relaxed RMWs alone never read a stale payload:
    /// `atomicExch` of the payload, `atomicAdd(p, 0)` to read it): an RMW that writes the value
    /// it reads may read before a morally strong RMW that read that value, which then reads
    /// it instead, unless it knows that RMW or releases.
    #[test]
    fn a_value_preserving_rmw_may_read_before_a_morally_strong_rmw_that_read_the_same_value() {
        let mut m = PtxMemory::new(3, 3);
        m.atomic(access(0, 0, Reach::Gpu), X, 4, 0, 0, Some(41), as_newest);
        assert_eq!(choices_at_x(&m, access(1, 1, Reach::Gpu), add_zero), [1]);
        assert!(choices_at_x(&m, access(1, 1, Reach::Gpu), increment).is_empty());
        let stale = clone(&m);
        m.atomic(access(1, 1, Reach::Gpu), X, 4, 1, 41, Some(0), lowest);
        assert_eq!(values_of_x(&m), [0, 0, 41]);
        let mut released = clone(&stale);
        released.fence_acq_rel(1, Reach::Gpu);
        assert!(choices_at_x(&released, access(1, 1, Reach::Gpu), add_zero).is_empty());
        let mut knows = stale;
        knows.fence_acq_rel(0, Reach::Gpu);
        knows.store(access(0, 0, Reach::Gpu), Y, 4, 0, 1, as_newest);
        newest_load(&mut knows, acquiring(access(1, 1, Reach::Gpu)), Y, 1);
        assert!(choices_at_x(&knows, access(1, 1, Reach::Gpu), add_zero).is_empty());
    }

    /// Regression (a `cuda::binary_semaphore` let two blocks in: the first RMW of a location
    /// with no history recorded reading 0, not the value in memory, so a second exchange
    /// taking the same 1 could go between the initial value and it).
    #[test]
    fn the_first_rmw_of_a_location_records_the_value_in_memory_as_what_it_read() {
        let mut m = PtxMemory::new(2, 2);
        m.atomic(access(0, 0, Reach::Gpu), X, 4, 0, 1, Some(0), as_newest);
        assert_eq!(m.locations[&X].msgs[1].rmw, Some(1));
        let take = |_| Some(0);
        assert!(choices_at_x(&m, access(1, 1, Reach::Gpu), take).is_empty());
    }

    #[test]
    fn a_failed_cas_writes_nothing() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 1, as_newest);
        m.atomic(access(1, 1, Reach::Gpu), X, 4, 0, 1, None, as_newest);
        assert_eq!(m.locations[&X].msgs.len(), 2);
    }

    /// How many of the newest messages of `X` a write of `a` may go below.
    fn placements_of_x(m: &PtxMemory, a: Access) -> usize {
        m.placements(a, X, m.tracked_location(X, 4).expect("X was written"))
    }

    /// A placement choice that puts a write as low as it may go.
    fn lowest(n: usize) -> usize {
        n
    }

    /// Regression (issue 26: 2+2W, S and `Manual/CoRW-WW` were never weak): a store always
    /// became the newest write of its location, so a store that executed later could never
    /// precede in coherence a racing store that executed earlier.
    #[test]
    fn a_store_may_take_effect_before_a_racing_store_that_executed_earlier() {
        let mut m = PtxMemory::new(2, 1);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 2, as_newest);
        let second = access(1, 0, Reach::Weak);
        assert_eq!(placements_of_x(&m, second), 1);
        // Placed below: memory keeps the first store's value, which is the final one.
        assert!(!m.store(second, X, 4, 2, 1, lowest));
        let loc = m.tracked_location(X, 4).unwrap();
        let values: Vec<u64> = loc.msgs.iter().map(|m| m.value).collect();
        assert_eq!(values, vec![0, 1, 2]);
        assert!(loc.msgs[2].racing, "two weak stores stay unordered");
        // Morally strong stores are ordered, but either way round: the later may go first.
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 2, as_newest);
        assert!(!m.store(access(1, 1, Reach::Gpu), X, 4, 2, 1, lowest));
        assert!(!m.tracked_location(X, 4).unwrap().msgs[2].racing);
    }

    /// Regression (fuzzing, `tests/litmus/CoWR+write-orders-racing-writes-through-a-third`):
    /// a write following its own weak write and morally strong with a racing one above went
    /// below that one when a third write lay between, ordering the racing pair.
    #[test]
    fn a_write_does_not_order_a_racing_pair_through_a_write_between_them() {
        let mut m = PtxMemory::new(3, 4);
        m.store(access(2, 3, Reach::Weak), X, 4, 0, 3, as_newest);
        m.store(access(1, 1, Reach::Gpu), X, 4, 3, 2, as_newest);
        m.store(access(0, 0, Reach::Weak), X, 4, 2, 1, |_| 1);
        let values: Vec<u64> = m
            .tracked_location(X, 4)
            .unwrap()
            .msgs
            .iter()
            .map(|m| m.value)
            .collect();
        assert_eq!(values, vec![0, 3, 1, 2]);
        assert_eq!(placements_of_x(&m, access(2, 3, Reach::Gpu)), 0);
        // A weak write orders nothing it goes below: it may go anywhere above its own.
        assert_eq!(placements_of_x(&m, access(2, 3, Reach::Weak)), 2);
    }

    #[test]
    fn a_store_follows_the_writes_it_wrote_read_strongly_or_knows() {
        // Its own earlier write.
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        assert_eq!(placements_of_x(&m, access(0, 0, Reach::Weak)), 0);
        // A write it read with a morally strong read (CoRW), but not one it read weakly.
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 1, as_newest);
        newest_load(&mut m, access(1, 1, Reach::Weak), X, 1);
        assert_eq!(placements_of_x(&m, access(1, 1, Reach::Gpu)), 1);
        newest_load(&mut m, access(1, 1, Reach::Gpu), X, 1);
        assert_eq!(placements_of_x(&m, access(1, 1, Reach::Gpu)), 0);
        // A write in its causal past (message passing, then a store to the payload).
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(releasing(access(0, 0, Reach::Gpu)), Y, 4, 0, 1, as_newest);
        assert_eq!(placements_of_x(&m, access(1, 1, Reach::Weak)), 1);
        newest_load(&mut m, acquiring(access(1, 1, Reach::Gpu)), Y, 1);
        assert_eq!(placements_of_x(&m, access(1, 1, Reach::Weak)), 0);
    }

    #[test]
    fn a_store_never_splits_a_morally_strong_rmw_from_the_write_it_read() {
        let mut m = PtxMemory::new(3, 3);
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 1, as_newest);
        m.atomic(access(1, 1, Reach::Gpu), X, 4, 0, 1, Some(2), as_newest);
        assert_eq!(placements_of_x(&m, access(2, 2, Reach::Gpu)), 0);
        // A write that is not morally strong with the RMW may go below it.
        assert_eq!(placements_of_x(&m, access(2, 2, Reach::Weak)), 2);
    }

    /// Regression (issue 26, CoWR with a racing write): a thread's own write hid the write
    /// before it even when the two race, which PTX leaves unordered in coherence.
    #[test]
    fn a_thread_may_read_a_write_racing_with_its_own_write() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Cta), X, 4, 0, 1, as_newest);
        m.store(access(1, 1, Reach::Gpu), X, 4, 1, 2, lowest);
        assert_eq!(readable(&m, access(0, 0, Reach::Cta), X, 1), vec![1, 2]);
        // A morally strong one is ordered before the own write: never read.
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 1, as_newest);
        m.store(access(1, 1, Reach::Gpu), X, 4, 1, 2, lowest);
        assert_eq!(readable(&m, access(0, 0, Reach::Gpu), X, 1), vec![1]);
    }

    /// The values a load of `X` by `a` that its thread's store overtook may read, from
    /// coherence position `floor` (see [`PtxMemory::load_before_own`]).
    fn values_before_own(m: &PtxMemory, a: Access, floor: u64) -> Vec<u64> {
        let mut out: Vec<u64> = (0..=KEPT as u32)
            .filter_map(|p| {
                let chance = if p == KEPT as u32 { 0 } else { u32::MAX };
                clone(m).load_before_own(a, (X, 4), (p, chance), floor)
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn a_load_its_own_store_overtook_reads_the_other_threads_later_write_but_never_its_own() {
        // Thread 0 (block 0) loaded X, then its store of 1 took effect; thread 1 (block 1)
        // then wrote 2.
        let setup = |load: Reach, store: Reach, other: Reach| {
            let mut m = PtxMemory::new(2, 2);
            let floor = m.position(0, X, 4);
            m.store(access(0, 0, store), X, 4, 0, 1, as_newest);
            m.store(access(1, 1, other), X, 4, 1, 2, as_newest);
            values_before_own(&m, access(0, 0, load), floor)
        };
        assert_eq!(setup(Reach::Weak, Reach::Weak, Reach::Weak), vec![0, 2]);
        assert_eq!(setup(Reach::Weak, Reach::Gpu, Reach::Gpu), vec![0, 2]);
        assert_eq!(setup(Reach::Cta, Reach::Cta, Reach::Cta), vec![0, 2]);
        // A read morally strong with the later write observes it; observation then program
        // order put that write before the store in coherence, so it cannot follow the store,
        // whether the store is strong or weak (QA fuzzing found the weak one).
        assert_eq!(setup(Reach::Gpu, Reach::Gpu, Reach::Gpu), vec![0]);
        assert_eq!(setup(Reach::Gpu, Reach::Weak, Reach::Gpu), vec![0]);
    }

    /// Load buffering through a release store of the load's own bytes: thread 0 loaded X,
    /// then its `st.release` of 1 took effect; thread 1 acquired that store and wrote 2 (the
    /// release caused it); thread 2 wrote 3. The load reads from its floor, never its own
    /// write nor the caused one, and a morally strong write above the floor not at all.
    #[test]
    fn a_load_its_own_release_store_overtook_reads_from_its_floor_nothing_the_release_caused() {
        let setup = |other: Reach| {
            let mut m = PtxMemory::new(3, 3);
            let floor = m.position(0, X, 4);
            let mark = m.mark(0, 0);
            m.store(releasing(access(0, 0, Reach::Gpu)), X, 4, 0, 1, as_newest);
            let acquirer = acquiring(access(1, 1, Reach::Gpu));
            assert_eq!(newest_load(&mut m, acquirer, X, 1), 1);
            m.store(access(1, 1, Reach::Weak), X, 4, 1, 2, as_newest);
            m.store(access(2, 2, other), X, 4, 2, 3, as_newest);
            let limits = ReadLimits {
                mark: Some(mark),
                observing: true,
                floor: Some(floor),
            };
            (m, limits)
        };
        let (m, limits) = setup(Reach::Weak);
        let weak = access(0, 0, Reach::Weak);
        assert_eq!(restricted_values(&m, weak, limits), vec![0, 3]);
        let (m, limits) = setup(Reach::Gpu);
        let relaxed = access(0, 0, Reach::Gpu);
        assert_eq!(restricted_values(&m, relaxed, limits), vec![0]);
        // Without the floor its own store would bound it: nothing left but its fallback.
        let no_floor = ReadLimits {
            floor: None,
            ..limits
        };
        assert_eq!(restricted_values(&m, relaxed, no_floor), Vec::<u64>::new());
    }

    /// Regression (UNSOUND, found by `scripts/fuzz-litmus.py`, seed 59): a strong read of Y
    /// that reads a release, then an acquire of Y that reads a newer weak write, is PTX's
    /// second acquire pattern (`ld.relaxed [M]; ld.acquire [M]`): it synchronises with the
    /// release whatever the acquire reads. Only an acquire that observed a release took it.
    #[test]
    fn a_strong_read_then_an_acquire_of_its_location_acquires_whatever_the_acquire_reads() {
        let mut m = PtxMemory::new(3, 3);
        m.store(access(1, 1, Reach::Weak), X, 4, 0, 1, as_newest);
        m.store(releasing(access(1, 1, Reach::Gpu)), Y, 4, 0, 1, as_newest);
        read_flag(&mut m, 0, 0);
        m.store(access(2, 2, Reach::Weak), Y, 4, 1, 2, as_newest);
        assert_eq!(readable(&m, access(0, 0, Reach::Weak), X, 1), vec![0, 1]);
        let acquirer = acquiring(access(0, 0, Reach::Gpu));
        assert_eq!(newest_load(&mut m, acquirer, Y, 2), 2);
        assert_eq!(readable(&m, access(0, 0, Reach::Weak), X, 1), vec![1]);
    }

    /// LB with acquire loads (`ld.acquire x; st.relaxed y || ld.acquire y; st.relaxed x`):
    /// a deferred acquire load that nothing ordering overtook may observe a morally strong
    /// write that releases nothing (it synchronises with nobody), never one that releases,
    /// nor one whose writer fenced before it (a release pattern).
    #[test]
    fn a_deferred_acquire_load_observes_a_write_only_where_it_releases_nothing() {
        let acquirer = acquiring(access(0, 0, Reach::Gpu));
        let deferred = ReadLimits {
            observing: true,
            ..ReadLimits::default()
        };
        let mut m = PtxMemory::new(2, 2);
        m.store(access(1, 1, Reach::Gpu), X, 4, 0, 1, as_newest);
        assert_eq!(restricted_values(&m, acquirer, deferred), vec![0, 1]);
        // As a fallback (no effect allowed) it may not.
        let fallback = ReadLimits::default();
        assert_eq!(restricted_values(&m, acquirer, fallback), vec![0]);
        let mut m = PtxMemory::new(2, 2);
        m.store(releasing(access(1, 1, Reach::Gpu)), X, 4, 0, 1, as_newest);
        assert_eq!(restricted_values(&m, acquirer, deferred), vec![0]);
        let mut m = PtxMemory::new(2, 2);
        m.fence_acq_rel(1, Reach::Gpu);
        m.store(access(1, 1, Reach::Gpu), X, 4, 0, 1, as_newest);
        assert_eq!(restricted_values(&m, acquirer, deferred), vec![0]);
        // Observing it is a strong read: the reader's later reads of X are held by it.
        let mut m = PtxMemory::new(2, 2);
        m.store(access(1, 1, Reach::Gpu), X, 4, 0, 1, as_newest);
        let read = m.restricted_load(acquirer, (X, 4), 1, (u32::MAX, 0), deferred);
        assert_eq!(read, Some(1));
        assert_eq!(readable(&m, access(0, 0, Reach::Gpu), X, 1), vec![1]);
    }

    /// Limits of a load overtaken by the release at `mark`, observing nothing.
    fn marked(mark: Mark) -> ReadLimits {
        ReadLimits {
            mark: Some(mark),
            ..ReadLimits::default()
        }
    }

    /// The values a restricted load of `X` by `a` may read with `limits`.
    fn restricted_values(m: &PtxMemory, a: Access, limits: ReadLimits) -> Vec<u64> {
        let loc = m.tracked_location(X, 4).expect("X was written");
        let mut v: Vec<u64> = m
            .restricted_choices(a, X, 4, limits)
            .expect("X was written")
            .into_iter()
            .map(|(i, _)| loc.msgs[i].value)
            .collect();
        v.sort();
        v
    }

    /// Regression (issue 26: LB with fences, or across CTAs with cta scope, never weak): a
    /// load overtaken by a fence or release may still read a write it does not synchronise
    /// with, but never one its overtaking release caused.
    #[test]
    fn a_load_overtaken_by_a_release_never_reads_a_write_that_release_caused() {
        // Thread 0 (block 0) defers a load of X, then a release and a flag store overtake it.
        let mut m = PtxMemory::new(3, 3);
        m.store(access(2, 2, Reach::Weak), X, 4, 0, 5, as_newest);
        let mark = m.mark(0, 0);
        m.fence_acq_rel(0, Reach::Gpu);
        m.store(access(0, 0, Reach::Gpu), Y, 4, 0, 1, as_newest);
        // Thread 1 writes X without reading the flag (load buffering): readable.
        m.store(access(1, 1, Reach::Weak), X, 4, 5, 6, as_newest);
        let weak = access(0, 0, Reach::Weak);
        assert_eq!(restricted_values(&m, weak, marked(mark)), vec![0, 5, 6]);
        // Thread 2 acquires the flag, then writes X: caused by the release, never read.
        newest_load(&mut m, acquiring(access(2, 2, Reach::Gpu)), Y, 1);
        m.store(access(2, 2, Reach::Weak), X, 4, 6, 7, as_newest);
        assert_eq!(readable(&m, weak, X, 7), vec![0, 5, 6, 7]);
        assert_eq!(restricted_values(&m, weak, marked(mark)), vec![0, 5, 6]);
    }

    #[test]
    fn a_restricted_strong_load_reads_only_writes_it_is_not_morally_strong_with() {
        let mut m = PtxMemory::new(3, 3);
        m.store(access(1, 1, Reach::Gpu), X, 4, 0, 1, as_newest);
        m.store(access(2, 2, Reach::Weak), X, 4, 1, 2, as_newest);
        // A gpu-scope load would observe thread 1's write (and might synchronise): excluded.
        assert_eq!(
            restricted_values(&m, access(0, 0, Reach::Gpu), ReadLimits::default()),
            vec![0, 2]
        );
        // A cta-scope load in another block is not morally strong with it.
        assert_eq!(
            restricted_values(&m, access(0, 0, Reach::Cta), ReadLimits::default()),
            vec![0, 1, 2]
        );
    }

    /// Regression (issue 26: load buffering where an RMW comes before a cta-scope fence or
    /// release of a thread alone in its CTA was never shown): such a fence or release orders
    /// nothing another thread can see, so accesses may overtake each other across it.
    #[test]
    fn an_ordering_whose_scope_holds_no_other_thread_synchronises_with_nobody() {
        let alone_in_each_block = PtxMemory::new(3, 3);
        assert!(alone_in_each_block.synchronises_with_nobody(0, 0, 1, Reach::Cta));
        assert!(!alone_in_each_block.synchronises_with_nobody(0, 0, 1, Reach::Gpu));
        assert!(!alone_in_each_block.synchronises_with_nobody(0, 0, 1, Reach::Weak));
        let one_thread = PtxMemory::new(1, 1);
        assert!(one_thread.synchronises_with_nobody(0, 0, 1, Reach::Gpu));
        // Blocks 0 and 2 on GPU 0, block 1 alone on GPU 1: a gpu-scope ordering of block 1
        // has no partner, one of block 0 has block 2, and a sys-scope one has both.
        let three = PtxMemory::on_gpus(3, 3, Gpus::new(&[0, 1]));
        assert!(three.synchronises_with_nobody(1, 1, 1, Reach::Gpu));
        assert!(!three.synchronises_with_nobody(0, 0, 1, Reach::Gpu));
        assert!(!three.synchronises_with_nobody(1, 1, 1, Reach::Sys));
        // Two threads in block 0: not while the other lives, nor once it has exited after a
        // write (a release of it may still be acquired); yes once it exited without one.
        let mut m = PtxMemory::new(2, 1);
        assert!(!m.synchronises_with_nobody(0, 0, 2, Reach::Cta));
        assert!(m.synchronises_with_nobody(0, 0, 1, Reach::Cta));
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 1, as_newest);
        assert!(m.synchronises_with_nobody(0, 0, 1, Reach::Cta));
        m.store(releasing(access(1, 0, Reach::Cta)), Y, 4, 0, 1, as_newest);
        assert!(!m.synchronises_with_nobody(0, 0, 1, Reach::Cta));
    }

    #[test]
    fn a_location_remembers_at_most_kept_messages_and_readers() {
        let mut m = PtxMemory::new(30, 2);
        for k in 1..=10 {
            m.store(access(0, 0, Reach::Gpu), X, 4, k - 1, k, as_newest);
        }
        assert_eq!(
            readable(&m, access(29, 1, Reach::Weak), X, 10),
            vec![7, 8, 9, 10]
        );
        for t in 1..=20 {
            newest_load(&mut m, access(t, 1, Reach::Gpu), X, 10);
        }
        // Forgotten readers raised the floor: nobody reads below what they had read.
        assert_eq!(readable(&m, access(29, 1, Reach::Gpu), X, 10), vec![10]);
    }

    #[test]
    fn a_wider_store_forgets_the_words_it_covers() {
        let mut m = PtxMemory::new(2, 2);
        m.store(access(0, 0, Reach::Weak), X + 4, 4, 0, 1, as_newest);
        m.store(access(0, 0, Reach::Weak), X, 8, 0, 5, as_newest);
        assert_eq!(readable(&m, access(1, 1, Reach::Weak), X + 4, 0), vec![0]);
        assert!(m.tracked_location(X, 8).is_some());
        m.store(access(0, 0, Reach::Weak), X + 4, 4, 0, 2, as_newest);
        assert!(m.tracked_location(X, 8).is_none());
    }

    /// Blocks 0 and 1 on two GPUs of one system.
    fn on_two_gpus() -> PtxMemory {
        PtxMemory::on_gpus(2, 2, Gpus::new(&[0, 1]))
    }

    /// Message passing from GPU 0 to GPU 1: the payload `X` (weak), `fence.acq_rel` at
    /// `release`, the flag `Y` (relaxed at `release`); the reader reads the flag (relaxed at
    /// `acquire`) and fences at `acquire`.
    fn message_passing_across_gpus(release: Reach, acquire: Reach) -> PtxMemory {
        let mut m = on_two_gpus();
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.fence_acq_rel(0, release);
        m.store(access(0, 0, release), Y, 4, 0, 1, as_newest);
        read_flag_then_fence(&mut m, 1, 1, acquire);
        m
    }

    #[test]
    fn sys_scope_message_passing_across_gpus_publishes_the_payload() {
        payload_is_seen(&message_passing_across_gpus(Reach::Sys, Reach::Sys), 1, 1);
    }

    #[test]
    fn a_gpu_scope_on_either_side_does_not_synchronise_across_gpus() {
        for (release, acquire) in [
            (Reach::Gpu, Reach::Gpu),
            (Reach::Gpu, Reach::Sys),
            (Reach::Sys, Reach::Gpu),
        ] {
            let m = message_passing_across_gpus(release, acquire);
            payload_may_be_stale(&m, 1, 1);
        }
    }

    #[test]
    fn gpu_scope_message_passing_on_one_gpu_of_two_publishes_the_payload() {
        let mut m = PtxMemory::on_gpus(2, 2, Gpus::new(&[1, 1]));
        publish_with_release_fence(&mut m, Reach::Gpu);
        read_flag_then_fence(&mut m, 1, 1, Reach::Gpu);
        payload_is_seen(&m, 1, 1);
    }

    #[test]
    fn only_sys_scope_fence_sc_orders_store_buffering_across_gpus() {
        for (reach, seen) in [(Reach::Gpu, false), (Reach::Sys, true)] {
            let mut m = on_two_gpus();
            m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
            m.fence_sc(0, 0, reach);
            m.store(access(1, 1, Reach::Weak), Y, 4, 0, 1, as_newest);
            m.fence_sc(1, 1, reach);
            let values = if seen { vec![1] } else { vec![0, 1] };
            assert_eq!(readable(&m, access(1, 1, Reach::Weak), X, 1), values);
        }
    }

    #[test]
    fn gpu_scope_writes_on_two_gpus_are_not_morally_strong() {
        let mut m = on_two_gpus();
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 1, as_newest);
        // A gpu-scope read on the other GPU does not observe, so it binds no later read
        assert_eq!(newest_load(&mut m, access(1, 1, Reach::Gpu), X, 1), 1);
        assert_eq!(readable(&m, access(1, 1, Reach::Weak), X, 1), vec![0, 1]);
        // while a sys-scope pair is morally strong: coherence holds the reader
        let mut m = on_two_gpus();
        m.store(access(0, 0, Reach::Sys), X, 4, 0, 1, as_newest);
        assert_eq!(newest_load(&mut m, access(1, 1, Reach::Sys), X, 1), 1);
        assert_eq!(readable(&m, access(1, 1, Reach::Weak), X, 1), vec![1]);
    }

    /// The RMW chain (Dat3M's `rmw-chain-2a`, `LB+RMW-a`): thread 2 defers its relaxed load of
    /// X, its release of Y overtakes it (mark `k`); thread 0 acquires Y and writes X weakly;
    /// thread 1's relaxed RMW reads that write and puts its own below it in coherence. Returns
    /// the model and the mark.
    fn rmw_chain(t0_reads_x_first: bool) -> (PtxMemory, Mark) {
        let mut m = PtxMemory::new(3, 3);
        let k = m.mark(2, 2);
        m.store(releasing(access(2, 2, Reach::Gpu)), Y, 4, 0, 1, as_newest);
        assert_eq!(
            newest_load(&mut m, acquiring(access(0, 0, Reach::Gpu)), Y, 1),
            1
        );
        if t0_reads_x_first {
            assert_eq!(newest_load(&mut m, access(0, 0, Reach::Weak), X, 0), 0);
        }
        m.store(access(0, 0, Reach::Weak), X, 4, 0, 1, as_newest);
        m.atomic(access(1, 1, Reach::Gpu), X, 4, 0, 1, Some(3), lowest);
        (m, k)
    }

    /// What thread 2's restricted load of X reads in [`rmw_chain`] (the newest it may).
    fn restricted_read(m: &mut PtxMemory, k: Mark, observing: bool) -> Option<u64> {
        let a = access(2, 2, Reach::Gpu);
        let limits = ReadLimits {
            mark: Some(k),
            observing,
            floor: None,
        };
        m.restricted_load(a, (X, 4), 1, (u32::MAX, 0), limits)
    }

    /// Regression (the simulator never showed Dat3M's `rmw-chain-2a`, allowed by PTX): a
    /// restricted load overtaken by a release store may observe a morally strong write that
    /// the release did not cause, and no write before it in coherence was caused by the
    /// release either; threads holding the release then read it or later.
    #[test]
    fn a_load_overtaken_by_a_release_may_observe_an_rmw_that_read_a_weak_write() {
        let (mut m, k) = rmw_chain(false);
        assert_eq!(restricted_read(&mut m, k, true), Some(3));
        // Thread 0 holds the release, so the RMW's write is before its own in coherence now, and
        // it reads its own; thread 1 may still read the RMW's write.
        assert_eq!(readable(&m, access(0, 0, Reach::Weak), X, 1), vec![1]);
        assert_eq!(readable(&m, access(1, 1, Reach::Weak), X, 1), vec![1, 3]);
        // A fence that overtook the load would have made an acquire pattern: no observation.
        let (mut m, k) = rmw_chain(false);
        assert_eq!(restricted_read(&mut m, k, false), Some(0));
    }

    /// A thread holding the release read X before the RMW's write: observing that write would
    /// put it before that read in causality, with the read reading a write coherence-before it.
    #[test]
    fn a_late_observation_is_refused_when_a_thread_holding_the_release_read_older() {
        let (mut m, k) = rmw_chain(true);
        assert_eq!(restricted_read(&mut m, k, true), Some(0));
    }

    /// Regression (UNSOUND, found by fuzzing): thread 1 defers its relaxed load of X and its
    /// release of Y overtakes it; thread 2 acquires Y and defers an acquire load of X, which
    /// keeps the initial value as its fallback; thread 0 then writes X. Thread 1's load may not
    /// observe that write late: thread 2, holding the release, may still read its fallback,
    /// which the observation would make stale (write-to-read causality). X has a history
    /// before, so that the fallback is a message of it.
    #[test]
    fn a_late_observation_is_refused_when_a_thread_holding_the_release_kept_an_older_fallback() {
        let mut m = PtxMemory::new(3, 3);
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 0, as_newest);
        let k = m.mark(1, 1);
        m.store(releasing(access(1, 1, Reach::Gpu)), Y, 4, 0, 1, as_newest);
        let acquirer = acquiring(access(2, 2, Reach::Gpu));
        assert_eq!(newest_load(&mut m, acquirer, Y, 1), 1);
        assert_eq!(m.effectless_value(acquirer, X, 4, 0, 0), Some(0));
        m.store(access(0, 0, Reach::Gpu), X, 4, 0, 1, as_newest);
        let observer = access(1, 1, Reach::Gpu);
        let limits = ReadLimits {
            mark: Some(k),
            observing: true,
            floor: None,
        };
        let read = m.restricted_load(observer, (X, 4), 1, (u32::MAX, 0), limits);
        assert_eq!(read, Some(0));
    }
}
