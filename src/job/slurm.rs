//! Campaigns and tunings as Slurm jobs: the command line a job runs (the submitting command
//! again, less the options only the submission uses), a campaign's job array (one task per
//! cell, each resuming its cell's journal) and a tuning's job per GPU kind (each resuming its
//! folder). The batch script and `sbatch` are [`crate::slurm`]'s.

use super::JobError;
use crate::campaign::plan::{CampaignPlan, SlurmJob};
use crate::slurm::{self, BatchJob, JobArray, RESUME, TASK_ID};
use std::path::{Path, PathBuf};

/// The batch script's name in a campaign folder.
pub const CAMPAIGN_SCRIPT: &str = "campaign.sbatch";
/// Where the per-kind tunings go without `--out`.
pub const TUNE_DEFAULT_OUT: &str = "results/tune/slurm";

/// Options of a submitting command that its jobs do not get: flags, then options with a value
/// (`--out` is given again, absolute), besides each command's own.
const SLURM_FLAGS: [&str; 3] = ["--slurm", "--dry-run", "--resume"];
const SLURM_VALUED: [&str; 5] = ["--partition", "--gres", "--time", "--sbatch-arg", "--out"];

/// What every batch script of a submission asks Slurm for.
#[derive(Debug, Clone, Default)]
pub struct SbatchOptions {
    pub partition: Option<String>,
    pub gres: Option<String>,
    pub time: Option<String>,
    /// Other sbatch options, one per entry.
    pub extra: Vec<String>,
}

/// The command a job runs: this program and `subcommand`, with the arguments this process got
/// after it less the Slurm-only ones (and `own_valued`, the command's own valued one), then
/// `--out <out>`.
pub fn job_command(
    subcommand: &str,
    own_valued: &str,
    out: &Path,
) -> Result<Vec<String>, JobError> {
    let exe = std::env::current_exe()?;
    let given: Vec<String> = std::env::args()
        .skip_while(|a| a != subcommand)
        .skip(1)
        .collect();
    let mut command = vec![exe.display().to_string(), subcommand.to_string()];
    command.extend(job_options(&given, own_valued));
    command.extend(["--out".to_string(), out.display().to_string()]);
    Ok(command)
}

/// `given` without the options only the submission uses.
fn job_options(given: &[String], own_valued: &str) -> Vec<String> {
    let valued: Vec<&str> = SLURM_VALUED.into_iter().chain([own_valued]).collect();
    slurm::strip_options(given, &SLURM_FLAGS, &valued)
}

/// A campaign's submission, written into its folder: the batch script (checked first) and the
/// plan naming it. Returns the script's path and text.
pub fn write_campaign_job(
    plan: &mut CampaignPlan,
    out: &Path,
    array_limit: Option<u32>,
    sbatch: &SbatchOptions,
) -> Result<(PathBuf, String), JobError> {
    let job = campaign_array_job(plan, out, out.join("slurm"), array_limit, sbatch)?;
    let script = job.script()?;
    std::fs::create_dir_all(&job.logs)
        .map_err(|e| JobError::Other(format!("cannot create {}: {e}", job.logs.display())))?;
    let script_path = out.join(CAMPAIGN_SCRIPT);
    std::fs::write(&script_path, &script)
        .map_err(|e| JobError::Other(format!("cannot write {}: {e}", script_path.display())))?;
    record_job(plan, out, None)?;
    Ok((script_path, script))
}

/// Names the campaign's batch script and, once submitted, its job in the plan.
pub fn record_job(
    plan: &mut CampaignPlan,
    out: &Path,
    job_id: Option<String>,
) -> Result<(), JobError> {
    plan.slurm = Some(SlurmJob {
        script: CAMPAIGN_SCRIPT.to_string(),
        job_id,
    });
    Ok(plan.write(out)?)
}

/// The job array: one task per planned cell, each running this program on its cell.
fn campaign_array_job(
    plan: &CampaignPlan,
    out: &Path,
    logs: PathBuf,
    array_limit: Option<u32>,
    sbatch: &SbatchOptions,
) -> Result<BatchJob, JobError> {
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
            limit: array_limit,
        }),
        workdir: std::env::current_dir()?,
        logs,
        partition: sbatch.partition.clone(),
        gres: sbatch.gres.clone(),
        time: sbatch.time.clone(),
        extra: sbatch.extra.clone(),
        resume_if: None,
        command,
    })
}

/// The GPU kinds to tune, each once, in the order given; a `--profile-out` names one file, so
/// it goes with one kind only.
pub fn tune_kinds(constraints: &[String], profile_out: bool) -> Result<Vec<&str>, JobError> {
    let mut kinds: Vec<&str> = Vec::new();
    for kind in constraints {
        if !kinds.contains(&kind.as_str()) {
            kinds.push(kind);
        }
    }
    if profile_out && kinds.len() > 1 {
        return Err(JobError::refused(format!(
            "--profile-out names one file, and {} GPU kinds would each write it: leave it out \
             (each writes tuning/<chip>.toml) or give one --constraint",
            kinds.len()
        )));
    }
    Ok(kinds)
}

/// The job that tunes GPU kind `kind`: this tune, on a node with that feature, into
/// `<base>/<kind>/`.
pub fn tune_job(kind: &str, base: &Path, sbatch: &SbatchOptions) -> Result<BatchJob, JobError> {
    let folder = base.join(folder_name(kind));
    let mut command = job_command("tune", "--constraint", &folder)?;
    command.push(RESUME.to_string());
    let mut extra = vec![format!("--constraint={kind}")];
    extra.extend(sbatch.extra.iter().cloned());
    Ok(BatchJob {
        name: format!("gpuwmm-tune-{}", folder_name(kind)),
        description: vec![
            format!(
                "gpuwmm {} tune of GPU kind {kind}, into {}",
                env!("CARGO_PKG_VERSION"),
                folder.display()
            ),
            "(resumed when requeued); the profile goes to tuning/<chip>.toml.".to_string(),
        ],
        array: None,
        workdir: std::env::current_dir()?,
        logs: base.join("slurm"),
        partition: sbatch.partition.clone(),
        gres: sbatch.gres.clone(),
        time: sbatch.time.clone(),
        extra,
        resume_if: Some(folder.join("tune.csv")),
        command,
    })
}

/// A GPU kind as a folder and job name: letters, digits, `-` and `_` kept, the rest `-`.
pub fn folder_name(kind: &str) -> String {
    kind.chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '-',
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::argv;

    #[test]
    fn a_job_gets_every_option_but_the_submission_s_and_the_command_s_own() {
        let given = argv(
            "--apps a,b --slurm --partition gpu --time=1:00:00 --out o --array-limit 4 \
             --constraint h100 --dry-run --resume --runs 10",
        );
        let campaign = job_options(&given, "--array-limit");
        assert_eq!(campaign, argv("--apps a,b --constraint h100 --runs 10"));
        let tune = job_options(&given, "--constraint");
        assert_eq!(tune, argv("--apps a,b --array-limit 4 --runs 10"));
    }

    #[test]
    fn a_gpu_kind_becomes_a_plain_folder_name() {
        assert_eq!(folder_name("a100"), "a100");
        assert_eq!(folder_name("a100|h100"), "a100-h100");
        assert_eq!(folder_name("../x"), "---x");
    }
}
