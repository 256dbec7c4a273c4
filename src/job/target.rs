//! The target options a job is given (app folder, size, fence kind, backend, …) resolved into
//! the [`Target`] its journal records, the executors that run it (one kept across a campaign's
//! cells), and stress calibrated before a journal exists.

use super::{JobError, Say};
use crate::apps::{load_app_dir, Size};
use crate::backend::select::{probe_backend, BackendChoice};
use crate::backend::sim::SimConfig;
use crate::backend::BackendKind;
use crate::check::driver::{calibrate_stress, CalibratedStress};
use crate::check::{Executor, Fences, LocalExecutor, SimModel, Supervisor, Target, WorkerCommand};
use crate::env::Environment;
use crate::profile::{self, StressProfile};
use crate::ptx::passes::fences::{FenceKind, Granularity};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which backend runs the kernels as asked for, the simulator's model, and the seed.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    pub backend: BackendChoice,
    pub sim_model: SimModel,
    pub seed: u64,
}

impl BackendOptions {
    /// The simulator's settings, should the backend be (or fall back to) the simulator.
    pub fn sim_config(&self) -> SimConfig {
        self.sim_model.config(self.seed)
    }

    /// The backend and seed default names carry.
    pub fn name_parts(&self) -> super::naming::NameParts {
        super::naming::NameParts {
            backend: self.backend,
            seed: self.seed,
        }
    }
}

/// What app runs where and how, as given (before `auto` and the defaults are resolved).
#[derive(Debug, Clone)]
pub struct TargetOptions {
    pub app_dir: Option<PathBuf>,
    pub size: Option<Size>,
    pub fence_kind: FenceKind,
    pub granularity: Granularity,
    pub deadline: Duration,
    pub stress_factor: f64,
    pub profile: Option<PathBuf>,
    pub sim_budget: Option<u64>,
    /// Run in this process instead of a supervised worker.
    pub in_process: bool,
    pub backend: BackendOptions,
    /// Which options the command line named (a resume compares those with its journal), and
    /// `--force`.
    pub given: super::settings::GivenOptions,
}

/// The name of the app a command line gives: `name` when given, else the name in the manifest
/// of `dir` (`--app-dir` alone). A folder that cannot be loaded (no such folder, no or a
/// malformed `app.toml`) is bad input, as it is when the name is given; `None` for both is
/// refused, naming what is missing.
pub fn app_name(name: Option<&str>, dir: Option<&Path>) -> Result<String, JobError> {
    match (name, dir) {
        (Some(name), _) => Ok(name.to_string()),
        (None, Some(dir)) => Ok(load_app_dir(dir)
            .map_err(JobError::BadApp)?
            .name()
            .to_string()),
        (None, None) => Err(JobError::refused(NO_APP)),
    }
}

/// What a job says when neither an app nor `--app-dir` is given.
pub const NO_APP: &str = "name at least one app (`gpuwmm apps` lists them), or give --app-dir";

/// A target and where its stress profile came from.
pub struct Resolved {
    pub target: Target,
    pub profile_source: String,
}

/// Resolves `auto`, the input size and the stress profile for `app`, saying when `auto` fell
/// back to the simulator.
pub fn resolve(app: &str, options: &TargetOptions, say: Say) -> Result<Resolved, JobError> {
    let probed = probe_backend(options.backend.backend, &options.backend.sim_config())?;
    if let Some(reason) = &probed.fallback_reason {
        say(&format!("note: running on the simulator: {reason}"));
    }
    if let Some(dir) = &options.app_dir {
        let app = crate::apps::load_app_dir(dir).map_err(JobError::BadApp)?;
        for warning in app
            .manifest()
            .map(|m| m.unused_defines())
            .unwrap_or_default()
        {
            say(&warning);
        }
    }
    let (profile, profile_source) = match &options.profile {
        Some(path) => (StressProfile::load(path)?, path.display().to_string()),
        None => profile::resolve(&profile::default_dir(), &probed.info)?,
    };
    if let Some(warning) = profile::other_chip_warning(&profile, &probed.info) {
        say(&warning);
    }
    let size = match probed.kind {
        BackendKind::Sim => Size::Sim,
        BackendKind::Cuda => Size::Gpu,
    };
    let target = Target {
        app: app.to_string(),
        // Recorded absolute, so a journal replays from any folder.
        app_dir: options
            .app_dir
            .as_deref()
            .map(crate::places::absolute)
            .transpose()?,
        size: options.size.unwrap_or(size),
        backend: probed.kind,
        sim_model: options.backend.sim_model,
        fence_kind: options.fence_kind,
        granularity: options.granularity,
        profile,
        deadline_ms: options.deadline.as_millis().max(1) as u64,
        stress_factor: options.stress_factor,
        sim_budget: options.sim_budget,
    };
    Ok(Resolved {
        target,
        profile_source,
    })
}

