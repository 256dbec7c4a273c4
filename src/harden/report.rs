//! What a hardening found, in the terms of the application's source: each fence as `file:line`
//! with the line's text, the CUDA statement that implements the fence kind, and a unified diff
//! that inserts it.
//!
//! Everything here is pure: the caller passes the source text and the directory paths are shown
//! relative to, so that the report can be tested without a compiler or a file system.

use super::patch::{place_statements, Anchor, PatchError};
use super::run::SiteSummary;
use super::statements::{Part, Statements};
use crate::apps::{source_file, KernelSource, PatchedFile};
use crate::ptx::passes::fences::{FenceKind, SourceLine};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A report that cannot be made.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ReportError {
    #[error("fence site {0} is not among the hardening's candidate sites")]
    UnknownSite(usize),
    #[error(transparent)]
    Patch(#[from] PatchError),
}

/// How the patch spells a fence.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum FenceStyle {
    /// The CUDA statement that compiles to exactly the fence kind kept: `__threadfence()` and
    /// friends for the sequentially consistent kinds, libcu++'s `cuda::atomic_thread_fence` for
    /// the release/acquire ones (with `#include <cuda/atomic>`).
    #[default]
    Exact,
    /// `__threadfence()`, `__threadfence_block()` or `__threadfence_system()` only: a
    /// release/acquire kind, which has none of its own, becomes the sequentially consistent fence
    /// of its scope (stronger), and the report says so.
    Threadfence,
}

/// The CUDA statement whose PTX is a fence of `kind` (NVRTC compiles `__threadfence()` to
/// `fence.sc.gpu`, `__threadfence_block()` to `fence.sc.cta`; the release/acquire fences need
/// libcu++, see [`fence_header`]).
pub fn fence_statement(kind: FenceKind) -> &'static str {
    match kind {
        FenceKind::ScGpu | FenceKind::MembarGl => "__threadfence();",
        FenceKind::MembarCta => "__threadfence_block();",
        FenceKind::ScSys => "__threadfence_system();",
        FenceKind::AcqRelGpu => {
            "cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device);"
        }
        FenceKind::AcqRelCta => {
            "cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_block);"
        }
    }
}

/// The kind a patch in `style` writes for a fence of `kind`, and why it differs when it does.
pub fn written_kind(kind: FenceKind, style: FenceStyle) -> (FenceKind, Option<String>) {
    let stronger = match (style, kind) {
        (FenceStyle::Threadfence, FenceKind::AcqRelGpu) => FenceKind::ScGpu,
        (FenceStyle::Threadfence, FenceKind::AcqRelCta) => FenceKind::MembarCta,
        _ => return (kind, None),
    };
    let why = format!(
        "{kind} has no __threadfence form (those are sequentially consistent); written as `{}` \
         ({stronger}), which orders everything {kind} does",
        fence_statement(stronger).trim_end_matches(';')
    );
    (stronger, Some(why))
}

/// The header a fence statement needs, if any.
pub fn fence_header(kind: FenceKind) -> Option<&'static str> {
    matches!(kind, FenceKind::AcqRelGpu | FenceKind::AcqRelCta).then_some("<cuda/atomic>")
}

/// Whether `text` already has a line `#include <header>` (or with quotes), spaces allowed.
fn includes(text: &str, header: &str) -> bool {
    let name = header.trim_matches(['<', '>']);
    text.lines().any(|line| {
        let included = line
            .trim_start()
            .strip_prefix('#')
            .and_then(|rest| rest.trim_start().strip_prefix("include"))
            .map(|rest| rest.trim().trim_matches(['<', '>', '"']));
        included == Some(name)
    })
}

/// The line after which a patch adds an `#include` to `text` (0: the top): below the file's
/// opening comments and below its include guard (`#pragma once`, or `#ifndef X` and
/// `#define X`), so that a header keeps its guard first and a licence stays on top.
fn include_anchor(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut at = 0;
    let mut in_comment = false;
    while let Some(line) = lines.get(at) {
        if in_comment {
            in_comment = !line.contains("*/");
        } else if let Some(rest) = line.strip_prefix("/*") {
            in_comment = !rest.contains("*/");
        } else if !(line.is_empty() || line.starts_with("//")) {
            break;
        }
        at += 1;
    }
    let directive = |i: usize, name: &str| {
        let line = lines.get(i)?.strip_prefix('#')?.trim_start();
        line.strip_prefix(name).map(str::trim)
    };
    if directive(at, "pragma") == Some("once") {
        return at + 1;
    }
    match (directive(at, "ifndef"), directive(at + 1, "define")) {
        (Some(guard), Some(defined)) if defined.split_whitespace().next() == Some(guard) => at + 2,
        _ => at,
    }
}

/// A chosen fence that goes after a line of the app's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedFence {
    pub site: SiteSummary,
    /// The file it goes in, as the diff names it (relative to [`FenceReport::root`]).
    pub path: String,
    /// The fence's kind, and the CUDA statement that is it.
    pub kind: FenceKind,
    pub statement: &'static str,
    /// Why the statement is of a stronger kind than `kind` (see [`written_kind`]), if it is.
    pub note: Option<String>,
    /// The site's 1-based source line (of the outermost call, for inlined code).
    pub line: usize,
    /// That line's text, trimmed.
    pub text: String,
    /// Where the statement goes: each file (named as `path` is) and line it is anchored at.
    /// For a site whose accesses are on its own line, after that line; for one whose accesses
    /// are inlined from the app's own functions, after their lines in those functions; see
    /// [`anchors_of`].
    pub anchors: Vec<(String, Anchor)>,
    /// Where the fence goes, in words, when that is not simply after the site's line (and
    /// what of it the patch leaves out, and why).
    pub placement: Option<String>,
    /// Whether the patch holds the fence (at least one of its statements): false when no
    /// place for it could be found that compiles and orders its accesses (`placement` says why).
    pub in_patch: bool,
}

