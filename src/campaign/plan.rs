//! A campaign's plan, `plan.json` in its folder: the cells (app × environment, in order, each with
//! its journal), the stop, and, for a campaign handed to Slurm, the job that runs it.
//!
//! The plan is what makes a folder a campaign: an array task finds its cell in it by index, and
//! `gpuwmm campaign --collect` learns from it which journals to read and which job to ask about,
//! whether the cells ran here or on a cluster.

use crate::check::journal::JobKind;
use crate::check::Stop;
use crate::env::Environment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The plan's file name in a campaign folder.
pub const PLAN_FILE: &str = "plan.json";

#[derive(Debug, Error)]
pub enum PlanError {
    #[error("{} is not a campaign folder: it has no {PLAN_FILE} (written by `gpuwmm campaign`)", .dir.display())]
    NotACampaign { dir: PathBuf },
    #[error("{}: not a campaign plan: {message}", .path.display())]
    Bad { path: PathBuf, message: String },
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} has no cell {index} (it plans {cells})", .path.display())]
    NoCell {
        path: PathBuf,
        index: usize,
        cells: usize,
    },
}

/// One cell: an app under an environment, and its journal's file name in the campaign folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedCell {
    pub app: String,
    pub env: Environment,
    pub journal: String,
}

impl PlannedCell {
    pub fn new(app: &str, env: Environment) -> PlannedCell {
        PlannedCell {
            app: app.to_string(),
            env,
            journal: format!("{app}-{env}.csv"),
        }
    }
}

/// The Slurm job array that runs a campaign's cells, task `i` running cell `i`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlurmJob {
    /// The batch script's file name in the campaign folder.
    pub script: String,
    /// The job id `sbatch` gave; absent for a `--dry-run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

/// What a campaign runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignPlan {
    /// Always [`JobKind::Campaign`] (absent from plans written before plans had a kind).
    #[serde(default = "campaign_kind")]
    pub kind: JobKind,
    pub tool_version: String,
    pub cells: Vec<PlannedCell>,
    pub stop: Stop,
    /// The options every cell runs with, as the command line spells them (`--fences`,
    /// `--seed`, the target's): a resume compares those it is given. Empty in plans written
    /// before they were recorded (each cell's journal still records its own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmJob>,
}

fn campaign_kind() -> JobKind {
    JobKind::Campaign
}

impl CampaignPlan {
    /// Every app under every environment, app by app.
    pub fn new(apps: &[String], envs: &[Environment], stop: Stop) -> CampaignPlan {
        let cells = apps
            .iter()
            .flat_map(|app| envs.iter().map(move |&env| PlannedCell::new(app, env)))
            .collect();
        CampaignPlan {
            kind: JobKind::Campaign,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            cells,
            stop,
            settings: BTreeMap::new(),
            slurm: None,
        }
    }

    pub fn path(dir: &Path) -> PathBuf {
        dir.join(PLAN_FILE)
    }

    /// Writes `<dir>/plan.json` (through a temporary file, so a reader sees one whole plan).
    pub fn write(&self, dir: &Path) -> Result<(), PlanError> {
        let path = CampaignPlan::path(dir);
        let write = |source| PlanError::Write {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(write)?;
        let text = serde_json::to_string_pretty(self).expect("a plan serialises");
        let temporary = dir.join(format!(".{PLAN_FILE}.tmp"));
        std::fs::write(&temporary, text + "\n").map_err(write)?;
        std::fs::rename(&temporary, &path).map_err(write)
    }

    /// Reads `<dir>/plan.json`; a folder without one is not a campaign.
    pub fn read(dir: &Path) -> Result<CampaignPlan, PlanError> {
        let path = CampaignPlan::path(dir);
        if !path.is_file() {
            return Err(PlanError::NotACampaign {
                dir: dir.to_path_buf(),
            });
        }
        let bad = |message: String| PlanError::Bad {
            path: path.clone(),
            message,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| bad(e.to_string()))
    }

    /// Cell `index`, as an array task asks for it.
    pub fn cell(&self, dir: &Path, index: usize) -> Result<&PlannedCell, PlanError> {
        self.cells.get(index).ok_or_else(|| PlanError::NoCell {
            path: CampaignPlan::path(dir),
            index,
            cells: self.cells.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::test_env as env;

    #[test]
    fn a_plan_lists_cells_app_by_app_and_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let apps = ["a".to_string(), "b".to_string()];
        let mut plan = CampaignPlan::new(&apps, &[env("no-str-"), env("sys-str+")], Stop::Runs(5));
        plan.slurm = Some(SlurmJob {
            script: "campaign.sbatch".into(),
            job_id: Some("42".into()),
        });
        let journals: Vec<&str> = plan.cells.iter().map(|c| c.journal.as_str()).collect();
        assert_eq!(
            journals,
            [
                "a-no-str-.csv",
                "a-sys-str+.csv",
                "b-no-str-.csv",
                "b-sys-str+.csv"
            ]
        );
        plan.write(dir.path()).unwrap();
        assert_eq!(CampaignPlan::read(dir.path()).unwrap(), plan);
        assert_eq!(plan.cell(dir.path(), 3).unwrap().app, "b");
        assert!(matches!(
            plan.cell(dir.path(), 4),
            Err(PlanError::NoCell { cells: 4, .. })
        ));
    }

    #[test]
    fn a_folder_without_a_plan_or_with_a_bad_one_is_not_a_campaign() {
        let dir = tempfile::tempdir().unwrap();
        let err = CampaignPlan::read(dir.path()).unwrap_err();
        assert!(
            err.to_string().contains("is not a campaign folder"),
            "{err}"
        );
        std::fs::write(dir.path().join(PLAN_FILE), "{\"cells\": 3}").unwrap();
        let err = CampaignPlan::read(dir.path()).unwrap_err();
        assert!(matches!(err, PlanError::Bad { .. }), "{err}");
    }
}
