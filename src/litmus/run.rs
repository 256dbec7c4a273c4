//! Running a litmus test on a backend: allocate, launch repeatedly, collect the histogram.

use super::{Histogram, LitmusTest, KERNEL};
use crate::backend::words::read_buffer;
use crate::backend::{Backend, KernelArg, LaunchConfig, Result};
use crate::check::spec::run_seed;
use std::time::Duration;

/// How much to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LitmusRun {
    /// Launches.
    pub iterations: u64,
    /// Test instances per launch (each in its own pair of blocks and memory).
    pub instances: u32,
    /// Threads per block (only thread 0 of each block takes part).
    pub block_threads: u32,
    /// Deadline of each launch.
    pub deadline: Duration,
}

impl Default for LitmusRun {
    fn default() -> LitmusRun {
        LitmusRun {
            iterations: 1000,
            instances: 1,
            block_threads: 1,
            deadline: Duration::from_secs(10),
        }
    }
}

/// Runs `test` `run.iterations` times; `on_launch` sees the running histogram after each launch
/// (for progress bars). The backend is reseeded before each launch with [`run_seed`] of `seed`
/// and the launch number, so that neighbouring seeds share no launch.
pub fn run_litmus(
    backend: &mut dyn Backend,
    test: &LitmusTest,
    run: &LitmusRun,
    seed: u64,
    mut on_launch: impl FnMut(&Histogram),
) -> Result<Histogram> {
    let words = (test.stride_words() * run.instances) as usize;
    let mem = backend.alloc(words * 4)?;
    let out = backend.alloc(run.instances as usize * 8)?;
    let module = backend.load_module(&test.ptx())?;
    let config = LaunchConfig::new((2 * run.instances, 1, 1), (run.block_threads, 1, 1));
    let args = [KernelArg::ptr(mem), KernelArg::ptr(out)];
    let mut histogram = Histogram::default();
    for launch in 0..run.iterations {
        backend.memset(mem, 0)?;
        backend.memset(out, 0)?;
        backend.reseed(run_seed(seed, launch));
        backend.launch(module, KERNEL, &config, &args)?;
        backend.synchronize(run.deadline)?;
        histogram.add(&read_buffer(backend, out)?);
        on_launch(&histogram);
    }
    backend.free(mem)?;
    backend.free(out)?;
    Ok(histogram)
}
