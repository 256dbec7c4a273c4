//! The `cuda` backend against a real driver, and its behaviour where there is none.
//!
//! `open_is_a_typed_error_or_a_device` runs everywhere and checks that a missing driver is a typed
//! error, never a panic. The other tests need a GPU: each starts with [`gpu`], which prints
//! `skipped <test>: no CUDA driver …` and returns early where there is none (set
//! `GPUWMM_REQUIRE_GPU=1` on a GPU machine to turn a skip into a failure). On a GPU:
//! `GPUWMM_REQUIRE_GPU=1 cargo test --test cuda_backend -- --nocapture`.

mod common;

use common::gpu;

use gpuwmm::backend::cuda::{list_devices, probe_driver, CudaBackend};
use gpuwmm::backend::nvml::Nvml;
use gpuwmm::backend::words::from_bytes;
use gpuwmm::backend::Device;
use gpuwmm::backend::{BackendError, KernelArg, LaunchConfig};
use gpuwmm::litmus::file::ast::LitmusFile;
use gpuwmm::litmus::file::expect::{Expectations, Finding, Verdict};
use gpuwmm::litmus::file::parse::parse_file;
use gpuwmm::litmus::file::run::{run_litmus_file, FileSettings};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Hand-written PTX (ISA 8.8, sm_70, as NVRTC 12.9 emits for our kernels): `add_one` adds 1 to
/// each of `n` u32; `spin` waits for a nonzero flag (volatile loads), giving up after
/// `bailout_ns` so a test never leaves the GPU busy for long; `store_to` stores to any address.
const KERNELS: &str = include_str!("fixtures/ptx/small/add_one_spin_store.ptx");

/// Not PTX the JIT accepts: an unknown instruction and an undeclared register.
const MALFORMED: &str = r#"
.version 8.8
.target sm_70
.address_size 64

.visible .entry broken(
    .param .u64 broken_data
)
{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [broken_data];
    frobnicate.u32 %rd1, %rd9;
    ret;
}
"#;

const GENEROUS: Duration = Duration::from_secs(20);

fn one_d(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig::new((blocks, 1, 1), (threads, 1, 1))
}

#[test]
fn open_is_a_typed_error_or_a_device() {
    let opened = std::panic::catch_unwind(|| CudaBackend::open(0).map(|b| b.info().clone()))
        .expect("CudaBackend::open must not panic");
    let probed = std::panic::catch_unwind(probe_driver).expect("probe_driver must not panic");
    let listed = std::panic::catch_unwind(list_devices).expect("list_devices must not panic");
    match opened {
        Ok(info) => {
            println!("device 0: {info:?}");
            assert!(info.sm_count > 0 && info.max_threads_per_sm > 0);
            assert_eq!(
                info.max_resident_threads,
                info.sm_count * info.max_threads_per_sm
            );
            assert!(info.l2_bytes > 0);
            assert!(info.compute_capability.0 >= 7, "{info:?}");
            let version = probed.expect("a driver that opens a device has a version");
            assert_eq!(info.driver, version);
            let devices = listed.expect("list_devices");
            assert_eq!(devices.first().map(|d| &d.name), Some(&info.name));
        }
        Err(BackendError::NoDriver(reason)) => {
            println!("no driver: {reason}");
            assert!(
                matches!(listed, Err(BackendError::NoDriver(_))),
                "{listed:?}"
            );
            match probed {
                // No library: the message names the one looked for, so a user knows what is
                // missing.
                Err(BackendError::NoDriver(why)) => assert!(why.contains("libcuda"), "{why}"),
                Err(e) => panic!("probe_driver: unexpected error {e}"),
                // A library that loads but whose cuInit fails (a stub, no device nodes).
                Ok(version) => println!("libcuda {version} loads, but: {reason}"),
            }
        }
        Err(BackendError::NoDevice(reason)) => println!("driver, but no device: {reason}"),
        Err(e) => panic!("unexpected error: {e}"),
    }
    // Asking again gives the same answer (the probe is cached) and still does not panic.
    let again = std::panic::catch_unwind(|| CudaBackend::open(0).is_ok()).unwrap();
    let listed_some = list_devices().map(|d| !d.is_empty()).unwrap_or(false);
    assert_eq!(again, listed_some);
}

#[test]
fn an_absent_ordinal_is_no_device() {
    match CudaBackend::open(1 << 20) {
        Err(BackendError::NoDevice(_) | BackendError::NoDriver(_)) => {}
        other => panic!("expected NoDevice or NoDriver, got {other:?}"),
    }
}

