//! The command line as a user meets it: exit codes, error messages naming file and line, the
//! output of `ptx sites` / `ptx instrument` / `litmus` / `devices`, and the JSON documents of
//! `check --json` / `harden --json`.

use std::process::{Command, Output};

mod common;
use common::cli::{assert_bad_input, gpuwmm_in_repo as gpuwmm, ok, words};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that `needle` is not in a command's stderr (the message names the command as `what`
/// and shows the stderr).
fn assert_not_in_stderr(out: &Output, needle: &str, what: &str) {
    let stderr = stderr(out);
    assert!(!stderr.contains(needle), "{what}: {stderr}");
}

#[test]
fn malformed_ptx_names_file_and_line_and_exits_2() {
    let bad = ".version 8.8\n.visible .entry k()\n{\n\tmov.u32 %r1, 1;\n\t??? x;\n}\n";
    let (_dir, path) = common::file_in_temp_dir("bad.ptx", bad);
    let out = gpuwmm(&["ptx", "sites", path.to_str().unwrap()]);
    assert_bad_input(&out, "bad.ptx:5: malformed instruction");
}

#[test]
fn missing_file_and_unknown_kind_exit_2() {
    let out = gpuwmm(&["ptx", "sites", "no/such/file.ptx"]);
    assert_bad_input(&out, "no/such/file.ptx");
    let out = gpuwmm(&["ptx", "sites", "Cargo.toml"]);
    assert_bad_input(&out, "expected a .cu or .ptx file");
}

#[test]
fn cost_without_an_app_or_with_a_bad_list_is_bad_input() {
    let out = gpuwmm(&["cost", "--backend", "sim"]);
    assert_bad_input(&out, "name at least one app");
    let out = gpuwmm(&words("cost cbe-dot --backend sim --variants emp,cons"));
    assert_bad_input(&out, "must include `no`");
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
        text.ends_with("7 fence sites, 18 access instructions\n"),
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
        1 + 3,
        "the original, and one after each run of the line's accesses: the lock's CAS (its spin \
         loop branches back), the critical section, the unlock (each from its own inlined call)"
    );
    let out = gpuwmm(&["ptx", "instrument", fixture, "--fences", "9"]);
    assert_bad_input(&out, "no fence site 9");
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
    let args = words("litmus mp --backend sim --iterations 3000 --seed 5");
    let first = gpuwmm(&args);
    assert!(first.status.success(), "{}", stderr(&first));
    let text = stdout(&first);
    assert!(text.contains("backend: simulator"), "{text}");
    assert!(text.contains("Observation mp Sometimes"), "{text}");
    assert_eq!(stdout(&gpuwmm(&args)), text, "same seed, same histogram");
}

#[test]
fn the_weak_stale_model_reaches_the_simulator() {
    let out = gpuwmm(&words(
        "litmus mp --backend sim --sim-model weak-stale --iterations 10",
    ));
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
    for name in gpuwmm::apps::builtin::BUILTIN_APP_NAMES {
        assert!(
            stdout(&out).lines().any(|l| l == name),
            "{name} missing:\n{}",
            stdout(&out)
        );
    }
    let out = gpuwmm(&["apps", "--app-dir", "no/such/dir"]);
    assert_bad_input(&out, "no/such/dir");
}

