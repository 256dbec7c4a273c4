//! `gpuwmm campaign --slurm` and `--collect` as a user runs them: the errors a submission can end
//! in (without a cluster), and a simulator campaign run on a real one-node Slurm cluster that
//! `scripts/slurm-local.sh` starts, one of whose tasks is killed mid-run and requeued, collected
//! and compared with the same campaign run here.
//!
//! `gpuwmm tune --slurm` is checked the same way: its scripts (one job per GPU kind), and one
//! simulator tuning run as a job on the local cluster's node (feature `gpuwmm-local`).
//!
//! The cluster tests need root (to install and start Slurm); without it, it says so and skips,
//! unless `GPUWMM_REQUIRE_SLURM=1`, which makes it fail instead.

use gpuwmm::check::journal::read_rows;
use gpuwmm::check::RunRecord;
use gpuwmm::toolchain::tools_for_tests;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::cli::{words, SMALL_TUNE};

const APPS: &str = "cbe-dot,sdk-red";
const ENVS: &str = "no-str-,sys-str+";
/// Runs per cell: enough that the slowest cell (sdk-red under sys-str+, about 9 s for 300 runs
/// on the simulator here) can be killed mid-run.
const RUNS: usize = 300;

fn gpuwmm_with_path(dir: &Path, args: &[&str], path: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpuwmm"));
    command.args(args).current_dir(dir);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.output().unwrap()
}

fn gpuwmm(dir: &Path, args: &[&str]) -> Output {
    gpuwmm_with_path(dir, args, None)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn campaign_args<'a>(runs: &'a str, out: &'a str) -> Vec<&'a str> {
    common::cli::campaign_args(APPS, ENVS, runs, out)
}

/// Exit code 2 and a message on stderr that contains `expected`.
fn assert_bad_input(output: &Output, expected: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
}

/// A folder holding one executable `sbatch` with this body.
fn fake_sbatch(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join("sbatch");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn dry_run_writes_plan_and_script_prints_the_sbatch_command_and_submits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_sbatch(dir.path(), "touch submitted; echo 9");
    let mut args = campaign_args("10", "c");
    args.extend(words(
        "--slurm --partition gpu --gres gpu:1 --array-limit 2 --sbatch-arg --mem=4G --dry-run",
    ));
    let output = gpuwmm_with_path(dir.path(), &args, Some(&bin));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let script = text(&output.stdout);
    let out = dir.path().join("c");
    assert_eq!(
        std::fs::read_to_string(out.join("campaign.sbatch")).unwrap(),
        script
    );
    for line in [
        "#SBATCH --array=0-3%2",
        "#SBATCH --partition=gpu",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --mem=4G",
        "#SBATCH --requeue",
    ] {
        assert!(
            script.lines().any(|l| l == line),
            "no `{line}` in\n{script}"
        );
    }
    let exec = script.lines().last().unwrap();
    assert!(
        exec.contains(&format!(
            "--out {} --resume --cell \"$SLURM_ARRAY_TASK_ID\"",
            out.display()
        )),
        "{exec}"
    );
    for slurm_only in words("--slurm --partition --dry-run --sbatch-arg --gres") {
        assert!(
            !exec.contains(slurm_only),
            "the task gets {slurm_only}: {exec}"
        );
    }
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "sbatch --parsable {}",
            out.join("campaign.sbatch").display()
        )),
        "{stderr}"
    );
    assert!(
        !dir.path().join("submitted").exists(),
        "a dry run ran sbatch"
    );
    assert!(out.join("plan.json").is_file());
}

#[test]
fn a_malformed_sbatch_arg_is_refused_with_exit_code_2_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["mem=4G", "--comment=two words", "--array=0-9"] {
        let mut args = campaign_args("10", "c");
        args.extend(["--slurm", "--dry-run", "--sbatch-arg", bad]);
        let output = gpuwmm(dir.path(), &args);
        assert_bad_input(&output, &format!("malformed sbatch option `{bad}`"));
    }
    assert!(!dir.path().join("c").join("campaign.sbatch").exists());
}

#[test]
fn a_missing_sbatch_is_a_clear_error_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let mut args = campaign_args("10", "c");
    args.push("--slurm");
    let output = gpuwmm_with_path(dir.path(), &args, Some(&empty));
    assert_bad_input(&output, "`sbatch` was not found on PATH");
}

#[test]
fn an_sbatch_that_refuses_the_job_is_a_clear_error_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_sbatch(
        dir.path(),
        "echo 'sbatch: error: invalid partition specified: nope' >&2; exit 1",
    );
    let mut args = campaign_args("10", "c");
    args.extend(["--slurm", "--partition", "nope"]);
    let output = gpuwmm_with_path(dir.path(), &args, Some(&bin));
    assert_bad_input(&output, "invalid partition specified: nope");
    assert_bad_input(&output, "refused");
}

