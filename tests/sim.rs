//! End-to-end tests of the `sim` backend: PTX fixtures (hand-written, or NVRTC output of
//! `tests/fixtures/ptx/sim_kernels.cu`) run through the `Backend` trait.

use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::backend::words::read_buffer;
use gpuwmm::backend::Device;
use gpuwmm::backend::{BackendError, Buffer, KernelArg, LaunchConfig};
use std::time::Duration;

const KERNELS: &str = include_str!("fixtures/ptx/sim_kernels.ptx");
const ALU: &str = include_str!("fixtures/ptx/sim_alu.ptx");
const LITMUS: &str = include_str!("fixtures/ptx/litmus.ptx");
const UNSUPPORTED: &str = include_str!("fixtures/ptx/sim_unsupported.ptx");
const DOT: &str = include_str!("fixtures/ptx/dot_inlined.ptx");

const LONG: Duration = Duration::from_secs(600);

fn sim(model: MemoryModel, seed: u64) -> SimBackend {
    SimBackend::new(SimConfig::new(model, seed))
}

fn launch(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig::new((grid, 1, 1), (block, 1, 1))
}

fn read_u32s(b: &mut SimBackend, buf: Buffer) -> Vec<u32> {
    read_buffer(b, buf).unwrap()
}

fn read_u64s(b: &mut SimBackend, buf: Buffer) -> Vec<u64> {
    read_buffer(b, buf).unwrap()
}

/// Runs `kernel` of `ptx` on one thread with an output buffer of `out_bytes` as its only
/// argument; returns the backend and the buffer.
fn run_one_thread(
    model: MemoryModel,
    seed: u64,
    ptx: &str,
    kernel: &str,
    out_bytes: usize,
) -> (SimBackend, Buffer) {
    let mut b = sim(model, seed);
    let m = b.load_module(ptx).unwrap();
    let out = b.alloc(out_bytes).unwrap();
    b.launch(m, kernel, &launch(1, 1), &[KernelArg::ptr(out)])
        .unwrap();
    b.synchronize(LONG).unwrap();
    (b, out)
}

fn write_u32s(b: &mut SimBackend, buf: Buffer, values: &[u32]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    b.copy_in(buf, 0, &bytes).unwrap();
}

#[test]
fn arithmetic_conversions_and_branches() {
    for model in [MemoryModel::Sc, MemoryModel::Weak, MemoryModel::Ptx] {
        let (mut b, out) = run_one_thread(model, 1, ALU, "alu", 14 * 8);
        let r = read_u64s(&mut b, out);
        let f2 = std::f32::consts::PI.mul_add(2.0, 1.0);
        let fd3 = 1.0 / (f64::from(f2) / 2.0);
        let expected: [u64; 14] = [
            -2i64 as u64,
            3,
            -500_000i64 as u64,
            -302i64 as u64,
            858_993_455,
            235,
            0xffff_ffff_0fff_f0ff,
            3914,
            65301,
            63,
            fd3.to_bits(),
            55,
            -17i64 as u64,
            23983,
        ];
        for (i, (got, want)) in r.iter().zip(expected).enumerate() {
            assert_eq!(*got, want, "result {i}: got {got:#x}, want {want:#x}");
        }
    }
}

