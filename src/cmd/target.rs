//! Turning the shared target options into a [`Target`], executors (one kept across a campaign's
//! cells) and calibrated stress, for `check`, `harden`, `campaign`, `replay` and `cost`.

use super::{backend_request, Failure};
use crate::cli::{BackendArgs, TargetArgs};
use gpuwmm::apps::Size;
use gpuwmm::backend::select::{probe_backend, Probed};
use gpuwmm::backend::BackendKind;
use gpuwmm::check::driver::{calibrate_stress, CalibratedStress};
use gpuwmm::check::{BackendChoice, Executor, LocalExecutor, Supervisor, Target, WorkerCommand};
use gpuwmm::profile::{self, StressProfile};

/// A target and where its stress profile came from.
pub struct Resolved {
    pub target: Target,
    pub profile_source: String,
}

/// Resolves `auto`, the input size and the stress profile for `app`.
pub fn resolve(app: &str, args: &TargetArgs) -> Result<Resolved, Failure> {
    let probed = probe(&args.backend)?;
    if let Some(reason) = &probed.fallback_reason {
        eprintln!("note: running on the simulator: {reason}");
    }
    let (profile, profile_source) = match &args.profile {
        Some(path) => (
            StressProfile::load(path).map_err(Failure::bad_input)?,
            path.display().to_string(),
        ),
        None => {
            profile::resolve(&profile::default_dir(), &probed.info).map_err(Failure::bad_input)?
        }
    };
    let (backend, size) = match probed.kind {
        BackendKind::Sim => (BackendChoice::Sim, Size::Sim),
        BackendKind::Cuda => (BackendChoice::Cuda, Size::Gpu),
    };
    let target = Target {
        app: app.to_string(),
        // Recorded absolute, so a journal replays from any folder.
        app_dir: args
            .app_dir
            .as_deref()
            .map(std::path::absolute)
            .transpose()?,
        size: args.size.unwrap_or(size),
        backend,
        sim_model: args.backend.sim_model,
        fence_kind: args.fence_kind,
        granularity: args.granularity.into(),
        profile,
        deadline_ms: args.deadline.as_millis().max(1) as u64,
        stress_factor: args.stress_factor,
        sim_budget: args.sim_budget,
    };
    Ok(Resolved {
        target,
        profile_source,
    })
}

fn probe(args: &BackendArgs) -> Result<Probed, Failure> {
    let (choice, sim) = backend_request(args);
    Ok(probe_backend(choice, &sim)?)
}

/// The executor for `target`: a supervised worker process (this binary's hidden `worker`
/// subcommand), or this process with `in_process`.
pub fn executor(target: &Target, in_process: bool) -> Result<Box<dyn Executor>, Failure> {
    find_and_compile_app(target)?;
    if in_process {
        return Ok(Box::new(
            LocalExecutor::open(target).map_err(setup_failure)?,
        ));
    }
    let supervised: Box<dyn Executor> = worker_executor(target)?;
    Ok(supervised)
}

/// Finds and compiles `target`'s app in this process, before any worker starts or journal is
/// written, so that a bad name or source is reported as bad input (exit code 2).
pub fn find_and_compile_app(target: &Target) -> Result<(), Failure> {
    gpuwmm::check::local::target_sites(target).map_err(Failure::bad_input)?;
    Ok(())
}

/// A supervised worker process for `target`.
pub fn worker_executor(target: &Target) -> Result<Box<dyn Executor + Send>, Failure> {
    let program = std::env::current_exe()?;
    let command = WorkerCommand {
        program,
        args: vec!["worker".to_string()],
        env: Vec::new(),
    };
    Ok(Box::new(
        Supervisor::start(target, command).map_err(setup_failure)?,
    ))
}

/// An app that cannot be found or built is bad input; anything else a failure.
pub fn setup_failure(error: gpuwmm::check::ExecError) -> Failure {
    use gpuwmm::apps::AppError;
    use gpuwmm::check::ExecError;
    match &error {
        ExecError::App(
            AppError::UnknownApp { .. } | AppError::Manifest(_) | AppError::Compile { .. },
        )
        | ExecError::NoSuchSite { .. } => Failure::bad_input(error),
        _ => Failure::from(error),
    }
}

/// Calibrates stress for `env` with `fences` (see [`calibrate_stress`]), warning when calibration
/// failed and a fallback count is used: what `check` and `harden` do before their journal exists.
pub fn calibrate(
    executor: &mut dyn Executor,
    env: gpuwmm::env::Environment,
    fences: &gpuwmm::check::Fences,
    seed: u64,
) -> Result<CalibratedStress, Failure> {
    let calibrated = calibrate_stress(executor, env, fences, seed)?;
    if let Some(e) = &calibrated.calibration_error {
        let iterations = calibrated.stress_iterations;
        eprintln!("warning: stress calibration failed ({e}); using {iterations} iterations");
    }
    Ok(calibrated)
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
    pub fn get(&mut self, target: &Target) -> Result<&mut dyn Executor, Failure> {
        if self.current.as_ref().is_none_or(|(t, _)| t != target) {
            self.current = None; // stop the old worker before starting another
            self.current = Some((target.clone(), executor(target, self.in_process)?));
        }
        Ok(self.current.as_mut().expect("set above").1.as_mut())
    }
}
