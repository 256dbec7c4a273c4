//! Recording, per launch, which accesses of different threads conflicted without causality order
//! between them, and which accesses communicated: the facts `check --races` classifies and
//! `harden` takes its scopes and pairings from.
//!
//! It exists beside the PTX model rather than inside it because the model's causal pasts are
//! per block (stronger than PTX, see `ptx_model.rs`), which is right for choosing values but
//! would hide every race between threads of one block. The recorder keeps its own causality per
//! thread: a vector clock over the launch's application threads, whose entry for thread `u` is
//! the number of `u`'s global accesses known to precede (program order, release/acquire
//! patterns of a matching scope, `bar.sync`, `fence.sc` order). A write also remembers the
//! threads that observed it with a morally strong read: causality order is base causality,
//! or observation followed by base causality (PTX ISA, "Causality Order").
//!
//! What it records is facts, not verdicts: for every conflicting pair (same address, at least
//! one write, different threads) that causality does not order, both accesses' PTX lines,
//! kinds and strengths, whether they are morally strong, whether the two threads communicated
//! between them through a morally strong read of a write made after the first access
//! (`communicated`: a release/acquire pair around that communication would order them), which
//! release and acquire the two sides did have, and whether the location carries communication
//! itself (a flag spun on, a lock word, a variable some access releases or acquires at).
//! Communication may go through a third thread on either side. Relayed: the first access
//! reaches a third thread (through a barrier, an acquire, `fence.sc` order) before that thread
//! writes what the second thread reads; the release then belongs in the relaying thread, after
//! the point where the access reached it (`relay`). Passed on: a third thread reads what the
//! first thread wrote, then a barrier passes what it heard to the second thread; the acquire
//! then belongs in the reading thread, before that barrier (`passed`). Forwarded: further
//! threads each read a strong write and then make the one the next reads (write-to-read
//! causality); each needs an acquire and a release between its read and its write, and the
//! first one that lacks them is named (`forward`). Out of scope: the two threads communicated
//! only through strong accesses whose scope leaves one of them out (a `.cta` flag between
//! CTAs), which no fence repairs (`out_of_scope`). Classifying is the tool's business.
//!
//! An access the simulator performs late (a deferred load, a store held behind one) is numbered
//! in program order when issued and ordered by its thread's clock then. A write made while one
//! is outstanding keeps its thread's clock and what its thread had heard from each other one
//! (as issued, for a held store), so that a deferred read performed after it, even one that
//! reads it (load buffering), is placed before it when the read's thread had a later write of
//! its heard by the writer first.
//!
//! Not exact, in these directions: a read is checked against the write it read and the newest
//! write, a write against the newest write and the reads since it (older accesses can hide a
//! pair: races missed, never invented); observation through a chain of read-modify-writes is
//! followed, communication relayed through more than one thread only through its last thread,
//! communication is passed on at barriers only, and a thread forwards what it heard through
//! its strong writes only when no barrier passed it on (a pair may be called uncommunicated);
//! an access is compared with the newest write (and the reads since it) of each location of
//! another extent it overlaps, and a read observes those newest writes, as if
//! it had read them (the model may have given it an older value: a pair may be called observed
//! or communicated when it was not); stressing blocks are not recorded.

use super::isa::{Order, Reach};
use super::ptx_model::WordHasher;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::rc::Rc;
use std::sync::Arc;

type Map<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// What an access does to its location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessKind {
    Read,
    Write,
    /// An atomic read-modify-write (or a `cas` that wrote nothing).
    Rmw,
}

/// Whether an access (or fence) is strong, and at which scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strength {
    Weak,
    Cta,
    Gpu,
}

/// The recorder follows one GPU, where `.sys` reaches the threads `.gpu` does: it counts a
/// sys-scope access or fence as gpu-scope (on blocks placed on several GPUs it so treats
/// cross-GPU pairs as synchronising, and can miss a race, never report one PTX forbids).
impl From<Reach> for Strength {
    fn from(r: Reach) -> Strength {
        match r {
            Reach::Weak => Strength::Weak,
            Reach::Cta => Strength::Cta,
            Reach::Gpu | Reach::Sys => Strength::Gpu,
        }
    }
}

/// Where an access is: its PTX line in the loaded module, and what the line resolves to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RaceSite {
    pub function: String,
    pub ptx_line: u32,
    /// The instruction, as printed.
    pub ptx: String,
    /// The source file and line of the outermost frame, when the PTX has line info.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// For code inlined at that line from another (a function of the app or of a header):
    /// the line the access itself is on, the innermost frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner: Option<SourceLine>,
}

/// A line of a source file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceLine {
    pub file: String,
    pub line: u32,
}

/// One access of a pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceAccess {
    pub site: RaceSite,
    pub kind: AccessKind,
    pub strength: Strength,
}

/// What the recorder knows about an unordered pair beyond its two accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PairFacts {
    pub same_cta: bool,
    /// Both strong, with scopes that include each other (PTX's "morally strong").
    pub morally_strong: bool,
    /// The second access read the value the first wrote.
    pub observed: bool,
    /// The second thread read, morally strongly, a write its peer made after the first access
    /// and before the second: a release/acquire pair of a scope with both threads would order
    /// the two.
    pub communicated: bool,
    /// The second thread had read a write of its peer, but one made before the first access.
    pub communicated_before: bool,
    /// The strongest release (fence or release operation) of the first thread after its access;
    /// for a relayed pair (the conflict's `relay`), of the relaying thread after the access
    /// reached it, before its write.
    pub first_release: Option<Strength>,
    /// The acquire (fence or acquire operation) of the second thread after the communication;
    /// when the communication was passed on at a barrier, of the thread that read it, before
    /// the barrier.
    pub second_acquire: Option<Strength>,
    /// The writer and the reader of the communication are of one CTA (for a pair that was not
    /// relayed, `same_cta`): the scope its release and acquire need.
    #[serde(default)]
    pub communication_in_cta: bool,
}

/// A conflicting pair of accesses that causality order left unordered, summed over a launch
/// by sites and facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// The access that happened first.
    pub first: RaceAccess,
    pub second: RaceAccess,
    /// The two threads' blocks (of one occurrence).
    pub ctas: (u32, u32),
    #[serde(flatten)]
    pub facts: PairFacts,
    /// When communicated: the write and the read the communication went through (the places
    /// for a release after the first access and an acquire before the second).
    pub via: Option<(RaceSite, RaceSite)>,
    /// When relayed: the instruction at which the first access reached the writer of `via`
    /// (a barrier, an acquire, a `fence.sc`): its release belongs after it.
    #[serde(default)]
    pub relay: Option<RaceSite>,
    /// When passed on: the barrier at which the reader of `via` passed the communication on to
    /// the second thread: its acquire belongs before it.
    #[serde(default)]
    pub passed: Option<RaceSite>,
    /// When not communicated: a strong write of the first thread, made after the first access,
    /// and the second thread's strong read of it before the second access, whose scope leaves
    /// one thread out (a `.cta` flag between CTAs). At a scope with both threads they would be
    /// the communication: no fence widens a scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_scope: Option<(RaceSite, RaceSite)>,
    /// When forwarded: further threads passed the first access on, each reading a strong write
    /// and then making the one the next reads; the last made what the second thread read
    /// (`via`). A release after the first access, an acquire and a release in each forwarding
    /// thread between its read and its write, and an acquire after the second thread's read
    /// order the pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<Forwarded>,
    /// The location carries communication itself: a morally strong read of it ordered another
    /// pair's communication, a thread read it strongly twice without writing it between,
    /// reading the same write again or writing nowhere between, or read it at a wait load (a
    /// spin), an access made a release or an acquire at it, or the pair is a
    /// fenced flag handshake's (a read after its thread's write and a `fence.sc`, which PTX
    /// lets miss the other thread's write). Never for a stale read its
    /// thread acted on: a morally strong read (or RMW) that missed the first access though its
    /// thread had heard from the first thread after it, and that its thread did not follow
    /// with another read or RMW there (a spin retries; double-checked initialisation goes on).
    pub synchronising_location: bool,
    pub occurrences: u64,
    /// Distinct addresses.
    pub locations: u64,
}

/// How communication was forwarded: the first thread's write the first forwarding thread read
/// (`None` when the access reached that thread causally, at a barrier or an acquire); the read
/// and the write of the forwarding thread that lacks its acquire-then-release (the first such
/// one; the last forwarder when none lacks it); and the weakest acquire-then-release the
/// forwarding threads made between their read and their write (`None`: one made none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forwarded {
    pub write: Option<RaceSite>,
    pub read: RaceSite,
    pub passes: RaceSite,
    pub fenced: Option<Strength>,
    /// The first thread and the thread that read its write (or that it reached) are of one
    /// CTA: the scope the first thread's release needs (PTX's causality order is transitive,
    /// so each link needs a release and an acquire of a scope with its own two threads only).
    /// Absent (false) in journals from before it was recorded.
    #[serde(default)]
    pub first_in_cta: bool,
    /// The last forwarding thread and the second thread are of one CTA: the scope the second
    /// thread's acquire needs.
    #[serde(default)]
    pub last_in_cta: bool,
}

impl Conflict {
    /// Whether the release the first side needs has only threads of one CTA to reach: for a
    /// forwarded pair, the first link's; otherwise the communication's.
    pub fn release_in_cta(&self) -> bool {
        let first_link = self.forward.as_ref().is_some_and(|f| f.first_in_cta);
        first_link || self.facts.communication_in_cta
    }

    /// Whether the acquire the second side needs has only threads of one CTA to hear from: for
    /// a forwarded pair, the last link's; otherwise the communication's.
    pub fn acquire_in_cta(&self) -> bool {
        let last_link = self.forward.as_ref().is_some_and(|f| f.last_in_cta);
        last_link || self.facts.communication_in_cta
    }
}

/// Morally strong reads of another thread's write, by sites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Communication {
    pub writer: RaceSite,
    pub reader: RaceSite,
    pub same_cta: bool,
    pub occurrences: u64,
}

/// What the launches since recording was switched on recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceLog {
    pub conflicts: Vec<Conflict>,
    pub communication: Vec<Communication>,
}

/// A launch's pairs and communication, with PTX lines still unresolved.
#[derive(Debug, Default)]
pub struct LaunchRaces {
    pub conflicts: Vec<LaunchPair>,
    pub communication: Vec<((u32, u32, bool), u64)>,
}

/// A pair summed over a launch: its key, whether its location synchronises, its occurrences
/// and distinct addresses, and the blocks of one occurrence.
#[derive(Debug)]
pub struct LaunchPair {
    pub key: PairKey,
    pub synchronising: bool,
    pub occurrences: u64,
    pub locations: u64,
    pub ctas: (u32, u32),
}

/// What identifies a pair in a launch's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PairKey {
    pub first: (u32, AccessKind, Strength),
    pub second: (u32, AccessKind, Strength),
    pub facts: PairFacts,
    /// When communicated: the lines of the write and the read it went through.
    pub via: Option<(u32, u32)>,
    /// When relayed: the line at which the first access reached the writer of `via`.
    pub relay: Option<u32>,
    /// When passed on: the line of the barrier at which the reader of `via` passed it on.
    pub passed: Option<u32>,
    /// When not communicated: the lines of a strong write and read the threads communicated
    /// through between the two accesses, whose scope left one of them out.
    pub out_of_scope: Option<(u32, u32)>,
    /// When forwarded: how, by lines.
    pub forward: Option<ForwardKey>,
}

/// How a pair was forwarded, by lines ([`Forwarded`] once resolved): the line of the first
/// thread's write (0: none, it reached the first forwarder causally), the lines of the read and
/// the write of the forwarding thread named, the weakest acquire-then-release of the
/// forwarding threads, and whether the first and the last link are each in one CTA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ForwardKey {
    pub origin: u32,
    pub named: (u32, u32),
    pub fenced: Option<Strength>,
    pub first_in_cta: bool,
    pub last_in_cta: bool,
}

type Clock = Rc<[u32]>;

#[derive(Debug, Clone)]
struct WriteEntry {
    /// The model's timestamp of the message (`u32::MAX` for writes it does not track).
    ts: u32,
    /// The write itself.
    access: Side,
    view_cta: Option<Clock>,
    view_gpu: Option<Clock>,
    /// Threads that read it morally strongly, with their access numbers then.
    observers: Vec<(u32, u32)>,
    /// For a read-modify-write: the writes before it in observation order through atomics
    /// (thread, access number, line), the one it read first.
    chain: Vec<(u32, u32, u32)>,
    /// The writer's causality clock when it wrote, kept while some load is deferred: a read
    /// issued before this write and performed after it is ordered before it by this clock.
    clock: Option<Clock>,
    /// For a strong write: which accesses of other threads had reached its writer, and where
    /// (what a morally strong read of it hears relayed).
    reached: Option<Reached>,
    /// For a strong write: what its writer had heard directly, which a morally strong read of
    /// it hears forwarded.
    forwards: Option<Rc<[Forward]>>,
    /// What its writer had heard from other threads when it wrote, kept while some load is
    /// deferred: a read issued before a write its writer had heard precedes this write in
    /// program order and communication, however late the read is performed and whatever the
    /// writer heard since.
    heard: Option<HeardRow>,
}

/// Thread `t`'s access number `pos`, as one word (a key of [`RaceTracker::issued`], a write a
/// read took in [`LastOwn::Read`]).
fn access_key(t: u32, pos: u32) -> u64 {
    (u64::from(t) << 32) | u64::from(pos)
}

/// A thread's row of [`RaceTracker::heard`]: the writers it heard from, with the newest
/// communication from each.
type HeardRow = Rc<[(u32, Heard)]>;

/// The first access of a pair [`RaceTracker::check`] is given, with the threads that observed
/// it; for a write made while a load was deferred, also its thread's clock and `heard` row then.
type FirstSide<'a> = (
    Side,
    &'a [(u32, u32)],
    Option<&'a Clock>,
    Option<&'a HeardRow>,
);

/// A thread's causality clock, and per entry the line of the instruction at which it last
/// grew: where the other thread's accesses reached this one.
#[derive(Debug, Clone)]
struct Reached {
    clock: Clock,
    lines: Clock,
}

