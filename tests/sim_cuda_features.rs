//! CUDA features that ordinary kernels use, compiled with the project's NVRTC (the portable
//! architecture) and run on the simulator (`tests/fixtures/kernels/sim_features/`): half and
//! bfloat16 arithmetic, atomics beyond integer add, warp primitives, integer intrinsics, cache
//! hints and vectors, float math, cooperative-groups tiles and libcu++ wait/notify; each for
//! the portable architecture, sm_80 and sm_90. Each test asserts the values the kernel computes
//! against the C semantics. What the simulator cannot run (a grid-wide sync, SIMD video
//! instructions) must be refused naming the source line. Simulator results.

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

/// The PTX of fixture `name` compiled for `arch` with the project's NVRTC.
fn compile_fixture(name: &str, arch: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kernels/sim_features")
        .join(name);
    let source = std::fs::read_to_string(&path).unwrap();
    gpuwmm::compile::compile_cuda(&path, &source, arch)
        .unwrap_or_else(|e| panic!("{name} for {arch}: {e}"))
}

/// The architectures a test compiles its fixture for: the portable one the project uses, and
/// sm_80 and sm_90, for which NVRTC emits other instructions (`redux.sync`, native bf16).
const ARCHS: [&str; 3] = [gpuwmm::toolchain::PORTABLE_ARCH, "sm_80", "sm_90"];

