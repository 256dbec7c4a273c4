//! `check --races`: the conflicting accesses the simulator's PTX model recorded in each run,
//! classified, journaled beside the check, and summed over its runs.
//!
//! The simulator records facts ([`crate::backend::sim::Conflict`]): two accesses of different
//! threads to one location, at least one a write, that causality order left unordered, with
//! their strengths and whether the threads communicated between them. This module decides
//! what each is:
//!
//! - a **data race** when the two are not morally strong (one is weak, or a scope leaves the
//!   other thread out): undefined behaviour under PTX;
//! - **unsynchronised, a fence can order it** when both are morally strong and the threads
//!   communicated between them through morally strong accesses: a release pattern on the
//!   first thread's side and an acquire pattern on the second's, of a scope with both threads,
//!   would order them (the report says which side lacks which, or which scope is too small);
//! - **unsynchronised, no fence can order it** when both are morally strong and nothing passed
//!   between the threads from one access to the other: only a change of the program does.
//!
//! Not reported: the synchronisation itself (morally strong pairs on a location whose reads
//! carry communication: a flag spun on, a lock word; a stale read its thread acts on is not
//! that, see [`Conflict::synchronising_location`]) and pairs of morally strong
//! read-modify-writes.
//!
//! Each run's classified races are appended to `<journal>.races.jsonl` before the run's row
//! goes into the journal, so a resumed check sums the runs its journal has, and nothing else:
//! the summary is always computed from that file.

use crate::backend::sim::{
    Conflict, RaceAccess, RaceAccessKind, RaceLog, RaceSite, SourceLine, Strength,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// Which races `check --races` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RaceMode {
    /// All three classes.
    All,
    /// PTX data races only.
    Strict,
}

impl std::str::FromStr for RaceMode {
    type Err = String;

    fn from_str(s: &str) -> Result<RaceMode, String> {
        match s {
            "" | "all" => Ok(RaceMode::All),
            "strict" => Ok(RaceMode::Strict),
            other => Err(format!(
                "'{other}' is not a race mode (`--races` or `--races strict`)"
            )),
        }
    }
}

/// What a race is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RaceClass {
    /// At least one access not morally strong: undefined under PTX.
    DataRace,
    /// Both morally strong, communication between them: fences of the right kind and scope order it.
    FenceCanOrder,
    /// Both morally strong, no communication between them: no fence orders it.
    NoFenceCanOrder,
}

impl RaceClass {
    pub fn describe(self) -> &'static str {
        match self {
            RaceClass::DataRace => "data race (undefined under PTX)",
            RaceClass::FenceCanOrder => "unsynchronised, a fence can order it",
            RaceClass::NoFenceCanOrder => "unsynchronised, no fence can order it",
        }
    }
}

/// The class of a recorded conflict, or `None` for what is not reported.
pub fn classify(c: &Conflict) -> Option<RaceClass> {
    if !c.facts.morally_strong {
        return Some(RaceClass::DataRace);
    }
    let rmw = |k| k == RaceAccessKind::Rmw;
    // A read that observed the write with nothing else passing between the threads is the
    // communication itself.
    let communication = c.facts.observed && !c.facts.communicated;
    // Two RMWs are atomic with each other: their pair is the synchronisation itself, unless
    // the second read a value older than the first's write although its thread had heard
    // from the first's after it, and went on from that stale value.
    let stale = c.facts.communicated && !c.facts.observed;
    let atomic_pair = rmw(c.first.kind) && rmw(c.second.kind) && !stale;
    if atomic_pair || c.synchronising_location || communication {
        return None;
    }
    Some(if c.facts.communicated {
        RaceClass::FenceCanOrder
    } else {
        RaceClass::NoFenceCanOrder
    })
}

/// Whether no fence orders conflict `c` as the code stands: a morally strong pair with nothing
/// passed between its threads; a pair of strong accesses whose scope leaves one thread out (no
/// fence widens a scope); or a data race with nothing passed between its threads, not even
/// through a strong access of too narrow a scope (a plain flag spun on, a payload behind one:
/// the accesses must become strong first).
pub fn fences_cannot_order(c: &Conflict) -> bool {
    let strong = |a: &RaceAccess| a.strength != Strength::Weak;
    match classify(c) {
        Some(RaceClass::NoFenceCanOrder) => true,
        Some(RaceClass::DataRace) => {
            (strong(&c.first) && strong(&c.second))
                || (!c.facts.communicated && c.out_of_scope.is_none())
        }
        _ => false,
    }
}

/// Where an access is, as a report names it: a [`RaceSite`] with the access's kind and strength,
/// flat so that the races journal and `--json` keep their keys in this order (file and line
/// first).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RaceEnd {
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The access's own line, for code inlined at `line` from another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner: Option<SourceLine>,
    pub function: String,
    pub ptx_line: u32,
    pub ptx: String,
    pub kind: RaceAccessKind,
    pub strength: Strength,
}

/// What races are merged by at one end: the source line (any of its PTX instructions) and the
/// inlined line inside it, or the PTX line without one; the kind and strength of the access.
type EndKey = (
    Option<String>,
    Option<u32>,
    Option<SourceLine>,
    u32,
    RaceAccessKind,
    Strength,
);

impl RaceEnd {
    fn key(&self) -> EndKey {
        let ptx_line = if self.line.is_some() {
            0
        } else {
            self.ptx_line
        };
        (
            self.file.clone(),
            self.line,
            self.inner.clone(),
            ptx_line,
            self.kind,
            self.strength,
        )
    }

    fn of(site: &RaceSite, kind: RaceAccessKind, strength: Strength) -> RaceEnd {
        RaceEnd {
            file: site.file.clone(),
            line: site.line,
            inner: site.inner.clone(),
            function: site.function.clone(),
            ptx_line: site.ptx_line,
            ptx: site.ptx.clone(),
            kind,
            strength,
        }
    }

    /// `file:line` (the file's name only), or the PTX line.
    pub fn place(&self) -> String {
        place_of(self.file.as_deref(), self.line, self.ptx_line)
    }

    /// Its file and line.
    fn position(&self) -> Position<'_> {
        (self.file.as_deref(), self.line)
    }

    /// Its place and, for code inlined there, its own line (see [`apart`]).
    fn spot(&self) -> Spot<'_> {
        (self.place(), self.inner.as_ref())
    }

    fn what(&self) -> String {
        let strength = strength_label(self.strength, &self.ptx);
        let kind = match self.kind {
            RaceAccessKind::Read => "read",
            RaceAccessKind::Write => "write",
            RaceAccessKind::Rmw => "atomic",
        };
        format!("{strength} {kind}")
    }
}

/// How strong an access is, in the words of its instruction: `volatile` is relaxed at system
/// scope in PTX, and a strong access's scope is the one it names (`.sys`, `.cluster`), though
/// the simulator folds those into `.gpu`, which on one GPU holds the same threads.
fn strength_label(strength: Strength, ptx: &str) -> &'static str {
    let op = ptx.split_whitespace().next().unwrap_or_default();
    let has = |q: &str| op.split('.').any(|w| w == q);
    match strength {
        Strength::Weak => "weak",
        Strength::Cta => "strong .cta",
        Strength::Gpu if has("volatile") => "volatile (relaxed .sys)",
        Strength::Gpu if has("sys") => "strong .sys",
        Strength::Gpu if has("cluster") => "strong .cluster",
        Strength::Gpu => "strong .gpu",
    }
}

/// `file:line` of a recorded access (the file's name only), or its PTX line.
pub fn site_place(site: &RaceSite) -> String {
    place_of(site.file.as_deref(), site.line, site.ptx_line)
}

/// A place as a report names it, with the line of the code inlined there (if any).
type Spot<'a> = (String, Option<&'a SourceLine>);

/// A recorded site's [`Spot`].
fn site_spot(site: &RaceSite) -> Spot<'_> {
    (site_place(site), site.inner.as_ref())
}

