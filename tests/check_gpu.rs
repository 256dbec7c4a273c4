//! `gpuwmm check` on a real GPU (skipped where there is no CUDA driver; `GPUWMM_REQUIRE_GPU=1`
//! makes a skip a failure): stressed runs are journaled, a hung kernel becomes `timeout` at the
//! deadline and a faulting one `crash`, and in both cases a fresh worker takes over.
//! On a GPU: `GPUWMM_REQUIRE_GPU=1 cargo test --release --test check_gpu -- --nocapture`.

mod common;

use common::{fixture_app, fixture_kernel_line, gpu};
use gpuwmm::check::journal::read_rows;
use gpuwmm::check::{Outcome, RunRecord};
use std::path::Path;
use std::process::Command;

fn check(dir: &Path, args: &[&str]) -> Vec<RunRecord> {
    // The stand-in driver interprets every thread: it gets simulator-sized inputs.
    let size: &[&str] = if gpu().is_some_and(|b| common::is_standin(&b)) {
        &["--size", "sim"]
    } else {
        &[]
    };
    let output = Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .current_dir(dir)
        .args(["check", "--backend", "cuda", "--journal", "j.csv"])
        .args(size)
        .args(args)
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{args:?}");
    read_rows(&dir.join("j.csv")).unwrap()
}

/// [`check`] with `args` and `runs` runs: asserts that the journal holds `runs` rows, every one
/// a pass, and returns them.
fn check_every_run_passes(dir: &Path, args: &[&str], runs: usize) -> Vec<RunRecord> {
    let runs_arg = runs.to_string();
    let rows = check(dir, &[args, &["--runs", &runs_arg]].concat());
    assert_eq!(rows.len(), runs);
    assert!(rows.iter().all(|r| r.outcome == Outcome::Pass), "{rows:?}");
    rows
}

/// A temporary folder for a test that needs the CUDA tools and a GPU, or `None` (after the
/// skip line) where either is missing.
fn temp_dir_with_tools_and_gpu() -> Option<tempfile::TempDir> {
    common::gpu_with_tools()?;
    Some(tempfile::tempdir().unwrap())
}

#[test]
fn stressed_runs_of_a_fully_fenced_app_all_pass_on_a_gpu() {
    let dir = common::or_skip!(temp_dir_with_tools_and_gpu());
    let args = ["cbe-dot", "--env", "sys-str+", "--fences", "all"];
    let rows = check_every_run_passes(dir.path(), &args, 200);
    assert!(rows
        .iter()
        .all(|r| r.kernel_us > 0.0 && !r.stress_blocks.is_empty()));
}

/// A persistent kernel split by a `cooperative_groups` grid sync is launched cooperatively
/// (`cuLaunchCooperativeKernel`), stressing blocks included, and passes every run.
#[test]
fn a_cooperative_grid_sync_app_passes_every_stressed_run_on_a_gpu() {
    let dir = common::or_skip!(temp_dir_with_tools_and_gpu());
    let app = fixture_app("coop-grid-sync");
    check_every_run_passes(dir.path(), &["--app-dir", app.to_str().unwrap()], 6);
}

/// Regression: a GPU's driver writes the kernels' `printf` to standard output, which was the
/// supervised worker's answer channel: the supervisor took the printed line for a garbled
/// answer. Now answers are marked and device output is passed over (and shown by `replay`).
#[test]
fn a_kernel_that_printfs_on_a_gpu_leaves_the_workers_answers_intact() {
    let dir = common::or_skip!(temp_dir_with_tools_and_gpu());
    let app = fixture_app("printf-assert");
    let args = ["printf-assert", "--app-dir", app.to_str().unwrap()];
    check_every_run_passes(dir.path(), &args, 6);
    let replay = Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .current_dir(dir.path())
        .args(["replay", "j.csv", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.status.success(), "{text}");
    assert!(text.contains("first input 0"), "{text}");
}

#[test]
fn hung_and_faulting_kernels_on_a_gpu_are_timeouts_and_crashes() {
    let dir = common::or_skip!(temp_dir_with_tools_and_gpu());
    let app = fixture_app("broken");
    let rows = check(
        dir.path(),
        &[
            "broken",
            "--app-dir",
            app.to_str().unwrap(),
            "--env",
            "no-str-",
            "--runs",
            "24",
            "--deadline",
            "2s",
        ],
    );
    let numbers: Vec<u64> = rows.iter().map(|r| r.run).collect();
    assert_eq!(numbers, (0..24).collect::<Vec<_>>());
    let count = |o| rows.iter().filter(|r| r.outcome == o).count();
    assert!(count(Outcome::Timeout) > 0, "{rows:?}");
    assert!(count(Outcome::Crash) > 0, "{rows:?}");
    assert!(count(Outcome::Pass) > 0, "{rows:?}");
}

/// A GPU records no races, so `harden --backend cuda` once rested on its runs alone: on the
/// volatile slot recycler it kept one fence, after block 0's read, weakened to
/// `fence.acq_rel.cta` (no order between two CTAs under PTX, and no acquire after block 1's
/// spin). Races recorded on the simulator running the same PTX now keep both fences, of GPU
/// scope, as the simulator backend does, and the report says where the communication came
/// from.
#[test]
fn a_gpu_hardening_keeps_both_gpu_scoped_fences_from_races_recorded_on_the_simulator() {
    let dir = common::or_skip!(temp_dir_with_tools_and_gpu());
    let app = "slot-recycler-volatile";
    let app_dir = fixture_app(app);
    let size: &[&str] = if gpu().is_some_and(|b| common::is_standin(&b)) {
        &["--size", "sim"]
    } else {
        &[]
    };
    let output = Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .current_dir(dir.path())
        .args(["harden", app, "--backend", "cuda", "--journal", "h.csv"])
        .args(["--app-dir", app_dir.to_str().unwrap()])
        .args([
            "--stable-runs",
            "200",
            "--minimise-kind",
            "on",
            "--seed",
            "1",
        ])
        .args(size)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("communication recorded on the simulator (PTX model), runs on cuda"),
        "{stdout}"
    );
    assert!(stdout.contains("final fences: 2"), "{stdout}");
    let spin = fixture_kernel_line(app, "while (freed[i] == 0)");
    let read = fixture_kernel_line(app, "int value = slot[i];");
    for line in [spin, read] {
        let placed = format!("kernel.cu:{line}  [recycle]  fence.acq_rel.gpu");
        assert!(stdout.contains(&placed), "{placed}\n{stdout}");
    }
    assert!(!stdout.contains("keeps fence.acq_rel.cta"), "{stdout}");
}