impl PlacedFence {
    /// Whether some of its statements go inside functions of the app's files that its line
    /// calls (not just at its own line): those functions' lines could be sites of their own
    /// (`--granularity inner-line`).
    pub fn inside_helpers(&self) -> bool {
        (self.anchors.iter()).any(|(path, anchor)| (path, anchor.line()) != (&self.path, self.line))
    }
}

/// The chosen fences as source changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceReport {
    /// The statement of the hardening's fence kind.
    pub statement: &'static str,
    /// Headers the inserted statements need; the patch adds an `#include` of each to every
    /// file it fences that lacks it, near its top (see [`include_anchor`]).
    pub headers: Vec<&'static str>,
    /// The app's (first) source path as the diff names it (`a/<path>`).
    pub path: String,
    /// The directory the diff applies in (with `git apply` or `patch -p1`).
    pub root: PathBuf,
    pub placed: Vec<PlacedFence>,
    /// Chosen sites without a line in the app's source files (no line info, or a file that is
    /// not the app's): listed with their PTX, and left out of the patch.
    pub unplaced: Vec<SiteSummary>,
    /// The unified diff; empty when no fence is placed.
    pub patch: String,
    /// Each file the patch changes, with its text once patched: what `gpuwmm harden` compiles
    /// and runs to check its own patch.
    pub patched: Vec<PatchedFile>,
}

impl FenceReport {
    /// The kept fences the patch holds none of (`#id`), placed or not.
    pub fn left_out(&self) -> Vec<String> {
        (self.placed.iter())
            .filter(|fence| !fence.in_patch)
            .map(|fence| fence.site.id)
            .chain(self.unplaced.iter().map(|site| site.id))
            .map(|id| format!("#{id}"))
            .collect()
    }
}

/// The report for the fences `chosen` among `sites`, all of `kind`, in `source`, with paths
/// relative to `cwd` when the source lies under it.
pub fn fence_report(
    chosen: &[usize],
    sites: &[SiteSummary],
    source: &KernelSource,
    kind: FenceKind,
    cwd: &Path,
) -> Result<FenceReport, ReportError> {
    let kinded: Vec<(usize, FenceKind)> = chosen.iter().map(|&id| (id, kind)).collect();
    kinded_fence_report(&kinded, sites, source, kind, cwd)
}

/// [`fence_report`] with a kind per fence (`base` is the hardening's own kind), in the
/// [`FenceStyle::Exact`] style. Fences go in whichever of the source's files their site's line
/// is in; the patch has a part per file.
pub fn kinded_fence_report(
    chosen: &[(usize, FenceKind)],
    sites: &[SiteSummary],
    source: &KernelSource,
    base: FenceKind,
    cwd: &Path,
) -> Result<FenceReport, ReportError> {
    styled_fence_report(chosen, sites, source, base, cwd, FenceStyle::Exact)
}

/// [`kinded_fence_report`] with fences written in `style`.
pub fn styled_fence_report(
    chosen: &[(usize, FenceKind)],
    sites: &[SiteSummary],
    source: &KernelSource,
    base: FenceKind,
    cwd: &Path,
    style: FenceStyle,
) -> Result<FenceReport, ReportError> {
    let files: Vec<(&Path, &str)> = source.files().collect();
    let root = common_root(files.iter().map(|(p, _)| *p), cwd);
    let calls = accesses_per_call(sites);
    let mut placed = Vec::new();
    let mut unplaced = Vec::new();
    for &(id, kind) in chosen {
        let site = sites
            .iter()
            .find(|s| s.id == id)
            .ok_or(ReportError::UnknownSite(id))?;
        match place(site, kind, style, (&files, &root, &calls)) {
            Some(fence) => placed.push(fence),
            None => unplaced.push(site.clone()),
        }
    }
    for fence in &mut placed {
        let Some((_, text)) = files
            .iter()
            .find(|(p, _)| diff_name(p, &root) == fence.path)
        else {
            continue;
        };
        if let Some(note) = inseparable_note(fence, sites, &Statements::parse(text)) {
            fence.anchors.clear();
            fence.placement = join_notes(fence.placement.take(), vec![note]);
        }
    }
    let mut patch = String::new();
    let mut patched = Vec::new();
    // Per placed fence: whether any of its statements is in the patch, and the notes on how.
    let mut in_patch = vec![false; placed.len()];
    let mut notes: Vec<Vec<String>> = vec![Vec::new(); placed.len()];
    for (path, text) in &files {
        let name = diff_name(path, &root);
        let here: Vec<(usize, Anchor)> = (placed.iter().enumerate())
            .flat_map(|(i, f)| f.anchors.iter().map(move |a| (i, a)))
            .filter(|(_, (file, _))| *file == name)
            .map(|(i, &(_, anchor))| (i, anchor))
            .collect();
        if here.is_empty() {
            continue;
        }
        let fenced = |i: usize| placed[i].statement;
        let mut needed: Vec<&'static str> = here
            .iter()
            .filter_map(|&(i, _)| fence_header(written_kind(placed[i].kind, style).0))
            .filter(|h| !includes(text, h))
            .collect();
        needed.sort_unstable();
        needed.dedup();
        let include: Vec<String> = needed.iter().map(|h| format!("#include {h}")).collect();
        let insertions: Vec<(Anchor, &str)> = include
            .iter()
            .map(|line| (Anchor::Own(include_anchor(text)), line.as_str()))
            .chain(here.iter().map(|&(i, anchor)| (anchor, fenced(i))))
            .collect();
        let result = place_statements(&name, text, &insertions)?;
        for (k, &(i, _)) in here.iter().enumerate() {
            in_patch[i] |= result.in_patch[include.len() + k];
            for note in &result.notes[include.len() + k] {
                let note = format!("{name}: {note}");
                if !notes[i].contains(&note) {
                    notes[i].push(note);
                }
            }
        }
        if !result.diff.is_empty() {
            patched.push(PatchedFile {
                path: path.to_path_buf(),
                text: result.text,
                changed_lines: result.changed_lines.iter().map(|&l| l as u32).collect(),
            });
        }
        patch.push_str(&result.diff);
    }
    for ((fence, fenced), notes) in placed.iter_mut().zip(in_patch).zip(notes) {
        fence.in_patch = fenced;
        fence.placement = join_notes(fence.placement.take(), notes);
    }
    let mut headers: Vec<&'static str> = placed
        .iter()
        .filter_map(|f| fence_header(written_kind(f.kind, style).0))
        .collect();
    headers.sort_unstable();
    headers.dedup();
    Ok(FenceReport {
        statement: fence_statement(written_kind(base, style).0),
        headers,
        path: diff_name(&source.path, &root),
        root,
        placed,
        unplaced,
        patch,
        patched,
    })
}

