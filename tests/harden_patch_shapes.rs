//! The harden patch on the source shapes where a fence "after a line" is not the next line
//! (`tests/fixtures/apps/patch-shapes`): two statements on a line, one-line `if`/`while`
//! bodies, `else if` on a line of its own, an access on a `break` line and in a `return`'s value.
//! With a fence at every site, the patch is made by the library, applied with `git apply` to
//! a copy of the app, compiled with the pinned NVRTC, and the patched app passes every run of a
//! stressed check on the simulator, where the app without fences fails.
//!
//! Needs NVRTC and the CCCL headers (scripts/setup-cuda-tools.sh), no GPU. Simulator results.

mod common;

use gpuwmm::apps::{load_app_dir, App, Size, DEFAULT_ARCH};
use gpuwmm::check::spec::SiteSummary;
use gpuwmm::check::Outcome;
use gpuwmm::env::Environment;
use gpuwmm::harden::report::{styled_fence_report, FenceReport, FenceStyle};
use gpuwmm::ptx::passes::fences::{fence_sites, FenceKind, Granularity};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const APP: &str = "patch-shapes";
const SEED: u64 = 1;
const RUNS: u64 = 60;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The fixture copied to `dir/app`, loaded from there.
fn copy_app(dir: &Path) -> (PathBuf, Arc<dyn App>) {
    let from = repo().join("tests/fixtures/apps").join(APP);
    let to = dir.join("app");
    std::fs::create_dir_all(&to).unwrap();
    for name in ["app.toml", "kernel.cu"] {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
    let app = load_app_dir(&to).unwrap();
    (to, app)
}

/// The report of a fence of `kind` at every site of `app`, in `style`, with paths relative
/// to `dir`.
fn report_of(app: &dyn App, dir: &Path, kind: FenceKind, style: FenceStyle) -> FenceReport {
    let module = app.module(DEFAULT_ARCH, Size::Sim).unwrap();
    let sites: Vec<SiteSummary> = fence_sites(&module, Granularity::SourceLine)
        .iter()
        .map(SiteSummary::from)
        .collect();
    let chosen: Vec<(usize, FenceKind)> = sites.iter().map(|s| (s.id, kind)).collect();
    styled_fence_report(&chosen, &sites, app.source(), kind, dir, style).unwrap()
}

/// The outcomes of up to `runs` stressed runs of `app` (sys-str+, seed 1), stopping at the
/// first that does not pass.
fn check(app_dir: &Path, app: Arc<dyn App>, runs: u64) -> Vec<Outcome> {
    let target = common::sim_target(APP, Some(app_dir.to_path_buf()), FenceKind::ScGpu);
    let env: Environment = "sys-str+".parse().unwrap();
    common::stressed_outcomes(&target, app, env, SEED, runs)
}

/// The lines the patch adds or changes (without the `+`).
fn added(patch: &str) -> Vec<&str> {
    (patch.lines())
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .map(|l| l[1..].trim())
        .collect()
}

/// Makes the patch of a fence at every site in `style`, checks each shape's placement with
/// `fence` the statement written, applies it, and returns the patched app (compiled).
fn patched(dir: &Path, kind: FenceKind, style: FenceStyle, fence: &str) -> (PathBuf, Arc<dyn App>) {
    let (app_dir, app) = copy_app(dir);
    let report = report_of(&*app, dir, kind, style);
    let not_in_patch: Vec<usize> = (report.placed.iter())
        .filter(|f| !f.in_patch)
        .map(|f| f.site.id)
        .collect();
    assert!(
        not_in_patch.is_empty(),
        "{not_in_patch:?}\n{:#?}",
        report.placed
    );
    assert!(report.unplaced.is_empty());
    let expression = fence.trim_end_matches(';');
    let lines = added(&report.patch);
    for shape in [
        // Two statements on one line: a fence between them, one after.
        format!("data[0] = v; {fence} flag[0] = 1;"),
        // A one-line `while` body: first in it, at its end (before the next condition).
        format!("while (flag[0] == 0) {{ {fence} spins++; {fence} }}"),
        // An access in the condition on a `break` line: in braces before the jump (the `for`
        // header on the line is fenced too: a site is a line, not a statement).
        format!("for (;;) {{ {fence} if (flag[0] != 0) {{ {fence} break; }} {fence} }}"),
        // An access in a `return`'s value: computed, fenced, returned.
        format!("{{ auto gpuwmm_value = p[0]; {fence} return gpuwmm_value; }}"),
        // A one-line `if … else …`: each branch in braces, fenced first (the condition is on
        // the line too), and the stores fenced after the whole statement (the next line).
        format!("if (seen == 42) {{ {fence} out[0] = 1; }} else {{ {fence} out[0] = 0; }}"),
        // `else if` on a line of its own: the fence starts its condition.
        format!("else if ({expression}, data[0] != 42)"),
    ] {
        assert!(lines.contains(&shape.as_str()), "{shape}\n{}", report.patch);
    }
    let placements: Vec<&str> = (report.placed.iter())
        .filter_map(|f| f.placement.as_deref())
        .collect();
    assert!(
        placements.iter().any(|p| p.contains("put in braces"))
            && placements
                .iter()
                .any(|p| p.contains("more than one statement"))
            && placements.iter().any(|p| p.contains("value of a `return`")),
        "{placements:#?}"
    );
    common::git_apply(dir, &report.patch);
    let patched = load_app_dir(&app_dir).unwrap();
    patched
        .module(DEFAULT_ARCH, Size::Sim)
        .unwrap_or_else(|e| panic!("the patched source does not compile ({style:?}): {e}"));
    (app_dir, patched)
}

#[test]
fn a_patch_of_every_shape_compiles_and_the_patched_app_passes_where_the_app_fails() {
    common::or_skip!(gpuwmm::toolchain::cccl_tools_for_tests());
    let original = tempfile::tempdir().unwrap();
    let (dir, app) = copy_app(original.path());
    let without = check(&dir, app, RUNS);
    assert_ne!(
        without.last(),
        Some(&Outcome::Pass),
        "the app fails: {without:?}"
    );
    let fence = "cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device);";
    let exact = tempfile::tempdir().unwrap();
    let (dir, app) = patched(exact.path(), FenceKind::AcqRelGpu, FenceStyle::Exact, fence);
    let with = check(&dir, app, RUNS);
    assert!(
        with.iter().all(|o| *o == Outcome::Pass) && with.len() as u64 == RUNS,
        "{with:?}"
    );
    let threadfence = tempfile::tempdir().unwrap();
    let style = FenceStyle::Threadfence;
    let (dir, app) = patched(
        threadfence.path(),
        FenceKind::ScGpu,
        style,
        "__threadfence();",
    );
    let with = check(&dir, app, RUNS / 2);
    assert!(with.iter().all(|o| *o == Outcome::Pass), "{with:?}");
}

/// The kernels of the built-in apps and of the app fixtures that compile as they are.
fn kernels() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for folder in ["apps", "tests/fixtures/apps"] {
        for entry in std::fs::read_dir(repo().join(folder)).unwrap() {
            let kernel = entry.unwrap().path().join("kernel.cu");
            if kernel.exists() {
                paths.push(kernel);
            }
        }
    }
    paths.sort();
    paths
}

