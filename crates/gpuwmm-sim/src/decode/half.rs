//! 16-bit float instructions (`.f16`, `.bf16`, `.f16x2`, `.bf16x2`): arithmetic, `setp`,
//! `cvt`, and `mov`/`selp` on those types (plain bit moves). `cuda_fp16.h` and `cuda_bf16.h`
//! compile `__half` and `__nv_bfloat16` code to these; their values are computed in
//! [`crate::half`]. Atomic adds on them are decoded with the other atomics.

use super::float::split_float_mode;
use super::operands::{harmless, ty_of};
use super::{expect, Decoder, Why, R};
use crate::isa::*;
use gpuwmm_ptx::Operand;

/// The 16-bit float type a type word names.
pub(super) fn half_ty_of(word: &str) -> Option<HalfTy> {
    let (format, pair) = match word {
        "f16" => (HalfFormat::F16, false),
        "f16x2" => (HalfFormat::F16, true),
        "bf16" => (HalfFormat::Bf16, false),
        "bf16x2" => (HalfFormat::Bf16, true),
        _ => return None,
    };
    Some(HalfTy { format, pair })
}

/// Whether a modifier list names a 16-bit float type.
pub(super) fn mentions_half(m: &[&str]) -> bool {
    m.iter().any(|w| half_ty_of(w).is_some())
}

/// The bit type a 16-bit float type moves as (`b16`, or `b32` for a pair).
pub(super) fn bits_of(ty: HalfTy) -> Ty {
    Ty {
        kind: Kind::B,
        bits: if ty.pair { 32 } else { 16 },
    }
}

/// The modifiers with each 16-bit float type replaced by the bit type it moves as.
fn as_bits<'a>(m: &[&'a str]) -> Vec<&'a str> {
    m.iter()
        .map(|w| match half_ty_of(w) {
            Some(t) if t.pair => "b32",
            Some(_) => "b16",
            None => w,
        })
        .collect()
}

/// Whether a 16-bit float comparison has `.ftz`, and its modifiers as [`as_bits`] gives them
/// without it: those of the comparison on the bits that `setp`/`set` decode.
fn comparison_as_bits<'a>(m: &[&'a str]) -> (bool, Vec<&'a str>) {
    let ftz = m.contains(&"ftz");
    let words = as_bits(m).into_iter().filter(|w| *w != "ftz").collect();
    (ftz, words)
}

impl Decoder<'_, '_> {
    /// An instruction whose modifiers name a 16-bit float type.
    pub(super) fn half(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        match base {
            "add" | "sub" | "mul" | "fma" | "min" | "max" | "neg" | "abs" => {
                self.half_arith(base, m, ops)
            }
            "setp" => self.half_setp(m, ops),
            "set" => self.half_set(m, ops),
            "cvt" => self.half_cvt(m, ops),
            "mov" | "selp" => {
                let words = as_bits(m);
                if base == "mov" {
                    self.mov(&words, ops)
                } else {
                    self.selp(&words, ops)
                }
            }
            _ => Err(Why::Unsupported),
        }
    }

    fn half_arith(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (mode, rest) = split_float_mode(m);
        let (mut ty, mut sat, mut relu, mut nan) = (None, false, false, false);
        for w in rest {
            match w {
                "sat" => sat = true,
                "relu" => relu = true,
                "NaN" => nan = true,
                w if harmless(w) => {}
                w => match half_ty_of(w) {
                    Some(t) if ty.is_none() => ty = Some(t),
                    _ => return Err(Why::Unsupported),
                },
            }
        }
        let ty = ty.ok_or(Why::Unsupported)?;
        let op = match (base, nan) {
            ("add", false) => HalfOp::Add,
            ("sub", false) => HalfOp::Sub,
            ("mul", false) => HalfOp::Mul,
            ("fma", false) => HalfOp::Fma,
            ("min", false) => HalfOp::Min,
            ("max", false) => HalfOp::Max,
            ("min", true) => HalfOp::MinNan,
            ("max", true) => HalfOp::MaxNan,
            ("neg", false) => HalfOp::Neg,
            ("abs", false) => HalfOp::Abs,
            _ => return Err(Why::Unsupported),
        };
        let rounds = matches!(op, HalfOp::Add | HalfOp::Sub | HalfOp::Mul | HalfOp::Fma);
        let exact_ok = mode.round == FloatRound::Nearest && !sat;
        if (!rounds && !exact_ok)
            || (relu && !matches!(op, HalfOp::Fma | HalfOp::Min | HalfOp::Max))
        {
            return Err(Why::Unsupported);
        }
        let n = match op {
            HalfOp::Neg | HalfOp::Abs => 2,
            HalfOp::Fma => 4,
            _ => 3,
        };
        expect(ops, n)?;
        let bits = bits_of(ty);
        let d = self.dst(&ops[0])?;
        let mut s = [Src::Imm(0); 3];
        for (k, o) in ops[1..].iter().enumerate() {
            s[k] = self.src(o, bits)?;
        }
        Ok(Op::Half {
            op,
            ty,
            mode,
            sat,
            relu,
            d,
            a: s[0],
            b: s[1],
            c: s[2],
        })
    }

