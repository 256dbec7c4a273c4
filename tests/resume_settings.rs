//! A journal holds the runs of one set-up: `--resume` and `replay` refuse an option given that
//! differs from the journal's, and an app whose sources or PTX changed, naming what differs and
//! both values (exit 2); `--force` goes on and the sidecar records it (issue 27, item 2).
//!
//! Needs NVRTC, no GPU; everything runs on the simulator.

use gpuwmm::check::journal::{read_meta_entry, read_rows};
use gpuwmm::check::RunRecord;
use gpuwmm::job::settings::Forced;
use std::path::Path;
use std::process::Output;

mod common;
use common::cli::{assert_bad_input, gpuwmm, words, SMALL_TUNE};

/// `check cbe-dot --env no-str- --backend sim --runs <runs> --journal j.csv` and `extra`.
fn check(dir: &Path, runs: &str, extra: &str) -> Output {
    let line = format!("check cbe-dot --env no-str- --backend sim --journal j.csv --runs {runs}");
    let out = gpuwmm_with(&line, extra, dir);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Runs the command `line` with the options `more` after it, in `dir`.
fn gpuwmm_with(line: &str, more: &str, dir: &Path) -> Output {
    gpuwmm(&[words(line), words(more)].concat(), dir)
}

fn runs(journal: &Path) -> Vec<u64> {
    let rows: Vec<RunRecord> = read_rows(journal).unwrap();
    rows.iter().map(|r| r.run).collect()
}

/// Bug: `check --resume --fences all` went on with the journal's "fences as-is" without a
/// word, and so did `--seed`, `--sim-model`, `--stress-factor` and `--app-dir`.
#[test]
fn resume_with_other_fences_is_refused() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    assert!(check(dir.path(), "3", "").status.success());
    let refused = check(dir.path(), "6", "--resume --fences all");
    assert_bad_input(
        &refused,
        "cannot resume j.csv: --fences recorded as-is, given 0 1 2 3",
    );
    for (option, recorded, given) in [
        ("--seed 7", "--seed recorded 1", "given 7"),
        ("--sim-model sc", "--sim-model recorded ptx", "given sc"),
        (
            "--stress-factor 2",
            "--stress-factor recorded 10",
            "given 2",
        ),
        ("--size gpu", "--size recorded sim", "given gpu"),
    ] {
        let refused = check(dir.path(), "6", &format!("--resume {option}"));
        assert_bad_input(&refused, recorded);
        assert_bad_input(&refused, given);
    }
    assert_eq!(runs(&dir.path().join("j.csv")), [0, 1, 2], "nothing ran");
    // The journal's own values, given or left out, go on.
    let same = check(
        dir.path(),
        "5",
        "--resume --fences as-is --seed 1 --sim-model ptx",
    );
    assert!(same.status.success());
    assert_eq!(runs(&dir.path().join("j.csv")), [0, 1, 2, 3, 4]);
}

#[test]
fn resume_with_another_app_dir_is_refused() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apps/handoff-block");
    copy_dir(&fixture, &dir.path().join("a"));
    copy_dir(&fixture, &dir.path().join("b"));
    let line = "check handoff-block --env no-str- --backend sim --journal j.csv";
    let start = gpuwmm_with(line, "--runs 2 --app-dir a", dir.path());
    assert!(start.status.success());
    let moved = gpuwmm_with(line, "--runs 4 --resume --app-dir b", dir.path());
    assert_bad_input(&moved, "--app-dir recorded ");
    assert_bad_input(&moved, "/a, given ");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A bring-your-own app copied into `dir/app`, checked for 3 runs into `dir/j.csv`.
fn checked_app(dir: &Path) -> Output {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apps/handoff-block");
    copy_dir(&fixture, &dir.join("app"));
    let out = app_check(dir, "3", "");
    assert!(out.status.success());
    out
}

fn app_check(dir: &Path, runs: &str, extra: &str) -> Output {
    let line = format!(
        "check handoff-block --app-dir app --env no-str- --backend sim --journal j.csv --runs {runs}"
    );
    let out = gpuwmm_with(&line, extra, dir);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// A temporary folder holding a [`checked_app`] whose kernel was then edited, or `None`
/// without the CUDA tools.
fn checked_then_edited_app() -> Option<tempfile::TempDir> {
    let dir = common::temp_dir_with_tools()?;
    checked_app(dir.path());
    edit_kernel(dir.path());
    Some(dir)
}

fn edit_kernel(dir: &Path) {
    let kernel = dir.join("app/kernel.cu");
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, text + "\n// edited after the journal started\n").unwrap();
}

