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

/// Bit patterns the half fixture must produce, from an independent reference (Python's
/// `fractions` for the exact values, rounded to nearest even by hand; `struct`'s `e` format for
/// binary16 bit patterns): inputs a = 1 + 2^-11 + 2^-13, b = 3.14159274 (f32 pi), 2049, 1e-7.
const HALF_EXPECTED: [u32; 24] = [
    0x3c01,      // a: above the tie, rounds up to 1 + 2^-10
    0x6800,      // 2049: a tie, to even (2048)
    0x3c00,      // a towards zero
    0x4424,      // a + b
    0xc048,      // a - b
    0x424a,      // a * b
    0x4425,      // fma(a, b, a), one rounding
    0x3519,      // a / b
    0xbf80_2000, // -a as f32
    0b101,       // a < b, not a > b, a == a
    0x4cef_4002, // {(a + a) * a, (b + b) * b} as a pair
    100,         // (a * 100) to int, nearest even
    0xe800,      // -2049 from an int: a tie, to even (-2048)
    0x7c00,      // 100000: overflows to infinity
    0x3c01,      // a from double
    0x0002,      // 1e-7: a subnormal, 1.68 units of 2^-24, to 2
    0x3f80,      // a as bf16 (1.0)
    0x4084,      // bf16 a + b
    0x4049,      // bf16 a * b
    0xc009,      // bf16 a - b
    0x3f80_0000, // bf16 of a towards zero, back as f32
    1,           // bf16 a < b
    0x3c01_4248, // __hmax(a, b) | __hmin(a, b) << 16
    0x3c00,      // hsqrt(a)
];

/// Before the simulator knew 16-bit floats it refused `cvt.rn.f16.f32` at load, so no kernel
/// using `cuda_fp16.h` or `cuda_bf16.h` ran.
#[test]
fn half_and_bfloat16_conversions_and_arithmetic_round_to_nearest_even() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let mut fx = Fixture::load("half.cu");
    let a = 1.0f32 + 2f32.powi(-11) + 2f32.powi(-13);
    let input = fx.buffer(&[a, std::f32::consts::PI, 2049.0, 1e-7]);
    let out = fx.zeroed(24 * 4);
    fx.run("half_math", 1, 1, 0, &[input, out]);
    let got: Vec<u32> = fx.read(out);
    for (k, (g, e)) in got.iter().zip(HALF_EXPECTED).enumerate() {
        assert_eq!(*g, e, "out[{k}]: {g:#x}, expected {e:#x}");
    }
}

/// 128 threads: float, double and half2 adds, inc/dec wrapping at 9, float exchange, 64-bit
/// min/max/add and a 16-bit CAS loop. `atomicAdd(__half2 *)` (`atom.add.noftz.f16x2`) and
/// the inline PTX's bare register names (`.reg .f16 low, high;`) were refused at load before.
#[test]
fn atomics_on_floats_halves_and_64_bit_words_give_the_c_results() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let mut fx = Fixture::load("atomics.cu");
    let threads = 128u64;
    let f = fx.zeroed(8);
    let d = fx.zeroed(8);
    let h = fx.zeroed(4);
    let u = fx.zeroed(8);
    let s64 = fx.zeroed(16);
    let u64s = fx.buffer(&[u64::MAX, 0, 0]);
    let u16s = fx.zeroed(8);
    let old_f = fx.zeroed(threads as usize * 4);
    fx.run("atomics", 2, 64, 0, &[f, d, h, u, s64, u64s, u16s, old_f]);
    let fs: Vec<f32> = fx.read(f);
    assert_eq!(fs[0], 0.5 * threads as f32);
    let ds: Vec<u64> = fx.read(d);
    assert_eq!(f64::from_bits(ds[0]), 0.25 * threads as f64);
    // {1.0, 0.5} added 128 times: {128, 64} in binary16
    assert_eq!(fx.read::<u32>(h)[0], 0x5400_5800);
    // inc wraps 9 -> 0, dec wraps 0 -> 9: 128 steps from 0 end at 128 % 10 and -128 mod 10
    assert_eq!(fx.read::<u32>(u), vec![8, 2]);
    let s: Vec<u64> = fx.read(s64);
    let tera = 1_000_000_000_000i64;
    assert_eq!(s[0] as i64, -127 * tera);
    assert_eq!(s[1] as i64, 127 * tera);
    let w: Vec<u64> = fx.read(u64s);
    assert_eq!(w, vec![0xffff_ffff_0000_0000, 127 << 40, threads << 33]);
    assert_eq!(fx.read::<u32>(u16s)[0], threads as u32);
    // every exchange returns the value before it: the old values and the final one are the
    // initial 0 and each thread's own value, once each
    let mut seen: Vec<f32> = fx.read(old_f);
    seen.push(fs[1]);
    seen.sort_by(f32::total_cmp);
    let mut expected: Vec<f32> = (0..threads).map(|i| i as f32).collect();
    expected.push(0.0);
    expected.sort_by(f32::total_cmp);
    assert_eq!(seen, expected);
}