/// The executor for `target`: a supervised worker process (this binary's hidden `worker`
/// subcommand), or this process with `in_process`.
pub fn executor(target: &Target, in_process: bool) -> Result<Box<dyn Executor>, JobError> {
    find_and_compile_app(target)?;
    if in_process {
        return Ok(Box::new(
            LocalExecutor::open(target).map_err(JobError::Setup)?,
        ));
    }
    let supervised: Box<dyn Executor> = worker_executor(target)?;
    Ok(supervised)
}

/// Finds and compiles `target`'s app in this process, before any worker starts or journal is
/// written, so that a bad name or source is reported as bad input.
pub fn find_and_compile_app(target: &Target) -> Result<(), JobError> {
    crate::check::local::target_sites(target).map_err(JobError::BadApp)?;
    Ok(())
}

/// A supervised worker process for `target`: this program's `worker` subcommand.
pub fn worker_executor(target: &Target) -> Result<Box<dyn Executor + Send>, JobError> {
    let program = std::env::current_exe()?;
    let command = WorkerCommand {
        program,
        args: vec!["worker".to_string()],
        env: Vec::new(),
    };
    Ok(Box::new(
        Supervisor::start(target, command).map_err(JobError::Setup)?,
    ))
}

/// Calibrates stress for `env` with `fences` (see [`calibrate_stress`]), warning when
/// calibration failed and a fallback count is used: what a check and a hardening do before
/// their journal exists.
pub fn calibrate(
    executor: &mut dyn Executor,
    env: Environment,
    fences: &Fences,
    seed: u64,
    say: Say,
) -> Result<CalibratedStress, JobError> {
    if env.stresses() {
        // Three runs at each of 0, 1, 2, 4, ... iterations: on a GPU, an app whose run takes
        // seconds is silent for a minute or more here (tpo-tm on an H100) unless told.
        say(&format!(
            "calibrating stress for {env}: up to 3 runs at 0, 1, 2, 4, ... iterations"
        ));
    }
    let begun = std::time::Instant::now();
    let mut base = None;
    let mut measured = |iterations: u32, duration: f64| {
        let base = *base.get_or_insert(duration);
        if begun.elapsed() >= QUIET_CALIBRATION {
            say(&measurement_text(
                iterations,
                duration,
                base,
                begun.elapsed(),
            ));
        }
    };
    let calibrated = calibrate_stress(executor, env, fences, seed, &mut measured)?;
    if env.stresses() && calibrated.calibration_error.is_none() {
        say(&format!(
            "stress calibrated in {:.1} s: {} iterations",
            begun.elapsed().as_secs_f64(),
            calibrated.stress_iterations
        ));
    }
    if let Some(e) = &calibrated.calibration_error {
        let iterations = calibrated.stress_iterations;
        say(&format!(
            "warning: stress calibration failed ({e}); using {iterations} iterations"
        ));
    }
    Ok(calibrated)
}

/// How long a calibration goes before each measurement is shown (on the simulator it takes
/// well under a second; on a GPU, tpo-tm and ct-octree were silent for over 30 s).
const QUIET_CALIBRATION: std::time::Duration = std::time::Duration::from_secs(2);

/// One calibration measurement as the user sees it: the kernel's duration relative to the kernel
/// with idle stress (units differ by backend; the ratio is what calibration aims at).
fn measurement_text(
    iterations: u32,
    duration: f64,
    base: f64,
    elapsed: std::time::Duration,
) -> String {
    let ratio = if base > 0.0 { duration / base } else { 0.0 };
    format!(
        "  {iterations} stress iteration(s): kernel {ratio:.2}x as long as with idle stress \
         ({:.1} s in)",
        elapsed.as_secs_f64()
    )
}

/// An executor kept for the next check of the same target, so that a campaign starts one
/// worker per app rather than one per cell.
pub struct Executors {
    in_process: bool,
    current: Option<(Target, Box<dyn Executor>)>,
}

impl Executors {
    pub fn new(in_process: bool) -> Executors {
        Executors {
            in_process,
            current: None,
        }
    }

    /// The executor for `target`: the kept one when it runs the same target, else a new one.
    pub fn get(&mut self, target: &Target) -> Result<&mut dyn Executor, JobError> {
        if self.current.as_ref().is_none_or(|(t, _)| t != target) {
            self.current = None; // stop the old worker before starting another
            self.current = Some((target.clone(), executor(target, self.in_process)?));
        }
        Ok(self.current.as_mut().expect("set above").1.as_mut())
    }
}
