//! Check throughput on the simulator: executions per second of `check cbe-dot`, in this process
//! and through a supervised worker process, without stress and under calibrated `sys-str+`.
//!
//! `cargo bench --bench check_speed` (needs NVRTC: scripts/setup-cuda-tools.sh). Prints figures;
//! the README quotes them. Ratios between lines are meaningful; absolute rates depend on the CPU.

use gpuwmm::apps::Size;
use gpuwmm::check::driver::calibrate_stress;
use gpuwmm::check::spec::{run_seed, DEFAULT_DEADLINE_MS, DEFAULT_STRESS_FACTOR};
use gpuwmm::check::{
    BackendKind, Executor, Fences, LocalExecutor, RunRequest, SimModel, Supervisor, Target,
    WorkerCommand,
};
use gpuwmm::env::Environment;
use gpuwmm::profile::{StressProfile, DEFAULT_SIM};
use std::path::{Path, PathBuf};
use std::time::Instant;

const RUNS: u64 = 1000;

fn target() -> Target {
    Target {
        app: "cbe-dot".into(),
        app_dir: None,
        size: Size::Sim,
        backend: BackendKind::Sim,
        sim_model: SimModel::Ptx,
        fence_kind: Default::default(),
        granularity: Default::default(),
        profile: StressProfile::parse(DEFAULT_SIM, Path::new("sim.toml")).expect("profile"),
        deadline_ms: DEFAULT_DEADLINE_MS,
        stress_factor: DEFAULT_STRESS_FACTOR,
        sim_budget: None,
    }
}

fn measure(name: &str, executor: &mut dyn Executor, env: Environment) {
    let calibrated = calibrate_stress(executor, env, &Fences::AsIs, 1).expect("calibration");
    let iterations = calibrated.stress_iterations;
    let start = Instant::now();
    let mut errors = 0;
    for run in 0..RUNS {
        let request = RunRequest {
            run,
            seed: run_seed(1, run),
            env,
            fences: Fences::AsIs,
            stress_iterations: iterations,
            races: false,
        };
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
    let target = target();
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
