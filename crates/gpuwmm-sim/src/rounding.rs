//! Exact float arithmetic in the rounding modes PTX names and Rust's operators lack: `.rz`,
//! `.rm`, `.rp` (Rust rounds to nearest only), and `.ftz` subnormal flushing.
//!
//! Without this the simulator would accept `add.rz.f32` and compute it to nearest, a result
//! that differs from the GPU's in the last place. Each operation here first takes Rust's
//! correctly rounded to-nearest result `r`, then finds the sign of *exact result − r* with
//! integer arithmetic only (a wide fixed-point sum of terms, each an integer mantissa times a
//! power of two, see [`sign_of_sum`]) and moves `r` to its neighbour when the mode asks for
//! the other side. So the result is the one IEEE 754 defines for the mode, with subnormals,
//! signed zeros and overflow; no floating-point shortcut is trusted.
//!
//! `.ftz` ([`flush`]) turns subnormal inputs and results into zeros of the same sign; a result
//! is flushed when it is subnormal *after* rounding.

use super::isa::FloatRound;
use std::cmp::Ordering;
use std::ops::{Add, Div, Mul, Neg};

/// An exact finite value `±mant · 2^exp`.
#[derive(Debug, Clone, Copy)]
pub struct Term {
    negative: bool,
    mant: u128,
    exp: i32,
}

impl Term {
    /// An integer, exactly.
    pub fn int(v: i128) -> Term {
        Term {
            negative: v < 0,
            mant: v.unsigned_abs(),
            exp: 0,
        }
    }

    fn negated(self) -> Term {
        Term {
            negative: !self.negative,
            ..self
        }
    }

    /// The exact product (mantissas of at most 64 bits each, so it fits in 128).
    fn times(self, other: Term) -> Term {
        Term {
            negative: self.negative ^ other.negative,
            mant: self.mant * other.mant,
            exp: self.exp + other.exp,
        }
    }
}

/// `f32` and `f64`: what the rounding code needs of a binary float format.
pub trait Binary:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// The largest finite value.
    const MAX: Self;
    /// Positive zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// The value exactly, for a finite value.
    fn term(self) -> Term;
    fn is_finite(self) -> bool;
    fn is_negative(self) -> bool;
    fn is_zero(self) -> bool;
    fn is_subnormal(self) -> bool;
    /// The next value towards +∞.
    fn up(self) -> Self;
    /// The next value towards −∞.
    fn down(self) -> Self;
    /// `self · a + b` with one rounding, to nearest.
    fn fused(self, a: Self, b: Self) -> Self;
    /// The square root, rounded to nearest.
    fn root(self) -> Self;
}

macro_rules! binary_format {
    ($f:ty, $frac:expr, $bias:expr) => {
        impl Binary for $f {
            const MAX: Self = <$f>::MAX;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;

            fn term(self) -> Term {
                let bits = self.to_bits();
                let field = ((bits << 1) >> ($frac + 1)) as i32;
                let fraction = bits & ((1 << $frac) - 1);
                let (mant, exp) = if field == 0 {
                    (fraction, 1 - $bias - $frac)
                } else {
                    (fraction | (1 << $frac), field - $bias - $frac)
                };
                Term {
                    negative: self.is_sign_negative(),
                    mant: u128::from(mant),
                    exp,
                }
            }
            fn is_finite(self) -> bool {
                <$f>::is_finite(self)
            }
            fn is_negative(self) -> bool {
                self.is_sign_negative()
            }
            fn is_zero(self) -> bool {
                self == 0.0
            }
            fn is_subnormal(self) -> bool {
                <$f>::is_subnormal(self)
            }
            fn up(self) -> Self {
                self.next_up()
            }
            fn down(self) -> Self {
                self.next_down()
            }
            fn fused(self, a: Self, b: Self) -> Self {
                self.mul_add(a, b)
            }
            fn root(self) -> Self {
                self.sqrt()
            }
        }
    };
}

binary_format!(f32, 23, 127);
binary_format!(f64, 52, 1023);

/// Limbs of the fixed-point accumulator: products of two `f64`s reach from 2^-2148 to 2^2048.
const LIMBS: usize = 72;
/// The weight of bit 0 of the accumulator is 2^-OFFSET.
const OFFSET: i32 = 2240;

