//! Choosing a backend: a real GPU where a driver and a device answer, else the simulator.
//!
//! Every command that runs kernels goes through [`open_backend`], so `--backend auto` means the
//! same thing everywhere, and a command never silently runs on the simulator when the user asked
//! for a GPU.

use super::cuda::CudaBackend;
use super::sim::{Device, SimBackend, SimConfig};
use super::{Backend, BackendError, BackendKind};

/// Which backend the user asked for: on the command line (`--backend`), in journals and in the
/// worker protocol alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// `cuda` if a driver and a device are present, else `sim`.
    Auto,
    Cuda,
    Sim,
}

impl BackendChoice {
    pub const ALL: [BackendChoice; 3] =
        [BackendChoice::Auto, BackendChoice::Cuda, BackendChoice::Sim];

    /// The name as the command line and file names spell it.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Cuda => "cuda",
            BackendChoice::Sim => "sim",
        }
    }
}

impl From<BackendKind> for BackendChoice {
    /// Asking for a backend by what it is.
    fn from(kind: BackendKind) -> BackendChoice {
        match kind {
            BackendKind::Cuda => BackendChoice::Cuda,
            BackendKind::Sim => BackendChoice::Sim,
        }
    }
}

display_by_name!(BackendChoice, name);
parse_by_name!(BackendChoice, name, String, |s| format!(
    "unknown backend '{s}' (expected auto, cuda or sim)"
));

/// An opened backend and, for `Auto`, why it is the one chosen.
pub struct OpenedBackend {
    pub backend: Box<dyn Backend>,
    pub kind: BackendKind,
    /// Set when `Auto` fell back to the simulator: the reason the GPU was not used.
    pub fallback_reason: Option<String>,
}

/// Opens the backend: `Cuda` fails with the typed error when no GPU is usable; `Auto` falls back
/// to the simulator configured by `sim`.
pub fn open_backend(choice: BackendChoice, sim: &SimConfig) -> Result<OpenedBackend, BackendError> {
    match choice {
        BackendChoice::Sim => Ok(simulator(sim, None)),
        BackendChoice::Cuda => Ok(OpenedBackend {
            backend: Box::new(CudaBackend::open(0)?),
            kind: BackendKind::Cuda,
            fallback_reason: None,
        }),
        BackendChoice::Auto => match CudaBackend::open(0) {
            Ok(gpu) => Ok(OpenedBackend {
                backend: Box::new(gpu),
                kind: BackendKind::Cuda,
                fallback_reason: None,
            }),
            Err(e @ (BackendError::NoDriver(_) | BackendError::NoDevice(_))) => {
                Ok(simulator(sim, Some(fallback_reason(&e))))
            }
            Err(e) => Err(e),
        },
    }
}

/// Why `auto` runs on the simulator, in words for a note printed while it does: the error
/// without its advice to pass `--backend sim` (which is what happens).
fn fallback_reason(error: &BackendError) -> String {
    match error {
        BackendError::NoDriver(why) => format!("no CUDA driver found ({why})"),
        other => other.to_string(),
    }
}

fn simulator(config: &SimConfig, fallback_reason: Option<String>) -> OpenedBackend {
    OpenedBackend {
        backend: Box::new(SimBackend::new(config.clone())),
        kind: BackendKind::Sim,
        fallback_reason,
    }
}

/// A line that labels results by where they come from; simulator results always say so.
pub fn provenance(backend: &dyn Backend) -> String {
    let info = backend.info();
    match info.backend {
        BackendKind::Sim => format!(
            "backend: simulator ({}) — a model of weak memory, not hardware",
            info.driver
        ),
        BackendKind::Cuda => format!("backend: {} (driver {})", info.name, info.driver),
    }
}

/// The backend a choice would open, and its device, without opening it (no CUDA context is
/// created): a supervisor uses this to pick the stress profile and the input size while its
/// worker process owns the GPU.
pub struct Probed {
    pub kind: BackendKind,
    pub info: super::DeviceInfo,
    /// Set when `Auto` would fall back to the simulator.
    pub fallback_reason: Option<String>,
}

/// Finds what [`open_backend`] would open for `choice`.
pub fn probe_backend(choice: BackendChoice, sim: &SimConfig) -> Result<Probed, BackendError> {
    let simulated = |fallback_reason| Probed {
        kind: BackendKind::Sim,
        info: SimBackend::new(sim.clone()).info().clone(),
        fallback_reason,
    };
    let gpu = || -> Result<Probed, BackendError> {
        let info = super::cuda::list_devices()?
            .into_iter()
            .next()
            .ok_or_else(|| BackendError::NoDevice("the driver lists no GPU".into()))?;
        Ok(Probed {
            kind: BackendKind::Cuda,
            info,
            fallback_reason: None,
        })
    };
    match choice {
        BackendChoice::Sim => Ok(simulated(None)),
        BackendChoice::Cuda => gpu(),
        BackendChoice::Auto => match gpu() {
            Ok(p) => Ok(p),
            Err(e @ (BackendError::NoDriver(_) | BackendError::NoDevice(_))) => {
                Ok(simulated(Some(fallback_reason(&e))))
            }
            Err(e) => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auto_backend_note_does_not_say_use_backend_sim_while_running_on_it() {
        let reason = fallback_reason(&BackendError::NoDriver("libcuda.so.1: not found".into()));
        assert_eq!(reason, "no CUDA driver found (libcuda.so.1: not found)");
        assert!(!reason.contains("--backend sim"));
    }
}
