//! Simulator speed: thread-instructions per second on one core, per memory model, measured in
//! one run so that the ratios between models are comparable.
//!
//! Two workloads: `busy` (an integer/float recurrence, almost no memory traffic) and `dot`
//! (NVRTC's dot product: global loads of every element, shared-memory reduction, a global
//! result), both from `tests/fixtures/ptx/`. `cargo bench --bench sim_speed`.

use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::backend::Device;
use gpuwmm::backend::{KernelArg, LaunchConfig};
use std::time::{Duration, Instant};

const KERNELS: &str = include_str!("../tests/fixtures/ptx/sim_kernels.ptx");
const DOT: &str = include_str!("../tests/fixtures/ptx/dot_inlined.ptx");

/// Runs `launches` launches of one workload; returns thread-instructions per second.
fn rate(model: MemoryModel, workload: &str, launches: u32) -> f64 {
    let mut cfg = SimConfig::new(model, 1);
    if let Ok(q) = std::env::var("SIM_MAX_QUANTUM") {
        cfg.max_quantum = q.parse().expect("SIM_MAX_QUANTUM");
    }
    let mut b = SimBackend::new(cfg);
    let (module, kernel, config, args) = match workload {
        "busy" => {
            let m = b.load_module(KERNELS).expect("load");
            let out = b.alloc(32 * 128 * 4).expect("alloc");
            let args = vec![KernelArg::ptr(out), KernelArg::I32(400)];
            (m, "busy", launch(32, 128, 0), args)
        }
        _ => {
            let m = b.load_module(DOT).expect("load");
            let n = 1 << 16;
            let (x, y, out) = (
                b.alloc(n * 4).expect("alloc"),
                b.alloc(n * 4).expect("alloc"),
                b.alloc(4096).expect("alloc"),
            );
            let ones: Vec<u8> = (0..n).flat_map(|_| 1f32.to_le_bytes()).collect();
            b.copy_in(x, 0, &ones).expect("copy");
            b.copy_in(y, 0, &ones).expect("copy");
            let args = vec![
                KernelArg::ptr(x),
                KernelArg::ptr(y),
                KernelArg::ptr(out),
                KernelArg::U32(n as u32),
            ];
            (m, "dot", launch(1, 16, 64), args)
        }
    };
    let mut total = 0u64;
    let start = Instant::now();
    for _ in 0..launches {
        b.launch(module, kernel, &config, &args).expect("launch");
        b.synchronize(Duration::from_secs(600)).expect("run");
        total += b.last_kernel_stats().instructions.unwrap_or(0);
    }
    total as f64 / start.elapsed().as_secs_f64()
}

fn launch(blocks: u32, threads: u32, shared_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (blocks, 1, 1),
        block: (threads, 1, 1),
        shared_bytes,
        cooperative: false,
    }
}

fn main() {
    // `cargo bench --bench sim_speed -- dot ptx` measures only what the words name (a
    // workload, a model), for profiling; the ratio to sc is then left out when sc is not named.
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.to_lowercase())
        .collect();
    let named = |what: &str, all: &[&str]| {
        !all.iter().any(|w| words.iter().any(|x| x == w)) || words.iter().any(|x| x == what)
    };
    for workload in ["busy", "dot"] {
        if !named(workload, &["busy", "dot"]) {
            continue;
        }
        let launches = if workload == "busy" { 3 } else { 20 };
        let models = ["ptx", "sc", "weak"];
        let sc = match named("sc", &models) {
            true => rate(MemoryModel::Sc, workload, launches),
            false => f64::NAN,
        };
        for model in [MemoryModel::Ptx, MemoryModel::Sc, MemoryModel::Weak] {
            if !named(&format!("{model:?}").to_lowercase(), &models) {
                continue;
            }
            let r = if model == MemoryModel::Sc {
                sc
            } else {
                rate(model, workload, launches)
            };
            println!(
                "sim_speed {workload} {model:?}: {:.1} M thread-instructions/s ({:.2} x sc)",
                r / 1e6,
                r / sc
            );
        }
    }
}