/// Two places that advice names as "after `a` and before `b`": each followed by the line of
/// the code inlined there when the two share a line (a helper whose barrier and flag are
/// inlined at one call line), so that the advice still says where the fence goes.
fn apart(a: Spot, b: Spot) -> (String, String) {
    let shown = |(place, inner): Spot| match inner {
        Some(inner) => format!(
            "{place} ({})",
            place_of(Some(&inner.file), Some(inner.line), 0)
        ),
        None => place,
    };
    match a.0 == b.0 {
        true => (shown(a), shown(b)),
        false => (a.0, b.0),
    }
}

/// A source position: file and line, as far as known.
type Position<'a> = (Option<&'a str>, Option<u32>);

fn position(site: &RaceSite) -> Position<'_> {
    (site.file.as_deref(), site.line)
}

/// What advice adds when the fence's `before` place stands above its `after` place in one
/// file: in time it comes after, on a later round of the loop that holds both (a consumer
/// that reads the next node at :24 after the head's CAS at :25 took the last one). So the
/// fence goes inside the loop above the `before` place, where it runs on every round (a
/// `continue` may skip the end of the loop body).
fn later_round(after: Position, before: Position) -> String {
    match (after, before) {
        ((Some(a), Some(x)), (Some(b), Some(y))) if a == b && y < x => {
            let (after, before) = (place_of(Some(a), Some(x), 0), place_of(Some(b), Some(y), 0));
            format!(
                " ({before} stands above {after} and runs after it on the loop's next round: \
                 the fence goes inside the loop, before {before}, where it runs on every round)"
            )
        }
        _ => String::new(),
    }
}

fn place_of(file: Option<&str>, line: Option<u32>, ptx_line: u32) -> String {
    match (file, line) {
        (Some(file), Some(line)) => {
            let name = Path::new(file)
                .file_name()
                .map_or(file.into(), |n| n.to_string_lossy());
            format!("{name}:{line}")
        }
        _ => format!("PTX line {ptx_line}"),
    }
}

/// One race of one run, as the races journal keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRace {
    pub class: RaceClass,
    pub first: RaceEnd,
    pub second: RaceEnd,
    pub same_cta: bool,
    /// The CTAs of one occurrence, as launched (with randomised block ids, not the kernel's
    /// `blockIdx`).
    pub ctas: (u32, u32),
    /// What would order the two, in words.
    pub missing: String,
    pub occurrences: u64,
}

impl RunRace {
    /// Both accesses strong, yet a data race: a scope of one leaves the other thread out
    /// (a `.cta` access between CTAs). No fence orders it; a wider scope does.
    pub fn scope_too_narrow(&self) -> bool {
        self.class == RaceClass::DataRace
            && self.first.strength != Strength::Weak
            && self.second.strength != Strength::Weak
    }
}

/// One run's line of the races journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRaces {
    pub run: u64,
    pub races: Vec<RunRace>,
}

/// A run's recorded conflicts, classified and merged by what the report shows.
pub fn run_races(run: u64, log: &RaceLog) -> RunRaces {
    type Seen = (RaceEnd, RaceEnd, (u32, u32), u64);
    let mut merged: BTreeMap<(RaceClass, EndKey, EndKey, bool, String), Seen> = BTreeMap::new();
    for c in &log.conflicts {
        let Some(class) = classify(c) else { continue };
        let mut first = RaceEnd::of(&c.first.site, c.first.kind, c.first.strength);
        let mut second = RaceEnd::of(&c.second.site, c.second.kind, c.second.strength);
        let missing = missing(c, class, &first, &second);
        let mut ctas = c.ctas;
        // A race that fences can order has a direction (who releases, who acquires): that
        // is every fence-can-order pair and every data race the threads communicated across.
        // Merging such a pair with its reverse lost the reverse's advice (a ring buffer's slot
        // read before its reuse kept only the write-then-read fences).
        let directed = class == RaceClass::FenceCanOrder
            || (class == RaceClass::DataRace && c.facts.communicated);
        if !directed && second.key() < first.key() {
            std::mem::swap(&mut first, &mut second);
            ctas = (ctas.1, ctas.0);
        }
        let key = (class, first.key(), second.key(), c.facts.same_cta, missing);
        merged.entry(key).or_insert((first, second, ctas, 0)).3 += c.occurrences;
    }
    RunRaces {
        run,
        races: merged
            .into_iter()
            .map(
                |((class, _, _, same_cta, missing), (first, second, ctas, occurrences))| RunRace {
                    class,
                    first,
                    second,
                    same_cta,
                    ctas,
                    missing,
                    occurrences,
                },
            )
            .collect(),
    }
}

/// What would order a conflict of `class`, in words (`first`, `second` in the order they
/// happened).
/// The places of the write and the read of a pair of one plain write and one plain read (in
/// either order), the two sides of a store-buffering shape when each thread does both.
fn write_and_read(first: &RaceEnd, second: &RaceEnd) -> Option<(String, String)> {
    match (first.kind, second.kind) {
        (RaceAccessKind::Write, RaceAccessKind::Read) => Some((first.place(), second.place())),
        (RaceAccessKind::Read, RaceAccessKind::Write) => Some((second.place(), first.place())),
        _ => None,
    }
}

/// The scope of a release or an acquire whose threads are of one CTA (`in_cta`) or not.
fn scope_of(in_cta: bool) -> &'static str {
    match in_cta {
        true => "cta",
        false => "gpu",
    }
}

fn missing(c: &Conflict, class: RaceClass, first: &RaceEnd, second: &RaceEnd) -> String {
    // A release and an acquire order the pair when their scope holds the two threads that
    // communicate: the pair's own, unless a third thread relayed the communication.
    let scope = scope_of(c.facts.communication_in_cta);
    match class {
        RaceClass::DataRace => data_race_missing(c, scope, first, second),
        RaceClass::FenceCanOrder => fence_missing(c, scope, first, second),
        RaceClass::NoFenceCanOrder => {
            let rmw = |e: &RaceEnd| e.kind == RaceAccessKind::Rmw;
            let handshake = (rmw(first) == rmw(second))
                .then(|| write_and_read(first, second))
                .flatten()
                .map(|(write, read)| handshake_advice(&write, &read, scope));
            match (c.facts.communicated_before, handshake) {
                (true, handshake) => {
                    let lock = format!(
                        "the threads communicate only before {}, so no fence orders this pair; \
                         where a lock guards this code, move it inside the critical section \
                         (before the release or unlock), or take the lock around it",
                        first.place()
                    );
                    match handshake {
                        Some(handshake) => format!("{lock}. {handshake}"),
                        None => lock,
                    }
                }
                _ if rmw(first) != rmw(second) => atomic_and_plain_strong(first, second),
                (false, Some(handshake)) => format!(
                    "nothing passes between the two threads from one access to the other, so no \
                     fence orders this pair. {handshake}; otherwise take the same lock around \
                     both, or publish one to the other through a flag{}",
                    barrier_option(c)
                ),
                (false, None) => format!(
                    "nothing passes between the two threads from one access to the other: take \
                     the same lock around both, or publish one to the other through a flag{}",
                    barrier_option(c)
                ),
            }
        }
    }
}

/// The advice for a strong write and a strong read of two threads that may be the sides of a
/// flag handshake, where `fence.sc` makes at least one thread see the other's write.
fn handshake_advice(write: &str, read: &str, scope: &str) -> String {
    let cuda = match scope {
        "cta" => "__threadfence_block()",
        _ => "__threadfence()",
    };
    format!(
        "If {write} and {read} are sides of a flag handshake (each thread writes its own flag, \
         then reads the other's, as in Dekker's or Peterson's lock), a fence.sc.{scope} \
         (`{cuda}`) between the write and the read in each thread makes at least one thread see \
         the other's write (this pair itself stays unordered, as the handshake allows)"
    )
}