#[test]
fn nvml_probe_never_panics() {
    let nvml = std::panic::catch_unwind(Nvml::probe).expect("Nvml::probe must not panic");
    if let Some(nvml) = nvml {
        println!("NVML driver {:?}", nvml.driver_version());
    } else {
        println!("no NVML");
    }
}

#[test]
fn alloc_copy_round_trip() {
    let mut b = common::or_skip!(gpu());
    let buf = b.alloc(1000).unwrap();
    assert_eq!(buf.bytes, 1000);
    assert_ne!(buf.address, 0);
    let mut out = vec![0xffu8; 1000];
    b.copy_out(buf, 0, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 0), "alloc must zero");

    let pattern: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
    b.copy_in(buf, 100, &pattern).unwrap();
    b.copy_out(buf, 0, &mut out).unwrap();
    assert!(out[..100].iter().all(|&x| x == 0));
    assert_eq!(&out[100..300], &pattern[..]);
    assert!(out[300..].iter().all(|&x| x == 0));

    let mut part = vec![0u8; 50];
    b.copy_out(buf, 120, &mut part).unwrap();
    assert_eq!(&part[..], &pattern[20..70]);

    b.memset(buf, 0xab).unwrap();
    b.copy_out(buf, 0, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 0xab));

    assert!(matches!(
        b.copy_in(buf, 990, &[0u8; 11]),
        Err(BackendError::BadLaunch(_))
    ));
    assert!(matches!(
        b.copy_out(buf, usize::MAX, &mut [0u8; 2]),
        Err(BackendError::BadLaunch(_))
    ));

    let empty = b.alloc(0).unwrap();
    assert_eq!(empty.bytes, 0);
    b.free(empty).unwrap();
    b.free(buf).unwrap();
    assert!(b.free(buf).is_err(), "double free must be refused");
    assert!(b.copy_out(buf, 0, &mut out).is_err(), "use after free");
}

#[test]
fn add_one_kernel() {
    let mut b = common::or_skip!(gpu());
    let module = b.load_module(KERNELS).unwrap();
    println!("JIT info log: {}", b.jit_info_log());
    let n: u32 = 100_000;
    let input: Vec<u8> = (0..n).flat_map(|i| (i * 3).to_le_bytes()).collect();
    let data = b.alloc(input.len()).unwrap();
    b.copy_in(data, 0, &input).unwrap();
    let args = [KernelArg::ptr(data), KernelArg::U32(n)];
    b.launch(module, "add_one", &one_d(n.div_ceil(256), 256), &args)
        .unwrap();
    b.synchronize(GENEROUS).unwrap();
    let mut out = vec![0u8; input.len()];
    b.copy_out(data, 0, &mut out).unwrap();
    let values = from_bytes::<u32>(&out);
    assert!(values
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u32 * 3 + 1));

    // Twice more, without a synchronize in between: launches are stream-ordered.
    b.launch(module, "add_one", &one_d(n.div_ceil(256), 256), &args)
        .unwrap();
    b.launch(module, "add_one", &one_d(n.div_ceil(256), 256), &args)
        .unwrap();
    b.synchronize(GENEROUS).unwrap();
    b.copy_out(data, 0, &mut out).unwrap();
    assert!(from_bytes::<u32>(&out)
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u32 * 3 + 3));
}

#[test]
fn kernel_time_is_measured() {
    let mut b = common::or_skip!(gpu());
    assert_eq!(b.last_kernel_stats().time, Duration::ZERO);
    let module = b.load_module(KERNELS).unwrap();
    // 4M threads on a GPU; the stand-in interprets every thread, so it gets 16K.
    let n: u32 = if common::is_standin(&b) {
        1 << 14
    } else {
        1 << 22
    };
    let data = b.alloc(n as usize * 4).unwrap();
    b.launch(
        module,
        "add_one",
        &one_d(n / 256, 256),
        &[KernelArg::ptr(data), KernelArg::U32(n)],
    )
    .unwrap();
    b.synchronize(GENEROUS).unwrap();
    let stats = b.last_kernel_stats();
    println!("add_one over {n} words: {:?}", stats.time);
    assert!(stats.time > Duration::ZERO);
    assert!(stats.time < GENEROUS);
    assert_eq!(stats.instructions, None);
}