/// Two warps: shuffles of 32- and 64-bit values (up, down, xor, idx, with a width), votes,
/// match, `__syncwarp` with a partial mask and `__activemask`.
#[test]
fn warp_shuffles_votes_and_masks_of_32_and_64_bit_values_give_the_c_results() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let mut fx = Fixture::load("warp.cu");
    let out = fx.zeroed(64 * 16 * 8);
    fx.run("warp_ops", 1, 64, 0, &[out]);
    let got: Vec<u64> = fx.read(out);
    for t in 0..64u64 {
        let lane = t % 32;
        let o = &got[t as usize * 16..][..16];
        let ballot3 = (0..32).filter(|l| l % 3 == 0).fold(0, |m, l| m | 1 << l);
        let expected = [
            50,
            if lane < 2 { lane } else { lane - 2 },
            if lane + 3 < 32 { lane + 3 } else { lane },
            lane ^ 7,
            (0x1_0000_0000 + (31 - lane)) * 3,
            (if lane < 31 { lane + 1 } else { lane } as f64 * 0.5).to_bits(),
            lane / 8 * 8 + (lane + 1) % 8,
            ballot3,
            1,
            0xff << (lane / 8 * 8),
            o[10],
            if lane < 16 { 0xaaaa } else { 0 },
            32,
            (-((lane ^ 16) as i64)) as u64,
            lane,
            1,
        ];
        assert_eq!(o, expected, "thread {t}");
        // inside the branch of the first 16 lanes, after __syncwarp(0xffff): those lanes
        if lane < 16 {
            assert_eq!(o[10] & 0xffff, 0xffff, "thread {t}: {:#x}", o[10]);
        }
    }
}

/// `__byte_perm`, funnel shifts (`shf`, refused before), high multiplies, SAD, `__dp4a`,
/// `__dp2a_lo` and `__fns` (refused before), 64-bit division, against Rust's integer semantics.
#[test]
fn integer_intrinsics_and_64_bit_division_give_the_c_results() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let mut fx = Fixture::load("bits.cu");
    let (a, b) = (0xf00d_cafeu32, 0x1234_8765u32);
    let (x, y) = (0xfedc_ba98_7654_3210u64, 0x0000_0123_4567_89abu64);
    let (sx, sy) = (-0x7654_3210_0123_4567i64, 0x1_0000_0007i64);
    let input = fx.buffer(&[u64::from(a), u64::from(b), x, y, sx as u64, sy as u64]);
    let out = fx.zeroed(28 * 8);
    fx.run("bit_ops", 1, 1, 0, &[input, out]);
    let got: Vec<u64> = fx.read(out);
    let bytes = |v: u32| v.to_le_bytes();
    let perm = {
        let pool = [bytes(a), bytes(b)].concat();
        let sel = [0u8, 4, 1, 5];
        u32::from_le_bytes(sel.map(|s| pool[s as usize]))
    };
    let funnel = |lo: u32, hi: u32| u64::from(hi) << 32 | u64::from(lo);
    let mul24 = |v: u32| i64::from(((v << 8) as i32) >> 8);
    let dp4a_signed: i32 = (0..4)
        .map(|k| i32::from(bytes(a)[k] as i8) * i32::from(bytes(b)[k] as i8))
        .sum::<i32>()
        + 5;
    let dp4a_unsigned: u32 = (0..4)
        .map(|k| u32::from(bytes(a)[k]) * u32::from(bytes(b)[k]))
        .sum::<u32>()
        + 5;
    let halves = [(a & 0xffff) as u16 as i16, (a >> 16) as u16 as i16];
    let dp2a_lo: i32 = (0..2)
        .map(|k| i32::from(halves[k]) * i32::from(bytes(b)[k] as i8))
        .sum::<i32>()
        + 5;
    let third_set_bit = (0..32u32).filter(|k| a >> k & 1 == 1).nth(2).unwrap();
    let expected: [u64; 28] = [
        u64::from(a.count_ones() | x.count_ones() << 8),
        u64::from(a.leading_zeros() | y.leading_zeros() << 8),
        u64::from((b.trailing_zeros() + 1) | (x.trailing_zeros() + 1) << 8),
        u64::from(a.reverse_bits()),
        x.reverse_bits(),
        u64::from(perm),
        (funnel(a, b) << 12 >> 32) & 0xffff_ffff,
        (funnel(a, b) >> (40 % 32)) & 0xffff_ffff,
        u64::from(a),
        (funnel(a, b) >> 4) & 0xffff_ffff,
        (mul24(a) * mul24(b)) as u64 & 0xffff_ffff,
        u64::from((a & 0xff_ffff).wrapping_mul(b & 0xff_ffff)),
        (u64::from(a) * u64::from(b)) >> 32,
        ((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32 as u64,
        ((u128::from(x) * u128::from(y)) >> 64) as u64,
        ((i128::from(sx) * i128::from(sy)) >> 64) as u64,
        u64::from((a as i32).abs_diff(b as i32) + 7),
        u64::from(a.abs_diff(b) + 7),
        dp4a_signed as u32 as u64,
        u64::from(dp4a_unsigned),
        dp2a_lo as u32 as u64,
        x / y,
        x % y,
        (sx / sy) as u64,
        (sx % sy) as u64,
        u64::from(
            ((a as i32 as i64 + b as i32 as i64) >> 1) as u32
                ^ ((a as i32 as i64 + b as i32 as i64 + 1) >> 1) as u32,
        ),
        ((u64::from(a) + u64::from(b)) >> 1 ^ (u64::from(a) + u64::from(b) + 1) >> 1),
        third_set_bit as u64,
    ];
    for (k, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(*g, e, "out[{k}]: {g:#x}, expected {e:#x}");
    }
}