/// What to do about an atomic and a plain strong access of another thread with nothing passed
/// between them. A write can land between the atomic's read and its write in no order PTX
/// allows, but it can make the atomic's update lost or stale (a reset beside an increment); a
/// read sees the atomic's write or an older value, as coherence allows, which is harmless
/// where either will do (a counter or a stack's top polled).
fn atomic_and_plain_strong(first: &RaceEnd, second: &RaceEnd) -> String {
    let plain = match first.kind {
        RaceAccessKind::Rmw => second,
        _ => first,
    };
    match plain.kind {
        RaceAccessKind::Read => format!(
            "nothing passes between the two threads from one access to the other, so no fence \
             orders this pair; both are strong (no data race), so {} reads the atomic's value \
             or an older one. That is harmless where either will do (a counter or a stack's top \
             polled); if it must see the atomic's write, signal it after the atomic through a \
             flag with a release and an acquire, or take the same lock around both",
            plain.place()
        ),
        _ => format!(
            "an atomic races the plain strong write {}, which can overwrite the atomic's update \
             or be overwritten by it in either order: make the write atomic too (atomicExch), \
             or take the same lock around both",
            plain.place()
        ),
    }
}

/// What would order a data race: which accesses are weak or of too narrow a scope, and what
/// the threads' communication between the two (if any) lacks.
fn data_race_missing(c: &Conflict, scope: &str, first: &RaceEnd, second: &RaceEnd) -> String {
    // An undirected pair in the order of its places, so that it and its reverse read alike.
    let mut ends = [first, second];
    if !c.facts.communicated {
        ends.sort_by_key(|e| e.key());
    }
    let places = |keep: &dyn Fn(&RaceEnd) -> bool| -> Vec<String> {
        ends.iter().filter(|e| keep(e)).map(|e| e.place()).collect()
    };
    let weak = places(&|e| e.strength == Strength::Weak);
    let narrow = places(&|e| e.strength == Strength::Cta && !c.facts.same_cta);
    let mut parts = Vec::new();
    match weak.len() {
        0 => {}
        1 => parts.push(format!("{} is a weak (plain) access", weak[0])),
        _ => parts.push(format!("{} are weak (plain) accesses", weak.join(" and "))),
    }
    if !narrow.is_empty() {
        parts.push(format!(
            "the .cta scope of {} leaves out the other CTA",
            narrow.join(" and ")
        ));
    }
    let parts = parts.join("; ");
    if c.facts.communicated {
        // Weak data published through a strong flag: causality would order the two.
        let through = match (&c.relay, &c.forward) {
            (Some(_), _) => "through a third thread's strong write",
            (_, Some(_)) => {
                "through further threads that each read a strong write and make another"
            }
            _ => "through strong accesses",
        };
        let scopes = match c.forward.is_some() {
            true => "at each link, of a scope with that link's two threads,".to_string(),
            false => format!("of {scope} scope"),
        };
        return format!(
            "{parts}, and the threads communicate between the two {through}, so a release and \
             an acquire {scopes} order them: {}",
            fence_missing(c, scope, first, second)
        );
    }
    if let Some((write, read)) = &c.out_of_scope {
        let (write, read) = (site_place(write), site_place(read));
        return format!(
            "{parts}. The threads communicate between the two only through {write} and {read}, \
             whose .cta scope leaves out the other CTA: no fence widens it. Give both .gpu scope \
             ({WIDER_IN_CUDA}); then a release at or before {write} and an acquire at or after \
             {read}, of gpu scope, order this pair"
        );
    }
    if weak.is_empty() {
        // Both strong: only their scope keeps them from being morally strong.
        return format!(
            "{parts}: no fence makes them morally strong; give both .gpu scope ({WIDER_IN_CUDA})"
        );
    }
    format!(
        "{parts}, and nothing passes between the two threads from one access to the other: make \
         both strong at a scope with both threads (a flag one thread waits on: `volatile` or an \
         atomic), or publish one to the other through a strong flag with a release and an \
         acquire of {scope} scope{}",
        barrier_option(c)
    )
}

/// For a pair of one CTA with nothing passed between its threads, the barrier that orders it
/// (a barrier synchronises the threads that reach it, so it orders what each did before it
/// with what the others do after it); nothing for threads of two CTAs.
fn barrier_option(c: &Conflict) -> &'static str {
    match c.facts.same_cta {
        true => {
            "; or, as both threads are of one CTA, a barrier that both reach between the two \
             accesses: `__syncthreads()`, or `__syncwarp()` where they are lanes of one warp"
        }
        false => "",
    }
}

/// How CUDA code widens a `.cta` access to `.gpu`.
const WIDER_IN_CUDA: &str =
    "in CUDA, cuda::thread_scope_device rather than thread_scope_block, atomicAdd rather than \
     atomicAdd_block";

fn fence_missing(c: &Conflict, scope: &str, first: &RaceEnd, second: &RaceEnd) -> String {
    let mut parts = Vec::new();
    match (&c.relay, &c.via) {
        _ if c.forward.is_some() => parts.extend(forwarded_missing(c, scope, first)),
        (Some(relay), Some((write, _))) => parts.extend(relayed_release_missing(
            c,
            first,
            apart(site_spot(relay), site_spot(write)),
        )),
        _ => parts.extend(release_missing(c, first)),
    }
    match (&c.passed, &c.via) {
        (Some(passed), Some((_, read))) => parts.extend(passed_acquire_missing(
            c,
            second,
            apart(site_spot(read), site_spot(passed)),
        )),
        _ => parts.extend(acquire_missing(c, second)),
    }
    if parts.is_empty() {
        parts.push(format!(
            "a release and an acquire of {scope} scope around the communication between them"
        ));
    }
    parts.join("; ")
}

/// What a thread's release or acquire lacks to order communication between two threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lack {
    /// It has none.
    Missing,
    /// It has one of `.cta` scope, and the threads are in different CTAs.
    TooNarrow,
}

/// What a release or acquire of strength `have` (`None`: none) lacks to order communication
/// inside one CTA (`in_cta`) or between CTAs; `None` when it orders it.
pub fn lack(have: Option<Strength>, in_cta: bool) -> Option<Lack> {
    match have {
        None => Some(Lack::Missing),
        Some(Strength::Cta) if !in_cta => Some(Lack::TooNarrow),
        Some(_) => None,
    }
}

/// What the first thread's side lacks when it wrote what the second thread read.
fn release_missing(c: &Conflict, first: &RaceEnd) -> Option<String> {
    let scope = scope_of(c.release_in_cta());
    let (after, write, round) = match &c.via {
        Some((write, _)) => {
            let (after, shown) = apart(first.spot(), site_spot(write));
            let round = later_round(first.position(), position(write));
            (
                after,
                format!("{shown}, the write the other thread reads"),
                round,
            )
        }
        None => (
            first.place(),
            "the write the other thread reads".to_string(),
            String::new(),
        ),
    };
    Some(match lack(c.facts.first_release, c.release_in_cta())? {
        Lack::Missing => format!(
            "no release pattern on the signalling side: a fence.acq_rel.{scope} after {after}, \
             before {write}{round}"
        ),
        Lack::TooNarrow => format!(
            "the release after {} is .cta: it does not reach the other CTA (needs .gpu)",
            first.place()
        ),
    })
}

/// What the relaying thread lacks when `first` reached it at `relay` (a barrier, an acquire)
/// before it wrote `write`, which the second thread read. A fence beside `first` in its own
/// thread forms no release pattern: the first thread writes nothing the second reads.
fn relayed_release_missing(
    c: &Conflict,
    first: &RaceEnd,
    (relay, write): (String, String),
) -> Option<String> {
    let scope = scope_of(c.release_in_cta());
    Some(match lack(c.facts.first_release, c.release_in_cta())? {
        Lack::Missing => format!(
            "no release pattern in the thread that passes {} on: it reaches that thread at \
             {relay}, and that thread writes {write}, which the other thread reads; a \
             fence.acq_rel.{scope} in that thread after {relay} and before {write} (a fence \
             beside {} forms no release pattern: its thread writes nothing the other reads)",
            first.place(),
            first.place()
        ),
        Lack::TooNarrow => format!(
            "the release between {relay} and {write} is .cta: it does not reach the other CTA \
             (needs .gpu)"
        ),
    })
}