/// The sign of the exact sum of `terms` (two's complement over [`LIMBS`] words).
pub fn sign_of_sum(terms: &[Term]) -> Ordering {
    let mut acc = [0u64; LIMBS];
    for t in terms.iter().filter(|t| t.mant != 0) {
        let pos = usize::try_from(t.exp + OFFSET).expect("term below the accumulator");
        let (limb, shift) = (pos / 64, pos % 64);
        let (lo, hi) = (t.mant as u64, (t.mant >> 64) as u64);
        let words = if shift == 0 {
            [lo, hi, 0]
        } else {
            [
                lo << shift,
                (hi << shift) | (lo >> (64 - shift)),
                hi >> (64 - shift),
            ]
        };
        accumulate(&mut acc, limb, words, t.negative);
    }
    if acc[LIMBS - 1] >> 63 == 1 {
        Ordering::Less
    } else if acc.iter().all(|&w| w == 0) {
        Ordering::Equal
    } else {
        Ordering::Greater
    }
}

/// Adds (or subtracts) three words at `limb`, carrying (or borrowing) to the top.
fn accumulate(acc: &mut [u64; LIMBS], limb: usize, words: [u64; 3], subtract: bool) {
    let mut carry = false;
    for (i, slot) in acc.iter_mut().enumerate().skip(limb) {
        let w = words.get(i - limb).copied().unwrap_or(0);
        if w == 0 && !carry && i >= limb + 3 {
            break;
        }
        let (v, c1) = if subtract {
            slot.overflowing_sub(w)
        } else {
            slot.overflowing_add(w)
        };
        let (v, c2) = if subtract {
            v.overflowing_sub(u64::from(carry))
        } else {
            v.overflowing_add(u64::from(carry))
        };
        *slot = v;
        carry = c1 || c2;
    }
}

/// `r` (the to-nearest result) moved to the neighbour `round` asks for, given the sign of
/// *exact − r*.
fn directed<F: Binary>(r: F, excess: Ordering, round: FloatRound) -> F {
    match (round, excess) {
        (FloatRound::Up, Ordering::Greater) => r.up(),
        (FloatRound::Down, Ordering::Less) => r.down(),
        (FloatRound::Zero, Ordering::Less) if r > F::ZERO => r.down(),
        (FloatRound::Zero, Ordering::Greater) if r < F::ZERO => r.up(),
        _ => r,
    }
}

/// The result when finite operands gave an infinite to-nearest `r`: the exact value lies
/// beyond the largest finite one, on `r`'s side.
fn overflowed<F: Binary>(r: F, round: FloatRound) -> F {
    if round == FloatRound::Nearest {
        return r;
    }
    if r.is_negative() {
        directed(-F::MAX, Ordering::Less, round)
    } else {
        directed(F::MAX, Ordering::Greater, round)
    }
}

/// An exactly zero sum of two addends: `-0` towards −∞ unless both are `+0` (IEEE 754 6.3);
/// `r` is the to-nearest result, which is `+0` in that case and right otherwise.
fn zero_sum<F: Binary>(r: F, both_plus_zero: bool, round: FloatRound) -> F {
    if round == FloatRound::Down && !r.is_negative() && !both_plus_zero {
        -F::ZERO
    } else {
        r
    }
}

/// `x` with a subnormal turned into a zero of the same sign when `ftz`.
pub fn flush<F: Binary>(x: F, ftz: bool) -> F {
    if ftz && x.is_subnormal() {
        if x.is_negative() {
            -F::ZERO
        } else {
            F::ZERO
        }
    } else {
        x
    }
}

fn is_plus_zero<F: Binary>(x: F) -> bool {
    x.is_zero() && !x.is_negative()
}

/// `a + b` rounded by `round` (`a - b` is `add(a, -b)`).
pub fn add<F: Binary>(a: F, b: F, round: FloatRound) -> F {
    let r = a + b;
    if round == FloatRound::Nearest || !a.is_finite() || !b.is_finite() {
        return r;
    }
    if !r.is_finite() {
        return overflowed(r, round);
    }
    let excess = sign_of_sum(&[a.term(), b.term(), r.term().negated()]);
    if excess == Ordering::Equal && r.is_zero() {
        return zero_sum(r, is_plus_zero(a) && is_plus_zero(b), round);
    }
    directed(r, excess, round)
}

/// `a · b` rounded by `round`.
pub fn mul<F: Binary>(a: F, b: F, round: FloatRound) -> F {
    let r = a * b;
    if round == FloatRound::Nearest || !a.is_finite() || !b.is_finite() {
        return r;
    }
    if !r.is_finite() {
        return overflowed(r, round);
    }
    directed(
        r,
        sign_of_sum(&[a.term().times(b.term()), r.term().negated()]),
        round,
    )
}

/// `a / b` rounded by `round`.
pub fn div<F: Binary>(a: F, b: F, round: FloatRound) -> F {
    let r = a / b;
    if round == FloatRound::Nearest || !a.is_finite() || !b.is_finite() || b.is_zero() {
        return r;
    }
    if !r.is_finite() {
        return overflowed(r, round);
    }
    // exact − r = (a − r·b) / b
    let remainder = sign_of_sum(&[a.term(), r.term().times(b.term()).negated()]);
    let excess = if b.is_negative() {
        remainder.reverse()
    } else {
        remainder
    };
    directed(r, excess, round)
}