impl Fixture {
    fn load_for(name: &str, arch: &str) -> Fixture {
        let ptx = compile_fixture(name, arch);
        let mut sim = SimBackend::new(SimModel::Ptx.config(1));
        let module = sim
            .load_module(&ptx)
            .unwrap_or_else(|e| panic!("{name} for {arch}: {e}"));
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
            cooperative: false,
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

/// Asserts that the words a fixture wrote, `got`, are the `expected` ones, in order; a word
/// that is not is named by its index, both values in hex.
fn assert_words_are<T>(arch: &str, got: &[T], expected: impl IntoIterator<Item = T>)
where
    T: PartialEq + std::fmt::Debug + std::fmt::LowerHex,
{
    for (k, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(*g, e, "{arch}: out[{k}]: {g:#x}, expected {e:#x}");
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
    for arch in ARCHS {
        let mut fx = Fixture::load_for("half.cu", arch);
        let a = 1.0f32 + 2f32.powi(-11) + 2f32.powi(-13);
        let input = fx.buffer(&[a, std::f32::consts::PI, 2049.0, 1e-7]);
        let out = fx.zeroed(24 * 4);
        fx.run("half_math", 1, 1, 0, &[input, out]);
        let got: Vec<u32> = fx.read(out);
        assert_words_are(arch, &got, HALF_EXPECTED);
    }
}

/// 128 threads: float, double, half, half2 and bfloat162 adds, inc/dec wrapping at 9, float
/// exchange, 64-bit min/max/add and a 16-bit CAS loop. `atomicAdd(__half2 *)` (`atom.add.noftz.f16x2`) and
/// the inline PTX's bare register names (`.reg .f16 low, high;`) were refused at load before.
#[test]
fn atomics_on_floats_halves_and_64_bit_words_give_the_c_results() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    for arch in ARCHS {
        atomics_give_the_c_results(arch);
    }
}

fn atomics_give_the_c_results(arch: &str) {
    let mut fx = Fixture::load_for("atomics.cu", arch);
    let threads = 128u64;
    let f = fx.zeroed(8);
    let d = fx.zeroed(8);
    let h = fx.zeroed(4);
    let u = fx.zeroed(8);
    let s64 = fx.zeroed(16);
    let u64s = fx.buffer(&[u64::MAX, 0, 0]);
    let u16s = fx.zeroed(8);
    let old_f = fx.zeroed(threads as usize * 4);
    let hs = fx.zeroed(4);
    let b2 = fx.zeroed(4);
    let args = [f, d, h, u, s64, u64s, u16s, old_f, hs, b2];
    fx.run("atomics", 2, 64, 0, &args);
    // 0.25 added 128 times: 32 in binary16; {1, 2} 128 times: {128, 256} in bfloat16
    assert_eq!(fx.read::<u32>(hs)[0], 0x5000, "{arch}");
    assert_eq!(fx.read::<u32>(b2)[0], 0x4380_4300, "{arch}");
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
/// match, `__syncwarp` with a partial mask, `__activemask`, and from sm_80 `__reduce_*_sync`
/// (`redux.sync`, refused before).
#[test]
fn warp_shuffles_votes_and_masks_of_32_and_64_bit_values_give_the_c_results() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    for arch in ARCHS {
        let mut fx = Fixture::load_for("warp.cu", arch);
        let out = fx.zeroed(64 * 16 * 8);
        fx.run("warp_ops", 1, 64, 0, &[out]);
        check_warp_results(arch, &fx.read(out));
    }
}

fn check_warp_results(arch: &str, got: &[u64]) {
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
            (0..32).sum::<u64>() | u64::from((-20i32) as u32) << 32,
            1,
        ];
        assert_eq!(o, expected, "{arch}: thread {t}");
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
    for arch in ARCHS {
        let mut fx = Fixture::load_for("bits.cu", arch);
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
        assert_words_are(arch, &got, expected);
    }
}

/// 64 threads: `__ldg` (`ld.global.nc`), `__ldcg`/`__ldcv`/`__ldca`/`__ldcs`/`__ldlu` and the
/// store hints, `int4`/`float4`/`double2` vectors, volatile 64-bit words, dynamic shared
/// memory, `__threadfence_system`, `clock64`, `__nanosleep` and `%globaltimer`.
#[test]
fn cache_hinted_vector_and_volatile_accesses_and_timers_give_the_c_results() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    for arch in ARCHS {
        let mut fx = Fixture::load_for("memory.cu", arch);
        let vi: Vec<i32> = (0..64).flat_map(|t| [t, 2 * t, 3 * t, 4 * t]).collect();
        let vf: Vec<f32> = (0..64).flat_map(|t| [t as f32, 0.5, 0.25, 0.25]).collect();
        let vd: Vec<u64> = (0..64)
            .flat_map(|t| [f64::from(t).to_bits(), 0.5f64.to_bits()])
            .collect();
        let cached: Vec<i32> = (0..320).map(|t| if t < 64 { t } else { -1 }).collect();
        let (vi, vf, vd) = (fx.buffer(&vi), fx.buffer(&vf), fx.buffer(&vd));
        let cached = fx.buffer(&cached);
        let vol = fx.zeroed(64 * 8);
        let out = fx.zeroed(1152 * 8);
        fx.run("memory_ops", 1, 64, 64 * 8, &[vi, vf, vd, cached, vol, out]);
        let got: Vec<u64> = fx.read(out);
        let hinted: Vec<i32> = fx.read(cached);
        for t in 0..64u64 {
            let o = &got[t as usize * 8..][..8];
            let mirror = 63 - t;
            assert_eq!(
                o[0],
                (10 * mirror) << 32 | (mirror + 1),
                "{arch}: thread {t}"
            );
            assert_eq!(o[1], (t as f64 + 0.5).to_bits(), "{arch}: thread {t}");
            assert_eq!(
                o[2],
                0x1234_5678_9abc_def0 + (t + 1) % 64,
                "{arch}: thread {t}"
            );
            assert_eq!(
                o[3..5],
                [1, 1],
                "thread {t}: clock64 went back, or both clocks read 0"
            );
            assert!(o[5] > 0, "thread {t}: %globaltimer read 0");
            let floats = [got[512 + 2 * t as usize], got[513 + 2 * t as usize]];
            let f = |w: u64, k| f32::from_bits((w >> (32 * k)) as u32);
            assert_eq!(
                [
                    f(floats[0], 0),
                    f(floats[0], 1),
                    f(floats[1], 0),
                    f(floats[1], 1)
                ],
                [1.0, 2.0, 3.0, t as f32]
            );
            let ints = [got[1024 + 2 * t as usize], got[1025 + 2 * t as usize]];
            let i = |w: u64, k| (w >> (32 * k)) as u32 as i32;
            assert_eq!(
                [i(ints[0], 0), i(ints[0], 1), i(ints[1], 0), i(ints[1], 1)],
                [-1, -2, -3, t as i32]
            );
            let h = 4 * t as i32;
            let stores: Vec<i32> = (1..5).map(|k| hinted[64 * k + t as usize]).collect();
            assert_eq!(stores, [h, h + 1, h + 2, h + 3], "{arch}: thread {t}");
        }
    }
}

