//! `gpuwmm campaign --slurm` and `--collect`: a campaign handed to Slurm as one job array (one
//! task per cell, each running `gpuwmm campaign … --cell $SLURM_ARRAY_TASK_ID`), and any
//! campaign folder read back with its cells' status.
//!
//! The batch script, `sbatch` and the task states are [`gpuwmm::slurm`]'s; the plan and the
//! reading back are [`gpuwmm::campaign`]'s. This module only wires them to the command line.

use super::slurm_job::job_command;
use super::{CmdResult, Failure};
use crate::cli::CampaignArgs;
use gpuwmm::campaign::collect::collect as collect_cells;
use gpuwmm::campaign::plan::{CampaignPlan, SlurmJob};
use gpuwmm::campaign::write_summaries;
use gpuwmm::slurm::{self, BatchJob, JobArray, TASK_ID};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The batch script's name in the campaign folder.
const SCRIPT: &str = "campaign.sbatch";

/// Writes the plan and the batch script into `out` and submits the job array (or with
/// `--dry-run`, prints the script and the command that would submit it).
pub fn submit(args: &CampaignArgs, plan: &mut CampaignPlan, out: &Path) -> CmdResult {
    let out = std::path::absolute(out)?;
    let job = array_job(args, plan, &out, out.join("slurm"))?;
    let script = job.script().map_err(Failure::bad_input)?;
    std::fs::create_dir_all(&job.logs)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", job.logs.display()))?;
    let script_path = out.join(SCRIPT);
    std::fs::write(&script_path, &script)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", script_path.display()))?;
    plan.slurm = Some(SlurmJob {
        script: SCRIPT.to_string(),
        job_id: None,
    });
    plan.write(&out).map_err(anyhow::Error::from)?;
    let command = slurm::sbatch_command(&script_path).join(" ");
    if args.slurm.dry_run {
        out!("{script}")?;
        eprintln!(
            "dry run: wrote {} and {}; submit with:\n{command}",
            script_path.display(),
            CampaignPlan::path(&out).display()
        );
        return Ok(());
    }
    let job_id = slurm::submit(&script_path).map_err(Failure::bad_input)?;
    plan.slurm = Some(SlurmJob {
        script: SCRIPT.to_string(),
        job_id: Some(job_id.clone()),
    });
    plan.write(&out).map_err(anyhow::Error::from)?;
    eprintln!(
        "submitted job array {job_id}: {} tasks, one per cell, journals in {}; follow with \
         `gpuwmm campaign --collect {}`",
        plan.cells.len(),
        out.display(),
        out.display()
    );
    outln!("{job_id}")?;
    Ok(())
}

/// The job array: one task per planned cell, each running this binary on its cell.
fn array_job(
    args: &CampaignArgs,
    plan: &CampaignPlan,
    out: &Path,
    logs: PathBuf,
) -> Result<BatchJob, Failure> {
    let mut command = job_command("campaign", "--array-limit", out)?;
    command.extend([
        "--resume".to_string(),
        "--cell".to_string(),
        TASK_ID.to_string(),
    ]);
    let version = env!("CARGO_PKG_VERSION");
    Ok(BatchJob {
        name: "gpuwmm-campaign".to_string(),
        description: vec![
            format!(
                "gpuwmm {version} campaign: {} cells; array task i runs cell i of {}",
                plan.cells.len(),
                CampaignPlan::path(out).display()
            ),
            "and resumes its journal there, so a requeued task loses no run.".to_string(),
        ],
        array: Some(JobArray {
            tasks: plan.cells.len(),
            limit: args.slurm.array_limit,
        }),
        workdir: std::env::current_dir()?,
        logs,
        partition: args.slurm.sbatch.partition.clone(),
        gres: args.slurm.sbatch.gres.clone(),
        time: args.slurm.sbatch.time.clone(),
        extra: args.slurm.sbatch.sbatch_arg.clone(),
        resume_if: None,
        command,
    })
}

/// `--collect DIR`: each cell's journal read and its status (asking Slurm about the plan's job,
/// if it has one), the summaries written as a local campaign writes them, one table per GPU
/// model.
pub fn collect(dir: &Path) -> CmdResult {
    let plan = CampaignPlan::read(dir).map_err(Failure::bad_input)?;
    let states = slurm_states(&plan);
    let collected = collect_cells(dir, &plan, &states).map_err(Failure::bad_input)?;
    let tables = collected.tables();
    let status = collected.status_markdown();
    write_summaries(&tables, Some(&status), dir).map_err(anyhow::Error::from)?;
    for table in &tables {
        outln!("{}", table.to_markdown())?;
    }
    out!("{status}")?;
    outln!(
        "\n{}; summary: {1}/summary.md, {1}/summary.csv, chart {1}/summary.svg",
        collected.status_line(),
        dir.display()
    )?;
    Ok(())
}

/// The plan's job's task states; none when it has no job or Slurm cannot be asked (said on
/// stderr: statuses then come from the journals alone).
fn slurm_states(plan: &CampaignPlan) -> BTreeMap<u32, String> {
    let Some(job) = plan.slurm.as_ref().and_then(|s| s.job_id.as_deref()) else {
        return BTreeMap::new();
    };
    match slurm::task_states(job) {
        Ok(states) => states,
        Err(e) => {
            eprintln!(
                "warning: cannot ask Slurm about job {job} ({e}); status from the journals alone"
            );
            BTreeMap::new()
        }
    }
}
