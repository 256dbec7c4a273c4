//! Every application at its GPU size on a real GPU (skipped where there is no CUDA driver; set
//! `GPUWMM_REQUIRE_GPU=1` on a GPU machine to make a skip a failure). The apps run natively (no
//! stress), so the fenceless ones usually pass too; with a fence after every access, every app
//! must pass, and no app may hang or fault.
//! On a GPU: `GPUWMM_REQUIRE_GPU=1 cargo test --release --test apps_gpu -- --nocapture`.

mod common;

use common::{gpu, gpu_with_tools};

use gpuwmm::apps::{
    builtin_apps, AppError, DirectLauncher, LoadedApp, RunOptions, Size, DEFAULT_ARCH,
};
use gpuwmm::backend::BackendError;
use gpuwmm::ptx::passes::fences::{fence_sites, insert_fences, FenceKind, Granularity};
use gpuwmm::ptx::Module;
use std::time::Duration;

fn fence_everything(module: Module) -> Module {
    let sites = fence_sites(&module, Granularity::Instruction);
    let all: Vec<_> = sites.iter().collect();
    insert_fences(&module, &all, FenceKind::ScGpu)
}

#[test]
fn every_app_runs_on_a_gpu_at_both_sizes() {
    let mut backend = common::or_skip!(gpu_with_tools());
    for app in builtin_apps().unwrap() {
        let plain = app.module(DEFAULT_ARCH, Size::Sim).unwrap();
        for (label, module) in [
            ("plain", plain.clone()),
            ("fenced", fence_everything(plain)),
        ] {
            let load = |backend: &mut dyn gpuwmm::backend::Backend| {
                LoadedApp::load(app.as_ref(), backend, &module, DEFAULT_ARCH, Size::Sim)
                    .unwrap_or_else(|e| panic!("{} {label}: {e}", app.name()))
            };
            let mut loaded = load(&mut backend);
            // The stand-in driver interprets every thread: GPU-sized inputs would take minutes.
            let sizes: &[Size] = if common::is_standin(&backend) {
                &[Size::Sim]
            } else {
                &Size::ALL
            };
            for &size in sizes {
                let mut failures = 0;
                for seed in 0..5 {
                    let options = RunOptions {
                        size,
                        input_seed: seed,
                        deadline: Duration::from_secs(20),
                    };
                    // A fence-less app may crash through its own race (a store through an index
                    // read stale faults): `check` counts that as a crash, and so does this test.
                    // Any other error, and any error of a fenced app, is a failure of the test. A fault
                    // leaves the context unusable, as on a GPU, so the next seed gets a new one.
                    let passed = match loaded.run(&mut backend, &mut DirectLauncher, &options) {
                        Ok(verdict) => verdict.is_pass(),
                        Err(AppError::Backend {
                            error: BackendError::Fault(_),
                            ..
                        }) if label == "plain" => {
                            // A fault leaves the context unusable, as on a GPU: a new one.
                            backend = gpu().expect("a new context after a kernel fault");
                            loaded = load(&mut backend);
                            false
                        }
                        Err(e) => panic!("{} {label} {size}: {e}", app.name()),
                    };
                    if !passed {
                        failures += 1;
                        println!("{} {label} {size} seed {seed}: failed", app.name());
                    }
                }
                println!("{} {label} {size}: {failures} / 5 failed", app.name());
                if label == "fenced" {
                    assert_eq!(failures, 0, "{} fenced at size {size}", app.name());
                }
            }
        }
    }
}

/// The check kernel reads the app's `__device__` variable through the driver
/// (`cuModuleGetGlobal`): `devcount` passes and `devcount-short` (one block too few) fails, at
/// the sim size on the stand-in, at the GPU size on a GPU. Waits for validation on a GPU.
#[test]
fn a_check_kernel_reads_the_apps_device_variable_on_a_gpu() {
    let mut backend = common::or_skip!(gpu_with_tools());
    let size = if common::is_standin(&backend) {
        Size::Sim
    } else {
        Size::Gpu
    };
    let right = common::run_fixture_app(&mut backend, "devcount", size, 3);
    assert!(right.iter().all(|v| v.is_pass()), "{right:?}");
    let short = common::run_fixture_app(&mut backend, "devcount-short", size, 3);
    assert!(short.iter().all(|v| !v.is_pass()), "{short:?}");
}