/// `1 / a` rounded by `round`.
pub fn rcp<F: Binary>(a: F, round: FloatRound) -> F {
    div(F::ONE, a, round)
}

/// `√a` rounded by `round`.
pub fn sqrt<F: Binary>(a: F, round: FloatRound) -> F {
    let r = a.root();
    if round == FloatRound::Nearest || !a.is_finite() || a.is_zero() || a.is_negative() {
        return r;
    }
    // r > 0, so exact − r has the sign of a − r²
    let excess = sign_of_sum(&[a.term(), r.term().times(r.term()).negated()]);
    directed(r, excess, round)
}

/// `a · b + c` with one rounding by `round`.
pub fn fma<F: Binary>(a: F, b: F, c: F, round: FloatRound) -> F {
    let r = a.fused(b, c);
    if round == FloatRound::Nearest || !a.is_finite() || !b.is_finite() || !c.is_finite() {
        return r;
    }
    if !r.is_finite() {
        return overflowed(r, round);
    }
    let product = a.term().times(b.term());
    let excess = sign_of_sum(&[product, c.term(), r.term().negated()]);
    if excess == Ordering::Equal && r.is_zero() {
        let product_plus_zero = (a.is_zero() || b.is_zero()) && !product.negative;
        return zero_sum(r, product_plus_zero && is_plus_zero(c), round);
    }
    directed(r, excess, round)
}

/// An `f64` as `f32` rounded by `round`.
pub fn narrow(x: f64, round: FloatRound) -> f32 {
    let r = x as f32;
    if round == FloatRound::Nearest || !x.is_finite() {
        return r;
    }
    if !r.is_finite() {
        return overflowed(r, round);
    }
    directed(r, sign_of_sum(&[x.term(), r.term().negated()]), round)
}

/// An integer as `f32`, rounded by `round`.
pub fn int_to_f32(v: i128, round: FloatRound) -> f32 {
    let r = v as f32;
    if round == FloatRound::Nearest {
        return r;
    }
    directed(r, sign_of_sum(&[Term::int(v), r.term().negated()]), round)
}

/// An integer as `f64`, rounded by `round`.
pub fn int_to_f64(v: i128, round: FloatRound) -> f64 {
    let r = v as f64;
    if round == FloatRound::Nearest {
        return r;
    }
    directed(r, sign_of_sum(&[Term::int(v), r.term().negated()]), round)
}

#[cfg(test)]
mod tests {
    use super::*;
    use FloatRound::{Down, Nearest, Up, Zero};

    /// 2^-30: far below half an ulp of 1.0f32, so only the directed modes see it.
    const TINY: f32 = 9.313_226e-10;

    #[test]
    fn rn_is_rusts_round_to_nearest_even() {
        assert_eq!(add(1.0f32, TINY, Nearest), 1.0);
        assert_eq!(div(1.0f64, 3.0, Nearest), 1.0 / 3.0);
        assert_eq!(int_to_f32((1 << 24) + 1, Nearest), 16_777_216.0);
        assert_eq!(mul(f32::from_bits(1), 0.5, Nearest), 0.0);
    }

    #[test]
    fn rz_rounds_towards_zero() {
        assert_eq!(add(1.0f32, TINY, Zero), 1.0);
        assert_eq!(add(-1.0f32, -TINY, Zero), -1.0);
        // 1/3 to nearest in f64 lies below the exact value, so it is also the truncation
        assert_eq!(div(1.0f64, 3.0, Zero), 1.0 / 3.0);
        assert_eq!(div(-1.0f64, 3.0, Zero), -1.0 / 3.0);
        // 5/3 to nearest (0x3FFAAAAAAAAAAAAB) lies above it
        assert_eq!(div(5.0f64, 3.0, Zero), (5.0f64 / 3.0).next_down());
        assert_eq!(mul(f32::MAX, 2.0, Zero), f32::MAX);
        assert_eq!(mul(-f32::MAX, 2.0, Zero), -f32::MAX);
        assert_eq!(int_to_f32((1 << 24) + 3, Zero), 16_777_218.0);
        assert_eq!(int_to_f32(-(1 << 24) - 3, Zero), -16_777_218.0);
        assert_eq!(narrow(0.1, Zero), 0.099_999_994);
        assert_eq!(sqrt(2.0f32, Zero).to_bits(), 0x3FB5_04F3);
    }