/// `f32` rounded towards zero, down or up from an exact `f64` value (which every case here is,
/// or, for a quotient, is within half an `f64` unit of, never across an `f32` value).
fn directed_f32(exact: f64, toward: &str) -> f32 {
    let nearest = exact as f32;
    let above = f64::from(nearest) > exact;
    let below = f64::from(nearest) < exact;
    match toward {
        "zero" if above && exact > 0.0 => nearest.next_down(),
        "zero" if below && exact < 0.0 => nearest.next_up(),
        "down" if above => nearest.next_down(),
        "up" if below => nearest.next_up(),
        _ => nearest,
    }
}

/// The C library's float math and the intrinsics with a rounding in their name: correctly
/// rounded ones exactly, approximate ones (`__expf`, `cbrtf`) to within their error.
#[test]
fn float_math_and_directed_rounding_intrinsics_give_the_ieee_results() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    for arch in ARCHS {
        let mut fx = Fixture::load_for("float_math.cu", arch);
        let (x, y) = (10.0f32, -2.7f32);
        let (p, q) = (2.0f64, 3.0f64);
        let input = fx.buffer(&[x, y, 1e10]);
        let dinput = fx.buffer(&[p.to_bits(), q.to_bits()]);
        let out = fx.zeroed(25 * 8);
        fx.run("float_math", 1, 1, 0, &[input, dinput, out]);
        let got: Vec<u64> = fx.read(out);
        let pair = |lo: f32, hi: f32| u64::from(lo.to_bits()) | u64::from(hi.to_bits()) << 32;
        let ints = |lo: i32, hi: i32| u64::from(lo as u32) | u64::from(hi as u32) << 32;
        let (xd, yd) = (f64::from(x), f64::from(y));
        let ddiv_up = {
            let r = p / q;
            // the residual p - r q, exact by fma, says on which side the quotient is
            if (-r).mul_add(q, p) > 0.0 {
                r.next_up()
            } else {
                r
            }
        };
        let remainder = (xd - (xd / yd).round_ties_even() * yd) as f32;
        let expected: [(usize, u64); 20] = [
            (0, u64::from(x.sqrt().to_bits())),
            (1, u64::from(x.mul_add(y, 1.0).to_bits())),
            (2, pair(y.floor(), y.ceil())),
            (3, pair(y.trunc(), y.round())),
            (4, pair(y.round_ties_even(), y.abs())),
            (5, pair(x.min(y), x.max(y))),
            (
                6,
                pair(directed_f32(xd + yd, "zero"), directed_f32(xd * yd, "up")),
            ),
            (7, pair(directed_f32(xd / yd, "down"), x.sqrt())),
            (8, pair(1.0 / y, directed_f32(xd.mul_add(yd, xd), "zero"))),
            (9, ints(-3, -3)),
            (10, pair(0.0, -10.0)),
            (11, p.sqrt().to_bits()),
            (12, p.mul_add(q, 1.0).to_bits()),
            (13, 5.0f64.to_bits()),
            (14, ddiv_up.to_bits()),
            (15, 30_000_000_000),
            (16, pair(2.5, 0.5)),
            (17, pair(1.0, 0.0)),
            (18, u64::from(80.0f32.to_bits()) | 1 << 32),
            (19, pair(y / 4.0, f32::from_bits(2))),
        ];
        for (k, e) in expected {
            assert_eq!(
                got[k], e,
                "{arch}: out[{k}]: {:#x}, expected {e:#x}",
                got[k]
            );
        }
        assert_eq!(got[20], pair(x % y, remainder), "fmodf, remainderf");
        assert_eq!(got[21] as u32, x.next_down().to_bits(), "nextafterf");
        let cbrt = f32::from_bits((got[21] >> 32) as u32);
        assert!(
            (cbrt - 3.0).abs() <= f32::EPSILON * 3.0,
            "cbrtf(27) = {cbrt}"
        );
        let e = f32::from_bits(got[22] as u32);
        assert!((e - std::f32::consts::E).abs() < 1e-6, "__expf(1) = {e}");
        assert_eq!(got[22] >> 32, 0, "tanhf(0)");
        assert_eq!(got[23], 1e10f64.to_bits());
        // 2^32 - 1 towards zero: 2^32 - 256; -(2^40 + 1) down: -(2^40 + 2^17)
        let low = (4_294_967_040f32, -1_099_511_758_848f32);
        assert_eq!(got[24], pair(low.0, low.1));
    }
}

