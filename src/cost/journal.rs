//! The rows of `cost.csv` (one per run, appended and flushed as it ends) and its sidecar.
//!
//! A timing run is a row on its own; the runs of an energy window are written together when the
//! window closes, each carrying the window's energy per repetition, so an interrupted window is
//! simply measured again on `--resume`. The sidecar ([`CostMeta`]) records what was measured and
//! how, so a resumed measurement continues the same one.

use super::measure::{EnergyMethod, TimeMethod};
use super::variant::{EmpFences, Variant};
use crate::check::Target;
use crate::ptx::passes::fences::FenceKind;
use serde::{Deserialize, Serialize};

/// Which part of the measurement a row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Interleaved runs (no, emp, cons, no, …) for runtime.
    Time,
    /// Back-to-back runs of one variant inside an energy window.
    Energy,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostRow {
    pub app: String,
    pub variant: Variant,
    pub phase: Phase,
    /// Time phase: the repetition (the same input for every variant). Energy phase: the run's
    /// number inside its window.
    pub repetition: u64,
    /// Energy phase: the window (numbered per app and variant, from 0).
    pub window: Option<u32>,
    pub seed: u64,
    pub passed: bool,
    pub reason: String,
    /// Kernel time in the measurement's unit (seconds, or simulated instructions).
    pub duration: f64,
    /// Seconds this app's timing phase had run when the row was written (continued across
    /// resumes; what `--duration` counts).
    pub elapsed_s: f64,
    /// Energy phase: the window's energy per passing repetition, millijoules (gross).
    pub energy_mj: Option<f64>,
    /// Energy phase: idle power measured just before the window, milliwatts.
    pub idle_mw: Option<f64>,
    /// Energy phase: the window's length, seconds.
    pub window_s: Option<f64>,
}

/// How the energy windows are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowPlan {
    /// Windows per variant.
    pub windows: u32,
    /// A window lasts at least this long…
    pub min_seconds: f64,
    /// …and holds at least this many repetitions.
    pub min_repetitions: u64,
    /// Idle gaps before each window, drawn uniformly from this range, seconds.
    pub gap_seconds: (f64, f64),
}

impl Default for WindowPlan {
    fn default() -> WindowPlan {
        WindowPlan {
            windows: 5,
            min_seconds: 5.0,
            min_repetitions: 32,
            gap_seconds: (1.0, 3.0),
        }
    }
}

/// One app's part of the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppPlan {
    pub target: Target,
    /// The fences of `emp`, when measured.
    pub emp: Option<EmpFences>,
    /// The kind of every `cons` fence (and `emp`'s where the result names none).
    pub fence_kind: FenceKind,
    /// Candidate sites of `cons` (one per memory access).
    pub cons_fences: usize,
    /// The app's sources and PTX, hashed (absent in journals from before they were recorded):
    /// a resume compares them (see [`crate::job::settings`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_hash: Option<crate::apps::hash::AppHash>,
}

/// The sidecar of `cost.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostMeta {
    pub tool_version: String,
    pub started: String,
    pub provenance: String,
    pub seed: u64,
    pub variants: Vec<Variant>,
    pub apps: Vec<AppPlan>,
    pub warmup: u64,
    pub time_method: TimeMethod,
    pub energy_method: EnergyMethod,
    pub windows: WindowPlan,
    /// When each app's timing stops.
    pub stop: crate::check::Stop,
    pub target_ci: Option<f64>,
}

/// A sidecar for driver tests: one made-up app measured as `plan` says.
#[cfg(test)]
pub(crate) fn tests_meta(plan: &super::CostPlan) -> CostMeta {
    let mut target = crate::check::spec::test_target();
    target.app = plan.app.clone();
    CostMeta {
        tool_version: "test".into(),
        started: "now".into(),
        provenance: "made-up".into(),
        seed: plan.seed,
        variants: plan.variants.clone(),
        apps: vec![AppPlan {
            target,
            emp: None,
            fence_kind: FenceKind::ScGpu,
            cons_fences: 0,
            app_hash: None,
        }],
        warmup: plan.warmup,
        time_method: TimeMethod::Synthetic,
        energy_method: EnergyMethod::Counter,
        windows: plan.windows,
        stop: plan.stop,
        target_ci: plan.target_ci,
    }
}
