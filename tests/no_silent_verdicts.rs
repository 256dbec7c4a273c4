//! Regression tests of issue 27: places where gpuwmm gave a confident answer that was wrong (a
//! check that passes by accident, inputs without limits, options that were dropped on the way).
//! Each test is named after the bug it guards.
//!
//! Needs NVRTC (scripts/setup-cuda-tools.sh), no GPU. Figures are the simulator's.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::cli::{assert_bad_input, gpuwmm, words};
use common::fixture_app;

/// A copy of the fixture app `name` in `dir`, with `edit` applied to its `kernel.cu`.
fn edited_copy(dir: &Path, name: &str, edit: impl FnOnce(&str) -> String) -> PathBuf {
    let copy = dir.join(name);
    std::fs::create_dir_all(&copy).unwrap();
    let from = fixture_app(name);
    std::fs::copy(from.join("app.toml"), copy.join("app.toml")).unwrap();
    let kernel = std::fs::read_to_string(from.join("kernel.cu")).unwrap();
    std::fs::write(copy.join("kernel.cu"), edit(&kernel)).unwrap();
    copy
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn stdout_of(out: &Output) -> String {
    text(&out.stdout)
}

/// Asserts that a command ended in a verdict, pass or fail (exit 0 or 1), not bad input.
fn assert_a_verdict(out: &Output) {
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "{code:?}: {}",
        text(&out.stderr)
    );
}

#[test]
fn a_check_kernel_that_never_writes_its_result_is_an_error_never_a_pass() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app = edited_copy(dir.path(), "handoff-block", |kernel| {
        let kept: Vec<&str> = kernel
            .lines()
            .filter(|line| !line.trim_start().starts_with("status["))
            .collect();
        assert_eq!(kept.len() + 2, kernel.lines().count(), "two status lines");
        kept.join("\n")
    });
    let app = app.to_str().unwrap();
    let args = [
        words("check handoff-block --runs 3 --backend sim --app-dir"),
        vec![app],
    ]
    .concat();
    let out = gpuwmm(&args, dir.path());
    let stdout = stdout_of(&out);
    assert!(
        stdout.contains("pass 0,") && stdout.contains("crash 3"),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("check kernel did not write its result"),
        "{stdout}"
    );
}

// ---------------------------------------------------------------------------------------------
// Numbers without limits: refused as bad input before anything is allocated.

#[test]
fn numeric_options_out_of_their_range_and_nan_are_refused_with_exit_2_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str); 10] = [
        ("litmus mp --backend sim --distance 4294967295", "1..=65536"),
        ("litmus mp --backend sim --distance 0", "1..=65536"),
        ("litmus mp --backend sim --instances 10000000", "1..=4096"),
        (
            "litmus run x.litmus --backend sim --instances 10000000",
            "1..=4096",
        ),
        (
            "check cbe-dot --backend sim --stress-factor nan",
            "0.01..=1000",
        ),
        (
            "check cbe-dot --backend sim --stress-factor inf",
            "0.01..=1000",
        ),
        ("check cbe-dot --backend sim --runs 0", "1..=1000000000"),
        (
            "harden cbe-dot --backend sim --stable-runs 0",
            "1..=1000000000",
        ),
        ("harden cbe-dot --backend sim --jobs 0", "1..=256"),
        ("tune --backend sim --max-sequence 40", "1..=10"),
    ];
    for (line, limit) in cases {
        let out = gpuwmm(&words(line), dir.path());
        assert_bad_input(&out, limit);
    }
    assert!(!dir.path().join("results").exists(), "nothing written");
}

#[test]
fn a_site_range_past_the_last_site_is_refused_before_it_is_expanded() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let args = words("check cbe-dot --backend sim --runs 1 --fences 0-4294967295");
    let out = gpuwmm(&args, dir.path());
    assert_bad_input(&out, "no fence site 4294967295 (the module has 8 sites");
}

// ---------------------------------------------------------------------------------------------
// Sources named by the PTX, and one numbering of fence sites.