#[test]
fn malformed_ptx_gives_the_jit_log() {
    let mut b = common::or_skip!(gpu());
    match b.load_module(MALFORMED) {
        Err(BackendError::Jit { log }) => {
            println!("JIT log:\n{log}");
            assert!(log.to_lowercase().contains("error"), "{log}");
            // The driver's own log, not only the error code: it names the bad line or token.
            assert!(
                log.contains("frobnicate") || log.contains("line") || log.contains("%rd9"),
                "{log}"
            );
        }
        other => panic!("expected a JIT error, got {other:?}"),
    }
    // The backend is still usable after a JIT failure.
    assert!(b.load_module(KERNELS).is_ok());
    assert!(matches!(
        b.load_module("nul\0byte"),
        Err(BackendError::Jit { .. })
    ));
}

#[test]
fn launch_errors_are_typed() {
    let mut b = common::or_skip!(gpu());
    let module = b.load_module(KERNELS).unwrap();
    let data = b.alloc(64).unwrap();
    let cfg = one_d(1, 32);
    assert!(matches!(
        b.launch(module, "no_such_kernel", &cfg, &[]),
        Err(BackendError::NoKernel(name)) if name == "no_such_kernel"
    ));
    let (ptr, n) = (KernelArg::ptr(data), KernelArg::U32(16));
    let bad_launches = [
        (cfg, vec![ptr]),                     // an argument missing
        (cfg, vec![ptr, KernelArg::U64(16)]), // an argument of the wrong size
        (one_d(0, 32), vec![ptr, n]),         // an empty grid
        (one_d(1, 4096), vec![ptr, n]),       // too many threads per block
    ];
    for (config, args) in &bad_launches {
        assert!(
            matches!(
                b.launch(module, "add_one", config, args),
                Err(BackendError::BadLaunch(_))
            ),
            "{config:?} {args:?}"
        );
    }
    // None of that broke the context.
    b.launch(
        module,
        "add_one",
        &cfg,
        &[KernelArg::ptr(data), KernelArg::U32(16)],
    )
    .unwrap();
    b.synchronize(GENEROUS).unwrap();
}

#[test]
fn a_spinning_kernel_times_out() {
    let mut b = common::or_skip!(gpu());
    let module = b.load_module(KERNELS).unwrap();
    let flag = b.alloc(4).unwrap();
    let bailout_ns = 10_000_000_000u64;
    b.launch(
        module,
        "spin",
        &one_d(1, 1),
        &[KernelArg::ptr(flag), KernelArg::U64(bailout_ns)],
    )
    .unwrap();
    let deadline = Duration::from_millis(300);
    let begun = Instant::now();
    let result = b.synchronize(deadline);
    let waited = begun.elapsed();
    println!("synchronize returned {result:?} after {waited:?}");
    assert!(matches!(result, Err(BackendError::Timeout(d)) if d == deadline));
    assert!(result.as_ref().unwrap_err().is_timeout());
    assert!(waited >= deadline, "{waited:?}");
    assert!(waited < deadline + Duration::from_millis(500), "{waited:?}");
    // While the kernel runs, the backend refuses work instead of queueing it behind the hang.
    assert!(b.alloc(4).is_err());
    // Dropping must not wait for the kernel.
    let begun = Instant::now();
    drop(b);
    assert!(
        begun.elapsed() < Duration::from_secs(2),
        "{:?}",
        begun.elapsed()
    );
}

/// Set in the child process that [`an_out_of_bounds_store_is_a_fault`] starts to fault in.
const FAULT_CHILD: &str = "GPUWMM_TEST_FAULT_CHILD";

/// A kernel fault is sticky, and it is the whole process's: on an H100 (driver 580) it left
/// every context of the process failing, new ones too, and the tests running beside this one
/// failed with it. So the fault happens in a child process (this test binary, running this test
/// alone with [`FAULT_CHILD`] set), and this process, which never faulted, then opens a healthy
/// backend. Regression: it faulted in the test process, and six other tests failed.
#[test]
fn an_out_of_bounds_store_is_a_fault() {
    if std::env::var_os(FAULT_CHILD).is_some() {
        return fault_in_this_process();
    }
    common::or_skip!(gpu());
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_out_of_bounds_store_is_a_fault",
            "--nocapture",
        ])
        .env(FAULT_CHILD, "1")
        .output()
        .unwrap();
    let output = String::from_utf8_lossy(&child.stdout);
    println!("{output}");
    assert!(
        child.status.success(),
        "{output}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(output.contains("fault: CUDA_ERROR_"), "{output}");
    assert!(
        output.contains("1 passed"),
        "the child ran the test: {output}"
    );
    let mut fresh = gpu().unwrap();
    let buf = fresh.alloc(16).unwrap();
    fresh.copy_in(buf, 0, &[1u8; 16]).unwrap();
}