#[test]
fn nvrtc_mixed_arithmetic_matches_rust() {
    let mut b = sim(MemoryModel::Weak, 3);
    let m = b.load_module(KERNELS).unwrap();
    let n = 32usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 3.0).collect();
    let ab = b.alloc(n * 4).unwrap();
    let bytes: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
    b.copy_in(ab, 0, &bytes).unwrap();
    let (d, q, u) = (
        b.alloc(n * 8).unwrap(),
        b.alloc(n * 8).unwrap(),
        b.alloc(n * 4).unwrap(),
    );
    let args = [
        KernelArg::ptr(ab),
        KernelArg::ptr(d),
        KernelArg::ptr(q),
        KernelArg::ptr(u),
    ];
    b.launch(m, "mixed", &launch(1, n as u32), &args).unwrap();
    b.synchronize(LONG).unwrap();
    let (dr, qr, ur) = (
        read_u64s(&mut b, d),
        read_u64s(&mut b, q),
        read_u32s(&mut b, u),
    );
    let table = [3i64, 5, 7, 11];
    for i in 0..n {
        let x = a[i];
        let y = f64::from(x).mul_add(2.5, ((i + 1) as f64).sqrt());
        assert_eq!(f64::from_bits(dr[i]), y / 3.0, "d[{i}]");
        let s = (x * 1000.0) as i64 - 7 * table[i & 3];
        let ii = i as i32;
        let want = s / 3
            + s % 5
            + (s >> 2)
            + i64::from((ii * 77).count_ones())
            + i64::from((ii + 1).leading_zeros())
            + i64::from(ii.min(3) * ii.max(-4));
        assert_eq!(qr[i] as i64, want, "q[{i}]");
        let h = (i as u32).wrapping_mul(40000) as u16;
        let c = (i as i32 * 37) as i8;
        let want = u32::from(h)
            .wrapping_add(c as i32 as u32)
            .wrapping_add((i as u32).reverse_bits())
            .wrapping_add(u32::from(x < 2.0))
            .wrapping_add(x.round_ties_even() as u32);
        assert_eq!(ur[i], want, "u[{i}]");
    }
}

fn reduce_once(model: MemoryModel, seed: u64) -> u32 {
    let mut b = sim(model, seed);
    let m = b.load_module(KERNELS).unwrap();
    let n = 1000u32;
    let input = b.alloc(n as usize * 4).unwrap();
    let values: Vec<u32> = (0..n).map(|i| i * 3 + 1).collect();
    write_u32s(&mut b, input, &values);
    let out = b.alloc(4).unwrap();
    let config = LaunchConfig {
        grid: (4, 1, 1),
        block: (64, 1, 1),
        shared_bytes: 64 * 4,
        cooperative: false,
    };
    b.launch(
        m,
        "reduce",
        &config,
        &[
            KernelArg::ptr(input),
            KernelArg::ptr(out),
            KernelArg::U32(n),
        ],
    )
    .unwrap();
    b.synchronize(LONG).unwrap();
    read_u32s(&mut b, out)[0]
}

#[test]
fn reduction_is_correct_under_every_model() {
    let want: u32 = (0..1000u32).map(|i| i * 3 + 1).sum();
    for seed in 0..4 {
        assert_eq!(reduce_once(MemoryModel::Sc, seed), want);
        assert_eq!(reduce_once(MemoryModel::Weak, seed), want);
        assert_eq!(reduce_once(MemoryModel::Ptx, seed), want);
    }
}

/// Runs a lock kernel (`blocks` blocks, `iters` critical sections each) and returns the counter.
fn lock_counter(
    b: &mut SimBackend,
    m: gpuwmm::backend::ModuleId,
    kernel: &str,
    blocks: u32,
    iters: i32,
) -> u32 {
    let lock = b.alloc(4).unwrap();
    let counter = b.alloc(4).unwrap();
    let args = [
        KernelArg::ptr(lock),
        KernelArg::ptr(counter),
        KernelArg::I32(iters),
    ];
    b.launch(m, kernel, &launch(blocks, 32), &args).unwrap();
    b.synchronize(LONG).unwrap();
    let c = read_u32s(b, counter)[0];
    b.free(lock).unwrap();
    b.free(counter).unwrap();
    c
}

#[test]
fn spin_lock_with_fence_is_correct_under_both_models() {
    for model in [MemoryModel::Sc, MemoryModel::Weak] {
        let mut b = sim(model, 11);
        let m = b.load_module(KERNELS).unwrap();
        for _ in 0..8 {
            assert_eq!(lock_counter(&mut b, m, "lock_fence", 4, 5), 20, "{model:?}");
        }
    }
}

#[test]
fn spin_lock_without_fence_breaks_only_under_weak() {
    let runs = 300;
    let mut wrong = [0; 2];
    for (k, model) in [MemoryModel::Sc, MemoryModel::Weak].into_iter().enumerate() {
        let mut b = sim(model, 5);
        let m = b.load_module(KERNELS).unwrap();
        for _ in 0..runs {
            if lock_counter(&mut b, m, "lock_nofence", 2, 2) != 4 {
                wrong[k] += 1;
            }
        }
    }
    eprintln!(
        "lock without fence: wrong in {} (sc) and {} (weak) of {runs} runs",
        wrong[0], wrong[1]
    );
    assert_eq!(wrong[0], 0);
    // measured 201 of 300 (seed 5)
    assert!((170..=230).contains(&wrong[1]), "{}", wrong[1]);
}

