//! The harness keeps kernels working: on the simulator, a harnessed kernel (any stress strategy,
//! thread randomisation on or off) writes exactly what the plain kernel writes, and the stressing
//! blocks touch only the scratchpad. Simulator results.

mod common;

use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::backend::words::read_buffer;
use gpuwmm::backend::Device;
use gpuwmm::backend::{KernelArg, LaunchConfig};
use gpuwmm::ptx::passes::harness::{harness, HarnessOptions};
use gpuwmm::ptx::passes::stress::{parse_sequence, StressStrategy};
use gpuwmm::ptx::{print, Module};
use gpuwmm::stressed::{AppLaunch, StressSettings, StressedLauncher};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(60);

fn shapes() -> Module {
    common::ptx_fixture("shapes.ptx")
}

/// A 2-D grid of 3-D blocks whose size is not a multiple of the warp size.
const SHAPES: LaunchConfig = LaunchConfig {
    grid: (3, 2, 1),
    block: (5, 4, 3),
    shared_bytes: 5 * 4 * 3 * 4,
    cooperative: false,
};

fn out_words() -> usize {
    6 * 60
}

fn expected() -> Vec<i32> {
    (0..6u32)
        .flat_map(|bid| (0..60u32).map(move |tid| (bid * 1000 + (59 - tid)) as i32))
        .collect()
}

fn read_i32(sim: &mut SimBackend, buffer: gpuwmm::backend::Buffer) -> Vec<i32> {
    read_buffer(sim, buffer).unwrap()
}

fn run_plain(seed: u64) -> Vec<i32> {
    let mut sim = SimBackend::new(SimConfig::new(MemoryModel::Weak, seed));
    let out = sim.alloc(out_words() * 4).unwrap();
    let module = sim.load_module(&print(&shapes())).unwrap();
    sim.launch(module, "shapes", &SHAPES, &[KernelArg::ptr(out)])
        .unwrap();
    sim.synchronize(DEADLINE).unwrap();
    read_i32(&mut sim, out)
}

fn run_harnessed(stress: StressStrategy, randomise: bool, seed: u64) -> (Vec<i32>, Vec<i32>) {
    let mut sim = SimBackend::new(SimConfig::new(MemoryModel::Weak, seed));
    let out = sim.alloc(out_words() * 4).unwrap();
    let harnessed = harness(&shapes(), "shapes", &HarnessOptions { stress }).unwrap();
    let module = sim.load_module(&print(&harnessed)).unwrap();
    let mut launcher = StressedLauncher::new(&mut sim, 256).unwrap();
    let settings = StressSettings {
        stress_blocks: 2,
        stress_iterations: 20,
        randomise,
        spread: 2,
        patch_words: 32,
        seed,
    };
    let app = AppLaunch {
        module,
        kernel: "shapes",
        config: &SHAPES,
        args: &[KernelArg::ptr(out)],
    };
    launcher.launch(&mut sim, app, &settings).unwrap();
    sim.synchronize(DEADLINE).unwrap();
    let scratch = launcher.scratch();
    (read_i32(&mut sim, out), read_i32(&mut sim, scratch))
}

#[test]
fn plain_shapes_kernel_meets_its_postcondition() {
    assert_eq!(run_plain(1), expected());
}

#[test]
fn harnessed_shapes_kernel_writes_what_the_plain_kernel_writes() {
    let strategies = [
        StressStrategy::None,
        StressStrategy::Sys {
            sequence: parse_sequence("ld st").unwrap(),
        },
        StressStrategy::Sys {
            sequence: parse_sequence("st2 ld").unwrap(),
        },
        StressStrategy::Rand,
        StressStrategy::Cache,
    ];
    for stress in strategies {
        for randomise in [false, true] {
            for seed in 0..3 {
                let (out, _) = run_harnessed(stress.clone(), randomise, seed);
                assert_eq!(
                    out,
                    expected(),
                    "{stress} randomise={randomise} seed={seed}"
                );
            }
        }
    }
}
