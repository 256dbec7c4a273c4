//! The value semantics of 16-bit floats (`.f16`, `.bf16` and their pairs): conversions,
//! arithmetic, comparisons and atomic adds, as `cuda_fp16.h` and `cuda_bf16.h` compile to.
//!
//! Kept apart from `alu.rs` so that the 32- and 64-bit float paths stay as they are. Every
//! operation is computed on the values widened to `f64` (exactly: both formats embed in it) and
//! rounded once to 16 bits. An inexact `f64` intermediate is first rounded *to odd* (the
//! neighbour with the odd last bit, found from the rounding-down and rounding-up results of
//! `rounding.rs`); with 53 bits against at most 11, rounding that to 16 bits in any mode gives
//! the correctly rounded result of the exact value, so there is no double-rounding error.

use super::alu;
use super::isa::*;
use super::rounding;

/// The NaN the simulator produces for 16-bit results (quiet, all fraction bits set, as
/// NVIDIA's canonical NaN for both formats).
const CANONICAL_NAN: u16 = 0x7fff;

/// Layout of a format: fraction bits and the exponent of its smallest normal number.
fn layout(f: HalfFormat) -> (u32, i32) {
    match f {
        HalfFormat::F16 => (10, -14),
        HalfFormat::Bf16 => (7, -126),
    }
}

/// The bits of +infinity in format `f`.
fn infinity(f: HalfFormat) -> u16 {
    match f {
        HalfFormat::F16 => 0x7c00,
        HalfFormat::Bf16 => 0x7f80,
    }
}

/// The bits of 1.0 in format `f`.
pub fn one(f: HalfFormat) -> u16 {
    match f {
        HalfFormat::F16 => 0x3c00,
        HalfFormat::Bf16 => 0x3f80,
    }
}

fn is_nan(f: HalfFormat, h: u16) -> bool {
    h & 0x7fff > infinity(f)
}

/// Subnormal inputs and results become zeros of the same sign (`.ftz`).
fn flush(f: HalfFormat, h: u16, ftz: bool) -> u16 {
    let exponent_bits = 0x7fff & !((1u16 << layout(f).0) - 1);
    if ftz && h & exponent_bits == 0 {
        h & 0x8000
    } else {
        h
    }
}

/// The value of `h` in format `f` (exact).
pub fn widen(f: HalfFormat, h: u16) -> f64 {
    if f == HalfFormat::Bf16 {
        return f64::from(f32::from_bits(u32::from(h) << 16));
    }
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((h >> 10) & 0x1f);
    let fraction = f64::from(h & 0x3ff);
    sign * match exponent {
        0 => fraction * 2f64.powi(-24),
        31 if fraction == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1024.0 + fraction) * 2f64.powi(e - 25),
    }
}

/// `x` rounded to format `f` as `round` says (overflow, subnormals and signed zeros as IEEE 754
/// defines them; NaN becomes the canonical NaN).
pub fn narrow(f: HalfFormat, x: f64, round: FloatRound) -> u16 {
    if x.is_nan() {
        return CANONICAL_NAN;
    }
    let sign = if x.is_sign_negative() { 0x8000u16 } else { 0 };
    let magnitude = x.abs();
    if magnitude.is_infinite() {
        return sign | infinity(f);
    }
    if magnitude == 0.0 {
        return sign;
    }
    let (fraction_bits, min_exponent) = layout(f);
    // the exponent of the quantum (the value of the last bit) at this magnitude
    let exponent = ((magnitude.to_bits() >> 52) as i32 - 1023).max(min_exponent);
    let quantum_exponent = exponent - fraction_bits as i32;
    let scaled = magnitude * 2f64.powi(-quantum_exponent);
    let up = match round {
        FloatRound::Nearest => scaled.round_ties_even() > scaled.floor(),
        FloatRound::Zero => false,
        FloatRound::Up => sign == 0 && scaled.fract() != 0.0,
        FloatRound::Down => sign != 0 && scaled.fract() != 0.0,
    };
    let units = scaled.floor() as u32 + u32::from(up);
    // units in [2^p-1, 2^p] for normals, below for subnormals: the biased exponent adds on
    let bits = (((exponent - min_exponent) as u32) << fraction_bits) + units;
    if bits >= u32::from(infinity(f)) {
        return sign | overflowed(f, sign != 0, round);
    }
    sign | bits as u16
}