    /// `setp.cmp{.bop}{.ftz}.f16 p{|q}, a, b{, [!]c}`: decoded as `setp` on the bits, then
    /// given its 16-bit float type back.
    fn half_setp(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = m
            .iter()
            .find_map(|w| half_ty_of(w))
            .ok_or(Why::Unsupported)?;
        let (ftz, words) = comparison_as_bits(m);
        match self.setp(false, &words, ops)? {
            Op::Setp {
                cmp,
                p,
                q,
                a,
                b,
                combine,
                ..
            } => Ok(Op::HalfSetp {
                cmp,
                ty,
                ftz,
                p,
                q,
                a,
                b,
                combine,
            }),
            _ => Err(Why::Unsupported),
        }
    }

    /// `set.cmp{.bop}{.ftz}.dtype.stype d, a, b{, [!]c}` with a 16-bit float `stype`: decoded
    /// as `set` on the bits; true is 1.0 in a float `dtype`, all ones in an integer one.
    fn half_set(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let types: Vec<&str> = m
            .iter()
            .copied()
            .filter(|w| ty_of(w).is_some() || half_ty_of(w).is_some())
            .collect();
        let [dty, sty] = types[..] else {
            return Err(Why::Unsupported);
        };
        let ty = half_ty_of(sty).ok_or(Why::Unsupported)?;
        let element_bits = if ty.pair { 16 } else { 32 };
        let truth = match (half_ty_of(dty), ty_of(dty)) {
            (Some(d), _) if d.pair == ty.pair => u32::from(crate::half::one(d.format)),
            (None, Some(d)) if d.kind == Kind::F && d.bits == 32 && !ty.pair => 1f32.to_bits(),
            (None, Some(d)) if matches!(d.kind, Kind::U | Kind::S) && d.bits >= 16 => {
                (crate::alu::mask(d.bits.min(element_bits))) as u32
            }
            _ => return Err(Why::Unsupported),
        };
        let (ftz, words) = comparison_as_bits(m);
        match self.setp(true, &words, ops)? {
            Op::Set {
                cmp,
                d,
                a,
                b,
                combine,
                ..
            } => Ok(Op::HalfSet {
                cmp,
                ty,
                ftz,
                truth,
                d,
                a,
                b,
                combine,
            }),
            _ => Err(Why::Unsupported),
        }
    }