/// `cooperative_groups` tiles of 8 in a block of 64 (shuffles, `cg::reduce`, ballot, votes,
/// `meta_group_rank`) and a tile of 16 made at run time (`tiled_partition(block, 16)`).
#[test]
fn cooperative_group_tiles_shuffle_vote_and_reduce_within_the_tile() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    for arch in ARCHS {
        let mut fx = Fixture::load_for("groups.cu", arch);
        let out = fx.zeroed(64 * 8 * 4);
        fx.run("tiles", 1, 64, 0, &[out]);
        let got: Vec<u32> = fx.read(out);
        for t in 0..64u32 {
            let r = t % 8;
            let expected = [
                6,
                if r < 7 { r + 1 } else { r },
                r ^ 4,
                (1..=8).sum(),
                (0..8).map(|k| k * 7 % 5).max().unwrap(),
                0b1010_1010,
                0b11 | (t / 8) << 2,
                (t % 16) | (16 << 8),
            ];
            assert_eq!(got[t as usize * 8..][..8], expected, "{arch}: thread {t}");
        }
    }
}

/// libcu++: `cuda::atomic_ref::wait`/`notify_all` and a `cuda::std::atomic` counter (63
/// waiters see the value published before the release store they wait for); 40 threads taking
/// turns through `cuda::std::atomic::wait`, and one winner of a `cuda::std::atomic_flag`.
#[test]
fn libcxx_atomic_wait_and_notify_release_every_waiter_with_the_published_value() {
    common::or_skip!(gpuwmm::toolchain::cccl_tools_for_tests());
    for arch in ARCHS {
        let mut fx = Fixture::load_for("libcxx.cu", arch);
        let flag = fx.zeroed(4);
        let data = fx.zeroed(4);
        let seen = fx.zeroed(64 * 4);
        let count = fx.zeroed(4);
        fx.run("wait_notify", 2, 32, 0, &[flag, data, seen, count]);
        let seen: Vec<i32> = fx.read(seen);
        assert_eq!(seen[0], 0);
        assert!(seen[1..].iter().all(|v| *v == 42), "{seen:?}");
        assert_eq!(fx.read::<i32>(count)[0], 63);
        let (turn, order, flag, winners) =
            (fx.zeroed(4), fx.zeroed(40 * 4), fx.zeroed(4), fx.zeroed(4));
        fx.run("take_turns", 1, 40, 0, &[turn, order, flag, winners]);
        assert_eq!(fx.read::<i32>(turn)[0], 40, "{arch}");
        assert_eq!(
            fx.read::<i32>(order),
            (0..40).collect::<Vec<i32>>(),
            "{arch}"
        );
        assert_eq!(
            fx.read::<i32>(winners)[0],
            1,
            "{arch}: test_and_set winners"
        );
    }
}