#[test]
fn endless_loop_times_out() {
    let mut cfg = SimConfig::new(MemoryModel::Weak, 0);
    cfg.instruction_budget = 100_000;
    let mut b = SimBackend::new(cfg);
    let m = b.load_module(ALU).unwrap();
    b.launch(m, "spin", &launch(2, 4), &[]).unwrap();
    let e = b.synchronize(LONG).unwrap_err();
    assert!(e.is_timeout(), "{e}");
}

#[test]
fn out_of_bounds_store_faults() {
    let mut b = sim(MemoryModel::Weak, 0);
    let m = b.load_module(ALU).unwrap();
    let buf = b.alloc(16).unwrap();
    b.launch(
        m,
        "oob",
        &launch(1, 1),
        &[KernelArg::ptr(buf), KernelArg::U32(4)],
    )
    .unwrap();
    let e = b.synchronize(LONG).unwrap_err();
    let BackendError::Fault(msg) = &e else {
        panic!("{e}")
    };
    assert!(msg.contains("'oob'") && msg.contains("line 147"), "{msg}");
    assert!(msg.contains(&format!("{:#x}", buf.address + 16)), "{msg}");
    // In bounds it runs.
    b.launch(
        m,
        "oob",
        &launch(1, 1),
        &[KernelArg::ptr(buf), KernelArg::U32(3)],
    )
    .unwrap();
    b.synchronize(LONG).unwrap();
}

/// QA bug (a ring buffer whose size define was misspelt): the fault named the mangled kernel
/// and a PTX line, `kernel '_ZN4ring8pipeline…', PTX line 210`; it names the kernel as the
/// source does and the source line, with the line the code is inlined at.
#[test]
fn a_fault_names_the_kernel_and_the_source_line_as_the_source_spells_them() {
    const RING: &str = "\
.version 8.8
.target sm_70
.address_size 64
.file 1 \"/app/ring.cu\"
.file 2 \"/app/spsc.cuh\"

.visible .entry _ZN4ring4pushEPi(.param .u64 p)
{
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [p];
	.loc 1 13 5
	.loc 2 22 3, function_name $L__info_string0, inlined_at 1 13 5
	st.global.u32 [%rd1+64], 1;
	ret;
}
";
    let mut b = sim(MemoryModel::Ptx, 0);
    let m = b.load_module(RING).unwrap();
    let buf = b.alloc(16).unwrap();
    b.launch(m, "_ZN4ring4pushEPi", &launch(1, 1), &[KernelArg::ptr(buf)])
        .unwrap();
    let e = b.synchronize(LONG).unwrap_err();
    let BackendError::Fault(msg) = &e else {
        panic!("{e}")
    };
    assert!(
        msg.starts_with("kernel 'ring::push', at ring.cu:13, inlined from spsc.cuh:22 (PTX line"),
        "{msg}"
    );
}

#[test]
fn division_by_zero_faults() {
    let mut b = sim(MemoryModel::Sc, 0);
    let m = b.load_module(ALU).unwrap();
    b.launch(m, "divzero", &launch(1, 1), &[KernelArg::U32(0)])
        .unwrap();
    let e = b.synchronize(LONG).unwrap_err();
    assert!(
        matches!(&e, BackendError::Fault(m) if m.contains("division by zero")),
        "{e}"
    );
}