#[test]
fn a_missing_app_dir_reports_the_io_error_once() {
    let out = gpuwmm(&["apps", "--app-dir", "/nonexistent-gpuwmm-app"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(text.contains("/nonexistent-gpuwmm-app/app.toml"), "{text}");
    assert_eq!(text.matches("No such file").count(), 1, "{text}");
}

/// `gpuwmm <args>` in `dir`; its stdout parsed as one JSON document (all of it).
fn json_of(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let stdout = ok(&common::cli::gpuwmm(args, dir));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Asserts that a document's `confidence` counts `runs` runs, none of them an error.
fn assert_confidence_of_clean_runs(confidence: &serde_json::Value, runs: u64) {
    assert_eq!(
        (&confidence["runs"], &confidence["errors"]),
        (&runs.into(), &0.into()),
        "{confidence}"
    );
}

#[test]
fn check_json_is_one_document_with_counts_rate_confidence_and_journal() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let check = words("check cbe-dot --runs 100 --backend sim --json");
    let failing = json_of(dir.path(), &check);
    assert_eq!(failing["app"], "cbe-dot");
    assert_eq!(failing["env"], "sys-str+");
    assert_eq!(failing["backend"], "sim");
    assert!(failing["provenance"]
        .as_str()
        .unwrap()
        .contains("simulator"));
    assert_eq!(failing["runs"], 100);
    let outcomes = failing["outcomes"].as_object().unwrap();
    let keys: Vec<&str> = outcomes.keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 4);
    for key in ["pass", "fail", "timeout", "crash"] {
        assert!(keys.contains(&key), "{keys:?}");
    }
    let total: u64 = outcomes.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, 100);
    let rate = &failing["error_rate"];
    assert!(failing["errors"].as_u64().unwrap() > 0);
    assert_eq!(rate["count"], failing["errors"]);
    let (low, mid, high) = (
        rate["low"].as_f64(),
        rate["rate"].as_f64(),
        rate["high"].as_f64(),
    );
    assert!(low <= mid && mid <= high, "{rate}");
    assert!(failing["confidence"].is_null());
    let journal = failing["journal"].as_str().unwrap();
    assert_eq!(journal, "results/check/cbe-dot-sys-str+-sim-seed1.csv");
    assert!(dir.path().join(journal).is_file());
    let replay = failing["first_error"]["replay"].as_str().unwrap();
    assert!(
        replay.starts_with(&format!("gpuwmm replay {journal} ")),
        "{replay}"
    );

    let fenced = json_of(dir.path(), &[&check[..], &["--fences", "all"]].concat());
    assert_eq!(
        (&fenced["runs"], &fenced["errors"]),
        (&100.into(), &0.into())
    );
    let confidence = &fenced["confidence"];
    assert_confidence_of_clean_runs(confidence, 100);
    let upper = confidence["upper_95"].as_f64().unwrap();
    assert!((upper - 0.0295).abs() < 1e-4, "{confidence}");
    assert_eq!(confidence["rule_of_three"], 0.03);
    assert_eq!(
        fenced["journal"],
        "results/check/cbe-dot-sys-str+-sim-seed1-2.csv"
    );
}

#[test]
fn harden_json_is_one_document_with_the_fences_stability_confidence_and_files() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let args = words("harden cbe-dot --backend sim --stable-runs 200 --json");
    let document = json_of(dir.path(), &args);
    assert_eq!(document["app"], "cbe-dot");
    assert_eq!(document["backend"], "sim");
    assert_eq!(document["stable"], true);
    assert_eq!(document["stability_check"]["runs"], 200);
    assert_eq!(document["stability_runs"], 200);
    let confidence = &document["confidence"];
    assert_confidence_of_clean_runs(confidence, 200);
    assert!(
        confidence["upper_95"].as_f64().unwrap() < confidence["rule_of_three"].as_f64().unwrap()
    );
    let fences = document["fences"].as_array().unwrap();
    assert!(!fences.is_empty());
    let kernel = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/cbe-dot/kernel.cu");
    let source = std::fs::read_to_string(&kernel).unwrap();
    for fence in fences {
        assert!(fence["site"].is_u64(), "{fence}");
        let file = std::fs::canonicalize(fence["file"].as_str().unwrap()).unwrap();
        assert_eq!(file, kernel.canonicalize().unwrap(), "{fence}");
        let line = fence["line"].as_u64().unwrap() as usize;
        let text = source.lines().nth(line - 1).unwrap().trim();
        assert_eq!(fence["source"], text);
        let kind = fence["kind"].as_str().unwrap();
        assert!(
            kind.starts_with("fence.") || kind.starts_with("membar."),
            "{kind}"
        );
    }
    let journal = dir.path().join(document["journal"].as_str().unwrap());
    assert!(journal.ends_with("results/harden/cbe-dot-sys-str+-sim-seed1.csv"));
    assert!(dir
        .path()
        .join(document["patch"].as_str().unwrap())
        .is_file());
    // The sidecar records the same result and confidence, and a finished hardening.
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(journal.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(sidecar["confidence"], document["confidence"]);
    assert_eq!(sidecar["result"]["fences"], document["fences"]);
}

