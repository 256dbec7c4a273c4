//! NVML power and energy readings for the `cost` driver and `gpuwmm devices`.
//!
//! Why this module exists: kernel time comes from CUDA events, but energy does not; NVML's
//! total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, Volta and later) gives the energy a
//! batch of runs used as the difference of two readings, and instantaneous power
//! (`nvmlDeviceGetPowerUsage`) is the fallback on devices without the counter.
//!
//! `libnvidia-ml.so.1` is loaded at run time by `nvml-wrapper` (through `libloading`), so a machine
//! without an NVIDIA driver builds and runs everything else: [`Nvml::probe`] then answers `None`,
//! and never panics. NVML and CUDA number devices differently (CUDA orders by speed by default and
//! honours `CUDA_VISIBLE_DEVICES`; NVML does neither), so a CUDA device is matched to its NVML
//! device by PCI bus id ([`Nvml::meter_by_pci_bus_id`]).

use std::sync::{Arc, OnceLock};
use thiserror::Error;

/// What can go wrong when reading NVML.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum NvmlError {
    /// The library could not be loaded or initialised (no driver, no permission, ...).
    #[error("NVML unavailable: {0}")]
    Unavailable(String),
    /// No NVML device has this index or PCI bus id.
    #[error("no NVML device {0}")]
    NoDevice(String),
    /// The device does not support this reading.
    #[error("NVML: {what} not supported on this device")]
    NotSupported { what: &'static str },
    /// Any other NVML failure.
    #[error("NVML: {what} failed: {reason}")]
    Query { what: &'static str, reason: String },
}

fn query_error(what: &'static str, e: nvml_wrapper::error::NvmlError) -> NvmlError {
    match e {
        nvml_wrapper::error::NvmlError::NotSupported => NvmlError::NotSupported { what },
        other => NvmlError::Query {
            what,
            reason: other.to_string(),
        },
    }
}

/// An initialised NVML library. Cheap to clone; shut down when the last clone (and every
/// [`PowerMeter`] made from it) is dropped.
#[derive(Clone)]
pub struct Nvml {
    inner: Arc<nvml_wrapper::Nvml>,
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvml").finish_non_exhaustive()
    }
}

impl Nvml {
    /// Loads and initialises NVML, saying why it could not.
    pub fn init() -> Result<Nvml, NvmlError> {
        nvml_wrapper::Nvml::init()
            .map(|inner| Nvml {
                inner: Arc::new(inner),
            })
            .map_err(|e| NvmlError::Unavailable(e.to_string()))
    }

    /// NVML if this machine has it, else `None`; never panics. The first call initialises it,
    /// later calls share that instance (and its answer).
    pub fn probe() -> Option<Nvml> {
        static SHARED: OnceLock<Option<Nvml>> = OnceLock::new();
        SHARED.get_or_init(|| Nvml::init().ok()).clone()
    }

    /// The kernel-mode driver version, e.g. `580.65.06`.
    pub fn driver_version(&self) -> Result<String, NvmlError> {
        self.inner
            .sys_driver_version()
            .map_err(|e| query_error("driver version", e))
    }

    /// Number of devices NVML sees (all of them, whatever `CUDA_VISIBLE_DEVICES` says).
    pub fn device_count(&self) -> Result<u32, NvmlError> {
        self.inner
            .device_count()
            .map_err(|e| query_error("device count", e))
    }

    /// A meter for the device with this NVML index.
    pub fn meter_by_index(&self, index: u32) -> Result<PowerMeter, NvmlError> {
        self.inner
            .device_by_index(index)
            .map_err(|e| NvmlError::NoDevice(format!("with index {index} ({e})")))?;
        Ok(PowerMeter {
            nvml: self.clone(),
            index,
        })
    }

    /// A meter for the device at this PCI bus id, in the form CUDA's `cuDeviceGetPCIBusId`
    /// writes it (`0000:3b:00.0`; NVML accepts that form).
    pub fn meter_by_pci_bus_id(&self, pci_bus_id: &str) -> Result<PowerMeter, NvmlError> {
        let device = self
            .inner
            .device_by_pci_bus_id(pci_bus_id)
            .map_err(|e| NvmlError::NoDevice(format!("at PCI bus id {pci_bus_id} ({e})")))?;
        let index = device.index().map_err(|e| query_error("device index", e))?;
        Ok(PowerMeter {
            nvml: self.clone(),
            index,
        })
    }
}

/// Power and energy readings of one GPU.
#[derive(Debug, Clone)]
pub struct PowerMeter {
    nvml: Nvml,
    index: u32,
}

impl PowerMeter {
    fn device(&self) -> Result<nvml_wrapper::Device<'_>, NvmlError> {
        self.nvml
            .inner
            .device_by_index(self.index)
            .map_err(|e| NvmlError::NoDevice(format!("with index {} ({e})", self.index)))
    }

    /// The device's NVML index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Energy used since the driver was loaded, in millijoules (Volta and later). Subtract two
    /// readings to get the energy of what ran between them.
    pub fn total_energy_mj(&self) -> Result<u64, NvmlError> {
        self.device()?
            .total_energy_consumption()
            .map_err(|e| query_error("total energy counter", e))
    }

    /// Instantaneous board power in milliwatts.
    pub fn power_mw(&self) -> Result<u32, NvmlError> {
        self.device()?
            .power_usage()
            .map_err(|e| query_error("power usage", e))
    }

    /// Whether [`PowerMeter::total_energy_mj`] can be read.
    pub fn supports_energy_counter(&self) -> bool {
        self.total_energy_mj().is_ok()
    }

    /// Whether [`PowerMeter::power_mw`] can be read.
    pub fn supports_power(&self) -> bool {
        self.power_mw().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics_and_agrees_with_itself() {
        let first = Nvml::probe();
        let second = Nvml::probe();
        assert_eq!(first.is_some(), second.is_some());
        match Nvml::init() {
            Ok(nvml) => {
                // A machine with a driver: the counters may or may not be supported, but asking
                // must not fail in any other way than a typed error.
                let count = nvml.device_count().unwrap_or(0);
                for index in 0..count {
                    let meter = nvml.meter_by_index(index).expect("device by index");
                    let _ = meter.supports_energy_counter();
                    let _ = meter.supports_power();
                }
                assert!(nvml.meter_by_pci_bus_id("ffff:ff:1f.7").is_err());
            }
            Err(e) => {
                assert!(matches!(e, NvmlError::Unavailable(_)), "{e}");
                assert!(first.is_none());
            }
        }
    }
}
