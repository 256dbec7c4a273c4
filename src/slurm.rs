//! Handing work to a Slurm cluster: the batch script of a job array, `sbatch` to submit it, and
//! `sacct` / `scontrol` to ask what became of its tasks.
//!
//! gpuwmm does not schedule anything on a cluster itself: a campaign becomes one job array (one
//! task per cell) and Slurm decides where and when each runs. Everything Slurm-specific lives
//! here, so the campaign code only sees a script to write, a job id, and a state per task. The
//! text parsing is kept in pure functions, tested without a cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use thiserror::Error;

/// What can go wrong between gpuwmm and Slurm.
#[derive(Debug, Error)]
pub enum SlurmError {
    #[error("malformed sbatch option `{arg}`: {why}")]
    BadSbatchArg { arg: String, why: String },
    #[error("{what} `{}` cannot go in a batch script: {why}", .path.display())]
    BadPath {
        what: &'static str,
        path: PathBuf,
        why: &'static str,
    },
    #[error("`{program}` was not found on PATH: run this on a machine with Slurm's client commands (a login node), or use --dry-run")]
    Missing { program: String },
    #[error("`{program}` could not be run: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("`{command}` refused ({status}): {stderr}")]
    Refused {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("`{program}` printed `{output}`, which is not a job id")]
    NoJobId { program: String, output: String },
}

/// Options gpuwmm writes into every batch script itself; an `--sbatch-arg` may not set them.
const OWN_OPTIONS: [(&str, Option<char>); 6] = [
    ("array", Some('a')),
    ("output", Some('o')),
    ("error", Some('e')),
    ("chdir", Some('D')),
    ("open-mode", None),
    ("wrap", None),
];

/// The tasks of a job array.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobArray {
    /// Tasks `0..tasks`.
    pub tasks: usize,
    /// At most this many tasks at once (`--array=0-N%K`).
    pub limit: Option<u32>,
}

/// A job (or job array) to write as a batch script.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchJob {
    /// `--job-name`.
    pub name: String,
    /// The first comment lines (without `# `): what the job is.
    pub description: Vec<String>,
    /// `None` for a single job.
    pub array: Option<JobArray>,
    /// The folder every task starts in (`--chdir`), absolute.
    pub workdir: PathBuf,
    /// The logs' folder, absolute: `<logs>/<job>_<task>.out` for an array's tasks,
    /// `<logs>/<name>-<job>.out` for a single job.
    pub logs: PathBuf,
    pub partition: Option<String>,
    pub gres: Option<String>,
    pub time: Option<String>,
    /// More options, each checked by [`check_sbatch_arg`].
    pub extra: Vec<String>,
    /// When this file exists as the job starts, the argument [`RESUME`] of the command becomes
    /// `--resume` (a requeued job continues its journal); otherwise it vanishes.
    pub resume_if: Option<PathBuf>,
    /// What each task runs; the arguments [`TASK_ID`] and [`RESUME`] are left for the shell to
    /// expand.
    pub command: Vec<String>,
}

/// The argument of a task's command that becomes its array index.
pub const TASK_ID: &str = "$SLURM_ARRAY_TASK_ID";
/// The argument of a job's command that becomes `--resume` when [`BatchJob::resume_if`] exists.
pub const RESUME: &str = "$resume";

