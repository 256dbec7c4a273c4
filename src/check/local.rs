//! Running an application under test in this process: open the backend, compile the app, insert
//! the requested fences, add the stress harness, and run it once per request.
//!
//! Modules are loaded once per fence set (and per stress strategy for the harnessed one) and
//! reused, so a long check pays compilation and JIT once. Everything random in a run derives from
//! the request's seed (see [`RunPlan`]), which is what makes `gpuwmm replay` possible.

use super::calibrate::{calibrate, count_duration, Calibration, MAX_ITERATIONS};
use super::executor::{ExecError, Executor};
use super::outcome::{Outcome, RunRecord};
use super::spec::{CalibrationRequest, Fences, RunRequest, Target};
use crate::apps::{
    find_app, load_named_app_dir, App, AppError, Launch, Launcher, LoadedApp, LoadedParts,
    RunOptions, Verdict, DEFAULT_ARCH,
};
use crate::backend::select::{open_backend, provenance};
use crate::backend::{Backend, BackendError, ModuleId};
use crate::env::{Environment, StressKind};
use crate::ptx::loops::{blind_loops, BlindLoop};
use crate::ptx::passes::fences::{fence_sites, insert_kinded_fences, FenceKind, FenceSite};
use crate::ptx::passes::harness::{harness_kernels, HarnessOptions};
use crate::ptx::{self, Module};
use crate::stressed::{AppLaunch, StressSettings, StressedLauncher};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The smallest and largest share of the app's blocks added as stressing blocks, in percent.
pub const STRESS_PERCENT: (u32, u32) = (15, 50);

/// Everything a run draws from its seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPlan {
    /// Stressing blocks as a share of each launch's blocks, in percent.
    pub stress_percent: u32,
    /// Seeds the app's inputs.
    pub input_seed: u64,
    /// Seeds the control block: permutations and `sys` locations.
    pub control_seed: u64,
    /// Seeds the simulator's scheduler and memory model.
    pub backend_seed: u64,
}

impl RunPlan {
    pub fn from_seed(seed: u64) -> RunPlan {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        RunPlan {
            stress_percent: rng.random_range(STRESS_PERCENT.0..=STRESS_PERCENT.1),
            input_seed: rng.random(),
            control_seed: rng.random(),
            backend_seed: rng.random(),
        }
    }

    /// Stressing blocks next to `app_blocks` application blocks: at least one when stressing.
    pub fn stress_blocks(&self, env: Environment, app_blocks: u64) -> u32 {
        if !env.stresses() {
            return 0;
        }
        let blocks = (app_blocks * u64::from(self.stress_percent)).div_ceil(100);
        blocks.clamp(1, u64::from(u32::MAX)) as u32
    }
}

/// The modules loaded for one fence set.
struct Loaded {
    parts: LoadedParts,
    fenced: Module,
    harnessed: HashMap<StressKind, ModuleId>,
}

/// Runs requests in this process.
pub struct LocalExecutor {
    target: Target,
    backend: Box<dyn Backend>,
    app: Arc<dyn App>,
    base: Module,
    sites: Vec<FenceSite>,
    loaded: HashMap<Fences, Loaded>,
    stress: Option<StressedLauncher>,
    /// What the kernels of the last run printed ([`LocalExecutor::device_output`]).
    device_output: Vec<u8>,
}

/// Finds the target's app: built in, or from its folder, whose manifest must name the app the
/// target names.
pub fn target_app(target: &Target) -> Result<Arc<dyn App>, AppError> {
    match &target.app_dir {
        Some(dir) => load_named_app_dir(dir, &target.app),
        None => find_app(&target.app),
    }
}

/// The target's fence sites, from its PTX alone (no backend needed).
pub fn target_sites(target: &Target) -> Result<Vec<FenceSite>, AppError> {
    crate::apps::app_sites(&*target_app(target)?, target.size, target.granularity)
}

/// The target's blind loops ([`crate::ptx::loops`]): spins that, once they go round, never
/// leave, what a run that timed out may be stuck in.
pub fn target_blind_loops(target: &Target) -> Result<Vec<BlindLoop>, AppError> {
    let module = target_app(target)?.module(crate::apps::DEFAULT_ARCH, target.size)?;
    Ok(blind_loops(&module))
}

