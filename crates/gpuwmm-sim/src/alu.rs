//! Pure arithmetic: the value semantics of PTX integer, float, comparison, conversion and
//! bit-field instructions on `u64` register slots.
//!
//! Kept apart from the interpreter so that each operation is a small, unit-tested function.
//! Register convention: a slot holds the value's bit pattern in its low `bits`; readers normalise
//! (mask or sign-extend) to the width of their own type, writers mask to theirs.

use super::isa::*;
use super::rounding;

#[inline]
pub fn mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[inline]
pub fn sext(v: u64, bits: u8) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let shift = 64 - bits as u32;
        ((v << shift) as i64) >> shift
    }
}

/// A value moved into a register of type `ty` (`mov`, `selp`): cut to the type's width, except a
/// float, whose bits are kept as they are.
#[inline]
pub fn moved(ty: Ty, v: u64) -> u64 {
    if ty.is_float() {
        v
    } else {
        v & mask(ty.bits)
    }
}

/// A loaded value in its destination register: sign-extended for `.s` types, else as read.
#[inline]
pub fn extend(ty: Ty, v: u64) -> u64 {
    if ty.signed() {
        sext(v, ty.bits) as u64
    } else {
        v
    }
}

/// The value as the type reads it, widened to 64 bits (sign-extended for `.s` types).
#[inline]
pub fn norm(v: u64, ty: Ty) -> u64 {
    if ty.signed() {
        sext(v, ty.bits) as u64
    } else {
        v & mask(ty.bits)
    }
}