/// What a forwarded pair lacks before the second thread's read: a release after `first`
/// before the write the first forwarder reads (unless the access reached that thread
/// causally), of a scope with that forwarder, and in each forwarding thread an acquire after
/// its read and a release before its write (one `fence.acq_rel` between the two, of a scope
/// with every thread of the chain; the first thread that lacks it is named). A forwarder
/// whose read and write are one read-modify-write needs none: PTX's observation order runs
/// through an atomic operation, and no fence fits inside one.
fn forwarded_missing(c: &Conflict, scope: &str, first: &RaceEnd) -> Vec<String> {
    let Some(forward) = &c.forward else {
        return Vec::new();
    };
    let one_rmw = forward.read.function == forward.passes.function
        && forward.read.ptx_line == forward.passes.ptx_line;
    let (read, passes) = apart(site_spot(&forward.read), site_spot(&forward.passes));
    let lacks = |s: Option<Strength>| lack(s, c.facts.communication_in_cta);
    let mut parts = Vec::new();
    let theirs = forward.write.as_ref().map(site_place);
    let release = scope_of(c.release_in_cta());
    match (&theirs, lack(c.facts.first_release, c.release_in_cta())) {
        (Some(theirs), Some(Lack::Missing)) => parts.push(format!(
            "no release pattern on the signalling side: a fence.acq_rel.{release} after {}, \
             before {theirs}, which a further thread reads and passes on",
            first.place()
        )),
        (Some(_), Some(Lack::TooNarrow)) => parts.push(format!(
            "the release after {} is .cta: it does not reach the other CTA (needs .gpu)",
            first.place()
        )),
        _ => {}
    }
    // A link the access reached causally starts at the barrier that brought it.
    let reached = match forward.read.ptx.starts_with("bar") {
        true => format!("it reaches that thread at the barrier {read}"),
        false => format!("that thread reads at {read}"),
    };
    match lacks(forward.fenced).filter(|_| !one_rmw) {
        Some(Lack::Missing) => parts.push(format!(
            "no acquire and release in a thread that passes it on: {reached}, then writes \
             {passes}, which the next thread reads; a fence.acq_rel.{scope} in that thread \
             after {read} and before {passes}"
        )),
        Some(Lack::TooNarrow) => parts.push(format!(
            "the fences of a thread that passes it on, between {read} and {passes}, are .cta: \
             they do not reach the other CTA (needs .gpu)"
        )),
        None => {}
    }
    parts
}

/// What the second thread's side lacks when it read the other thread's write itself.
fn acquire_missing(c: &Conflict, second: &RaceEnd) -> Option<String> {
    // Code that polls in several places names another read in another occurrence: the
    // report gives the most common one, and the others under "in other occurrences".
    let scope = scope_of(c.acquire_in_cta());
    let (read, before, round) = match &c.via {
        Some((_, read)) => {
            let (shown, before) = apart(site_spot(read), second.spot());
            (
                format!("{shown}, the read that saw the other thread's write"),
                before,
                later_round(position(read), second.position()),
            )
        }
        None => (
            "the read that saw the other thread's write".to_string(),
            second.place(),
            String::new(),
        ),
    };
    Some(match lack(c.facts.second_acquire, c.acquire_in_cta())? {
        Lack::Missing => format!(
            "no acquire pattern on the waiting side: a fence.acq_rel.{scope} after {read}, \
             before {before}{round}"
        ),
        Lack::TooNarrow => format!(
            "the acquire before {} is .cta: it does not reach the other CTA (needs .gpu)",
            second.place()
        ),
    })
}

/// What the thread that read the communication lacks when it passed it on to `second` at a
/// barrier (`passed`) after its read (`read`). A fence beside `second` in its own thread forms
/// no acquire pattern: that thread read nothing the first thread's side wrote.
fn passed_acquire_missing(
    c: &Conflict,
    second: &RaceEnd,
    (read, passed): (String, String),
) -> Option<String> {
    let scope = scope_of(c.acquire_in_cta());
    Some(match lack(c.facts.second_acquire, c.acquire_in_cta())? {
        Lack::Missing => format!(
            "no acquire pattern in the thread that passes it on to {}: that thread reads the \
             other thread's write at {read} and passes it on at the barrier {passed}; a \
             fence.acq_rel.{scope} in that thread after {read} and before {passed} (a fence \
             beside {} forms no acquire pattern: its thread reads nothing the other wrote)",
            second.place(),
            second.place()
        ),
        Lack::TooNarrow => format!(
            "the acquire between {read} and {passed} is .cta: it does not reach the other CTA \
             (needs .gpu)"
        ),
    })
}

/// The races journal of the check journaled at `journal`.
pub fn races_path(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(".races.jsonl");
    PathBuf::from(name)
}

/// Appends one run's races to the races journal (one flushed line).
pub fn append_run(journal: &Path, run: &RunRaces) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(races_path(journal))?;
    let mut line = serde_json::to_string(run).map_err(std::io::Error::other)?;
    line.push('\n');
    file.write_all(line.as_bytes())?;
    file.flush()
}

/// Every run's races in the races journal, the last line per run kept; a line that does not
/// read (a kill cut it short) is skipped.
pub fn read_runs(journal: &Path) -> std::io::Result<BTreeMap<u64, RunRaces>> {
    let mut runs = BTreeMap::new();
    let file = match std::fs::File::open(races_path(journal)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(runs),
        Err(e) => return Err(e),
    };
    for line in std::io::BufReader::new(file).lines() {
        if let Ok(run) = serde_json::from_str::<RunRaces>(&line?) {
            runs.insert(run.run, run);
        }
    }
    Ok(runs)
}

/// A race summed over a check's runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RaceReport {
    pub class: RaceClass,
    pub first: ReportedEnd,
    pub second: ReportedEnd,
    pub same_cta: bool,
    /// The blocks of the first run's first occurrence.
    pub ctas: (u32, u32),
    /// Runs it showed in, and occurrences in all.
    pub runs: u64,
    pub occurrences: u64,
    /// What would order the pair, as most runs said it.
    pub missing: String,
    /// What other runs said would order other occurrences of it (different threads, another
    /// way of communicating), most runs first: each names fences the first may not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_elsewhere: Vec<String>,
}

/// One end of a reported race, with its source text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportedEnd {
    #[serde(flatten)]
    pub end: RaceEnd,
    pub source: Option<String>,
    /// The text of `end.inner`'s line, for an inlined access.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner_source: Option<String>,
}

/// The races of the runs `runs` (run numbers) of the check journaled at `journal`, in
/// `mode`, most frequent first.
pub fn summarise(
    journal: &Path,
    runs: impl IntoIterator<Item = u64>,
    mode: RaceMode,
) -> std::io::Result<Vec<RaceReport>> {
    let recorded = read_runs(journal)?;
    type Seen = (
        RaceEnd,
        RaceEnd,
        (u32, u32),
        u64,
        u64,
        BTreeMap<String, u64>,
    );
    let mut merged: BTreeMap<(RaceClass, EndKey, EndKey, bool), Seen> = BTreeMap::new();
    for run in runs {
        let Some(r) = recorded.get(&run) else {
            continue;
        };
        let mut counted = std::collections::BTreeSet::new();
        for race in &r.races {
            if mode == RaceMode::Strict && race.class != RaceClass::DataRace {
                continue;
            }
            let key = key_of(race);
            let e = merged.entry(key.clone()).or_insert((
                race.first.clone(),
                race.second.clone(),
                race.ctas,
                0,
                0,
                BTreeMap::new(),
            ));
            e.4 += race.occurrences;
            *e.5.entry(race.missing.clone()).or_insert(0) += 1;
            if counted.insert(key) {
                e.3 += 1;
            }
        }
    }
    let mut sources = SourceCache::default();
    let mut reports: Vec<RaceReport> = merged
        .into_iter()
        .map(
            |((class, _, _, same_cta), (first, second, ctas, runs, occurrences, missing))| {
                let mut missing = most_common_first(missing);
                RaceReport {
                    class,
                    first: sources.end(first),
                    second: sources.end(second),
                    same_cta,
                    ctas,
                    runs,
                    occurrences,
                    missing: missing.remove(0),
                    missing_elsewhere: missing,
                }
            },
        )
        .collect();
    reports.sort_by(|a, b| (a.class, b.runs).cmp(&(b.class, a.runs)));
    Ok(reports)
}