/// Opens the backend a target names.
pub fn open_target_backend(target: &Target) -> Result<Box<dyn Backend>, BackendError> {
    let mut config = target.sim_model.config(0);
    if let Some(budget) = target.sim_budget {
        config.instruction_budget = budget;
    }
    Ok(open_backend(target.backend.into(), &config)?.backend)
}

impl LocalExecutor {
    /// Opens the target's backend and compiles its app.
    pub fn open(target: &Target) -> Result<LocalExecutor, ExecError> {
        let backend = open_target_backend(target)?;
        LocalExecutor::with_backend(target, backend)
    }

    /// Runs the target on a backend the caller opened.
    pub fn with_backend(
        target: &Target,
        backend: Box<dyn Backend>,
    ) -> Result<LocalExecutor, ExecError> {
        LocalExecutor::with_app(target, backend, target_app(target)?)
    }

    /// Runs `app` in the target's place (e.g. the app with a patched source), on a backend the
    /// caller opened; the target gives everything else.
    pub fn with_app(
        target: &Target,
        backend: Box<dyn Backend>,
        app: Arc<dyn App>,
    ) -> Result<LocalExecutor, ExecError> {
        let base = app.module(DEFAULT_ARCH, target.size)?;
        let sites = fence_sites(&base, target.granularity);
        Ok(LocalExecutor {
            target: target.clone(),
            backend,
            app,
            base,
            sites,
            loaded: HashMap::new(),
            stress: None,
            device_output: Vec::new(),
        })
    }

    /// What the kernels of the last run printed with `printf`, in the order the calls executed:
    /// the simulator's capture. Empty on a GPU, whose `printf` output went to this process's
    /// standard output by itself while the run ran. Only `gpuwmm replay` shows it: `check`
    /// runs its runs in workers under a supervisor and prints none of it.
    pub fn device_output(&self) -> &[u8] {
        &self.device_output
    }

    /// The app's module with `fences` inserted.
    fn fenced_module(&self, fences: &Fences) -> Result<Module, ExecError> {
        let kinded: Vec<(usize, FenceKind)> = match fences {
            Fences::AsIs => return Ok(self.base.clone()),
            Fences::Sites(ids) => ids.iter().map(|&id| (id, self.target.fence_kind)).collect(),
            Fences::Kinded(kinds) => kinds.iter().map(|(&id, &k)| (id, k)).collect(),
        };
        let chosen = kinded
            .iter()
            .map(|&(id, kind)| {
                let site = self.sites.get(id).ok_or(ExecError::NoSuchSite {
                    site: id,
                    sites: self.sites.len(),
                })?;
                Ok((site, kind))
            })
            .collect::<Result<Vec<_>, ExecError>>()?;
        Ok(insert_kinded_fences(&self.base, &chosen))
    }

    /// Loads the app with `fences` (once per fence set).
    fn load(&mut self, fences: &Fences) -> Result<&mut Loaded, ExecError> {
        if !self.loaded.contains_key(fences) {
            let fenced = self.fenced_module(fences)?;
            let size = self.target.size;
            let loaded =
                LoadedApp::load(&*self.app, &mut *self.backend, &fenced, DEFAULT_ARCH, size)?;
            let parts = loaded.parts();
            self.loaded.insert(
                fences.clone(),
                Loaded {
                    parts,
                    fenced,
                    harnessed: HashMap::new(),
                },
            );
        }
        Ok(self.loaded.get_mut(fences).expect("inserted above"))
    }

    /// The harnessed module for `fences` and `stress` (once per pair).
    fn harnessed(&mut self, fences: &Fences, stress: StressKind) -> Result<ModuleId, ExecError> {
        let kernels = self.app.kernels(self.target.size);
        let sequence = self.target.profile.sequence.clone();
        let loaded = self.load(fences)?;
        if let Some(&id) = loaded.harnessed.get(&stress) {
            return Ok(id);
        }
        let strategy = stress
            .strategy(&sequence)
            .map_err(|e| ExecError::Instrument(e.to_string()))?;
        let names: Vec<&str> = kernels.iter().map(String::as_str).collect();
        let module = harness_kernels(&loaded.fenced, &names, &HarnessOptions { stress: strategy })
            .map_err(|e| ExecError::Instrument(e.to_string()))?;
        let text = ptx::print(&module);
        let id = self.backend.load_module(&text)?;
        self.load(fences)?.harnessed.insert(stress, id);
        Ok(id)
    }

