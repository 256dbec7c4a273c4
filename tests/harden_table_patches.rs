//! Every patch of the harden table (`results/sim/harden-table/`) builds and works: it is
//! re-made from its report with the library, equals the committed `APP.patch`, applies with
//! `git apply` to a copy of the app, compiles with the pinned NVRTC (libcu++'s header from the
//! `#include` the patch adds) as the app harden's own patch check builds (`App::patched`: a
//! `-nf` variant keeps only the patch's fences), and the patched app passes every run of a
//! stressed check on the simulator, where the app without the patch fails. The same holds for the `threadfence` style.
//!
//! Needs NVRTC and the CCCL headers (scripts/setup-cuda-tools.sh), no GPU. Simulator results.

mod common;

use gpuwmm::apps::{find_app, App, KernelSource, PatchedFile, Size, DEFAULT_ARCH};
use gpuwmm::check::spec::SiteSummary;
use gpuwmm::check::Outcome;
use gpuwmm::env::Environment;
use gpuwmm::harden::report::{styled_fence_report, FenceStyle};
use gpuwmm::ptx::passes::fences::{fence_sites, FenceKind, Granularity};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Runs of the check of each patched app (each app's hardening passed 1,000 with these fences).
const RUNS: u64 = 60;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn table() -> PathBuf {
    repo().join("results/sim/harden-table")
}

/// What the test reads of a `harden --json` report.
#[derive(Debug, Deserialize)]
struct Report {
    app: String,
    env: Environment,
    seed: u64,
    fence_kind: FenceKind,
    fences: Vec<Fence>,
}

#[derive(Debug, Deserialize)]
struct Fence {
    site: usize,
    function: String,
    file: Option<String>,
    line: Option<u32>,
    source: Option<String>,
    ptx: Vec<String>,
    kind: FenceKind,
}

fn reports() -> Vec<Report> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(table())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".report.json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 7, "the table has the seven fence-less apps");
    paths
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

/// The report's patch in `style`, made by the library from the report's fences and the app's
/// sites now (which carry each access's inlining chain, where the patch puts fences for code
/// inlined from the app's functions). Each fence's site must still be what the report names.
fn patch_of(report: &Report, app: &dyn App, style: FenceStyle) -> String {
    let lines: Vec<&str> = app.source().text.lines().collect();
    let module = app.module(DEFAULT_ARCH, Size::Sim).unwrap();
    let sites: Vec<SiteSummary> = fence_sites(&module, Granularity::SourceLine)
        .iter()
        .map(SiteSummary::from)
        .collect();
    for f in &report.fences {
        // The source has not moved under the report: its line still reads the same.
        let line = f.line.expect("every table fence has a line") as usize;
        assert_eq!(Some(lines[line - 1].trim()), f.source.as_deref());
        let site = &sites[f.site];
        assert_eq!(
            (&site.function, site.line, &site.ptx),
            (&f.function, f.line, &f.ptx),
            "{}: site {} is not the one the report names",
            report.app,
            f.site
        );
        assert!(site
            .file
            .as_deref()
            .unwrap()
            .ends_with(f.file.as_deref().unwrap()));
    }
    let chosen: Vec<(usize, FenceKind)> = report.fences.iter().map(|f| (f.site, f.kind)).collect();
    let made = styled_fence_report(
        &chosen,
        &sites,
        app.source(),
        report.fence_kind,
        repo(),
        style,
    )
    .unwrap();
    assert_eq!(made.placed.len(), report.fences.len(), "{}", report.app);
    made.patch
}

/// The lines of the patched file that the patch adds (1-based), read from its hunks.
fn added_lines(patch: &str) -> BTreeSet<u32> {
    let mut added = BTreeSet::new();
    let mut line = 0;
    for text in patch.lines() {
        if let Some(header) = text.strip_prefix("@@ -") {
            let new = header.split(" +").nth(1).unwrap();
            line = new.split([',', ' ']).next().unwrap().parse().unwrap();
        } else if text.starts_with('+') && !text.starts_with("+++") {
            added.insert(line);
            line += 1;
        } else if text.starts_with(' ') {
            line += 1;
        }
    }
    added
}

/// `kernel.cu` of `app`'s folder copied under `dir` as the patch names it, the patch applied
/// with `git apply`; returns the patched source.
fn apply(dir: &Path, app: &dyn App, patch: &str) -> KernelSource {
    let relative = app.source().path.strip_prefix(repo()).unwrap();
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &app.source().text).unwrap();
    common::git_apply(dir, patch);
    let text = std::fs::read_to_string(&path).unwrap();
    KernelSource::single(path, text)
}

