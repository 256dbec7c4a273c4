//! `gpuwmm devices`: the GPUs (if a driver answers) and the simulator.

use super::CmdResult;
use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::backend::{cuda, Device, DeviceInfo};

pub fn run() -> CmdResult {
    match cuda::list_devices() {
        Ok(gpus) if gpus.is_empty() => outln!("cuda: the driver answers but reports no GPU")?,
        Ok(gpus) => {
            for (ordinal, gpu) in gpus.iter().enumerate() {
                print_device(&format!("cuda:{ordinal}"), gpu)?;
            }
        }
        Err(e) => outln!("cuda: none ({e})")?,
    }
    for model in [MemoryModel::Ptx, MemoryModel::Sc, MemoryModel::Weak] {
        let sim = SimBackend::new(SimConfig::new(model, 0));
        let name = match model {
            MemoryModel::Ptx => "sim (--sim-model ptx, the default)",
            MemoryModel::Weak => "sim (--sim-model weak)",
            MemoryModel::Sc => "sim (--sim-model sc)",
        };
        print_device(name, sim.info())?;
    }
    Ok(())
}

fn print_device(id: &str, d: &DeviceInfo) -> std::io::Result<()> {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    outln!("{id}: {}", d.name)?;
    outln!(
        "    compute capability {}.{}, {} SMs, {} threads/SM, {} resident threads, L2 {} KiB",
        d.compute_capability.0,
        d.compute_capability.1,
        d.sm_count,
        d.max_threads_per_sm,
        d.max_resident_threads,
        d.l2_bytes / 1024
    )?;
    outln!(
        "    NVML energy counter: {}, NVML power: {}, driver: {}",
        yes_no(d.energy_counter),
        yes_no(d.power_readable),
        d.driver
    )
}
