//! Long jobs (check, harden, campaign, cost, tune, a litmus suite) as the commands run them: where their output
//! goes, what "finished" means, which output `--resume` continues, the kind-tagged sidecar, and
//! the JSON documents they print. Each of these rules is written here once, so that every job
//! follows the same ones and the binary only reads arguments, calls one function and prints.
//!
//! - [`naming`]: default output names, and choosing the output to write or to resume;
//! - [`interrupt`]: SIGINT and SIGTERM end a job between journal writes, printing the command
//!   that resumes it;
//! - [`settings`]: what a journal's runs depend on (options, app hashes), and the rule that a
//!   resume or replay refuses a difference unless `--force`;
//! - [`sidecar`]: [`JobKind`], the `kind` entry of a sidecar, and reading sidecars without one;
//! - [`target`]: the command line's target options resolved into a [`crate::check::Target`],
//!   and the executors that run it;
//! - [`check`], [`harden`], [`campaign`], [`cost`], [`tune`]: each job opened, resumed, run and
//!   summed up; [`replay`]: one journaled run rebuilt from its journal; [`slurm`]: campaigns
//!   and tunings as Slurm jobs; [`litmus`]: a litmus suite's results journaled test by test.

pub mod campaign;
pub mod check;
pub mod check_text;
pub mod cost;
pub mod harden;
pub mod harden_text;
pub mod interrupt;
pub mod litmus;
pub mod naming;
pub mod replay;
pub mod settings;
pub mod sidecar;
pub mod sites;
pub mod slurm;
pub mod target;
pub mod tune;
pub mod tune_text;

pub use sidecar::JobKind;

use crate::apps::AppError;
use crate::check::journal::JournalError;
use crate::check::ExecError;
use thiserror::Error;

/// Where a job's notes and warnings go, one line at a time (the binary prints them on stderr).
pub type Say<'a> = &'a dyn Fn(&str);

/// Why a job could not start or go on. [`JobError::is_bad_input`] tells the user's mistakes
/// (exit code 2) from everything else; which variant an error becomes says which it is.
#[derive(Debug, Error)]
pub enum JobError {
    /// Input the job refuses, in words: a journal of another app, nothing to resume, ….
    #[error("{0}")]
    Refused(String),
    /// A journal or sidecar given to continue or read that cannot be: bad input.
    #[error(transparent)]
    BadJournal(JournalError),
    /// An app that cannot be set up: bad input when it cannot be found or built, or names a
    /// site it does not have.
    #[error(transparent)]
    Setup(ExecError),
    /// An app that cannot be found, read or compiled: bad input.
    #[error(transparent)]
    BadApp(AppError),
    /// A stress profile that cannot be read: bad input.
    #[error(transparent)]
    Profile(#[from] crate::profile::ProfileError),
    #[error(transparent)]
    App(#[from] AppError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    Check(#[from] crate::check::driver::CheckError),
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
    #[error(transparent)]
    Report(#[from] crate::harden::report::ReportError),
    /// A harden result or app a measurement cannot use: bad input.
    #[error(transparent)]
    BadCost(crate::cost::CostError),
    /// A measurement that cannot go on: bad input when an app or its fences are.
    #[error(transparent)]
    Cost(#[from] crate::cost::CostError),
    #[error(transparent)]
    Tune(#[from] crate::tune::TuneError),
    /// A campaign's app or environment list that names no such thing: bad input.
    #[error(transparent)]
    Campaign(#[from] crate::campaign::CampaignError),
    /// A campaign plan to continue that cannot be read: bad input.
    #[error(transparent)]
    BadPlan(crate::campaign::plan::PlanError),
    #[error(transparent)]
    Plan(#[from] crate::campaign::plan::PlanError),
    #[error(transparent)]
    Summary(#[from] crate::campaign::SummaryError),
    /// A batch script or submission Slurm refuses: bad input.
    #[error(transparent)]
    Slurm(#[from] crate::slurm::SlurmError),
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Anything else that went wrong, in words.
    #[error("{0}")]
    Other(String),
}

impl JobError {
    /// Refuses input with `message`.
    pub fn refused(message: impl Into<String>) -> JobError {
        JobError::Refused(message.into())
    }

    /// Whether the error is the user's input (exit code 2).
    pub fn is_bad_input(&self) -> bool {
        match self {
            JobError::Refused(_)
            | JobError::BadJournal(_)
            | JobError::BadApp(_)
            | JobError::Profile(_)
            | JobError::Campaign(_)
            | JobError::BadPlan(_)
            | JobError::BadCost(_)
            | JobError::Slurm(_) => true,
            JobError::Setup(e) => setup_is_bad_input(e),
            JobError::Cost(e) => cost_is_bad_input(e),
            _ => false,
        }
    }
}

/// An app that cannot be found or built, or a site it does not have, is bad input; a backend
/// or worker that cannot start is not.
fn setup_is_bad_input(e: &ExecError) -> bool {
    matches!(
        e,
        ExecError::App(
            AppError::UnknownApp { .. }
                | AppError::Manifest(_)
                | AppError::Compile { .. }
                | AppError::HostCode { .. }
                | AppError::UnopenedHeader { .. },
        ) | ExecError::NoSuchSite { .. }
    )
}

fn cost_is_bad_input(e: &crate::cost::CostError) -> bool {
    use crate::cost::CostError;
    matches!(
        e,
        CostError::App(_)
            | CostError::NoSuchSite { .. }
            | CostError::AnotherSite { .. }
            | CostError::EmpResult { .. }
    )
}

/// A journal error that is the user's input: reading or continuing a journal they named.
pub(crate) fn bad_journal(e: JournalError) -> JobError {
    JobError::BadJournal(e)
}

/// The words of a command line, as a program's arguments (for the tests of the modules that
/// build command lines).
#[cfg(test)]
pub(crate) fn argv(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}
