//! Several worker processes behind one [`Executor`], so that a driver's independent runs use all
//! the cores of a machine (the simulator is single-threaded; a GPU runs one app at a time).
//!
//! A run's result depends only on its request (its seed fixes everything random), so a batch
//! run side by side returns what the same runs would one after the other; the drivers take the
//! results in request order, which keeps their answers and journals independent of the number
//! of workers.

use super::calibrate::Calibration;
use super::executor::{ExecError, Executor};
use super::outcome::RunRecord;
use super::spec::{CalibrationRequest, RunRequest};
use crate::ptx::passes::fences::FenceSite;

/// Executors that run requests side by side; the first one also calibrates and answers
/// questions about the app.
pub struct Pool {
    workers: Vec<Box<dyn Executor + Send>>,
}

impl Pool {
    /// A pool of `workers` (at least one).
    pub fn new(workers: Vec<Box<dyn Executor + Send>>) -> Pool {
        assert!(!workers.is_empty(), "a pool needs a worker");
        Pool { workers }
    }
}

impl Executor for Pool {
    fn provenance(&self) -> String {
        self.workers[0].provenance()
    }

    fn records_races(&self) -> bool {
        self.workers[0].records_races()
    }

    fn sites(&self) -> Result<Vec<FenceSite>, ExecError> {
        self.workers[0].sites()
    }

    fn calibrate(
        &mut self,
        request: &CalibrationRequest,
        measured: &mut dyn FnMut(u32, f64),
    ) -> Result<Calibration, ExecError> {
        self.workers[0].calibrate(request, measured)
    }

    fn execute(&mut self, request: &RunRequest) -> Result<RunRecord, ExecError> {
        self.workers[0].execute(request)
    }

    fn parallelism(&self) -> usize {
        self.workers.len()
    }

    fn execute_many(&mut self, requests: &[RunRequest]) -> Vec<Result<RunRecord, ExecError>> {
        let mut results = Vec::with_capacity(requests.len());
        for batch in requests.chunks(self.workers.len()) {
            let done: Vec<Result<RunRecord, ExecError>> = std::thread::scope(|scope| {
                let handles: Vec<_> = self
                    .workers
                    .iter_mut()
                    .zip(batch)
                    .map(|(worker, request)| scope.spawn(move || worker.execute(request)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
                    .collect()
            });
            results.extend(done);
        }
        results
    }
}

fn panicked() -> ExecError {
    ExecError::Worker("a pool thread panicked".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::executor::MockExecutor;
    use crate::check::outcome::Outcome;
    use crate::check::spec::Fences;
    use std::time::Duration;

    /// Answers a run after a delay that shrinks with its number, so that later runs of a batch
    /// finish first; the outcome depends on the seed only.
    fn slow() -> Box<dyn Executor + Send> {
        Box::new(MockExecutor {
            state: (),
            answer: |_, request| {
                std::thread::sleep(Duration::from_millis(20 - request.run % 4 * 5));
                let outcome = if request.seed.is_multiple_of(3) {
                    Outcome::Fail
                } else {
                    Outcome::Pass
                };
                RunRecord::unmeasured(request, outcome)
            },
        })
    }

    #[test]
    fn a_pool_returns_results_in_request_order_whatever_finishes_first() {
        let requests: Vec<RunRequest> = (0..10)
            .map(|run| RunRequest {
                run,
                seed: run * 7,
                env: "sys-str+".parse().unwrap(),
                fences: Fences::AsIs,
                stress_iterations: 0,
                races: false,
            })
            .collect();
        let mut one = Pool::new(vec![slow()]);
        let mut three = Pool::new(vec![slow(), slow(), slow()]);
        assert_eq!(three.parallelism(), 3);
        let key = |r: Vec<Result<RunRecord, ExecError>>| -> Vec<(u64, Outcome)> {
            r.into_iter()
                .map(|r| r.unwrap())
                .map(|r| (r.run, r.outcome))
                .collect()
        };
        let a = key(one.execute_many(&requests));
        assert_eq!(a, key(three.execute_many(&requests)));
        assert_eq!(
            a.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
    }
}