/// The outcomes of `runs` stressed runs of `app` as the report's check ran them (its
/// environment and seed), stopping at the first that does not pass.
fn check(report: &Report, app: Arc<dyn App>, runs: u64) -> Vec<Outcome> {
    let target = common::sim_target(&report.app, None, report.fence_kind);
    common::stressed_outcomes(&target, app, report.env, report.seed, runs)
}

fn patched(report: &Report, dir: &Path, style: FenceStyle) -> (Arc<dyn App>, String) {
    let base = find_app(&report.app).unwrap();
    let patch = patch_of(report, &*base, style);
    let source = apply(dir, &*base, &patch);
    // The library's patched app (harden's own patch check): the applied text compiled in the
    // source's place, and for a `-nf` variant its fences stripped except on the patch's lines.
    let file = PatchedFile {
        path: base.source().path.clone(),
        text: source.text,
        changed_lines: added_lines(&patch),
    };
    let app = base.patched(&[file]).unwrap();
    // It builds with the pinned NVRTC.
    app.module(DEFAULT_ARCH, Size::Sim)
        .unwrap_or_else(|e| panic!("{} ({style:?}): {e}", report.app));
    (app, patch)
}

/// Calls `check_one` with every report of the table, its app patched in `style` ([`patched`])
/// in a temporary folder of its own, and the patch.
fn for_each_patched_report(
    style: FenceStyle,
    mut check_one: impl FnMut(&Report, Arc<dyn App>, String),
) {
    for report in reports() {
        let dir = tempfile::tempdir().unwrap();
        let (app, patch) = patched(&report, dir.path(), style);
        check_one(&report, app, patch);
    }
}

#[test]
fn every_harden_table_patch_applies_builds_and_passes_where_the_app_without_it_fails() {
    common::or_skip!(gpuwmm::toolchain::cccl_tools_for_tests());
    for_each_patched_report(FenceStyle::Exact, |report, app, patch| {
        let committed_path = table().join(format!("{}.patch", report.app));
        if std::env::var_os("GPUWMM_BLESS").is_some() {
            std::fs::write(&committed_path, &patch).unwrap();
        }
        let committed = std::fs::read_to_string(committed_path);
        assert_eq!(
            committed.unwrap(),
            patch,
            "{}.patch is not what the library makes of its report",
            report.app
        );
        let needs_header = report
            .fences
            .iter()
            .any(|f| matches!(f.kind, FenceKind::AcqRelGpu | FenceKind::AcqRelCta));
        assert_eq!(
            patch.matches("+#include <cuda/atomic>").count(),
            usize::from(needs_header),
            "{patch}"
        );
        let without = check(report, find_app(&report.app).unwrap(), RUNS);
        assert_ne!(without.last(), Some(&Outcome::Pass), "{} fails", report.app);
        let with = check(report, app, RUNS);
        assert!(
            with.iter().all(|o| *o == Outcome::Pass) && with.len() as u64 == RUNS,
            "{} patched: {with:?}",
            report.app
        );
    });
}

#[test]
fn every_harden_table_patch_in_the_threadfence_style_builds_and_passes() {
    common::or_skip!(gpuwmm::toolchain::cccl_tools_for_tests());
    for_each_patched_report(FenceStyle::Threadfence, |report, app, patch| {
        assert!(
            !patch.contains("cuda::") && !patch.contains("#include"),
            "{patch}"
        );
        let with = check(report, app, RUNS / 2);
        assert!(
            with.iter().all(|o| *o == Outcome::Pass),
            "{} patched: {with:?}",
            report.app
        );
    });
}
