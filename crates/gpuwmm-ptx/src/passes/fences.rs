//! Fence sites, fence insertion and fence stripping.
//!
//! Empirical fence insertion starts from a fence after every access through which threads may
//! communicate (global, generic and shared memory) and removes fences while the application
//! stays correct under stress. This module finds those
//! candidate sites (with the source line each came from), inserts a chosen kind of fence at a
//! chosen subset of them (after each run of a site's accesses, where a fence in the source can
//! go: [`fence_points`]), and strips existing fences to make the `-nf` variants of applications.
//!
//! Beyond the paper, a CTA or warp barrier (`__syncthreads()`, `__syncwarp()`) is a site too: a
//! fence after it is the only place a fence can release, to another thread, what the other
//! threads it joined wrote before the barrier (a fence before the barrier releases only its own thread's writes: PTX's release
//! pattern is a fence followed by a write of the same thread). A grid barrier or a last-block
//! reduction in which every thread writes and one thread then signals needs it.

use crate::ir::{Function, Instruction, Module, SourcePos, Statement};
use crate::lines::{attribute_statements, statement_frames};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// How fine-grained candidate sites are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Granularity {
    /// One site per PTX access instruction.
    Instruction,
    /// One site per source line (for inlined code, the line of the outermost call that leads to
    /// it: [`crate::lines`]): all accesses a line compiles to share a site, as in the
    /// paper's counts.
    #[default]
    SourceLine,
    /// One site per line an access is written on, per function: for code inlined from a
    /// helper or a header, the helper's own line (the innermost frame), one site for every
    /// call of it and every unrolled copy. A fence there is one fence in the source, after
    /// that line, as a programmer would place it in the helper.
    InnerLine,
}

impl Granularity {
    pub const ALL: [Granularity; 3] = [
        Granularity::SourceLine,
        Granularity::InnerLine,
        Granularity::Instruction,
    ];

    /// The name as the command line (`--granularity`) and journals spell it.
    pub fn name(self) -> &'static str {
        match self {
            Granularity::SourceLine => "line",
            Granularity::InnerLine => "inner-line",
            Granularity::Instruction => "instruction",
        }
    }
}

display_by_name!(Granularity, name);
parse_by_name!(Granularity, name, String, |s| format!(
    "unknown granularity '{s}' (expected line, inner-line or instruction)"
));

/// A file and line of the application's source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceLine {
    pub file: String,
    pub line: u32,
}

impl fmt::Display for SourceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One access instruction (or barrier) after which a fence may go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Access {
    /// Index of the instruction's statement in its function's body.
    pub statement: usize,
    /// The instruction, as PTX text.
    pub ptx: String,
    /// The innermost source line (inside an inlined function, if any).
    pub inner: Option<SourceLine>,
    /// Every frame of the inlining chain, outermost first (the site's line, the lines of the
    /// inlined calls, then `inner`); frames without a file or line are left out.
    pub frames: Vec<SourceLine>,
    /// Whether the site's fence goes right after this access: it ends a run of the site's
    /// accesses ([`fence_points`]).
    pub fenced: bool,
}

/// A candidate fence site: one or more accesses, with a fence after each run of them
/// ([`fence_points`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FenceSite {
    /// Position in [`fence_sites`]' order (global sites first), starting at 0; stable for a given
    /// module and granularity.
    pub id: usize,
    pub function: String,
    /// The source line of the outermost frame: for an inlined access, the line of the outermost
    /// call that leads to it, in the function it was inlined into ([`crate::lines`]); at
    /// [`Granularity::InnerLine`], the innermost frame, the line the accesses are written on.
    pub source: Option<SourceLine>,
    pub accesses: Vec<Access>,
}

/// The fence instruction inserted at a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum FenceKind {
    #[default]
    #[serde(rename = "fence.sc.gpu")]
    ScGpu,
    #[serde(rename = "membar.gl")]
    MembarGl,
    #[serde(rename = "fence.acq_rel.gpu")]
    AcqRelGpu,
    #[serde(rename = "membar.cta")]
    MembarCta,
    #[serde(rename = "fence.sc.sys")]
    ScSys,
    #[serde(rename = "fence.acq_rel.cta")]
    AcqRelCta,
}

impl FenceKind {
    pub const ALL: [FenceKind; 6] = [
        FenceKind::ScGpu,
        FenceKind::MembarGl,
        FenceKind::AcqRelGpu,
        FenceKind::MembarCta,
        FenceKind::ScSys,
        FenceKind::AcqRelCta,
    ];

    /// The weaker kinds `harden` tries in place of a kept fence, in this order: release/acquire
    /// instead of sequential consistency, then block scope instead of GPU scope, then both.
    pub const WEAKENING: [FenceKind; 3] = [
        FenceKind::AcqRelGpu,
        FenceKind::MembarCta,
        FenceKind::AcqRelCta,
    ];