#[derive(Debug, Default)]
struct Shadow {
    /// Newest last, at most [`WRITES`].
    writes: Vec<WriteEntry>,
    /// Reads since the newest write, one per thread (its latest).
    reads: Vec<Side>,
    /// Per thread (the first [`OWN`] to come), its last access here.
    last_own: Vec<(u32, LastOwn)>,
    /// A thread read it again, with no write of its own here between, and either the same
    /// write again or with no write of its own anywhere between; or read it at a wait load:
    /// it waits on it.
    spun: bool,
    /// The widest access made here, bytes (accesses of other widths at this address share
    /// the shadow).
    size: u8,
}

impl Shadow {
    /// The index in `writes` of the message with timestamp `read_ts` (`None`: the newest).
    fn read_index(&self, read_ts: Option<u32>) -> Option<usize> {
        match read_ts {
            Some(ts) => self.writes.iter().rposition(|w| w.ts == ts),
            None => self.writes.len().checked_sub(1),
        }
    }

    /// Keeps `read` as its thread's latest read since the newest write.
    fn note_read(&mut self, read: Side) {
        self.reads.retain(|r| r.thread != read.thread);
        self.reads.push(read);
    }

    /// Notes an access of thread `t`; a read after a read of the same thread is a spin where
    /// it read the same write again or the thread wrote nothing between. A thread that reads
    /// a location lap after lap, new writes each time, and writes elsewhere between (a queue's
    /// slot, a ring buffer's) consumes it and waits elsewhere.
    fn note_own(&mut self, t: u32, access: LastOwn) {
        let Some(o) = self.last_own.iter_mut().find(|o| o.0 == t) else {
            if self.last_own.len() < OWN {
                self.last_own.push((t, access));
            }
            return;
        };
        if let (
            LastOwn::Read { write, writes },
            LastOwn::Read {
                write: w,
                writes: n,
            },
        ) = (o.1, access)
        {
            self.spun |= write == w || writes == n;
        }
        o.1 = access;
    }

    /// Which write a read of `read_ts` takes here ([`LastOwn::Read`]'s `write`).
    fn write_read(&self, read_ts: Option<u32>) -> u64 {
        let Some(w) = self.read_index(read_ts).map(|i| &self.writes[i]) else {
            return u64::MAX;
        };
        access_key(w.access.thread, w.access.pos)
    }
}

/// A thread's last access of a location, as a spin is told by.
#[derive(Debug, Clone, Copy)]
enum LastOwn {
    Wrote,
    /// A read of `write` (the writer's thread and access number; `u64::MAX`: a value older
    /// than every write kept) when the thread's latest write anywhere was its access `writes`.
    Read {
        write: u64,
        writes: u32,
    },
}

/// Writes a shadow keeps at most: the model's [`KEPT`](crate::ptx_model::KEPT) messages of a
/// tracked location are trimmed to with [`RaceTracker::keep_written`] after each write, so this
/// bounds only locations the model does not track, and the write just pushed.
const WRITES: usize = 2 * crate::ptx_model::KEPT;
const OBSERVERS: usize = 4;
const OWN: usize = 32;
const CHAIN: usize = 8;

/// The newest communication from one thread to another: how many of the writer's accesses
/// reached the reader (those numbered below `wpos`), the reader's access number, and the
/// location. Direct when the writer wrote what the reader read; relayed when a third thread
/// did, after the writer's accesses reached it.
#[derive(Debug, Clone, Copy, Default)]
struct Heard {
    wpos: u32,
    rpos: u32,
    /// The read that heard the write `wpos` first, when a later one heard it again (0: `rpos`):
    /// from there on the reader knew it, so a deferred read of the writer's thread issued
    /// before that write precedes the reader's later writes, however late it is performed.
    first_rpos: u32,
    addr: u64,
    /// The lines of the write and of the read.
    wline: u32,
    rline: u32,
    /// Relayed: the line at which the accesses reached the third thread (0: direct).
    relay: u32,
    /// Relayed: how many of the accesses the third thread's releases covered before its
    /// write, at CTA and at GPU scope.
    released: (u32, u32),
    /// Heard from the writer of the write read: how many of its own accesses its releases
    /// covered before that write, at CTA and at GPU scope (a release it made after the write
    /// forms no release pattern with it).
    writer_released: Option<(u32, u32)>,
    /// The writer and the reader of the communication are of one CTA.
    in_cta: bool,
    /// Passed on: the line of the barrier at which the thread that read the communication
    /// passed it to this one (0: this thread read it).
    passed: u32,
    /// Passed on: the acquire that thread made after its read, before the barrier.
    acquired: Option<Strength>,
    /// Forwarded: how (`None`: not forwarded).
    forward: Option<ForwardPath>,
}

impl Heard {
    /// The read that heard the write first.
    fn earliest_rpos(&self) -> u32 {
        match self.first_rpos {
            0 => self.rpos,
            first => first,
        }
    }
}

/// How communication was forwarded to a reader: the line of the first thread's write (0: none,
/// the access reached the first forwarder causally); the line of the last forwarder's read; an
/// earlier forwarder that made no acquire-then-release, by the lines of its read and write
/// ((0, 0): none); the weakest acquire-then-release of the forwarders (`None`: one made none);
/// whether the first link (from the first thread) and the last link (into the thread that
/// heard it) are each in one CTA.
#[derive(Debug, Clone, Copy)]
struct ForwardPath {
    origin: u32,
    read: u32,
    unfenced: (u32, u32),
    fenced: Option<Strength>,
    first_in_cta: bool,
    last_in_cta: bool,
}

/// Communication a thread heard, which its next strong write passes on (forwards) to whoever
/// reads that write: from thread `from`, `wpos` of its accesses, by `path` up to this thread
/// (its `read` is this thread's, `fenced` includes this thread's acquire-then-release since
/// then), and whether every link so far is in one CTA.
#[derive(Debug, Clone, Copy)]
struct Forward {
    from: u32,
    wpos: u32,
    path: ForwardPath,
    in_cta: bool,
}

/// One side of a pair being checked.
#[derive(Debug, Clone, Copy)]
struct Side {
    thread: u32,
    pos: u32,
    line: u32,
    kind: AccessKind,
    strength: Strength,
    /// For a read: the scope of a `fence.sc` its thread made after a write of its own and
    /// before the read, with no write between (a flag handshake's read, see
    /// [`Occurrences::handshakes`]).
    after_sc: Option<Strength>,
}

/// The bytes an access touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes {
    pub addr: u64,
    /// At most 8, and `addr` a multiple of it.
    pub size: u64,
}

/// The recorder's state for one launch.
#[derive(Debug)]
pub struct RaceTracker {
    /// Application threads (the recorded ones).
    n: usize,
    per_block: usize,
    /// Accesses so far per thread.
    pos: Vec<u32>,
    /// `n * n` causality clocks.
    hb: Vec<u32>,
    /// `n * n`: per entry of `hb`, the line of the instruction at which it last grew.
    joined: Vec<u32>,
    acq_cta: Vec<Option<Clock>>,
    acq_gpu: Vec<Option<Clock>>,
    rel_cta: Vec<Option<Clock>>,
    rel_gpu: Vec<Option<Clock>>,
    last_release: Vec<Option<(u32, Strength)>>,
    last_acquire: Vec<Option<(u32, Strength)>>,
    /// `n * n`: for reader `t` and writer `u`, the newest communication from `u` to `t`.
    heard: Vec<Heard>,
    /// Per thread, whether its row of `heard` may hold anything (what barriers pass on).
    hears: Vec<bool>,
    /// For reader `t` and writer `u` (key `t * n + u`), the newest strong write of `u` that
    /// `t` read strongly though their scopes left one of them out: how many of `u`'s accesses
    /// it follows, and the lines of the write and the read.
    heard_out_of_scope: Map<u64, (u32, u32, u32)>,
    /// Per thread, the writers it has heard from: the entries of its `heard` row that hold
    /// communication, which a strong write of its forwards (kept by [`RaceTracker::set_heard`]).
    heard_from: Vec<Vec<u32>>,
    /// Per thread, what its strong writes forward, shared until it hears or fences again.
    forwards: Vec<Option<Rc<[Forward]>>>,
    /// Per thread, its `heard` row as its writes keep it while a load is deferred, shared
    /// until it hears again.
    heard_rows: Vec<Option<HeardRow>>,
    /// Per reader, the forwards it last heard (a spin reads one write again and again).
    last_forwarded: Vec<Option<Rc<[Forward]>>>,
    /// Per reader, the clock and the releases (CTA, GPU) of the write it last heard relayed (a
    /// spin reads the same write, or writes made with one clock, again and again: heard once,
    /// it adds nothing).
    last_relayed: Vec<(Option<Clock>, Option<Clock>, Option<Clock>)>,
    sc_gpu: Vec<u32>,
    sc_cta: HashMap<u32, Vec<u32>>,
    shadows: Map<u64, Shadow>,
    /// Locations whose communication ordered another pair.
    carrying: HashSet<u64>,
    /// Locations some access made a release or an acquire at: declared synchronisation
    /// variables (a semaphore's or lock's word, a flag of `cuda::atomic` release/acquire).
    declared: HashSet<u64>,
    pairs: HashMap<(PairKey, u64), Occurrences>,
    /// Per thread and address, the pairs its newest read there recorded as a *stale read*: a
    /// morally strong read (or an RMW's read) that missed another thread's write though it had
    /// heard from that thread after the write. A read or RMW of the thread there again (a
    /// retry, as a spin does) drops them; those left at the end are reads the thread acted on.
    stale_reads: HashMap<(u32, u64), Vec<PairKey>>,
    /// Per CTA barrier (the scheduler's key), the joined clocks of the threads that arrived in
    /// its current phase, `bar.arrive` producers included.
    arrived: HashMap<u32, Vec<u32>>,
    /// Per CTA barrier, what the threads that arrived in its current phase heard, per writer
    /// (the most of the writer's accesses), to be passed on to the threads waiting there.
    arrived_heard: HashMap<u32, Vec<Heard>>,
    edges: HashMap<(u32, u32, bool), u64>,
    /// Per thread, its clock as a write keeps it, shared until the clock next takes in
    /// another thread's (the entry for the thread itself may be stale: it is never read).
    snapshots: Vec<Option<Reached>>,
    /// Per access numbered with [`RaceTracker::reserve`] and not yet performed (key: thread
    /// and number, [`access_key`]), its thread's clock and `heard` row when it was issued: what
    /// preceded it, since what its thread acquires or hears later comes after it in program
    /// order.
    issued: Map<u64, (Clock, HeardRow)>,
    /// The clock and `heard` row the access being performed now was issued with (`None`: it
    /// is performed as it is issued, with its thread's now).
    performing: Option<(Clock, HeardRow)>,
    /// Some access was not 4 bytes wide: shadows of other extents may overlap (until then,
    /// with accesses naturally aligned, none does).
    mixed: bool,
    /// The PTX lines of the module's wait loads ([`gpuwmm_ptx::loops::wait_loads`]): a strong
    /// read at one is a spin's, whether or not the thread read the location again.
    wait_lines: Arc<HashSet<u32>>,
    /// Per thread, the number of its latest write (RMWs included; 0: none yet).
    last_write: Vec<u32>,
    /// Per thread, its latest `fence.sc`: how many accesses came before it, its scope, and
    /// whether one of them was a write.
    last_sc: Vec<Option<(u32, Strength, bool)>>,
}

/// How often a pair was recorded at one address.
#[derive(Debug)]
struct Occurrences {
    count: u64,
    /// The blocks of its first occurrence.
    ctas: (u32, u32),
    /// Every occurrence was one side of a fenced flag handshake: a strong write and a strong
    /// read of another thread that missed it, made after a `fence.sc` that followed a write of
    /// the reader's own (Dekker's or Peterson's lock, leader election: PTX forbids both
    /// threads of a handshake so fenced to miss each other's write, and a read that misses is
    /// the side the handshake allows).
    handshakes: bool,
}

fn includes(s: Strength, same_cta: bool) -> bool {
    s == Strength::Gpu || (s == Strength::Cta && same_cta)
}

fn join_into(row: &mut [u32], other: &[u32]) {
    for (a, b) in row.iter_mut().zip(other) {
        *a = (*a).max(*b);
    }
}

/// The path by which a thread that heard `h` forwards it, making `fenced` (its own
/// acquire-then-release since its read) before its write: directly heard, the first thread's
/// write starts it; relayed, the access reached the relaying thread causally, whose release
/// before its write is that link's; forwarded, the path continues.
fn path_through(h: &Heard, fenced: Option<Strength>) -> ForwardPath {
    let (origin, before, earlier) = match (h.forward, h.relay) {
        (Some(p), _) => (p.origin, p.fenced, (p.unfenced, (p.read, h.wline))),
        (None, 0) => (h.wline, Some(Strength::Gpu), ((0, 0), (0, 0))),
        (None, relay) => {
            let released = relayed_release(h.released, h.wpos.saturating_sub(1));
            (0, released, ((0, 0), (relay, h.wline)))
        }
    };
    // Heard directly (or relayed to it), the link into this thread is the first.
    let first_in_cta = h.forward.map_or(h.in_cta, |p| p.first_in_cta);
    // The first link without an acquire-then-release is the one to name.
    let (named, last) = earlier;
    let unfenced = match (named, before) {
        ((0, 0), None) => last,
        _ => named,
    };
    ForwardPath {
        origin,
        read: h.rline,
        unfenced,
        fenced: before.min(fenced),
        first_in_cta,
        // The reader that hears this path sets its own link here (`hear_forwarded`).
        last_in_cta: h.in_cta,
    }
}

/// Joins into `joined` (per writer, the communication that reached more of its accesses) what
/// a thread heard (`row`), as the threads it passes it on to at the barrier on PTX line `line`
/// hear it: through the barrier, with the acquire the thread made after its read (its newest
/// acquire, `acquire`, if after the read). What the thread had heard passed on keeps its first
/// barrier: the acquire belongs before that one.
fn pass_heard(joined: &mut [Heard], row: &[Heard], line: u32, acquire: Option<(u32, Strength)>) {
    for (a, &h) in joined.iter_mut().zip(row) {
        if h.wpos <= a.wpos {
            continue;
        }
        *a = match h.passed {
            0 => Heard {
                passed: line,
                acquired: acquire.filter(|&(p, _)| p >= h.rpos).map(|a| a.1),
                ..h
            },
            _ => h,
        };
    }
}