/// Bug: a `kernel.cu` edited between two `--resume`s was picked up silently, so runs 0–4 of one
/// journal came from the old kernel and 5–9 from the new one.
///
/// Bug: the refusal then said only "sources recorded sha256 …, now sha256 …; give the journal's
/// values …", advice for an option that does not apply to a source edit.
#[test]
fn edited_kernel_is_refused_on_resume() {
    let dir = common::or_skip!(checked_then_edited_app());
    let refused = app_check(dir.path(), "6", "--resume");
    assert_bad_input(
        &refused,
        "cannot resume j.csv: the app changed since the journal was written (sources recorded \
         sha256 ",
    );
    assert_bad_input(&refused, "now sha256 ");
    assert_bad_input(
        &refused,
        "start a new journal, or pass --force to go on with the app as it is now (recorded in its \
         sidecar)",
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!said.contains("journal's values"), "{said}");
    assert_eq!(runs(&dir.path().join("j.csv")), [0, 1, 2], "nothing ran");
}

/// Bug: `replay J 0` after the kernel was edited ran the new kernel and reported "differs".
#[test]
fn replay_refuses_an_edited_kernel() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    checked_app(dir.path());
    assert!(gpuwmm(&words("replay j.csv 0"), dir.path())
        .status
        .success());
    edit_kernel(dir.path());
    let refused = gpuwmm(&words("replay j.csv 0"), dir.path());
    assert_bad_input(
        &refused,
        "cannot replay a run of j.csv: sources recorded sha256 ",
    );
    let forced = gpuwmm(&words("replay j.csv 0 --force"), dir.path());
    assert!(forced.status.success());
    let said = String::from_utf8_lossy(&forced.stderr);
    assert!(said.contains("warning: --force"), "{said}");
}

/// `--force` goes on with the app as it is now, records when and from which row in the
/// sidecar, and `replay` then compares each row with the sources it ran with.
#[test]
fn force_resumes_an_edited_kernel_and_the_sidecar_records_it() {
    let dir = common::or_skip!(checked_then_edited_app());
    let forced = app_check(dir.path(), "5", "--resume --force");
    assert!(forced.status.success());
    let journal = dir.path().join("j.csv");
    assert_eq!(runs(&journal), [0, 1, 2, 3, 4]);
    let list: Vec<Forced> = read_meta_entry(&journal, "forced").unwrap().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].from_row, 3);
    assert_eq!(list[0].differences[0].option, "sources");
    // A further resume compares with the sources the forced runs used: nothing to refuse.
    assert!(app_check(dir.path(), "6", "--resume").status.success());
    assert!(gpuwmm(&words("replay j.csv 4"), dir.path())
        .status
        .success());
    let before = gpuwmm(&words("replay j.csv 1"), dir.path());
    assert_bad_input(&before, "sources recorded sha256 ");
}

/// `from` and every folder under it, copied into `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        match entry.file_type().unwrap().is_dir() {
            true => copy_tree(&entry.path(), &to.join(entry.file_name())),
            false => drop(std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap()),
        }
    }
}

/// Bug: the data file a buffer is read from (`init = { file = "input.txt" }`) edited after
/// `check --journal` started: `--resume` appended runs with other inputs without a word, and
/// `replay` reported "reproduced: fail (with a different reason)". Both refuse it now, naming
/// the file, as they refuse an edited kernel.
#[test]
fn an_edited_input_file_is_refused_on_resume_and_replay() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apps/stepred");
    copy_tree(&fixture, &dir.path().join("app"));
    let line = "check stepred --app-dir app --env no-str- --backend sim --journal j.csv";
    assert!(gpuwmm_with(line, "--runs 3", dir.path()).status.success());
    let journal = dir.path().join("j.csv");
    assert!(gpuwmm(&words("replay j.csv 1"), dir.path())
        .status
        .success());
    let input = dir.path().join("app/input.txt");
    let text = std::fs::read_to_string(&input).unwrap();
    std::fs::write(&input, text.replacen("-9 ", "7 ", 1)).unwrap();
    let refused = gpuwmm_with(line, "--runs 6 --resume", dir.path());
    assert_bad_input(
        &refused,
        "cannot resume j.csv: the app changed since the journal was written (input file \
         input.txt recorded sha256 ",
    );
    assert_eq!(runs(&journal), [0, 1, 2], "nothing ran");
    let replay = gpuwmm(&words("replay j.csv 1"), dir.path());
    assert_bad_input(
        &replay,
        "cannot replay a run of j.csv: input file input.txt recorded sha256 ",
    );
    // The sources did not change: only the input file is named.
    assert!(!String::from_utf8_lossy(&replay.stderr).contains("sources recorded"));
    // Put back, the journal goes on.
    std::fs::write(&input, text).unwrap();
    assert!(gpuwmm_with(line, "--runs 5 --resume", dir.path())
        .status
        .success());
    assert_eq!(runs(&journal), [0, 1, 2, 3, 4]);
}