    /// Scope rank: 0 block, 1 GPU, 2 system.
    fn scope(self) -> u8 {
        match self {
            FenceKind::MembarCta | FenceKind::AcqRelCta => 0,
            FenceKind::ScGpu | FenceKind::MembarGl | FenceKind::AcqRelGpu => 1,
            FenceKind::ScSys => 2,
        }
    }

    /// Whether the fence orders only for threads of its own block (`.cta`).
    pub fn is_cta_scoped(self) -> bool {
        self.scope() == 0
    }

    /// Whether the fence is sequentially consistent (`fence.sc`, every `membar`).
    fn is_sc(self) -> bool {
        !matches!(self, FenceKind::AcqRelGpu | FenceKind::AcqRelCta)
    }

    /// Whether `self` orders no more than `other` and differs from it: neither a wider scope
    /// nor a stronger ordering (`membar.gl` and `fence.sc.gpu` are the same fence).
    pub fn is_weaker_than(self, other: FenceKind) -> bool {
        self.scope() <= other.scope()
            && (self.is_sc() <= other.is_sc())
            && (self.scope(), self.is_sc()) != (other.scope(), other.is_sc())
    }

    /// The PTX opcode.
    pub fn opcode(self) -> &'static str {
        match self {
            FenceKind::ScGpu => "fence.sc.gpu",
            FenceKind::MembarGl => "membar.gl",
            FenceKind::AcqRelGpu => "fence.acq_rel.gpu",
            FenceKind::MembarCta => "membar.cta",
            FenceKind::ScSys => "fence.sc.sys",
            FenceKind::AcqRelCta => "fence.acq_rel.cta",
        }
    }
}

display_by_name!(FenceKind, opcode);
parse_by_name!(FenceKind, opcode, String, |s| {
    let names: Vec<_> = FenceKind::ALL.iter().map(|k| k.opcode()).collect();
    format!(
        "unknown fence kind '{s}' (expected one of: {})",
        names.join(", ")
    )
});

/// Every candidate fence site of the module: first the sites holding an access that may touch
/// global memory, in module order of their first such access, then the sites whose accesses are
/// all to shared memory, in module order, then the sites that are barriers only. So a
/// kernel's global sites keep their ids whatever shared-memory code or barriers sit between
/// them, the ids they had before shared accesses and barriers were sites. At line granularity
/// a line's site holds all its accesses, shared ones and barriers too.
pub fn fence_sites(module: &Module, granularity: Granularity) -> Vec<FenceSite> {
    let mut global: Vec<FenceSite> = Vec::new();
    let mut shared_only: Vec<FenceSite> = Vec::new();
    let mut barriers_only: Vec<FenceSite> = Vec::new();
    for function in module.functions() {
        let mut groups = function_accesses(module, function, granularity);
        groups.sort_by_key(|g| g.first_global);
        for group in groups {
            let site = FenceSite {
                id: 0,
                function: function.name.clone(),
                source: group.source,
                accesses: group.accesses,
            };
            match (group.first_global, group.memory) {
                (Some(_), _) => global.push(site),
                (None, true) => shared_only.push(site),
                (None, false) => barriers_only.push(site),
            }
        }
    }
    let mut sites: Vec<FenceSite> = (global.into_iter())
        .chain(shared_only)
        .chain(barriers_only)
        .collect();
    for (id, site) in sites.iter_mut().enumerate() {
        site.id = id;
    }
    sites
}

/// The accesses of one site, before it is numbered.
struct AccessGroup {
    source: Option<SourceLine>,
    accesses: Vec<Access>,
    /// The statement of its first access that may touch global memory, if any.
    first_global: Option<usize>,
    /// Whether it holds a memory access (else only barriers).
    memory: bool,
}

/// The groups of one function so far, and the group of each source line seen.
#[derive(Default)]
struct Groups {
    list: Vec<AccessGroup>,
    by_line: BTreeMap<SourceLine, usize>,
}

impl Groups {
    /// The group an access whose line is `outer` joins (the outermost or the innermost frame,
    /// as the granularity keys sites): at line granularities its line's, else (or for the
    /// line's first access, or one without a line) a new one.
    fn join(&mut self, outer: Option<SourceLine>, granularity: Granularity) -> &mut AccessGroup {
        let line = outer
            .clone()
            .filter(|_| granularity != Granularity::Instruction);
        let index = match line.as_ref().and_then(|l| self.by_line.get(l)) {
            Some(&index) => index,
            None => {
                if let Some(line) = line {
                    self.by_line.insert(line, self.list.len());
                }
                self.list.push(AccessGroup {
                    source: outer,
                    accesses: Vec::new(),
                    first_global: None,
                    memory: false,
                });
                self.list.len() - 1
            }
        };
        &mut self.list[index]
    }
}

