//! The sidecar every job writes beside its journal (`x.csv` → `x.json`, see
//! [`crate::check::journal`]), as the jobs share it: the `kind` entry that says which job wrote
//! it, reading the kind of a sidecar written before that entry existed, what "finished" means
//! for each kind, the rules a journal to continue must meet, and the time a job records as its
//! start.

use super::{bad_journal, JobError};
pub use crate::check::journal::JobKind;
use crate::check::journal::{read_meta, read_meta_entry, read_rows, Journal, JournalError};
use crate::check::spec::{changed_sites, SiteSummary};
use crate::check::{CheckMeta, RunRecord, Stop, Tally};
use crate::env::Environment;
use crate::harden::run::HardenMeta;
use crate::ptx::passes::fences::FenceSite;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A sidecar's entries: `kind` first, then the job's own.
#[derive(Serialize)]
pub struct Tagged<'a, M> {
    pub kind: JobKind,
    #[serde(flatten)]
    pub meta: &'a M,
}

/// Starts a new journal at `path` whose sidecar records `meta` as a job of `kind`.
pub fn create_journal<R: Serialize + DeserializeOwned, M: Serialize>(
    path: &Path,
    kind: JobKind,
    meta: &M,
) -> Result<Journal<R>, JournalError> {
    Journal::create(path, &Tagged { kind, meta })
}

/// The kind of the job journaled at `journal` (see [`kind_in`]).
pub fn kind_of(journal: &Path) -> Result<Option<JobKind>, JournalError> {
    Ok(kind_in(&read_meta(journal)?))
}

/// The kind of the job whose sidecar is `meta`: its `kind` entry, or for a sidecar written
/// before gpuwmm recorded one, the first kind whose sidecar it reads as; `None` when neither
/// says.
pub fn kind_in(meta: &serde_json::Value) -> Option<JobKind> {
    if let Some(kind) = meta.get("kind") {
        return JobKind::deserialize(kind).ok();
    }
    let reads_as = |kind: JobKind| match kind {
        JobKind::Check => CheckMeta::deserialize(meta).is_ok(),
        JobKind::Harden => HardenMeta::deserialize(meta).is_ok(),
        JobKind::Cost => crate::cost::CostMeta::deserialize(meta).is_ok(),
        JobKind::Tune => super::tune::TuneMeta::deserialize(meta).is_ok(),
        // Their sidecars always had a kind.
        JobKind::Campaign | JobKind::Litmus => false,
    };
    [
        JobKind::Check,
        JobKind::Harden,
        JobKind::Cost,
        JobKind::Tune,
    ]
    .into_iter()
    .find(|&kind| reads_as(kind))
}

/// Whether the job of `kind` whose output is `output` has not ended, so that `--resume`
/// without a name continues it: a check has not reached its stop (`stop`, or the one it
/// records; rows that cannot be read count as unfinished, so that resuming repairs them or says
/// what is wrong); a hardening or a cost measurement has no `result` in its sidecar; a campaign
/// has no `summary.csv` and a tuning no `summary.md` in its folder. An output whose sidecar
/// cannot be read is not one to resume.
pub fn unfinished(kind: JobKind, output: &Path, stop: Option<Stop>) -> bool {
    let no_result = |journal: &Path| {
        matches!(
            read_meta_entry::<serde_json::Value>(journal, "result"),
            Ok(None)
        )
    };
    match kind {
        JobKind::Check => {
            let Ok(meta) = read_meta::<CheckMeta>(output) else {
                return false;
            };
            read_rows::<RunRecord>(output).map_or(true, |rows| {
                !stop.unwrap_or(meta.stop).reached(&Tally::of(&rows))
            })
        }
        JobKind::Harden => no_result(output),
        JobKind::Cost => no_result(&output.join(super::cost::JOURNAL)),
        JobKind::Campaign => !output.join("summary.csv").exists(),
        JobKind::Tune => !output.join("summary.md").exists(),
        // Resumed only by name: every test the journal lacks runs, so it is never finished.
        JobKind::Litmus => true,
    }
}

/// A journal to continue must record the app and environment asked for: `recorded` and `asked`
/// are (app, environment).
pub fn refuse_another_journal(
    path: &Path,
    kind: JobKind,
    recorded: (&str, Environment),
    asked: (&str, Environment),
) -> Result<(), JobError> {
    if recorded == asked {
        return Ok(());
    }
    Err(JobError::refused(format!(
        "{} is a {} of {} under {}, not {} under {}",
        path.display(),
        kind.noun(),
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
) -> Result<(), JobError> {
    let now: Vec<SiteSummary> = now.iter().map(SiteSummary::from).collect();
    match changed_sites(recorded, &now) {
        None => Ok(()),
        Some(change) => Err(JobError::refused(format!(
            "cannot {doing} {}: the app's fence sites are not those the journal recorded \
             ({change}; the compiler or gpuwmm changed since): its fences would go to other \
             accesses; start a new journal",
            journal.display()
        ))),
    }
}

/// Reopens the journal at `path` of a job whose sidecar is an `M`, as bad input when it cannot
/// be.
pub fn resume_journal<R: Serialize + DeserializeOwned, M: DeserializeOwned>(
    path: &Path,
) -> Result<(Journal<R>, M, Vec<R>), JobError> {
    Journal::resume(path).map_err(bad_journal)
}

/// The current time, UTC, RFC 3339 (seconds): when a job started.
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
    fn now_is_rfc3339_utc_to_the_second() {
        let t = now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
        assert!(t.as_str() > "2026-01-01", "{t}");
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        run: u64,
    }

    fn check_meta() -> CheckMeta {
        CheckMeta {
            tool_version: "test".into(),
            started: "now".into(),
            target: crate::check::spec::test_target(),
            env: "sys-str+".parse().unwrap(),
            fences: crate::check::Fences::AsIs,
            sites: Vec::new(),
            seed: 1,
            stop: Stop::Runs(3),
            stress: crate::check::driver::CalibratedStress::NONE,
            provenance: "made-up".into(),
            profile_source: "default".into(),
            races: None,
            app_hash: None,
        }
    }

    #[test]
    fn a_sidecar_records_its_kind_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        create_journal::<Row, _>(&path, JobKind::Check, &check_meta()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("j.json")).unwrap();
        assert!(text.starts_with("{\n  \"kind\": \"check\",\n"), "{text}");
        assert_eq!(kind_of(&path).unwrap(), Some(JobKind::Check));
        assert_eq!(read_meta::<CheckMeta>(&path).unwrap(), check_meta());
    }

    #[test]
    fn a_sidecar_without_a_kind_is_read_as_the_job_it_describes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.csv");
        Journal::<Row>::create(&path, &check_meta()).unwrap();
        assert_eq!(kind_of(&path).unwrap(), Some(JobKind::Check));
        let other = dir.path().join("other.csv");
        Journal::<Row>::create(&other, &serde_json::json!({"tool_version": "x"})).unwrap();
        assert_eq!(kind_of(&other).unwrap(), None);
    }
}