/// The magnitude bits a result too large for the format rounds to.
fn overflowed(f: HalfFormat, negative: bool, round: FloatRound) -> u16 {
    let to_infinity = match round {
        FloatRound::Nearest => true,
        FloatRound::Zero => false,
        FloatRound::Up => !negative,
        FloatRound::Down => negative,
    };
    if to_infinity {
        infinity(f)
    } else {
        infinity(f) - 1
    }
}

/// The exact value of an operation as an `f64` rounded to odd, from its results rounded down
/// and up (equal when exact; `exact` gives the signed zero of the instruction's own mode).
fn to_odd(down: f64, up: f64, exact: impl FnOnce() -> f64) -> f64 {
    if down == up {
        exact()
    } else if down.to_bits() & 1 == 1 {
        down
    } else {
        up
    }
}

/// An integer as an `f64` rounded to odd.
fn int_to_odd(v: i128) -> f64 {
    let down = rounding::int_to_f64(v, FloatRound::Down);
    let up = rounding::int_to_f64(v, FloatRound::Up);
    to_odd(down, up, || down)
}

/// One element of a 16-bit float operation.
fn element(op: HalfOp, f: HalfFormat, round: FloatRound, a: u16, b: u16, c: u16) -> u16 {
    let (x, y, z) = (widen(f, a), widen(f, b), widen(f, c));
    let exact = |r: FloatRound| match op {
        HalfOp::Add => rounding::add(x, y, r),
        HalfOp::Sub => rounding::add(x, -y, r),
        HalfOp::Mul => rounding::mul(x, y, r),
        _ => rounding::fma(x, y, z, r),
    };
    match op {
        HalfOp::Neg => a ^ 0x8000,
        HalfOp::Abs => a & 0x7fff,
        HalfOp::Min | HalfOp::Max | HalfOp::MinNan | HalfOp::MaxNan => min_max(op, f, a, b),
        HalfOp::Add | HalfOp::Sub | HalfOp::Mul | HalfOp::Fma => {
            if x.is_nan() || y.is_nan() || (op == HalfOp::Fma && z.is_nan()) {
                return CANONICAL_NAN;
            }
            let odd = to_odd(exact(FloatRound::Down), exact(FloatRound::Up), || {
                exact(round)
            });
            narrow(f, odd, round)
        }
    }
}

/// `min`/`max` on 16-bit floats: -0 below +0; a NaN operand is dropped (or, for the `.NaN`
/// forms, gives the canonical NaN).
fn min_max(op: HalfOp, f: HalfFormat, a: u16, b: u16) -> u16 {
    let propagate = matches!(op, HalfOp::MinNan | HalfOp::MaxNan);
    match (is_nan(f, a), is_nan(f, b)) {
        (true, true) => return CANONICAL_NAN,
        (true, false) | (false, true) if propagate => return CANONICAL_NAN,
        (true, false) => return b,
        (false, true) => return a,
        (false, false) => {}
    }
    let (x, y) = (widen(f, a), widen(f, b));
    let a_below = x < y || (x == y && a & 0x8000 != 0);
    let want_min = matches!(op, HalfOp::Min | HalfOp::MinNan);
    if a_below == want_min {
        a
    } else {
        b
    }
}

/// Clamps to [0, 1] (`.sat`, NaN to +0) and negative results to +0 (`.relu`, NaN kept).
fn clamp(f: HalfFormat, h: u16, sat: bool, relu: bool) -> u16 {
    let nan = is_nan(f, h);
    if (sat && nan) || ((sat || relu) && !nan && h & 0x8000 != 0) {
        0
    } else if sat && !nan && widen(f, h) > 1.0 {
        one(f)
    } else {
        h
    }
}

/// Applies `each` to the element, or to both elements of a pair.
fn elementwise(ty: HalfTy, a: u64, b: u64, c: u64, each: impl Fn(u16, u16, u16) -> u16) -> u64 {
    let lane = |v: u64, k: u32| (v >> (16 * k)) as u16;
    let lanes = if ty.pair { 2 } else { 1 };
    (0..lanes).fold(0, |acc, k| {
        acc | u64::from(each(lane(a, k), lane(b, k), lane(c, k))) << (16 * k)
    })
}

