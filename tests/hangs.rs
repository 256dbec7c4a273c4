//! Runs that hang: a spin the compiler left without its load (a plain flag read once, before the
//! loop) is named with its line and fix where runs time out, and no app or fixture that does not
//! hang is said to.

mod common;

use common::cli::{gpuwmm_in_repo, ok};
use common::{fixture_app, fixture_kernel_line};
use gpuwmm::apps::{builtin_apps, load_app_dir, Size, DEFAULT_ARCH};
use gpuwmm::ptx::loops::blind_loops;

const BUDGET: [&str; 2] = ["--sim-budget", "200000"];

/// Regression (a handoff spinning on a plain `int *flag`): every run timed out, and harden said
/// only "not a memory-ordering bug (e.g. warp-synchronous code, a logic race)". NVRTC had read
/// the flag once and compiled the spin to `$L: bra.uni $L;`. Check and harden now name the
/// loop's line and the fix, and check's JSON lists it.
#[test]
fn a_spin_on_a_plain_flag_is_named_where_runs_hang() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app = fixture_app("plain-spin");
    let app = app.to_str().unwrap();
    let spin = fixture_kernel_line("plain-spin", "while (*flag == 0)");
    let hang = format!("plain-spin/kernel.cu:{spin} [handoff] spins without reading memory");
    let check = |journal: &str, extra: &[&str]| {
        let base = ["check", "--app-dir", app, "--backend", "sim", "--runs", "4"];
        let journal = dir.path().join(journal);
        let args = [
            &base[..],
            &BUDGET,
            &["--journal", journal.to_str().unwrap()],
            extra,
        ];
        gpuwmm_in_repo(&args.concat())
    };
    let out = check("c.csv", &[]);
    let stdout = ok(&out);
    // Calibration fails where its runs hang; the warning said "stress calibration failed
    // (stress calibration failed: …)" when the worker sent the error's whole text.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.matches("calibration failed").count() <= 1,
        "{stderr}"
    );
    // A run passes when the writer's flag is out before the reader's one load of it.
    assert!(!stdout.contains("timeout 0"), "{stdout}");
    assert!(stdout.contains(&hang), "{hang}\n{stdout}");
    // The timeout's reason says where the thread that never finished was.
    let still = format!("the app's threads still running: 1 at kernel.cu:{spin}");
    assert!(stdout.contains(&still), "{still}\n{stdout}");
    assert!(
        stdout.contains("`volatile`, `cuda::atomic_ref` or an atomic"),
        "{stdout}"
    );
    let json = ok(&check("j.csv", &["--json"]));
    let document: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(document["blind_loops"][0]["source"]["line"], spin, "{json}");
    let harden_journal = dir.path().join("h.csv");
    let harden = [
        &[
            "harden",
            "--app-dir",
            app,
            "--backend",
            "sim",
            "--stable-runs",
            "10",
        ][..],
        &BUDGET,
        &["--journal", harden_journal.to_str().unwrap()],
    ]
    .concat();
    let out = gpuwmm_in_repo(&harden);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("fences cannot fix this"), "{stderr}");
    assert!(stderr.contains(&hang), "{hang}\n{stderr}");
}

/// No built-in app and no fixture but `plain-spin` has a blind loop: spins that read memory,
/// loops that count, and waits on the clock are all left alone.
#[test]
fn no_app_or_fixture_that_cannot_hang_has_a_blind_loop() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let mut apps = builtin_apps().unwrap();
    let fixtures = std::fs::read_dir(fixture_app("")).unwrap();
    for entry in fixtures.map(|e| e.unwrap().path()) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        if !["broken", "plain-spin"].contains(&name.as_str()) {
            apps.push(load_app_dir(&entry).unwrap_or_else(|e| panic!("{name}: {e}")));
        }
    }
    for app in &apps {
        let module = app.module(DEFAULT_ARCH, Size::Sim).unwrap();
        let found = blind_loops(&module);
        assert!(found.is_empty(), "{}: {found:?}", app.name());
    }
    let spin = load_app_dir(&fixture_app("plain-spin")).unwrap();
    let found = blind_loops(&spin.module(DEFAULT_ARCH, Size::Sim).unwrap());
    assert_eq!(found.len(), 1, "{found:?}");
}
