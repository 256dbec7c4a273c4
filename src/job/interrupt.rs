//! Ctrl-C (SIGINT) and SIGTERM (`kill`, Slurm's `scancel` or time limit) during a long job:
//! the process ends between two journal writes, never in one (it waits for a row or sidecar
//! being written, see [`crate::check::journal::hold_writes`]), prints the exact command that
//! continues the job, and exits with 128 + the signal (130 for SIGINT, 143 for SIGTERM), as a
//! shell reports a process the signal ended.
//!
//! Each job says what `--resume` continues as soon as it has chosen it ([`resumes`]): its
//! journal (`--journal`) or folder (`--out`). A worker process ([`ignore_in_worker`]) does not
//! end on these signals: the terminal sends SIGINT to the whole process group, and a worker that
//! died first would have its run recorded as a crash; it ends when its supervisor has gone.

use crate::check::journal::hold_writes;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// What `--resume` continues: the option that names it, the path, and the file whose existence
/// means there is something to continue.
#[derive(Debug, Clone)]
struct Resumable {
    option: &'static str,
    path: PathBuf,
    journal: PathBuf,
}

static RESUMABLE: Mutex<Option<Resumable>> = Mutex::new(None);

/// Says that the job continues with `option path` (`--journal results/check/x.csv`, or `--out
/// DIR`), and that `journal` holds its runs once it exists.
pub fn resumes(option: &'static str, path: &Path, journal: &Path) {
    let mut resumable = RESUMABLE.lock().unwrap_or_else(|e| e.into_inner());
    *resumable = Some(Resumable {
        option,
        path: path.to_path_buf(),
        journal: journal.to_path_buf(),
    });
}

/// Ends the process on SIGINT or SIGTERM as the module says, for the command line `argv`
/// (program first).
pub fn on_signals(argv: Vec<String>) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let _writing = hold_writes();
            let resumable = RESUMABLE.lock().unwrap_or_else(|e| e.into_inner()).clone();
            eprintln!("\n{}", message(signal, &argv, resumable.as_ref()));
            std::process::exit(128 + signal);
        }
    });
    Ok(())
}

/// A worker process keeps running through SIGINT and SIGTERM (see the module's doc).
pub fn ignore_in_worker() -> std::io::Result<()> {
    let ignored = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGINT, Arc::clone(&ignored))?;
    signal_hook::flag::register(SIGTERM, ignored)?;
    Ok(())
}

fn message(signal: i32, argv: &[String], resumable: Option<&Resumable>) -> String {
    let name = if signal == SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    match resumable.filter(|r| r.journal.exists()) {
        Some(r) => format!(
            "interrupted ({name}): every finished run is {} {}; continue with:\n  {}",
            // A folder's job (tune, cost, campaign) journals its runs in files of its own.
            if r.option == "--out" {
                "journaled under"
            } else {
                "in"
            },
            r.path.display(),
            resume_command(argv, r)
        ),
        None => format!("interrupted ({name}) before anything was journaled: nothing to resume"),
    }
}

/// `argv` with `--resume`, and the journal or folder named, unless they are there already.
fn resume_command(argv: &[String], resumable: &Resumable) -> String {
    let mut words: Vec<String> = argv.to_vec();
    let names = |option: &str| {
        argv.iter()
            .any(|a| a == option || a.starts_with(&format!("{option}=")))
    };
    if !names(resumable.option) {
        words.push(resumable.option.to_string());
        words.push(resumable.path.display().to_string());
    }
    if !names("--resume") {
        words.push("--resume".to_string());
    }
    let quoted: Vec<String> = words.iter().map(|w| shell_quoted(w)).collect();
    quoted.join(" ")
}

/// A word as a POSIX shell reads it back: as it is when it has no special characters, else in
/// single quotes.
fn shell_quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::argv;

    #[test]
    fn the_resume_command_names_the_journal_and_resume_once() {
        let r = Resumable {
            option: "--journal",
            path: "results/check/a b.csv".into(),
            journal: "results/check/a b.csv".into(),
        };
        assert_eq!(
            resume_command(&argv("gpuwmm check cbe-dot --runs 9"), &r),
            "gpuwmm check cbe-dot --runs 9 --journal 'results/check/a b.csv' --resume"
        );
        assert_eq!(
            resume_command(&argv("gpuwmm check x --journal=j.csv --resume"), &r),
            "gpuwmm check x --journal=j.csv --resume"
        );
        assert_eq!(shell_quoted("it's"), r"'it'\''s'");
    }

    /// QA: a campaign's Ctrl-C said "every finished run is in DIR/plan.json"; its runs are in
    /// the cells' journals under DIR.
    #[test]
    fn a_folders_job_says_its_runs_are_under_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("plan.json");
        std::fs::write(&plan, "{}").unwrap();
        let r = Resumable {
            option: "--out",
            path: dir.path().to_path_buf(),
            journal: plan,
        };
        let text = message(SIGINT, &argv("gpuwmm campaign --runs 9"), Some(&r));
        let under = format!(
            "every finished run is journaled under {};",
            dir.path().display()
        );
        assert!(text.contains(&under), "{text}");
    }

    #[test]
    fn nothing_journaled_says_so() {
        let r = Resumable {
            option: "--out",
            path: "/nonexistent/dir".into(),
            journal: "/nonexistent/dir/cost.csv".into(),
        };
        let text = message(SIGTERM, &argv("gpuwmm cost x"), Some(&r));
        assert_eq!(
            text,
            "interrupted (SIGTERM) before anything was journaled: nothing to resume"
        );
    }
}
