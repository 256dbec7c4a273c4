//! Every application at its GPU size on a real GPU (skipped where there is no CUDA driver; set
//! `GPUWMM_REQUIRE_GPU=1` on a GPU machine to make a skip a failure). The apps run natively (no
//! stress), so the fenceless ones usually pass too; with a fence after every access, every app
//! must pass, and no app may hang or fault.
//! On a GPU: `GPUWMM_REQUIRE_GPU=1 cargo test --release --test apps_gpu -- --nocapture`.

mod common;

use common::gpu_with_tools;

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

/// Set in the child process that runs one app for [`every_app_runs_on_a_gpu_at_both_sizes`].
const ONE_APP: &str = "GPUWMM_TEST_ONE_APP";

/// Each app runs in a child process (this test binary, this test alone, [`ONE_APP`] naming the
/// app): a fence-less app may fault through its own race, and on an H100 a fault ended CUDA for
/// the whole process, so one app's fault must not take the next app's GPU away.
#[test]
fn every_app_runs_on_a_gpu_at_both_sizes() {
    if let Some(name) = std::env::var_os(ONE_APP) {
        return run_one_app(&name.to_string_lossy());
    }
    common::or_skip!(gpu_with_tools());
    for app in builtin_apps().unwrap() {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "every_app_runs_on_a_gpu_at_both_sizes",
                "--nocapture",
            ])
            .env(ONE_APP, app.name())
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&child.stdout);
        println!("{output}");
        assert!(
            child.status.success() && output.contains("1 passed"),
            "{}: {output}\n{}",
            app.name(),
            String::from_utf8_lossy(&child.stderr)
        );
    }
}

/// One app, fenced first (a fence after every access: it must pass at every size and seed),
/// then plain (counted; a fault there ends the app's runs, since it ends CUDA for the process).
fn run_one_app(name: &str) {
    let mut backend = gpu_with_tools().expect("the parent found a GPU");
    let app = builtin_apps()
        .unwrap()
        .into_iter()
        .find(|a| a.name() == name)
        .unwrap();
    let plain = app.module(DEFAULT_ARCH, Size::Sim).unwrap();
    // The stand-in driver interprets every thread: GPU-sized inputs would take minutes.
    let sizes: &[Size] = if common::is_standin(&backend) {
        &[Size::Sim]
    } else {
        &Size::ALL
    };
    for (label, module) in [
        ("fenced", fence_everything(plain.clone())),
        ("plain", plain),
    ] {
        let loaded = LoadedApp::load(app.as_ref(), &mut backend, &module, DEFAULT_ARCH, Size::Sim)
            .unwrap_or_else(|e| panic!("{name} {label}: {e}"));
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
                // Any other error, and any error of a fenced app, is a failure of the test.
                let passed = match loaded.run(&mut backend, &mut DirectLauncher, &options) {
                    Ok(verdict) => verdict.is_pass(),
                    Err(AppError::Backend {
                        error: BackendError::Fault(e),
                        ..
                    }) if label == "plain" => {
                        println!("{name} plain {size} seed {seed}: fault ({e}); CUDA is gone for this process, its other runs are not made");
                        return;
                    }
                    Err(e) => panic!("{name} {label} {size}: {e}"),
                };
                if !passed {
                    failures += 1;
                    println!("{name} {label} {size} seed {seed}: failed");
                }
            }
            println!("{name} {label} {size}: {failures} / 5 failed");
            if label == "fenced" {
                assert_eq!(failures, 0, "{name} fenced at size {size}");
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