/// A 16-bit float instruction (`add`, `sub`, `mul`, `fma`, `min`, `max`, `neg`, `abs`).
pub fn arith(op: HalfOp, ty: HalfTy, mode: FloatMode, sat: bool, relu: bool, abc: [u64; 3]) -> u64 {
    let f = ty.format;
    let [a, b, c] = abc;
    elementwise(ty, a, b, c, |a, b, c| {
        let [a, b, c] = [a, b, c].map(|h| flush(f, h, mode.ftz));
        let r = element(op, f, mode.round, a, b, c);
        flush(f, clamp(f, r, sat, relu), mode.ftz)
    })
}

/// `setp` on 16-bit floats: the result of each element (the low one first).
pub fn compare(cmp: Cmp, ty: HalfTy, ftz: bool, a: u64, b: u64) -> (bool, bool) {
    let f = ty.format;
    let f64_ty = Ty {
        kind: Kind::F,
        bits: 64,
    };
    let lane = |v: u64, k: u32| widen(f, flush(f, (v >> (16 * k)) as u16, ftz)).to_bits();
    let holds = |k| alu::compare(cmp, f64_ty, false, lane(a, k), lane(b, k));
    (holds(0), ty.pair && holds(1))
}

/// `cvt` with a 16-bit float on either side.
pub fn cvt(
    conv: HalfConv,
    round: Round,
    mode: FloatMode,
    sat: bool,
    relu: bool,
    ab: [u64; 2],
) -> u64 {
    let [a, b] = ab;
    match conv {
        HalfConv::From(f, dst) => {
            let x = widen(f, flush(f, a as u16, mode.ftz));
            let f64_ty = Ty {
                kind: Kind::F,
                bits: 64,
            };
            alu::cvt(dst, f64_ty, round, mode, sat, x.to_bits())
        }
        HalfConv::To(src, f) => {
            let x = if src.is_float() {
                alu::round_float(alu::to_f64(alu::flushed(a, src, mode.ftz), src), round)
            } else {
                int_to_odd(if src.signed() {
                    i128::from(alu::sext(a, src.bits))
                } else {
                    i128::from(a & alu::mask(src.bits))
                })
            };
            u64::from(to_half(f, x, mode, sat, relu))
        }
        HalfConv::PairOf(f) => {
            let half = |v: u64| u64::from(to_half(f, f64::from(alu::f32v(v)), mode, sat, relu));
            half(a) << 16 | half(b)
        }
        HalfConv::Between(from, f) => {
            let x = alu::round_float(widen(from, flush(from, a as u16, mode.ftz)), round);
            u64::from(to_half(f, x, mode, sat, relu))
        }
    }
}

/// An exact (or rounded-to-odd) value rounded to 16 bits with the `cvt`'s modifiers.
fn to_half(f: HalfFormat, x: f64, mode: FloatMode, sat: bool, relu: bool) -> u16 {
    let h = narrow(f, x, mode.round);
    flush(f, clamp(f, h, sat, relu), mode.ftz)
}