/// For each inlined call (keyed by its inlining chain, outermost frame first, the call's own
/// line last), how many different places its accesses are at, over all the module's sites: the
/// distinct chains that start with it. The copies of an unrolled loop are one place, so a call
/// with one place makes one access each time it runs.
type CallAccesses = HashMap<Vec<SourceLine>, usize>;

/// [`CallAccesses`] of `sites` (those recorded without frames count for nothing).
fn accesses_per_call(sites: &[SiteSummary]) -> CallAccesses {
    let mut chains: Vec<&Vec<SourceLine>> = sites.iter().flat_map(|s| &s.frames).collect();
    chains.sort();
    chains.dedup();
    let mut calls = CallAccesses::new();
    for frames in chains {
        for depth in 1..=frames.len() {
            *calls.entry(frames[..depth].to_vec()).or_default() += 1;
        }
    }
    calls
}

/// What placing a fence needs to know of the app: its files, the folder the diff applies in,
/// and the accesses of each inlined call.
type AppView<'a> = (&'a [(&'a Path, &'a str)], &'a Path, &'a CallAccesses);

/// `site` placed in the one of the app's files its line is in, if any (see [`anchors_of`]).
fn place(
    site: &SiteSummary,
    kind: FenceKind,
    style: FenceStyle,
    (files, root, calls): AppView,
) -> Option<PlacedFence> {
    let file = site.file.as_deref()?;
    let line = site.line? as usize;
    let (path, text) = app_file(files, file)?;
    if line == 0 {
        return None;
    }
    let text = text.lines().nth(line - 1)?.trim().to_string();
    let path = diff_name(path, root);
    let (anchors, placement) = anchors_of(site, (files, root, calls), (&path, line))?;
    let (written, note) = written_kind(kind, style);
    Some(PlacedFence {
        site: site.clone(),
        path,
        kind,
        statement: fence_statement(written),
        note,
        line,
        text,
        anchors,
        placement,
        in_patch: true,
    })
}

/// Why `fence` cannot be written in the source, when its line is one simple statement and a
/// later site of its function on that line has another kind of access (another opcode) than
/// one the fence follows: the statement's fence, the only one the patch can write, would follow
/// that access too (a macro that stores the data then raises the flag, a load in one expression
/// before another), which is not the program the hardening checked. `--granularity
/// instruction` makes such sites. Accesses of one opcode are taken for copies of one access (an
/// unrolled loop), which the statement's fence follows one by one, as the hardening's did; on a
/// line of several statements the patch fences after each of them, so nothing is said.
fn inseparable_note(
    fence: &PlacedFence,
    sites: &[SiteSummary],
    statements: &Statements<'_>,
) -> Option<String> {
    let parts = statements.parts_on_line(fence.line);
    if fence.inside_helpers() || !matches!(parts[..], [(_, Part::Statement)]) {
        return None;
    }
    let site = &fence.site;
    fn opcode(s: &SiteSummary, i: usize) -> Option<&str> {
        s.ptx.get(i)?.split_whitespace().next()
    }
    let fenced: Vec<&str> = (site.fenced_accesses().into_iter())
        .filter_map(|i| opcode(site, i))
        .collect();
    let later = sites
        .iter()
        .filter(|t| t.id > site.id && t.function == site.function)
        .filter(|t| (&t.file, t.line) == (&site.file, site.line))
        .find(|t| (0..t.ptx.len()).any(|i| opcode(t, i).is_some_and(|o| !fenced.contains(&o))))?;
    Some(format!(
        "left out of the patch: line {} is one statement, in which site #{} ({}) comes after \
         the access this fence follows, and a fence after the statement would follow both (a \
         macro, or one expression); split the statement and fence between its parts by hand",
        fence.line,
        later.id,
        later.ptx.join("; ")
    ))
}

/// `placement` with `notes` after it, `; ` between.
fn join_notes(placement: Option<String>, notes: Vec<String>) -> Option<String> {
    let all: Vec<String> = placement.into_iter().chain(notes).collect();
    (!all.is_empty()).then(|| all.join("; "))
}