#[test]
fn collect_on_a_folder_that_is_not_a_campaign_is_refused_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = gpuwmm(dir.path(), &["campaign", "--collect", "."]);
    assert_bad_input(&output, "is not a campaign folder");
    let output = gpuwmm(dir.path(), &["campaign", "--collect", "nowhere"]);
    assert_bad_input(&output, "is not a campaign folder");
}

/// Starts the one-node cluster; `None` (after saying why) where it cannot be started because
/// this is not root and `GPUWMM_REQUIRE_SLURM=1` is not set.
fn local_cluster() -> Option<()> {
    let output = slurm_local_within(Duration::from_secs(600));
    let stderr = text(&output.stderr);
    let required = std::env::var("GPUWMM_REQUIRE_SLURM").is_ok_and(|v| v == "1");
    match output.status.code() {
        Some(0) => Some(()),
        Some(3) if !required => {
            eprintln!(
                "skipped: cannot start a local Slurm cluster: {}",
                stderr.trim()
            );
            None
        }
        _ => panic!("scripts/slurm-local.sh failed:\n{stderr}"),
    }
}

/// Runs `scripts/slurm-local.sh`, failing the test (rather than hanging it) if the script has not
/// ended within `limit`. Its output goes to files, not pipes: a daemon or a waiting child that
/// kept a pipe open would hold the test past the script's end.
fn slurm_local_within(limit: Duration) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-local.sh");
    let logs = tempfile::tempdir().unwrap();
    let (out, err) = (logs.path().join("out"), logs.path().join("err"));
    let mut child = Command::new("bash")
        .arg(&script)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
            let stderr = std::fs::read_to_string(&err).unwrap_or_default();
            panic!("scripts/slurm-local.sh still ran after {limit:?}:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Output {
        status,
        stdout: std::fs::read(&out).unwrap(),
        stderr: std::fs::read(&err).unwrap(),
    }
}

/// Regression (stop 38, CI hung): the daemons the script started inherited its lock's descriptor
/// and held the lock for life, so every later call waited forever.
#[test]
fn slurm_local_returns_at_once_when_the_cluster_it_started_is_up() {
    if local_cluster().is_none() {
        return;
    }
    let output = slurm_local_within(Duration::from_secs(60));
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("already running"));
}

fn run_tool(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// The state `scontrol` gives array task `job_task` (e.g. `12_0`).
fn task_state(job_task: &str) -> String {
    let record = run_tool("scontrol", &["-o", "show", "job", job_task]);
    record
        .split_whitespace()
        .find_map(|f| f.strip_prefix("JobState="))
        .unwrap_or("")
        .to_string()
}

/// Polls `ready` every 50 ms until it holds, failing after `limit`.
fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The complete rows of a journal being written (none while it does not exist).
fn complete_rows(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.matches('\n').count().saturating_sub(1))
        .unwrap_or(0)
}

/// Cancels the job when the test ends, passed or not.
struct CancelOnDrop(String);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("scancel").arg(&self.0).output();
    }
}

#[test]
fn a_campaign_on_slurm_with_a_task_killed_and_requeued_collects_the_local_campaigns_counts() {
    if tools_for_tests().is_none() || local_cluster().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runs = RUNS.to_string();
    let local = gpuwmm(dir.path(), &campaign_args(&runs, "local"));
    assert!(local.status.success(), "{}", text(&local.stderr));

    let mut args = campaign_args(&runs, "slurm");
    args.extend(["--slurm", "--array-limit", "2"]);
    let submitted = gpuwmm(dir.path(), &args);
    assert!(submitted.status.success(), "{}", text(&submitted.stderr));
    let job = text(&submitted.stdout).trim().to_string();
    assert!(job.chars().all(|c| c.is_ascii_digit()), "job id `{job}`");
    let _cancel = CancelOnDrop(job.clone());
    let out = dir.path().join("slurm");
    // Task 3 runs the slowest cell.
    let slow = out.join("sdk-red-sys-str+.csv");
    let task3 = format!("{job}_3");

    // Kill task 3 mid-run: once its journal has rows, well before its last.
    wait_for("task 3's first rows", Duration::from_secs(300), || {
        complete_rows(&slow) >= 10
    });
    run_tool("scancel", &["--signal=KILL", &task3]);
    wait_for("task 3 to be cancelled", Duration::from_secs(60), || {
        task_state(&task3) == "CANCELLED"
    });
    let rows_at_kill = complete_rows(&slow);
    assert!(
        rows_at_kill < RUNS,
        "task 3 finished ({rows_at_kill} rows) before it was killed: raise RUNS"
    );
    let collected = gpuwmm(dir.path(), &["campaign", "--collect", "slurm"]);
    assert!(collected.status.success(), "{}", text(&collected.stderr));
    let status = text(&collected.stdout);
    let row = status
        .lines()
        .find(|l| l.starts_with("| 3 | sdk-red | sys-str+ |"));
    assert!(
        row.is_some_and(|r| r.ends_with("| failed (CANCELLED) |")),
        "{status}"
    );

    // Requeued, task 3 resumes its journal; then every task finishes.
    run_tool("scontrol", &["requeue", &task3]);
    wait_for("the job to finish", Duration::from_secs(600), || {
        run_tool("squeue", &["-h", "-j", &job]).trim().is_empty()
    });
    let collected = gpuwmm(dir.path(), &["campaign", "--collect", "slurm"]);
    assert!(collected.status.success(), "{}", text(&collected.stderr));
    let stdout = text(&collected.stdout);
    assert!(stdout.contains("4 cells: 4 done"), "{stdout}");

    let rows: Vec<RunRecord> = read_rows(&slow).unwrap();
    let numbers: Vec<u64> = rows.iter().map(|r| r.run).collect();
    assert_eq!(
        numbers,
        (0..RUNS as u64).collect::<Vec<_>>(),
        "a run lost or repeated"
    );
    let log = std::fs::read_to_string(out.join(format!("slurm/{job}_3.out"))).unwrap();
    assert_eq!(
        log.matches("campaign task 3:").count(),
        2,
        "task 3 ran once before and once after its requeue:\n{log}"
    );
    let summary =
        |d: &str| std::fs::read_to_string(dir.path().join(d).join("summary.csv")).unwrap();
    assert_eq!(
        summary("slurm"),
        summary("local"),
        "collected counts differ from the local campaign's"
    );
}

