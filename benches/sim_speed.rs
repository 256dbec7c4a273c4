//! Simulator speed: thread-instructions per second of a compute-heavy kernel on one core.
//!
//! Runs the `busy` kernel of `tests/fixtures/ptx/sim_kernels.ptx` (an integer/float recurrence)
//! under both memory models and prints the interpretation rate. `cargo bench --bench sim_speed`.

use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::backend::{Backend, KernelArg, LaunchConfig};
use std::time::{Duration, Instant};

const KERNELS: &str = include_str!("../tests/fixtures/ptx/sim_kernels.ptx");

fn main() {
    for model in [MemoryModel::Sc, MemoryModel::Weak] {
        let mut cfg = SimConfig::new(model, 1);
        if let Ok(q) = std::env::var("SIM_MAX_QUANTUM") {
            cfg.max_quantum = q.parse().expect("SIM_MAX_QUANTUM");
        }
        let mut b = SimBackend::new(cfg);
        let m = b.load_module(KERNELS).expect("load");
        let (blocks, threads, iters) = (32u32, 128u32, 400i32);
        let out = b.alloc((blocks * threads) as usize * 4).expect("alloc");
        let config = LaunchConfig {
            grid: (blocks, 1, 1),
            block: (threads, 1, 1),
            shared_bytes: 0,
        };
        let mut total = 0u64;
        let start = Instant::now();
        for _ in 0..3 {
            b.launch(
                m,
                "busy",
                &config,
                &[KernelArg::ptr(out), KernelArg::I32(iters)],
            )
            .expect("launch");
            b.synchronize(Duration::from_secs(600)).expect("run");
            total += b.last_kernel_stats().instructions.unwrap_or(0);
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "sim_speed {model:?}: {total} thread-instructions in {secs:.3} s = {:.1} M thread-instructions/s",
            total as f64 / secs / 1e6
        );
    }
}
