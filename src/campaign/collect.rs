//! Reading a campaign back from its folder: each planned cell's journal counted, its status
//! (done, running, waiting, not started, failed with the scheduler's state), and the tables, one
//! per GPU model, since a cell's error rate belongs to the chip that ran it (the paper's table 5
//! is per chip).
//!
//! This is how `gpuwmm campaign --collect` sees a campaign whose cells ran elsewhere (array tasks
//! of a Slurm job on a cluster's nodes), while they run or once they are done. Nothing here
//! runs a check or talks to Slurm: the scheduler's states come in as strings.

use super::plan::{CampaignPlan, PlannedCell};
use super::{CampaignTable, Counts};
use crate::check::journal::{deserialize_rows, read_meta, JournalError};
use crate::check::{CheckMeta, RunRecord, Stop, Tally};
use crate::slurm::{is_failed_state, is_running_state, is_waiting_state};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CollectError {
    #[error("{}:{line}: not a check journal row: {message}", .path.display())]
    BadRow {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Meta(#[from] JournalError),
}

/// Where a cell stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellStatus {
    /// Its runs reached the stop.
    Done,
    /// Its task runs now.
    Running,
    /// Its task waits to start (again): the scheduler's state.
    Waiting(String),
    /// No journal, and no task the scheduler knows of that is waiting or running.
    NotStarted,
    /// Its task ended without finishing the cell: the scheduler's state.
    Failed(String),
    /// Runs are missing and no scheduler says why (an interrupted local campaign).
    Unfinished,
}

impl fmt::Display for CellStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CellStatus::Done => write!(f, "done"),
            CellStatus::Running => write!(f, "running"),
            CellStatus::Waiting(state) => write!(f, "waiting ({state})"),
            CellStatus::NotStarted => write!(f, "not started"),
            CellStatus::Failed(state) => write!(f, "failed ({state})"),
            CellStatus::Unfinished => write!(f, "unfinished"),
        }
    }
}

impl CellStatus {
    /// From the cell's progress (has it a journal, has it reached its stop) and its task's
    /// Slurm state, if a scheduler knows it. Finished runs outrank the scheduler, which may
    /// still show a task that is writing its last row as running.
    pub fn of(started: bool, finished: bool, slurm_state: Option<&str>) -> CellStatus {
        if finished {
            return CellStatus::Done;
        }
        match slurm_state {
            Some(s) if is_running_state(s) => CellStatus::Running,
            Some(s) if is_waiting_state(s) => CellStatus::Waiting(s.to_string()),
            Some(s) if is_failed_state(s) => CellStatus::Failed(s.to_string()),
            // A task that completed without finishing its cell failed, whatever Slurm says.
            Some(s) if started || s == "COMPLETED" => CellStatus::Failed(s.to_string()),
            _ if started => CellStatus::Unfinished,
            _ => CellStatus::NotStarted,
        }
    }
}

/// A journal's runs so far and what ran them.
#[derive(Debug, Clone, PartialEq)]
pub struct CellProgress {
    pub counts: Counts,
    pub provenance: String,
    pub stop: Stop,
    pub tally: Tally,
}

impl CellProgress {
    pub fn finished(&self) -> bool {
        self.stop.reached(&self.tally)
    }
}

/// One planned cell, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct CellReport {
    pub cell: PlannedCell,
    /// `None` while the cell has no journal.
    pub progress: Option<CellProgress>,
    pub status: CellStatus,
}

/// A campaign folder read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    pub cells: Vec<CellReport>,
}

/// Reads every planned cell's journal in `dir`; `slurm_states` maps array task (= cell index) to
/// the task's Slurm state, empty when no scheduler is asked.
pub fn collect(
    dir: &Path,
    plan: &CampaignPlan,
    slurm_states: &BTreeMap<u32, String>,
) -> Result<Collected, CollectError> {
    let mut cells = Vec::new();
    for (index, cell) in plan.cells.iter().enumerate() {
        let progress = read_progress(&dir.join(&cell.journal))?;
        let state = u32::try_from(index)
            .ok()
            .and_then(|i| slurm_states.get(&i))
            .map(String::as_str);
        let finished = progress.as_ref().is_some_and(CellProgress::finished);
        let status = CellStatus::of(progress.is_some(), finished, state);
        cells.push(CellReport {
            cell: cell.clone(),
            progress,
            status,
        });
    }
    Ok(Collected { cells })
}