/// However many fences a patch holds and wherever their lines are, it compiles: every line of
/// every app and fixture kernel fenced after and before (where a line has a place for one).
#[test]
fn a_fence_after_and_before_every_line_of_every_app_kernel_compiles() {
    common::or_skip!(gpuwmm::toolchain::cccl_tools_for_tests());
    use gpuwmm::apps::{compile_source, KernelSource};
    use gpuwmm::harden::patch::{place_statements, Anchor};
    let mut compiled = 0;
    for path in kernels() {
        let text = std::fs::read_to_string(&path).unwrap();
        let source = KernelSource::single(path.clone(), text.clone());
        if compile_source(&source, DEFAULT_ARCH).is_err() {
            continue; // a fixture that is meant not to compile
        }
        let lines = text.lines().count();
        let anchors: Vec<(Anchor, &str)> = (1..=lines)
            .flat_map(|l| {
                [
                    (Anchor::After(l), "__threadfence();"),
                    (Anchor::Before(l), "__threadfence_block();"),
                ]
            })
            .collect();
        let placed = place_statements("k.cu", &text, &anchors).unwrap();
        assert!(
            placed.in_patch.iter().filter(|&&p| p).count() > lines / 4,
            "{}",
            path.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k.cu");
        std::fs::write(&file, &text).unwrap();
        common::git_apply(dir.path(), &placed.diff);
        let patched = std::fs::read_to_string(&file).unwrap();
        let source = KernelSource::single(path.clone(), patched.clone());
        if let Err(e) = compile_source(&source, DEFAULT_ARCH) {
            panic!(
                "{}: the patched source does not compile: {e}\n{}",
                path.display(),
                placed.diff
            );
        }
        compiled += 1;
    }
    assert!(compiled >= 20, "{compiled} kernels");
}