/// What the summary merges races of runs by.
fn key_of(race: &RunRace) -> (RaceClass, EndKey, EndKey, bool) {
    (
        race.class,
        race.first.key(),
        race.second.key(),
        race.same_cta,
    )
}

/// The advice texts of `counts` (runs per text), most runs first (ties in text order); never
/// empty.
fn most_common_first(counts: BTreeMap<String, u64>) -> Vec<String> {
    let mut texts: Vec<(String, u64)> = counts.into_iter().collect();
    texts.sort_by_key(|t| std::cmp::Reverse(t.1));
    let texts: Vec<String> = texts.into_iter().map(|(text, _)| text).collect();
    match texts.is_empty() {
        true => vec![String::new()],
        false => texts,
    }
}

/// How many of a pair's other advices the text report prints (`--json` has all).
const OTHER_ADVICE_SHOWN: usize = 2;

/// Source files read once each.
#[derive(Default)]
struct SourceCache {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceCache {
    fn end(&mut self, end: RaceEnd) -> ReportedEnd {
        let source = match (&end.file, end.line) {
            (Some(file), Some(line)) => self.line(file, line),
            _ => None,
        };
        let inner_source = end
            .inner
            .as_ref()
            .and_then(|at| self.line(&at.file, at.line));
        ReportedEnd {
            end,
            source,
            inner_source,
        }
    }

