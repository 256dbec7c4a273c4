//! Check throughput on the simulator: executions per second of `check cbe-dot`, in this process
//! and through a supervised worker process, without stress and under calibrated `sys-str+`.
//!
//! `cargo bench --bench check_speed` (needs NVRTC: scripts/setup-cuda-tools.sh). Prints figures;
//! the README quotes them. Ratios between lines are meaningful; absolute rates depend on the CPU.

mod common;

use common::{run_request, sim_target};
use gpuwmm::check::driver::calibrate_stress;
use gpuwmm::check::{Executor, Fences, LocalExecutor, Supervisor, WorkerCommand};
use gpuwmm::env::Environment;
use std::path::PathBuf;
use std::time::Instant;

const RUNS: u64 = 1000;

fn measure(name: &str, executor: &mut dyn Executor, env: Environment) {
    let calibrated =
        calibrate_stress(executor, env, &Fences::AsIs, 1, &mut |_, _| {}).expect("calibration");
    let iterations = calibrated.stress_iterations;
    let start = Instant::now();
    let mut errors = 0;
    for run in 0..RUNS {
        let request = run_request(run, env, iterations, false);
        let record = executor.execute(&request).expect("run");
        errors += u64::from(record.outcome.is_error());
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "check_speed cbe-dot {env} {name}: {RUNS} runs in {secs:.2} s = {:.0} runs/s \
         ({iterations} stress iterations, {errors} errors; simulator)",
        RUNS as f64 / secs
    );
}

fn main() {
    if gpuwmm::toolchain::tools_for_tests().is_none() {
        println!("check_speed: NVRTC not found, skipped (run scripts/setup-cuda-tools.sh)");
        return;
    }
    let target = sim_target("cbe-dot");
    for env in ["no-str-", "sys-str+"] {
        let env: Environment = env.parse().expect("env");
        let mut local = LocalExecutor::open(&target).expect("executor");
        measure("in-process", &mut local, env);
        let command = WorkerCommand {
            program: PathBuf::from(env!("CARGO_BIN_EXE_gpuwmm")),
            args: vec!["worker".into()],
            env: Vec::new(),
        };
        let mut supervised = Supervisor::start(&target, command).expect("worker");
        measure("supervised", &mut supervised, env);
    }
}