/// A grid-wide `cooperative_groups` sync needs a cooperative launch; in a launch that is not,
/// the header's check traps, as on a GPU. The fault says so and names the kernel's line
/// (before, it said only "trap" at a PTX line). A cooperative launch gets the grid workspace
/// and the sync holds: every thread's word is 1 before it, and thread 0 adds its own after.
#[test]
fn a_grid_wide_sync_needs_a_cooperative_launch_and_holds_in_one() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    for arch in ARCHS {
        let mut fx = Fixture::load_for("grid_sync.cu", arch);
        let out = fx.zeroed(64 * 4);
        let config = LaunchConfig::new((2, 1, 1), (32, 1, 1));
        let args = [KernelArg::ptr(out)];
        fx.sim
            .launch(fx.module, "grid_barrier", &config, &args)
            .unwrap();
        let err = fx.sim.synchronize(Duration::from_secs(60)).unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains("trap at grid_sync.cu:11"), "{shown}");
        assert!(shown.contains("cooperative launch"), "{shown}");
        assert!(shown.contains("`cooperative = true`"), "{shown}");
        let mut fx = Fixture::load_for("grid_sync.cu", arch);
        let out = fx.zeroed(64 * 4);
        let cooperative = LaunchConfig {
            cooperative: true,
            ..config
        };
        let args = [KernelArg::ptr(out)];
        fx.sim
            .launch(fx.module, "grid_barrier", &cooperative, &args)
            .unwrap();
        fx.sim.synchronize(Duration::from_secs(60)).unwrap();
        let words = fx.read::<i32>(out);
        assert_eq!(words[0], 2, "{arch}");
        // Others read thread 0's word after the sync, before or after its own update.
        assert!(words.iter().all(|&w| w == 2 || w == 3), "{arch}: {words:?}");
    }
}

/// An instruction the simulator does not implement (here the accumulating form of `vadd4`,
/// from inline PTX) is refused at load naming the instruction, its PTX line and the source
/// line (before, only the PTX line).
#[test]
fn an_unimplemented_instruction_is_refused_naming_the_kernels_source_line() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let ptx = compile_fixture("video.cu", gpuwmm::toolchain::PORTABLE_ARCH);
    let mut sim = SimBackend::new(SimModel::Ptx.config(1));
    let err = sim.load_module(&ptx).unwrap_err();
    let gpuwmm::backend::BackendError::Unsupported {
        instruction,
        origin,
        ..
    } = &err
    else {
        panic!("not refused as unsupported: {err}");
    };
    assert!(instruction.starts_with("vadd4.u32.u32.u32.add"), "{err}");
    assert_eq!(origin.as_deref(), Some("video.cu:5"), "{err}");
    assert!(err.to_string().ends_with(", from video.cu:5)"), "{err}");
}

