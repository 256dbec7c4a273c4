//! The measurement of an app on a backend: its variants loaded once, run natively.
//!
//! Runtime is what the backend says a kernel lasted ([`crate::backend::KernelStats::duration`]:
//! CUDA-event seconds on a GPU, the busiest thread's instructions on the simulator), summed over
//! the app's launches. Energy comes from the backend's NVML meter: its total-energy counter where
//! the device has one, else sampled power (an estimate); the simulator has neither.

use super::measure::{EnergyMethod, Measurement, RunSample, TimeMethod};
use super::variant::{fence_free, variant_module, EmpFences};
use super::{CostError, Variant};
use crate::apps::{
    App, Launch, Launcher, LoadedApp, LoadedParts, RunOptions, Size, Verdict, DEFAULT_ARCH,
};
use crate::backend::nvml::PowerMeter;
use crate::backend::{Backend, BackendError, BackendKind};
use crate::check::local::RunPlan;
use crate::check::Target;
use crate::ptx::passes::fences::{fence_sites, FenceKind, Granularity};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// An app's variants on a backend.
pub struct AppMeasurement {
    target: Target,
    backend: Box<dyn Backend>,
    app: Arc<dyn App>,
    loaded: HashMap<Variant, LoadedParts>,
    meter: Option<PowerMeter>,
    clock: Instant,
}

impl AppMeasurement {
    /// Loads `variants` of the target's app on `backend` (`emp` needs `emp`).
    pub fn open(
        target: &Target,
        mut backend: Box<dyn Backend>,
        app: Arc<dyn App>,
        variants: &[Variant],
        emp: Option<&EmpFences>,
        cons_kind: FenceKind,
    ) -> Result<AppMeasurement, CostError> {
        let base = fence_free(&app.module(DEFAULT_ARCH, target.size)?);
        let mut loaded = HashMap::new();
        for &variant in variants {
            let module = variant_module(&base, variant, emp, cons_kind)?;
            let parts =
                LoadedApp::load(&*app, &mut *backend, &module, DEFAULT_ARCH, target.size)?.parts();
            loaded.insert(variant, parts);
        }
        let meter = backend.power_meter();
        Ok(AppMeasurement {
            target: target.clone(),
            backend,
            app,
            loaded,
            meter,
            clock: Instant::now(),
        })
    }

    /// How many fences `cons` puts into the app: one per memory access.
    pub fn cons_fences(app: &dyn App, size: Size) -> Result<usize, CostError> {
        let base = fence_free(&app.module(DEFAULT_ARCH, size)?);
        Ok(fence_sites(&base, Granularity::Instruction).len())
    }
}

/// Sums what the app's launches lasted.
#[derive(Default)]
struct Timing {
    duration: f64,
}

impl Launcher for Timing {
    fn after(&mut self, backend: &mut dyn Backend, _launch: &Launch) -> Result<(), BackendError> {
        self.duration += backend.last_kernel_stats().duration();
        Ok(())
    }
}

impl AppMeasurement {
    /// The backend's power meter, which energy windows need.
    fn meter(&self) -> Result<&PowerMeter, CostError> {
        self.meter
            .as_ref()
            .ok_or_else(|| CostError::Energy("no meter".into()))
    }
}

impl Measurement for AppMeasurement {
    fn time_method(&self) -> TimeMethod {
        match self.backend.info().backend {
            BackendKind::Cuda => TimeMethod::CudaEvents,
            BackendKind::Sim => TimeMethod::SimulatedInstructions,
        }
    }

    fn energy_method(&self) -> EnergyMethod {
        let info = self.backend.info();
        match (&self.meter, info.backend) {
            (_, BackendKind::Sim) => {
                EnergyMethod::NotAvailable("not available on the simulator".into())
            }
            (Some(m), _) if m.supports_energy_counter() => EnergyMethod::Counter,
            (Some(m), _) if m.supports_power() => EnergyMethod::SampledPower,
            (Some(_), _) => EnergyMethod::NotAvailable(format!(
                "not available: NVML reads neither an energy counter nor power on {}",
                info.name
            )),
            (None, _) => EnergyMethod::NotAvailable(format!(
                "not available: NVML is missing or does not know {}",
                info.name
            )),
        }
    }

    fn run(&mut self, variant: Variant, seed: u64) -> Result<RunSample, CostError> {
        let plan = RunPlan::from_seed(seed);
        let parts = self
            .loaded
            .get(&variant)
            .expect("every measured variant is loaded")
            .clone();
        self.backend.reseed(plan.backend_seed);
        let options = RunOptions {
            size: self.target.size,
            input_seed: plan.input_seed,
            deadline: self.target.deadline(),
        };
        let mut timing = Timing::default();
        let app = LoadedApp::from_parts(&*self.app, parts);
        let verdict = app.run(&mut *self.backend, &mut timing, &options);
        let (passed, reason) = match verdict {
            Ok(Verdict::Pass) => (true, String::new()),
            Ok(Verdict::Fail { reason }) => (false, reason),
            // A hung or faulting run is discarded like a failed one; a broken app is an error.
            Err(e) if e.backend_error().is_some() => (false, e.to_string()),
            Err(e) => return Err(e.into()),
        };
        Ok(RunSample {
            passed,
            reason,
            duration: timing.duration,
        })
    }

    fn energy_mj(&mut self) -> Result<f64, CostError> {
        self.meter()?
            .total_energy_mj()
            .map(|mj| mj as f64)
            .map_err(|e| CostError::Energy(e.to_string()))
    }

    fn power_mw(&mut self) -> Result<f64, CostError> {
        self.meter()?
            .power_mw()
            .map(f64::from)
            .map_err(|e| CostError::Energy(e.to_string()))
    }

    fn now(&self) -> f64 {
        self.clock.elapsed().as_secs_f64()
    }

    fn idle(&mut self, seconds: f64) {
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds.max(0.0)));
    }
}
