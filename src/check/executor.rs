//! The boundary between the drivers and the runs: an [`Executor`] runs one request and says what
//! came of it.
//!
//! [`super::local::LocalExecutor`] runs in this process; [`super::supervisor::Supervisor`] runs
//! a worker process that is restarted after a timeout or a crash. The `check` and `harden`
//! drivers only see this trait, so their tests use one mock ([`MockExecutor`]).

use super::calibrate::Calibration;
use super::outcome::RunRecord;
use super::spec::{CalibrationRequest, RunRequest};
use crate::apps::AppError;
use crate::backend::BackendError;
use crate::ptx::passes::fences::FenceSite;
use thiserror::Error;

/// A problem that is not the outcome of a run: the app, the backend or the worker cannot be set
/// up. A check stops on it.
#[derive(Debug, Error)]
pub enum ExecError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("cannot instrument the app: {0}")]
    Instrument(String),
    #[error(
        "fence site {site} does not exist: the app has {sites} sites (see `gpuwmm ptx sites`)"
    )]
    NoSuchSite { site: usize, sites: usize },
    #[error("stress calibration failed: {0}")]
    Calibration(String),
    #[error("worker process: {0}")]
    Worker(String),
}

/// Runs requests against one target.
pub trait Executor {
    /// A line saying what runs the requests (device, driver; the simulator says it is one).
    fn provenance(&self) -> String;

    /// Whether runs asked for races bring them back (the simulator's PTX model).
    fn records_races(&self) -> bool {
        false
    }

    /// The app's candidate fence sites, in the target's granularity.
    fn sites(&self) -> Result<Vec<FenceSite>, ExecError>;

    /// Stress iterations that make stress last the target's factor times the app's kernel;
    /// `measured` hears of each (iterations, duration) as it is measured (a calibration on a GPU
    /// can take a minute).
    fn calibrate(
        &mut self,
        request: &CalibrationRequest,
        measured: &mut dyn FnMut(u32, f64),
    ) -> Result<Calibration, ExecError>;

    /// Runs the app once. Timeouts and crashes are outcomes in the record, not errors.
    fn execute(&mut self, request: &RunRequest) -> Result<RunRecord, ExecError>;

    /// How many runs [`Executor::execute_many`] runs at once.
    fn parallelism(&self) -> usize {
        1
    }

    /// Runs each request (at most [`Executor::parallelism`] at once) and returns their results
    /// in the same order. One after the other unless the executor can do better.
    fn execute_many(&mut self, requests: &[RunRequest]) -> Vec<Result<RunRecord, ExecError>> {
        requests.iter().map(|r| self.execute(r)).collect()
    }
}

/// What [`MockExecutor`] answers every calibration with.
#[cfg(test)]
pub(crate) const MOCK_CALIBRATION_ERROR: &str = "a mock has no kernel to calibrate";

/// The drivers' unit tests' executor: no fence sites, a calibration that fails (so the
/// fallback applies), and each run answered by `answer` from the request, with `state` for what
/// a test keeps to look at afterwards.
#[cfg(test)]
pub(crate) struct MockExecutor<S> {
    pub state: S,
    pub answer: fn(&mut S, &RunRequest) -> RunRecord,
}

#[cfg(test)]
impl<S> Executor for MockExecutor<S> {
    fn provenance(&self) -> String {
        "mock".into()
    }
    fn sites(&self) -> Result<Vec<FenceSite>, ExecError> {
        Ok(Vec::new())
    }
    fn calibrate(
        &mut self,
        _: &CalibrationRequest,
        _: &mut dyn FnMut(u32, f64),
    ) -> Result<Calibration, ExecError> {
        Err(ExecError::Calibration(MOCK_CALIBRATION_ERROR.into()))
    }
    fn execute(&mut self, request: &RunRequest) -> Result<RunRecord, ExecError> {
        Ok((self.answer)(&mut self.state, request))
    }
}
