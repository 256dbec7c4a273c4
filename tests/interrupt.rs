//! SIGINT and SIGTERM during a journaled job: the process ends between two journal writes, says
//! the exact command that continues the job, and exits with 130 or 143; that command finishes
//! the job with every run once, in order (issue 27, item 7).
//!
//! Needs NVRTC, no GPU; everything runs on the simulator.

use gpuwmm::check::journal::{read_meta_entry, read_rows};
use gpuwmm::check::RunRecord;
use gpuwmm::harden::run::HardenRow;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::cli::words;

const BIN: &str = env!("CARGO_BIN_EXE_gpuwmm");

/// Starts `args` in `dir`, waits until `journal` has `lines` lines, sends `signal` (`INT`,
/// `TERM`) and waits for the process to end.
fn interrupt(dir: &Path, args: &[&str], journal: &str, lines: usize, signal: &str) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let path = dir.join(journal);
    let start = Instant::now();
    while std::fs::read_to_string(&path).map_or(0, |t| t.lines().count()) < lines {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no rows in {journal}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .unwrap()
        .success());
    child.wait_with_output().unwrap()
}

/// Interrupts the command `line` (see [`interrupt`]), checks that it exited as a process
/// stopped by `signal` does (128 plus the signal's number) and returns the resume command it
/// printed.
fn resume_command_after(
    dir: &Path,
    line: &str,
    journal: &str,
    lines: usize,
    signal: &str,
) -> String {
    let interrupted = interrupt(dir, &words(line), journal, lines, signal);
    let code = match signal {
        "INT" => 130,
        "TERM" => 143,
        other => panic!("no exit code known for SIG{other}"),
    };
    assert_eq!(interrupted.status.code(), Some(code));
    printed_command(&interrupted)
}

/// The command the interrupted process printed after "continue with:".
fn printed_command(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let (_, after) = stderr
        .split_once("; continue with:\n  ")
        .unwrap_or_else(|| panic!("no resume command in:\n{stderr}"));
    after.lines().next().unwrap().to_string()
}

/// Runs a printed command (words without spaces) in `dir` and asserts that it finishes.
fn finish_printed(dir: &Path, command: &str) {
    let words = words(command);
    let output = Command::new(words[0])
        .args(&words[1..])
        .current_dir(dir)
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{command}");
}

/// Asserts that the journal `rows` are runs 0 to `runs - 1`, in order.
fn assert_runs_in_order(rows: &[RunRecord], runs: u64, journal: &str) {
    let numbers: Vec<u64> = rows.iter().map(|r| r.run).collect();
    assert_eq!(numbers, (0..runs).collect::<Vec<_>>(), "{journal}");
}

/// Bug: Ctrl-C ended a check with exit 130 and no word on how to go on.
#[test]
fn sigint_during_a_check_exits_130_and_prints_the_resume_command_that_finishes_it() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let line = "check cbe-dot --env sys-str+ --backend sim --runs 2000";
    let command = resume_command_after(
        dir.path(),
        line,
        "results/check/cbe-dot-sys-str+-sim-seed1.csv",
        60,
        "INT",
    );
    assert_eq!(
        command,
        format!("{BIN} {line} --journal results/check/cbe-dot-sys-str+-sim-seed1.csv --resume")
    );
    let journal = dir
        .path()
        .join("results/check/cbe-dot-sys-str+-sim-seed1.csv");
    let before: Vec<RunRecord> = read_rows(&journal).unwrap();
    assert!(
        before.len() >= 59 && before.len() < 2000,
        "{}",
        before.len()
    );
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.ends_with('\n'), "a row was left half-written");
    finish_printed(dir.path(), &command);
    let after: Vec<RunRecord> = read_rows(&journal).unwrap();
    assert_eq!(&after[..before.len()], &before[..], "recorded runs changed");
    assert_runs_in_order(&after, 2000, "the check journal");
}

/// SIGTERM (kill, a Slurm time limit) during a hardening with worker processes: exit 143, the
/// command printed, and the resumed hardening ends with each query's runs numbered in order.
#[test]
fn sigterm_during_harden_exits_143_and_the_printed_command_finishes_it() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let line = "harden cbe-dot --backend sim --stable-runs 3000 --jobs 2 --journal h.csv";
    let command = resume_command_after(dir.path(), line, "h.csv", 40, "TERM");
    assert_eq!(command, format!("{BIN} {line} --resume"));
    finish_printed(dir.path(), &command);
    let journal = dir.path().join("h.csv");
    let rows: Vec<HardenRow> = read_rows(&journal).unwrap();
    let mut next = std::collections::BTreeMap::new();
    for row in &rows {
        let expected = next.entry(row.query).or_insert(0u64);
        assert_eq!(row.run, *expected, "query {}", row.query);
        *expected += 1;
    }
    let result: Option<serde_json::Value> = read_meta_entry(&journal, "result").unwrap();
    assert!(result.is_some(), "the resumed hardening records its result");
}

