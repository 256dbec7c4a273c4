//! Debugging aids left in a kernel, as they often are: `printf` (whose argument buffer is a
//! local depot), a local array indexed at run time, and `assert` with `#include <assert.h>`.
//! Each stopped the app from loading: NVRTC cannot open `<assert.h>`, the PTX printer dropped
//! the `;` of the `.local` depot declaration, and the simulator refused `call vprintf`. The
//! simulator now formats `printf` as CUDA does (`crates/gpuwmm-sim/src/printf/`), and
//! `gpuwmm replay` shows what a run printed. Simulator results.

mod common;

use common::cli::{gpuwmm, ok, words};
use gpuwmm::backend::sim::{SimBackend, SimModel};
use gpuwmm::backend::{Device, KernelArg, LaunchConfig, ModuleId};
use std::path::Path;
use std::time::Duration;

/// The app passes only if its `printf` returns 1, the number of arguments it parsed (CUDA's
/// return value; the simulator used to return 0).
#[test]
fn a_kernel_with_printf_a_local_array_and_assert_runs_and_passes() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    common::assert_fixture_passes_every_run_on_sim("printf-assert", 5);
}

/// A failed assert faults the thread, as on a GPU: every run is a crash that says so.
#[test]
fn a_failed_device_assert_is_a_crash_naming_it() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app_dir = common::fixture_app("printf-assert-fails");
    let line = "check printf-assert-fails --backend sim --runs 3 --seed 1 --journal j.csv";
    let args = [&words(line)[..], &["--app-dir", app_dir.to_str().unwrap()]].concat();
    let out = gpuwmm(&args, dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("pass 0, fail 0, timeout 0, crash 3"),
        "{stdout}"
    );
    assert!(stdout.contains("device-side assert failed"), "{stdout}");
}

/// `tests/fixtures/kernels/printf.cu` compiled with NVRTC and loaded on the simulator (PTX
/// model, seed 1).
fn printf_kernels() -> Option<(SimBackend, ModuleId)> {
    gpuwmm::toolchain::tools_for_tests()?;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels/printf.cu");
    let source = std::fs::read_to_string(&path).unwrap();
    let ptx = gpuwmm::compile::compile_cuda(&path, &source, gpuwmm::toolchain::PORTABLE_ARCH)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut sim = SimBackend::new(SimModel::Ptx.config(1));
    let module = sim.load_module(&ptx).unwrap();
    Some((sim, module))
}

fn launch(
    sim: &mut SimBackend,
    module: ModuleId,
    kernel: &str,
    grid: u32,
    block: u32,
    args: &[KernelArg],
) {
    let config = LaunchConfig::new((grid, 1, 1), (block, 1, 1));
    sim.launch(module, kernel, &config, args).unwrap();
    sim.synchronize(Duration::from_secs(120)).unwrap();
}

#[test]
fn device_printf_prints_ints_doubles_strings_and_pointers_from_every_thread() {
    let (mut sim, module) = common::or_skip!(printf_kernels());
    let name = sim.alloc(7).unwrap();
    sim.copy_in(name, 0, b"gpuwmm\0").unwrap();
    let results = sim.alloc(16).unwrap();
    let args = [
        KernelArg::ptr(name),
        KernelArg::F64(0.25),
        KernelArg::ptr(results),
    ];
    launch(&mut sim, module, "show", 2, 2, &args);
    let mut returned = [0u8; 16];
    sim.copy_out(results, 0, &mut returned).unwrap();
    let returned: Vec<i32> = returned
        .chunks(4)
        .map(|w| i32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    // printf returns the number of arguments it parsed.
    assert_eq!(returned, [11; 4]);
    let p = format!("{:#x}", name.address);
    let expected = [
        format!("t00 +0 0 10000000000 -1099511627776 0.00 0.000000e+00 gpuwmm {p} a|wmm |"),
        format!(
            "t01 -1 4294967295 20000000000 -2199023255552 0.50 2.500000e-01 gpuwmm {p} b|wmm |"
        ),
        format!(
            "t02 -2 4294967294 30000000000 -3298534883328 1.00 5.000000e-01 gpuwmm {p} c|wmm |"
        ),
        format!(
            "t03 -3 4294967293 40000000000 -4398046511104 1.50 7.500000e-01 gpuwmm {p} d|wmm |"
        ),
    ];
    let text = String::from_utf8(sim.take_device_output()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    // The scheduler interleaves the threads; each line is whole.
    lines.sort_unstable();
    assert_eq!(lines, expected, "{text}");
}

/// Each launch prints at most 1 MiB (CUDA's default printf FIFO); the rest is dropped whole,
/// line by line, and one line says how many bytes.
#[test]
fn device_printf_beyond_a_launchs_fifo_is_dropped_and_counted() {
    let (mut sim, module) = common::or_skip!(printf_kernels());
    // 1024 threads print two 1001-byte lines each: 2,050,048 bytes.
    launch(&mut sim, module, "flood", 1, 1024, &[]);
    launch(&mut sim, module, "flood", 1, 1024, &[]);
    let text = String::from_utf8(sim.take_device_output()).unwrap();
    let kept_lines = (1 << 20) / 1001;
    let dropped = (2048 - kept_lines) * 1001;
    let note = format!(
        "[gpuwmm sim: printf buffer full (1024 KiB per launch, CUDA's default \
         cudaLimitPrintfFifoSize): {dropped} bytes of device output dropped]"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2 * (kept_lines + 1));
    // Both launches fill their own FIFO, then tell what they dropped.
    for launch in lines.chunks(kept_lines + 1) {
        let (note_line, printed) = launch.split_last().unwrap();
        assert_eq!(*note_line, note);
        for line in printed {
            let tid: u32 = line.trim_start().parse().unwrap();
            assert!(line.len() == 1000 && tid < 1024, "{line:?}");
        }
    }
}

/// `check` prints no device output (its runs go through a supervisor); `replay` of a simulator
/// run shows what the run's kernels printed.
#[test]
fn replay_of_a_simulator_run_shows_its_printf_output() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app_dir = common::fixture_app("printf-assert");
    let app = ["--app-dir", app_dir.to_str().unwrap()];
    let line = "check printf-assert --backend sim --runs 1 --seed 1 --journal j.csv";
    let checked = ok(&gpuwmm(&[&words(line)[..], &app].concat(), dir.path()));
    assert!(!checked.contains("first input"), "{checked}");
    let replayed = ok(&gpuwmm(
        &[&["replay", "j.csv", "0"][..], &app].concat(),
        dir.path(),
    ));
    let shown = "device output (printf, in the simulator's execution order):\nfirst input 0\n";
    assert!(replayed.contains(shown), "{replayed}");
    assert!(replayed.contains("reproduced: pass"), "{replayed}");
}