fn join_clocks(a: &Option<Clock>, b: &Option<Clock>) -> Option<Clock> {
    match (a, b) {
        (None, x) | (x, None) => x.clone(),
        (Some(x), Some(y)) if Rc::ptr_eq(x, y) => Some(x.clone()),
        (Some(x), Some(y)) => {
            let mut v = x.to_vec();
            join_into(&mut v, y);
            Some(v.into())
        }
    }
}

/// The release a relaying thread made after the access numbered `pos` reached it and before
/// its write, from how many of the access's thread's accesses its releases covered then (at
/// CTA, at GPU scope).
fn relayed_release((cta, gpu): (u32, u32), pos: u32) -> Option<Strength> {
    if gpu >= pos {
        Some(Strength::Gpu)
    } else if cta >= pos {
        Some(Strength::Cta)
    } else {
        None
    }
}

impl RaceTracker {
    /// A recorder for the first `threads` threads of a launch with `per_block` threads a block.
    pub fn new(threads: usize, per_block: usize) -> RaceTracker {
        RaceTracker {
            n: threads,
            per_block: per_block.max(1),
            pos: vec![0; threads],
            hb: vec![0; threads * threads],
            joined: vec![0; threads * threads],
            acq_cta: vec![None; threads],
            acq_gpu: vec![None; threads],
            rel_cta: vec![None; threads],
            rel_gpu: vec![None; threads],
            last_release: vec![None; threads],
            last_acquire: vec![None; threads],
            heard: vec![Heard::default(); threads * threads],
            hears: vec![false; threads],
            heard_out_of_scope: Map::default(),
            heard_from: vec![Vec::new(); threads],
            forwards: vec![None; threads],
            heard_rows: vec![None; threads],
            last_forwarded: vec![None; threads],
            last_relayed: vec![(None, None, None); threads],
            sc_gpu: vec![0; threads],
            sc_cta: HashMap::new(),
            shadows: Map::default(),
            carrying: HashSet::new(),
            declared: HashSet::new(),
            pairs: HashMap::new(),
            stale_reads: HashMap::new(),
            arrived: HashMap::new(),
            arrived_heard: HashMap::new(),
            edges: HashMap::new(),
            snapshots: vec![None; threads],
            issued: Map::default(),
            performing: None,
            mixed: false,
            wait_lines: Arc::default(),
            last_write: vec![0; threads],
            last_sc: vec![None; threads],
        }
    }

    /// The recorder, told which PTX lines are wait loads (a spin's reads).
    pub fn waiting_at(mut self, wait_lines: Arc<HashSet<u32>>) -> RaceTracker {
        self.wait_lines = wait_lines;
        self
    }

    fn block(&self, t: u32) -> u32 {
        (t as usize / self.per_block) as u32
    }

    fn row(&self, t: u32) -> &[u32] {
        &self.hb[t as usize * self.n..(t as usize + 1) * self.n]
    }

    /// Thread `t`'s clock takes in `other` at the instruction on PTX line `line` (its snapshot
    /// is out of date): the entries that grow note the line.
    fn join_row(&mut self, t: u32, other: &[u32], line: u32) {
        let i = t as usize;
        self.snapshots[i] = None;
        let range = i * self.n..(i + 1) * self.n;
        let rows = self.hb[range.clone()]
            .iter_mut()
            .zip(&mut self.joined[range]);
        for ((mine, at), &theirs) in rows.zip(other) {
            if theirs > *mine {
                *mine = theirs;
                *at = line;
            }
        }
    }

    /// Thread `t`'s clock and where its entries came in, shared until the clock next takes in
    /// another thread's.
    fn snapshot(&mut self, t: u32) -> Reached {
        let i = t as usize;
        let range = i * self.n..(i + 1) * self.n;
        let (hb, joined) = (&self.hb, &self.joined);
        self.snapshots[i]
            .get_or_insert_with(|| Reached {
                clock: hb[range.clone()].into(),
                lines: joined[range].into(),
            })
            .clone()
    }

    /// Thread `t`'s clock and `heard` row for a write it makes now (as it was issued, for a
    /// write held back), while a deferred access may be performed after it (`None` otherwise:
    /// no pair needs them).
    fn kept_for_write(&mut self, t: u32) -> Option<(Clock, HeardRow)> {
        if self.issued.is_empty() {
            return None;
        }
        match &self.performing {
            Some(issued) => Some(issued.clone()),
            None => Some((self.snapshot(t).clock, self.heard_row(t))),
        }
    }

    /// The next access of `t`: its number.
    fn step(&mut self, t: u32) -> u32 {
        let p = self.pos[t as usize] + 1;
        self.pos[t as usize] = p;
        let n = self.n;
        self.hb[t as usize * n + t as usize] = p;
        p
    }

    fn tracks(&self, t: usize) -> bool {
        t < self.n
    }

    /// The number of the next access of thread `t`, taken now for a load the simulator
    /// defers, so that the load is recorded in program order when it is performed (0 for a
    /// thread not recorded).
    pub fn reserve(&mut self, t: usize) -> u32 {
        if !self.tracks(t) {
            return 0;
        }
        let pos = self.step(t as u32);
        let clock = self.snapshot(t as u32).clock;
        let heard = self.heard_row(t as u32);
        self.issued
            .insert(access_key(t as u32, pos), (clock, heard));
        pos
    }

    /// The next access of thread `t` at PTX line `line` (numbered `reserved` when it was
    /// issued earlier), or `None` for a thread not recorded.
    fn begin(
        &mut self,
        t: usize,
        reserved: Option<u32>,
        line: u32,
        kind: AccessKind,
        order: Order,
    ) -> Option<Side> {
        if !self.tracks(t) {
            return None;
        }
        let thread = t as u32;
        self.performing = reserved.and_then(|pos| self.issued.remove(&access_key(thread, pos)));
        let pos = reserved.unwrap_or_else(|| self.step(thread));
        let after_sc = match kind {
            AccessKind::Read => self.sc_after_own_write(t, pos),
            _ => {
                self.last_write[t] = self.last_write[t].max(pos);
                None
            }
        };
        Some(Side {
            thread,
            pos,
            line,
            kind,
            strength: order.reach.into(),
            after_sc,
        })
    }

    /// The scope of thread `t`'s latest `fence.sc` when it came before its access number
    /// `pos`, after a write of its own and with none between. `None` where that cannot be
    /// told from the latest fence (a read performed late, after a later fence or write).
    fn sc_after_own_write(&self, t: usize, pos: u32) -> Option<Strength> {
        let (at, scope, wrote) = self.last_sc[t]?;
        (wrote && at < pos && self.last_write[t] <= at).then_some(scope)
    }

    /// Notes `at` as a declared synchronisation variable when `order` releases or acquires.
    fn note_declared(&mut self, at: Bytes, order: Order) {
        if (order.releases || order.acquires) && order.reach != Reach::Weak {
            self.declared.insert(at.addr);
        }
    }

    /// A global load of thread `t` at PTX line `line`, which read the message with timestamp
    /// `read_ts` (`None`: the newest value, for locations the model does not track);
    /// `reserved`: its number, taken with [`RaceTracker::reserve`] when it was deferred.
    pub fn load(
        &mut self,
        t: usize,
        reserved: Option<u32>,
        line: u32,
        at: Bytes,
        order: Order,
        read_ts: Option<u32>,
    ) {
        let Some(me) = self.begin(t, reserved, line, AccessKind::Read, order) else {
            return;
        };
        self.note_declared(at, order);
        self.retried(me.thread, at.addr);
        let t = me.thread;
        let others = self.overlapped(at);
        self.read_part(me, at.addr, order, read_ts, true);
        for &addr in &others {
            self.read_part(me, addr, order, None, false);
        }
        let waits = self.wait_lines.contains(&line);
        let own = self.read_own(t, at.addr, read_ts);
        let shadow = self.shadow(at);
        if me.strength != Strength::Weak {
            shadow.note_own(t, own);
            shadow.spun |= waits;
        }
        shadow.note_read(me);
    }

    /// A read of thread `t` at `addr` of the message `read_ts`, as [`Shadow::note_own`] takes it.
    fn read_own(&self, t: u32, addr: u64, read_ts: Option<u32>) -> LastOwn {
        LastOwn::Read {
            write: self
                .shadows
                .get(&addr)
                .map_or(u64::MAX, |s| s.write_read(read_ts)),
            writes: self.last_write[t as usize],
        }
    }

    /// The shadow of `at`'s address, made for it if new, that has seen an access of `at`'s
    /// width.
    fn shadow(&mut self, at: Bytes) -> &mut Shadow {
        let shadow = self.shadows.entry(at.addr).or_default();
        shadow.size = shadow.size.max(at.size as u8);
        shadow
    }

    /// The addresses of the shadows of another extent that `at` overlaps. Accesses are
    /// naturally aligned and at most 8 bytes wide, so such a shadow starts in the aligned 8
    /// bytes around `at` or inside it; while every access is a word, none does.
    fn overlapped(&mut self, at: Bytes) -> Vec<u64> {
        self.mixed |= at.size != 4;
        if !self.mixed {
            return Vec::new();
        }
        let end = at.addr + at.size;
        (at.addr & !7..end)
            .filter(|&a| a != at.addr)
            .filter(|a| {
                self.shadows
                    .get(a)
                    .is_some_and(|s| a + u64::from(s.size) > at.addr)
            })
            .collect()
    }

    /// The read half of a load or read-modify-write: pairs with the write read and the newest
    /// write, observation, and what the read may acquire.
    fn read_part(
        &mut self,
        me: Side,
        addr: u64,
        order: Order,
        read_ts: Option<u32>,
        check_newest: bool,
    ) {
        let Some(shadow) = self.shadows.get(&addr) else {
            return;
        };
        let read = shadow.read_index(read_ts);
        let newest = shadow.writes.len().checked_sub(1);
        let mut checks: Vec<(WriteEntry, bool)> = Vec::new();
        if let Some(i) = read {
            checks.push((shadow.writes[i].clone(), true));
        }
        if let Some(i) = newest.filter(|&i| check_newest && Some(i) != read) {
            checks.push((shadow.writes[i].clone(), false));
        }
        for (w, observed) in &checks {
            if w.access.thread != me.thread {
                let first = (
                    w.access,
                    &w.observers[..],
                    w.clock.as_ref(),
                    w.heard.as_ref(),
                );
                self.check(first, me, addr, *observed);
            }
        }
        let Some(i) = read else { return };
        let w = &self.shadows[&addr].writes[i];
        let same_cta = self.block(w.access.thread) == self.block(me.thread);
        // A read of the thread's own write (an RMW of its own that continued other threads'
        // release sequences) observes it too: it acquires what the write carries, though no
        // communication between threads happens there.
        if w.access.thread == me.thread {
            if w.access.strength != Strength::Weak && me.strength != Strength::Weak {
                let carried = w.view_cta.clone();
                self.acquire_carried(me, order, true, carried);
            }
            return;
        }
        let strong = includes(w.access.strength, same_cta) && includes(me.strength, same_cta);
        if !strong {
            if w.access.strength != Strength::Weak && me.strength != Strength::Weak {
                let (writer, wpos, wline) = (w.access.thread, w.access.pos, w.access.line);
                self.hear_out_of_scope(me, writer, wpos, wline);
            }
            return;
        }
        let (writer, wpos, wline) = (w.access.thread, w.access.pos, w.access.line);
        let chain = w.chain.clone();
        let views = (w.view_cta.clone(), w.view_gpu.clone());
        let reached = w.reached.clone();
        let forwards = w.forwards.clone();
        let shadow = self.shadows.get_mut(&addr).expect("looked up above");
        let w = &mut shadow.writes[i];
        let heard_before = w.observers.iter().any(|o| o.0 == me.thread);
        self.hears[me.thread as usize] = true;
        if w.observers.len() < OBSERVERS && !heard_before {
            w.observers.push((me.thread, me.pos));
        }
        for (x, xpos, xline) in std::iter::once((writer, wpos, wline)).chain(chain) {
            if x == me.thread {
                continue;
            }
            let in_cta = self.block(x) == self.block(me.thread);
            let known = self.heard[me.thread as usize * self.n + x as usize];
            if xpos >= known.wpos {
                // A write heard again keeps the read that heard it first (see
                // `Heard::first_rpos`).
                let first_rpos = match xpos == known.wpos {
                    true => known.earliest_rpos(),
                    false => me.pos,
                };
                let own = |v: &Option<Clock>| v.as_ref().map_or(0, |c| c[x as usize]);
                let heard = Heard {
                    wpos: xpos,
                    rpos: me.pos,
                    first_rpos,
                    addr,
                    wline: xline,
                    rline: me.line,
                    in_cta,
                    writer_released: (x == writer).then(|| (own(&views.0), own(&views.1))),
                    ..Heard::default()
                };
                self.set_heard(me.thread, x, heard);
            }
        }
        if let Some(reached) = reached.filter(|_| !heard_before) {
            let relayed = Heard {
                rpos: me.pos,
                addr,
                wline,
                rline: me.line,
                in_cta: same_cta,
                ..Heard::default()
            };
            self.hear_relayed(me.thread, writer, relayed, &reached, &views);
        }
        if let Some(forwards) = forwards {
            self.hear_forwarded(me, (writer, wline, addr), forwards, same_cta);
        }
        *self.edges.entry((wline, me.line, same_cta)).or_insert(0) += 1;
        let view = if same_cta { views.0 } else { views.1 };
        self.acquire_carried(me, order, same_cta, view);
    }

    /// A strong read `me` took a strong write of `writer` (its access `wpos` on line `wline`)
    /// whose scope, or its own, leaves the other thread out: no communication under PTX, but
    /// what a wider scope would make one.
    fn hear_out_of_scope(&mut self, me: Side, writer: u32, wpos: u32, wline: u32) {
        let key = me.thread as u64 * self.n as u64 + writer as u64;
        let heard = self.heard_out_of_scope.entry(key).or_default();
        if wpos >= heard.0 {
            *heard = (wpos, wline, me.line);
        }
    }