/// Bug: the patch check's runs were not journaled, so a hardening killed while it checked its
/// patch ran the patched app from run 0 again when resumed. Now the resumed check goes on after
/// the runs its journal holds, and says how many it took from there.
#[test]
fn sigterm_during_the_patch_check_resumes_after_the_runs_made() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app = common::fixture_app("rmw-message-passing");
    let line = format!(
        "harden --app-dir {} --backend sim --patch-runs 3000 --journal h.csv",
        app.display()
    );
    let pj = "h.csv.patch-check.jsonl";
    let command = resume_command_after(dir.path(), &line, pj, 200, "TERM");
    let journal = dir.path().join(pj);
    let before = std::fs::read_to_string(&journal).unwrap().lines().count() - 1;
    assert!((199..3000).contains(&before), "{before} runs journaled");
    let words = words(&command);
    let output = Command::new(words[0])
        .args(&words[1..])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{command}\n{stdout}");
    let passed =
        format!("passed 3000 of 3000 runs under sys-str+ (the first {before} from its journal");
    assert!(stdout.contains(&passed), "{passed:?} not in {stdout}");
    let runs: Vec<u64> = (std::fs::read_to_string(&journal).unwrap().lines().skip(1))
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["run"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(runs, (0..3000).collect::<Vec<_>>());
}

/// A campaign interrupted between cells or in one: the printed command names its folder.
#[test]
fn sigint_during_a_campaign_prints_a_resume_command_with_its_folder() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let line = "campaign --apps cbe-dot --envs no-str-,sys-str+ --backend sim --runs 1500";
    let command = resume_command_after(
        dir.path(),
        line,
        "results/campaign/sim-seed1/cbe-dot-no-str-.csv",
        30,
        "INT",
    );
    assert_eq!(
        command,
        format!("{BIN} {line} --out results/campaign/sim-seed1 --resume")
    );
    finish_printed(dir.path(), &command);
    for cell in ["cbe-dot-no-str-.csv", "cbe-dot-sys-str+.csv"] {
        let rows: Vec<RunRecord> =
            read_rows(&dir.path().join("results/campaign/sim-seed1").join(cell)).unwrap();
        assert_runs_in_order(&rows, 1500, cell);
    }
}

/// Bug: Ctrl-C during `litmus run` of a long suite lost every test that had finished. With
/// `--journal` the printed command runs only the tests the journal lacks, and prints the same
/// conformance table as a run that was never interrupted.
#[test]
fn sigint_during_a_journaled_litmus_run_resumes_to_the_table_of_an_uninterrupted_run() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/litmus");
    let base = format!(
        "litmus run {} --backend sim --executions 3000 --expect {}",
        suite.display(),
        suite.join("expected.csv").display()
    );
    let line = format!("{base} --journal l.csv");
    let command = resume_command_after(dir.path(), &line, "l.csv", 6, "INT");
    assert_eq!(command, format!("{BIN} {line} --resume"));
    let journaled = std::fs::read_to_string(dir.path().join("l.csv"))
        .unwrap()
        .lines()
        .count()
        - 1;
    let files = std::fs::read_dir(&suite).unwrap().count() - 1;
    assert!(
        (5..files).contains(&journaled),
        "{journaled} tests journaled"
    );
    let resumed = common::cli::gpuwmm(&words(&command)[1..], dir.path());
    let resumed = common::cli::ok(&resumed);
    let note = format!("{journaled} test(s) journaled in l.csv: not run again");
    assert!(resumed.contains(&note), "{note:?} not in {resumed}");
    assert_eq!(resumed.matches("(from the journal) ").count(), journaled);
    let fresh = common::cli::ok(&common::cli::gpuwmm(&words(&base), dir.path()));
    let table = |out: &str| out.split_once("\nTest ").map(|(_, t)| t.to_string());
    let without_marks = resumed.replace("(from the journal) ", "");
    assert_eq!(table(&without_marks), table(&fresh));
}
