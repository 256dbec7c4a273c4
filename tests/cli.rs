//! The command line as a user meets it: exit codes, error messages naming file and line, and the
//! output of `ptx sites` / `ptx instrument` / `litmus` / `devices`.

use std::process::{Command, Output};

fn gpuwmm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn malformed_ptx_names_file_and_line_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.ptx");
    std::fs::write(
        &path,
        ".version 8.8\n.visible .entry k()\n{\n\tmov.u32 %r1, 1;\n\t??? x;\n}\n",
    )
    .unwrap();
    let out = gpuwmm(&["ptx", "sites", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("bad.ptx:5: malformed instruction"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_file_and_unknown_kind_exit_2() {
    let out = gpuwmm(&["ptx", "sites", "no/such/file.ptx"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no/such/file.ptx"),
        "{}",
        stderr(&out)
    );
    let out = gpuwmm(&["ptx", "sites", "Cargo.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("expected a .cu or .ptx file"));
}

#[test]
fn unbuilt_subcommands_say_so_and_fail() {
    let out = gpuwmm(&["cost"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("not implemented yet"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sites_lists_the_inlined_lock_accesses_with_their_lines() {
    let out = gpuwmm(&["ptx", "sites", "tests/fixtures/ptx/dot_inlined.ptx"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("#1   /tmp/nv/k.cu:11  [dot]"), "{text}");
    assert!(text.contains(
        "atom.global.cas.b32  %r19, [%rd20], %r18, %r17   (inlined from /tmp/nv/k.cu:2)"
    ));
    assert!(
        text.ends_with("5 fence sites, 10 access instructions\n"),
        "{text}"
    );
}

#[test]
fn instrument_inserts_the_chosen_fences_and_rejects_bad_ids() {
    let fixture = "tests/fixtures/ptx/dot_inlined.ptx";
    let out = gpuwmm(&[
        "ptx",
        "instrument",
        fixture,
        "--fences",
        "1",
        "--fence-kind",
        "membar.gl",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).matches("membar.gl;").count(),
        1 + 4,
        "the original plus one per access"
    );
    let out = gpuwmm(&["ptx", "instrument", fixture, "--fences", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no fence site 9"));
    let out = gpuwmm(&["ptx", "instrument", fixture, "--fence-kind", "membar.foo"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn instrument_strip_and_harness() {
    let fixture = "tests/fixtures/ptx/dot_inlined.ptx";
    let out = gpuwmm(&[
        "ptx",
        "instrument",
        fixture,
        "--strip",
        "--harness",
        "--stress",
        "rand",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("membar.gl"));
    assert!(text.contains("dot_gpuwmm_ctrl"));
}

#[test]
fn litmus_on_the_simulator_is_labelled_and_replayable() {
    let args = [
        "litmus",
        "mp",
        "--backend",
        "sim",
        "--iterations",
        "3000",
        "--seed",
        "5",
    ];
    let first = gpuwmm(&args);
    assert!(first.status.success(), "{}", stderr(&first));
    let text = stdout(&first);
    assert!(text.contains("backend: simulator"), "{text}");
    assert!(text.contains("Observation mp Sometimes"), "{text}");
    assert_eq!(stdout(&gpuwmm(&args)), text, "same seed, same histogram");
}

#[test]
fn the_weak_stale_model_reaches_the_simulator() {
    let out = gpuwmm(&[
        "litmus",
        "mp",
        "--backend",
        "sim",
        "--sim-model",
        "weak-stale",
        "--iterations",
        "10",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("store-buffer model of gpuwmm 0.1 (stale loads)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn litmus_rejects_unknown_tests_and_fences() {
    assert_eq!(
        gpuwmm(&["litmus", "iriw", "--backend", "sim"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        gpuwmm(&["litmus", "mp", "--backend", "sim", "--fence-t0", "nope"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn devices_always_lists_the_simulator() {
    let out = gpuwmm(&["devices"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("sim (--sim-model weak): gpuwmm PTX simulator"));
}

#[test]
fn apps_lists_every_case_study_and_rejects_a_bad_app_dir() {
    let out = gpuwmm(&["apps"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for name in [
        "cbe-dot",
        "cbe-ht",
        "sdk-red",
        "sdk-red-nf",
        "cub-scan",
        "cub-scan-nf",
    ] {
        assert!(
            stdout(&out).lines().any(|l| l == name),
            "{name} missing:\n{}",
            stdout(&out)
        );
    }
    let out = gpuwmm(&["apps", "--app-dir", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such/dir"), "{}", stderr(&out));
}

#[test]
fn a_missing_app_dir_reports_the_io_error_once() {
    let out = gpuwmm(&["apps", "--app-dir", "/nonexistent-gpuwmm-app"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(text.contains("/nonexistent-gpuwmm-app/app.toml"), "{text}");
    assert_eq!(text.matches("No such file").count(), 1, "{text}");
}