/// The accesses (and barriers) of one function, grouped by site, in order of first
/// appearance.
fn function_accesses(
    module: &Module,
    function: &Function,
    granularity: Granularity,
) -> Vec<AccessGroup> {
    let mut groups = Groups::default();
    let body = function.body.as_deref().unwrap_or_default();
    let frames = statement_frames(body);
    for (index, (statement, attribution)) in body.iter().zip(attribute_statements(body)).enumerate()
    {
        let Statement::Instruction(instruction) = statement else {
            continue;
        };
        let memory = instruction.memory_access().filter(|a| a.may_communicate());
        if memory.is_none() && !instruction.waits_at_barrier() {
            continue;
        }
        let access = Access {
            statement: index,
            ptx: crate::print::instruction_text(instruction),
            inner: attribution.and_then(|a| source_line(module, a.inner)),
            frames: (frames[index].iter())
                .filter_map(|&pos| source_line(module, pos))
                .collect(),
            fenced: true,
        };
        let outer = attribution.and_then(|a| source_line(module, a.outer));
        let key = match granularity {
            Granularity::InnerLine => access.inner.clone().or(outer),
            _ => outer,
        };
        let group = groups.join(key, granularity);
        group.accesses.push(access);
        if let Some(memory) = memory {
            group.memory = true;
            if memory.may_be_global() {
                group.first_global.get_or_insert(index);
            }
        }
    }
    for group in &mut groups.list {
        fence_points(body, &mut group.accesses);
    }
    groups.list
}

/// Marks where a site's fence goes: after the last access of each run of its accesses, not
/// after every one. Two accesses of a site are one run when they come from the same source
/// line through the same inlined calls (the same frames), and, between them, the thread can do
/// nothing else that a fence orders or that skips the later one: no other access or CTA
/// barrier, no label, branch, call or exit, and the later one is unguarded or guarded as the
/// earlier one by a predicate nothing between mentions.
///
/// This is where the patch can put the fence. A source line's accesses are one expression or
/// statement (`sum += buf[*head % N];` reads `head`, then `buf`), and a fence after it in the
/// source orders them all with what follows, but not with each other. A fence after each of
/// them also made the first one (`head`, or the spin's last read of a flag) an acquire for
/// the second, so harden found stable a set of fences whose patch was not (a ring buffer's
/// patched consumer failed 98.8% of runs on the simulator). Code inlined from the app's
/// helpers is fenced after each of the helper's lines in the patch, so each line there ends a
/// run of its own.
fn fence_points(body: &[Statement], accesses: &mut [Access]) {
    for i in 1..accesses.len() {
        let (earlier, later) = (&accesses[i - 1], &accesses[i]);
        if earlier.frames == later.frames && one_run(body, earlier.statement, later.statement) {
            accesses[i - 1].fenced = false;
        }
    }
}

/// Whether a fence after the access at statement `later` does all that one after `earlier`
/// does for what follows them ([`fence_points`]).
fn one_run(body: &[Statement], earlier: usize, later: usize) -> bool {
    let (Statement::Instruction(first), Statement::Instruction(second)) =
        (&body[earlier], &body[later])
    else {
        return false;
    };
    let guard_kept = match (&second.guard, &first.guard) {
        (None, _) => true,
        (Some(g), Some(f)) => g == f,
        (Some(_), None) => false,
    };
    let guard_register = second.guard.as_ref().map(|g| g.predicate.as_str());
    guard_kept
        && body[earlier + 1..later]
            .iter()
            .all(|statement| match statement {
                Statement::Instruction(i) => {
                    !separates_accesses(i) && guard_register.is_none_or(|p| !mentions(i, p))
                }
                Statement::Label(_) => false,
                _ => true,
            })
}

/// Whether an instruction between two accesses of a site keeps them in separate runs: an
/// access a fence orders, a barrier of any kind, or a change of control flow.
fn separates_accesses(instruction: &Instruction) -> bool {
    instruction
        .memory_access()
        .is_some_and(|a| a.may_communicate())
        || matches!(
            instruction.opcode.base.as_str(),
            "bra" | "brx" | "call" | "ret" | "exit" | "trap" | "bar" | "barrier"
        )
}

/// Whether an instruction's text holds `register` (or a longer name that starts with it: a
/// run too many is split, never one too few joined).
fn mentions(instruction: &Instruction, register: &str) -> bool {
    crate::print::instruction_text(instruction).contains(register)
}

/// A fence the module already has: where it is, for reports that compare fence sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnFence {
    pub function: String,
    /// The source line of the outermost frame, when the PTX has line info.
    pub source: Option<SourceLine>,
    /// The line the fence is written on: in code inlined from a helper, the helper's line
    /// (`source` is then the line that calls it).
    pub written: Option<SourceLine>,
    /// The fence instruction, as printed.
    pub ptx: String,
}