/// A sidecar written before gpuwmm recorded app hashes cannot show that the app is unchanged:
/// resume and replay refuse it, and `--force` goes on.
#[test]
fn a_journal_without_app_hashes_is_refused_unless_forced() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    assert!(check(dir.path(), "3", "").status.success());
    let sidecar = dir.path().join("j.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sidecar).unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("app_hash");
    std::fs::write(&sidecar, meta.to_string()).unwrap();
    let refused = check(dir.path(), "5", "--resume");
    assert_bad_input(
        &refused,
        "the journal records no hash of the app, so nothing shows it is unchanged (sources \
         recorded no hash (written before gpuwmm recorded one)",
    );
    assert_bad_input(&refused, "pass --force");
    let replay = gpuwmm(&words("replay j.csv 0"), dir.path());
    assert_bad_input(&replay, "PTX recorded no hash");
    assert!(check(dir.path(), "5", "--resume --force").status.success());
    assert_eq!(runs(&dir.path().join("j.csv")), [0, 1, 2, 3, 4]);
}

/// Bug: `harden --resume` with other `--iterations` or stability check warned and went on
/// with the journal's; now refused like any other option.
#[test]
fn harden_resume_with_other_iterations_is_refused() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let line = "harden cbe-dot --backend sim --journal h.csv";
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .args(words(line))
        .args(words("--stable-runs 50 --iterations 20"))
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = dir.path().join("h.csv");
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 3 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let resumed = gpuwmm_with(
        line,
        "--resume --stable-runs 50 --iterations 40",
        dir.path(),
    );
    assert_bad_input(&resumed, "--iterations recorded 20, given 40");
    let stable = gpuwmm_with(
        line,
        "--resume --stable-runs 60 --iterations 20",
        dir.path(),
    );
    assert_bad_input(&stable, "--stable-runs recorded 50 runs, given 60 runs");
}

/// Bug: `campaign --resume` with other options ran the cells not started yet with them; the
/// plan records the campaign's options and a resume compares those it is given.
#[test]
fn campaign_resume_with_other_fences_is_refused() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let line = "campaign --apps cbe-dot --envs no-str- --backend sim --runs 2 --out c";
    assert!(gpuwmm(&words(line), dir.path()).status.success());
    let plan = std::fs::read_to_string(dir.path().join("c/plan.json")).unwrap();
    assert!(plan.contains("\"--fences\": \"as-is\""), "{plan}");
    let refused = gpuwmm_with(line, "--resume --fences all", dir.path());
    assert_bad_input(
        &refused,
        "cannot resume c: --fences recorded as-is, given all",
    );
    let seed = gpuwmm_with(line, "--resume --seed 2", dir.path());
    assert_bad_input(&seed, "--seed recorded 1, given 2");
    assert!(gpuwmm_with(line, "--resume", dir.path()).status.success());
}

/// `SMALL_TUNE` into `dir/t` (profile `dir/p.toml`) with `extra`.
fn tune(dir: &Path, extra: &str) -> Output {
    let into = words("--out t --profile-out p.toml");
    let out = gpuwmm(&[&SMALL_TUNE[..], &into, &words(extra)].concat(), dir);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Bug: `tune --resume` with settings that differ from the journal's was refused, and nothing
/// went past it (`--force` only replaced a profile). With `--resume --force` the tuning goes on
/// with the journal's settings, and its sidecar's `forced` list records from which row and what
/// differed, as check and harden do.
#[test]
fn tune_resume_force_goes_on_with_the_journals_settings() {
    let dir = tempfile::tempdir().unwrap();
    assert!(tune(dir.path(), "--seed 7").status.success());
    let journal = dir.path().join("t/tune.csv");
    let full = std::fs::read_to_string(&journal).unwrap();
    // Cut back as a kill leaves it: the header and five rows, no summary.
    let kept: Vec<&str> = full.lines().take(6).collect();
    std::fs::write(&journal, kept.join("\n") + "\n").unwrap();
    std::fs::remove_file(dir.path().join("t/summary.md")).unwrap();
    let refused = tune(dir.path(), "--seed 8 --resume");
    assert_bad_input(&refused, "--seed recorded 7, given 8");
    assert_bad_input(&refused, "pass --force");
    assert!(read_meta_entry::<Vec<Forced>>(&journal, "forced")
        .unwrap()
        .is_none());

    let forced = tune(dir.path(), "--seed 8 --resume --force");
    assert!(forced.status.success());
    let said = String::from_utf8_lossy(&forced.stderr);
    assert!(said.contains("warning: --force: going on with"), "{said}");
    // The rows to come ran with the journal's seed: the journal is the one run whole made.
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), full);
    let list: Vec<Forced> = read_meta_entry(&journal, "forced").unwrap().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].from_row, 5);
    let options: Vec<&str> = (list[0].differences.iter())
        .map(|d| d.option.as_str())
        .collect();
    assert_eq!(options, ["--seed"]);
    let profile = std::fs::read_to_string(dir.path().join("p.toml")).unwrap();
    assert!(profile.contains("seed 7"), "{profile}");
}