    /// `cvt` with a 16-bit float destination or source (a pair only as `cvt.f16x2.f32 d, a, b`).
    fn half_cvt(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (mode, rest) = split_float_mode(m);
        let (mut round, mut sat, mut relu) = (Round::Default, false, false);
        let mut types = Vec::new();
        for w in rest {
            match w {
                "rni" => round = Round::Nearest,
                "rzi" => round = Round::Zero,
                "rmi" => round = Round::Down,
                "rpi" => round = Round::Up,
                "sat" => sat = true,
                "relu" => relu = true,
                w if harmless(w) => {}
                w => types.push(w),
            }
        }
        let [dst, src] = types[..] else {
            return Err(Why::Unsupported);
        };
        let (conv, src_ty) = match (half_ty_of(dst), half_ty_of(src)) {
            (Some(d), Some(s)) if !d.pair && !s.pair => {
                (HalfConv::Between(s.format, d.format), bits_of(s))
            }
            (Some(d), None) => {
                let s = ty_of(src)
                    .filter(|t| t.kind != Kind::Pred)
                    .ok_or(Why::Unsupported)?;
                match d.pair {
                    true if s.is_float() && s.bits == 32 => (HalfConv::PairOf(d.format), s),
                    true => return Err(Why::Unsupported),
                    false => (HalfConv::To(s, d.format), s),
                }
            }
            (None, Some(s)) if !s.pair => {
                let d = ty_of(dst)
                    .filter(|t| t.kind != Kind::Pred)
                    .ok_or(Why::Unsupported)?;
                (HalfConv::From(s.format, d), bits_of(s))
            }
            _ => return Err(Why::Unsupported),
        };
        let to_half = !matches!(conv, HalfConv::From(..));
        let to_int = matches!(conv, HalfConv::From(_, d) if !d.is_float());
        // a float rounding needs a float result; relu a 16-bit one
        if (to_int && mode.round != FloatRound::Nearest) || (relu && !to_half) {
            return Err(Why::Unsupported);
        }
        let pair = matches!(conv, HalfConv::PairOf(_));
        expect(ops, if pair { 3 } else { 2 })?;
        let d = self.dst(&ops[0])?;
        let a = self.src(&ops[1], src_ty)?;
        let b = if pair {
            self.src(&ops[2], src_ty)?
        } else {
            Src::Imm(0)
        };
        Ok(Op::HalfCvt {
            conv,
            round,
            mode,
            sat,
            relu,
            d,
            a,
            b,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_decodes, run, unsupported};

    #[test]
    fn half_instructions_decode_with_their_format_and_pairing() {
        assert_decodes(
            "add.f16x2 %r1, %r2, %r3;",
            "Half { op: Add, ty: HalfTy { format: F16, pair: true },",
        );
        assert_decodes(
            "cvt.rn.bf16.f32 %rs1, %f1;",
            "HalfCvt { conv: To(Ty { kind: F, bits: 32 }, Bf16),",
        );
        assert_decodes(
            "setp.lt.f16x2 %p1|%p2, %r1, %r2;",
            "HalfSetp { cmp: Lt, ty: HalfTy { format: F16, pair: true }, ftz: false, p: 2, q: Some(3),",
        );
        assert!(unsupported("min.rz.f16 %rs1, %rs2, %rs3;"));
        assert!(unsupported("cvt.rz.s32.f16 %r1, %rs1;"));
        assert!(unsupported("ex2.approx.f16 %rs1, %rs2;"));
    }

    #[test]
    fn half_conversions_and_arithmetic_compute_what_ptx_says() {
        // 1.5f -> f16 0x3e00, +0.25 (0x3400) = 1.75 (0x3f00), back to f32
        let body = "cvt.rn.f16.f32 %rs1, 0f3FC00000;\nmov.b16 %rs2, 0x3400;\n\
                    add.f16 %rs3, %rs1, %rs2;\ncvt.f32.f16 %f1, %rs3;\nst.global.f32 [%out], %f1;";
        assert_eq!(run(body), u64::from(1.75f32.to_bits()));
        // {2.0, 1.0} from two f32: the first source in the upper half
        let pair = "cvt.rn.f16x2.f32 %r1, 0f40000000, 0f3F800000;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(pair), 0x4000_3c00);
        // -2049 to f16: halfway between -2048 and -2050, to even (-2048)
        let int = "cvt.rn.f16.s32 %rs1, -2049;\nst.global.u16 [%out], %rs1;";
        assert_eq!(run(int), 0xe800);
    }

    #[test]
    fn half_setp_sets_p_and_q_per_element_of_a_pair_and_combines_both() {
        // a pair: low elements 1 < 2 (p), high elements 3 < 2 (q)
        let pair = "setp.lt.f16x2 %p1|%p2, 0x42003c00, 0x40004000;\n\
                    selp.u32 %r1, 1, 0, %p1;\nselp.u32 %r2, 2, 0, %p2;\n\
                    or.b32 %r3, %r1, %r2;\nst.global.u32 [%out], %r3;";
        assert_eq!(run(pair), 0b01);
        // one value with `.or !%p3` (%p3 true, so the combine adds nothing): p = 1 < 2, q = !p
        let combined = "setp.eq.u32 %p3, 1, 1;\nsetp.lt.or.f16 %p1|%p2, 0x3c00, 0x4000, !%p3;\n\
                        selp.u32 %r1, 1, 0, %p1;\nselp.u32 %r2, 2, 0, %p2;\n\
                        or.b32 %r3, %r1, %r2;\nst.global.u32 [%out], %r3;";
        assert_eq!(run(combined), 0b01);
        // with `.and %p3`: q is (not p) and %p3; for 2 < 1, q is set
        let and = "setp.eq.u32 %p3, 1, 1;\nsetp.lt.and.f16 %p1|%p2, 0x4000, 0x3c00, %p3;\n\
                   selp.u32 %r1, 1, 0, %p1;\nselp.u32 %r2, 2, 0, %p2;\n\
                   or.b32 %r3, %r1, %r2;\nst.global.u32 [%out], %r3;";
        assert_eq!(run(and), 0b10);
        // `.and` with %p3 false clears both: q is not the negation of the combined p
        let cleared = and
            .replace("setp.eq.u32 %p3, 1, 1", "setp.eq.u32 %p3, 1, 0")
            .replace("0x4000, 0x3c00", "0x3c00, 0x4000");
        assert_eq!(run(&cleared), 0b00);
    }

    #[test]
    fn half_set_writes_one_or_all_ones_per_element() {
        // NaN (0x7e00) is unordered with itself; 1.0 is not
        let nan = "set.nan.f16.f16 %rs1, 0x7e00, 0x7e00;\nst.global.u16 [%out], %rs1;";
        assert_eq!(run(nan), 0x3c00);
        let pair = "set.lt.u32.f16x2 %r1, 0x40003c00, 0x3c004000;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(pair), 0x0000_ffff);
        let float = "set.gt.f32.bf16 %f1, 0x4000, 0x3f80;\nst.global.f32 [%out], %f1;";
        assert_eq!(run(float), u64::from(1f32.to_bits()));
    }
}
