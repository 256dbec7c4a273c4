//! Where a job writes: its default output (a journal, or a folder for campaign, cost and tune),
//! a fresh member of that output's numbered family for a new job, and with `--resume` the newest
//! unfinished member (see [`crate::naming`] for the families).

use super::{JobError, Say};
use crate::check::journal::{refuse_clash, JournalError};
use crate::check::BackendChoice;
use crate::env::Environment;
use crate::naming;
use std::path::{Path, PathBuf};

/// The output a job is given: a journal or folder named on the command line, if any, and
/// whether to continue it (`--resume`).
#[derive(Debug, Clone, Copy)]
pub struct Output<'a> {
    pub given: Option<&'a Path>,
    pub resume: bool,
}

impl<'a> Output<'a> {
    pub fn new(given: Option<&'a Path>, resume: bool) -> Output<'a> {
        Output { given, resume }
    }
}

/// The backend and seed a job's default name carries.
#[derive(Debug, Clone, Copy)]
pub struct NameParts {
    pub backend: BackendChoice,
    pub seed: u64,
}

/// `results/<command>/<app>-<env>-<backend>-seed<seed>.csv`: the first of its family.
pub fn default_journal(command: &str, app: &str, env: Environment, parts: NameParts) -> PathBuf {
    PathBuf::from(format!(
        "results/{command}/{app}-{env}-{}-seed{}.csv",
        parts.backend.name(),
        parts.seed
    ))
}

/// `results/<command>/<backend>-seed<seed>`: the first default folder of a campaign or a cost
/// measurement.
pub fn default_folder(command: &str, parts: NameParts) -> PathBuf {
    PathBuf::from(format!(
        "results/{command}/{}-seed{}",
        parts.backend.name(),
        parts.seed
    ))
}

/// The journal a check or hardening writes, or with `--resume` continues: the one given; else
/// a new member of the default family ([`default_journal`], then `-2`, `-3`, … before `.csv`),
/// or with `--resume` the newest member that `unfinished` accepts (the newest of all when every
/// one is finished).
pub fn choose_journal(
    command: &str,
    (app, env): (&str, Environment),
    output: Output,
    parts: NameParts,
    unfinished: &dyn Fn(&Path) -> bool,
    say: Say,
) -> Result<PathBuf, JobError> {
    if let Some(path) = output.given {
        refuse_clash(path, output.resume).map_err(super::bad_journal)?;
        return Ok(path.to_path_buf());
    }
    let base = default_journal(command, app, env, parts);
    if !output.resume {
        return Ok(naming::fresh(&base));
    }
    let what = format!(
        "default journals of {app} under {env}, {}, seed {}",
        parts.backend.name(),
        parts.seed
    );
    newest_to_resume(&base, &what, unfinished, say)?.ok_or_else(|| {
        JobError::refused(format!(
            "nothing to resume: there is no {} (nor one numbered -2, -3, …); pass --journal to \
             name one",
            base.display()
        ))
    })
}

/// The folder a campaign or cost measurement writes: the one given; else a new member of the
/// family of `base`, or with `--resume` the newest unfinished one (`None` when the family has none).
pub fn choose_folder(
    base: &Path,
    output: Output,
    what: &str,
    unfinished: &dyn Fn(&Path) -> bool,
    say: Say,
) -> Result<Option<PathBuf>, JobError> {
    if let Some(out) = output.given {
        return Ok(Some(out.to_path_buf()));
    }
    if !output.resume {
        return Ok(Some(naming::fresh(base)));
    }
    newest_to_resume(base, what, unfinished, say)
}

/// Refuses, before any work, a new job whose folder `out` already holds its `journal` (a
/// cost measurement's, a tuning's: `what`) and a resume of a folder without one, naming
/// `--out`.
pub fn refuse_folder_clash(
    out: &Path,
    journal: &Path,
    resume: bool,
    what: &str,
) -> Result<(), JobError> {
    refuse_clash(journal, resume).map_err(|e| match e {
        JournalError::Exists(_) => JobError::refused(format!(
            "{} already holds a {what} ({} exists): pass --resume to continue it, or --out to \
             write another",
            out.display(),
            journal.display()
        )),
        e => super::bad_journal(e),
    })
}

/// For `--resume` without a name: the newest member of `base`'s family (`what`, in words) that
/// is unfinished, else the newest one, saying which it took; `None` when the family has no
/// member.
pub fn newest_to_resume(
    base: &Path,
    what: &str,
    unfinished: &dyn Fn(&Path) -> bool,
    say: Say,
) -> Result<Option<PathBuf>, JobError> {
    let members = naming::members(base);
    let Some(newest) = members.last() else {
        return Ok(None);
    };
    let (chosen, which) = match members.iter().rev().find(|m| unfinished(m)) {
        Some(member) => (member, "the newest unfinished"),
        None => (newest, "every one is finished; the newest"),
    };
    say(&format!(
        "--resume: continuing {} ({which} of {} {what})",
        chosen.display(),
        members.len()
    ));
    Ok(Some(chosen.clone()))
}

/// What a command says of a journal it continues after `done` runs (nothing for a new one).
pub fn resuming_note(done: usize) -> String {
    match done {
        0 => String::new(),
        _ => format!(" (resuming after {done} runs)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_continued_journal_gets_a_resuming_note() {
        assert_eq!(resuming_note(0), "");
        assert_eq!(resuming_note(12), " (resuming after 12 runs)");
    }

    #[test]
    fn default_names_carry_the_command_backend_and_seed() {
        let parts = NameParts {
            backend: BackendChoice::Sim,
            seed: 7,
        };
        let env: Environment = "sys-str+".parse().unwrap();
        assert_eq!(
            default_journal("check", "cbe-dot", env, parts),
            Path::new("results/check/cbe-dot-sys-str+-sim-seed7.csv")
        );
        assert_eq!(
            default_folder("campaign", parts),
            Path::new("results/campaign/sim-seed7")
        );
    }
}