/// The child's side: the fault, its stickiness, and no healthy backend in this process after it.
fn fault_in_this_process() {
    let mut b = gpu().unwrap();
    let module = b.load_module(KERNELS).unwrap();
    b.launch(module, "store_to", &one_d(1, 1), &[KernelArg::U64(0)])
        .unwrap();
    match b.synchronize(GENEROUS) {
        Err(BackendError::Fault(message)) => {
            println!("fault: {message}");
            assert!(message.starts_with("CUDA_ERROR_"), "{message}");
        }
        other => panic!("expected a fault, got {other:?}"),
    }
    assert!(matches!(b.alloc(4), Err(BackendError::Fault(_))));
    assert!(matches!(
        b.synchronize(GENEROUS),
        Err(BackendError::Fault(_))
    ));
    // Dropping the dead backend must still work; a new one in this process is no cure.
    drop(b);
    match CudaBackend::open(0) {
        Err(BackendError::Fault(message)) => println!("a new backend here: {message}"),
        other => panic!("expected the process's fault, got {other:?}"),
    }
}

#[test]
fn device_info_matches_nvml_when_present() {
    let b = common::or_skip!(gpu());
    let info = b.info();
    println!("{info:?}, PCI {}", b.pci_bus_id());
    match b.power_meter() {
        Some(meter) => {
            assert_eq!(info.energy_counter, meter.supports_energy_counter());
            if info.energy_counter {
                let first = meter.total_energy_mj().unwrap();
                std::thread::sleep(Duration::from_millis(50));
                assert!(meter.total_energy_mj().unwrap() >= first);
            }
            if info.power_readable {
                println!("power: {} mW", meter.power_mw().unwrap());
            }
        }
        None => {
            assert!(!info.energy_counter && !info.power_readable);
        }
    }
}

/// Regression (stand-in driver): NVRTC opens `libcuda.so.1` itself and calls
/// `cuGetExportTable`; the first stand-in lacked it, so compiling CUDA after the backend had
/// loaded the driver crashed the process inside `nvrtcCompileProgram`.
#[test]
fn nvrtc_compiles_after_the_backend_loaded_the_driver() {
    let mut b = common::or_skip!(gpu());
    let tools = common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let module = common::compile_corpus(&tools, "apps/cbe-dot/kernel.cu");
    let ptx = gpuwmm::ptx::print(&module);
    assert!(b.load_module(&ptx).is_ok());
}

/// The suite's litmus test `name` (in `tests/litmus/`): its path and the test parsed.
fn suite_litmus_test(name: &str) -> (PathBuf, LitmusFile) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/litmus")
        .join(name);
    let test = parse_file(&path).unwrap();
    (path, test)
}

/// On a GPU, a proved deadlock was launched anyway: each launch hung for the deadline and cost
/// the context (a new one had to be opened for the next test), and could show nothing the
/// proof does not. It is now not launched there, and still compares as no final state. Runs
/// on a GPU or the stand-in driver; skipped without a driver.
#[test]
fn a_proved_deadlock_is_not_launched_on_a_gpu() {
    let mut gpu = common::or_skip!(gpu());
    let (path, test) = suite_litmus_test("bar.sync-count-two-reached-three-times.litmus");
    let started = Instant::now();
    let outcome = run_litmus_file(&mut gpu, &test, &FileSettings::default(), 1, |_| {}).unwrap();
    assert_eq!((outcome.launches, outcome.not_finished), (0, 0));
    assert!(!outcome.backend_lost);
    assert!(
        outcome.report().contains("not launched on the GPU"),
        "{}",
        outcome.report()
    );
    assert!(started.elapsed() < FileSettings::default().deadline);
    assert_eq!(
        outcome.finding(&test),
        Finding::Deadlocked { not_finished: 0 }
    );
    let expected = Expectations::load(&path.with_file_name("expected.csv")).unwrap();
    let row = expected.find(&path);
    assert_eq!(
        Verdict::of(row, &outcome.finding(&test)),
        Verdict::OkNoFinalState
    );
}

/// A GPU backend is one device: a test whose threads run on two GPUs is refused there (with
/// file, line and construct, as every refusal), not run as if they shared one. Runs on a GPU
/// or the stand-in driver; skipped without a driver.
#[test]
fn a_test_across_gpus_is_refused_on_a_gpu() {
    let mut gpu = common::or_skip!(gpu());
    let (_, test) = suite_litmus_test("MP+relaxed+fence.acq_rel.sys-cross-gpu.litmus");
    let err = run_litmus_file(&mut gpu, &test, &FileSettings::default(), 1, |_| {}).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(
            "cross-gpu.litmus:9: `P1@gpu 1` is not supported: threads on more than one GPU"
        ),
        "{text}"
    );
}