/// The small simulator tuning of tests/tune.rs, with at most 128 threads, and `options`.
fn small_tune_with(options: &'static str) -> Vec<&'static str> {
    let extra = ["--max-threads", "128", "--seed=7"];
    let base = SMALL_TUNE.iter().chain(&extra).copied();
    base.chain(words(options)).collect()
}

#[test]
fn tune_dry_run_writes_one_script_per_gpu_kind_each_resuming_its_own_journal() {
    let dir = tempfile::tempdir().unwrap();
    let args = small_tune_with(
        "--slurm --constraint a100 --constraint h100|h200 --gres gpu:1 --out t --dry-run",
    );
    let output = gpuwmm(dir.path(), &args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let t = dir.path().join("t");
    for (kind, folder) in [("a100", "a100"), ("h100|h200", "h100-h200")] {
        let script =
            std::fs::read_to_string(t.join(format!("gpuwmm-tune-{folder}.sbatch"))).unwrap();
        assert!(
            script.contains(&format!("#SBATCH --constraint={kind}\n")),
            "{script}"
        );
        assert!(script.contains("#SBATCH --gres=gpu:1\n"), "{script}");
        assert!(!script.contains("--array"), "{script}");
        let journal = t.join(folder).join("tune.csv");
        assert!(
            script.contains(&format!(
                "if [ -e {} ]; then resume=--resume; fi",
                journal.display()
            )),
            "{script}"
        );
        let exec = script.lines().last().unwrap();
        assert!(
            exec.ends_with(&format!(
                "--seed=7 --out {} $resume",
                t.join(folder).display()
            )),
            "{exec}"
        );
        assert!(
            !exec.contains("--constraint") && !exec.contains("--slurm"),
            "{exec}"
        );
    }
    let mut two_profiles = args.clone();
    two_profiles.extend(["--profile-out", "p.toml"]);
    assert_bad_input(
        &gpuwmm(dir.path(), &two_profiles),
        "--profile-out names one file",
    );
}

#[test]
fn a_tuning_job_on_slurm_writes_the_profile_of_its_gpu_kind() {
    if tools_for_tests().is_none() || local_cluster().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let args = small_tune_with("--slurm --constraint gpuwmm-local --out t --profile-out sim.toml");
    let submitted = gpuwmm(dir.path(), &args);
    assert!(submitted.status.success(), "{}", text(&submitted.stderr));
    let stdout = text(&submitted.stdout);
    let job = stdout
        .trim()
        .strip_prefix("gpuwmm-local ")
        .unwrap_or_else(|| panic!("`{stdout}` is not `<kind> <job id>`"))
        .to_string();
    let _cancel = CancelOnDrop(job.clone());
    wait_for("the tuning job to finish", Duration::from_secs(600), || {
        run_tool("squeue", &["-h", "-j", &job]).trim().is_empty()
    });
    let log = dir
        .path()
        .join(format!("t/slurm/gpuwmm-tune-gpuwmm-local-{job}.out"));
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let profile = gpuwmm::profile::StressProfile::load(&dir.path().join("sim.toml"))
        .unwrap_or_else(|e| panic!("no profile ({e}); the job's log:\n{log}"));
    assert!(profile.is_tuned());
    assert_eq!(profile.chip, "sim");
    assert!(
        dir.path().join("t/gpuwmm-local/summary.md").is_file(),
        "{log}"
    );
}