/// A PTX file with one store whose `.file` names `source`.
fn ptx_naming(dir: &Path, source: &Path) -> PathBuf {
    let ptx = format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n.file 1 \"{}\"\n\
         .visible .entry k(.param .u64 p)\n{{\n.reg .b64 %rd<2>;\n.loc 1 1 1\n\
         ld.param.u64 %rd1, [p];\nst.global.u32 [%rd1], 1;\nret;\n}}\n",
        source.display()
    );
    let path = dir.join("k.ptx");
    std::fs::write(&path, ptx).unwrap();
    path
}

/// `gpuwmm args` in `dir`, killed after 20 s (a read that never ends fails the test).
fn gpuwmm_with_deadline(args: &[&str], dir: &Path) -> Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("{args:?} did not finish in 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_source_named_dev_zero_or_a_fifo_is_not_read_and_a_warning_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.cu");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let mut sources = vec![PathBuf::from("/dev/zero")];
    if made.is_ok_and(|s| s.success()) {
        sources.push(fifo);
    }
    for source in sources {
        let ptx = ptx_naming(dir.path(), &source);
        let out = gpuwmm_with_deadline(&["ptx", "sites", ptx.to_str().unwrap()], dir.path());
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stdout_of(&out).contains("1 fence sites"));
        assert!(
            stderr.contains("source lines not shown: not a regular file"),
            "{stderr}"
        );
    }
}

#[test]
fn ptx_sites_of_an_app_numbers_what_check_numbers_and_a_cu_file_lists_per_kernel() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app = fixture_app("handoff-block");
    let app = app.to_str().unwrap();
    let out = gpuwmm(&["ptx", "sites", "--app-dir", app], dir.path());
    let listed = stdout_of(&out);
    assert!(listed.contains("6 fence sites"), "{listed}");
    assert!(!listed.contains("handoff_check"), "{listed}");
    // check numbers the same six: 5 is the last, 6 is past it.
    let check = |fences: &str| {
        let args = words("check handoff-block --backend sim --runs 1 --app-dir");
        let args = [args, vec![app, "--fences", fences]].concat();
        gpuwmm(&args, dir.path())
    };
    assert!(check("5").status.success());
    assert_bad_input(&check("6"), "no fence site 6 (the module has 6 sites");
    // The bare file: every kernel, the check kernel's under its own heading, and a note.
    let kernel = format!("{app}/kernel.cu");
    let file = stdout_of(&gpuwmm(&["ptx", "sites", &kernel], dir.path()));
    assert!(file.contains("kernel handoff:\n#0"), "{file}");
    assert!(file.contains("kernel handoff_check:\n#6"), "{file}");
    assert!(file.contains("8 fence sites") && file.contains("note: numbered over every"));
    // A built-in app by name.
    let cbe = stdout_of(&gpuwmm(&words("ptx sites cbe-dot"), dir.path()));
    assert!(cbe.contains("8 fence sites"), "{cbe}");
}

// ---------------------------------------------------------------------------------------------
// The smaller ones.

#[test]
fn a_bring_your_own_app_named_like_a_built_in_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mine");
    std::fs::create_dir_all(&copy).unwrap();
    let sdk_red = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/sdk-red");
    for file in ["app.toml", "kernel.cu"] {
        std::fs::copy(sdk_red.join(file), copy.join(file)).unwrap();
    }
    for args in [
        words("check sdk-red --backend sim --runs 1 --app-dir mine"),
        words("apps --app-dir mine"),
    ] {
        let out = gpuwmm(&args, dir.path());
        assert_bad_input(&out, "`name` is a built-in app's name");
    }
}

/// Bug: `check x --app-dir DIR` ran the folder's app under the name `x` without a word when
/// the folder's `app.toml` names another app, so its journal and report carried the wrong name.
#[test]
fn an_app_dir_whose_manifest_names_another_app_is_refused_naming_both() {
    let Some(dir) = common::temp_dir_with_tools() else {
        return;
    };
    edited_copy(dir.path(), "handoff-block", str::to_string);
    let out = gpuwmm(
        &words("check x --backend sim --runs 1 --app-dir handoff-block --journal j.csv"),
        dir.path(),
    );
    assert_bad_input(&out, "holds the app 'handoff-block'");
    assert_bad_input(&out, "not 'x'");
    assert!(!dir.path().join("j.csv").exists(), "nothing ran");
    let sites = gpuwmm(&words("ptx sites x --app-dir handoff-block"), dir.path());
    assert_bad_input(
        &sites,
        "holds the app 'handoff-block' (its app.toml's `name`), not 'x'",
    );
    let named = gpuwmm(
        &words("check handoff-block --backend sim --runs 1 --app-dir handoff-block"),
        dir.path(),
    );
    // Its own name runs it.
    assert_a_verdict(&named);
}