    #[test]
    fn rm_rounds_towards_minus_infinity() {
        assert_eq!(add(1.0f32, TINY, Down), 1.0);
        assert_eq!(add(-1.0f32, -TINY, Down), (-1.0f32).next_down());
        assert_eq!(mul(-f64::MAX, 2.0, Down), f64::NEG_INFINITY);
        assert_eq!(mul(f64::MAX, 2.0, Down), f64::MAX);
        // an exactly zero sum of opposite addends is -0 towards −∞, +0 otherwise
        assert!(add(1.0f32, -1.0, Down).is_sign_negative());
        assert!(add(1.0f32, -1.0, Zero).is_sign_positive());
        assert!(fma(2.0f64, 3.0, -6.0, Down).is_sign_negative());
        assert!(add(0.0f32, 0.0, Down).is_sign_positive());
        assert_eq!(int_to_f32(-(1 << 24) - 1, Down), -16_777_218.0);
        assert_eq!(narrow(0.1, Down), 0.099_999_994);
        assert_eq!(mul(-f32::from_bits(1), 0.5, Down), -f32::from_bits(1));
    }

    #[test]
    fn rp_rounds_towards_plus_infinity() {
        assert_eq!(add(1.0f32, TINY, Up), 1.0f32.next_up());
        assert_eq!(add(-1.0f32, -TINY, Up), -1.0);
        assert_eq!(mul(f32::MAX, 2.0, Up), f32::INFINITY);
        assert_eq!(mul(-f32::MAX, 2.0, Up), -f32::MAX);
        assert_eq!(mul(f32::from_bits(1), 0.5, Up), f32::from_bits(1));
        assert_eq!(int_to_f32((1 << 24) + 1, Up), 16_777_218.0);
        assert_eq!(
            int_to_f64(i128::from(u64::MAX), Up),
            18_446_744_073_709_551_616.0
        );
        assert_eq!(narrow(0.1, Up), 0.1f32);
        assert_eq!(sqrt(2.0f32, Up).to_bits(), 0x3FB5_04F4);
        assert_eq!(fma(1.0f32, 1.0, TINY, Up), 1.0f32.next_up());
        assert_eq!(rcp(3.0f32, Up), 0.333_333_34);
        assert_eq!(div(1.0f64, 3.0, Up), (1.0f64 / 3.0).next_up());
        assert_eq!(div(1.0f64, -3.0, Up), -1.0 / 3.0);
    }

    #[test]
    fn exact_results_are_the_same_in_every_mode() {
        for round in [Nearest, Zero, Down, Up] {
            assert_eq!(add(1.5f32, 2.25, round), 3.75);
            assert_eq!(mul(-3.0f64, 0.125, round), -0.375);
            assert_eq!(div(1.0f32, 4.0, round), 0.25);
            assert_eq!(sqrt(6.25f64, round), 2.5);
            assert_eq!(fma(3.0f32, 4.0, -2.0, round), 10.0);
            assert_eq!(int_to_f32(-12_345, round), -12_345.0);
            assert!(div(1.0f32, 0.0, round).is_infinite());
            assert!(sqrt(-1.0f64, round).is_nan());
        }
    }

    #[test]
    fn ftz_flushes_subnormals_to_signed_zeros() {
        let sub = f32::from_bits(0x0000_1234);
        assert_eq!(flush(sub, false), sub);
        assert_eq!(flush(sub, true).to_bits(), 0);
        assert_eq!(flush(-sub, true).to_bits(), 0x8000_0000);
        assert_eq!(flush(f32::MIN_POSITIVE, true), f32::MIN_POSITIVE);
        assert_eq!(flush(f64::from_bits(1), true).to_bits(), 0);
    }

    /// A seeded cross-check of `f32` results against `f64` arithmetic, where sums of close
    /// exponents and all products of two `f32`s are exact: the result must be the neighbour
    /// of the exact value the mode names.
    #[test]
    fn f32_directed_results_bracket_the_exact_value() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64; // xorshift seed
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let r = next();
            let x = f32::from_bits((r as u32 & 0x807f_ffff) | 0x3f00_0000);
            let y = f32::from_bits(((r >> 32) as u32 & 0x807f_ffff) | 0x3f80_0000);
            let sum = f64::from(x) + f64::from(y);
            let product = f64::from(x) * f64::from(y);
            for round in [Zero, Down, Up] {
                assert_brackets(add(x, y, round), sum, round, (x, y));
                assert_brackets(mul(x, y, round), product, round, (x, y));
            }
        }
    }

    fn assert_brackets(got: f32, exact: f64, round: FloatRound, operands: (f32, f32)) {
        let g = f64::from(got);
        let ok = match round {
            Down => g <= exact && f64::from(got.next_up()) > exact,
            Up => g >= exact && f64::from(got.next_down()) < exact,
            _ => g.abs() <= exact.abs() && f64::from(got.abs().next_up()) > exact.abs(),
        };
        assert!(ok, "{round:?} {operands:?}: got {got:e}, exact {exact:e}");
    }
}
