//! The worker side of process isolation: read requests as JSON lines, run them with a
//! [`LocalExecutor`], write the answers as JSON lines.
//!
//! The first line names the target; the worker answers `ready` (or a fatal `error`) and then one
//! answer per request. After a run that timed out or crashed the worker exits: a hung kernel may
//! still occupy the GPU and a fault leaves the CUDA context unusable, so the supervisor starts a
//! fresh worker for the next run.
//!
//! The lines go through [`crate::isolation`], which says how answers are told apart from the
//! kernels' device output.

use super::calibrate::Calibration;
use super::executor::{ExecError, Executor};
use super::local::LocalExecutor;
use super::outcome::RunRecord;
use super::spec::{CalibrationRequest, RunRequest, Target};
use crate::isolation::write_answer;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// Fault injection for tests of the supervisor: a worker whose environment sets this variable to
/// a run number aborts (as if it had crashed) when asked for that run.
pub const ABORT_ON_RUN_VAR: &str = "GPUWMM_WORKER_ABORT_ON_RUN";

/// A message from the supervisor.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Request {
    Target(Box<Target>),
    Calibrate(CalibrationRequest),
    Run(RunRequest),
}

/// A message from the worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Ready {
        provenance: String,
    },
    /// One measurement of a calibration under way; its [`Answer::Calibrated`] follows.
    Measured {
        iterations: u32,
        duration: f64,
    },
    Calibrated(Calibration),
    Record {
        record: RunRecord,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        races: Option<crate::backend::sim::RaceLog>,
    },
    /// A problem that is not a run's outcome (the app cannot be built, the backend not opened).
    Error(String),
}

/// Serves requests from `input` until it closes or a run needs a fresh worker.
pub fn serve(input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
    let abort_on = std::env::var(ABORT_ON_RUN_VAR)
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let mut executor: Option<LocalExecutor> = None;
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let (answer, stop) = match serde_json::from_str::<Request>(&line) {
            Err(e) => (Answer::Error(format!("bad request: {e}")), true),
            Ok(Request::Target(target)) => match LocalExecutor::open(&target) {
                Ok(e) => {
                    let provenance = e.provenance();
                    executor = Some(e);
                    (Answer::Ready { provenance }, false)
                }
                Err(e) => (Answer::Error(e.to_string()), true),
            },
            Ok(request) => match &mut executor {
                None => (Answer::Error("request before the target".into()), true),
                Some(executor) => {
                    if let Request::Run(r) = &request {
                        if abort_on == Some(r.run) {
                            std::process::abort();
                        }
                    }
                    answer(executor, request, &mut output)
                }
            },
        };
        write_answer(&mut output, &answer)?;
        if stop {
            break;
        }
    }
    Ok(())
}

/// Answers one request (a calibration tells `output` of each measurement first); says whether
/// the worker must stop afterwards.
fn answer(
    executor: &mut LocalExecutor,
    request: Request,
    mut output: impl Write,
) -> (Answer, bool) {
    let mut measured = |iterations, duration| {
        // A supervisor that cannot be told has gone; the final answer's write says so.
        let _ = write_answer(
            &mut output,
            &Answer::Measured {
                iterations,
                duration,
            },
        );
    };
    let result: Result<Answer, ExecError> = match request {
        Request::Calibrate(c) => executor
            .calibrate(&c, &mut measured)
            .map(Answer::Calibrated),
        Request::Run(r) => executor.execute(&r).map(|mut record| {
            let races = record.races.take();
            Answer::Record { record, races }
        }),
        Request::Target(_) => Err(ExecError::Worker("a second target".into())),
    };
    match result {
        Ok(Answer::Record { record, races }) => {
            let stop = record.outcome.needs_restart();
            (Answer::Record { record, races }, stop)
        }
        Ok(answer) => (answer, false),
        // The supervisor makes a calibration error of it again: its reason alone, so that
        // the warning does not say "stress calibration failed" twice.
        Err(ExecError::Calibration(why)) => (Answer::Error(why), true),
        Err(e) => (Answer::Error(e.to_string()), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::{answer_in, ANSWER_MARK};

    #[test]
    fn answers_carry_the_mark_and_their_json_never_holds_it() {
        let mut out = Vec::new();
        let request = "{\"run\":{}}\n".as_bytes();
        serve(request, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let answer = answer_in(text.trim_end()).expect("a marked answer");
        assert!(matches!(
            serde_json::from_str::<Answer>(answer).unwrap(),
            Answer::Error(_)
        ));
        let tricky = Answer::Error(ANSWER_MARK.to_string());
        let json = serde_json::to_string(&tricky).unwrap();
        assert_eq!(answer_in(&json), None, "{json}");
    }
}
