//! The supervisor side of process isolation: run requests in a worker process, and turn a worker
//! that hangs or dies into the outcome of the run it was doing.
//!
//! A run that times out or crashes ends its worker (see [`super::worker`]); the next request
//! starts a fresh one, so one bad run never ends a check. The supervisor also keeps a watchdog of
//! its own: a worker that does not answer within [`Supervisor::watchdog`] is killed and the run
//! recorded as a `timeout`.

use super::calibrate::Calibration;
use super::executor::{ExecError, Executor};
use super::local::target_sites;
use super::outcome::{Outcome, RunRecord};
use super::spec::{CalibrationRequest, RunRequest, Target};
use super::worker::{Answer, Request};
pub use crate::isolation::WorkerCommand;
use crate::isolation::{Received, WorkerProcess};
use crate::ptx::passes::fences::FenceSite;
use std::time::{Duration, Instant};

/// Runs requests in a worker process, restarting it after a timeout or crash.
pub struct Supervisor {
    target: Target,
    command: WorkerCommand,
    worker: Option<WorkerProcess>,
    provenance: String,
    /// Workers started so far.
    pub starts: u64,
}

impl Supervisor {
    /// Starts the first worker (so that set-up problems show at once).
    pub fn start(target: &Target, command: WorkerCommand) -> Result<Supervisor, ExecError> {
        let mut supervisor = Supervisor {
            target: target.clone(),
            command,
            worker: None,
            provenance: String::new(),
            starts: 0,
        };
        supervisor.worker()?;
        Ok(supervisor)
    }

    /// How long a worker may take to answer one run: three kernel deadlines (an app may launch
    /// several kernels) and ten seconds for set-up.
    pub fn watchdog(&self) -> Duration {
        self.target.deadline() * 3 + Duration::from_secs(10)
    }

    /// The running worker, started (and given the target) if there is none.
    fn worker(&mut self) -> Result<&mut WorkerProcess, ExecError> {
        if self.worker.is_none() {
            let mut worker = WorkerProcess::spawn(&self.command).map_err(ExecError::Worker)?;
            self.starts += 1;
            let target = Request::Target(Box::new(self.target.clone()));
            worker.send(&target).map_err(ExecError::Worker)?;
            // Opening a GPU and compiling the app take a while; allow the watchdog plus a minute.
            match worker.receive(self.watchdog() + Duration::from_secs(60)) {
                Received::Answer(Answer::Ready { provenance }) => self.provenance = provenance,
                Received::Answer(Answer::Error(e)) => return Err(ExecError::Worker(e)),
                other => return Err(ExecError::Worker(format!("did not start: {other}"))),
            }
            self.worker = Some(worker);
        }
        Ok(self.worker.as_mut().expect("started above"))
    }

    /// Sends `request` and waits up to `limit` for the answer. The worker is dropped (killed)
    /// unless it answered and may go on.
    fn ask(&mut self, request: &Request, limit: Duration) -> Result<Received<Answer>, ExecError> {
        let received = self.worker()?.ask(request, limit);
        let keep = match &received {
            Received::Answer(Answer::Record { record, .. }) => !record.outcome.needs_restart(),
            Received::Answer(Answer::Calibrated(_) | Answer::Measured { .. }) => true,
            _ => false,
        };
        if !keep {
            self.worker = None;
        }
        Ok(received)
    }
}

impl Executor for Supervisor {
    fn provenance(&self) -> String {
        self.provenance.clone()
    }

    fn records_races(&self) -> bool {
        self.target.races_recordable()
    }

    fn sites(&self) -> Result<Vec<FenceSite>, ExecError> {
        Ok(target_sites(&self.target)?)
    }

    fn calibrate(
        &mut self,
        request: &CalibrationRequest,
        measured: &mut dyn FnMut(u32, f64),
    ) -> Result<Calibration, ExecError> {
        // Each measurement is three runs; the worker tells of each as it is made.
        let limit = self.watchdog() * 3;
        let mut received = self.ask(&Request::Calibrate(request.clone()), limit)?;
        loop {
            match received {
                Received::Answer(Answer::Measured {
                    iterations,
                    duration,
                }) => measured(iterations, duration),
                Received::Answer(Answer::Calibrated(c)) => return Ok(c),
                Received::Answer(Answer::Error(e)) => {
                    // The worker stops after an error.
                    self.worker = None;
                    return Err(ExecError::Calibration(e));
                }
                other => {
                    self.worker = None;
                    return Err(ExecError::Calibration(other.to_string()));
                }
            }
            received = self.worker()?.receive(limit);
        }
    }

    fn execute(&mut self, request: &RunRequest) -> Result<RunRecord, ExecError> {
        let start = Instant::now();
        let limit = self.watchdog();
        let (outcome, reason) = match self.ask(&Request::Run(request.clone()), limit)? {
            Received::Answer(Answer::Record { mut record, races }) => {
                record.races = races;
                return Ok(record);
            }
            Received::Answer(Answer::Error(e)) => return Err(ExecError::Worker(e)),
            silent @ Received::Silent(_) => (Outcome::Timeout, silent.to_string()),
            other => (Outcome::Crash, other.to_string()),
        };
        Ok(RunRecord {
            reason,
            wall_ms: start.elapsed().as_secs_f64() * 1e3,
            ..RunRecord::unmeasured(request, outcome)
        })
    }
}
