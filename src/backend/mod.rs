//! The `Backend` trait: everything a driver needs from a GPU, and nothing more.
//!
//! Drivers (`litmus`, `check`, `harden`, `tune`, `cost`) talk only to this trait, so the same code
//! runs on a real GPU (`cuda`, on cudarc) and on the simulator (`sim`, a PTX interpreter with a
//! weak-memory model) that lets every driver run in CI without a GPU.
//!
//! - [`cuda`]: the real-GPU implementation (driver API through cudarc, loaded at run time);
//! - [`nvml`]: power and energy readings of a GPU, for `cost` and `gpuwmm devices`;
//! - [`words`]: host values and their byte images in device memory.

pub mod cuda;
pub mod nvml;

pub mod select;
pub mod words;

/// The simulator (`gpuwmm-sim`), a [`Backend`] without NVML.
pub use gpuwmm_sim as sim;
pub use gpuwmm_sim::device::{
    BackendError, BackendKind, Buffer, Device, DeviceInfo, Dim3, KernelArg, KernelLaunch,
    KernelStats, LaunchConfig, ModuleId, Result,
};

/// A GPU, real or simulated, as drivers see it: the [`Device`] interface, plus the NVML power
/// and energy readings that only a real GPU has.
pub trait Backend: Device {
    /// NVML power and energy readings of this device, where NVML is present and matched it
    /// (the `cost` driver's energy). The simulator has none.
    fn power_meter(&self) -> Option<nvml::PowerMeter> {
        None
    }
}

impl Backend for sim::SimBackend {}