/// Regression: `gpuwmm devices | head -1` panicked with "failed printing to stdout: Broken pipe"
/// (exit 101) once the reader had gone. A closed pipe now ends a command quietly, with success.
#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("check.csv");
    let litmus = words("litmus run tests/litmus/MP+membar.gl.litmus --backend sim");
    let mut commands = vec![vec!["devices"], vec!["apps"], litmus.to_vec()];
    if gpuwmm::toolchain::tools_for_tests().is_some() {
        let check = words("check cbe-dot --backend sim --runs 5 --journal");
        commands.push([&check[..], &[journal.to_str().unwrap()]].concat());
    }
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(writer)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_not_in_stderr(&out, "panicked", &format!("{args:?}"));
    }
}

/// Regression: `harden` with worker processes and `cost` reported an unknown app as a worker's
/// failure (exit code 1), and `campaign` wrote its plan before finding out.
#[test]
fn an_unknown_app_is_bad_input_and_nothing_is_written() {
    let commands: [&[&str]; 4] = [
        &["check", "nope", "--runs", "1"],
        &["harden", "nope", "--jobs", "2"],
        &["cost", "nope", "--runs", "1"],
        &words("campaign --apps cbe-dot,nope --envs no-str- --runs 1"),
    ];
    for args in commands {
        let dir = tempfile::tempdir().unwrap();
        let out = common::cli::gpuwmm(&[args, &["--backend", "sim"]].concat(), dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("unknown application 'nope' (known: cbe-ht, cbe-dot,"),
            "{args:?}: {}",
            stderr(&out)
        );
        let written: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(written.is_empty(), "{args:?} wrote {written:?}");
    }
}

/// Bug: the PTX cache keyed a compilation by the file name as given, and NVRTC makes a relative
/// name absolute against the working directory, so the same `kernel.cu` compiled from another
/// folder came back from the cache naming the first folder's file (seen as
/// `/work/h19b/apps/…` after a worktree had been removed).
#[test]
fn a_relative_source_compiled_from_two_folders_names_each_folders_file() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let kernel = "extern \"C\" __global__ void k(int *p) { p[0] = 1; }\n";
    let sites_in = |folder: &str| {
        let folder = dir.path().join(folder);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("kernel.cu"), kernel).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
            .args(["ptx", "sites", "kernel.cu"])
            .env("GPUWMM_CACHE_DIR", dir.path().join("cache"))
            .current_dir(&folder)
            .output()
            .unwrap();
        ok(&out)
    };
    assert!(
        sites_in("a").contains("/a/kernel.cu:1"),
        "{}",
        sites_in("a")
    );
    let second = sites_in("b");
    assert!(second.contains("/b/kernel.cu:1"), "{second}");
    assert!(!second.contains("/a/kernel.cu"), "{second}");
}

