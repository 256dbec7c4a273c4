//! `gpuwmm tune --slurm --constraint K…`: the tuning of every GPU kind of a cluster, one Slurm
//! job per kind (a node feature), each running this tune on a node of that kind.
//!
//! Each job tunes into `<out>/<kind>/` and, requeued, resumes its journal there; its profile goes
//! where a tuning's always goes, `tuning/<chip>.toml`, under the chip the job's GPU names. The
//! batch script and `sbatch` are [`gpuwmm::slurm`]'s.

use super::campaign_slurm::sbatch_options;
use super::{CmdResult, Failure};
use crate::cli::TuneArgs;
use gpuwmm::job::slurm::{folder_name, tune_job, tune_kinds, TUNE_DEFAULT_OUT};
use gpuwmm::slurm;
use std::path::Path;

/// Writes one batch script per GPU kind into the out folder and submits them (or with
/// `--dry-run`, prints them and the commands that would submit them). Every script is checked
/// before any is written.
pub fn submit(args: &TuneArgs) -> CmdResult {
    let base = std::path::absolute(args.out.as_deref().unwrap_or(Path::new(TUNE_DEFAULT_OUT)))?;
    let kinds = tune_kinds(&args.slurm.constraint, args.profile_out.is_some())?;
    let sbatch = sbatch_options(&args.slurm.sbatch);
    let mut scripts = Vec::new();
    for kind in kinds {
        let job = tune_job(kind, &base, &sbatch)?;
        let script = job.script().map_err(Failure::bad_input)?;
        scripts.push((kind, base.join(format!("{}.sbatch", job.name)), script));
    }
    let logs = base.join("slurm");
    std::fs::create_dir_all(&logs)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", logs.display()))?;
    for (kind, path, script) in scripts {
        std::fs::write(&path, &script)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        let command = slurm::sbatch_command(&path).join(" ");
        if args.slurm.dry_run {
            out!("{script}")?;
            eprintln!("dry run: wrote {}; submit with:\n{command}", path.display());
            continue;
        }
        let job_id = slurm::submit(&path).map_err(Failure::bad_input)?;
        eprintln!(
            "submitted tuning job {job_id} for GPU kind {kind}: journal in {}",
            base.join(folder_name(kind)).display()
        );
        outln!("{kind} {job_id}")?;
    }
    Ok(())
}