#[test]
fn unknown_instruction_is_unsupported_at_load() {
    let mut b = sim(MemoryModel::Weak, 0);
    match b.load_module(UNSUPPORTED) {
        Err(BackendError::Unsupported {
            instruction, line, ..
        }) => {
            assert!(
                instruction.starts_with("cp.async.wait_all"),
                "{instruction}"
            );
            assert_eq!(line, 16);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn warp_shuffles_and_ballots() {
    let mut b = sim(MemoryModel::Weak, 9);
    let m = b.load_module(KERNELS).unwrap();
    let n = 96usize;
    let input: Vec<u32> = (0..n as u32).map(|i| i * 7 + 1).collect();
    let ib = b.alloc(n * 4).unwrap();
    write_u32s(&mut b, ib, &input);
    let (out, ballots) = (b.alloc(n / 32 * 4).unwrap(), b.alloc(n / 32 * 4).unwrap());
    let args = [
        KernelArg::ptr(ib),
        KernelArg::ptr(out),
        KernelArg::ptr(ballots),
    ];
    b.launch(m, "warp_sum", &launch(1, n as u32), &args)
        .unwrap();
    b.synchronize(LONG).unwrap();
    let (sums, balls) = (read_u32s(&mut b, out), read_u32s(&mut b, ballots));
    for w in 0..n / 32 {
        let lanes = &input[w * 32..(w + 1) * 32];
        assert_eq!(sums[w], lanes.iter().sum::<u32>());
        let ballot = lanes
            .iter()
            .enumerate()
            .fold(0u32, |acc, (l, v)| acc | ((v & 1) << l));
        assert_eq!(balls[w], ballot);
    }
}

#[test]
fn nvrtc_dot_kernel_runs() {
    let mut b = sim(MemoryModel::Weak, 2);
    let m = b.load_module(DOT).unwrap();
    let n = 256usize;
    let (x, y, out) = (
        b.alloc(n * 4).unwrap(),
        b.alloc(n * 4).unwrap(),
        b.alloc(4096).unwrap(),
    );
    let ones: Vec<u8> = (0..n).flat_map(|_| 1f32.to_le_bytes()).collect();
    b.copy_in(x, 0, &ones).unwrap();
    b.copy_in(y, 0, &ones).unwrap();
    let config = LaunchConfig {
        grid: (1, 1, 1),
        block: (16, 1, 1),
        shared_bytes: 64,
        cooperative: false,
    };
    let args = [
        KernelArg::ptr(x),
        KernelArg::ptr(y),
        KernelArg::ptr(out),
        KernelArg::U32(n as u32),
    ];
    b.launch(m, "dot", &config, &args).unwrap();
    b.synchronize(LONG).unwrap();
    let mut first = [0u8; 4];
    b.copy_out(out, 0, &mut first).unwrap();
    assert_eq!(f32::from_le_bytes(first), n as f32);
    assert!(b.last_kernel_stats().instructions.unwrap() > 1000);
}

/// Counts weak outcomes of a litmus kernel over `runs` instances (`per_launch` per launch).
fn litmus(
    model: MemoryModel,
    stale: bool,
    kernel: &str,
    runs: usize,
    per_launch: usize,
    weak: fn(u32, u32) -> bool,
) -> usize {
    let mut cfg = SimConfig::new(model, 42);
    cfg.stale_loads = stale;
    let mut b = SimBackend::new(cfg);
    let m = b.load_module(LITMUS).unwrap();
    let x = b.alloc(per_launch * 4).unwrap();
    let y = b.alloc(per_launch * 4).unwrap();
    let out = b.alloc(per_launch * 8).unwrap();
    let mut count = 0;
    for _ in 0..runs / per_launch {
        b.memset(x, 0).unwrap();
        b.memset(y, 0).unwrap();
        let args = [KernelArg::ptr(x), KernelArg::ptr(y), KernelArg::ptr(out)];
        b.launch(m, kernel, &launch(2 * per_launch as u32, 1), &args)
            .unwrap();
        b.synchronize(LONG).unwrap();
        let r = read_u32s(&mut b, out);
        count += r.chunks(2).filter(|p| weak(p[0], p[1])).count();
    }
    count
}

fn mp_weak(ry: u32, rx: u32) -> bool {
    ry == 1 && rx == 0
}

fn sb_weak(r0: u32, r1: u32) -> bool {
    r0 == 0 && r1 == 0
}

fn corr_weak(first: u32, second: u32) -> bool {
    first == 1 && second == 0
}

/// The weak outcome of litmus kernel `shape` shows at least 100 times in 10,000 under the weak
/// model, also with `membar.cta` (`<shape>_cta`: the threads are in different blocks), and
/// never under SC; with `membar.gl` (`<shape>_fence`) it never shows, stale loads or not.
fn assert_weak_until_gpu_fences(shape: &str, weak_outcome: fn(u32, u32) -> bool) {
    let cta_fenced = format!("{shape}_cta");
    let weak = litmus(MemoryModel::Weak, false, shape, 10_000, 50, weak_outcome);
    let cta = litmus(
        MemoryModel::Weak,
        false,
        &cta_fenced,
        10_000,
        50,
        weak_outcome,
    );
    let sc = litmus(MemoryModel::Sc, false, shape, 10_000, 50, weak_outcome);
    eprintln!("{shape} weak outcomes of 10000: weak {weak}, membar.cta {cta}, sc {sc}");
    assert!(weak >= 100, "{weak}");
    assert!(cta >= 100, "{cta}");
    assert_eq!(sc, 0);
    let gpu_fenced = format!("{shape}_fence");
    for stale in [false, true] {
        let fenced = litmus(
            MemoryModel::Weak,
            stale,
            &gpu_fenced,
            100_000,
            100,
            weak_outcome,
        );
        assert_eq!(fenced, 0, "stale loads {stale}");
    }
}

#[test]
fn message_passing_is_weak_until_gpu_fences() {
    assert_weak_until_gpu_fences("mp", mp_weak);
}

#[test]
fn store_buffering_is_weak_until_gpu_fences() {
    assert_weak_until_gpu_fences("sb", sb_weak);
}

#[test]
fn coherence_of_reads_holds() {
    for stale in [false, true] {
        assert_eq!(
            litmus(MemoryModel::Weak, stale, "corr", 20_000, 100, corr_weak),
            0
        );
    }
}

#[test]
fn same_seed_replays_the_same_execution() {
    let run = |seed| {
        let mut b = sim(MemoryModel::Weak, seed);
        let m = b.load_module(KERNELS).unwrap();
        (0..20)
            .map(|_| lock_counter(&mut b, m, "lock_nofence", 3, 3))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
}

#[test]
fn stale_loads_break_mp_without_a_reader_fence() {
    let without = litmus(MemoryModel::Weak, false, "mp_stale", 10_000, 50, mp_weak);
    let with = litmus(MemoryModel::Weak, true, "mp_stale", 10_000, 50, mp_weak);
    let fenced = litmus(
        MemoryModel::Weak,
        true,
        "mp_stale_fence",
        10_000,
        50,
        mp_weak,
    );
    eprintln!("MP, writer fence only, reader read x before: {without} (no stale loads), {with} (stale loads), {fenced} (reader fence)");
    assert_eq!(without, 0);
    // measured 60 of 10,000 launches x 50 (seed 42)
    assert!((45..=75).contains(&with), "{with}");
    assert_eq!(fenced, 0);
}

#[test]
fn device_function_calls() {
    let mut b = sim(MemoryModel::Weak, 4);
    let m = b.load_module(KERNELS).unwrap();
    let n = 8usize;
    let out = b.alloc(n * 4).unwrap();
    let q = b.alloc(8).unwrap();
    write_u32s(&mut b, q, &[5, 0]);
    b.launch(
        m,
        "calls",
        &launch(1, n as u32),
        &[KernelArg::ptr(out), KernelArg::ptr(q)],
    )
    .unwrap();
    b.synchronize(LONG).unwrap();
    let r = read_u32s(&mut b, out);
    for (i, got) in r.iter().enumerate() {
        let i = i as i32;
        let twice = |a: i32| 2 * a + 5;
        let want = twice(i) + (1.5 * f64::from(i as f32)) as i32 + twice(i) + twice(i + 1);
        assert_eq!(*got as i32, want, "out[{i}]");
    }
    assert_eq!(read_u32s(&mut b, q), vec![5, n as u32]);
}

#[test]
fn recursion_is_unsupported() {
    let mut b = sim(MemoryModel::Sc, 0);
    match b.load_module(include_str!("fixtures/ptx/sim_recursive.ptx")) {
        Err(BackendError::Unsupported {
            instruction, line, ..
        }) => {
            assert!(instruction.contains("recursive"), "{instruction}");
            assert_eq!(line, 21);
        }
        other => panic!("{other:?}"),
    }
}

/// Prints the weak-outcome rates the module docs quote: `cargo test --release --test sim
/// litmus_rates -- --ignored --nocapture`.
#[test]
#[ignore]
fn litmus_rates() {
    for per_launch in [1, 50] {
        for (kernel, weak) in [
            ("mp", mp_weak as fn(u32, u32) -> bool),
            ("mp_cta", mp_weak),
            ("mp_fence", mp_weak),
            ("sb", sb_weak),
            ("sb_cta", sb_weak),
            ("sb_fence", sb_weak),
        ] {
            let n = litmus(MemoryModel::Weak, false, kernel, 10_000, per_launch, weak);
            let sc = litmus(MemoryModel::Sc, false, kernel, 10_000, per_launch, weak);
            eprintln!("{kernel:9} {per_launch:2} per launch: weak {n:5} / 10000, sc {sc}");
        }
    }
}

#[test]
fn cta_drains_makes_cta_fences_drain() {
    let mut cfg = SimConfig::new(MemoryModel::Weak, 42);
    cfg.cta_drains = true;
    let mut b = SimBackend::new(cfg);
    let m = b.load_module(LITMUS).unwrap();
    let (x, y, out) = (
        b.alloc(200).unwrap(),
        b.alloc(200).unwrap(),
        b.alloc(400).unwrap(),
    );
    let mut weak = 0;
    for _ in 0..100 {
        b.memset(x, 0).unwrap();
        b.memset(y, 0).unwrap();
        let args = [KernelArg::ptr(x), KernelArg::ptr(y), KernelArg::ptr(out)];
        b.launch(m, "mp_cta", &launch(100, 1), &args).unwrap();
        b.synchronize(LONG).unwrap();
        let r = read_u32s(&mut b, out);
        weak += r.chunks(2).filter(|p| mp_weak(p[0], p[1])).count();
    }
    assert_eq!(weak, 0);
}

/// NVRTC output of many CUDA idioms (all atomics, volatile, `__ldg`, libm with carry-flag
/// arithmetic, `__syncthreads_count/or`, shuffles, votes, fences, 64-bit division) decodes and
/// runs.
#[test]
fn nvrtc_idioms_decode_and_run() {
    for model in [MemoryModel::Sc, MemoryModel::Weak] {
        let mut b = sim(model, 8);
        let m = b
            .load_module(include_str!("fixtures/ptx/sim_idioms.ptx"))
            .unwrap();
        let n = 64usize;
        let bufs: Vec<Buffer> = (0..7).map(|_| b.alloc(1024).unwrap()).collect();
        let ro: Vec<u8> = (0..=n)
            .flat_map(|i| (i as f32 * 0.25).to_le_bytes())
            .collect();
        b.copy_in(bufs[6], 0, &ro).unwrap();
        let mut args: Vec<KernelArg> = bufs.iter().map(|&x| KernelArg::ptr(x)).collect();
        args.push(KernelArg::I32(n as i32));
        b.launch(m, "idioms", &launch(1, n as u32), &args).unwrap();
        b.synchronize(LONG).unwrap();
        assert_eq!(read_u32s(&mut b, bufs[0])[0], n as u32, "atomicAdd count");
        let mut f = [0u8; 4];
        b.copy_out(bufs[2], 0, &mut f).unwrap();
        assert!(f32::from_le_bytes(f).is_finite());
    }
}

#[test]
fn nvrtc_libm_is_accurate() {
    let mut b = sim(MemoryModel::Sc, 1);
    let m = b.load_module(KERNELS).unwrap();
    let xs: Vec<f32> = vec![
        0.0, 0.5, -1.25, 3.0, 100.0, -1234.5, 1.0e5, 3.0e7, 1.0e30, -7.0e35,
    ];
    let n = xs.len();
    let xb = b.alloc(n * 4).unwrap();
    let bytes: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
    b.copy_in(xb, 0, &bytes).unwrap();
    let (fb, db) = (b.alloc(n * 16).unwrap(), b.alloc(n * 16).unwrap());
    let args = [KernelArg::ptr(xb), KernelArg::ptr(fb), KernelArg::ptr(db)];
    b.launch(m, "libm", &launch(1, n as u32), &args).unwrap();
    b.synchronize(LONG).unwrap();
    let f: Vec<f32> = read_u32s(&mut b, fb)
        .into_iter()
        .map(f32::from_bits)
        .collect();
    let d: Vec<f64> = read_u64s(&mut b, db)
        .into_iter()
        .map(f64::from_bits)
        .collect();
    let close32 =
        |got: f32, want: f32| got == want || (got - want).abs() <= 1e-5 * want.abs().max(1.0);
    let close64 = |got: f64, want: f64| (got - want).abs() <= 1e-12 * want.abs().max(1.0);
    for (i, &v) in xs.iter().enumerate() {
        assert!(close32(f[4 * i], v.sin()), "sinf({v}) = {}", f[4 * i]);
        assert!(close32(f[4 * i + 1], (v * 0.001).exp()), "expf({v})");
        assert!(close32(f[4 * i + 2], (v.abs() + 1.0).ln()), "logf({v})");
        assert!(
            close32(f[4 * i + 3], (v.abs() + 1.0).powf(0.5)),
            "powf({v})"
        );
        let v = f64::from(v);
        assert!(close64(d[2 * i], v.sin()), "sin({v}) = {}", d[2 * i]);
        assert!(close64(d[2 * i + 1], v.cos() + i as f64 / 7.0), "cos({v})");
    }
}

#[test]
fn wild_addresses_fault_without_panicking() {
    let ptx = include_str!("fixtures/ptx/small/wild.ptx");
    let mut b = sim(MemoryModel::Weak, 0);
    let m = b.load_module(ptx).unwrap();
    for (address, mode) in [
        (u64::MAX - 3, 1),
        (u64::MAX - 3, 0),
        (0x1000_0000_0000, 1),
        (4, 1),
    ] {
        b.launch(
            m,
            "wild",
            &launch(1, 1),
            &[KernelArg::U64(address), KernelArg::U32(mode)],
        )
        .unwrap();
        let e = b.synchronize(LONG).unwrap_err();
        assert!(matches!(e, BackendError::Fault(_)), "{e}");
    }
}

#[test]
fn memory_operations() {
    for model in [MemoryModel::Sc, MemoryModel::Weak] {
        let (mut b, out) = run_one_thread(model, 6, ALU, "memops", 13 * 4);
        let r = read_u32s(&mut b, out);
        assert_eq!(
            r,
            vec![7, 17, 0, 0, 17, 17, 1, 0, 3, 7, 17, 1, 28],
            "{model:?}"
        );
    }
}

/// One instruction per rounding mode and `.ftz` case; each stores its result's bits.
const ROUNDING: &str = include_str!("fixtures/ptx/small/rounding.ptx");

#[test]
fn directed_rounding_and_ftz_compute_what_the_mode_says() {
    let (mut b, out) = run_one_thread(MemoryModel::Ptx, 0, ROUNDING, "rounding", 20 * 4);
    let expected: [(&str, u32); 20] = [
        ("add.rn 1 + 2^-30", 0x3F80_0000),
        ("add.rz 1 + 2^-30", 0x3F80_0000),
        ("add.rm 1 + 2^-30", 0x3F80_0000),
        ("add.rp 1 + 2^-30", 0x3F80_0001),
        ("add.rn -1 - 2^-30", 0xBF80_0000),
        ("add.rz -1 - 2^-30", 0xBF80_0000),
        ("add.rm -1 - 2^-30", 0xBF80_0001),
        ("add.rp -1 - 2^-30", 0xBF80_0000),
        ("mul.rn MAX * 2", 0x7F80_0000),
        ("mul.rz MAX * 2", 0x7F7F_FFFF),
        ("fma.rp 1 * 1 + 2^-30", 0x3F80_0001),
        ("div.rm 1 / 3", 0x3EAA_AAAA),
        ("sqrt.rp 2", 0x3FB5_04F4),
        ("cvt.rp.f32.s32 2^24 + 1", 0x4B80_0001),
        ("cvt.rm.f32.f64 0.1", 0x3DCC_CCCC),
        ("add subnormal + 0", 0x0000_1234),
        ("add.ftz subnormal + 0", 0),
        ("add.rm 1 - 1", 0x8000_0000),
        ("setp.eq subnormal, 0", 0),
        ("setp.ftz.eq subnormal, 0", 1),
    ];
    let got = read_u32s(&mut b, out);
    for ((what, want), got) in expected.iter().zip(got) {
        assert_eq!(got, *want, "{what}: got {got:#010x}, want {want:#010x}");
    }
}

#[test]
fn rounding_modifiers_the_simulator_cannot_honour_are_unsupported_at_load() {
    for (inst, line) in [
        ("sin.approx.rz.f32 %f1, %f1;", "sin.approx.rz.f32"),
        ("ex2.approx.rp.ftz.f32 %f1, %f1;", "ex2.approx.rp.ftz.f32"),
        ("add.rz.u32 %r1, %r1, %r1;", "add.rz.u32"),
        ("min.rm.f32 %f1, %f1, %f1;", "min.rm.f32"),
        ("cvt.rz.s32.f32 %r1, %f1;", "cvt.rz.s32.f32"),
    ] {
        let ptx = format!(
            ".version 7.8\n.target sm_70\n.address_size 64\n.visible .entry k()\n{{\n\
             \t.reg .b32 %r<2>;\n\t.reg .f32 %f<2>;\n\t{inst}\n\tret;\n}}\n"
        );
        let mut b = sim(MemoryModel::Ptx, 0);
        match b.load_module(&ptx) {
            Err(BackendError::Unsupported {
                instruction,
                line: at,
                ..
            }) => {
                assert!(instruction.starts_with(line), "{instruction}");
                assert_eq!(at, 8, "{inst}");
            }
            other => panic!("{inst}: {other:?}"),
        }
    }
}

/// Block 0 stores 7 to `out[0]` and exits; every other block spins for ever, as a stressing block
/// would if nothing ended it.
const APP_THEN_SPIN: &str = include_str!("fixtures/ptx/small/app_then_spin.ptx");

fn run_app_then_spin(hint: Option<u32>) -> Result<u32, BackendError> {
    let mut cfg = SimConfig::new(MemoryModel::Ptx, 3);
    cfg.instruction_budget = 200_000;
    let mut b = SimBackend::new(cfg);
    let m = b.load_module(APP_THEN_SPIN).unwrap();
    let out = b.alloc(4).unwrap();
    if let Some(first) = hint {
        b.end_next_launch_with_app(first);
    }
    b.launch(m, "app_then_spin", &launch(3, 32), &[KernelArg::ptr(out)])?;
    b.synchronize(LONG)?;
    Ok(read_u32s(&mut b, out)[0])
}

#[test]
fn a_launch_told_its_stressing_blocks_ends_with_the_application_blocks() {
    assert_eq!(run_app_then_spin(Some(1)).unwrap(), 7);
    // Without the hint the spinning blocks run until the budget calls it a hang.
    assert!(run_app_then_spin(None).unwrap_err().is_timeout());
    // The hint is for one launch only, and a launch whose blocks are all application blocks
    // still runs them all.
    assert!(run_app_then_spin(Some(3)).unwrap_err().is_timeout());
}

/// Message passing between blocks 0 (data, then flag) and 1 (flag, then data, both written to
/// `out`) with relaxed accesses; blocks from 2 on store to `scratch` 100 times each, as stressing
/// blocks do.
const MP_BESIDE_STRESS: &str = include_str!("fixtures/ptx/small/mp_beside_stress.ptx");

#[test]
fn ending_stress_with_the_application_changes_nothing_the_application_sees() {
    let mut weak = 0;
    for seed in 0..300 {
        let run = |hint: bool| {
            let mut b = sim(MemoryModel::Ptx, seed);
            let m = b.load_module(MP_BESIDE_STRESS).unwrap();
            let (data, out, scratch) = (
                b.alloc(8).unwrap(),
                b.alloc(8).unwrap(),
                b.alloc(4).unwrap(),
            );
            if hint {
                b.end_next_launch_with_app(2);
            }
            let args = [
                KernelArg::ptr(data),
                KernelArg::ptr(out),
                KernelArg::ptr(scratch),
            ];
            b.launch(m, "mp_beside_stress", &launch(5, 1), &args)
                .unwrap();
            b.synchronize(LONG).unwrap();
            read_u32s(&mut b, out)
        };
        let cut = run(true);
        assert_eq!(cut, run(false), "seed {seed}");
        weak += u32::from(mp_weak(cut[0], cut[1]));
    }
    // The race is live: some seeds see the flag without the data (the count is fixed by the
    // seeds; printed so a failure shows it). 29 before launches could stagger their blocks, 49
    // before deferred loads made their thread wait and writes could go below racing ones, 42
    // before arithmetic and stores on a deferred load's value were held back behind it.
    assert_eq!(weak, 44, "weak outcomes in 300 seeds");
}