    /// Line `line` (1-based) of `file`, trimmed, if the file can be read and has it.
    fn line(&mut self, file: &str, line: u32) -> Option<String> {
        self.files
            .entry(file.to_string())
            .or_insert_with(|| {
                std::fs::read_to_string(file)
                    .ok()
                    .map(|t| t.lines().map(str::to_string).collect())
            })
            .as_ref()?
            .get((line as usize).checked_sub(1)?)
            .map(|l| l.trim().to_string())
    }
}

/// The report's lines for `races`.
pub fn describe(races: &[RaceReport], runs: u64) -> Vec<String> {
    let mut out = Vec::new();
    if races.is_empty() {
        out.push(format!(
            "races: none recorded in {runs} runs (simulator, PTX model)"
        ));
        return out;
    }
    out.push(format!(
        "races: {} pairs of accesses in {runs} runs (simulator, PTX model)",
        races.len()
    ));
    for r in races {
        let ctas = if r.same_cta {
            format!("same CTA ({})", r.ctas.0)
        } else {
            format!("CTAs {} and {}", r.ctas.0, r.ctas.1)
        };
        out.push(format!(
            "  {}: {} ({}) and {} ({}), {ctas}, in {} of {runs} runs ({} times)",
            r.class.describe(),
            r.first.end.place(),
            r.first.end.what(),
            r.second.end.place(),
            r.second.end.what(),
            r.runs,
            r.occurrences
        ));
        for e in [&r.first, &r.second] {
            let text = e.source.as_deref().unwrap_or("");
            out.push(format!("      {}: {text}   [{}]", e.end.place(), e.end.ptx));
            if let Some(inner) = &e.end.inner {
                let text = e.inner_source.as_deref().unwrap_or("");
                let place = place_of(Some(&inner.file), Some(inner.line), e.end.ptx_line);
                out.push(format!("        inlined from {place}: {text}"));
            }
        }
        out.push(format!("      what would order them: {}", r.missing));
        let shown = r.missing_elsewhere.len().min(OTHER_ADVICE_SHOWN);
        for other in &r.missing_elsewhere[..shown] {
            out.push(format!("      in other occurrences: {other}"));
        }
        if r.missing_elsewhere.len() > shown {
            let more = r.missing_elsewhere.len() - shown;
            out.push(format!(
                "      in other occurrences: {more} more (in fewer runs; `--json` lists them)"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report called a `volatile` access "strong .gpu"; PTX makes it relaxed at sys scope.
    #[test]
    fn a_volatile_access_is_labelled_relaxed_sys_not_strong_gpu() {
        let label = |ptx| strength_label(Strength::Gpu, ptx);
        assert_eq!(
            label("ld.volatile.global.u32 \t%r5, [%rd1]"),
            "volatile (relaxed .sys)"
        );
        assert_eq!(
            label("st.relaxed.sys.global.u32 [%rd1], %r1"),
            "strong .sys"
        );
        assert_eq!(label("atom.global.add.u32 %r1, [%rd1], 1"), "strong .gpu");
        assert_eq!(
            label("ld.acquire.gpu.global.u32 %r1, [%rd1]"),
            "strong .gpu"
        );
        assert_eq!(
            strength_label(Strength::Cta, "ld.relaxed.cta.u32 %r1, [%rd1]"),
            "strong .cta"
        );
    }
    use crate::backend::sim::{Forwarded, PairFacts, RaceAccess};

    fn access(line: u32, kind: RaceAccessKind, strength: Strength) -> RaceAccess {
        RaceAccess {
            site: RaceSite {
                function: "k".into(),
                ptx_line: line + 100,
                ptx: "ld".into(),
                file: Some("kernel.cu".into()),
                line: Some(line),
                inner: None,
            },
            kind,
            strength,
        }
    }

    /// A strong write at line 10 and a strong read at line 20 by threads of two CTAs, neither
    /// ordered nor communicating.
    fn strong_pair() -> Conflict {
        Conflict {
            first: access(10, RaceAccessKind::Write, Strength::Gpu),
            second: access(20, RaceAccessKind::Read, Strength::Gpu),
            ctas: (0, 1),
            facts: PairFacts {
                same_cta: false,
                morally_strong: true,
                observed: false,
                communicated: false,
                communicated_before: false,
                first_release: None,
                second_acquire: None,
                communication_in_cta: false,
            },
            via: None,
            relay: None,
            passed: None,
            out_of_scope: None,
            forward: None,
            synchronising_location: false,
            occurrences: 1,
            locations: 1,
        }
    }

    /// [`strong_pair`] with both accesses weak, the threads communicating between them.
    fn weak_communicated_pair() -> Conflict {
        let mut c = strong_pair();
        c.first.strength = Strength::Weak;
        c.second.strength = Strength::Weak;
        c.facts.morally_strong = false;
        c.facts.communicated = true;
        c
    }

    /// The site of instruction `ptx` at kernel.cu line `line`.
    fn site_at(line: u32, ptx: &str) -> RaceSite {
        RaceSite {
            ptx: ptx.into(),
            ..access(line, RaceAccessKind::Read, Strength::Gpu).site
        }
    }

    /// What the report says would order `c`, recorded alone in a run.
    fn advice(c: Conflict) -> String {
        run_races(0, &log_of(vec![c])).races[0].missing.clone()
    }

    fn log_of(conflicts: Vec<Conflict>) -> RaceLog {
        RaceLog {
            conflicts,
            communication: Vec::new(),
        }
    }

    /// QA bug (a ping-pong whose payload, barrier, flag and spin are in a helper of the app's
    /// own header, inlined at two call lines): the advice named the call lines alone, "a
    /// fence.acq_rel.gpu in that thread after pingpong.cu:12 and before pingpong.cu:12". The
    /// lines of the inlined code follow each call line now.
    #[test]
    fn advice_on_code_inlined_at_one_call_line_names_the_helpers_own_lines() {
        let inlined = |line: u32, inner: u32| RaceSite {
            inner: Some(SourceLine {
                file: "/app/exchange.cuh".into(),
                line: inner,
            }),
            ..site_at(line, "st.volatile.global.u32")
        };
        let mut c = weak_communicated_pair();
        c.first.site = inlined(12, 15);
        c.second.site = inlined(13, 32);
        c.via = Some((inlined(12, 19), inlined(13, 27)));
        let missing = advice(c);
        let release = "a fence.acq_rel.gpu after kernel.cu:12 (exchange.cuh:15), before \
                       kernel.cu:12 (exchange.cuh:19), the write the other thread reads";
        assert!(missing.contains(release), "{missing}");
        let acquire = "after kernel.cu:13 (exchange.cuh:27), the read that saw the other \
                       thread's write, before kernel.cu:13 (exchange.cuh:32)";
        assert!(missing.contains(acquire), "{missing}");
    }

    /// QA finding (a Treiber stack's pop reads `next[h]` at :24 and takes the node with a CAS at
    /// :25, in a loop): the advice said "after kernel.cu:25 … before kernel.cu:24" with no word
    /// that :24 comes after :25 only on the loop's next round.
    #[test]
    fn advice_whose_fence_goes_before_a_line_above_says_it_runs_on_a_later_round() {
        let mut c = weak_communicated_pair();
        c.first.site = site_at(15, "st.global.u32");
        c.second.site = site_at(24, "ld.global.u32");
        c.via = Some((
            site_at(16, "atom.global.cas.b32"),
            site_at(25, "atom.global.cas.b32"),
        ));
        let missing = advice(c);
        let acquire = "after kernel.cu:25, the read that saw the other thread's write, before \
                       kernel.cu:24 (kernel.cu:24 stands above kernel.cu:25 and runs after it on \
                       the loop's next round: the fence goes inside the loop, before \
                       kernel.cu:24, where it runs on every round)";
        assert!(missing.contains(acquire), "{missing}");
        // The release goes down the source: no note.
        let release = "after kernel.cu:15, before kernel.cu:16, the write the other thread \
                       reads;";
        assert!(missing.contains(release), "{missing}");
    }

    #[test]
    fn the_three_classes_follow_strength_and_communication() {
        let mut c = strong_pair();
        assert_eq!(classify(&c), Some(RaceClass::NoFenceCanOrder));
        c.facts.communicated = true;
        assert_eq!(classify(&c), Some(RaceClass::FenceCanOrder));
        c.facts.morally_strong = false;
        assert_eq!(classify(&c), Some(RaceClass::DataRace));
    }

    #[test]
    fn synchronisation_itself_is_not_reported() {
        let mut flag = strong_pair();
        flag.synchronising_location = true;
        assert_eq!(classify(&flag), None);
        let mut observed = strong_pair();
        observed.facts.observed = true;
        assert_eq!(classify(&observed), None);
        let mut rmw = strong_pair();
        rmw.first.kind = RaceAccessKind::Rmw;
        rmw.second.kind = RaceAccessKind::Rmw;
        assert_eq!(classify(&rmw), None);
        // A data race on a lock word is reported, synchronising or not.
        rmw.facts.morally_strong = false;
        rmw.synchronising_location = true;
        assert_eq!(classify(&rmw), Some(RaceClass::DataRace));
    }

    /// Regression (a ring buffer with volatile indices): the slot's write then read and its
    /// read then reuse are two data races the threads communicate across, each with its own
    /// fences; they were merged as one pair and the read-then-reuse fences never reported.
    #[test]
    fn a_communicated_data_race_and_its_reverse_are_two_races_with_their_own_fences() {
        let mut write_read = strong_pair();
        write_read.facts.morally_strong = false;
        write_read.facts.communicated = true;
        write_read.first.strength = Strength::Weak;
        write_read.second.strength = Strength::Weak;
        let mut read_write = write_read.clone();
        std::mem::swap(&mut read_write.first, &mut read_write.second);
        let races = run_races(0, &log_of(vec![write_read, read_write])).races;
        let ends: Vec<(Option<u32>, Option<u32>)> = races
            .iter()
            .map(|r| (r.first.line, r.second.line))
            .collect();
        assert_eq!(ends, [(Some(10), Some(20)), (Some(20), Some(10))]);
        assert!(races[1]
            .missing
            .contains("fence.acq_rel.gpu after kernel.cu:20, before"));
        // Without communication the two are one race, as before.
        let mut plain = strong_pair();
        plain.facts.morally_strong = false;
        plain.first.strength = Strength::Weak;
        let mut reverse = plain.clone();
        std::mem::swap(&mut reverse.first, &mut reverse.second);
        assert_eq!(run_races(0, &log_of(vec![plain, reverse])).races.len(), 1);
    }

    #[test]
    fn a_fence_orderable_race_names_the_missing_sides_and_their_scope() {
        let mut c = strong_pair();
        c.facts.communicated = true;
        c.facts.first_release = Some(Strength::Cta);
        let races = run_races(3, &log_of(vec![c]));
        let missing = &races.races[0].missing;
        assert!(
            missing.contains("the release after kernel.cu:10 is .cta"),
            "{missing}"
        );
        assert!(
            missing.contains("no acquire pattern on the waiting side"),
            "{missing}"
        );
        assert!(missing.contains("before kernel.cu:20"), "{missing}");
    }

    /// Regression (`check --races` across a barrier): writers store, `__syncthreads()`, then
    /// thread 0 raises the flag. The advice put the release after the data store, where it
    /// orders nothing for the reader (followed, the app failed 1,070 of 2,000 runs); it belongs
    /// in the thread that raises the flag, after the barrier.
    #[test]
    fn a_race_relayed_at_a_barrier_puts_the_release_in_the_thread_that_raises_the_flag() {
        let mut c = weak_communicated_pair();
        c.via = Some((site_at(12, "st.volatile"), site_at(15, "ld.volatile")));
        c.relay = Some(site_at(11, "bar.sync 0"));
        let missing = &advice(c.clone());
        assert!(
            missing.contains("through a third thread's strong write"),
            "{missing}"
        );
        assert!(
            missing.contains(
                "no release pattern in the thread that passes kernel.cu:10 on: it reaches that \
                 thread at kernel.cu:11, and that thread writes kernel.cu:12"
            ),
            "{missing}"
        );
        assert!(
            missing.contains(
                "a fence.acq_rel.gpu in that thread after kernel.cu:11 and before kernel.cu:12"
            ),
            "{missing}"
        );
        assert!(
            !missing.contains("fence.acq_rel.gpu after kernel.cu:10"),
            "{missing}"
        );
        assert!(
            missing.contains("the other thread's write, before kernel.cu:20"),
            "{missing}"
        );
        c.facts.first_release = Some(Strength::Cta);
        let missing = &advice(c);
        assert!(
            missing.contains("the release between kernel.cu:11 and kernel.cu:12 is .cta"),
            "{missing}"
        );
    }

    /// The last block's threads read the partial sums after a `__syncthreads()` that follows
    /// the ticket its thread 0 took: that thread's acquire, between the ticket and the barrier,
    /// is what is missing, not one beside the read.
    #[test]
    fn a_race_passed_on_at_a_barrier_puts_the_acquire_in_the_thread_that_read_the_ticket() {
        let mut c = weak_communicated_pair();
        c.facts.first_release = Some(Strength::Gpu);
        c.via = Some((site_at(12, "atom.add"), site_at(16, "atom.add")));
        c.passed = Some(site_at(19, "bar.sync 0"));
        let missing = &advice(c.clone());
        let expected = "no acquire pattern in the thread that passes it on to kernel.cu:20: that \
                        thread reads the other thread's write at kernel.cu:16 and passes it on \
                        at the barrier kernel.cu:19; a fence.acq_rel.gpu in that thread after \
                        kernel.cu:16 and before kernel.cu:19";
        assert!(missing.contains(expected), "{missing}");
        assert!(!missing.contains("no release pattern"), "{missing}");
        c.facts.second_acquire = Some(Strength::Cta);
        let missing = &advice(c);
        assert!(
            missing.contains("the acquire between kernel.cu:16 and kernel.cu:19 is .cta"),
            "{missing}"
        );
    }

    /// Regression (threads 0 and 1 store on one line, a barrier, thread 0 raises the flag):
    /// thread 0's own store needs a release after it, thread 1's one after the barrier; the
    /// summary kept one text per pair, so half of the advice was never shown.
    #[test]
    fn every_advice_a_pair_was_given_is_reported_most_runs_first() {
        let direct = weak_communicated_pair();
        let mut relayed = direct.clone();
        relayed.via = Some((site_at(12, "st.volatile"), site_at(15, "ld.volatile")));
        relayed.relay = Some(site_at(11, "bar.sync 0"));
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("j.csv");
        let runs = [
            vec![direct.clone(), relayed.clone()],
            vec![relayed.clone()],
            vec![direct],
        ];
        for (run, conflicts) in runs.into_iter().enumerate() {
            append_run(&journal, &run_races(run as u64, &log_of(conflicts))).unwrap();
        }
        let reports = summarise(&journal, 0..3, RaceMode::All).unwrap();
        assert_eq!(reports.len(), 1, "{reports:#?}");
        let report = &reports[0];
        assert_eq!(report.runs, 3);
        assert_eq!(report.missing_elsewhere.len(), 1, "{report:#?}");
        let texts = [&report.missing, &report.missing_elsewhere[0]];
        assert!(texts
            .iter()
            .any(|t| t.contains("in the thread that passes")));
        assert!(texts
            .iter()
            .any(|t| t.contains("after kernel.cu:10, before")));
        let lines = describe(&reports, 3).join("\n");
        assert!(lines.contains("      in other occurrences: "), "{lines}");
        // Two more advices in a later run (other relay points): the text report prints two
        // others and counts the third.
        let other_relays = [30, 31].map(|line| {
            let mut c = relayed.clone();
            c.relay = Some(site_at(line, "bar.sync 1"));
            c
        });
        append_run(&journal, &run_races(3, &log_of(other_relays.to_vec()))).unwrap();
        let reports = summarise(&journal, 0..4, RaceMode::All).unwrap();
        assert_eq!(reports[0].missing_elsewhere.len(), 3, "{reports:#?}");
        let lines = describe(&reports, 4);
        let others: Vec<&String> = (lines.iter())
            .filter(|l| l.starts_with("      in other occurrences: "))
            .collect();
        assert_eq!(others.len(), 3, "{lines:#?}");
        assert!(others[2].ends_with("1 more (in fewer runs; `--json` lists them)"));
    }

    /// Weak data published through a strong flag was told only "make both strong, or order
    /// them with a release and an acquire": the threads communicate, so the report now names
    /// the side that lacks each pattern, as for strong pairs.
    #[test]
    fn a_data_race_across_communication_names_the_missing_release_and_acquire() {
        let mut c = weak_communicated_pair();
        let races = run_races(0, &log_of(vec![c.clone()]));
        let missing = &races.races[0].missing;
        assert_eq!(races.races[0].class, RaceClass::DataRace);
        assert!(
            missing.contains("a fence.acq_rel.gpu after kernel.cu:10"),
            "{missing}"
        );
        assert!(
            missing.contains("no acquire pattern on the waiting side"),
            "{missing}"
        );
        c.facts.communicated = false;
        let races = run_races(0, &log_of(vec![c]));
        assert!(
            races.races[0].missing.contains("make both strong"),
            "{}",
            races.races[0].missing
        );
    }

    /// Which conflicts no fence orders as the code stands: a plain flag spun on (a data race
    /// with nothing between its threads) was left out, so harden's report never named it.
    #[test]
    fn no_fence_orders_a_data_race_with_nothing_between_its_threads() {
        let mut weak = weak_communicated_pair();
        assert!(
            !fences_cannot_order(&weak),
            "communicated: a fence orders it"
        );
        weak.facts.communicated = false;
        assert!(fences_cannot_order(&weak));
        weak.out_of_scope = Some((site_at(11, "st"), site_at(19, "ld")));
        assert!(
            !fences_cannot_order(&weak),
            "told to widen the flag, not listed twice"
        );
        assert!(fences_cannot_order(&strong_pair()));
        let mut narrow = strong_pair();
        narrow.first.strength = Strength::Cta;
        narrow.facts.morally_strong = false;
        assert!(fences_cannot_order(&narrow));
        let mut strong_communicated = strong_pair();
        strong_communicated.facts.communicated = true;
        assert!(!fences_cannot_order(&strong_communicated));
    }

    /// QA (a warp handing a shared tile from lane to lane with no `__syncwarp()`): the advice
    /// offered flags, locks and strong accesses but not the barrier such code lacks. A pair of
    /// one CTA with nothing between its threads names the barrier; one across CTAs does not.
    #[test]
    fn a_pair_of_one_cta_with_nothing_between_names_the_barrier_that_orders_it() {
        let barrier = "a barrier that both reach between the two accesses: `__syncthreads()`";
        let mut weak = weak_communicated_pair();
        weak.facts.communicated = false;
        assert!(!advice(weak.clone()).contains("__syncthreads"));
        weak.facts.same_cta = true;
        weak.ctas = (0, 0);
        assert!(advice(weak).contains(barrier));
        let mut strong = strong_pair();
        strong.facts.same_cta = true;
        strong.ctas = (0, 0);
        assert!(advice(strong).contains(barrier));
        let mut communicated = weak_communicated_pair();
        communicated.facts.same_cta = true;
        assert!(!advice(communicated).contains("__syncthreads"));
    }

    /// QA (a lock-free stack's top, pushed with atomicCAS and polled with a volatile read):
    /// the read that took the top from before the second push was told "an atomic races a
    /// plain strong access: make both atomic", which changes nothing for a read. A read gets
    /// advice for a read; a plain strong write beside an atomic still gets the lost update.
    #[test]
    fn an_atomic_and_a_strong_read_are_told_apart_from_an_atomic_and_a_strong_write() {
        let mut read = strong_pair();
        read.first.kind = RaceAccessKind::Rmw;
        let text = advice(read.clone());
        assert!(
            text.contains("kernel.cu:20 reads the atomic's value or an older one"),
            "{text}"
        );
        assert!(!text.contains("make the write atomic"), "{text}");
        let mut write = read;
        write.first.kind = RaceAccessKind::Write;
        write.second.kind = RaceAccessKind::Rmw;
        let text = advice(write);
        assert!(
            text.contains("the plain strong write kernel.cu:10"),
            "{text}"
        );
        assert!(text.contains("make the write atomic too"), "{text}");
    }

    /// QA (Dekker's handshake: each thread raises its volatile flag, then reads the other's):
    /// the flag pair was told only "take the same lock around both, or publish one to the
    /// other through a flag", though a `fence.sc` in each thread is what the handshake needs.
    /// A strong write and read that nothing passes between now name that fix, in either order
    /// of the two, and stay one race.
    #[test]
    fn a_strong_write_and_read_with_nothing_between_name_the_sc_fence_of_a_handshake() {
        let write_read = strong_pair();
        let mut read_write = write_read.clone();
        std::mem::swap(&mut read_write.first, &mut read_write.second);
        let races = run_races(0, &log_of(vec![write_read, read_write])).races;
        assert_eq!(races.len(), 1);
        let missing = &races[0].missing;
        assert_eq!(races[0].class, RaceClass::NoFenceCanOrder);
        let handshake = "If kernel.cu:10 and kernel.cu:20 are sides of a flag handshake";
        assert!(missing.contains(handshake), "{missing}");
        assert!(
            missing.contains("a fence.sc.gpu (`__threadfence()`) between"),
            "{missing}"
        );
        let mut in_one_cta = strong_pair();
        (
            in_one_cta.facts.same_cta,
            in_one_cta.facts.communication_in_cta,
        ) = (true, true);
        let missing = advice(in_one_cta);
        assert!(
            missing.contains("a fence.sc.cta (`__threadfence_block()`) between"),
            "{missing}"
        );
        let mut two_writes = strong_pair();
        two_writes.second.kind = RaceAccessKind::Write;
        let races = run_races(0, &log_of(vec![two_writes])).races;
        assert!(
            !races[0].missing.contains("handshake"),
            "{}",
            races[0].missing
        );
    }

    /// QA (leader election by store buffering, repeated in rounds): the threads had
    /// communicated in earlier rounds, so the flag pair was told only "move it inside the
    /// critical section", though there is no lock and a `fence.sc` in each thread is the fix.
    /// Both are named now.
    #[test]
    fn a_handshake_pair_after_earlier_rounds_names_the_handshake_fence_beside_the_lock() {
        let mut later_round = strong_pair();
        later_round.facts.communicated_before = true;
        let missing = advice(later_round);
        // QA (a Chase-Lev deque): lock-free code read the lock advice as an order.
        assert!(
            missing.contains(
                "no fence orders this pair; where a lock guards this code, move it inside the \
                 critical section"
            ),
            "{missing}"
        );
        assert!(
            missing.contains("If kernel.cu:10 and kernel.cu:20 are sides of a flag handshake"),
            "{missing}"
        );
    }

    /// Write-to-read causality through a thread with no fence: the payload's advice was the
    /// generic one; it now names the forwarding thread's fence, and the writer's release when
    /// that is missing too, and none for an access that reached the forwarder causally.
    #[test]
    fn a_forwarded_pair_names_the_forwarding_threads_fence_and_the_writers_release() {
        let mut c = weak_communicated_pair();
        c.facts.first_release = Some(Strength::Gpu);
        c.facts.second_acquire = Some(Strength::Gpu);
        c.via = Some((site_at(15, "st"), site_at(18, "ld")));
        c.forward = Some(Forwarded {
            write: Some(site_at(11, "st")),
            read: site_at(13, "ld"),
            passes: site_at(15, "st"),
            fenced: None,
            first_in_cta: false,
            last_in_cta: false,
        });
        let forwarder = "no acquire and release in a thread that passes it on: that thread reads \
                         at kernel.cu:13, then writes kernel.cu:15, which the next thread reads; \
                         a fence.acq_rel.gpu in that thread after kernel.cu:13 and before \
                         kernel.cu:15";
        let missing = advice(c.clone());
        assert!(missing.ends_with(forwarder), "{missing}");
        assert!(!missing.contains("signalling side"), "{missing}");
        c.facts.first_release = None;
        let missing = advice(c.clone());
        let release = "a fence.acq_rel.gpu after kernel.cu:10, before kernel.cu:11, which a \
                       further thread reads and passes on";
        assert!(missing.contains(release), "{missing}");
        // The first forwarder in the writer's CTA: a .cta release reaches it, and PTX's
        // causality order carries it on from there.
        c.forward.as_mut().unwrap().first_in_cta = true;
        let missing = advice(c.clone());
        assert!(
            missing.contains("a fence.acq_rel.cta after kernel.cu:10"),
            "{missing}"
        );
        assert!(
            missing.contains("fence.acq_rel.gpu in that thread"),
            "{missing}"
        );
        c.forward.as_mut().unwrap().write = None;
        assert!(!advice(c).contains("signalling side"));
    }

    /// QA finding (a last-block histogram): a link the payload reached at a barrier read
    /// "that thread reads at histogram.cu:32", where line 32 is `__syncthreads()`.
    #[test]
    fn a_forwarding_link_reached_at_a_barrier_says_so() {
        let mut c = weak_communicated_pair();
        c.facts.first_release = Some(Strength::Gpu);
        c.facts.second_acquire = Some(Strength::Gpu);
        c.forward = Some(Forwarded {
            write: None,
            read: site_at(13, "bar.sync \t0;"),
            passes: site_at(15, "atom.add"),
            fenced: None,
            first_in_cta: false,
            last_in_cta: false,
        });
        let missing = advice(c);
        let reached = "it reaches that thread at the barrier kernel.cu:13, then writes \
                       kernel.cu:15";
        assert!(missing.contains(reached), "{missing}");
    }

    /// QA bug (a spin lock taken with `atomicCAS`): a thread whose CAS read the unlock and wrote
    /// the lock was named as a forwarder lacking "a fence.acq_rel.gpu in that thread after
    /// spinlock.cuh:6 and before spinlock.cuh:6", inside one instruction. Observation order
    /// runs through the RMW: only the writer's release and the reader's acquire are named.
    #[test]
    fn a_forwarder_that_is_one_rmw_is_named_for_no_fence() {
        let mut c = weak_communicated_pair();
        c.facts.second_acquire = Some(Strength::Gpu);
        c.via = Some((site_at(15, "atom.cas"), site_at(18, "ld")));
        c.forward = Some(Forwarded {
            write: Some(site_at(11, "atom.exch")),
            read: site_at(15, "atom.cas"),
            passes: site_at(15, "atom.cas"),
            fenced: None,
            first_in_cta: false,
            last_in_cta: false,
        });
        let missing = advice(c);
        assert!(!missing.contains("passes it on: that thread"), "{missing}");
        let release = "a fence.acq_rel.gpu after kernel.cu:10, before kernel.cu:11, which a \
                       further thread reads and passes on";
        assert!(missing.contains(release), "{missing}");
    }

    /// A `.cta` flag between CTAs: the payload's advice named no flag ("make both strong"),
    /// though the threads did communicate through it at too narrow a scope.
    #[test]
    fn a_payload_published_through_a_cta_scoped_flag_names_the_flag_to_widen() {
        let mut c = weak_communicated_pair();
        c.facts.communicated = false;
        c.out_of_scope = Some((site_at(12, "st.release.cta"), site_at(14, "ld.acquire.cta")));
        let missing = advice(c);
        let named = "only through kernel.cu:12 and kernel.cu:14, whose .cta scope leaves out \
                     the other CTA: no fence widens it. Give both .gpu scope";
        assert!(missing.contains(named), "{missing}");
    }

    /// The flag pair itself, both strong at `.cta` between CTAs: the advice read differently
    /// for the pair and its reverse, and offered fences, which cannot make it morally strong.
    #[test]
    fn a_strong_pair_of_too_narrow_a_scope_reads_alike_both_ways_and_offers_no_fence() {
        let mut write_read = strong_pair();
        write_read.first.strength = Strength::Cta;
        write_read.second.strength = Strength::Cta;
        write_read.facts.morally_strong = false;
        let mut read_write = write_read.clone();
        std::mem::swap(&mut read_write.first, &mut read_write.second);
        let races = run_races(0, &log_of(vec![write_read, read_write])).races;
        assert_eq!(races.len(), 1, "{races:#?}");
        assert!(races[0].scope_too_narrow());
        let missing = &races[0].missing;
        let expected = "the .cta scope of kernel.cu:10 and kernel.cu:20 leaves out the other \
                        CTA: no fence makes them morally strong; give both .gpu scope";
        assert!(missing.starts_with(expected), "{missing}");
    }

    #[test]
    fn a_run_merges_the_ptx_lines_of_one_source_line() {
        let mut a = strong_pair();
        a.facts.morally_strong = false;
        let mut b = a.clone();
        b.second.site.ptx_line += 1;
        b.occurrences = 2;
        let races = run_races(0, &log_of(vec![a, b]));
        assert_eq!(races.races.len(), 1);
        assert_eq!(races.races[0].occurrences, 3);
    }
}