/// The one of `files` that `file` names, if any ([`source_file`]).
fn app_file<'f>(files: &[(&'f Path, &'f str)], file: &str) -> Option<(&'f Path, &'f str)> {
    source_file(files.iter().copied(), Path::new(file))
}

/// Where a fence goes ([`PlacedFence::anchors`]) and, when not just after its site's line, in
/// words.
type Placement = (Vec<(String, Anchor)>, Option<String>);

/// Where the fence of `site` (whose own line is `own`, a file as the diff names it and a line)
/// goes, so that in the source it sits between the same accesses as the PTX fence after each run
/// of the site's accesses, with a note when that is not just after `own`:
/// - an access on the site's own line: after that line;
/// - an access inlined from a function of the app's own files (the site's line calls it): after
///   the access's line inside that function, the innermost frame of its inlining chain (the
///   fence then also runs wherever else that function is called: more fences, none missing);
/// - an access inlined from a file that is not the app's (a library header): after the innermost
///   call in the app's files that leads to it when that call's accesses are all at one place (a
///   `cuda::atomic_ref` load or store, maybe unrolled: after the call is after the access, as
///   the PTX fence is); else before and after that call, which orders its accesses against the
///   code around the call but not against each other (the patch cannot change the header).
///   Frames carry no column, so two such calls on one line (`a.load() + b.load()`) are one
///   place: the fence after the line does not order the two against each other, as the PTX
///   fence between them does, and no fence outside the header could.
///
/// A site recorded without its accesses' inlining chains (an older journal) goes after `own`.
fn anchors_of(
    site: &SiteSummary,
    (files, root, calls): AppView,
    own: (&str, usize),
) -> Option<Placement> {
    let after_own = vec![(own.0.to_string(), Anchor::After(own.1))];
    if site.frames.len() != site.ptx.len() || site.frames.iter().any(Vec::is_empty) {
        return Some((after_own, None));
    }
    let mut anchors: Vec<(String, Anchor)> = Vec::new();
    let mut outside: Vec<String> = Vec::new();
    for frames in &site.frames {
        let in_app = |f: &SourceLine| app_file(files, &f.file).map(|(p, _)| diff_name(p, root));
        let Some((depth, path)) =
            (frames.iter().enumerate().rev()).find_map(|(i, f)| in_app(f).map(|path| (i, path)))
        else {
            continue;
        };
        let line = frames[depth].line as usize;
        let alone = || calls.get(&frames[..=depth]).is_some_and(|&n| n == 1);
        if depth + 1 == frames.len() || alone() {
            anchors.push((path, Anchor::After(line)));
        } else {
            outside.push(frames[depth + 1].file.clone());
            anchors.push((path.clone(), Anchor::Before(line)));
            anchors.push((path, Anchor::After(line)));
        }
    }
    // In file order, and at one line the fence before it first.
    anchors.sort_by_key(|(path, a)| (path.clone(), a.line(), matches!(a, Anchor::After(_))));
    anchors.dedup();
    if anchors.is_empty() {
        return None;
    }
    if anchors == after_own {
        return Some((anchors, None));
    }
    Some((
        anchors.clone(),
        Some(placement_note(&anchors, &outside, own)),
    ))
}

/// Where the fence goes, in words, for [`anchors_of`]'s `anchors`.
fn placement_note(anchors: &[(String, Anchor)], outside: &[String], own: (&str, usize)) -> String {
    let mut after: Vec<String> = Vec::new();
    let mut around: Vec<String> = Vec::new();
    for (path, anchor) in anchors {
        match anchor {
            Anchor::After(line) if !anchors.contains(&(path.clone(), Anchor::Before(*line))) => {
                after.push(format!("{path}:{line}"))
            }
            Anchor::After(_) | Anchor::Own(_) => {}
            Anchor::Before(line) => around.push(format!("{path}:{line}")),
        }
    }
    let mut parts = Vec::new();
    if !after.is_empty() {
        parts.push(format!(
            "its accesses are in code inlined at {}:{}, so the fence goes after each of their \
             lines there: {} (inside the functions called, so it also runs where they are \
             called from elsewhere)",
            own.0,
            own.1,
            after.join(", ")
        ));
    }
    if !around.is_empty() {
        let mut headers = outside.to_vec();
        headers.sort();
        headers.dedup();
        parts.push(format!(
            "accesses inside {} cannot be fenced there (not the app's files): the fence goes \
             before and after the call at {}, which orders them against the code around the \
             call but not against each other",
            headers.join(", "),
            around.join(", ")
        ));
    }
    parts.join("; ")
}

/// The folder a diff of all `paths` applies in: `cwd` when each lies under it (or is
/// relative), else the deepest folder that holds them all (the app's folder for an app whose
/// files are all in it; the file system's root at worst).
fn common_root<'p>(paths: impl Iterator<Item = &'p Path>, cwd: &Path) -> PathBuf {
    let paths: Vec<&Path> = paths.collect();
    if paths.iter().all(|p| diff_path(p, cwd).0 == cwd) {
        return cwd.to_path_buf();
    }
    let mut root = paths
        .first()
        .and_then(|p| p.parent())
        .unwrap_or(Path::new("/"));
    while !paths.iter().all(|p| p.starts_with(root)) {
        root = root.parent().unwrap_or(Path::new("/"));
    }
    match root.as_os_str().is_empty() {
        true => PathBuf::from("/"),
        false => root.to_path_buf(),
    }
}

/// `path` as a diff applied in `root` names it.
fn diff_name(path: &Path, root: &Path) -> String {
    diff_path(path, root).1
}

