//! `gpuwmm campaign --slurm` and `--collect`: a campaign handed to Slurm as one job array (one
//! task per cell, each running `gpuwmm campaign … --cell $SLURM_ARRAY_TASK_ID`), and any
//! campaign folder read back with its cells' status.
//!
//! The batch script, `sbatch` and the task states are [`gpuwmm::slurm`]'s; the plan and the
//! reading back are [`gpuwmm::campaign`]'s. This module only wires them to the command line.

use super::{CmdResult, Failure};
use crate::cli::{CampaignArgs, SbatchArgs};
use gpuwmm::campaign::collect::collect as collect_cells;
use gpuwmm::campaign::plan::CampaignPlan;
use gpuwmm::campaign::write_summaries;
use gpuwmm::job::slurm::{record_job, write_campaign_job, SbatchOptions};
use gpuwmm::slurm;
use std::collections::BTreeMap;
use std::path::Path;

/// Writes the plan and the batch script into `out` and submits the job array (or with
/// `--dry-run`, prints the script and the command that would submit it).
pub fn submit(args: &CampaignArgs, plan: &mut CampaignPlan, out: &Path) -> CmdResult {
    let out = std::path::absolute(out)?;
    let sbatch = sbatch_options(&args.slurm.sbatch);
    let (script_path, script) = write_campaign_job(plan, &out, args.slurm.array_limit, &sbatch)?;
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
    record_job(plan, &out, Some(job_id.clone()))?;
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

/// The sbatch options as the library takes them.
pub fn sbatch_options(args: &SbatchArgs) -> SbatchOptions {
    SbatchOptions {
        partition: args.partition.clone(),
        gres: args.gres.clone(),
        time: args.time.clone(),
        extra: args.sbatch_arg.clone(),
    }
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