impl BatchJob {
    /// The batch script: `#SBATCH` lines, then the command. Tasks are requeueable and append to
    /// their log, so a requeued task continues its log as its work continues its journal.
    pub fn script(&self) -> Result<String, SlurmError> {
        check_script_path("the working folder", &self.workdir)?;
        check_script_path("the log folder", &self.logs)?;
        for arg in &self.extra {
            check_sbatch_arg(arg)?;
        }
        let mut lines = vec!["#!/bin/bash".to_string()];
        lines.extend(self.description.iter().map(|d| format!("# {d}")));
        let mut options = vec![format!("--job-name={}", self.name)];
        let log = match self.array {
            Some(array) => {
                let last = array.tasks.saturating_sub(1);
                let limit = array.limit.map_or(String::new(), |k| format!("%{k}"));
                options.push(format!("--array=0-{last}{limit}"));
                "%A_%a.out"
            }
            None => "%x-%j.out",
        };
        options.extend([
            format!("--chdir={}", self.workdir.display()),
            format!("--output={}/{log}", self.logs.display()),
            "--open-mode=append".to_string(),
            "--requeue".to_string(),
        ]);
        let named = [
            ("partition", &self.partition),
            ("gres", &self.gres),
            ("time", &self.time),
        ];
        for (name, value) in named {
            if let Some(value) = value {
                let option = format!("--{name}={value}");
                check_sbatch_arg(&option)?;
                options.push(option);
            }
        }
        options.extend(self.extra.iter().cloned());
        lines.extend(options.iter().map(|o| format!("#SBATCH {o}")));
        lines.push("set -eu".to_string());
        if let Some(journal) = &self.resume_if {
            check_script_path("the journal", journal)?;
            lines.push("resume=".to_string());
            lines.push(format!(
                "if [ -e {} ]; then resume=--resume; fi",
                journal.display()
            ));
        }
        lines.push(format!("exec {}", shell_command(&self.command)));
        Ok(lines.join("\n") + "\n")
    }
}

/// A `--sbatch-arg` must be one option (`--name=value`, `--flag`, `-X`), with no white space,
/// quote or control character (it becomes an `#SBATCH` line), and none gpuwmm sets itself.
pub fn check_sbatch_arg(arg: &str) -> Result<(), SlurmError> {
    let bad = |why: &str| SlurmError::BadSbatchArg {
        arg: arg.to_string(),
        why: why.to_string(),
    };
    let name = if let Some(long) = arg.strip_prefix("--") {
        long.split('=').next().unwrap_or("")
    } else if let Some(short) = arg.strip_prefix('-') {
        short.get(..1).unwrap_or("")
    } else {
        return Err(bad(
            "an sbatch option starts with `-` (e.g. --mem=4G, --exclusive)",
        ));
    };
    if name.is_empty() || !name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
        return Err(bad("no option name after the dashes"));
    }
    if arg
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\'))
    {
        return Err(bad(
            "white space, quotes and control characters cannot go in an #SBATCH line; give \
             `--name=value` as one argument",
        ));
    }
    let own = OWN_OPTIONS.iter().find(|(long, short)| {
        if arg.starts_with("--") {
            name == *long
        } else {
            short.is_some_and(|s| name.starts_with(s))
        }
    });
    if let Some((long, _)) = own {
        return Err(bad(&format!(
            "gpuwmm sets --{long} itself (the array is one task per cell, logs and working \
             folder are its own)"
        )));
    }
    Ok(())
}

fn check_script_path(what: &'static str, path: &Path) -> Result<(), SlurmError> {
    let text = path.to_string_lossy();
    let why = if !path.is_absolute() {
        Some("it must be absolute")
    } else if text
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\' | '%'))
    {
        Some("#SBATCH lines cannot hold white space, quotes, `%` or control characters")
    } else {
        None
    };
    match why {
        Some(why) => Err(SlurmError::BadPath {
            what,
            path: path.to_path_buf(),
            why,
        }),
        None => Ok(()),
    }
}

/// Arguments joined for a POSIX shell: each quoted unless it is plain, [`TASK_ID`] left to expand.
pub fn shell_command(args: &[String]) -> String {
    let quoted: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    quoted.join(" ")
}

fn shell_word(arg: &str) -> String {
    if arg == TASK_ID {
        return format!("\"{TASK_ID}\"");
    }
    if arg == RESUME {
        return RESUME.to_string();
    }
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// Removes options from a command line: `flags` alone, `valued` with their value (`--x v` or
/// `--x=v`). What an array task runs is the submitting command without its Slurm options.
pub fn strip_options(argv: &[String], flags: &[&str], valued: &[&str]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        let name = arg.split('=').next().unwrap_or(arg);
        if flags.contains(&arg.as_str()) {
            continue;
        }
        if valued.contains(&name) {
            if !arg.contains('=') {
                args.next();
            }
            continue;
        }
        kept.push(arg.clone());
    }
    kept
}