/// A copy of the fixture app `handoff-grid` in `dir`, its app.toml edited by `edit`.
fn handoff_copy(dir: &std::path::Path, edit: impl Fn(String) -> String) -> std::path::PathBuf {
    let app = common::copy_fixture_app("handoff-grid", &dir.join("app"));
    let manifest = app.join("app.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, edit(text)).unwrap();
    app
}

/// Bug: `--app-dir DIR` without the app's name (the form the README teaches) took the name from
/// a manifest that could not be read as a failure (exit code 1), where the same folder with the
/// name given is bad input (exit code 2).
#[test]
fn an_app_dir_without_a_name_whose_manifest_is_malformed_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let broken = handoff_copy(dir.path(), |text| text + "x = = 1\n");
    let lines = std::fs::read_to_string(broken.join("app.toml"))
        .unwrap()
        .lines()
        .count();
    let no_kernel = handoff_copy(&dir.path().join("k"), |text| {
        text.replacen("kernel = \"handoff\"", "# no kernel", 1)
    });
    let commands: [&[&str]; 3] = [
        &["check", "--runs", "3"],
        &["harden"],
        &["cost", "--runs", "2"],
    ];
    for args in commands {
        let run = |app: &std::path::Path| {
            let app_dir = ["--app-dir", app.to_str().unwrap(), "--backend", "sim"];
            common::cli::gpuwmm(&[args, &app_dir].concat(), dir.path())
        };
        let out = run(&broken);
        assert_bad_input(&out, "app/app.toml: invalid TOML");
        assert!(
            stderr(&out).contains(&format!("line {lines}")),
            "{args:?}: {}",
            stderr(&out)
        );
        let out = run(&no_kernel);
        assert_bad_input(&out, "app/app.toml:30: launches[0].kernel: missing");
        for missing in [dir.path().join("no-such-app"), broken.join("kernel.cu")] {
            let out = run(&missing);
            let manifest = missing.join("app.toml");
            assert_bad_input(&out, &format!("cannot read {}", manifest.display()));
        }
    }
}

/// Bug: a check or hardening given a `--journal` that exists calibrated stress first (about
/// 10 s on the simulator) and only then refused the journal; a cost measurement planned its apps
/// (and could run a hardening) before refusing its `--out`. The app here does not compile, so
/// anything the commands did before the refusal would end in that error instead.
#[test]
fn an_existing_journal_is_refused_before_calibrating_or_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let app = handoff_copy(dir.path(), |text| text);
    std::fs::write(app.join("kernel.cu"), "this is not CUDA\n").unwrap();
    let app = app.to_str().unwrap();
    for (path, what) in [("mine.csv", ""), ("c/cost.csv", ""), ("t/tune.csv", "")] {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, what).unwrap();
    }
    let commands: [(&[&str], &str); 4] = [
        (
            &[
                "check",
                "--app-dir",
                app,
                "--runs",
                "50",
                "--journal",
                "mine.csv",
            ],
            "journal mine.csv already exists: pass --resume",
        ),
        (
            &["harden", "--app-dir", app, "--journal", "mine.csv"],
            "journal mine.csv already exists: pass --resume",
        ),
        (
            &["cost", "--app-dir", app, "--out", "c"],
            "c already holds a cost measurement (c/cost.csv exists): pass --resume",
        ),
        (
            &["tune", "--out", "t"],
            "t already holds a tuning (t/tune.csv exists): pass --resume",
        ),
    ];
    for (args, refusal) in commands {
        let out = common::cli::gpuwmm(&[args, &["--backend", "sim"]].concat(), dir.path());
        assert_bad_input(&out, refusal);
        assert_not_in_stderr(&out, "NVRTC", &format!("{args:?}"));
    }
}

/// Bug: `--resume --journal does-not-exist.csv` said "journal does-not-exist.json: No such file
/// or directory", naming the sidecar rather than the journal given.
#[test]
fn a_resume_of_a_journal_that_does_not_exist_names_the_journal_given() {
    let dir = tempfile::tempdir().unwrap();
    let commands: [&[&str]; 3] = [
        &[
            "check",
            "cbe-dot",
            "--runs",
            "5",
            "--journal",
            "does-not-exist.csv",
        ],
        &["harden", "cbe-dot", "--journal", "does-not-exist.csv"],
        &["cost", "--out", "does-not-exist"],
    ];
    for args in commands {
        let args = [args, &["--resume", "--backend", "sim"]].concat();
        let out = common::cli::gpuwmm(&args, dir.path());
        assert_bad_input(&out, "does-not-exist");
        assert_bad_input(&out, "does not exist: leave out --resume");
        assert_not_in_stderr(&out, ".json", &format!("{args:?}"));
    }
}