/// Every ordering fence of the module (what [`strip_fences`] removes), in module order.
pub fn own_fences(module: &Module) -> Vec<OwnFence> {
    let mut fences = Vec::new();
    for function in module.functions() {
        let body = function.body.as_deref().unwrap_or_default();
        for (statement, attribution) in body.iter().zip(attribute_statements(body)) {
            if let Statement::Instruction(i) = statement {
                if i.fence().is_some() {
                    fences.push(OwnFence {
                        function: function.name.clone(),
                        source: attribution.and_then(|a| source_line(module, a.outer)),
                        written: attribution.and_then(|a| source_line(module, a.inner)),
                        ptx: crate::print::instruction_text(i),
                    });
                }
            }
        }
    }
    fences
}

/// The file and line `pos` names, if it names one.
pub(crate) fn source_line(module: &Module, pos: SourcePos) -> Option<SourceLine> {
    if pos.line == 0 {
        return None;
    }
    Some(SourceLine {
        file: module.file_path(pos.file)?.to_string(),
        line: pos.line,
    })
}

/// Inserts a `kind` fence after each run of accesses of the given sites ([`fence_points`]). A
/// guarded access gets a fence with the same guard, so the fence executes exactly when the
/// access does.
pub fn insert_fences(module: &Module, sites: &[&FenceSite], kind: FenceKind) -> Module {
    let kinded: Vec<(&FenceSite, FenceKind)> = sites.iter().map(|s| (*s, kind)).collect();
    insert_kinded_fences(module, &kinded)
}

/// Inserts after each run of accesses of each site ([`fence_points`]) a fence of that site's
/// kind. Where two sites share an access (with different kinds), the access gets one fence: the
/// first of the strongest.
pub fn insert_kinded_fences(module: &Module, sites: &[(&FenceSite, FenceKind)]) -> Module {
    let mut module = module.clone();
    for function in module.functions_mut() {
        let mut after: Vec<(usize, FenceKind)> = sites
            .iter()
            .filter(|(s, _)| s.function == function.name)
            .flat_map(|(s, k)| s.fence_points().map(move |statement| (statement, *k)))
            .collect();
        after.sort_by_key(|&(statement, kind)| (statement, kind.scope(), kind.is_sc()));
        after.reverse();
        after.dedup_by_key(|&mut (statement, _)| statement);
        let Some(body) = function.body.as_mut() else {
            continue;
        };
        for &(index, kind) in &after {
            let guard = match &body[index] {
                Statement::Instruction(i) => i.guard.clone(),
                _ => continue,
            };
            let mut fence = Instruction::synthetic(kind.opcode(), Vec::new());
            fence.guard = guard;
            body.insert(index + 1, Statement::Instruction(fence));
        }
    }
    module
}

/// The number of fences [`insert_fences`] adds for these sites.
pub fn fence_count(sites: &[&FenceSite]) -> usize {
    sites.iter().map(|s| s.fence_points().count()).sum()
}

impl FenceSite {
    /// The statements after which the site's fence goes ([`fence_points`]).
    pub fn fence_points(&self) -> impl Iterator<Item = usize> + '_ {
        self.accesses
            .iter()
            .filter(|a| a.fenced)
            .map(|a| a.statement)
    }
}

/// Removes every ordering fence (`membar.*`, `fence.sc.*`, `fence.acq_rel.*`); proxy fences stay.
/// Returns the stripped module and how many fences were removed.
pub fn strip_fences(module: &Module) -> (Module, usize) {
    strip_fences_except(module, &[])
}

/// [`strip_fences`], except the fences one of whose source frames (their own line, or a line
/// they are inlined at) is among the lines `kept` gives for a file: the fences a patch adds to
/// a fence-stripped variant stay, wherever they are inlined to (libcu++'s
/// `cuda::atomic_thread_fence` is a fence inside a header, inlined at the patched line). A file
/// is matched by the end of the path the module names it by.
pub fn strip_fences_except(
    module: &Module,
    kept: &[(std::path::PathBuf, BTreeSet<u32>)],
) -> (Module, usize) {
    let mut module = module.clone();
    let lines_of: BTreeMap<u32, &BTreeSet<u32>> = (module.items.iter())
        .filter_map(|item| match item {
            crate::ir::Item::File(entry) => {
                let path = std::path::Path::new(&entry.path);
                let (_, lines) = kept.iter().find(|(file, _)| path.ends_with(file))?;
                Some((entry.index, lines))
            }
            _ => None,
        })
        .collect();
    let added = |frames: &[SourcePos]| {
        (frames.iter()).any(|pos| {
            lines_of
                .get(&pos.file)
                .is_some_and(|l| l.contains(&pos.line))
        })
    };
    let mut removed = 0;
    for body in module.functions_mut().filter_map(|f| f.body.as_mut()) {
        let frames = statement_frames(body);
        let before = body.len();
        let mut index = 0;
        body.retain(|s| {
            let keep = match s {
                Statement::Instruction(i) if i.fence().is_some() => added(&frames[index]),
                _ => true,
            };
            index += 1;
            keep
        });
        removed += before - body.len();
    }
    (module, removed)
}