    /// The scratchpad the stressing blocks hammer: an L2's worth, and at least `spread` patches.
    fn stressed_launcher(&mut self) -> Result<&mut StressedLauncher, ExecError> {
        if self.stress.is_none() {
            let profile = &self.target.profile;
            let l2_words = (self.backend.info().l2_bytes / 4).min(u64::from(u32::MAX / 2)) as u32;
            let words = l2_words.max(profile.spread * profile.patch_words).max(1024);
            self.stress = Some(StressedLauncher::new(&mut *self.backend, words)?);
        }
        Ok(self.stress.as_mut().expect("created above"))
    }

    /// Runs the app once; returns the outcome and what the launches measured.
    fn run(
        &mut self,
        env: Environment,
        fences: &Fences,
        seed: u64,
        iterations: u32,
        end: StressEnd,
    ) -> Result<Measured, ExecError> {
        let plan = RunPlan::from_seed(seed);
        let parts = self.load(fences)?.parts.clone();
        let harnessed = match env.harnessed() {
            true => Some(self.harnessed(fences, env.stress)?),
            false => None,
        };
        if harnessed.is_some() {
            self.stressed_launcher()?;
        }
        self.backend.reseed(plan.backend_seed);
        let profile = &self.target.profile;
        let mut launcher = RunLauncher {
            stress: harnessed.map(|module| StressLaunch {
                launcher: self.stress.as_mut().expect("created above"),
                module,
                env,
                plan,
                iterations,
                end,
                spread: profile.spread,
                patch_words: profile.patch_words,
            }),
            measured: Measured::default(),
        };
        let options = RunOptions {
            size: self.target.size,
            input_seed: plan.input_seed,
            deadline: self.target.deadline(),
        };
        let app = LoadedApp::from_parts(&*self.app, parts);
        let verdict = app.run(&mut *self.backend, &mut launcher, &options);
        self.device_output = self.backend.take_device_output();
        let mut measured = launcher.measured;
        (measured.outcome, measured.reason) = classify(verdict);
        Ok(measured)
    }
}

/// What one run came to.
#[derive(Debug, Clone, PartialEq)]
struct Measured {
    outcome: Outcome,
    reason: String,
    stress_blocks: Vec<u32>,
    kernel_seconds: f64,
    /// The longest launch, in the backend's duration unit.
    longest: f64,
}

impl Default for Measured {
    fn default() -> Measured {
        Measured {
            outcome: Outcome::Pass,
            reason: String::new(),
            stress_blocks: Vec::new(),
            kernel_seconds: 0.0,
            longest: 0.0,
        }
    }
}

/// `x` rounded to `digits` decimals (journals need no nanosecond noise).
fn round_to(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

/// Maps an app run's result to an outcome and a reason.
fn classify(result: Result<Verdict, AppError>) -> (Outcome, String) {
    match result {
        Ok(Verdict::Pass) => (Outcome::Pass, String::new()),
        Ok(Verdict::Fail { reason }) => (Outcome::Fail, reason),
        Err(e) if e.is_timeout() => (Outcome::Timeout, e.to_string()),
        Err(e) => (Outcome::Crash, e.to_string()),
    }
}

/// Whether a run's stressing blocks may stop when its application blocks have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StressEnd {
    /// Calibration measures how long stress lasts, so stress runs its course.
    RunsItsCourse,
    /// A checking run needs stress only while the application runs; a backend that can end the
    /// launch then does ([`Backend::end_next_launch_with_app`]: the simulator).
    WithApp,
}

/// The stress side of a harnessed run.
struct StressLaunch<'s> {
    launcher: &'s mut StressedLauncher,
    module: ModuleId,
    env: Environment,
    plan: RunPlan,
    iterations: u32,
    end: StressEnd,
    spread: u32,
    patch_words: u32,
}

/// Launches the app's kernels (harnessed, with stressing blocks, or natively) and measures them.
struct RunLauncher<'s> {
    stress: Option<StressLaunch<'s>>,
    measured: Measured,
}