/// A cell journal's progress, `None` when it does not exist yet (or has no sidecar yet: a task
/// that is just starting).
pub fn read_progress(journal: &Path) -> Result<Option<CellProgress>, CollectError> {
    if !journal.is_file() {
        return Ok(None);
    }
    let meta: CheckMeta = match read_meta(journal) {
        Ok(meta) => meta,
        Err(JournalError::Io { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let records = read_complete_rows(journal)?;
    let tally = Tally::of(&records);
    Ok(Some(CellProgress {
        counts: Counts::from(&tally),
        provenance: meta.provenance,
        stop: meta.stop,
        tally,
    }))
}

/// The journal's rows, leaving out a last row without its newline (being written, or cut by a
/// kill: a resumed check does it again).
fn read_complete_rows(journal: &Path) -> Result<Vec<RunRecord>, CollectError> {
    let bytes = std::fs::read(journal).map_err(|source| CollectError::Read {
        path: journal.to_path_buf(),
        source,
    })?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut reader = csv::Reader::from_reader(&bytes[..complete]);
    deserialize_rows(&mut reader).map_err(|(line, message)| CollectError::BadRow {
        path: journal.to_path_buf(),
        line,
        message,
    })
}

impl Collected {
    /// One table per provenance (the GPU model, or the simulator), in the order their first
    /// cell was planned; cells without runs are left out.
    pub fn tables(&self) -> Vec<CampaignTable> {
        let mut tables: Vec<CampaignTable> = Vec::new();
        for report in &self.cells {
            let Some(progress) = &report.progress else {
                continue;
            };
            let table = match tables
                .iter_mut()
                .position(|t| t.provenance.first() == Some(&progress.provenance))
            {
                Some(i) => &mut tables[i],
                None => {
                    tables.push(CampaignTable::new());
                    tables.last_mut().expect("just pushed")
                }
            };
            let PlannedCell { app, env, .. } = &report.cell;
            table.add(app, *env, progress.counts, &progress.provenance);
        }
        tables
    }

    /// How many cells have each status, e.g. `3 done, 1 running`.
    pub fn status_line(&self) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for report in &self.cells {
            let kind = match &report.status {
                CellStatus::Waiting(_) => "waiting".to_string(),
                CellStatus::Failed(_) => "failed".to_string(),
                other => other.to_string(),
            };
            match counts.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((kind, 1)),
            }
        }
        let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        format!("{} cells: {}", self.cells.len(), parts.join(", "))
    }

    /// A Markdown table: task (cell index), app, environment, runs so far, status.
    pub fn status_markdown(&self) -> String {
        let mut lines = vec![
            "| task | app | env | runs | status |".to_string(),
            "| --- | --- | --- | --- | --- |".to_string(),
        ];
        for (index, report) in self.cells.iter().enumerate() {
            let runs = match &report.progress {
                Some(p) => format!("{} of {}", p.tally.runs, p.stop),
                None => "—".to_string(),
            };
            lines.push(format!(
                "| {index} | {} | {} | {runs} | {} |",
                report.cell.app.replace('|', "\\|"),
                report.cell.env,
                report.status
            ));
        }
        lines.join("\n") + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::test_env as env;
    use crate::check::Outcome;

    #[test]
    fn status_comes_from_progress_first_then_the_slurm_state() {
        use CellStatus::*;
        assert_eq!(CellStatus::of(true, true, Some("RUNNING")), Done);
        assert_eq!(CellStatus::of(true, false, Some("RUNNING")), Running);
        assert_eq!(
            CellStatus::of(true, false, Some("CANCELLED")),
            Failed("CANCELLED".into())
        );
        assert_eq!(
            CellStatus::of(false, false, Some("PENDING")),
            Waiting("PENDING".into())
        );
        assert_eq!(
            CellStatus::of(true, false, Some("COMPLETED")),
            Failed("COMPLETED".into())
        );
        assert_eq!(CellStatus::of(false, false, None), NotStarted);
        assert_eq!(CellStatus::of(true, false, None), Unfinished);
        assert_eq!(Failed("TIMEOUT".into()).to_string(), "failed (TIMEOUT)");
    }

    fn record(run: u64, outcome: Outcome) -> RunRecord {
        RunRecord::for_test(run, outcome)
    }

    #[test]
    fn a_row_cut_by_a_kill_is_not_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        let mut writer = csv::Writer::from_path(&path).unwrap();
        writer.serialize(record(0, Outcome::Pass)).unwrap();
        writer.serialize(record(1, Outcome::Fail)).unwrap();
        writer.flush().unwrap();
        drop(writer);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("2,2,no-str-,,0,pa");
        std::fs::write(&path, text).unwrap();
        let rows = read_complete_rows(&path).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].outcome, Outcome::Fail);
    }

    fn progress(provenance: &str, pass: u64, fail: u64) -> CellProgress {
        let counts = Counts {
            pass,
            fail,
            timeout: 0,
            crash: 0,
        };
        let records: Vec<RunRecord> = (0..pass + fail)
            .map(|r| {
                record(
                    r,
                    if r < fail {
                        Outcome::Fail
                    } else {
                        Outcome::Pass
                    },
                )
            })
            .collect();
        CellProgress {
            counts,
            provenance: provenance.to_string(),
            stop: Stop::Runs(10),
            tally: Tally::of(&records),
        }
    }

    #[test]
    fn cells_of_different_gpu_models_go_into_different_tables() {
        let report = |app: &str, e: &str, p: Option<CellProgress>, status| CellReport {
            cell: PlannedCell::new(app, env(e)),
            progress: p,
            status,
        };
        let collected = Collected {
            cells: vec![
                report(
                    "a",
                    "no-str-",
                    Some(progress("gpu: A100", 10, 0)),
                    CellStatus::Done,
                ),
                report(
                    "a",
                    "sys-str+",
                    Some(progress("gpu: H100", 7, 3)),
                    CellStatus::Done,
                ),
                report(
                    "b",
                    "no-str-",
                    Some(progress("gpu: A100", 4, 1)),
                    CellStatus::Running,
                ),
                report("b", "sys-str+", None, CellStatus::NotStarted),
            ],
        };
        let tables = collected.tables();
        assert_eq!(tables.len(), 2);
        assert_eq!(tables[0].provenance, ["gpu: A100"]);
        assert_eq!(tables[0].cells.len(), 2);
        assert_eq!(tables[1].provenance, ["gpu: H100"]);
        assert_eq!(tables[1].cells[0].counts.fail, 3);
        assert_eq!(
            collected.status_line(),
            "4 cells: 2 done, 1 running, 1 not started"
        );
        let md = collected.status_markdown();
        assert!(
            md.contains("| 2 | b | no-str- | 5 of 10 runs | running |"),
            "{md}"
        );
        assert!(
            md.contains("| 3 | b | sys-str+ | — | not started |"),
            "{md}"
        );
    }
}
