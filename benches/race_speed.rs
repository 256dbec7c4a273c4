//! What recording races costs a check on the simulator: runs per second of `check APP` under
//! calibrated `sys-str+`, in this process, without and with `--races` (recording in the
//! simulator, and classifying each run's log as the check driver does).
//!
//! `cargo bench --bench race_speed` (needs NVRTC: scripts/setup-cuda-tools.sh). Prints figures;
//! the README quotes them. The ratio per app is what matters (the goal: at most 2x); absolute
//! rates depend on the CPU.

mod common;

use common::{run_request, sim_target};
use gpuwmm::check::driver::calibrate_stress;
use gpuwmm::check::races::run_races;
use gpuwmm::check::{Executor, Fences, LocalExecutor};
use gpuwmm::env::Environment;
use std::time::Instant;

/// Seconds for `runs` runs of the executor's app, recording races when `races`.
fn time_runs(
    executor: &mut dyn Executor,
    env: Environment,
    iterations: u32,
    runs: u64,
    races: bool,
) -> f64 {
    let start = Instant::now();
    for run in 0..runs {
        let request = run_request(run, env, iterations, races);
        let record = executor.execute(&request).expect("run");
        if let Some(log) = &record.races {
            std::hint::black_box(run_races(run, log));
        }
    }
    start.elapsed().as_secs_f64()
}

fn main() {
    if gpuwmm::toolchain::tools_for_tests().is_none() {
        println!("race_speed: NVRTC not found, skipped (run scripts/setup-cuda-tools.sh)");
        return;
    }
    let env: Environment = "sys-str+".parse().expect("env");
    for (app, runs) in [("cbe-dot", 400), ("sdk-red-nf", 400), ("ls-bh-nf", 40)] {
        let mut executor = LocalExecutor::open(&sim_target(app)).expect("executor");
        let iterations = calibrate_stress(&mut executor, env, &Fences::AsIs, 1, &mut |_, _| {})
            .expect("calibration")
            .stress_iterations;
        let without = time_runs(&mut executor, env, iterations, runs, false);
        let with = time_runs(&mut executor, env, iterations, runs, true);
        println!(
            "race_speed {app} {env}: {runs} runs in {without:.2} s without races, {with:.2} s \
             with --races = {:.2}x (simulator)",
            with / without
        );
    }
}