impl Launcher for RunLauncher<'_> {
    fn launch(
        &mut self,
        backend: &mut dyn Backend,
        launch: &mut Launch,
    ) -> Result<(), BackendError> {
        let Some(s) = &mut self.stress else {
            return launch.start(backend);
        };
        let (x, y, z) = launch.config.grid;
        let app_blocks = u64::from(x) * u64::from(y) * u64::from(z);
        let settings = StressSettings {
            stress_blocks: s.plan.stress_blocks(s.env, app_blocks),
            stress_iterations: s.iterations,
            randomise: s.env.randomise,
            spread: s.spread,
            patch_words: s.patch_words,
            // Each launch of a run gets its own permutation and locations.
            seed: s.plan.control_seed.wrapping_add(launch.index as u64),
        };
        self.measured.stress_blocks.push(settings.stress_blocks);
        if s.end == StressEnd::WithApp {
            backend.end_next_launch_with_app(u32::try_from(app_blocks).unwrap_or(u32::MAX));
        }
        let app = AppLaunch {
            module: s.module,
            kernel: &launch.kernel,
            config: &launch.config,
            args: &launch.args,
        };
        let control = s.launcher.launch(backend, app, &settings)?;
        let (grid, block) = control.launch_grid();
        launch.module = s.module;
        launch.config.grid = grid;
        launch.config.block = block;
        Ok(())
    }

    fn after(&mut self, backend: &mut dyn Backend, _launch: &Launch) -> Result<(), BackendError> {
        let stats = backend.last_kernel_stats();
        self.measured.kernel_seconds += stats.time.as_secs_f64();
        self.measured.longest = self.measured.longest.max(stats.duration());
        Ok(())
    }
}

impl Executor for LocalExecutor {
    fn provenance(&self) -> String {
        provenance(&*self.backend)
    }

    fn records_races(&self) -> bool {
        self.target.races_recordable()
    }

    fn sites(&self) -> Result<Vec<FenceSite>, ExecError> {
        Ok(self.sites.clone())
    }

    fn calibrate(
        &mut self,
        request: &CalibrationRequest,
        measured: &mut dyn FnMut(u32, f64),
    ) -> Result<Calibration, ExecError> {
        let factor = self.target.stress_factor;
        calibrate(factor, MAX_ITERATIONS, |iterations, target| {
            // Up to three runs, each with its own seed.
            let duration = count_duration(target, |i| {
                let seed = request.seed.wrapping_add(i);
                let m = self.run(
                    request.env,
                    &request.fences,
                    seed,
                    iterations,
                    StressEnd::RunsItsCourse,
                )?;
                if m.outcome.needs_restart() {
                    return Err(ExecError::Calibration(format!(
                        "a run with {iterations} stress iterations ended in {}: {}",
                        m.outcome, m.reason
                    )));
                }
                Ok(m.longest)
            })?;
            measured(iterations, duration);
            Ok(duration)
        })
    }

    fn execute(&mut self, request: &RunRequest) -> Result<RunRecord, ExecError> {
        let start = Instant::now();
        let iterations = if request.env.stresses() {
            request.stress_iterations
        } else {
            0
        };
        self.backend.record_races(request.races);
        let m = self.run(
            request.env,
            &request.fences,
            request.seed,
            iterations,
            StressEnd::WithApp,
        )?;
        let races = self.backend.take_races();
        Ok(RunRecord {
            run: request.run,
            seed: request.seed,
            env: request.env,
            stress_blocks: m
                .stress_blocks
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" "),
            stress_iterations: iterations,
            outcome: m.outcome,
            reason: m.reason,
            kernel_us: round_to(m.kernel_seconds * 1e6, 1),
            wall_ms: round_to(start.elapsed().as_secs_f64() * 1e3, 3),
            races,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stress_blocks_are_15_to_50_percent_of_the_app_blocks_and_at_least_one() {
        let sys: Environment = "sys-str+".parse().unwrap();
        let none: Environment = "no-str+".parse().unwrap();
        let mut percents = std::collections::BTreeSet::new();
        for seed in 0..2000 {
            let plan = RunPlan::from_seed(seed);
            percents.insert(plan.stress_percent);
            let blocks = plan.stress_blocks(sys, 100);
            assert_eq!(blocks, plan.stress_percent);
            assert!(plan.stress_blocks(sys, 1) >= 1);
            assert_eq!(plan.stress_blocks(none, 100), 0);
        }
        assert_eq!(percents.first(), Some(&15));
        assert_eq!(percents.last(), Some(&50));
    }

    #[test]
    fn a_plan_is_a_function_of_its_seed() {
        assert_eq!(RunPlan::from_seed(9), RunPlan::from_seed(9));
        assert_ne!(RunPlan::from_seed(9), RunPlan::from_seed(10));
    }
}