/// `atom.add.noftz` on 16-bit floats: each element rounded to nearest even, subnormals kept.
pub fn atomic_add(ty: HalfTy, old: u64, b: u64) -> u64 {
    arith(
        HalfOp::Add,
        ty,
        FloatMode::default(),
        false,
        false,
        [old, b, 0],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const F16: HalfFormat = HalfFormat::F16;
    const BF16: HalfFormat = HalfFormat::Bf16;

    /// [`arith`] in the default mode (to nearest even, no `.ftz`), without `.sat` or `.relu`.
    fn default_mode_arith(op: HalfOp, ty: HalfTy, abc: [u64; 3]) -> u64 {
        arith(op, ty, FloatMode::default(), false, false, abc)
    }

    #[test]
    fn f16_conversions_round_to_nearest_even_with_subnormals_and_overflow() {
        let rn = FloatRound::Nearest;
        assert_eq!(narrow(F16, 1.0, rn), 0x3c00);
        assert_eq!(narrow(F16, -2.5, rn), 0xc100);
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even (1)
        assert_eq!(narrow(F16, 1.0 + 2f64.powi(-11), rn), 0x3c00);
        // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: to even (1 + 2^-9)
        assert_eq!(narrow(F16, 1.0 + 3.0 * 2f64.powi(-11), rn), 0x3c02);
        assert_eq!(narrow(F16, 2f64.powi(-24), rn), 0x0001);
        assert_eq!(narrow(F16, 2f64.powi(-25), rn), 0x0000);
        assert_eq!(narrow(F16, 3.0 * 2f64.powi(-26), rn), 0x0001);
        assert_eq!(narrow(F16, 65504.0, rn), 0x7bff);
        assert_eq!(narrow(F16, 65520.0, rn), 0x7c00);
        assert_eq!(narrow(F16, 65520.0, FloatRound::Zero), 0x7bff);
        assert_eq!(narrow(F16, -1e9, FloatRound::Up), 0xfbff);
        assert_eq!(narrow(F16, 1.0 + 2f64.powi(-12), FloatRound::Up), 0x3c01);
        assert_eq!(
            narrow(F16, -(1.0 + 2f64.powi(-12)), FloatRound::Down),
            0xbc01
        );
        assert_eq!(narrow(F16, -0.0, rn), 0x8000);
        for h in (0..=0xffffu16).filter(|h| !is_nan(F16, *h)) {
            assert_eq!(narrow(F16, widen(F16, h), rn), h, "{h:#x}");
        }
    }

    #[test]
    fn bf16_conversions_keep_the_f32_exponent_range() {
        let rn = FloatRound::Nearest;
        assert_eq!(narrow(BF16, 1.0, rn), 0x3f80);
        assert_eq!(narrow(BF16, f64::from(f32::MAX), rn), 0x7f80);
        assert_eq!(narrow(BF16, f64::from(f32::MAX), FloatRound::Zero), 0x7f7f);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even
        assert_eq!(narrow(BF16, 1.0 + 2f64.powi(-8), rn), 0x3f80);
        assert_eq!(narrow(BF16, 2f64.powi(-133), rn), 0x0001);
        for h in (0..=0xffffu16).filter(|h| !is_nan(BF16, *h)) {
            assert_eq!(narrow(BF16, widen(BF16, h), rn), h, "{h:#x}");
        }
    }

    #[test]
    fn f16_arithmetic_rounds_the_exact_result_once() {
        let f16 = HalfTy {
            format: F16,
            pair: false,
        };
        let add = |a, b| default_mode_arith(HalfOp::Add, f16, [a, b, 0]);
        // 2048 + 1 = 2049 is halfway between 2048 and 2050: to even
        assert_eq!(add(0x6800, 0x3c00), 0x6800);
        // 2048 + 3 = 2051: to even (2052)
        assert_eq!(add(0x6800, 0x4200), 0x6802);
        // 2048 + (1 + 2^-10): above the halfway point, up, although f64 holds it exactly
        assert_eq!(add(0x6800, 0x3c01), 0x6801);
        // fma: 2049 * 1 ... (1 + 2^-10)^2 + 0 = 1 + 2^-9 + 2^-20: rounds to 1 + 2^-9
        let fma = default_mode_arith(HalfOp::Fma, f16, [0x3c01, 0x3c01, 0]);
        assert_eq!(fma, 0x3c02);
        let pair = HalfTy {
            format: F16,
            pair: true,
        };
        let sum = default_mode_arith(HalfOp::Add, pair, [0x4000_3c00, 0x3c00_3c00, 0]);
        assert_eq!(sum, 0x4200_4000);
    }

    #[test]
    fn half_min_max_drop_nans_unless_asked_to_propagate_them() {
        assert_eq!(min_max(HalfOp::Min, F16, 0x7e00, 0x3c00), 0x3c00);
        assert_eq!(min_max(HalfOp::MinNan, F16, 0x7e00, 0x3c00), CANONICAL_NAN);
        assert_eq!(min_max(HalfOp::Max, F16, 0x8000, 0x0000), 0x0000);
        assert_eq!(min_max(HalfOp::Min, F16, 0x0000, 0x8000), 0x8000);
    }
}