#[inline]
pub fn f32v(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

#[inline]
pub fn f64v(v: u64) -> f64 {
    f64::from_bits(v)
}

/// A float of type `ty` as f64 (exact).
#[inline]
pub fn to_f64(v: u64, ty: Ty) -> f64 {
    if ty.bits == 32 {
        f64::from(f32v(v))
    } else {
        f64v(v)
    }
}

/// Division by zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DivByZero;

/// Two-operand integer (and predicate) operations.
#[inline]
pub fn int_op(op: IntOp, ty: Ty, a: u64, b: u64) -> Result<u64, DivByZero> {
    let bits = ty.bits;
    let signed = ty.signed();
    let (sa, sb) = (sext(a, bits), sext(b, bits));
    let (ua, ub) = (a & mask(bits), b & mask(bits));
    let r = match op {
        IntOp::Add => a.wrapping_add(b),
        IntOp::Sub => a.wrapping_sub(b),
        IntOp::AddSat => (sa as i32).saturating_add(sb as i32) as u32 as u64,
        IntOp::SubSat => (sa as i32).saturating_sub(sb as i32) as u32 as u64,
        IntOp::MulLo => a.wrapping_mul(b),
        IntOp::MulHi => {
            if signed {
                ((i128::from(sa) * i128::from(sb)) >> bits) as u64
            } else {
                ((u128::from(ua) * u128::from(ub)) >> bits) as u64
            }
        }
        IntOp::Div | IntOp::Rem if ub == 0 => return Err(DivByZero),
        IntOp::Div if signed => sa.wrapping_div(sb) as u64,
        IntOp::Div => ua / ub,
        IntOp::Rem if signed => sa.wrapping_rem(sb) as u64,
        IntOp::Rem => ua % ub,
        IntOp::Min if signed => sa.min(sb) as u64,
        IntOp::Min => ua.min(ub),
        IntOp::Max if signed => sa.max(sb) as u64,
        IntOp::Max => ua.max(ub),
        IntOp::And => a & b,
        IntOp::Or => a | b,
        IntOp::Xor => a ^ b,
        IntOp::Shl => {
            let n = b & 0xffff_ffff;
            if n >= u64::from(bits) {
                0
            } else {
                a << n
            }
        }
        IntOp::Shr => {
            let n = (b & 0xffff_ffff).min(u64::from(bits));
            if signed {
                (sa >> n.min(63)) as u64
            } else if n >= u64::from(bits) {
                0
            } else {
                ua >> n
            }
        }
    };
    Ok(r & mask(bits))
}

/// `mul.wide`: a `bits`-wide product of two `bits`-wide sources.
#[inline]
pub fn mul_wide(signed: bool, bits: u8, a: u64, b: u64) -> u64 {
    if signed {
        sext(a, bits).wrapping_mul(sext(b, bits)) as u64 & mask(bits * 2)
    } else {
        (a & mask(bits)).wrapping_mul(b & mask(bits)) & mask(bits * 2)
    }
}

#[inline]
fn sat01(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// A float register value with a subnormal flushed to a zero of the same sign when `ftz`.
#[inline]
pub fn flushed(v: u64, ty: Ty, ftz: bool) -> u64 {
    match (ftz, ty.bits) {
        (false, _) => v,
        (true, 32) => u64::from(rounding::flush(f32v(v), true).to_bits()),
        (true, _) => rounding::flush(f64v(v), true).to_bits(),
    }
}

/// Two-operand float operations.
#[inline]
pub fn float_op(op: FloatOp, ty: Ty, mode: FloatMode, sat: bool, a: u64, b: u64) -> u64 {
    if ty.bits == 32 {
        let x = rounding::flush(f32v(a), mode.ftz);
        let y = rounding::flush(f32v(b), mode.ftz);
        let mut r = rounding::flush(float_arith(op, mode.round, x, y), mode.ftz);
        if sat {
            r = sat01(f64::from(r)) as f32;
        }
        u64::from(r.to_bits())
    } else {
        let x = rounding::flush(f64v(a), mode.ftz);
        let y = rounding::flush(f64v(b), mode.ftz);
        let mut r = rounding::flush(float_arith(op, mode.round, x, y), mode.ftz);
        if sat {
            r = sat01(r);
        }
        r.to_bits()
    }
}

/// A two-operand float operation in either width (min, max and copysign are exact, so
/// `round` only matters to the others).
fn float_arith<F: rounding::Binary + FloatExtras>(op: FloatOp, round: FloatRound, x: F, y: F) -> F {
    match op {
        FloatOp::Add => rounding::add(x, y, round),
        FloatOp::Sub => rounding::add(x, -y, round),
        FloatOp::Mul => rounding::mul(x, y, round),
        FloatOp::Div => rounding::div(x, y, round),
        FloatOp::Min => x.minimum_number(y),
        FloatOp::Max => x.maximum_number(y),
        FloatOp::CopySign => y.sign_of(x),
    }
}

/// What [`float_arith`] needs beyond [`rounding::Binary`]: Rust's `min`, `max`, `copysign`.
trait FloatExtras {
    fn minimum_number(self, other: Self) -> Self;
    fn maximum_number(self, other: Self) -> Self;
    /// `self` with the sign of `sign`.
    fn sign_of(self, sign: Self) -> Self;
}

macro_rules! float_extras {
    ($f:ty) => {
        impl FloatExtras for $f {
            fn minimum_number(self, other: Self) -> Self {
                self.min(other)
            }
            fn maximum_number(self, other: Self) -> Self {
                self.max(other)
            }
            fn sign_of(self, sign: Self) -> Self {
                self.copysign(sign)
            }
        }
    };
}

float_extras!(f32);
float_extras!(f64);

/// Fused multiply-add.
#[inline]
pub fn fma(ty: Ty, mode: FloatMode, sat: bool, a: u64, b: u64, c: u64) -> u64 {
    let ftz = mode.ftz;
    if ty.bits == 32 {
        let flush = |v| rounding::flush(f32v(v), ftz);
        let (x, y, z) = (flush(a), flush(b), flush(c));
        let r = rounding::flush(rounding::fma(x, y, z, mode.round), ftz);
        let r = if sat { sat01(f64::from(r)) as f32 } else { r };
        u64::from(r.to_bits())
    } else {
        let flush = |v| rounding::flush(f64v(v), ftz);
        let (x, y, z) = (flush(a), flush(b), flush(c));
        let r = rounding::flush(rounding::fma(x, y, z, mode.round), ftz);
        if sat { sat01(r) } else { r }.to_bits()
    }
}

/// Integer `mad`.
#[inline]
pub fn mad(mode: MadMode, ty: Ty, a: u64, b: u64, c: u64) -> u64 {
    match mode {
        MadMode::Lo => a.wrapping_mul(b).wrapping_add(c) & mask(ty.bits),
        MadMode::Hi => {
            let hi = int_op(IntOp::MulHi, ty, a, b).unwrap_or(0);
            hi.wrapping_add(c) & mask(ty.bits)
        }
        MadMode::Wide => mul_wide(ty.signed(), ty.bits, a, b).wrapping_add(c) & mask(ty.bits * 2),
    }
}

/// One-operand operations.
pub fn unary(op: UnOp, ty: Ty, mode: FloatMode, a: u64) -> u64 {
    if ty.is_float() {
        return float_unary(op, ty, mode, a);
    }
    let bits = ty.bits;
    let r = match op {
        UnOp::Not if ty.kind == Kind::Pred => (a & 1) ^ 1,
        UnOp::Not => !a,
        UnOp::CNot => u64::from(a & mask(bits) == 0),
        UnOp::Neg => (a as i64).wrapping_neg() as u64,
        UnOp::Abs => sext(a, bits).unsigned_abs(),
        UnOp::Popc => return u64::from((a & mask(bits)).count_ones()),
        UnOp::Clz => return u64::from((a & mask(bits)).leading_zeros() - (64 - u32::from(bits))),
        UnOp::Brev => (a & mask(bits)).reverse_bits() >> (64 - u32::from(bits)),
        _ => a,
    };
    r & mask(bits)
}

/// Float one-operand operations; only `sqrt` and `rcp` round by `mode.round` (the decoder
/// refuses a directed rounding on the others).
fn float_unary(op: UnOp, ty: Ty, mode: FloatMode, a: u64) -> u64 {
    // one body for both widths: Rust's f32 functions must be used for f32 (going through f64
    // would round differently)
    macro_rules! in_width {
        ($value:expr) => {{
            let x = rounding::flush($value, mode.ftz);
            let r = match op {
                UnOp::Neg => -x,
                UnOp::Abs => x.abs(),
                UnOp::Sqrt => rounding::sqrt(x, mode.round),
                UnOp::Rcp => rounding::rcp(x, mode.round),
                UnOp::Rsqrt => 1.0 / x.sqrt(),
                UnOp::Ex2 => x.exp2(),
                UnOp::Lg2 => x.log2(),
                UnOp::Sin => x.sin(),
                UnOp::Cos => x.cos(),
                _ => x,
            };
            rounding::flush(r, mode.ftz)
        }};
    }
    if ty.bits == 32 {
        u64::from(in_width!(f32v(a)).to_bits())
    } else {
        in_width!(f64v(a)).to_bits()
    }
}

/// A comparison of `setp`/`set`.
#[inline]
pub fn compare(cmp: Cmp, ty: Ty, ftz: bool, a: u64, b: u64) -> bool {
    if ty.is_float() {
        let x = to_f64(flushed(a, ty, ftz), ty);
        let y = to_f64(flushed(b, ty, ftz), ty);
        let unordered = x.is_nan() || y.is_nan();
        return match cmp {
            Cmp::Eq => x == y,
            Cmp::Ne => !unordered && x != y,
            Cmp::Lt | Cmp::Lo => x < y,
            Cmp::Le | Cmp::Ls => x <= y,
            Cmp::Gt | Cmp::Hi => x > y,
            Cmp::Ge | Cmp::Hs => x >= y,
            Cmp::Equ => unordered || x == y,
            Cmp::Neu => unordered || x != y,
            Cmp::Ltu => unordered || x < y,
            Cmp::Leu => unordered || x <= y,
            Cmp::Gtu => unordered || x > y,
            Cmp::Geu => unordered || x >= y,
            Cmp::Num => !unordered,
            Cmp::Nan => unordered,
        };
    }
    let (sa, sb) = (sext(a, ty.bits), sext(b, ty.bits));
    let (ua, ub) = (a & mask(ty.bits), b & mask(ty.bits));
    let signed = ty.signed();
    match cmp {
        Cmp::Eq | Cmp::Equ => ua == ub,
        Cmp::Ne | Cmp::Neu => ua != ub,
        Cmp::Lt | Cmp::Ltu if signed => sa < sb,
        Cmp::Le | Cmp::Leu if signed => sa <= sb,
        Cmp::Gt | Cmp::Gtu if signed => sa > sb,
        Cmp::Ge | Cmp::Geu if signed => sa >= sb,
        Cmp::Lt | Cmp::Ltu | Cmp::Lo => ua < ub,
        Cmp::Le | Cmp::Leu | Cmp::Ls => ua <= ub,
        Cmp::Gt | Cmp::Gtu | Cmp::Hi => ua > ub,
        Cmp::Ge | Cmp::Geu | Cmp::Hs => ua >= ub,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

impl Cmp {
    /// `setp.<cmp>.s32 a, b`: the comparison of two signed 32-bit integers.
    pub fn holds_s32(self, a: i32, b: i32) -> bool {
        let s32 = Ty {
            kind: Kind::S,
            bits: 32,
        };
        compare(self, s32, false, u64::from(a as u32), u64::from(b as u32))
    }
}

/// Applies `setp`'s `.bop [!]c`.
#[inline]
pub fn combine(r: bool, op: BoolOp, c: bool) -> bool {
    match op {
        BoolOp::And => r && c,
        BoolOp::Or => r || c,
        BoolOp::Xor => r ^ c,
    }
}

#[inline]
pub fn round_float(x: f64, round: Round) -> f64 {
    match round {
        Round::Default => x,
        Round::Nearest => x.round_ties_even(),
        Round::Zero => x.trunc(),
        Round::Down => x.floor(),
        Round::Up => x.ceil(),
    }
}

/// `cvt` between any two non-predicate types: `round` is the integer rounding (`.rni` ...),
/// `mode` the float result's rounding and `.ftz` (which flushes `f32` sides only).
pub fn cvt(dst: Ty, src: Ty, round: Round, mode: FloatMode, sat: bool, a: u64) -> u64 {
    let a = if src.is_float() {
        flushed(a, src, mode.ftz && src.bits == 32)
    } else {
        a
    };
    let v = match (src.is_float(), dst.is_float()) {
        (false, false) => return int_to_int(dst, src, sat, a),
        (false, true) => {
            let v = norm(a, src);
            let wide = if src.signed() {
                i128::from(v as i64)
            } else {
                i128::from(v)
            };
            int_to_float(dst, wide, mode.round)
        }
        (true, false) => return float_to_int(dst, src, round, a),
        (true, true) => {
            let mut x = round_float(to_f64(a, src), round);
            if sat {
                x = sat01(x);
            }
            if dst.bits == 32 {
                u64::from(rounding::narrow(x, mode.round).to_bits())
            } else {
                x.to_bits()
            }
        }
    };
    flushed(v, dst, mode.ftz && dst.bits == 32)
}

fn int_to_int(dst: Ty, src: Ty, sat: bool, a: u64) -> u64 {
    let v = norm(a, src);
    if !sat {
        return v & mask(dst.bits);
    }
    let wide = if src.signed() {
        i128::from(v as i64)
    } else {
        i128::from(v)
    };
    let (lo, hi) = int_range(dst);
    (wide.clamp(lo, hi) as u64) & mask(dst.bits)
}

/// An integer as a float of type `dst`, rounded once (never through `f64` for `f32`, which
/// could round twice).
fn int_to_float(dst: Ty, v: i128, round: FloatRound) -> u64 {
    if dst.bits == 32 {
        u64::from(rounding::int_to_f32(v, round).to_bits())
    } else {
        rounding::int_to_f64(v, round).to_bits()
    }
}

fn float_to_int(dst: Ty, src: Ty, round: Round, a: u64) -> u64 {
    let round = if round == Round::Default {
        Round::Nearest
    } else {
        round
    };
    let x = round_float(to_f64(a, src), round);
    if x.is_nan() {
        return 0;
    }
    let (lo, hi) = int_range(dst);
    let clamped = if x <= lo as f64 {
        lo
    } else if x >= hi as f64 {
        hi
    } else {
        x as i128
    };
    (clamped as u64) & mask(dst.bits)
}

fn int_range(ty: Ty) -> (i128, i128) {
    let bits = u32::from(ty.bits);
    if ty.signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// `bfe`: extract `len` bits at `pos`, zero- or sign-filled.
pub fn bfe(ty: Ty, a: u64, pos: u64, len: u64) -> u64 {
    let bits = u64::from(ty.bits);
    let (pos, len) = (pos & 0xff, len & 0xff);
    let msb = bits - 1;
    let sbit = if ty.signed() && len != 0 {
        (a >> (pos + len - 1).min(msb)) & 1
    } else {
        0
    };
    let mut d = 0u64;
    for i in 0..bits {
        let bit = if i < len && pos + i <= msb {
            (a >> (pos + i)) & 1
        } else {
            sbit
        };
        d |= bit << i;
    }
    d
}

/// `bfi`: insert the low `len` bits of `f` into `b` at `pos`.
pub fn bfi(ty: Ty, f: u64, b: u64, pos: u64, len: u64) -> u64 {
    let bits = u64::from(ty.bits);
    let (pos, len) = (pos & 0xff, len & 0xff);
    let mut d = b & mask(ty.bits);
    let mut i = 0;
    while i < len && pos + i < bits {
        let bit = (f >> i) & 1;
        d = (d & !(1 << (pos + i))) | (bit << (pos + i));
        i += 1;
    }
    d
}

/// `prmt.b32` in its default mode.
pub fn prmt(a: u64, b: u64, c: u64) -> u64 {
    let bytes = (a & 0xffff_ffff) | ((b & 0xffff_ffff) << 32);
    let mut d = 0u64;
    for k in 0..4 {
        let sel = (c >> (4 * k)) & 0xf;
        let byte = (bytes >> (8 * (sel & 7))) & 0xff;
        let byte = if sel & 8 != 0 {
            if byte & 0x80 != 0 {
                0xff
            } else {
                0
            }
        } else {
            byte
        };
        d |= byte << (8 * k);
    }
    d
}

/// Atomic read-modify-write: the new value from the old one.
pub fn atom(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    let m = mask(ty.bits);
    let r = match op {
        AtomOp::Add if ty.is_float() => {
            float_op(FloatOp::Add, ty, FloatMode::default(), false, old, b)
        }
        AtomOp::Add => old.wrapping_add(b),
        AtomOp::Exch => b,
        AtomOp::Cas => {
            if old & m == b & m {
                c
            } else {
                old
            }
        }
        AtomOp::Min => int_op(IntOp::Min, ty, old, b).unwrap_or(old),
        AtomOp::Max => int_op(IntOp::Max, ty, old, b).unwrap_or(old),
        AtomOp::Inc => {
            if old & m >= b & m {
                0
            } else {
                old + 1
            }
        }
        AtomOp::Dec => {
            if old & m == 0 || old & m > b & m {
                b
            } else {
                old - 1
            }
        }
        AtomOp::And => old & b,
        AtomOp::Or => old | b,
        AtomOp::Xor => old ^ b,
        AtomOp::HalfAdd(half) => crate::half::atomic_add(half, old, b),
    };
    r & m
}

/// `shf.{l,r}`: the 64-bit value `b:a` shifted by `c` (modulo 32 when wrapping, at most 32
/// when clamping); the upper word of a left shift, the lower of a right shift.
pub fn funnel_shift(left: bool, clamp: bool, a: u64, b: u64, c: u64) -> u64 {
    let n = if clamp {
        (c as u32).min(32)
    } else {
        c as u32 & 31
    };
    let joined = (b & 0xffff_ffff) << 32 | (a & 0xffff_ffff);
    if left {
        (joined << n) >> 32
    } else {
        (joined >> n) & 0xffff_ffff
    }
}

/// `dp4a` and `dp2a.{lo,hi}`: `c` plus the products of `a`'s bytes (or 16-bit halves, for
/// `pairs`) with `b`'s bytes, each extended as `signs` (a's, b's) says; 32 bits, wrapping.
pub fn dot(pairs: bool, hi: bool, signs: (bool, bool), a: u64, b: u64, c: u64) -> u64 {
    let element = |v: u64, bits: u8, k: u32, signed: bool| {
        let e = (v >> (u32::from(bits) * k)) & mask(bits);
        if signed {
            sext(e, bits)
        } else {
            e as i64
        }
    };
    let (a_bits, n, b_first) = if pairs {
        (16, 2, if hi { 2 } else { 0 })
    } else {
        (8, 4, 0)
    };
    let sum = (0..n).fold(c as i64, |acc, k| {
        acc.wrapping_add(element(a, a_bits, k, signs.0) * element(b, 8, b_first + k, signs.1))
    });
    sum as u64 & 0xffff_ffff
}

/// A SIMD video instruction (merge form, every element written): each of the `lanes`
/// elements of `a` and `b`, extended as `signs` (a, b, d) say, combined by `op` and, with
/// `sat`, clamped to the range of `d`'s element type.
pub fn simd(op: SimdOp, lanes: u8, signs: [bool; 3], sat: bool, a: u64, b: u64) -> u64 {
    let bits = 32 / lanes;
    let element = |v: u64, k: u8, signed: bool| {
        let e = (v >> (u32::from(bits) * u32::from(k))) & mask(bits);
        if signed {
            sext(e, bits)
        } else {
            e as i64
        }
    };
    let (lo, hi) = match signs[2] {
        true => (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1),
        false => (0, (1i64 << bits) - 1),
    };
    (0..lanes).fold(0, |acc, k| {
        let (x, y) = (element(a, k, signs[0]), element(b, k, signs[1]));
        let r = match op {
            SimdOp::Add => x + y,
            SimdOp::Sub => x - y,
            SimdOp::Avrg => (x + y + 1) >> 1,
            SimdOp::Absdiff => (x - y).abs(),
            SimdOp::Min => x.min(y),
            SimdOp::Max => x.max(y),
        };
        let r = if sat { r.clamp(lo, hi) } else { r };
        acc | ((r as u64) & mask(bits)) << (u32::from(bits) * u32::from(k))
    })
}

/// `lop3`: each result bit is bit `4a + 2b + c` of `lut`, for the bits of `a`, `b`, `c` there.
pub fn lop3(a: u64, b: u64, c: u64, lut: u8) -> u64 {
    let pick = |v: u64, set: bool| if set { v } else { !v };
    (0..8u8).filter(|i| lut >> i & 1 == 1).fold(0, |acc, i| {
        acc | (pick(a, i & 4 != 0) & pick(b, i & 2 != 0) & pick(c, i & 1 != 0))
    }) & 0xffff_ffff
}

/// `fns`: the bit position of the `offset`-th set bit of `mask`, searching up from `base`
/// (down when `offset` is negative; `offset` 0: `base` itself if set); all ones if none.
pub fn fns(mask: u64, base: u64, offset: u64) -> u64 {
    let offset = offset as u32 as i32;
    let set = |pos: i64| (0..32).contains(&pos) && mask >> pos & 1 == 1;
    let base = i64::from(base as u32);
    if offset == 0 {
        return if set(base) { base as u64 } else { 0xffff_ffff };
    }
    let step = if offset > 0 { 1 } else { -1 };
    let mut left = offset.unsigned_abs();
    let mut pos = base;
    while (0..32).contains(&pos) {
        if set(pos) {
            left -= 1;
            if left == 0 {
                return pos as u64;
            }
        }
        pos += step;
    }
    0xffff_ffff
}

/// Carry-flag arithmetic: the result and the carry (or, for subtraction, borrow) out.
pub fn carry(op: CarryOp, ty: Ty, a: u64, b: u64, c: u64, cf: u64) -> (u64, u64) {
    let bits = u32::from(ty.bits);
    let m = u128::from(mask(ty.bits));
    let (a, b, c, cf) = (
        u128::from(a) & m,
        u128::from(b) & m,
        u128::from(c) & m,
        u128::from(cf),
    );
    let sum = match op {
        CarryOp::Add => a + b + cf,
        CarryOp::Sub => {
            let borrow = u64::from(a < b + cf);
            return ((a.wrapping_sub(b + cf) & m) as u64, borrow);
        }
        CarryOp::MadLo => ((a * b) & m) + c + cf,
        CarryOp::MadHi if ty.signed() => {
            let (sa, sb) = (sext(a as u64, ty.bits), sext(b as u64, ty.bits));
            (((i128::from(sa) * i128::from(sb)) >> bits) as u128 & m) + c + cf
        }
        CarryOp::MadHi => ((a * b) >> bits) + c + cf,
    };
    ((sum & m) as u64, (sum >> bits) as u64 & 1)
}

/// `sad`: `c + |a - b|`.
pub fn sad(ty: Ty, a: u64, b: u64, c: u64) -> u64 {
    let diff = if ty.signed() {
        sext(a, ty.bits).abs_diff(sext(b, ty.bits))
    } else {
        (a & mask(ty.bits)).abs_diff(b & mask(ty.bits))
    };
    c.wrapping_add(diff) & mask(ty.bits)
}

/// `bfind`: the position of the most significant non-sign bit (or, with `shiftamt`, the left
/// shift that brings it to the top); `0xffffffff` when there is none.
pub fn bfind(ty: Ty, shiftamt: bool, a: u64) -> u64 {
    let v = norm(a, ty);
    let v = if ty.signed() && (v as i64) < 0 { !v } else { v } & mask(ty.bits);
    if v == 0 {
        return 0xffff_ffff;
    }
    let pos = 63 - u64::from(v.leading_zeros());
    if shiftamt {
        u64::from(ty.bits) - 1 - pos
    } else {
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ty(kind: Kind, bits: u8) -> Ty {
        Ty { kind, bits }
    }

    const S32: Ty = ty(Kind::S, 32);
    const U32: Ty = ty(Kind::U, 32);
    const U64: Ty = ty(Kind::U, 64);
    const S64: Ty = ty(Kind::S, 64);
    const F32: Ty = ty(Kind::F, 32);
    const U8: Ty = ty(Kind::U, 8);
    const S8: Ty = ty(Kind::S, 8);
    const F64: Ty = ty(Kind::F, 64);

    fn m32(x: i32) -> u64 {
        x as u32 as u64
    }

    #[test]
    fn integer_ops() {
        assert_eq!(int_op(IntOp::Add, U32, 0xffff_ffff, 1), Ok(0));
        assert_eq!(int_op(IntOp::Div, S32, m32(-7), 2), Ok(m32(-3)));
        assert_eq!(int_op(IntOp::Rem, S32, m32(-7), 2), Ok(m32(-1)));
        assert_eq!(int_op(IntOp::Div, U32, 7, 0), Err(DivByZero));
        assert_eq!(int_op(IntOp::Min, S32, m32(-1), 3), Ok(m32(-1)));
        assert_eq!(int_op(IntOp::Min, U32, m32(-1), 3), Ok(3));
        assert_eq!(int_op(IntOp::Shr, S32, m32(-8), 1), Ok(m32(-4)));
        assert_eq!(int_op(IntOp::Shr, S32, m32(-8), 40), Ok(m32(-1)));
        assert_eq!(int_op(IntOp::Shr, U32, m32(-8), 1), Ok(0x7fff_fffc));
        assert_eq!(int_op(IntOp::Shl, U32, 1, 32), Ok(0));
        assert_eq!(int_op(IntOp::MulHi, U32, 0x8000_0000, 4), Ok(2));
        assert_eq!(int_op(IntOp::MulHi, S32, m32(-2), 0x8000_0000), Ok(1));
        assert_eq!(int_op(IntOp::MulHi, U64, u64::MAX, 2), Ok(1));
        assert_eq!(int_op(IntOp::AddSat, S32, 0x7fff_ffff, 1), Ok(0x7fff_ffff));
        assert_eq!(mul_wide(true, 32, m32(-3), 4), (-12i64) as u64);
        assert_eq!(mul_wide(false, 32, 0xffff_ffff, 2), 0x1_ffff_fffe);
        assert_eq!(mad(MadMode::Lo, S32, 3, 4, 5), 17);
    }

    #[test]
    fn unary_ops() {
        assert_eq!(unary(UnOp::Popc, U32, FloatMode::default(), 0xf0f0), 8);
        assert_eq!(unary(UnOp::Clz, U32, FloatMode::default(), 1), 31);
        assert_eq!(unary(UnOp::Clz, U64, FloatMode::default(), 1), 63);
        assert_eq!(unary(UnOp::Brev, U32, FloatMode::default(), 1), 0x8000_0000);
        assert_eq!(unary(UnOp::Neg, S32, FloatMode::default(), 5), m32(-5));
        assert_eq!(unary(UnOp::Abs, S32, FloatMode::default(), m32(-5)), 5);
        assert_eq!(unary(UnOp::Not, Ty::PRED, FloatMode::default(), 1), 0);
        assert_eq!(unary(UnOp::CNot, U32, FloatMode::default(), 0), 1);
        assert_eq!(
            f32v(unary(
                UnOp::Sqrt,
                F32,
                FloatMode::default(),
                u64::from(9f32.to_bits())
            )),
            3.0
        );
        assert_eq!(
            f32v(unary(
                UnOp::Neg,
                F32,
                FloatMode::default(),
                u64::from(1f32.to_bits())
            )),
            -1.0
        );
    }

    #[test]
    fn comparisons() {
        assert!(compare(Cmp::Lt, S32, false, m32(-1), 0));
        assert!(!compare(Cmp::Lt, U32, false, m32(-1), 0));
        assert!(compare(Cmp::Hi, U32, false, m32(-1), 0));
        let nan = u64::from(f32::NAN.to_bits());
        let one = u64::from(1f32.to_bits());
        assert!(!compare(Cmp::Lt, F32, false, nan, one));
        assert!(compare(Cmp::Ltu, F32, false, nan, one));
        assert!(!compare(Cmp::Ne, F32, false, nan, one));
        assert!(compare(Cmp::Neu, F32, false, nan, one));
        assert!(compare(Cmp::Nan, F32, false, nan, one));
    }

    #[test]
    fn s32_comparisons_are_signed() {
        assert!(Cmp::Lt.holds_s32(-1, 0));
        assert!(Cmp::Ge.holds_s32(i32::MAX, i32::MIN));
        assert!(
            !Cmp::Lo.holds_s32(-1, 0),
            "`lo` is unsigned whatever the type"
        );
        assert!(Cmp::Eq.holds_s32(-7, -7) && !Cmp::Ne.holds_s32(-7, -7));
    }

    #[test]
    fn every_comparison_parses_from_its_name() {
        for cmp in Cmp::ALL {
            assert_eq!(cmp.name().parse::<Cmp>(), Ok(cmp));
        }
        assert_eq!("lte".parse::<Cmp>(), Err(()));
    }

    #[test]
    fn conversions() {
        assert_eq!(
            cvt(
                S64,
                S32,
                Round::Default,
                FloatMode::default(),
                false,
                m32(-2)
            ),
            (-2i64) as u64
        );
        assert_eq!(
            cvt(
                U64,
                U32,
                Round::Default,
                FloatMode::default(),
                false,
                m32(-2)
            ),
            0xffff_fffe
        );
        assert_eq!(
            cvt(U8, U32, Round::Default, FloatMode::default(), false, 300),
            44
        );
        assert_eq!(
            cvt(U8, S32, Round::Default, FloatMode::default(), true, 300),
            255
        );
        assert_eq!(
            cvt(
                S8,
                S32,
                Round::Default,
                FloatMode::default(),
                true,
                m32(-300)
            ),
            0x80
        );
        let f = |x: f32| u64::from(x.to_bits());
        assert_eq!(
            cvt(S32, F32, Round::Zero, FloatMode::default(), false, f(-2.7)),
            m32(-2)
        );
        assert_eq!(
            cvt(
                S32,
                F32,
                Round::Nearest,
                FloatMode::default(),
                false,
                f(2.5)
            ),
            2
        );
        assert_eq!(
            cvt(S32, F32, Round::Down, FloatMode::default(), false, f(-2.5)),
            m32(-3)
        );
        assert_eq!(
            cvt(U32, F32, Round::Zero, FloatMode::default(), false, f(-2.5)),
            0
        );
        assert_eq!(
            cvt(U32, F32, Round::Zero, FloatMode::default(), false, f(1e20)),
            0xffff_ffff
        );
        assert_eq!(
            cvt(
                F32,
                S32,
                Round::Default,
                FloatMode::default(),
                false,
                m32(-3)
            ),
            f(-3.0)
        );
        let d = cvt(
            F64,
            F32,
            Round::Default,
            FloatMode::default(),
            false,
            f(1.5),
        );
        assert_eq!(f64v(d), 1.5);
        assert_eq!(
            cvt(F32, F32, Round::Zero, FloatMode::default(), false, f(2.7)),
            f(2.0)
        );
    }

    #[test]
    fn bit_fields() {
        assert_eq!(bfe(U32, 0xabcd, 4, 8), 0xbc);
        assert_eq!(bfe(S32, 0x80, 4, 4), 0xffff_fff8);
        assert_eq!(bfi(U32, 0xf, 0, 4, 4), 0xf0);
        assert_eq!(prmt(0x4433_2211, 0x8877_6655, 0x3210), 0x4433_2211);
        assert_eq!(prmt(0x4433_2211, 0x8877_6655, 0x7654), 0x8877_6655);
        assert_eq!(prmt(0x0000_0080, 0, 0x0008), 0x8080_80ff);
    }

    #[test]
    fn carries_sad_bfind() {
        assert_eq!(carry(CarryOp::Add, U32, 0xffff_ffff, 1, 0, 0), (0, 1));
        assert_eq!(carry(CarryOp::Add, U32, 1, 1, 0, 1), (3, 0));
        assert_eq!(carry(CarryOp::Sub, U32, 0, 1, 0, 0), (0xffff_ffff, 1));
        assert_eq!(carry(CarryOp::Sub, U32, 5, 1, 0, 1), (3, 0));
        assert_eq!(carry(CarryOp::MadHi, U32, 0x8000_0000, 4, 1, 1), (4, 0));
        assert_eq!(
            carry(CarryOp::MadLo, U32, 0x8000_0000, 2, 0xffff_ffff, 1),
            (0, 1)
        );
        assert_eq!(sad(S32, m32(-3), 4, 10), 17);
        assert_eq!(bfind(U32, false, 0x10), 4);
        assert_eq!(bfind(U32, true, 0x10), 27);
        assert_eq!(bfind(U32, false, 0), 0xffff_ffff);
        assert_eq!(bfind(S32, false, m32(-1)), 0xffff_ffff);
        assert_eq!(bfind(S32, false, m32(-2)), 0);
    }

    #[test]
    fn atomics() {
        assert_eq!(atom(AtomOp::Cas, U32, 0, 0, 1), 1);
        assert_eq!(atom(AtomOp::Cas, U32, 2, 0, 1), 2);
        assert_eq!(atom(AtomOp::Inc, U32, 3, 3, 0), 0);
        assert_eq!(atom(AtomOp::Inc, U32, 2, 3, 0), 3);
        assert_eq!(atom(AtomOp::Dec, U32, 0, 3, 0), 3);
        assert_eq!(atom(AtomOp::Max, S64, (-1i64) as u64, 2, 0), 2);
        assert_eq!(
            atom(
                AtomOp::Add,
                F32,
                u64::from(1f32.to_bits()),
                u64::from(2f32.to_bits()),
                0
            ),
            u64::from(3f32.to_bits())
        );
    }
}