/// Weakens every release, acquire and acq_rel access (`ld`, `st`, `atom`, `red`) to `.relaxed`,
/// keeping its scope; fences stay. This makes the weak variant of code whose ordering lives in
/// its accesses rather than in fences (CUB's `st.release.gpu` status stores). Returns the module
/// and how many accesses were weakened.
pub fn relax_orderings(module: &Module) -> (Module, usize) {
    let mut module = module.clone();
    let mut relaxed = 0;
    for body in module.functions_mut().filter_map(|f| f.body.as_mut()) {
        for statement in body.iter_mut() {
            let Statement::Instruction(instruction) = statement else {
                continue;
            };
            if !matches!(
                instruction.opcode.base.as_str(),
                "ld" | "st" | "atom" | "red"
            ) {
                continue;
            }
            for modifier in instruction.opcode.modifiers.iter_mut() {
                if matches!(modifier.as_str(), "release" | "acquire" | "acq_rel") {
                    *modifier = "relaxed".to_string();
                    relaxed += 1;
                }
            }
        }
    }
    (module, relaxed)
}

/// Parses a site selection: `all`, `none`, or a list of ids and ranges such as `0,2,5-7`.
pub fn select_sites<'a>(sites: &'a [FenceSite], spec: &str) -> Result<Vec<&'a FenceSite>, String> {
    match spec.trim() {
        "all" => return Ok(sites.iter().collect()),
        "none" => return Ok(Vec::new()),
        _ => {}
    }
    let mut ids = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (parse_id(a)?, parse_id(b)?),
            None => (parse_id(part)?, parse_id(part)?),
        };
        if lo > hi {
            return Err(format!("empty range '{part}'"));
        }
        // Checked before the range is expanded: `0-4294967295` names no list to build.
        if hi >= sites.len() {
            return Err(format!(
                "no fence site {hi} (the module has {} sites, numbered from 0)",
                sites.len(),
            ));
        }
        ids.extend(lo..=hi);
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids.into_iter().map(|id| &sites[id]).collect())
}

