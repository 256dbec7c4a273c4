//! What `campaign --slurm` and `tune --slurm` share: the command line their Slurm jobs run,
//! which is the submitting command again, less the options only the submission uses.

use super::Failure;
use gpuwmm::slurm;
use std::path::Path;

/// Options of a submitting command that its jobs do not get: flags, then options with a value
/// (`--out` is given again, absolute), besides each command's own.
const SLURM_FLAGS: [&str; 3] = ["--slurm", "--dry-run", "--resume"];
const SLURM_VALUED: [&str; 5] = ["--partition", "--gres", "--time", "--sbatch-arg", "--out"];

/// The command a job runs: this binary and `subcommand`, with the arguments this process got
/// after it less the Slurm-only ones (and `own_valued`, the command's own valued one), then
/// `--out <out>`.
pub fn job_command(subcommand: &str, own_valued: &str, out: &Path) -> Result<Vec<String>, Failure> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn a_job_gets_every_option_but_the_submission_s_and_the_command_s_own() {
        let given = words(
            "--apps a,b --slurm --partition gpu --time=1:00:00 --out o --array-limit 4 \
             --constraint h100 --dry-run --resume --runs 10",
        );
        let campaign = job_options(&given, "--array-limit");
        assert_eq!(campaign, words("--apps a,b --constraint h100 --runs 10"));
        let tune = job_options(&given, "--constraint");
        assert_eq!(tune, words("--apps a,b --array-limit 4 --runs 10"));
    }
}