/// Where a diff of `path` applies and the path it names: relative to `cwd` when `path` lies
/// under it (or is relative already), else relative to the file system's root.
pub fn diff_path(path: &Path, cwd: &Path) -> (PathBuf, String) {
    if path.is_relative() {
        return (cwd.to_path_buf(), slashed(path));
    }
    match path.strip_prefix(cwd) {
        Ok(relative) => (cwd.to_path_buf(), slashed(relative)),
        Err(_) => {
            let root = PathBuf::from("/");
            let relative = path.strip_prefix(&root).unwrap_or(path);
            (root, slashed(relative))
        }
    }
}

/// `path` with `/` between its parts, as diffs name files.
fn slashed(path: &Path) -> String {
    let parts: Vec<String> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::super::patch::insert_statements;
    use super::*;

    const TEXT: &str = "void k() {\n  x = 1;\n  flag = 1;\n}\n";

    /// Where the app's kernel file is (the working directory being `/repo`).
    const KERNEL: &str = "/repo/apps/k/kernel.cu";

    /// The app whose kernel file holds `text`.
    fn source_of(text: impl Into<String>) -> KernelSource {
        KernelSource::single(PathBuf::from(KERNEL), text.into())
    }

    fn source() -> KernelSource {
        source_of(TEXT)
    }

    fn site(id: usize, file: Option<&str>, line: Option<u32>) -> SiteSummary {
        SiteSummary {
            id,
            function: "k".into(),
            file: file.map(str::to_string),
            line,
            ptx: vec![format!("st.global.u32 [%rd{id}], 1")],
            frames: Vec::new(),
            fence_after: vec![0],
        }
    }

    fn sites() -> Vec<SiteSummary> {
        vec![
            site(0, Some(KERNEL), Some(2)),
            site(1, Some(KERNEL), Some(3)),
            site(2, None, None),
            site(3, Some("/usr/include/other.h"), Some(7)),
        ]
    }

    /// [`sites`] one line further down, for a kernel file with a line put above [`TEXT`].
    fn sites_a_line_down() -> Vec<SiteSummary> {
        let mut shifted = sites();
        for site in &mut shifted {
            site.line = site.line.map(|l| l + 1);
        }
        shifted
    }

    /// The report of fencing `ids` among `sites` in `source` at gpu scope, seen from `/repo`.
    fn report_in_repo(ids: &[usize], sites: &[SiteSummary], source: &KernelSource) -> FenceReport {
        fence_report(ids, sites, source, FenceKind::ScGpu, Path::new("/repo")).unwrap()
    }

    /// Two sites on line 2 of `text` (its kernel file): a plain store, then a store of `opcode`.
    fn two_accesses_on_line_two(opcode: &str) -> Vec<SiteSummary> {
        let mut second = site(1, Some(KERNEL), Some(2));
        second.ptx = vec![format!("{opcode} [%rd2], 1")];
        vec![site(0, Some(KERNEL), Some(2)), second]
    }

    /// Bug (a handoff written as a macro, `--granularity instruction`): the fence after the
    /// macro's data store went into the patch after the whole statement, after its flag store
    /// too; the patched app failed 976 of 2,000 runs. On a line of one statement, a fence whose
    /// access a later access of another kind follows is left out of the patch, with a note.
    #[test]
    fn a_fence_inside_one_statement_is_left_out_of_the_patch_with_a_note() {
        let text = "void k() {\n  PUBLISH(x, flag, 1);\n}\n";
        let sites = two_accesses_on_line_two("st.volatile.global.u32");
        let report = report_in_repo(&[0], &sites, &source_of(text));
        let fence = &report.placed[0];
        assert!(!fence.in_patch);
        assert!(report.patch.is_empty(), "{}", report.patch);
        let placement = fence.placement.as_deref().unwrap_or_default();
        assert!(placement.contains("left out of the patch"), "{placement}");
        assert!(placement.contains("site #1"), "{placement}");
    }

    /// Where the line has several statements the patch fences after each, between the two
    /// accesses; copies of one access (an unrolled loop) are each followed by the statement's
    /// fence, as by the hardening's. Either way the fence stays in the patch.
    #[test]
    fn a_fence_between_statements_or_after_a_copied_access_stays_in_the_patch() {
        let cases = [
            ("  x = 1; flag = 1;", "st.volatile.global.u32"),
            ("  x[i] = 1;", "st.global.u32"),
        ];
        for (line, opcode) in cases {
            let text = format!("void k() {{\n{line}\n}}\n");
            let report = report_in_repo(&[0], &two_accesses_on_line_two(opcode), &source_of(text));
            assert!(report.placed[0].in_patch, "{line}");
            let placement = report.placed[0].placement.as_deref().unwrap_or_default();
            assert!(!placement.contains("left out"), "{line}: {placement}");
            assert!(!report.patch.is_empty(), "{line}");
        }
    }

    #[test]
    fn a_relative_source_path_matches_the_absolute_one_nvrtc_records() {
        let relative = KernelSource::single(PathBuf::from("apps/k/kernel.cu"), TEXT.to_string());
        let report = report_in_repo(&[0], &sites(), &relative);
        assert_eq!(report.placed.len(), 1);
        assert!(report.unplaced.is_empty());
    }

    /// An app of several files: each fence goes into the file its site's line is in, and the
    /// patch has a part per file, in the source's file order.
    #[test]
    fn fences_go_into_the_file_of_their_line_among_several() {
        let header = "template <typename T>\nvoid publish(T *p) {\n  *p = 1;\n}\n";
        let mut source = source();
        source.others = vec![(PathBuf::from("/repo/apps/k/util.cuh"), header.to_string())];
        let sites = vec![
            site(0, Some(KERNEL), Some(2)),
            site(1, Some("/repo/apps/k/util.cuh"), Some(3)),
        ];
        let report = report_in_repo(&[0, 1], &sites, &source);
        let placed: Vec<(&str, usize)> = (report.placed.iter())
            .map(|f| (f.path.as_str(), f.line))
            .collect();
        assert_eq!(placed, [("apps/k/kernel.cu", 2), ("apps/k/util.cuh", 3)]);
        assert_eq!(report.placed[1].text, "*p = 1;");
        let kernel_part = report.patch.find("--- a/apps/k/kernel.cu").unwrap();
        let header_part = report.patch.find("--- a/apps/k/util.cuh").unwrap();
        assert!(kernel_part < header_part, "{}", report.patch);
        assert!(
            report.patch.contains(" *p = 1;\n+  __threadfence();\n"),
            "{}",
            report.patch
        );
        // A file outside the working directory moves the root of the whole patch to `/`.
        source.others[0].0 = PathBuf::from("/elsewhere/util.cuh");
        let sites = vec![site(1, Some("/elsewhere/util.cuh"), Some(3))];
        let report = report_in_repo(&[1], &sites, &source);
        assert_eq!(report.root, PathBuf::from("/"));
        assert_eq!(report.placed[0].path, "elsewhere/util.cuh");
    }

    /// Bug: an app folder outside the working directory gave a patch to apply in `/`, its
    /// files named `a/tmp/proj/kernel.cu`; it applies in the deepest folder holding them all
    /// now, the app's own.
    #[test]
    fn a_patch_outside_the_working_directory_applies_in_the_apps_folder() {
        let mut source = source();
        source.path = PathBuf::from("/tmp/proj/src/kernel.cu");
        source.others = vec![(PathBuf::from("/tmp/proj/inc/util.cuh"), "int x;\n".into())];
        let sites = vec![site(0, Some("/tmp/proj/src/kernel.cu"), Some(2))];
        let report =
            fence_report(&[0], &sites, &source, FenceKind::ScGpu, Path::new("/w")).unwrap();
        assert_eq!(report.root, PathBuf::from("/tmp/proj"));
        assert_eq!(report.placed[0].path, "src/kernel.cu");
        assert!(
            report.patch.starts_with("--- a/src/kernel.cu\n"),
            "{}",
            report.patch
        );
    }

    #[test]
    fn release_acquire_fences_are_written_with_libcudacxx_and_name_its_header() {
        let report = kinded_fence_report(
            &[(0, FenceKind::AcqRelCta), (1, FenceKind::ScGpu)],
            &sites(),
            &source(),
            FenceKind::ScGpu,
            Path::new("/repo"),
        )
        .unwrap();
        assert_eq!(report.headers, vec!["<cuda/atomic>"]);
        assert!(report.patch.contains(
            "+  cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_block);"
        ));
        assert!(report.patch.contains("+  __threadfence();"));
    }

    #[test]
    fn an_include_goes_below_opening_comments_and_the_include_guard() {
        assert_eq!(include_anchor("void k() {}\n"), 0);
        assert_eq!(include_anchor("// licence\n\nvoid k() {}\n"), 2);
        assert_eq!(include_anchor("/* licence\n * more\n */\nvoid k() {}\n"), 3);
        assert_eq!(include_anchor("#pragma once\nstruct S {};\n"), 1);
        assert_eq!(
            include_anchor("// q.cuh\n# pragma  once\nstruct S {};\n"),
            2
        );
        assert_eq!(
            include_anchor("#ifndef Q_H\n#define Q_H\nstruct S {};\n#endif\n"),
            2
        );
        // Not a guard: the define names something else.
        assert_eq!(include_anchor("#ifndef N\n#define M 4\n#endif\n"), 0);
    }

    /// Regression: the patch put `#include <cuda/atomic>` on a header's first line, above its
    /// `#pragma once`.
    #[test]
    fn a_header_gets_its_include_below_its_pragma_once() {
        let chosen = [(0, FenceKind::AcqRelGpu)];
        let shifted = sites_a_line_down();
        let source = source_of(format!("#pragma once\n{TEXT}"));
        let cwd = Path::new("/repo");
        let patch = kinded_fence_report(&chosen, &shifted, &source, FenceKind::ScGpu, cwd)
            .unwrap()
            .patch;
        assert!(
            patch.contains(" #pragma once\n+#include <cuda/atomic>\n"),
            "{patch}"
        );
    }

    #[test]
    fn a_patch_with_libcudacxx_fences_includes_their_header_once_at_the_top() {
        let chosen = [(0, FenceKind::AcqRelCta), (1, FenceKind::AcqRelGpu)];
        let report = |text: &str| {
            let source = source_of(text);
            let cwd = Path::new("/repo");
            kinded_fence_report(&chosen, &sites(), &source, FenceKind::ScGpu, cwd).unwrap()
        };
        let patch = report(TEXT).patch;
        assert!(
            patch.starts_with(
                "--- a/apps/k/kernel.cu\n+++ b/apps/k/kernel.cu\n@@ -1,4 +1,7 @@\n\
                 +#include <cuda/atomic>\n void k() {\n"
            ),
            "{patch}"
        );
        assert_eq!(patch.matches("#include").count(), 1, "{patch}");
        // A source that includes it already (any spacing) gets no second one.
        let included = format!("# include  <cuda/atomic>\n{TEXT}");
        let sites_moved: String = included.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(sites_moved + "\n", TEXT);
        let again = kinded_fence_report(
            &chosen,
            &sites_a_line_down(),
            &source_of(included),
            FenceKind::ScGpu,
            Path::new("/repo"),
        )
        .unwrap();
        assert!(!again.patch.contains("#include"), "{}", again.patch);
        assert_eq!(again.placed.len(), 2);
    }

    #[test]
    fn the_threadfence_style_writes_release_acquire_fences_as_the_sc_fence_of_their_scope() {
        let chosen = [(0, FenceKind::AcqRelCta), (1, FenceKind::AcqRelGpu)];
        let report = styled_fence_report(
            &chosen,
            &sites(),
            &source(),
            FenceKind::ScGpu,
            Path::new("/repo"),
            FenceStyle::Threadfence,
        )
        .unwrap();
        assert!(report.headers.is_empty());
        assert!(!report.patch.contains("cuda::"), "{}", report.patch);
        assert!(report
            .patch
            .contains("+  __threadfence_block();\n   flag = 1;"));
        assert!(report.patch.contains("+  __threadfence();\n }"));
        let notes: Vec<&str> = report
            .placed
            .iter()
            .filter_map(|f| f.note.as_deref())
            .collect();
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("fence.acq_rel.cta has no __threadfence form"));
        assert!(notes[0].contains("`__threadfence_block()`"));
        // The kinds that have one are written as they are, without a note.
        for kind in [FenceKind::ScGpu, FenceKind::MembarCta, FenceKind::ScSys] {
            assert_eq!(written_kind(kind, FenceStyle::Threadfence), (kind, None));
        }
    }

    #[test]
    fn statements_follow_the_fence_kind() {
        assert_eq!(fence_statement(FenceKind::ScGpu), "__threadfence();");
        assert_eq!(fence_statement(FenceKind::MembarGl), "__threadfence();");
        assert_eq!(
            fence_statement(FenceKind::AcqRelGpu),
            "cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device);"
        );
        assert_eq!(
            fence_statement(FenceKind::MembarCta),
            "__threadfence_block();"
        );
        assert_eq!(fence_statement(FenceKind::ScSys), "__threadfence_system();");
        for kind in FenceKind::ALL {
            let needs = fence_statement(kind).starts_with("cuda::");
            assert_eq!(fence_header(kind).is_some(), needs, "{kind}");
        }
    }

    #[test]
    fn a_fence_is_placed_after_its_line_with_a_relative_diff() {
        let report = report_in_repo(&[0], &sites(), &source());
        assert_eq!(report.placed.len(), 1);
        assert_eq!(
            (report.placed[0].line, report.placed[0].text.as_str()),
            (2, "x = 1;")
        );
        assert!(report.unplaced.is_empty());
        assert_eq!(report.path, "apps/k/kernel.cu");
        assert_eq!(report.root, PathBuf::from("/repo"));
        let expected = "--- a/apps/k/kernel.cu\n+++ b/apps/k/kernel.cu\n@@ -1,4 +1,5 @@\n \
                        void k() {\n   x = 1;\n+  __threadfence();\n   flag = 1;\n }\n";
        assert_eq!(report.patch, expected);
    }

    #[test]
    fn sites_without_a_source_line_are_listed_but_not_patched() {
        let report = fence_report(
            &[1, 2, 3],
            &sites(),
            &source(),
            FenceKind::MembarCta,
            Path::new("/repo"),
        )
        .unwrap();
        let placed: Vec<usize> = report.placed.iter().map(|f| f.site.id).collect();
        let unplaced: Vec<usize> = report.unplaced.iter().map(|s| s.id).collect();
        assert_eq!((placed, unplaced), (vec![1], vec![2, 3]));
        assert_eq!(report.patch.matches("+  __threadfence_block();").count(), 1);
        let none = fence_report(&[2], &sites(), &source(), FenceKind::ScGpu, Path::new("/"));
        assert_eq!(none.unwrap().patch, "");
    }

    #[test]
    fn an_unknown_site_is_an_error() {
        let error = fence_report(&[9], &sites(), &source(), FenceKind::ScGpu, Path::new("/"));
        assert_eq!(error, Err(ReportError::UnknownSite(9)));
    }

    #[test]
    fn paths_outside_the_directory_are_relative_to_the_root() {
        let (root, shown) = diff_path(Path::new(KERNEL), Path::new("/elsewhere"));
        assert_eq!(
            (root, shown.as_str()),
            ("/".into(), "repo/apps/k/kernel.cu")
        );
        let (root, shown) = diff_path(Path::new("mine/kernel.cu"), Path::new("/w"));
        assert_eq!((root, shown.as_str()), ("/w".into(), "mine/kernel.cu"));
    }

    fn frame(file: &str, line: u32) -> SourceLine {
        SourceLine {
            file: file.into(),
            line,
        }
    }

    /// The report of the one site `site` (id 0) in `source`.
    fn report_of(site: SiteSummary, source: &KernelSource) -> FenceReport {
        report_in_repo(&[0], &[site], source)
    }

    /// Where the first placed fence goes, as its anchors say (its files aside).
    fn anchors_of(report: &FenceReport) -> Vec<Anchor> {
        report.placed[0].anchors.iter().map(|(_, a)| *a).collect()
    }

    /// Asserts that the first placed fence's placement note says each of `phrases`.
    fn assert_placement_says(report: &FenceReport, phrases: &[&str]) {
        let placement = report.placed[0].placement.as_deref().unwrap();
        for phrase in phrases {
            assert!(placement.contains(phrase), "{placement}");
        }
    }

    /// Regression (ls-bh-nf's `insert_body(b, t, i);` at kernel.cu:392): a site on a line that
    /// calls a function inlined from the app's own source was fenced once after the call, while
    /// the PTX fence follows each access inside the call, so the patched app failed its check.
    /// The fence goes after each access's line inside the function (the innermost frame).
    #[test]
    fn fence_for_a_call_inlined_from_the_app_goes_after_each_access_inside_it() {
        let text = "void helper(int *p) {\n  p[0] = 1;\n  if (p[1]) {\n    p[2] = 1;\n  }\n}\nvoid k(int *p) {\n  helper(p);\n  x = 1;\n}\n";
        let source = source_of(text);
        let mut site = site(0, Some(KERNEL), Some(8));
        site.ptx = vec!["st a".into(), "ld b".into(), "st c".into()];
        site.frames = vec![
            vec![frame(KERNEL, 8), frame(KERNEL, 2)],
            vec![frame(KERNEL, 8), frame(KERNEL, 3)],
            vec![frame(KERNEL, 8), frame(KERNEL, 4)],
        ];
        let report = report_of(site, &source);
        let fenced = insert_statements(
            text,
            &(report.placed[0].anchors.iter())
                .map(|(_, a)| (*a, "F;"))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert_eq!(
            fenced,
            "void helper(int *p) {\n  p[0] = 1;\n  F;\n  if (p[1]) {\n    F;\n    p[2] = 1;\n    F;\n  }\n  F;\n}\nvoid k(int *p) {\n  helper(p);\n  x = 1;\n}\n"
        );
        assert_eq!(report.patch.matches("+    __threadfence();").count(), 2);
        assert_eq!(report.patch.matches("+  __threadfence();").count(), 2);
        assert_eq!(report.placed[0].line, 8, "the site keeps its own line");
        assert!(report.placed[0].inside_helpers());
        assert_placement_says(
            &report,
            &[
                "inlined at apps/k/kernel.cu:8",
                "apps/k/kernel.cu:2, apps/k/kernel.cu:3, apps/k/kernel.cu:4",
            ],
        );
    }

    /// Accesses inlined from a library header cannot be fenced where they are: with two of them
    /// in one call, the fence goes before and after the app's call that leads to them, and the
    /// report says what that misses (the fence between them).
    #[test]
    fn fence_for_a_call_inlined_from_a_library_header_goes_around_the_call() {
        let mut site = site(0, Some(KERNEL), Some(2));
        site.ptx = vec!["ld a".into(), "atom b".into()];
        site.frames = vec![
            vec![
                frame(KERNEL, 2),
                frame("/cuda/include/cub/x.cuh", 50),
                frame("/cuda/include/cub/y.cuh", 7),
            ],
            vec![frame(KERNEL, 2), frame("/cuda/include/cub/x.cuh", 51)],
        ];
        let report = report_of(site, &source());
        assert_eq!(anchors_of(&report), [Anchor::Before(2), Anchor::After(2)]);
        assert!(
            !report.placed[0].inside_helpers(),
            "around its own line only"
        );
        assert!(
            report
                .patch
                .contains(" void k() {\n+  __threadfence();\n   x = 1;\n+  __threadfence();\n"),
            "{}",
            report.patch
        );
        assert_placement_says(
            &report,
            &["inside /cuda/include/cub/x.cuh", "not against each other"],
        );
    }

    /// Regression (a seqlock of `cuda::atomic_ref` loads and stores in unrolled loops): each
    /// call is one access inlined from a CCCL header, yet the patch fenced before and after
    /// every call, 9 statements for 6 fences. After the call is after its access, as the PTX
    /// fence is.
    #[test]
    fn a_single_access_inlined_from_a_library_header_is_fenced_once_after_the_call() {
        let mut site = site(0, Some(KERNEL), Some(2));
        // The loop is unrolled: two copies of the one access, at one place in the header.
        let chain = vec![
            frame(KERNEL, 2),
            frame("/cuda/include/cuda/std/atomic.h", 80),
            frame("/cuda/include/cuda/std/generated.h", 303),
        ];
        site.ptx = vec!["ld a".into(), "ld a".into()];
        site.frames = vec![chain.clone(), chain];
        let report = report_of(site, &source());
        assert_eq!(
            report.placed[0].anchors,
            [("apps/k/kernel.cu".to_string(), Anchor::After(2))]
        );
        assert_eq!(report.placed[0].placement, None);
        assert_eq!(report.patch.matches("+  __threadfence();").count(), 1);
    }

    /// A call that makes one access of this site but is also a call of another site's access
    /// (inner-line sites split a helper) keeps the fence before and after it.
    #[test]
    fn a_call_with_accesses_of_two_sites_keeps_the_fence_around_it() {
        let header = "/cuda/include/cub/x.cuh";
        let mut first = site(0, Some(KERNEL), Some(2));
        first.frames = vec![vec![frame(KERNEL, 2), frame(header, 50)]];
        let mut second = site(1, Some(KERNEL), Some(2));
        second.frames = vec![vec![frame(KERNEL, 2), frame(header, 51)]];
        let report = report_in_repo(&[0], &[first, second], &source());
        assert_eq!(anchors_of(&report), [Anchor::Before(2), Anchor::After(2)]);
    }

    /// A site recorded without its accesses' frames (a journal from before they were kept)
    /// goes after its own line, as it did then.
    #[test]
    fn a_site_without_frames_goes_after_its_own_line() {
        let report = report_in_repo(&[0], &sites(), &source());
        assert_eq!(
            report.placed[0].anchors,
            [("apps/k/kernel.cu".to_string(), Anchor::After(2))]
        );
        assert_eq!(report.placed[0].placement, None);
    }
}