/// Bugs seen with an installed binary run outside the checkout: the top-level help suggested
/// `gpuwmm ptx sites apps/cbe-dot/kernel.cu` ("No such file or directory", exit 2), and
/// `gpuwmm ptx sites cbe-dot` warned "/built-in/gpuwmm/apps/cbe-dot/kernel.cu: source lines not
/// shown: cannot read it", while harden showed the lines from the source in the binary.
#[test]
fn an_installed_binary_runs_the_helps_suggestions_and_shows_built_in_lines() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let help = ok(&common::cli::gpuwmm_installed(&["--help"], dir.path()));
    let footer = &help[help.find("Start with").expect("the footer")..];
    let suggested: Vec<&str> = footer.split('`').skip(1).step_by(2).collect();
    assert!(suggested.len() >= 2, "{footer}");
    for command in suggested.iter().filter(|c| c.starts_with("gpuwmm ")) {
        let out = common::cli::gpuwmm_installed(&words(command)[1..], dir.path());
        ok(&out);
        assert_not_in_stderr(&out, "warning", command);
    }
    let out = common::cli::gpuwmm_installed(&words("ptx sites cbe-dot"), dir.path());
    let text = ok(&out);
    assert_not_in_stderr(&out, "source lines not shown", "ptx sites cbe-dot");
    assert!(
        text.contains("/built-in/gpuwmm/apps/cbe-dot/kernel.cu:38  [dot]\n       | while (atomicCAS(lock, 0, 1) != 0) {"),
        "{text}"
    );
}