/// The command that submits `script`: `sbatch --parsable <script>`.
pub fn sbatch_command(script: &Path) -> Vec<String> {
    vec![
        "sbatch".to_string(),
        "--parsable".to_string(),
        script.display().to_string(),
    ]
}

/// Submits `script` and returns the job id.
pub fn submit(script: &Path) -> Result<String, SlurmError> {
    let command = sbatch_command(script);
    let stdout = run_tool(&command)?;
    parse_sbatch_output(&stdout).ok_or_else(|| SlurmError::NoJobId {
        program: "sbatch".to_string(),
        output: stdout.trim().to_string(),
    })
}

/// `sbatch --parsable` prints `<id>` or `<id>;<cluster>`; plain `sbatch`, `Submitted batch job <id>`.
pub fn parse_sbatch_output(stdout: &str) -> Option<String> {
    let line = stdout.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let id = line
        .strip_prefix("Submitted batch job ")
        .unwrap_or(line)
        .split(';')
        .next()?
        .trim();
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_digit())).then(|| id.to_string())
}

/// Runs a Slurm client command and returns its stdout; a missing program, a failure to start
/// and a non-zero exit are errors.
fn run_tool(command: &[String]) -> Result<String, SlurmError> {
    let program = &command[0];
    let output =
        Command::new(program)
            .args(&command[1..])
            .output()
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => SlurmError::Missing {
                    program: program.clone(),
                },
                _ => SlurmError::Spawn {
                    program: program.clone(),
                    source,
                },
            })?;
    if !output.status.success() {
        return Err(SlurmError::Refused {
            command: command.join(" "),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The Slurm state of each task of array job `job` (`RUNNING`, `PENDING`, `FAILED`, …), from
/// `sacct`, or where accounting is off, from the controller (`scontrol`), which remembers
/// finished jobs for a while (`MinJobAge`). Tasks neither knows are absent.
pub fn task_states(job: &str) -> Result<BTreeMap<u32, String>, SlurmError> {
    let sacct = ["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", job].map(String::from);
    match run_tool(&sacct) {
        Ok(text) => Ok(parse_sacct(&text, job)),
        Err(_) => {
            let scontrol = ["scontrol", "-o", "show", "job", job].map(String::from);
            Ok(parse_scontrol(&run_tool(&scontrol)?, job))
        }
    }
}

/// `sacct -n -P -X -o JobID,State` lines: `123_4|RUNNING`, `123_[5-7%2]|PENDING`,
/// `123_2|CANCELLED by 0`. Lines of other jobs are skipped.
pub fn parse_sacct(text: &str, job: &str) -> BTreeMap<u32, String> {
    let mut states = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.trim().split('|');
        let (Some(id), Some(state)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some(tasks) = id.strip_prefix(job).and_then(|t| t.strip_prefix('_')) else {
            continue;
        };
        let tasks = tasks.trim_start_matches('[').trim_end_matches(']');
        let state = state.split_whitespace().next().unwrap_or("").to_string();
        for task in parse_task_list(tasks) {
            states.insert(task, state.clone());
        }
    }
    states
}

/// `scontrol -o show job` records, one a line: `JobId=.. ArrayJobId=123 ArrayTaskId=4 ..
/// JobState=RUNNING ..`; pending tasks come as one record with `ArrayTaskId=5-7%2`.
pub fn parse_scontrol(text: &str, job: &str) -> BTreeMap<u32, String> {
    let mut states = BTreeMap::new();
    for line in text.lines() {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        };
        if field("ArrayJobId") != Some(job) {
            continue;
        }
        let (Some(tasks), Some(state)) = (field("ArrayTaskId"), field("JobState")) else {
            continue;
        };
        for task in parse_task_list(tasks) {
            states.insert(task, state.to_string());
        }
    }
    states
}

/// `4`, `5-7`, `1,3-4`, with an optional `%K` limit: the task indices.
fn parse_task_list(list: &str) -> Vec<u32> {
    let list = list.split('%').next().unwrap_or("");
    let mut tasks = Vec::new();
    for part in list.split(',') {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<u32>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => tasks.push(a),
            (Some(Ok(a)), Some(Ok(b))) if a <= b => tasks.extend(a..=b),
            _ => {}
        }
    }
    tasks
}

/// Whether a Slurm state means the task ended without finishing its work.
pub fn is_failed_state(state: &str) -> bool {
    matches!(
        state,
        "FAILED"
            | "CANCELLED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "OUT_OF_MEMORY"
            | "PREEMPTED"
            | "BOOT_FAIL"
            | "DEADLINE"
    )
}

/// Whether a Slurm state means the task is waiting to start (again).
pub fn is_waiting_state(state: &str) -> bool {
    matches!(
        state,
        "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "CONFIGURING" | "RESV_DEL_HOLD"
    )
}

/// Whether a Slurm state means the task runs now.
pub fn is_running_state(state: &str) -> bool {
    matches!(
        state,
        "RUNNING" | "COMPLETING" | "SUSPENDED" | "STAGE_OUT" | "SIGNALING" | "RESIZING"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> BatchJob {
        BatchJob {
            name: "gpuwmm-campaign".into(),
            description: vec!["gpuwmm campaign: 4 cells".into()],
            array: Some(JobArray {
                tasks: 4,
                limit: Some(2),
            }),
            workdir: "/home/me/gpuwmm".into(),
            logs: "/scratch/c/slurm".into(),
            partition: Some("gpu".into()),
            gres: Some("gpu:1".into()),
            time: None,
            extra: vec!["--mem=4G".into()],
            resume_if: None,
            command: vec![
                "/opt/gpuwmm".into(),
                "campaign".into(),
                "--apps".into(),
                "it's".into(),
                "--cell".into(),
                TASK_ID.into(),
            ],
        }
    }

    #[test]
    fn the_batch_script_has_one_task_per_cell_its_options_then_the_command() {
        let script = job().script().unwrap();
        let expected = "#!/bin/bash
# gpuwmm campaign: 4 cells
#SBATCH --job-name=gpuwmm-campaign
#SBATCH --array=0-3%2
#SBATCH --chdir=/home/me/gpuwmm
#SBATCH --output=/scratch/c/slurm/%A_%a.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --partition=gpu
#SBATCH --gres=gpu:1
#SBATCH --mem=4G
set -eu
exec /opt/gpuwmm campaign --apps 'it'\\''s' --cell \"$SLURM_ARRAY_TASK_ID\"
";
        assert_eq!(script, expected);
    }

    #[test]
    fn a_single_job_logs_by_name_and_resumes_when_its_journal_exists() {
        let mut single = job();
        single.array = None;
        single.resume_if = Some("/scratch/t/tune.csv".into());
        single.command = vec!["/opt/gpuwmm".into(), "tune".into(), RESUME.into()];
        let script = single.script().unwrap();
        assert!(!script.contains("--array"), "{script}");
        assert!(script.contains("#SBATCH --output=/scratch/c/slurm/%x-%j.out\n"));
        assert!(script.ends_with(
            "set -eu\nresume=\nif [ -e /scratch/t/tune.csv ]; then resume=--resume; fi\n\
             exec /opt/gpuwmm tune $resume\n"
        ));
    }

    #[test]
    fn a_script_refuses_relative_or_spaced_folders_and_bad_values() {
        let mut relative = job();
        relative.logs = "out/slurm".into();
        assert!(matches!(
            relative.script(),
            Err(SlurmError::BadPath {
                what: "the log folder",
                ..
            })
        ));
        let mut spaced = job();
        spaced.workdir = "/home/my dir".into();
        assert!(matches!(spaced.script(), Err(SlurmError::BadPath { .. })));
        let mut time = job();
        time.time = Some("1 hour".into());
        assert!(matches!(
            time.script(),
            Err(SlurmError::BadSbatchArg { .. })
        ));
    }

    #[test]
    fn sbatch_args_must_be_single_options_gpuwmm_does_not_set() {
        for good in [
            "--mem=4G",
            "--exclusive",
            "-N1",
            "--constraint=a100|h100",
            "--qos=long",
        ] {
            assert!(check_sbatch_arg(good).is_ok(), "{good}");
        }
        for bad in [
            "mem=4G",
            "--",
            "-",
            "--comment=two words",
            "--mem=4G\n#SBATCH --x",
            "--array=0-9",
            "-a0-3",
            "--output=x",
            "-D/tmp",
            "--chdir=/tmp",
            "--wrap=ls",
        ] {
            let err = check_sbatch_arg(bad).unwrap_err();
            assert!(
                err.to_string().starts_with("malformed sbatch option"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn slurm_options_are_stripped_with_their_values_in_both_spellings() {
        let argv: Vec<String> = [
            "--apps",
            "a,b",
            "--slurm",
            "--partition",
            "gpu",
            "--gres=gpu:1",
            "--runs",
            "5",
            "--sbatch-arg",
            "--mem=4G",
            "--sbatch-arg=--exclusive",
            "--dry-run",
        ]
        .map(String::from)
        .to_vec();
        let kept = strip_options(
            &argv,
            &["--slurm", "--dry-run"],
            &["--partition", "--gres", "--sbatch-arg"],
        );
        assert_eq!(kept, ["--apps", "a,b", "--runs", "5"]);
    }

    #[test]
    fn sbatch_output_gives_the_job_id() {
        assert_eq!(parse_sbatch_output("1234\n"), Some("1234".into()));
        assert_eq!(parse_sbatch_output("1234;cluster\n"), Some("1234".into()));
        assert_eq!(
            parse_sbatch_output("Submitted batch job 77\n"),
            Some("77".into())
        );
        assert_eq!(parse_sbatch_output("sbatch: error: no\n"), None);
        assert_eq!(parse_sbatch_output(""), None);
    }

    #[test]
    fn sacct_lines_give_a_state_per_task_including_pending_ranges() {
        let text = "12_0|COMPLETED\n12_1|CANCELLED by 0\n12_[2-4%2]|PENDING\n13_0|RUNNING\n\
                    12_5|RUNNING\n";
        let states = parse_sacct(text, "12");
        let expected: BTreeMap<u32, String> = [
            (0, "COMPLETED"),
            (1, "CANCELLED"),
            (2, "PENDING"),
            (3, "PENDING"),
            (4, "PENDING"),
            (5, "RUNNING"),
        ]
        .map(|(t, s)| (t, s.to_string()))
        .into();
        assert_eq!(states, expected);
        assert!(parse_sacct(text, "1").is_empty(), "12_0 is not job 1's");
    }

    #[test]
    fn scontrol_records_give_a_state_per_task() {
        let text = "JobId=3 ArrayJobId=2 ArrayTaskId=1 JobName=g JobState=CANCELLED Reason=None\n\
                    JobId=2 ArrayJobId=2 ArrayTaskId=2,4-5%1 JobState=PENDING Reason=JobArrayTaskLimit\n\
                    JobId=9 ArrayJobId=8 ArrayTaskId=0 JobState=RUNNING\n";
        let states = parse_scontrol(text, "2");
        let tasks: Vec<(u32, &str)> = states.iter().map(|(t, s)| (*t, s.as_str())).collect();
        assert_eq!(
            tasks,
            [
                (1, "CANCELLED"),
                (2, "PENDING"),
                (4, "PENDING"),
                (5, "PENDING")
            ]
        );
    }

    #[test]
    fn states_are_sorted_into_failed_waiting_and_running() {
        assert!(is_failed_state("CANCELLED") && is_failed_state("NODE_FAIL"));
        assert!(!is_failed_state("COMPLETED") && !is_failed_state("RUNNING"));
        assert!(is_waiting_state("PENDING") && is_waiting_state("REQUEUED"));
        assert!(is_running_state("RUNNING") && !is_running_state("PENDING"));
    }

    #[test]
    fn a_missing_sbatch_is_named() {
        let err = run_tool(&["gpuwmm-no-such-sbatch".to_string()]).unwrap_err();
        assert!(matches!(err, SlurmError::Missing { .. }), "{err}");
        assert!(err.to_string().contains("not found on PATH"));
    }
}