/// With `--app-dir` alone the app is the one its manifest names: `check` and `harden` run it
/// under that name, as if it had been given.
#[test]
fn an_app_dir_without_a_name_runs_the_app_its_manifest_names() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    edited_copy(dir.path(), "handoff-block", str::to_string);
    let check = gpuwmm(
        &words("check --backend sim --runs 2 --app-dir handoff-block --journal j.csv"),
        dir.path(),
    );
    assert_a_verdict(&check);
    assert!(
        text(&check.stderr).contains("checking handoff-block under"),
        "{}",
        text(&check.stderr)
    );
    let harden = gpuwmm(
        &words("harden --backend sim --app-dir handoff-block --stable-runs 20 --journal h.csv"),
        dir.path(),
    );
    assert!(
        text(&harden.stderr).contains("hardening handoff-block under"),
        "{}",
        text(&harden.stderr)
    );
    let neither = gpuwmm(&words("check --backend sim --runs 1"), dir.path());
    assert_eq!(neither.status.code(), Some(2));
}

#[test]
fn a_relative_app_dir_is_recorded_absolute_and_replay_takes_an_app_dir() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    edited_copy(dir.path(), "handoff-block", str::to_string);
    let args = words("check handoff-block --backend sim --runs 2 --journal j.csv --app-dir");
    let out = gpuwmm(&[args, vec!["handoff-block"]].concat(), dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let sidecar = std::fs::read_to_string(dir.path().join("j.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&sidecar).unwrap();
    let recorded = meta["target"]["app_dir"].as_str().unwrap();
    assert_eq!(Path::new(recorded), dir.path().join("handoff-block"));
    // From another folder, the journal still replays.
    let journal = dir.path().join("j.csv");
    let journal = journal.to_str().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = gpuwmm(&["replay", journal, "0"], elsewhere.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Moved, it replays with --app-dir naming the new folder.
    let moved = dir.path().join("moved");
    std::fs::rename(dir.path().join("handoff-block"), &moved).unwrap();
    let out = gpuwmm(&["replay", journal, "0"], elsewhere.path());
    assert!(!out.status.success());
    let out = gpuwmm(
        &["replay", journal, "0", "--app-dir", moved.to_str().unwrap()],
        elsewhere.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn cost_help_shows_the_runs_default_of_cost_and_check_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let cost = stdout_of(&gpuwmm(&words("cost --help"), dir.path()));
    let default = format!("(default {} when", gpuwmm::cost::DEFAULT_REPETITIONS);
    assert!(cost.contains(&default), "{cost}");
    let check = stdout_of(&gpuwmm(&words("check --help"), dir.path()));
    let default = format!("(default {} when", gpuwmm::check::driver::DEFAULT_RUNS);
    assert!(check.contains(&default), "{check}");
}

#[test]
fn no_rust_debug_names_in_cost_output() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let args = words("cost cbe-dot --backend sim --variants no,cons --runs 2 --warmup 0");
    let out = gpuwmm(&args, dir.path());
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("timing ended: the repetitions or the duration were reached"),
        "{stderr}"
    );
    assert!(!stderr.contains("Stop"), "{stderr}");
}

#[test]
fn litmus_expect_with_an_empty_file_and_an_unwritable_csv_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let test = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/litmus");
    let test = test.to_str().unwrap();
    std::fs::write(dir.path().join("empty.csv"), "").unwrap();
    let run = |extra: &str| {
        let args = [vec!["litmus", "run", test], words(extra)].concat();
        gpuwmm(&args, dir.path())
    };
    let out = run("--backend sim --executions 1 --expect empty.csv");
    assert_bad_input(&out, "empty.csv:1: no expectations");
    let out = run("--backend sim --executions 1 --csv no/such/folder/out.csv");
    assert_bad_input(&out, "cannot write no/such/folder/out.csv");
    assert!(stdout_of(&out).is_empty(), "refused before any test ran");
}