fn parse_id(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a site id (expected all, none, or ids like 0,2,5-7)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, print};

    const DOT: &str = include_str!("../../../../tests/fixtures/ptx/dot_inlined.ptx");
    const SDK_RED: &str = include_str!("../../../../tests/fixtures/ptx/sdk_red.ptx");
    const NESTED: &str = include_str!("../../../../tests/fixtures/ptx/nested_inlined.ptx");

    #[test]
    fn own_fences_are_found_with_their_source_line_and_are_what_strip_removes() {
        let module = parse(SDK_RED).unwrap();
        let fences = own_fences(&module);
        assert_eq!(fences.len(), 1);
        let fence = &fences[0];
        assert_eq!(fence.ptx, "membar.gl");
        let source = fence.source.as_ref().unwrap();
        assert_eq!(
            (source.file.as_str(), source.line),
            ("apps/sdk-red/kernel.cu", 41)
        );
        assert_eq!(strip_fences(&module).1, fences.len());
        assert!(own_fences(&strip_fences(&module).0).is_empty());
    }

    fn module() -> Module {
        parse(DOT).unwrap()
    }

    #[test]
    fn sites_per_instruction_cover_every_global_then_every_shared_access_then_every_barrier() {
        let sites = fence_sites(&module(), Granularity::Instruction);
        let opcodes: Vec<_> = sites
            .iter()
            .map(|s| {
                s.accesses[0]
                    .ptx
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            opcodes,
            [
                "ld.global.f32",
                "ld.global.f32",
                "atom.global.cas.b32",
                "ld.global.f32",
                "st.global.f32",
                "atom.global.exch.b32",
                "st.volatile.global.u32",
                "ld.global.v4.u32",
                "st.global.v4.u32",
                "atom.global.add.u32",
                "st.shared.f32",
                "st.shared.f32",
                "ld.shared.f32",
                "ld.shared.f32",
                "st.shared.f32",
                "ld.shared.f32",
                "bar.sync",
                "bar.sync",
            ]
        );
    }

    /// Bug (a grid barrier written fresh): every thread wrote, `__syncthreads()`, then thread 0
    /// signalled with an atomic; no site put a fence between the barrier and the atomic, so
    /// harden kept `fence.sc` fences that order the other threads' writes only when fence-SC
    /// order happens to (8 failures in 2,000 runs of the patched app). A barrier is a site of
    /// its own line, after the accesses' sites; `bar.arrive` (no wait) is not.
    #[test]
    fn a_cta_barrier_is_a_site_after_the_access_sites_and_gets_its_fence_after_it() {
        let body = "\
	.reg .b32 %r<2>;
	.loc 1 3 5
	st.global.u32 [%rd1], 1;
	.loc 1 4 5
	bar.sync 0;
	.loc 1 5 5
	bar.arrive 1, 64;
	.loc 1 6 5
	atom.global.add.u32 %r1, [%rd1+4], 1;
";
        let expected = "bar.sync \t0;\n\tfence.acq_rel.gpu;\n";
        assert_barrier_site_is_last(body, [3, 6, 4], FenceKind::AcqRelGpu, expected);
    }

    /// Bug (QA, a warp-to-warp handoff in shared memory): lanes wrote a tile, `__syncwarp()`,
    /// then lane 0 raised a flag; `bar.warp.sync` was no site, so harden could not put the
    /// release after it and kept `fence.sc.cta` inside the tile loop instead. A warp barrier
    /// joins the causal pasts of its lanes as a CTA barrier does those of the block.
    #[test]
    fn a_warp_barrier_is_a_site_like_a_cta_barrier() {
        let body = "\
	.loc 1 3 5
	st.shared.u32 [%rd1], 1;
	.loc 1 4 5
	bar.warp.sync -1;
	.loc 1 5 5
	st.volatile.shared.u32 [%rd1+4], 1;
";
        let expected = "bar.warp.sync \t-1;\n\tfence.acq_rel.cta;\n";
        assert_barrier_site_is_last(body, [3, 5, 4], FenceKind::AcqRelCta, expected);
    }

    /// The kernel `k(p)` of `k.cu` with `body` after loading `p` into `%rd1`: its sites per
    /// source line are at `lines`, the last is the barrier's, and a `kind` fence there prints
    /// as `expected`.
    fn assert_barrier_site_is_last(body: &str, lines: [u32; 3], kind: FenceKind, expected: &str) {
        let text = format!(
            ".version 8.8\n.target sm_70\n.address_size 64\n.file 1 \"k.cu\"\n\n\
             .visible .entry k(.param .u64 p)\n{{\n\t.reg .b64 %rd<2>;\n\
             \tld.param.u64 %rd1, [p];\n{body}\tret;\n}}\n"
        );
        let module = parse(&text).unwrap();
        let sites = fence_sites(&module, Granularity::SourceLine);
        let found: Vec<u32> = (sites.iter())
            .map(|s| s.source.as_ref().unwrap().line)
            .collect();
        assert_eq!(found, lines);
        let fenced = print(&insert_fences(&module, &[&sites[2]], kind));
        assert!(fenced.contains(expected), "{fenced}");
    }

    #[test]
    fn inlined_accesses_take_the_outer_line() {
        let sites = fence_sites(&module(), Granularity::Instruction);
        let cas = &sites[2];
        assert_eq!(cas.source.as_ref().unwrap().line, 11);
        assert_eq!(cas.accesses[0].inner.as_ref().unwrap().line, 2);
        let frames: Vec<u32> = cas.accesses[0].frames.iter().map(|f| f.line).collect();
        assert_eq!(frames, [11, 2]);
        assert_eq!(cas.source.as_ref().unwrap().file, "/tmp/nv/k.cu");
    }

    #[test]
    fn sites_per_line_group_accesses() {
        let sites = fence_sites(&module(), Granularity::SourceLine);
        let lines: Vec<_> = sites
            .iter()
            .map(|s| (s.source.as_ref().unwrap().line, s.accesses.len()))
            .collect();
        // Line 11 holds a shared store besides its four global accesses; lines 9 and 10 hold
        // shared accesses only (and a `__syncthreads()` each), and come after every line with a
        // global one.
        assert_eq!(
            lines,
            [(8, 2), (11, 5), (12, 1), (13, 2), (14, 1), (9, 3), (10, 4)]
        );
    }

    #[test]
    fn relax_orderings_weakens_release_and_acquire_accesses_and_keeps_fences() {
        let text = "\
.version 8.8
.target sm_70
.address_size 64

.visible .entry k(.param .u64 p)
{
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [p];
\tst.release.gpu.u32 [%rd1], 1;
\tld.acquire.gpu.u32 %r1, [%rd1];
\tatom.acq_rel.gpu.add.u32 %r2, [%rd1], 1;
\tld.relaxed.gpu.u32 %r3, [%rd1];
\tmembar.gl;
\tret;
}
";
        let module = parse(text).unwrap();
        let (relaxed, count) = relax_orderings(&module);
        assert_eq!(count, 3);
        let printed = print(&relaxed);
        for expected in [
            "st.relaxed.gpu.u32",
            "atom.relaxed.gpu.add.u32",
            "membar.gl",
        ] {
            assert!(printed.contains(expected), "{expected} in\n{printed}");
        }
        assert_eq!(
            printed.matches("ld.relaxed.gpu.u32").count(),
            2,
            "{printed}"
        );
        assert!(!printed.contains("release") && !printed.contains("acquire"));
        assert_eq!(relax_orderings(&relaxed).1, 0);
    }

    #[test]
    fn insert_all_then_strip_restores_the_fence_free_module() {
        let m = module();
        let sites = fence_sites(&m, Granularity::Instruction);
        let all: Vec<_> = sites.iter().collect();
        let fenced = insert_fences(&m, &all, FenceKind::ScGpu);
        let text = print(&fenced);
        assert_eq!(text.matches("fence.sc.gpu;").count(), fence_count(&all));
        let (stripped, removed) = strip_fences(&fenced);
        assert_eq!(
            removed,
            fence_count(&all) + 1,
            "the original membar.gl goes too"
        );
        let (original_stripped, _) = strip_fences(&m);
        assert_eq!(print(&stripped), print(&original_stripped));
    }

    #[test]
    fn guarded_access_gets_a_guarded_fence() {
        let text = ".visible .entry k(\n.param .u64 p\n)\n{\n\t@!%p1 st.global.u32 [%rd1], %r1;\n\tret;\n}\n";
        let m = parse(text).unwrap();
        let sites = fence_sites(&m, Granularity::Instruction);
        let fenced = print(&insert_fences(&m, &[&sites[0]], FenceKind::MembarGl));
        assert!(
            fenced.contains("@!%p1 st.global.u32 \t[%rd1], %r1;\n\t@!%p1 membar.gl;"),
            "{fenced}"
        );
    }

    /// The fenced PTX of a kernel whose body is `body`, with line 7 of file 1 fenced at line
    /// granularity.
    fn line_seven_fenced(body: &str) -> String {
        let text = format!(
            ".version 7.0\n.target sm_70\n.address_size 64\n.file 1 \"k.cu\"\n\
             .visible .entry k(\n.param .u64 p\n)\n{{\n{body}\tret;\n}}\n"
        );
        let m = parse(&text).unwrap();
        let sites = fence_sites(&m, Granularity::SourceLine);
        let seven = (sites.iter())
            .find(|s| s.source.as_ref().is_some_and(|l| l.line == 7))
            .unwrap();
        print(&insert_fences(&m, &[seven], FenceKind::AcqRelGpu))
    }

    /// Regression (a ring buffer's consumer, `sum += buf[*head % N];`): the line reads `head`,
    /// then `buf`, and a fence after each made the first an acquire for the second, which the
    /// patch's one fence after the statement is not: harden kept two fences whose patch failed
    /// 98.8% of runs. The line's fence now goes after its last access only.
    #[test]
    fn a_lines_accesses_in_one_run_get_one_fence_after_the_last() {
        let fenced = line_seven_fenced(
            "\t.loc 1 7 3\n\tld.volatile.global.u32 %r1, [%rd1];\n\tshl.b32 %r2, %r1, 2;\n\
             \tld.global.u32 %r3, [%rd2];\n\tadd.s32 %r4, %r3, 1;\n\t.loc 1 8 3\n\
             \tst.global.u32 [%rd3], %r4;\n",
        );
        assert_eq!(fenced.matches("fence.acq_rel.gpu").count(), 1, "{fenced}");
        assert!(
            fenced.contains("ld.global.u32 \t%r3, [%rd2];\n\tfence.acq_rel.gpu;"),
            "{fenced}"
        );
    }

    /// What the thread may do between two accesses of a line keeps a fence after each: an
    /// access of another line, a label or branch (the second may be skipped, or reached from
    /// elsewhere), or a guard the first access lacks.
    #[test]
    fn a_lines_accesses_separated_by_control_flow_another_access_or_a_new_guard_keep_their_fences()
    {
        let separated = [
            "\t.loc 1 8 3\n\tst.global.u32 [%rd3], 1;\n\t.loc 1 7 3\n",
            "$L__BB0_1:\n",
            "\t@%p1 bra $L__BB0_2;\n",
        ];
        for between in separated {
            let fenced = line_seven_fenced(&format!(
                "\t.loc 1 7 3\n\tld.global.u32 %r1, [%rd1];\n{between}\tld.global.u32 %r3, [%rd2];\n$L__BB0_2:\n"
            ));
            assert_eq!(fenced.matches("fence.acq_rel.gpu").count(), 2, "{fenced}");
        }
        let guarded = line_seven_fenced(
            "\t.loc 1 7 3\n\tld.global.u32 %r1, [%rd1];\n\t@%p1 ld.global.u32 %r3, [%rd2];\n",
        );
        assert_eq!(guarded.matches("fence.acq_rel.gpu").count(), 2, "{guarded}");
        let same_guard = line_seven_fenced(
            "\t.loc 1 7 3\n\t@%p1 ld.global.u32 %r1, [%rd1];\n\t@%p1 ld.global.u32 %r3, [%rd2];\n",
        );
        assert_eq!(
            same_guard.matches("fence.acq_rel.gpu").count(),
            1,
            "{same_guard}"
        );
        let guard_redefined = line_seven_fenced(
            "\t.loc 1 7 3\n\t@%p1 ld.global.u32 %r1, [%rd1];\n\tsetp.eq.s32 %p1, %r1, 0;\n\
             \t@%p1 ld.global.u32 %r3, [%rd2];\n",
        );
        assert_eq!(guard_redefined.matches("fence.acq_rel.gpu").count(), 2);
    }

    #[test]
    fn param_accesses_are_not_sites() {
        let sites = fence_sites(&module(), Granularity::Instruction);
        assert!(sites.iter().all(|s| !s.accesses[0].ptx.contains(".param")));
    }

    #[test]
    fn selection_parses_lists_and_ranges() {
        let sites = fence_sites(&module(), Granularity::Instruction);
        let ids = |spec| -> Vec<usize> {
            select_sites(&sites, spec)
                .unwrap()
                .iter()
                .map(|s| s.id)
                .collect()
        };
        assert_eq!(ids("0,2,5-7"), [0, 2, 5, 6, 7]);
        assert_eq!(ids("all").len(), sites.len());
        assert!(ids("none").is_empty());
        assert!(select_sites(&sites, "99")
            .unwrap_err()
            .contains("no fence site 99"));
        assert!(select_sites(&sites, "x").is_err());
    }

    #[test]
    fn fence_kinds_round_trip_through_their_names() {
        for kind in FenceKind::ALL {
            assert_eq!(kind.opcode().parse::<FenceKind>().unwrap(), kind);
        }
        assert!("membar.foo"
            .parse::<FenceKind>()
            .unwrap_err()
            .contains("membar.gl"));
    }

    #[test]
    fn snapshot_all_fences_per_line() {
        let m = module();
        let sites = fence_sites(&m, Granularity::SourceLine);
        let all: Vec<_> = sites.iter().collect();
        insta::assert_snapshot!(print(&insert_fences(&m, &all, FenceKind::ScGpu)));
    }

    #[test]
    fn snapshot_stripped() {
        insta::assert_snapshot!(print(&strip_fences(&module()).0));
    }

    /// A fence-stripped variant's patched module: the app's own fence (line 5) goes, the
    /// patch's fence on line 7 stays, and so does the patch's fence inlined from a header at
    /// line 9 (as libcu++'s `cuda::atomic_thread_fence` is); a file named only by its end
    /// matches.
    #[test]
    fn snapshot_stripped_except_the_patch_lines() {
        let text = ".version 7.0\n.target sm_70\n.address_size 64\n\
                    .file 1 \"/app/k.cu\"\n.file 2 \"/cuda/atomic\"\n\
                    .visible .entry k(\n.param .u64 p\n)\n{\n\
                    \t.loc 1 5 3\n\tst.global.u32 [%rd1], %r1;\n\tmembar.gl;\n\
                    \t.loc 1 7 3\n\tfence.sc.gpu;\n\tld.global.u32 %r2, [%rd1];\n\
                    \t.loc 2 40 5, function_name $L__info_string0, inlined_at 1 9 3\n\
                    \tfence.acq_rel.gpu;\n\t.loc 1 10 3\n\tret;\n}\n";
        let module = parse(text).unwrap();
        let kept = [(std::path::PathBuf::from("k.cu"), BTreeSet::from([7, 9]))];
        let (stripped, removed) = strip_fences_except(&module, &kept);
        assert_eq!(removed, 1);
        insta::assert_snapshot!(print(&stripped));
    }

    /// Each site as `#id file:line [function]`, then its accesses with their innermost lines.
    fn listing(sites: &[FenceSite]) -> String {
        let line = |l: &Option<SourceLine>| l.as_ref().map_or("-".to_string(), |l| l.to_string());
        let mut text = String::new();
        for site in sites {
            text += &format!("#{} {} [{}]\n", site.id, line(&site.source), site.function);
            for access in &site.accesses {
                text += &format!("    {}  (inner {})\n", access.ptx, line(&access.inner));
            }
        }
        text
    }

    #[test]
    fn snapshot_sites_of_code_inlined_three_deep_from_a_header() {
        // Both loads belong to the call at k.cu:12, the second one too although the store of
        // line 14 comes between them in the PTX.
        let sites = fence_sites(&parse(NESTED).unwrap(), Granularity::SourceLine);
        insta::assert_snapshot!(listing(&sites));
    }

    #[test]
    fn snapshot_sites_per_inner_line_of_code_inlined_from_a_header() {
        // The two loads of hdr.cuh:5 share a site (the header's line, wherever it is called
        // from), and the store of hdr.cuh:31 gets its own, apart from the call at k.cu:12.
        let sites = fence_sites(&parse(NESTED).unwrap(), Granularity::InnerLine);
        insta::assert_snapshot!(listing(&sites));
    }
}