/// A copy of the fixture app `name` in `dir/<copy>`, with `edit` applied to the text of its
/// file `file`.
fn edited_fixture(
    dir: &std::path::Path,
    name: &str,
    copy: &str,
    file: &str,
    edit: fn(String) -> String,
) {
    let to = dir.join(copy);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(common::fixture_app(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    let path = to.join(file);
    std::fs::write(&path, edit(std::fs::read_to_string(&path).unwrap())).unwrap();
}

/// Bug: `gpuwmm apps --app-dir DIR`, offered as "is it read as intended?", passed a wrong
/// kernel name, a launch with too few arguments and a source NVRTC refuses with exit code 0,
/// showing only name, idiom, post-condition and source. It now compiles and resolves the app as
/// a check does (exit 2 on the same errors) and shows what it read.
#[test]
fn apps_app_dir_compiles_and_resolves_the_app_as_check_does() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let apps = |copy: &str| common::cli::gpuwmm(&["apps", "--app-dir", copy], dir.path());
    edited_fixture(dir.path(), "handoff-grid", "name", "app.toml", |t| {
        t.replace("kernel = \"handoff\"", "kernel = \"handof\"")
    });
    assert_bad_input(
        &apps("name"),
        "name/app.toml:31: launches[0].kernel: no kernel 'handof'",
    );
    edited_fixture(dir.path(), "handoff-grid", "args", "app.toml", |t| {
        t.replace("[\"data\", \"flag\", \"out\"]", "[\"data\", \"flag\"]")
    });
    assert_bad_input(
        &apps("args"),
        "args/app.toml:34: launches[0].args: kernel 'handoff' takes 3 parameters, but 2 arguments are given",
    );
    edited_fixture(dir.path(), "handoff-grid", "nvrtc", "kernel.cu", |t| {
        t + "garbage here;\n"
    });
    assert_bad_input(&apps("nvrtc"), "identifier \"garbage\" is undefined");

    let shown = ok(&common::cli::gpuwmm(
        &[
            "apps",
            "--app-dir",
            common::fixture_app("stepred").to_str().unwrap(),
        ],
        dir.path(),
    ));
    for expected in [
        "size sim: blocks = 4, steps = 3, threads = 32\n",
        "      in           i32 x 128      from file input.txt\n",
        "      input        i32 x 128      copy of in\n",
        "      launches[0]: stepReduce<int> -> _Z10stepReduceIiEvPKT_PVS0_PS0_ii, grid 4, block 32, repeat 3\n",
        "        args (step 2): in, partial, out, 2, 3\n",
        "    check (verdict in result[0], 0 = pass):\n      check: checkSteps -> _Z10checkStepsPKiS0_Pjii, grid 1, block 1\n        args: input, out, result, 128, 3\n",
        "size gpu: blocks = 32, steps = 8, threads = 128\n",
        "        args (step 2): in, partial, out, 2, 3\n        …\n        args (step 7): in, partial, out, 7, 8\n",
    ] {
        assert!(shown.contains(expected), "{expected:?} not in:\n{shown}");
    }
    // A built-in app by its name, its manifest read from the binary.
    let sdk = ok(&gpuwmm(&words("apps sdk-red")));
    assert!(sdk.contains("      launches[0]: reduce, grid 4, block 64\n        args: input, partial, out, counter, 512\n"), "{sdk}");
    let dot = ok(&gpuwmm(&words("apps cbe-dot")));
    assert!(
        dot.contains("    kernels: dot (host code in Rust)\n"),
        "{dot}"
    );
}

/// The list of every app compiles none: it works where no NVRTC can be found.
#[test]
fn the_list_of_apps_compiles_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(common::cli::installed_gpuwmm())
        .arg("apps")
        .env("GPUWMM_CUDA_TOOLS", dir.path().join("no-tools"))
        .env("HOME", dir.path())
        .env("GPUWMM_CACHE_DIR", dir.path().join("cache"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(text.contains("cccl-scan-rlx\n"), "{text}");
    assert!(!dir.path().join("cache").exists(), "nothing compiled");
}

/// Bug: an installed binary's harden of a built-in app said "apply it in
/// /built-in/gpuwmm/apps/sdk-red", a folder that exists nowhere; the patch applies to a copy of
/// the app's folder of the repository, with paths relative to it.
#[test]
fn an_installed_binarys_patch_of_a_built_in_app_names_where_it_applies() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let args = words("harden sdk-red-nf --backend sim --stable-runs 50 --journal h.csv");
    let text = ok(&common::cli::gpuwmm_installed(&args, dir.path()));
    assert!(
        text.contains("apply it in a copy of apps/sdk-red of gpuwmm's repository"),
        "{text}"
    );
    assert!(!text.contains("apply it in /built-in"), "{text}");
    assert!(text.contains("--- a/kernel.cu\n"), "{text}");
}

/// QA: harden's final fences, each of its own kind, could not be given to `check --fences`
/// (`'0@fence.sc.gpu' is not a site id`), though harden's journal names fence sets so. `id@kind`
/// entries are read now; a kind that does not exist is bad input.
#[test]
fn check_fences_take_a_kind_per_site_as_harden_names_them() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app_dir = common::fixture_app("peterson-lock");
    let check = |fences: &str, journal: &str| {
        let app = app_dir.to_str().unwrap();
        let args = [
            "check",
            "--app-dir",
            app,
            "--backend",
            "sim",
            "--runs",
            "300",
        ];
        let mut args: Vec<&str> = args.to_vec();
        args.extend(["--json", "--fences", fences, "--journal", journal]);
        common::cli::gpuwmm(&args, dir.path())
    };
    let kept = "0@fence.sc.gpu,1@fence.sc.gpu,2@fence.acq_rel.gpu,4@fence.acq_rel.gpu";
    let document: serde_json::Value = serde_json::from_str(&ok(&check(kept, "kept.csv"))).unwrap();
    assert_eq!(document["outcomes"]["fail"], 0, "{document}");
    let label = "0@fence.sc.gpu 1@fence.sc.gpu 2@fence.acq_rel.gpu 4@fence.acq_rel.gpu";
    assert_eq!(document["fences"], label);
    // The lock's two fence.sc as release/acquire fences: it fails.
    let weaker = "0-2@fence.acq_rel.gpu 4@fence.acq_rel.gpu";
    let document: serde_json::Value =
        serde_json::from_str(&ok(&check(weaker, "weaker.csv"))).unwrap();
    assert!(
        document["outcomes"]["fail"].as_u64().unwrap() > 0,
        "{document}"
    );
    let bad = check("0@fence.bogus", "bad.csv");
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("fence.bogus"), "{}", stderr(&bad));
}
