//! What the simulator benchmarks share: a built-in app as the simulator runs it by default, and
//! the requests of a check's runs (seed 1).

use gpuwmm::apps::Size;
use gpuwmm::check::spec::{run_seed, DEFAULT_DEADLINE_MS, DEFAULT_STRESS_FACTOR};
use gpuwmm::check::{BackendKind, Fences, RunRequest, SimModel, Target};
use gpuwmm::env::Environment;
use gpuwmm::profile::{StressProfile, DEFAULT_SIM};
use std::path::Path;

/// Built-in `app` on the simulator under the PTX model, with the default stress profile,
/// deadline and stress factor.
pub fn sim_target(app: &str) -> Target {
    Target {
        app: app.into(),
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

/// Run `run` of a check seeded with 1, the app's fences as they are, recording races when
/// `races`.
pub fn run_request(run: u64, env: Environment, stress_iterations: u32, races: bool) -> RunRequest {
    RunRequest {
        run,
        seed: run_seed(1, run),
        env,
        fences: Fences::AsIs,
        stress_iterations,
        races,
    }
}
