//! `gpuwmm tune --slurm --constraint K…`: the tuning of every GPU kind of a cluster, one Slurm
//! job per kind (a node feature), each running this tune on a node of that kind.
//!
//! Each job tunes into `<out>/<kind>/` and, requeued, resumes its journal there; its profile goes
//! where a tuning's always goes, `tuning/<chip>.toml`, under the chip the job's GPU names. The
//! batch script and `sbatch` are [`gpuwmm::slurm`]'s.

use super::slurm_job::job_command;
use super::{CmdResult, Failure};
use crate::cli::TuneArgs;
use gpuwmm::slurm::{self, BatchJob, RESUME};
use std::path::Path;

/// Where the per-kind tunings go without --out.
const DEFAULT_OUT: &str = "results/tune/slurm";

/// Writes one batch script per GPU kind into the out folder and submits them (or with
/// `--dry-run`, prints them and the commands that would submit them). Every script is checked
/// before any is written.
pub fn submit(args: &TuneArgs) -> CmdResult {
    let base = std::path::absolute(args.out.as_deref().unwrap_or(Path::new(DEFAULT_OUT)))?;
    let mut kinds: Vec<&String> = Vec::new();
    for kind in &args.slurm.constraint {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if args.profile_out.is_some() && kinds.len() > 1 {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "--profile-out names one file, and {} GPU kinds would each write it: leave it out \
             (each writes tuning/<chip>.toml) or give one --constraint",
            kinds.len()
        )));
    }
    let mut scripts = Vec::new();
    for kind in kinds {
        let job = tune_job(args, kind, &base)?;
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

/// The job that tunes GPU kind `kind`: this tune, on a node with that feature, into
/// `<base>/<kind>/`.
fn tune_job(args: &TuneArgs, kind: &str, base: &Path) -> Result<BatchJob, Failure> {
    let folder = base.join(folder_name(kind));
    let mut command = job_command("tune", "--constraint", &folder)?;
    command.push(RESUME.to_string());
    let mut extra = vec![format!("--constraint={kind}")];
    extra.extend(args.slurm.sbatch.sbatch_arg.iter().cloned());
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
        partition: args.slurm.sbatch.partition.clone(),
        gres: args.slurm.sbatch.gres.clone(),
        time: args.slurm.sbatch.time.clone(),
        extra,
        resume_if: Some(folder.join("tune.csv")),
        command,
    })
}

/// A GPU kind as a folder and job name: letters, digits, `-` and `_` kept, the rest `-`.
fn folder_name(kind: &str) -> String {
    kind.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_kind_becomes_a_plain_folder_name() {
        assert_eq!(folder_name("a100"), "a100");
        assert_eq!(folder_name("a100|h100"), "a100-h100");
        assert_eq!(folder_name("../x"), "---x");
    }
}