    /// A morally strong read `me` took the write that carried `view` (the releases it
    /// continues): kept for the thread's next acquire, or taken now when `me` acquires.
    fn acquire_carried(&mut self, me: Side, order: Order, same_cta: bool, view: Option<Clock>) {
        if order.reduction {
            return;
        }
        let t = me.thread as usize;
        if same_cta {
            self.acq_cta[t] = join_clocks(&self.acq_cta[t], &view);
        } else {
            self.acq_gpu[t] = join_clocks(&self.acq_gpu[t], &view);
        }
        if order.acquires {
            self.acquire(me.thread, order.reach, (me.pos, me.line));
        }
    }

    /// Reader `r` read, morally strongly, a write of `writer` whose thread had been reached by
    /// the accesses `reached` holds: it hears those of every third thread relayed, through
    /// `relayed` (the communication, filled in here per thread) unless it heard as many of
    /// them directly. `views`: the releases the write carried (CTA, GPU).
    fn hear_relayed(
        &mut self,
        r: u32,
        writer: u32,
        relayed: Heard,
        reached: &Reached,
        views: &(Option<Clock>, Option<Clock>),
    ) {
        let key = (
            Some(reached.clock.clone()),
            views.0.clone(),
            views.1.clone(),
        );
        let same = |a: &Option<Clock>, b: &Option<Clock>| match (a, b) {
            (Some(a), Some(b)) => Rc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        let last = &mut self.last_relayed[r as usize];
        if same(&last.0, &key.0) && same(&last.1, &key.1) && same(&last.2, &key.2) {
            return;
        }
        *last = key;
        let covered = |v: &Option<Clock>, x: usize| v.as_ref().map_or(0, |c| c[x]);
        for x in 0..self.n {
            let got = reached.clock[x];
            if x as u32 == r || x as u32 == writer || got == 0 {
                continue;
            }
            let heard = &self.heard[r as usize * self.n + x];
            let wpos = got + 1;
            if wpos > heard.wpos || (wpos == heard.wpos && heard.relay != 0) {
                let heard = Heard {
                    wpos,
                    relay: reached.lines[x],
                    released: (covered(&views.0, x), covered(&views.1, x)),
                    ..relayed
                };
                self.set_heard(r, x as u32, heard);
            }
        }
    }

    /// Reader `t`'s newest communication from `x` is now `heard`: `x` joins the writers `t`
    /// heard from, and what `t` forwards is made anew.
    fn set_heard(&mut self, t: u32, x: u32, heard: Heard) {
        let entry = &mut self.heard[t as usize * self.n + x as usize];
        if entry.wpos == 0 {
            self.heard_from[t as usize].push(x);
        }
        *entry = heard;
        self.forwards[t as usize] = None;
        self.heard_rows[t as usize] = None;
    }

    /// Thread `t`'s row of `heard`, shared until it hears again.
    fn heard_row(&mut self, t: u32) -> HeardRow {
        let i = t as usize;
        if let Some(row) = &self.heard_rows[i] {
            return row.clone();
        }
        let heard = &self.heard[i * self.n..(i + 1) * self.n];
        let row: HeardRow = (self.heard_from[i].iter())
            .map(|&x| (x, heard[x as usize]))
            .collect();
        self.heard_rows[i] = Some(row.clone());
        row
    }

    /// What a strong write of `t` forwards now: each thread it heard from (not passed on at a
    /// barrier), with the acquire-then-release it made since its read (shared until it hears
    /// or fences again).
    fn forwards_of(&mut self, t: u32) -> Option<Rc<[Forward]>> {
        let i = t as usize;
        if self.heard_from[i].is_empty() {
            return None;
        }
        if let Some(f) = &self.forwards[i] {
            return Some(f.clone());
        }
        let fenced = |rpos: u32| match (self.last_acquire[i], self.last_release[i]) {
            (Some((a, acq)), Some((r, rel))) if a >= rpos && r >= a => Some(acq.min(rel)),
            _ => None,
        };
        let row = &self.heard[i * self.n..(i + 1) * self.n];
        let forwards: Rc<[Forward]> = (self.heard_from[i].iter())
            .filter(|&&x| row[x as usize].wpos > 0 && row[x as usize].passed == 0)
            .map(|&x| {
                let h = row[x as usize];
                Forward {
                    from: x,
                    wpos: h.wpos,
                    path: path_through(&h, fenced(h.rpos)),
                    in_cta: h.in_cta,
                }
            })
            .collect();
        self.forwards[i] = Some(forwards.clone());
        Some(forwards)
    }

    /// Reader `me` read, morally strongly, a write of `writer` (on line `wline`, at `addr`)
    /// that forwards `forwards`: it hears each first thread's accesses through the two links,
    /// unless it heard as many of them another way.
    fn hear_forwarded(
        &mut self,
        me: Side,
        (writer, wline, addr): (u32, u32, u64),
        forwards: Rc<[Forward]>,
        same_cta: bool,
    ) {
        let last = &mut self.last_forwarded[me.thread as usize];
        if last.as_ref().is_some_and(|l| Rc::ptr_eq(l, &forwards)) {
            return;
        }
        *last = Some(forwards.clone());
        for f in forwards
            .iter()
            .filter(|f| f.from != me.thread && f.from != writer)
        {
            if f.wpos > self.heard[me.thread as usize * self.n + f.from as usize].wpos {
                self.hears[me.thread as usize] = true;
                let heard = Heard {
                    wpos: f.wpos,
                    rpos: me.pos,
                    addr,
                    wline,
                    rline: me.line,
                    in_cta: same_cta && f.in_cta,
                    forward: Some(ForwardPath {
                        last_in_cta: same_cta,
                        ..f.path
                    }),
                    ..Heard::default()
                };
                self.set_heard(me.thread, f.from, heard);
            }
        }
    }

    /// Records the pair (`first`, then `second`) if causality does not order it.
    fn check(
        &mut self,
        (first, observers, first_clock, first_heard): FirstSide,
        second: Side,
        addr: u64,
        observed: bool,
    ) {
        let row = match &self.performing {
            Some(issued) => &issued.0,
            None => self.row(second.thread),
        };
        let ordered = row[first.thread as usize] >= first.pos
            || observers.iter().any(|&(r, rp)| {
                (r == second.thread && rp < second.pos)
                    || (r != second.thread && row[r as usize] >= rp)
            });
        if ordered {
            return;
        }
        let back = self.heard_before(first, second.thread, first_heard);
        if back.wpos > second.pos && back.earliest_rpos() < first.pos {
            // In program order the pair runs the other way: the second access was issued
            // before a write of its thread that the first one's thread read before the first
            // access (a deferred read performed after the write it precedes in coherence, or
            // one that read that very write: load buffering).
            // Ordered that way when the first thread's clock at its write already held the
            // read, say through a release after the read and an acquire after the
            // communication (without the clock, kept as unordered: races are not invented
            // here, but this one cannot be told).
            if first_clock.is_some_and(|c| c[second.thread as usize] >= second.pos) {
                return;
            }
            return self.record(second, first, addr, false, back);
        }
        let heard = self.heard[second.thread as usize * self.n + first.thread as usize];
        self.record(first, second, addr, observed, heard);
    }

    /// What `first`'s thread had heard from thread `from` when it made `first`: as its write
    /// kept it (`kept`), else its newest communication from `from` (the same where no load
    /// was deferred at the write, as no read issued before the write can come after it then).
    fn heard_before(&self, first: Side, from: u32, kept: Option<&HeardRow>) -> Heard {
        match kept {
            Some(row) => (row.iter().find(|h| h.0 == from)).map_or_else(Heard::default, |h| h.1),
            None => self.heard[first.thread as usize * self.n + from as usize],
        }
    }

    /// Thread `t` reads `addr` again: its stale read there was retried, not acted on.
    fn retried(&mut self, t: u32, addr: u64) {
        if !self.stale_reads.is_empty() {
            self.stale_reads.remove(&(t, addr));
        }
    }

    /// Records the unordered pair `first` then `second`, with what `second`'s thread last heard
    /// from `first`'s.
    fn record(&mut self, first: Side, second: Side, addr: u64, observed: bool, heard: Heard) {
        let (a, b) = (self.block(first.thread), self.block(second.thread));
        let same_cta = a == b;
        let morally_strong =
            includes(first.strength, same_cta) && includes(second.strength, same_cta);
        let communicated = heard.wpos > first.pos;
        if communicated {
            self.carrying.insert(heard.addr);
        }
        let relayed = communicated && heard.relay != 0;
        let first_release = match (relayed, heard.writer_released) {
            (true, _) => relayed_release(heard.released, first.pos),
            (false, Some(released)) if communicated => relayed_release(released, first.pos),
            (false, _) => self.last_release[first.thread as usize]
                .filter(|&(p, _)| p >= first.pos)
                .map(|r| r.1),
        };
        let passed = communicated && heard.passed != 0;
        let forward = heard.forward.filter(|_| communicated).map(|p| {
            let named = match p.unfenced {
                (0, 0) => (p.read, heard.wline),
                earlier => earlier,
            };
            ForwardKey {
                origin: p.origin,
                named,
                fenced: p.fenced,
                first_in_cta: p.first_in_cta,
                last_in_cta: p.last_in_cta,
            }
        });
        let out_of_scope = match communicated {
            true => None,
            false => self
                .heard_out_of_scope
                .get(&(second.thread as u64 * self.n as u64 + first.thread as u64))
                .filter(|h| h.0 > first.pos)
                .map(|h| (h.1, h.2)),
        };
        let second_acquire = match passed {
            true => heard.acquired,
            false => self.last_acquire[second.thread as usize]
                .filter(|&(p, _)| communicated && p >= heard.rpos)
                .map(|a| a.1),
        };
        let key = PairKey {
            first: (first.line, first.kind, first.strength),
            second: (second.line, second.kind, second.strength),
            facts: PairFacts {
                same_cta,
                morally_strong,
                observed,
                communicated,
                communicated_before: heard.wpos > 0 && !communicated,
                first_release,
                second_acquire,
                communication_in_cta: if communicated { heard.in_cta } else { same_cta },
            },
            via: communicated.then_some((heard.wline, heard.rline)),
            relay: relayed.then_some(heard.relay),
            passed: passed.then_some(heard.passed),
            out_of_scope,
            forward,
        };
        if morally_strong && communicated && !observed && second.kind != AccessKind::Write {
            let stale = self.stale_reads.entry((second.thread, addr)).or_default();
            if !stale.contains(&key) {
                stale.push(key);
            }
        }
        let read = match (first.kind, second.kind) {
            (AccessKind::Read, AccessKind::Write) => Some(first),
            (AccessKind::Write, AccessKind::Read) => Some(second),
            _ => None,
        };
        let handshake = morally_strong
            && !communicated
            && !observed
            && (read.and_then(|r| r.after_sc)).is_some_and(|s| includes(s, same_cta));
        let seen = self.pairs.entry((key, addr)).or_insert(Occurrences {
            count: 0,
            ctas: (a, b),
            handshakes: true,
        });
        seen.count += 1;
        seen.handshakes &= handshake;
    }

    /// A global store of thread `t` performed as it is issued (the tests' shorthand).
    #[cfg(test)]
    pub fn store(&mut self, t: usize, line: u32, at: Bytes, order: Order, ts: Option<u32>) {
        self.store_at(t, None, line, at, order, ts);
    }

    /// A global store of thread `t`, appended by the model as message `ts` (`None`: untracked);
    /// `reserved`: its number, taken with [`RaceTracker::reserve`] when the simulator held it
    /// back behind a deferred load.
    pub fn store_at(
        &mut self,
        t: usize,
        reserved: Option<u32>,
        line: u32,
        at: Bytes,
        order: Order,
        ts: Option<u32>,
    ) {
        let Some(me) = self.begin(t, reserved, line, AccessKind::Write, order) else {
            return;
        };
        self.note_declared(at, order);
        let (t, p) = (me.thread, me.pos);
        if order.releases {
            self.release(t, order.reach, p);
        }
        for addr in self.overlapped(at) {
            self.write_part(me, addr, true);
        }
        self.write_part(me, at.addr, true);
        let (view_cta, view_gpu) = match order.reach {
            Reach::Weak => (None, None),
            _ => (
                self.rel_cta[t as usize].clone(),
                self.rel_gpu[t as usize].clone(),
            ),
        };
        self.push_write(me, at, ts, (view_cta, view_gpu), Vec::new());
    }

    /// The write half: pairs with the newest write (unless the read half did) and the reads
    /// since it.
    fn write_part(&mut self, me: Side, addr: u64, check_newest: bool) {
        let Some(shadow) = self.shadows.get(&addr) else {
            return;
        };
        let newest = shadow.writes.last().cloned();
        let reads: Vec<Side> = shadow
            .reads
            .iter()
            .filter(|r| r.thread != me.thread)
            .copied()
            .collect();
        if let Some(w) = newest.filter(|w| check_newest && w.access.thread != me.thread) {
            let first = (
                w.access,
                &w.observers[..],
                w.clock.as_ref(),
                w.heard.as_ref(),
            );
            self.check(first, me, addr, false);
        }
        for r in reads {
            self.check((r, &[], None, None), me, addr, false);
        }
    }

    /// Drops from the shadow at `addr` the writes the model no longer keeps there (`kept`: the
    /// timestamps of the messages it keeps), so that the shadow holds every write a read may
    /// still return. A write performed late can go below newer ones in coherence, and the
    /// model then drops older messages than the shadow would, by the order writes happened.
    pub fn keep_written(&mut self, addr: u64, kept: &[u32]) {
        if let Some(shadow) = self.shadows.get_mut(&addr) {
            shadow.writes.retain(|w| kept.contains(&w.ts));
        }
    }

    fn push_write(
        &mut self,
        me: Side,
        at: Bytes,
        ts: Option<u32>,
        views: (Option<Clock>, Option<Clock>),
        chain: Vec<(u32, u32, u32)>,
    ) {
        let (view_cta, view_gpu) = views;
        let (clock, heard) = self.kept_for_write(me.thread).unzip();
        let reached = (me.strength != Strength::Weak).then(|| self.snapshot(me.thread));
        let forwards = match me.strength {
            Strength::Weak => None,
            _ => self.forwards_of(me.thread),
        };
        let shadow = self.shadow(at);
        shadow.note_own(me.thread, LastOwn::Wrote);
        if shadow.writes.len() == WRITES {
            shadow.writes.remove(0);
        }
        shadow.writes.push(WriteEntry {
            ts: ts.unwrap_or(u32::MAX),
            access: me,
            view_cta,
            view_gpu,
            observers: Vec::new(),
            chain,
            clock,
            reached,
            forwards,
            heard,
        });
        shadow.reads.clear();
    }

    /// A read-modify-write of thread `t` that read the message with timestamp `read_ts` (`None`:
    /// the newest, as for [`RaceTracker::load`]) and, when `wrote`, appended message `ts`.
    #[allow(clippy::too_many_arguments)]
    pub fn atomic(
        &mut self,
        t: usize,
        line: u32,
        at: Bytes,
        order: Order,
        read_ts: Option<u32>,
        wrote: bool,
        ts: Option<u32>,
    ) {
        let Some(me) = self.begin(t, None, line, AccessKind::Rmw, order) else {
            return;
        };
        self.note_declared(at, order);
        self.retried(me.thread, at.addr);
        let (t, p) = (me.thread, me.pos);
        let read = self
            .shadows
            .get(&at.addr)
            .and_then(|s| Some(&s.writes[s.read_index(read_ts)?]));
        let carried = read
            .map(|w| (w.view_cta.clone(), w.view_gpu.clone()))
            .unwrap_or_default();
        let chain = read.map_or_else(Vec::new, |w| self.chain_through(w, me));
        let others = self.overlapped(at);
        self.read_part(me, at.addr, order, read_ts, true);
        for &addr in &others {
            self.read_part(me, addr, order, None, false);
        }
        if !wrote {
            let own = self.read_own(t, at.addr, read_ts);
            let shadow = self.shadow(at);
            shadow.note_own(t, own);
            shadow.note_read(me);
            return;
        }
        if order.releases {
            self.release(t, order.reach, p);
        }
        for addr in std::iter::once(at.addr).chain(others) {
            self.write_part(me, addr, false);
        }
        let i = t as usize;
        let view_gpu = join_clocks(&self.rel_gpu[i], &carried.1);
        let view_cta = join_clocks(&join_clocks(&self.rel_cta[i], &view_gpu), &carried.0);
        self.push_write(me, at, ts, (view_cta, view_gpu), chain);
    }

    /// The observation chain a read-modify-write of `me` continues by reading `w` (empty when
    /// the two are not morally strong: observation order needs that).
    fn chain_through(&self, w: &WriteEntry, me: Side) -> Vec<(u32, u32, u32)> {
        let same_cta = self.block(w.access.thread) == self.block(me.thread);
        if !(includes(w.access.strength, same_cta) && includes(me.strength, same_cta)) {
            return Vec::new();
        }
        let mut chain = vec![(w.access.thread, w.access.pos, w.access.line)];
        for &link in &w.chain {
            if chain.len() < CHAIN && !chain.iter().any(|c| c.0 == link.0) {
                chain.push(link);
            }
        }
        chain
    }

    /// An acquire of thread `t` after its access number `at.0`, at PTX line `at.1`.
    fn acquire(&mut self, t: u32, reach: Reach, (at, line): (u32, u32)) {
        let i = t as usize;
        let (cta, gpu) = (self.acq_cta[i].clone(), self.acq_gpu[i].clone());
        if let Some(v) = &cta {
            self.join_row(t, v, line);
        }
        if let (true, Some(v)) = (reach >= Reach::Gpu, &gpu) {
            self.join_row(t, v, line);
        }
        self.last_acquire[i] = Some((at, reach.into()));
        self.forwards[i] = None;
    }

    fn release(&mut self, t: u32, reach: Reach, at: u32) {
        let now: Clock = self.row(t).into();
        let i = t as usize;
        self.rel_cta[i] = Some(now.clone());
        if reach >= Reach::Gpu {
            self.rel_gpu[i] = Some(now);
        }
        let s = Strength::from(reach);
        let stronger = self.last_release[i].is_some_and(|(p, old)| p == at && old > s);
        if !stronger {
            self.last_release[i] = Some((at, s));
        }
        self.forwards[i] = None;
    }

    /// A fence of thread `t` at PTX line `line`: acquire, fence-SC order for `sc`, release.
    pub fn fence(&mut self, t: usize, reach: Reach, sc: bool, line: u32) {
        if !self.tracks(t) {
            return;
        }
        let t = t as u32;
        let at = self.pos[t as usize];
        self.acquire(t, reach, (at, line));
        if sc {
            let wrote = self.last_write[t as usize] > 0;
            self.last_sc[t as usize] = Some((at, Strength::from(reach), wrote));
            let block = self.block(t);
            let n = self.n;
            let mut before = self
                .sc_cta
                .get(&block)
                .cloned()
                .unwrap_or_else(|| vec![0; n]);
            if reach >= Reach::Gpu {
                join_into(&mut before, &self.sc_gpu);
                let row = self.row(t).to_vec();
                join_into(&mut self.sc_gpu, &row);
            }
            let row = self.row(t).to_vec();
            join_into(self.sc_cta.entry(block).or_insert_with(|| vec![0; n]), &row);
            self.join_row(t, &before, line);
        }
        self.release(t, reach, at);
    }

    /// Thread `t` arrives at CTA barrier `key` (`bar.sync`, `bar.red` or `bar.arrive`): what it
    /// did so far precedes what the threads waiting there do once the barrier completes.
    /// `line`: the PTX line of its barrier instruction.
    pub fn barrier_arrive(&mut self, t: usize, key: u32, line: u32) {
        if !self.tracks(t) {
            return;
        }
        let row = self.row(t as u32).to_vec();
        let n = self.n;
        join_into(self.arrived.entry(key).or_insert_with(|| vec![0; n]), &row);
        if !self.hears[t] {
            return;
        }
        let joined = (self.arrived_heard)
            .entry(key)
            .or_insert_with(|| vec![Heard::default(); n]);
        let row = &self.heard[t * n..(t + 1) * n];
        pass_heard(joined, row, line, self.last_acquire[t]);
    }

    /// Thread `t` hears what `heard` (per writer) says, passed on to it now, where that is
    /// more than it heard itself.
    fn hear_passed(&mut self, t: u32, heard: &[Heard]) {
        let now = self.pos[t as usize];
        self.hears[t as usize] = true;
        self.forwards[t as usize] = None;
        self.heard_rows[t as usize] = None;
        let row = &mut self.heard[t as usize * self.n..(t as usize + 1) * self.n];
        for (x, (mine, theirs)) in row.iter_mut().zip(heard).enumerate() {
            if x as u32 != t && theirs.wpos > mine.wpos {
                if mine.wpos == 0 {
                    self.heard_from[t as usize].push(x as u32);
                }
                *mine = Heard {
                    rpos: now,
                    ..*theirs
                };
            }
        }
    }

    /// CTA barrier `key` completes: each of `waiters` (a thread and the PTX line it waited at)
    /// gets the joined clocks of every thread that arrived in this phase, and the next phase
    /// starts empty.
    pub fn barrier_complete(&mut self, key: u32, waiters: &[(u32, u32)]) {
        let Some(all) = self.arrived.remove(&key) else {
            return;
        };
        let heard = self.arrived_heard.remove(&key);
        for &(t, line) in waiters {
            if self.tracks(t as usize) {
                self.join_row(t, &all, line);
                if let Some(heard) = &heard {
                    self.hear_passed(t, heard);
                }
            }
        }
    }

    /// A rendezvous where every thread of `threads` (with the PTX line it waits at) arrives
    /// and waits (`bar.warp.sync`).
    pub fn barrier(&mut self, threads: &[(u32, u32)]) {
        let mut all = vec![0; self.n];
        let tracked: Vec<(u32, u32)> = threads
            .iter()
            .copied()
            .filter(|&(t, _)| (t as usize) < self.n)
            .collect();
        let mut heard: Option<Vec<Heard>> = None;
        let n = self.n;
        for &(t, line) in &tracked {
            join_into(&mut all, self.row(t));
            let t = t as usize;
            if self.hears[t] {
                let joined = heard.get_or_insert_with(|| vec![Heard::default(); n]);
                let row = &self.heard[t * n..(t + 1) * n];
                pass_heard(joined, row, line, self.last_acquire[t]);
            }
        }
        for &(t, line) in &tracked {
            self.join_row(t, &all, line);
            if let Some(heard) = &heard {
                self.hear_passed(t, heard);
            }
        }
    }

    /// The launch's pairs, each with whether its location synchronises, and its communication.
    pub fn finish(self) -> LaunchRaces {
        type Summed = (u64, u64, (u32, u32));
        let mut merged: HashMap<(PairKey, bool), Summed> = HashMap::new();
        let acted_on: HashSet<(PairKey, u64)> = (self.stale_reads.into_iter())
            .flat_map(|((_, addr), keys)| keys.into_iter().map(move |k| (k, addr)))
            .collect();
        for ((key, addr), seen) in self.pairs {
            let Occurrences {
                count,
                ctas,
                handshakes,
            } = seen;
            // A stale read the thread went on from is no spin: the pair is not the
            // synchronisation itself, whatever else the location carries.
            let sync = !acted_on.contains(&(key, addr))
                && (self.carrying.contains(&addr)
                    || self.declared.contains(&addr)
                    || self.shadows.get(&addr).is_some_and(|s| s.spun)
                    || handshakes);
            let e = merged.entry((key, sync)).or_insert((0, 0, ctas));
            e.0 += count;
            e.1 += 1;
            // The lowest of the locations' CTA pairs, not the first in the map's order (which
            // changes from one process to the next).
            e.2 = e.2.min(ctas);
        }
        LaunchRaces {
            conflicts: merged
                .into_iter()
                .map(
                    |((key, synchronising), (occurrences, locations, ctas))| LaunchPair {
                        key,
                        synchronising,
                        occurrences,
                        locations,
                        ctas,
                    },
                )
                .collect(),
            communication: self.edges.into_iter().collect(),
        }
    }
}

/// Every instruction line of a PTX module, resolved to its function, text and source line.
pub fn site_table(ptx_text: &str) -> HashMap<u32, RaceSite> {
    use gpuwmm_ptx::lines::attribute_statements;
    use gpuwmm_ptx::Statement;
    let mut table = HashMap::new();
    let Ok(module) = gpuwmm_ptx::parse(ptx_text) else {
        return table;
    };
    for function in module.functions() {
        let body = function.body.as_deref().unwrap_or_default();
        for (statement, attribution) in body.iter().zip(attribute_statements(body)) {
            let Statement::Instruction(i) = statement else {
                continue;
            };
            let outer = attribution.map(|a| a.outer).filter(|pos| pos.line != 0);
            let file = outer.and_then(|pos| module.file_path(pos.file).map(str::to_string));
            let inner = attribution
                .filter(|a| a.inner != a.outer && a.inner.line != 0 && file.is_some())
                .and_then(|a| {
                    let file = module.file_path(a.inner.file)?.to_string();
                    Some(SourceLine {
                        file,
                        line: a.inner.line,
                    })
                });
            table.insert(
                i.ptx_line as u32,
                RaceSite {
                    function: function.name.clone(),
                    ptx_line: i.ptx_line as u32,
                    ptx: gpuwmm_ptx::print::instruction_text(i),
                    line: file.as_ref().and(outer.map(|pos| pos.line)),
                    file,
                    inner,
                },
            );
        }
    }
    table
}

impl RaceLog {
    /// Adds a launch's records, its PTX lines resolved through `sites` (a line it lacks gets a
    /// site of its own, named by the line). Kept sorted, so that equal runs give equal logs.
    pub fn add(&mut self, launch: LaunchRaces, sites: &HashMap<u32, RaceSite>) {
        let site = |line: u32| {
            sites.get(&line).cloned().unwrap_or_else(|| RaceSite {
                function: String::new(),
                ptx_line: line,
                ptx: String::new(),
                file: None,
                line: None,
                inner: None,
            })
        };
        for LaunchPair {
            key,
            synchronising: sync,
            occurrences,
            locations,
            ctas,
        } in launch.conflicts
        {
            let access = |(line, kind, strength): (u32, AccessKind, Strength)| RaceAccess {
                site: site(line),
                kind,
                strength,
            };
            self.conflicts.push(Conflict {
                first: access(key.first),
                second: access(key.second),
                ctas,
                facts: key.facts,
                via: key.via.map(|(w, r)| (site(w), site(r))),
                relay: key.relay.map(site),
                passed: key.passed.map(site),
                out_of_scope: key.out_of_scope.map(|(w, r)| (site(w), site(r))),
                forward: key.forward.map(|f| Forwarded {
                    write: (f.origin != 0).then(|| site(f.origin)),
                    read: site(f.named.0),
                    passes: site(f.named.1),
                    fenced: f.fenced,
                    first_in_cta: f.first_in_cta,
                    last_in_cta: f.last_in_cta,
                }),
                synchronising_location: sync,
                occurrences,
                locations,
            });
        }
        for ((writer, reader, same_cta), occurrences) in launch.communication {
            self.communication.push(Communication {
                writer: site(writer),
                reader: site(reader),
                same_cta,
                occurrences,
            });
        }
        let conflict_key = |c: &Conflict| {
            (
                c.first.site.ptx_line,
                c.second.site.ptx_line,
                c.first.kind,
                c.second.kind,
                c.facts.same_cta,
                c.facts.communicated,
                c.synchronising_location,
                c.facts.observed,
            )
        };
        self.conflicts.sort_by(|a, b| {
            conflict_key(a)
                .cmp(&conflict_key(b))
                .then_with(|| format!("{a:?}").cmp(&format!("{b:?}")))
        });
        self.communication.sort_by(|a, b| {
            (a.writer.ptx_line, a.reader.ptx_line, a.same_cta).cmp(&(
                b.writer.ptx_line,
                b.reader.ptx_line,
                b.same_cta,
            ))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: u64 = 0x1000;
    const FLAG: u64 = 0x2000;

    /// The word at `addr`.
    fn w(addr: u64) -> Bytes {
        Bytes { addr, size: 4 }
    }

    fn order(reach: Reach) -> Order {
        Order {
            reach,
            ..Order::default()
        }
    }

    /// A release at `reach`.
    fn releasing(reach: Reach) -> Order {
        Order {
            releases: true,
            ..order(reach)
        }
    }

    /// An acquire at `reach`.
    fn acquiring(reach: Reach) -> Order {
        Order {
            acquires: true,
            ..order(reach)
        }
    }

    /// Threads 0 and 1 in blocks of one thread each (different CTAs).
    fn two_ctas() -> RaceTracker {
        RaceTracker::new(2, 1)
    }

    /// Message passing: thread 0 writes the payload (`payload`) and the flag (strong), with a
    /// `release` fence between when asked; thread 1 reads the flag (observing it), fences when
    /// `acquire`, and reads the payload. Returns the launch's pairs.
    fn message_passing(payload: Reach, release: bool, acquire: bool) -> Vec<LaunchPair> {
        let mut r = two_ctas();
        r.store(0, 10, w(X), order(payload), Some(1));
        if release {
            r.fence(0, Reach::Gpu, false, 30);
        }
        r.store(0, 11, w(FLAG), order(Reach::Gpu), Some(2));
        r.load(1, None, 20, w(FLAG), order(Reach::Gpu), Some(2));
        if acquire {
            r.fence(1, Reach::Gpu, false, 30);
        }
        r.load(1, None, 21, w(X), order(payload), Some(1));
        r.finish().conflicts
    }

    /// Store buffering between two CTAs: each thread writes its own flag (lines 10, 20),
    /// makes a `fence.sc.gpu` when `fenced` says (the reader of the pair asked about first),
    /// and reads the other's (lines 12, 22). Thread 0 reads first and misses thread 1's
    /// write; thread 1 sees thread 0's. The pair on thread 1's flag, whether it passes for the
    /// synchronisation itself.
    fn handshake_pair_synchronises(fenced: [bool; 2]) -> bool {
        let mut r = two_ctas();
        r.store(0, 10, w(X), order(Reach::Gpu), Some(1));
        if fenced[0] {
            r.fence(0, Reach::Gpu, true, 11);
        }
        r.load(0, None, 12, w(FLAG), order(Reach::Gpu), None);
        r.store(1, 20, w(FLAG), order(Reach::Gpu), Some(1));
        if fenced[1] {
            r.fence(1, Reach::Gpu, true, 21);
        }
        r.load(1, None, 22, w(X), order(Reach::Gpu), Some(1));
        let pairs = r.finish().conflicts;
        let flag = pairs
            .iter()
            .find(|p| p.key.first.0 == 12 && p.key.second.0 == 20);
        flag.expect("the read of thread 1's flag and its write")
            .synchronising
    }

    /// QA bug (leader election by store buffering, with the `fence.sc.gpu` harden kept in each
    /// thread): every run reported the read that missed the other thread's flag as a race no
    /// fence can order, with the advice to add the fence already there. A read a `fence.sc`
    /// separates from its thread's own earlier write is a fenced handshake's side, which PTX
    /// lets miss; without the fence on the reading side the pair is still reported.
    #[test]
    fn a_handshake_read_after_its_own_write_and_a_sc_fence_is_the_synchronisation_itself() {
        assert!(handshake_pair_synchronises([true, true]));
        assert!(!handshake_pair_synchronises([false, true]));
        assert!(!handshake_pair_synchronises([false, false]));
    }

    fn payload_pairs(pairs: &[LaunchPair]) -> Vec<&LaunchPair> {
        pairs.iter().filter(|p| p.key.first.0 == 10).collect()
    }

    /// The payload's pairs (first access at line 10) of the launch `r` recorded.
    fn payload_of(r: RaceTracker) -> Vec<LaunchPair> {
        let pairs = r.finish().conflicts;
        pairs.into_iter().filter(|p| p.key.first.0 == 10).collect()
    }

    #[test]
    fn a_release_and_an_acquire_of_gpu_scope_order_the_payload() {
        assert!(payload_pairs(&message_passing(Reach::Weak, true, true)).is_empty());
    }

    #[test]
    fn without_the_acquire_the_payload_pair_is_unordered_but_communicated() {
        let pairs = message_passing(Reach::Weak, true, false);
        let payload = payload_pairs(&pairs);
        assert_eq!(payload.len(), 1);
        let key = payload[0].key;
        assert!(!key.facts.morally_strong && key.facts.communicated && key.facts.observed);
        assert_eq!(key.facts.first_release, Some(Strength::Gpu));
        assert_eq!(key.facts.second_acquire, None);
        assert_eq!(key.via, Some((11, 20)));
        assert!(!key.facts.same_cta);
    }

    /// QA finding (a producer whose `__threadfence()` stands after its flag store, a consumer
    /// fenced after its spin): the fence after the flag counted as the release after the
    /// payload, so release and acquire both looked present and the advice named no line ("a
    /// release and an acquire of gpu scope around the communication between them"). Only a
    /// release before the write the other thread read forms the pattern.
    #[test]
    fn a_fence_after_the_flag_store_is_no_release_of_the_payload() {
        let mut r = two_ctas();
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.store(0, 11, w(FLAG), order(Reach::Gpu), Some(2));
        r.load(1, None, 20, w(FLAG), order(Reach::Gpu), Some(2));
        r.fence(0, Reach::Gpu, true, 12);
        r.fence(1, Reach::Gpu, false, 30);
        r.load(1, None, 21, w(X), order(Reach::Weak), Some(1));
        let pairs = payload_of(r);
        assert_eq!(pairs.len(), 1);
        let facts = pairs[0].key.facts;
        assert!(facts.communicated);
        assert_eq!(facts.first_release, None);
        assert_eq!(facts.second_acquire, Some(Strength::Gpu));
    }

    #[test]
    fn volatile_message_passing_is_morally_strong_and_the_flag_synchronises() {
        let pairs = message_passing(Reach::Gpu, false, false);
        let payload = payload_pairs(&pairs);
        assert_eq!(payload.len(), 1);
        assert!(payload[0].key.facts.morally_strong && payload[0].key.facts.communicated);
        assert!(!payload[0].synchronising);
    }

    /// Regression (a `cooperative_groups` grid sync, and any counter of release RMWs): block
    /// 1 writes a payload and arrives with a release RMW; block 0 arrives after it with its own
    /// RMW, then reads the counter with an acquire load, which reads block 0's own RMW. PTX's
    /// observation order runs through that RMW, so the release synchronises with the acquire;
    /// the recorder skipped reads of a thread's own write and reported the payload as a race.
    #[test]
    fn an_acquire_reading_its_own_rmw_continues_the_release_sequence_it_joined() {
        let acquire = acquiring(Reach::Gpu);
        let run = |first_releases: bool| {
            let mut r = two_ctas();
            r.store(1, 10, w(X), order(Reach::Weak), Some(1));
            let first = if first_releases {
                releasing(Reach::Gpu)
            } else {
                order(Reach::Gpu)
            };
            r.atomic(1, 11, w(FLAG), first, None, true, Some(1));
            r.atomic(0, 12, w(FLAG), order(Reach::Gpu), None, true, Some(2));
            r.load(0, None, 20, w(FLAG), acquire, Some(2));
            r.load(0, None, 21, w(X), order(Reach::Weak), Some(1));
            r.finish().conflicts
        };
        assert!(payload_pairs(&run(true)).is_empty());
        assert_eq!(payload_pairs(&run(false)).len(), 1, "no release: a race");
    }

    #[test]
    fn a_cta_scoped_release_does_not_order_a_pair_between_ctas() {
        let mut r = two_ctas();
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.fence(0, Reach::Cta, false, 30);
        r.store(0, 11, w(FLAG), order(Reach::Gpu), Some(2));
        r.load(1, None, 20, w(FLAG), order(Reach::Gpu), Some(2));
        r.fence(1, Reach::Gpu, false, 30);
        r.load(1, None, 21, w(X), order(Reach::Weak), Some(1));
        let pairs = r.finish().conflicts;
        let payload = payload_pairs(&pairs);
        assert_eq!(payload.len(), 1);
        assert_eq!(payload[0].key.facts.first_release, Some(Strength::Cta));
    }

    /// A [`ForwardKey`] from its fields in order.
    fn fwd(
        origin: u32,
        named: (u32, u32),
        fenced: Option<Strength>,
        (first_in_cta, last_in_cta): (bool, bool),
    ) -> ForwardKey {
        ForwardKey {
            origin,
            named,
            fenced,
            first_in_cta,
            last_in_cta,
        }
    }

    const FLAG2: u64 = 0x3000;
    const FLAG3: u64 = 0x4000;

    /// Thread 0 writes the payload (line 10), releases (`release`) and raises flag 1 (line
    /// 11); each further thread but the last waits for the previous flag (line 20 + its
    /// number), fences when `fenced` says so, and raises the next flag (line 30 + its number);
    /// the last thread waits, acquires and reads the payload (line 50). Threads in CTAs of
    /// their own.
    fn forwarded(release: bool, fenced: &[bool]) -> Vec<LaunchPair> {
        let flags = [FLAG, FLAG2, FLAG3];
        let last = fenced.len() as u32 + 1;
        let mut r = RaceTracker::new(last as usize + 1, 1);
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        if release {
            r.fence(0, Reach::Gpu, false, 12);
        }
        r.store(0, 11, w(FLAG), order(Reach::Gpu), Some(1));
        for (i, &fence) in fenced.iter().enumerate() {
            let t = i as u32 + 1;
            r.load(
                t as usize,
                None,
                20 + t,
                w(flags[i]),
                order(Reach::Gpu),
                Some(1),
            );
            if fence {
                r.fence(t as usize, Reach::Gpu, false, 40 + t);
            }
            r.store(
                t as usize,
                30 + t,
                w(flags[i + 1]),
                order(Reach::Gpu),
                Some(1),
            );
        }
        let at = flags[fenced.len()];
        r.load(
            last as usize,
            None,
            20 + last,
            w(at),
            order(Reach::Gpu),
            Some(1),
        );
        r.fence(last as usize, Reach::Gpu, false, 45);
        r.load(last as usize, None, 50, w(X), order(Reach::Weak), Some(1));
        r.finish().conflicts
    }

    /// Write-to-read causality through a thread with no fence (WRC): the payload pair was
    /// called uncommunicated, so its advice named none of the three threads' fences.
    #[test]
    fn communication_forwarded_by_a_thread_without_fences_names_that_thread() {
        let pairs = forwarded(true, &[false]);
        let payload = payload_pairs(&pairs);
        assert_eq!(payload.len(), 1);
        let key = payload[0].key;
        assert!(key.facts.communicated);
        assert_eq!(key.via, Some((31, 22)));
        assert_eq!(key.forward, Some(fwd(11, (21, 31), None, (false, false))));
        assert_eq!(key.facts.first_release, Some(Strength::Gpu));
    }

    /// The forwarding thread fenced: the chain is causal and nothing is left.
    #[test]
    fn a_fenced_forwarding_thread_orders_the_forwarded_payload() {
        assert!(payload_pairs(&forwarded(true, &[true])).is_empty());
    }

    /// Two forwarding threads, neither fenced: the first is named; once it is fenced, the
    /// second (its access reached the first causally, so no release of the writer's is asked).
    #[test]
    fn a_chain_of_forwarders_names_the_first_that_lacks_its_fence() {
        let pairs = forwarded(true, &[false, false]);
        let key = payload_pairs(&pairs)[0].key;
        assert_eq!(key.forward, Some(fwd(11, (21, 31), None, (false, false))));
        let pairs = forwarded(true, &[true, false]);
        let key = payload_pairs(&pairs)[0].key;
        assert_eq!(key.forward, Some(fwd(0, (22, 32), None, (false, false))));
        assert!(payload_pairs(&forwarded(true, &[true, true])).is_empty());
    }

    /// Without the writer's release, a fenced forwarder acquires nothing: the writer is named.
    #[test]
    fn a_forwarded_payload_without_the_writers_release_names_the_release() {
        let pairs = forwarded(false, &[true]);
        let key = payload_pairs(&pairs)[0].key;
        assert_eq!(
            key.forward,
            Some(fwd(11, (21, 31), Some(Strength::Gpu), (false, false)))
        );
        assert_eq!(key.facts.first_release, None);
    }

    /// Regression: a payload raised to a thread of its own CTA, which passed it on to another
    /// CTA, was said to need a release of gpu scope after it (and harden never tried a `.cta`
    /// fence there), though PTX's causality order is transitive: a `.cta` release read in the
    /// CTA, then the forwarder's `.gpu` acquire-and-release, order it for the far CTA. Each
    /// link's scope is now recorded.
    #[test]
    fn a_payload_forwarded_inside_its_cta_first_records_each_links_scope() {
        let run = |writer_fence: Option<Reach>| {
            // Threads 0 and 1 in CTA 0, thread 2 in CTA 1.
            let mut r = RaceTracker::new(3, 2);
            r.store(0, 10, w(X), order(Reach::Weak), Some(1));
            if let Some(reach) = writer_fence {
                r.fence(0, reach, false, 12);
            }
            r.store(0, 11, w(FLAG), order(Reach::Gpu), Some(1));
            r.load(1, None, 21, w(FLAG), order(Reach::Gpu), Some(1));
            r.fence(1, Reach::Gpu, false, 41);
            r.store(1, 31, w(FLAG2), order(Reach::Gpu), Some(1));
            r.load(2, None, 22, w(FLAG2), order(Reach::Gpu), Some(1));
            r.fence(2, Reach::Gpu, false, 45);
            r.load(2, None, 50, w(X), order(Reach::Weak), Some(1));
            r.finish().conflicts
        };
        let pairs = run(None);
        let key = payload_pairs(&pairs)[0].key;
        let gpu = Some(Strength::Gpu);
        assert_eq!(key.forward, Some(fwd(11, (21, 31), gpu, (true, false))));
        assert!(!key.facts.communication_in_cta && !key.facts.same_cta);
        assert!(payload_pairs(&run(Some(Reach::Cta))).is_empty());
    }

    /// One pair at two locations, by different CTAs: the CTAs it names were those of whichever
    /// location the map gave first, which changed from one process to the next (ct-octree's
    /// report named CTA 1 in one run of a command and CTA 2 in the next).
    #[test]
    fn a_pair_at_several_locations_names_the_same_ctas_every_time() {
        let mut r = RaceTracker::new(4, 1);
        r.store(2, 10, w(X), order(Reach::Weak), Some(1));
        r.load(3, None, 20, w(X), order(Reach::Weak), Some(1));
        r.store(0, 10, w(FLAG), order(Reach::Weak), Some(1));
        r.load(1, None, 20, w(FLAG), order(Reach::Weak), Some(1));
        let pairs = r.finish().conflicts;
        assert_eq!(pairs.len(), 1);
        assert_eq!((pairs[0].locations, pairs[0].ctas), (2, (0, 1)));
    }

    /// Thread 0 writes the payload (line 10) and the flag (line 11, `raise`); thread 1, in
    /// another CTA, reads the flag (line 20, `wait`) and the payload (line 21).
    fn flag_handoff(raise: Order, wait: Order) -> Vec<LaunchPair> {
        let mut r = two_ctas();
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.store(0, 11, w(FLAG), raise, Some(2));
        r.load(1, None, 20, w(FLAG), wait, Some(2));
        r.load(1, None, 21, w(X), order(Reach::Weak), Some(1));
        r.finish().conflicts
    }

    /// A flag released and acquired at CTA scope by threads of two CTAs is no communication
    /// under PTX (not morally strong), so the payload pair is uncommunicated; it is named as the
    /// communication a wider scope would make, and the flag pair is a race of its own.
    #[test]
    fn a_cta_scoped_flag_between_ctas_is_communication_out_of_scope() {
        let pairs = flag_handoff(releasing(Reach::Cta), acquiring(Reach::Cta));
        let payload = payload_pairs(&pairs);
        assert_eq!(payload.len(), 1);
        let key = payload[0].key;
        assert!(!key.facts.communicated && key.via.is_none());
        assert_eq!(key.out_of_scope, Some((11, 20)));
        let flag = (pairs.iter().find(|p| p.key.first.0 == 11)).expect("the flag pair");
        assert!(!flag.key.facts.morally_strong);
    }

    /// The same flag at GPU scope is the communication itself: nothing is out of scope.
    #[test]
    fn a_gpu_scoped_flag_is_no_communication_out_of_scope() {
        let pairs = flag_handoff(order(Reach::Gpu), order(Reach::Gpu));
        let payload = payload_pairs(&pairs);
        assert!(payload[0].key.facts.communicated);
        assert_eq!(payload[0].key.out_of_scope, None);
    }

    #[test]
    fn a_barrier_orders_the_threads_of_a_block() {
        let mut r = RaceTracker::new(2, 2);
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.barrier(&[(0, 30), (1, 30)]);
        r.load(1, None, 21, w(X), order(Reach::Weak), Some(1));
        assert!(r.finish().conflicts.is_empty());
    }

    /// A counted producer/consumer barrier: warp 0 writes and `bar.arrive`s without waiting,
    /// warp 1 `bar.sync`s on the same barrier and reads. PTX orders the write before the read;
    /// the recorder once joined only the waiting threads' clocks and reported a data race.
    #[test]
    fn bar_arrive_producers_are_ordered_before_the_consumers_that_wait() {
        let mut r = RaceTracker::new(2, 2);
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.barrier_arrive(0, 1, 30);
        r.barrier_arrive(1, 1, 30);
        r.barrier_complete(1, &[(1, 30)]);
        r.load(1, None, 21, w(X), order(Reach::Weak), Some(1));
        assert!(r.finish().conflicts.is_empty());
    }

    /// Thread 1 of block 0 writes the payload; a `__syncthreads()` (line 12) passes it to
    /// thread 0, which raises the flag (line 13) after a fence at `relay_fence` when given,
    /// the writer itself fencing at `writer_fence` when given; thread 2, in block 1, reads the
    /// flag, fences when `acquire`, and reads the payload. Returns the payload's pairs.
    fn relayed_handoff(
        writer_fence: Option<Reach>,
        relay_fence: Option<Reach>,
        acquire: bool,
    ) -> Vec<LaunchPair> {
        let mut r = RaceTracker::new(3, 2);
        r.store(1, 10, w(X), order(Reach::Weak), Some(1));
        if let Some(reach) = writer_fence {
            r.fence(1, reach, false, 11);
        }
        r.barrier_arrive(0, 1, 30);
        r.barrier_arrive(1, 1, 30);
        r.barrier_complete(1, &[(0, 12), (1, 12)]);
        if let Some(reach) = relay_fence {
            r.fence(0, reach, false, 14);
        }
        r.store(0, 13, w(FLAG), order(Reach::Gpu), Some(2));
        r.load(2, None, 20, w(FLAG), order(Reach::Gpu), Some(2));
        if acquire {
            r.fence(2, Reach::Gpu, false, 22);
        }
        r.load(2, None, 21, w(X), order(Reach::Weak), Some(1));
        payload_of(r)
    }

    /// Regression (`check --races` advice across a barrier): the payload reaches the reader
    /// through the thread that raises the flag, so the pair is communicated, relayed at the
    /// barrier, and the release it lacks is that thread's, not the writer's.
    #[test]
    fn a_payload_relayed_at_a_barrier_is_communicated_through_the_flag_raiser() {
        let pairs = relayed_handoff(None, None, false);
        assert_eq!(pairs.len(), 1);
        let key = pairs[0].key;
        assert!(key.facts.communicated && key.relay.is_some());
        assert_eq!(key.via, Some((13, 20)));
        assert_eq!(key.relay, Some(12));
        assert_eq!(key.facts.first_release, None);
        assert_eq!(key.facts.second_acquire, None);
        assert!(!key.facts.communication_in_cta && !key.facts.same_cta);
    }

    #[test]
    fn a_release_in_the_relaying_thread_and_an_acquire_order_a_relayed_payload() {
        assert!(relayed_handoff(None, Some(Reach::Gpu), true).is_empty());
        let pairs = relayed_handoff(None, Some(Reach::Gpu), false);
        assert_eq!(pairs.len(), 1, "without the acquire");
        assert_eq!(pairs[0].key.facts.first_release, Some(Strength::Gpu));
        let pairs = relayed_handoff(None, Some(Reach::Cta), true);
        assert_eq!(pairs.len(), 1, "a .cta release does not reach block 1");
        assert_eq!(pairs[0].key.facts.first_release, Some(Strength::Cta));
    }

    #[test]
    fn the_writers_own_fence_is_no_release_of_a_flag_another_thread_raises() {
        let pairs = relayed_handoff(Some(Reach::Gpu), None, true);
        assert_eq!(pairs.len(), 1);
        assert!(pairs[0].key.relay.is_some());
        assert_eq!(pairs[0].key.facts.first_release, None);
        assert_eq!(pairs[0].key.facts.second_acquire, Some(Strength::Gpu));
    }

    /// Last block done: thread 0 (block 0) writes its partial sum, fences (line 11) and takes a
    /// ticket (line 12); thread 2, thread 0 of block 1, takes the next ticket (line 13), fences
    /// when `acquire` (line 16), and a barrier (line 14) passes what it read to thread 3,
    /// which reads the partial sum (line 15). Returns the partial sum's pairs.
    fn passed_on_at_a_barrier(acquire: bool) -> Vec<LaunchPair> {
        let mut r = RaceTracker::new(4, 2);
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.fence(0, Reach::Gpu, false, 11);
        r.atomic(0, 12, w(FLAG), order(Reach::Gpu), None, true, Some(2));
        r.atomic(2, 13, w(FLAG), order(Reach::Gpu), None, true, Some(3));
        if acquire {
            r.fence(2, Reach::Gpu, false, 16);
        }
        r.barrier_arrive(2, 1, 14);
        r.barrier_arrive(3, 1, 14);
        r.barrier_complete(1, &[(2, 14), (3, 14)]);
        r.load(3, None, 15, w(X), order(Reach::Weak), Some(1));
        payload_of(r)
    }

    /// The last block's threads other than the one that took the ticket read the partial sums:
    /// the communication reaches them through that thread and the barrier, so the pair is
    /// communicated, passed on at the barrier, and the acquire it lacks is that thread's.
    #[test]
    fn a_ticket_read_passed_on_at_a_barrier_is_communication_whose_acquire_is_the_readers() {
        let pairs = passed_on_at_a_barrier(false);
        assert_eq!(pairs.len(), 1);
        let key = pairs[0].key;
        assert!(key.facts.communicated && key.relay.is_none());
        assert_eq!(key.via, Some((12, 13)));
        assert_eq!(key.passed, Some(14));
        assert_eq!(key.facts.first_release, Some(Strength::Gpu));
        assert_eq!(key.facts.second_acquire, None);
        assert!(passed_on_at_a_barrier(true).is_empty());
    }

    #[test]
    fn a_barrier_phase_does_not_carry_into_the_next() {
        let mut r = RaceTracker::new(2, 2);
        r.barrier_arrive(0, 1, 30);
        r.barrier_arrive(1, 1, 30);
        r.barrier_complete(1, &[(0, 30), (1, 30)]);
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.barrier_arrive(1, 1, 30);
        r.barrier_complete(1, &[(1, 30)]);
        r.load(1, None, 21, w(X), order(Reach::Weak), Some(1));
        assert_eq!(r.finish().conflicts.len(), 1);
    }

    #[test]
    fn two_weak_writes_of_one_block_without_a_barrier_race() {
        let mut r = RaceTracker::new(2, 2);
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.store(1, 11, w(X), order(Reach::Weak), Some(2));
        let pairs = r.finish().conflicts;
        assert_eq!(pairs.len(), 1);
        assert!(pairs[0].key.facts.same_cta && !pairs[0].key.facts.morally_strong);
    }

    #[test]
    fn a_flag_read_twice_in_a_row_is_a_synchronising_location() {
        let mut r = two_ctas();
        r.load(1, None, 20, w(FLAG), order(Reach::Gpu), None);
        r.store(0, 11, w(FLAG), order(Reach::Gpu), Some(1));
        r.load(1, None, 20, w(FLAG), order(Reach::Gpu), Some(1));
        let pairs = r.finish().conflicts;
        assert!(!pairs.is_empty());
        assert!(pairs.iter().all(|p| p.synchronising));
    }

    /// A slot read lap after lap (thread 1 reads `X`, line 20, then hands it back through
    /// `FLAG`, line 21; thread 0 refills it, line 10): reading `again` the same write is a
    /// spin, a new one with a write between is consuming the slot. The pairs at `X`.
    fn slot_read_twice(again: bool) -> Vec<LaunchPair> {
        let mut r = two_ctas();
        r.store(0, 10, w(X), order(Reach::Gpu), Some(1));
        r.load(1, None, 20, w(X), order(Reach::Gpu), Some(1));
        r.store(1, 21, w(FLAG), order(Reach::Gpu), Some(2));
        r.load(0, None, 11, w(FLAG), order(Reach::Gpu), Some(2));
        r.store(0, 10, w(X), order(Reach::Gpu), Some(3));
        let second = if again { 1 } else { 3 };
        r.load(1, None, 20, w(X), order(Reach::Gpu), Some(second));
        let pairs = r.finish().conflicts;
        let at_x = |l: u32| l == 10 || l == 20;
        (pairs.into_iter())
            .filter(|p| at_x(p.key.first.0) && at_x(p.key.second.0))
            .collect()
    }

    /// Regression (QA: a bounded MPMC queue missing the consumer's release recorded its slot's
    /// load-buffering pair, and reported nothing): a consumer that read its slot twice, lap
    /// after lap, made the slot pass for a flag spun on, and every pair there for the
    /// synchronisation itself.
    #[test]
    fn a_slot_read_lap_after_lap_with_writes_between_is_no_spin() {
        let consumed = slot_read_twice(false);
        assert!(!consumed.is_empty());
        assert!(consumed.iter().all(|p| !p.synchronising), "{consumed:?}");
        let spun = slot_read_twice(true);
        assert!(!spun.is_empty());
        assert!(spun.iter().all(|p| p.synchronising), "{spun:?}");
    }

    /// Regression (a device-scope `cuda::binary_semaphore` guarding a counter): its word is
    /// taken with `atom.exch.acquire` and given back with `st.release`, and in runs where no
    /// thread spun on it, pairs on it were reported as races the app should fix. A location
    /// some access releases or acquires at is a declared synchronisation variable.
    #[test]
    fn a_word_released_or_acquired_at_is_a_synchronising_location() {
        let mut r = two_ctas();
        r.atomic(1, 20, w(FLAG), acquiring(Reach::Gpu), None, true, Some(1));
        r.store(0, 11, w(FLAG), releasing(Reach::Gpu), Some(2));
        let pairs = r.finish().conflicts;
        assert!(!pairs.is_empty());
        assert!(pairs.iter().all(|p| p.synchronising));
        // The same two accesses, relaxed, are not declared.
        let mut r = two_ctas();
        r.atomic(1, 20, w(FLAG), order(Reach::Gpu), None, true, Some(1));
        r.store(0, 11, w(FLAG), order(Reach::Gpu), Some(2));
        let relaxed = r.finish().conflicts;
        assert!(!relaxed.is_empty());
        assert!(relaxed.iter().all(|p| !p.synchronising));
    }

    /// Double-checked initialisation in two CTAs: thread 1 reads `X` (`ready`, line 7); thread
    /// 0 raises it (line 14) and then writes `FLAG` (the unlock, line 16); thread 1 reads that
    /// write (the lock, line 8), hearing from thread 0 after line 14, and reads `X` again, stale
    /// (line 10), then, when `retried`, once more (line 10, the 1). The pairs from line 14.
    fn stale_recheck(retried: bool) -> Vec<LaunchPair> {
        let mut r = two_ctas();
        r.load(1, None, 7, w(X), order(Reach::Gpu), Some(0));
        r.store(0, 14, w(X), order(Reach::Gpu), Some(1));
        r.store(0, 16, w(FLAG), order(Reach::Gpu), Some(2));
        r.load(1, None, 8, w(FLAG), order(Reach::Gpu), Some(2));
        r.load(1, None, 10, w(X), order(Reach::Gpu), Some(0));
        if retried {
            r.load(1, None, 10, w(X), order(Reach::Gpu), Some(1));
        }
        let pairs = r.finish().conflicts;
        pairs.into_iter().filter(|p| p.key.first.0 == 14).collect()
    }

    /// Regression (double-checked initialisation: the stale re-check of `ready` after taking
    /// the lock passed for a spin, since the thread read `ready` twice without writing it, and
    /// nothing named the release it lacked). A stale read its thread goes on from is not the
    /// synchronisation itself; one the thread retries is.
    #[test]
    fn a_stale_read_its_thread_acts_on_is_not_the_synchronisation_itself() {
        let acted = stale_recheck(false);
        assert!(!acted.is_empty(), "no pair from line 14");
        assert!(acted.iter().all(|p| !p.synchronising), "{acted:?}");
        assert!(acted.iter().all(|p| p.key.facts.communicated), "{acted:?}");
        let retried = stale_recheck(true);
        assert!(!retried.is_empty(), "no pair from line 14");
        assert!(retried.iter().all(|p| p.synchronising), "{retried:?}");
    }

    /// Message passing through relaxed RMWs alone in two CTAs: thread 0 writes `X` (line 11),
    /// fences when `release` (line 12), writes `FLAG` (line 13), all with RMWs; thread 1 reads
    /// `FLAG` with an RMW (line 15), fences when `acquire` (line 16) and reads `X` with an RMW
    /// that reads what `X` held before the launch (line 17), stale. The pairs at `X`.
    fn stale_rmw_payload(release: bool, acquire: bool) -> Vec<LaunchPair> {
        let mut r = two_ctas();
        r.atomic(0, 11, w(X), order(Reach::Gpu), Some(0), true, Some(1));
        if release {
            r.fence(0, Reach::Gpu, false, 12);
        }
        r.atomic(0, 13, w(FLAG), order(Reach::Gpu), Some(0), true, Some(2));
        r.atomic(1, 15, w(FLAG), order(Reach::Gpu), Some(2), true, Some(3));
        if acquire {
            r.fence(1, Reach::Gpu, false, 16);
        }
        r.atomic(1, 17, w(X), order(Reach::Gpu), Some(0), true, Some(4));
        let pairs = r.finish().conflicts;
        pairs.into_iter().filter(|p| p.key.first.0 == 11).collect()
    }

    /// Regression (message passing through relaxed RMWs: the recorder took every RMW to read
    /// the newest write, so a payload RMW that read the value before the payload write was
    /// taken to observe it, and `check --races` reported nothing on an app failing half its
    /// runs). The stale payload read is a pair a fence orders, not the synchronisation itself.
    #[test]
    fn an_rmw_that_reads_a_stale_payload_is_a_pair_a_fence_orders() {
        let stale = stale_rmw_payload(true, false);
        assert_eq!(stale.len(), 1, "{stale:?}");
        let facts = &stale[0].key.facts;
        assert!(!stale[0].synchronising && !facts.observed && facts.communicated);
        assert_eq!(facts.first_release, Some(Strength::Gpu));
        assert_eq!(facts.second_acquire, None);
        assert!(stale_rmw_payload(true, true).is_empty());
    }

    /// Regression (message passing through relaxed RMWs, a reader whose spinning RMWs read
    /// before the flag write and wrote below it: the shadow dropped the flag write, by the
    /// order writes were performed, while the model still kept it as the newest; the RMW that
    /// read it then paired with nothing, the reader heard nothing, and its stale payload read
    /// went unreported in 8 of 148 failing runs). The shadow keeps what the model keeps.
    #[test]
    fn a_write_the_model_keeps_stays_in_the_shadow_however_many_writes_go_below_it() {
        let mut r = two_ctas();
        r.atomic(0, 11, w(X), order(Reach::Gpu), Some(0), true, Some(1));
        r.fence(0, Reach::Gpu, false, 12);
        r.atomic(0, 13, w(FLAG), order(Reach::Gpu), Some(0), true, Some(2));
        let mut kept = vec![0, 2];
        for ts in 3..16 {
            let read = kept[kept.len() - 2];
            r.atomic(
                1,
                15,
                w(FLAG),
                order(Reach::Gpu),
                Some(read),
                true,
                Some(ts),
            );
            kept.insert(kept.len() - 1, ts);
            if kept.len() > crate::ptx_model::KEPT {
                kept.remove(0);
            }
            r.keep_written(FLAG, &kept);
        }
        r.atomic(1, 15, w(FLAG), order(Reach::Gpu), Some(2), true, Some(16));
        r.atomic(1, 17, w(X), order(Reach::Gpu), Some(0), true, Some(17));
        let pairs = r.finish().conflicts;
        let stale: Vec<_> = pairs.iter().filter(|p| p.key.first.0 == 11).collect();
        assert_eq!(stale.len(), 1, "{pairs:?}");
        assert!(stale[0].key.facts.communicated && !stale[0].synchronising);
    }

    /// The volatile slot recycler with its read deferred: block 0 issues its slot read
    /// (line 13), fences when `release`, sets the flag; block 1 reads the flag, fences when
    /// `acquire`, overwrites the slot (line 19); the slot read is performed last, reading the
    /// old value. Returns the slot's pairs.
    fn deferred_slot_read(release: bool, acquire: bool) -> Vec<LaunchPair> {
        let mut r = two_ctas();
        let read = r.reserve(0);
        if release {
            r.fence(0, Reach::Gpu, false, 30);
        }
        r.store(0, 14, w(FLAG), order(Reach::Gpu), Some(1));
        r.load(1, None, 17, w(FLAG), order(Reach::Gpu), Some(1));
        if acquire {
            r.fence(1, Reach::Gpu, false, 30);
        }
        r.store(1, 19, w(X), order(Reach::Gpu), Some(2));
        r.load(0, Some(read), 13, w(X), order(Reach::Gpu), Some(0));
        let pairs = r.finish().conflicts;
        pairs.into_iter().filter(|p| p.key.first.0 != 14).collect()
    }

    /// Regression: a deferred read performed after the overwrite it precedes was recorded in
    /// program order but never checked in that order, so the volatile slot recycler's read and
    /// overwrite were unordered even with the release after the read and the acquire after the
    /// spin, and the search could not see that dropping the acquire leaves them unordered.
    #[test]
    fn a_deferred_read_ordered_before_the_overwrite_by_a_release_and_an_acquire_is_no_race() {
        assert!(deferred_slot_read(true, true).is_empty());
        for (release, acquire) in [(true, false), (false, true)] {
            let pairs = deferred_slot_read(release, acquire);
            assert_eq!(pairs.len(), 1, "release {release}, acquire {acquire}");
            let key = pairs[0].key;
            assert_eq!((key.first.0, key.second.0), (13, 19));
            assert!(key.facts.communicated && key.facts.morally_strong);
            assert_eq!(key.facts.first_release.is_some(), release);
            assert_eq!(key.facts.second_acquire.is_some(), acquire);
        }
    }

    /// Regression (QA: a ring buffer hardened with four fences still recorded a data race
    /// between a slot's overwrite and its read): the consumer's slot read, deferred, was
    /// performed after its release and the producer's acquire and overwrite; the producer
    /// then read the consumer's flag write again, and only that later read was remembered,
    /// so the pair was taken the other way.
    #[test]
    fn a_write_heard_again_still_orders_a_deferred_read_before_the_hearers_later_write() {
        let mut r = two_ctas();
        let slot_read = r.reserve(1);
        r.fence(1, Reach::Gpu, false, 31);
        r.store(1, 32, w(FLAG), order(Reach::Gpu), Some(3));
        r.load(0, None, 15, w(FLAG), order(Reach::Gpu), Some(3));
        r.fence(0, Reach::Gpu, false, 18);
        r.store(0, 19, w(X), order(Reach::Weak), Some(4));
        let again = r.reserve(0);
        r.load(0, Some(again), 15, w(FLAG), order(Reach::Gpu), Some(3));
        r.load(1, Some(slot_read), 30, w(X), order(Reach::Weak), Some(0));
        let pairs = r.finish().conflicts;
        assert!(pairs.iter().all(|p| p.key.first.0 != 19), "{pairs:?}");
    }

    /// A queue's slot handed back without a release: thread 1 issues its slot read (line 30,
    /// deferred) and hands the slot back (`FLAG`, line 32); thread 0 hears it, fences and
    /// refills the slot (line 19, message 4). Returns the slot read's number.
    fn slot_refilled_before_its_read(r: &mut RaceTracker) -> u32 {
        let slot_read = r.reserve(1);
        r.store(1, 32, w(FLAG), order(Reach::Gpu), Some(3));
        r.load(0, None, 15, w(FLAG), order(Reach::Gpu), Some(3));
        r.fence(0, Reach::Gpu, false, 18);
        r.store(0, 19, w(X), order(Reach::Gpu), Some(4));
        slot_read
    }

    /// The one pair at the slot (lines 19 and 30), after `r`'s slot read took the refill.
    fn slot_pair(r: RaceTracker) -> PairKey {
        let pairs = r.finish().conflicts;
        let on_slot = |line: u32| line == 19 || line == 30;
        let slot: Vec<_> = (pairs.iter())
            .filter(|p| on_slot(p.key.first.0) && on_slot(p.key.second.0))
            .collect();
        assert_eq!(slot.len(), 1, "{pairs:?}");
        slot[0].key
    }

    /// Regression (QA: a bounded MPMC queue with the consumer's release missing failed 3% of
    /// its runs by load buffering, its deferred slot read taking the producer's next-lap write,
    /// and recorded no race): the producer heard the consumer's slot release, overwrote the
    /// slot, then heard a newer write of the consumer before the deferred read was performed;
    /// only that newest communication was kept, which came after the overwrite, so the pair
    /// was taken as the overwrite observed by the read (communication, no race).
    #[test]
    fn a_deferred_read_of_the_overwrite_it_precedes_is_a_pair_after_newer_communication() {
        let mut r = two_ctas();
        let slot_read = slot_refilled_before_its_read(&mut r);
        r.store(1, 32, w(FLAG), order(Reach::Gpu), Some(5));
        r.load(0, None, 15, w(FLAG), order(Reach::Gpu), Some(5));
        r.load(1, Some(slot_read), 30, w(X), order(Reach::Gpu), Some(4));
        let key = slot_pair(r);
        assert_eq!((key.first.0, key.second.0), (30, 19));
        assert!(key.facts.communicated && key.facts.morally_strong);
        assert!(key.facts.first_release.is_none() && key.facts.second_acquire.is_some());
    }

    /// Regression (QA: the same MPMC queue): the consumer's deferred slot read was performed
    /// after its thread acquired the producer's next-lap overwrite through a later flag, and
    /// was taken as ordered after the overwrite by the thread's clock then, though that
    /// acquire comes after the read in program order.
    #[test]
    fn a_deferred_read_is_ordered_by_its_threads_clock_when_issued() {
        let mut r = two_ctas();
        let slot_read = slot_refilled_before_its_read(&mut r);
        r.fence(0, Reach::Gpu, false, 20);
        r.store(0, 21, w(FLAG2), order(Reach::Gpu), Some(6));
        r.load(1, None, 40, w(FLAG2), order(Reach::Gpu), Some(6));
        r.fence(1, Reach::Gpu, false, 41);
        r.load(1, Some(slot_read), 30, w(X), order(Reach::Gpu), Some(4));
        let key = slot_pair(r);
        assert_eq!((key.first.0, key.second.0), (30, 19));
        assert!(key.facts.communicated && key.facts.first_release.is_none());
    }

    /// `size` bytes at `addr`.
    fn bytes(addr: u64, size: u64) -> Bytes {
        Bytes { addr, size }
    }

    /// Regression: shadows were keyed by address alone, so a byte written inside a word and a
    /// read of the whole word (or the reverse) were never compared, and the pair went unseen.
    #[test]
    fn a_byte_write_and_a_read_of_the_word_holding_it_are_a_pair() {
        for (write, read) in [(bytes(X + 1, 1), w(X)), (w(X), bytes(X + 2, 2))] {
            let mut r = two_ctas();
            r.store(0, 10, write, order(Reach::Weak), Some(1));
            r.load(1, None, 21, read, order(Reach::Weak), None);
            let pairs = r.finish().conflicts;
            assert_eq!(pairs.len(), 1, "write {write:?}, read {read:?}");
            assert_eq!((pairs[0].key.first.0, pairs[0].key.second.0), (10, 21));
        }
    }

    #[test]
    fn an_eight_byte_write_and_a_byte_write_inside_it_are_a_pair() {
        let mut r = two_ctas();
        r.store(0, 10, bytes(X, 8), order(Reach::Weak), Some(1));
        r.store(1, 11, bytes(X + 7, 1), order(Reach::Weak), Some(2));
        assert_eq!(r.finish().conflicts.len(), 1);
    }

    #[test]
    fn writes_to_different_bytes_of_one_word_are_no_pair() {
        let mut r = two_ctas();
        r.store(0, 10, bytes(X, 1), order(Reach::Weak), Some(1));
        r.store(1, 11, bytes(X + 1, 1), order(Reach::Weak), Some(2));
        r.load(1, None, 21, bytes(X + 2, 2), order(Reach::Weak), None);
        assert!(r.finish().conflicts.is_empty());
    }

    /// A release through a `bool` flag at byte 2 of a word, acquired by a read of the whole
    /// word: the acquire observes the byte's write, so the payload is ordered.
    #[test]
    fn a_word_acquire_over_a_byte_release_orders_the_payload() {
        let mut r = two_ctas();
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.store(0, 11, bytes(FLAG + 2, 1), releasing(Reach::Gpu), Some(2));
        r.load(1, None, 20, w(FLAG), acquiring(Reach::Gpu), None);
        r.load(1, None, 21, w(X), order(Reach::Weak), Some(1));
        let pairs = r.finish().conflicts;
        assert!(payload_pairs(&pairs).is_empty());
        assert_eq!(pairs.len(), 1, "the flag pair itself: {pairs:?}");
        assert!(pairs[0].key.facts.morally_strong && pairs[0].key.facts.observed);
    }

    #[test]
    fn stressing_threads_are_not_recorded() {
        let mut r = RaceTracker::new(1, 1);
        r.store(0, 10, w(X), order(Reach::Weak), Some(1));
        r.store(1, 11, w(X), order(Reach::Weak), Some(2));
        assert!(r.finish().conflicts.is_empty());
    }
}
