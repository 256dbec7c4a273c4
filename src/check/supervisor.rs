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
use super::worker::{answer_in, Answer, Request};
use crate::ptx::passes::fences::FenceSite;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How to start a worker: a program and its arguments (the `gpuwmm` binary and its hidden worker
/// subcommand), and extra environment variables.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<String>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs requests in a worker process, restarting it after a timeout or crash.
pub struct Supervisor {
    target: Target,
    command: WorkerCommand,
    worker: Option<Worker>,
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

    fn spawn(&self) -> Result<Worker, ExecError> {
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .envs(self.command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                ExecError::Worker(format!(
                    "cannot start {}: {e}",
                    self.command.program.display()
                ))
            })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (send, answers) = mpsc::channel();
        std::thread::spawn(move || {
            // Lines without an answer are the kernels' device output (a GPU's `printf`, in any
            // bytes): a check shows none of it (`replay` does).
            for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
                let line = String::from_utf8_lossy(&line);
                let Some(answer) = answer_in(&line) else {
                    continue;
                };
                if send.send(answer.to_string()).is_err() {
                    break;
                }
            }
        });
        Ok(Worker {
            child,
            stdin,
            answers,
        })
    }

    /// The running worker, started (and given the target) if there is none.
    fn worker(&mut self) -> Result<&mut Worker, ExecError> {
        if self.worker.is_none() {
            let mut worker = self.spawn()?;
            self.starts += 1;
            send(&mut worker, &Request::Target(Box::new(self.target.clone())))?;
            // Opening a GPU and compiling the app take a while; allow the watchdog plus a minute.
            match receive(&mut worker, self.watchdog() + Duration::from_secs(60)) {
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
    fn ask(&mut self, request: &Request, limit: Duration) -> Result<Received, ExecError> {
        let worker = self.worker()?;
        let received = match send(worker, request) {
            Ok(()) => receive(worker, limit),
            Err(_) => Received::Died(exit_status(worker)),
        };
        let keep = match &received {
            Received::Answer(Answer::Record { record, .. }) => !record.outcome.needs_restart(),
            Received::Answer(Answer::Calibrated(_)) => true,
            _ => false,
        };
        if !keep {
            self.worker = None;
        }
        Ok(received)
    }
}

/// What came back from a worker.
enum Received {
    Answer(Answer),
    Silent(Duration),
    Died(String),
    Garbled(String),
}

impl std::fmt::Display for Received {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Received::Answer(a) => write!(f, "unexpected answer {a:?}"),
            Received::Silent(t) => write!(f, "worker did not answer within {t:?}"),
            Received::Died(status) => write!(f, "worker died ({status})"),
            Received::Garbled(line) => write!(f, "unreadable answer from the worker: {line}"),
        }
    }
}

fn send(worker: &mut Worker, request: &Request) -> Result<(), ExecError> {
    let line = serde_json::to_string(request).expect("requests serialise");
    writeln!(worker.stdin, "{line}")
        .and_then(|()| worker.stdin.flush())
        .map_err(|e| ExecError::Worker(format!("cannot write to the worker: {e}")))
}

fn receive(worker: &mut Worker, limit: Duration) -> Received {
    let start = Instant::now();
    match worker.answers.recv_timeout(limit) {
        Ok(line) => match serde_json::from_str(&line) {
            Ok(answer) => Received::Answer(answer),
            Err(_) => Received::Garbled(line),
        },
        Err(RecvTimeoutError::Timeout) => Received::Silent(start.elapsed()),
        Err(RecvTimeoutError::Disconnected) => Received::Died(exit_status(worker)),
    }
}

/// How a worker ended, waiting briefly for it to do so.
fn exit_status(worker: &mut Worker) -> String {
    for _ in 0..100 {
        if let Ok(Some(status)) = worker.child.try_wait() {
            return status.to_string();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    "still running".to_string()
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

    fn calibrate(&mut self, request: &CalibrationRequest) -> Result<Calibration, ExecError> {
        // Calibration runs a few dozen runs; give it room.
        let limit = self.watchdog() * 64;
        match self.ask(&Request::Calibrate(request.clone()), limit)? {
            Received::Answer(Answer::Calibrated(c)) => Ok(c),
            Received::Answer(Answer::Error(e)) => Err(ExecError::Calibration(e)),
            other => Err(ExecError::Calibration(other.to_string())),
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
            run: request.run,
            seed: request.seed,
            env: request.env,
            stress_blocks: String::new(),
            stress_iterations: request.stress_iterations,
            outcome,
            reason,
            kernel_us: 0.0,
            wall_ms: start.elapsed().as_secs_f64() * 1e3,
            races: None,
        })
    }
}
