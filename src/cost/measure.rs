//! The [`Measurement`] trait: what the cost driver needs from whatever it measures.
//!
//! The driver decides what runs when (warm-up, interleaving, energy windows, idle gaps); a
//! measurement runs one repetition of one variant and reads the meters. Two implementations:
//! [`super::app_measure::AppMeasurement`] (an app on a backend: CUDA events and NVML on a GPU, the
//! simulated duration on the simulator) and [`super::synthetic::Synthetic`] (made-up costs on a
//! virtual clock, so the driver's statistics and stopping rules are tested against a known truth).

use super::{CostError, Variant};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What one repetition of one variant came to.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSample {
    /// Whether the post-condition held (a failed, hung or crashed run is discarded).
    pub passed: bool,
    /// Why it did not pass.
    pub reason: String,
    /// The app's kernel time, summed over its launches, in the measurement's [`TimeMethod`] unit.
    pub duration: f64,
}

/// How runtime is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeMethod {
    /// CUDA events around each launch, summed over the app's launches (seconds).
    CudaEvents,
    /// The simulator's duration: the busiest thread's instruction count, summed over launches.
    SimulatedInstructions,
    /// Made up (tests).
    Synthetic,
}

impl TimeMethod {
    /// The unit of [`RunSample::duration`].
    pub fn unit(self) -> &'static str {
        match self {
            TimeMethod::CudaEvents | TimeMethod::Synthetic => "s",
            TimeMethod::SimulatedInstructions => "instructions",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            TimeMethod::CudaEvents => {
                "kernel time from CUDA events, summed over the app's launches"
            }
            TimeMethod::SimulatedInstructions => {
                "simulated duration: instructions of the busiest thread, summed over the app's \
                 launches (simulator, not a GPU time)"
            }
            TimeMethod::Synthetic => "made-up measurement (test)",
        }
    }
}

/// How energy is measured, or why it is not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "method", content = "detail")]
pub enum EnergyMethod {
    /// NVML's total-energy counter (millijoules), read at the edges of each window.
    Counter,
    /// No counter: NVML's sampled power averaged over each window, times its length (an
    /// estimate: on recent chips the reading is a 1-second moving average).
    SampledPower,
    /// No energy figures, and why (the reason reads as a sentence: "not available on the
    /// simulator").
    NotAvailable(String),
}

impl EnergyMethod {
    pub fn is_available(&self) -> bool {
        !matches!(self, EnergyMethod::NotAvailable(_))
    }
}

impl fmt::Display for EnergyMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnergyMethod::Counter => f.write_str(
                "NVML total-energy counter read at the edges of windows of back-to-back \
                 repetitions (device synchronised at both edges)",
            ),
            EnergyMethod::SampledPower => f.write_str(
                "ESTIMATE: NVML sampled power averaged over each window × its length (no \
                 energy counter on this device)",
            ),
            EnergyMethod::NotAvailable(why) => f.write_str(why),
        }
    }
}

/// One app's variants, runnable and metered.
pub trait Measurement {
    fn time_method(&self) -> TimeMethod;

    fn energy_method(&self) -> EnergyMethod;

    /// Runs repetition `seed` of `variant` once, natively, and waits for it. The same seed gives
    /// every variant the same input.
    fn run(&mut self, variant: Variant, seed: u64) -> Result<RunSample, CostError>;

    /// The energy counter, in millijoules (only with [`EnergyMethod::Counter`]).
    fn energy_mj(&mut self) -> Result<f64, CostError>;

    /// Instantaneous power, in milliwatts (with a counter or sampled power).
    fn power_mw(&mut self) -> Result<f64, CostError>;

    /// Seconds since some fixed point, on the clock the energy windows are timed with.
    fn now(&self) -> f64;

    /// Leaves the device idle for `seconds`.
    fn idle(&mut self, seconds: f64);
}