/// `cuda_fp16.h`/`cuda_bf16.h` math functions: integer roundings and classification exactly
/// (`hrint` to even), the transcendental ones (approximations on a GPU too) to within two units
/// of the 16-bit format's last place. `__hisnan` compiles to `set.nan.f16.f16`, refused before.
#[test]
fn half_math_functions_round_exactly_or_approximate_within_two_units() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    for arch in ARCHS {
        let mut fx = Fixture::load_for("half_funcs.cu", arch);
        let input = fx.buffer(&[2.5f32, 0.5]);
        let out = fx.zeroed(16 * 4);
        fx.run("half_funcs", 1, 1, 0, &[input, out]);
        let got: Vec<f32> = fx.read(out);
        assert_eq!(got[..6], [3.0, 2.0, 2.0, 2.0, 0.0, 2.5], "{arch}");
        assert_eq!(got[12], 2.0, "{arch}: bf16 hfloor");
        let x = 2.5f64;
        // (index, exact value, the format's unit in the last place at that value)
        let approximate = [
            (6, x.exp(), 2f64.powi(-7)),
            (7, x.ln(), 2f64.powi(-11)),
            (8, x.sin(), 2f64.powi(-11)),
            (9, 1.0 / x, 2f64.powi(-12)),
            (10, 1.0 / x.sqrt(), 2f64.powi(-11)),
            (11, x.tanh(), 2f64.powi(-11)),
            (13, x.exp2(), 2f64.powi(-5)),
            (14, x.sqrt(), 2f64.powi(-7)),
            (15, x.exp2() + 0.5f64.exp2(), 2f64.powi(-8) + 2f64.powi(-10)),
        ];
        for (k, exact, ulp) in approximate {
            let error = (f64::from(got[k]) - exact).abs();
            assert!(
                error <= 2.0 * ulp,
                "{arch}: out[{k}] = {}, exact {exact}",
                got[k]
            );
        }
    }
}

/// The elements of `v` (`bits` wide), extended as `signed` says.
fn elements(v: u32, bits: u32, signed: bool) -> Vec<i64> {
    (0..32 / bits)
        .map(|k| {
            let e = i64::from((v >> (bits * k)) & ((1u64 << bits) - 1) as u32);
            if signed && e >= 1 << (bits - 1) {
                e - (1 << bits)
            } else {
                e
            }
        })
        .collect()
}

/// `f` applied element by element to `a` and `b`, each result cut to `bits` and packed.
fn per_element(a: u32, b: u32, bits: u32, signed: bool, f: impl Fn(i64, i64) -> i64) -> u32 {
    let (x, y) = (elements(a, bits, signed), elements(b, bits, signed));
    x.iter().zip(&y).enumerate().fold(0, |acc, (k, (x, y))| {
        acc | ((f(*x, *y) as u64 & ((1u64 << bits) - 1)) as u32) << (bits * k as u32)
    })
}

/// The `__v*` SIMD intrinsics; `__vabsdiffu4` and `__vsads4` compile to `vabsdiff4`, refused
/// before.
#[test]
fn simd_within_a_word_intrinsics_give_the_c_results() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let (a, b) = (0x80_7f_05_c8u32, 0x7f_80_05_0au32);
    let u4 = |f: fn(i64, i64) -> i64| per_element(a, b, 8, false, f);
    let s4 = |f: fn(i64, i64) -> i64| per_element(a, b, 8, true, f);
    let s2 = |f: fn(i64, i64) -> i64| per_element(a, b, 16, true, f);
    let expected = [
        u4(|x, y| (x - y).abs()),
        u4(|x, y| x + y),
        u4(|x, y| x - y),
        u4(|x, y| (x + y + 1) >> 1),
        u4(i64::max),
        u4(i64::min),
        u4(|x, y| if x == y { 0xff } else { 0 }),
        u4(|x, y| i64::from(x > y)),
        s2(|x, y| (x - y).abs()),
        per_element(a, b, 16, false, |x, y| x + y),
        u4(|x, y| (x + y) >> 1),
        elements(a, 8, true)
            .iter()
            .zip(elements(b, 8, true))
            .map(|(x, y)| (x - y).abs())
            .sum::<i64>() as u32,
        per_element(a, 0, 8, true, |x, _| x.abs().min(127)),
        s4(|x, y| (x + y).clamp(-128, 127)),
        s2(i64::max),
        s2(|x, y| i64::from(x <= y)),
    ];
    for arch in ARCHS {
        let mut fx = Fixture::load_for("simd.cu", arch);
        let input = fx.buffer(&[a, b]);
        let out = fx.zeroed(16 * 4);
        fx.run("simd", 1, 1, 0, &[input, out]);
        let got: Vec<u32> = fx.read(out);
        assert_words_are(arch, &got, expected);
    }
}
