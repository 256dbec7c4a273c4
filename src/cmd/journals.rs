//! What several commands share about their output files: default journal names, which one
//! `--resume` continues and how a command says so, refusing a journal of another app, the
//! timestamp journals record, and printing a result as JSON. Here once, rather than lent by one
//! command to the others.

use super::{CmdResult, Failure};
use crate::cli::{BackendArgs, JournalArgs};
use gpuwmm::check::spec::{changed_sites, SiteSummary};
use gpuwmm::env::Environment;
use gpuwmm::naming;
use gpuwmm::ptx::passes::fences::FenceSite;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Prints `document` as pretty JSON on stdout (`--json`).
pub fn print_json(document: &impl Serialize) -> CmdResult {
    outln!("{}", serde_json::to_string_pretty(document)?)?;
    Ok(())
}

/// The journal a command writes, or with `--resume` continues: `--journal` as given; else a new
/// member of the default family ([`default_journal`], then `-2`, `-3`, … before `.csv`), or
/// with `--resume` the newest member that `unfinished` accepts (the newest of all when every
/// one is finished).
pub fn choose_journal(
    command: &str,
    app: &str,
    env: Environment,
    journal: &JournalArgs,
    backend: &BackendArgs,
    unfinished: &dyn Fn(&Path) -> bool,
) -> Result<PathBuf, Failure> {
    if let Some(path) = &journal.journal {
        return Ok(path.clone());
    }
    let base = default_journal(command, app, env, backend);
    if !journal.resume {
        return Ok(naming::fresh(&base));
    }
    let what = format!(
        "default journals of {app} under {env}, {}, seed {}",
        backend.backend.name(),
        backend.seed
    );
    newest_to_resume(&base, &what, unfinished)?.ok_or_else(|| {
        Failure::bad_input(anyhow::anyhow!(
            "nothing to resume: there is no {} (nor one numbered -2, -3, …); pass --journal to \
             name one",
            base.display()
        ))
    })
}

/// `results/<command>/<app>-<env>-<backend>-seed<seed>.csv`: the first of its family.
pub fn default_journal(
    command: &str,
    app: &str,
    env: Environment,
    backend: &BackendArgs,
) -> PathBuf {
    PathBuf::from(format!(
        "results/{command}/{app}-{env}-{}-seed{}.csv",
        backend.backend.name(),
        backend.seed
    ))
}

/// For `--resume` without a name: the newest member of `base`'s family (`what`, in words) that
/// is unfinished, else the newest one, saying on stderr which it took; `None` when the family
/// has no member.
pub fn newest_to_resume(
    base: &Path,
    what: &str,
    unfinished: &dyn Fn(&Path) -> bool,
) -> Result<Option<PathBuf>, Failure> {
    let members = naming::members(base);
    let Some(newest) = members.last() else {
        return Ok(None);
    };
    let (chosen, which) = match members.iter().rev().find(|m| unfinished(m)) {
        Some(member) => (member, "the newest unfinished"),
        None => (newest, "every one is finished; the newest"),
    };
    eprintln!(
        "--resume: continuing {} ({which} of {} {what})",
        chosen.display(),
        members.len()
    );
    Ok(Some(chosen.clone()))
}

/// A journal to resume must record the app and environment asked for: `recorded` and `asked`
/// are (app, environment); `what` names the journal's kind (`check`, `hardening`).
pub fn refuse_another_journal(
    path: &Path,
    what: &str,
    recorded: (&str, Environment),
    asked: (&str, Environment),
) -> Result<(), Failure> {
    if recorded == asked {
        return Ok(());
    }
    Err(Failure::bad_input(anyhow::anyhow!(
        "{} is a {what} of {} under {}, not {} under {}",
        path.display(),
        recorded.0,
        recorded.1,
        asked.0,
        asked.1
    )))
}

/// A journal that names fences by site id (a hardening's, or a check's with `--fences`) can be
/// resumed or replayed only while the app's sites (`now`) are those it `recorded`: after the
/// compiler or gpuwmm's site finder changed, the same ids can name other accesses. `doing` says
/// what is refused (`resume`).
pub fn refuse_changed_sites(
    journal: &Path,
    doing: &str,
    recorded: &[SiteSummary],
    now: &[FenceSite],
) -> Result<(), Failure> {
    let now: Vec<SiteSummary> = now.iter().map(SiteSummary::from).collect();
    match changed_sites(recorded, &now) {
        None => Ok(()),
        Some(change) => Err(Failure::bad_input(anyhow::anyhow!(
            "cannot {doing} {}: the app's fence sites are not those the journal recorded \
             ({change}; the compiler or gpuwmm changed since): its fences would go to other \
             accesses; start a new journal",
            journal.display()
        ))),
    }
}

/// What a command says of a journal it continues after `done` runs (nothing for a new one).
pub fn resuming_note(done: usize) -> String {
    match done {
        0 => String::new(),
        _ => format!(" (resuming after {done} runs)"),
    }
}

/// The current time, UTC, RFC 3339 (seconds).
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) date in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_since_the_epoch_become_calendar_dates() {
        // Checked against Python's datetime.
        for (days, date) in [
            (0, (1970, 1, 1)),
            (-1, (1969, 12, 31)),
            (11_016, (2000, 2, 29)),
            (11_017, (2000, 3, 1)),
            (19_782, (2024, 2, 29)),
            (47_541, (2100, 3, 1)),
        ] {
            assert_eq!(civil_from_days(days), date, "{days}");
        }
    }

    #[test]
    fn only_a_continued_journal_gets_a_resuming_note() {
        assert_eq!(resuming_note(0), "");
        assert_eq!(resuming_note(12), " (resuming after 12 runs)");
    }

    #[test]
    fn now_is_rfc3339_utc_to_the_second() {
        let t = now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
        assert!(t.as_str() > "2026-01-01", "{t}");
    }
}
