//! Integer arithmetic and bit manipulation: binary operations, carry chains, `mad`, `sad`,
//! `bfind`, `bfe`/`bfi`/`prmt` and the unary operations (integer and float share one
//! validation). `binary` and `mad` hand float types to [`super::float`].

use super::float::{float_op, split_float_mode};
use super::{expect, one_type, Decoder, Why, R};
use crate::isa::*;
use gpuwmm_ptx::Operand;

impl Decoder<'_, '_> {
    /// The binary operations; float types go to [`float_op`].
    pub(super) fn binary(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let w = arith_words(m)?;
        let (float_mode, sat, mode, ty) = (w.float_mode, w.sat, w.mode, w.ty);
        expect(ops, 3)?;
        let d = self.dst(&ops[0])?;
        let a = self.src(&ops[1], ty)?;
        if !ty.is_float() && float_mode != FloatMode::default() {
            return Err(Why::Unsupported);
        }
        if ty.is_float() {
            let op = float_op(base, float_mode, mode.is_some())?;
            let b = self.src(&ops[2], ty)?;
            return Ok(Op::Float {
                op,
                ty,
                mode: float_mode,
                sat,
                d,
                a,
                b,
            });
        }
        let shift = base == "shl" || base == "shr";
        let b_ty = if shift {
            Ty {
                kind: Kind::U,
                bits: 32,
            }
        } else {
            ty
        };
        let b = self.src(&ops[2], b_ty)?;
        if base == "mul" && mode == Some(MadMode::Wide) {
            if ty.bits > 32 {
                return Err(Why::Unsupported);
            }
            return Ok(Op::MulWide {
                signed: ty.signed(),
                bits: ty.bits,
                d,
                a,
                b,
            });
        }
        let op = int_op(base, sat, mode, ty)?;
        Ok(Op::Int { op, ty, d, a, b })
    }

    /// `sad`: the sum of absolute differences (integers only).
    pub(super) fn sad(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &[])?;
        if ty.is_float() {
            return Err(Why::Unsupported);
        }
        expect(ops, 4)?;
        let d = self.dst(&ops[0])?;
        let (a, b, c) = self.sources3(ops, ty, ty)?;
        Ok(Op::Sad { ty, d, a, b, c })
    }

    /// `bfind{.shiftamt}`: the position of the most significant non-sign bit.
    pub(super) fn bfind(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &["shiftamt"])?;
        if !matches!(ty.kind, Kind::U | Kind::S) || ty.bits < 32 {
            return Err(Why::Unsupported);
        }
        expect(ops, 2)?;
        Ok(Op::Bfind {
            ty,
            shiftamt: m.contains(&"shiftamt"),
            d: self.dst(&ops[0])?,
            a: self.src(&ops[1], ty)?,
        })
    }

    /// Carry-flag arithmetic: `add.cc`, `addc{.cc}`, `sub.cc`, `subc{.cc}`, `mad{c}.{lo,hi}{.cc}`.
    pub(super) fn carry(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &["cc", "lo", "hi"])?;
        if !matches!(ty.kind, Kind::U | Kind::S) || ty.bits < 32 {
            return Err(Why::Unsupported);
        }
        let op = match (base, mad_mode(m)) {
            ("add" | "addc", None) => CarryOp::Add,
            ("sub" | "subc", None) => CarryOp::Sub,
            ("mad" | "madc", Some(MadMode::Lo)) => CarryOp::MadLo,
            ("mad" | "madc", Some(MadMode::Hi)) => CarryOp::MadHi,
            _ => return Err(Why::Unsupported),
        };
        let is_mad = matches!(op, CarryOp::MadLo | CarryOp::MadHi);
        expect(ops, if is_mad { 4 } else { 3 })?;
        Ok(Op::Carry {
            op,
            ty,
            use_cf: base.ends_with('c'),
            set_cf: m.contains(&"cc"),
            d: self.dst(&ops[0])?,
            cc: self.reg("%%cc"),
            a: self.src(&ops[1], ty)?,
            b: self.src(&ops[2], ty)?,
            c: if is_mad {
                self.src(&ops[3], ty)?
            } else {
                Src::Imm(0)
            },
        })
    }

    /// `mad` on integers (`.lo`, `.hi`, `.wide`); `mad` and `fma` on floats go to `fma`.
    pub(super) fn mad(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let w = arith_words(m)?;
        let (float_mode, sat, mode, ty) = (w.float_mode, w.sat, w.mode, w.ty);
        expect(ops, 4)?;
        let d = self.dst(&ops[0])?;
        if ty.is_float() {
            if mode.is_some() {
                return Err(Why::Unsupported);
            }
            return self.fma(ty, float_mode, sat, d, ops);
        }
        let mode = match (base, mode, sat) {
            ("mad", Some(mode), false) if float_mode == FloatMode::default() => mode,
            _ => return Err(Why::Unsupported),
        };
        if mode == MadMode::Wide && ty.bits > 32 {
            return Err(Why::Unsupported);
        }
        let c_ty = if mode == MadMode::Wide {
            Ty {
                kind: ty.kind,
                bits: ty.bits * 2,
            }
        } else {
            ty
        };
        let (a, b, c) = self.sources3(ops, ty, c_ty)?;
        Ok(Op::Mad {
            mode,
            ty,
            d,
            a,
            b,
            c,
        })
    }

    pub(super) fn unary(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (mode, m) = split_float_mode(m);
        let ty = one_type(&m, &[])?;
        expect(ops, 2)?;
        let op = match base {
            "not" => UnOp::Not,
            "cnot" => UnOp::CNot,
            "neg" => UnOp::Neg,
            "abs" => UnOp::Abs,
            "popc" => UnOp::Popc,
            "clz" => UnOp::Clz,
            "brev" => UnOp::Brev,
            "sqrt" => UnOp::Sqrt,
            "rcp" => UnOp::Rcp,
            "rsqrt" => UnOp::Rsqrt,
            "ex2" => UnOp::Ex2,
            "lg2" => UnOp::Lg2,
            "sin" => UnOp::Sin,
            "cos" => UnOp::Cos,
            _ => return Err(Why::Unsupported),
        };
        let float_only = matches!(
            op,
            UnOp::Sqrt | UnOp::Rcp | UnOp::Rsqrt | UnOp::Ex2 | UnOp::Lg2 | UnOp::Sin | UnOp::Cos
        );
        let int_only = matches!(
            op,
            UnOp::Not | UnOp::CNot | UnOp::Popc | UnOp::Clz | UnOp::Brev
        );
        if (float_only && !ty.is_float()) || (int_only && ty.is_float()) {
            return Err(Why::Unsupported);
        }
        // only sqrt and rcp are correctly rounded; the others are approximations in PTX
        let rounds = matches!(op, UnOp::Sqrt | UnOp::Rcp);
        if (!ty.is_float() && mode != FloatMode::default())
            || (!rounds && mode.round != FloatRound::Nearest)
        {
            return Err(Why::Unsupported);
        }
        if ty.kind == Kind::Pred && op != UnOp::Not {
            return Err(Why::Unsupported);
        }
        Ok(Op::Unary {
            op,
            ty,
            mode,
            d: self.dst(&ops[0])?,
            a: self.src(&ops[1], ty)?,
        })
    }

    pub(super) fn bits(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &[])?;
        let u32t = Ty {
            kind: Kind::U,
            bits: 32,
        };
        match base {
            "bfe" => {
                expect(ops, 4)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                let (b, c) = (self.src(&ops[2], u32t)?, self.src(&ops[3], u32t)?);
                Ok(Op::Bfe { ty, d, a, b, c })
            }
            "bfi" => {
                expect(ops, 5)?;
                let d = self.dst(&ops[0])?;
                let (f, b) = (self.src(&ops[1], ty)?, self.src(&ops[2], ty)?);
                let (c, len) = (self.src(&ops[3], u32t)?, self.src(&ops[4], u32t)?);
                Ok(Op::Bfi {
                    ty,
                    d,
                    f,
                    b,
                    c,
                    len,
                })
            }
            _ => {
                if m.len() != 1 {
                    return Err(Why::Unsupported);
                }
                expect(ops, 4)?;
                let d = self.dst(&ops[0])?;
                let (a, b, c) = self.sources3(ops, ty, ty)?;
                Ok(Op::Prmt { d, a, b, c })
            }
        }
    }
}

/// The modifiers of a binary operation or a `mad`: float rounding, saturation, the integer
/// multiply mode and the one type.
struct ArithWords {
    float_mode: FloatMode,
    sat: bool,
    mode: Option<MadMode>,
    ty: Ty,
}

fn arith_words(m: &[&str]) -> R<ArithWords> {
    let (float_mode, m) = split_float_mode(m);
    Ok(ArithWords {
        float_mode,
        sat: m.contains(&"sat"),
        mode: mad_mode(&m),
        ty: one_type(&m, &["sat", "lo", "hi", "wide"])?,
    })
}

/// The integer operation of a binary opcode; predicates only take the logical ones.
fn int_op(base: &str, sat: bool, mode: Option<MadMode>, ty: Ty) -> R<IntOp> {
    let op = match (base, sat, mode) {
        ("add", false, None) => IntOp::Add,
        ("sub", false, None) => IntOp::Sub,
        ("add", true, None) if ty.signed() && ty.bits == 32 => IntOp::AddSat,
        ("sub", true, None) if ty.signed() && ty.bits == 32 => IntOp::SubSat,
        ("mul", false, Some(MadMode::Lo)) => IntOp::MulLo,
        ("mul", false, Some(MadMode::Hi)) => IntOp::MulHi,
        ("div", false, None) => IntOp::Div,
        ("rem", false, None) => IntOp::Rem,
        ("min", false, None) => IntOp::Min,
        ("max", false, None) => IntOp::Max,
        ("and", false, None) => IntOp::And,
        ("or", false, None) => IntOp::Or,
        ("xor", false, None) => IntOp::Xor,
        ("shl", false, None) => IntOp::Shl,
        ("shr", false, None) => IntOp::Shr,
        _ => return Err(Why::Unsupported),
    };
    if ty.kind == Kind::Pred && !matches!(op, IntOp::And | IntOp::Or | IntOp::Xor) {
        return Err(Why::Unsupported);
    }
    Ok(op)
}

pub(super) fn mad_mode(m: &[&str]) -> Option<MadMode> {
    m.iter().find_map(|w| match *w {
        "lo" => Some(MadMode::Lo),
        "hi" => Some(MadMode::Hi),
        "wide" => Some(MadMode::Wide),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_decodes, first_op, run, unsupported};
    use crate::isa::*;

    const S32: Ty = Ty {
        kind: Kind::S,
        bits: 32,
    };

    #[test]
    fn add_decodes_to_an_int_op_on_its_register_slots() {
        assert_eq!(
            first_op("add.s32 %r1, %r2, 5;").unwrap(),
            Op::Int {
                op: IntOp::Add,
                ty: S32,
                d: 0,
                a: Src::Reg(1),
                b: Src::Imm(5),
            }
        );
    }

    #[test]
    fn mul_wide_decodes_only_up_to_32_bits() {
        assert_decodes(
            "mul.wide.s32 %rd1, %r1, %r2;",
            "MulWide { signed: true, bits: 32, d: 0, a: Reg(1), b: Reg(2) }",
        );
        assert!(unsupported("mul.wide.u64 %rd1, %rd2, %rd3;"));
    }

    #[test]
    fn saturation_and_predicate_arithmetic_are_refused_where_ptx_has_none() {
        assert!(unsupported("add.sat.u32 %r1, %r2, %r3;"));
        assert!(unsupported("add.pred %p1, %p2, %p3;"));
        assert_decodes(
            "and.pred %p1, %p2, %p3;",
            "Int { op: And, ty: Ty { kind: Pred,",
        );
    }

    #[test]
    fn integer_instructions_compute_what_ptx_says() {
        let sub = "mov.u32 %r1, 7;\nsub.s32 %r2, %r1, 9;\nst.global.u32 [%out], %r2;";
        assert_eq!(run(sub), u64::from((-2i32) as u32));
        let mad = "mov.u32 %r1, 6;\nmad.lo.u32 %r2, %r1, 7, 3;\nst.global.u32 [%out], %r2;";
        assert_eq!(run(mad), 45);
        let bfe = "bfe.u32 %r1, 0xabcd, 4, 8;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(bfe), 0xbc);
        let bfind = "bfind.u32 %r1, 0x100;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(bfind), 8);
    }

    #[test]
    fn carry_chains_pass_the_carry_between_instructions() {
        let body = "add.cc.u32 %r1, 0xffffffff, 1;\naddc.u32 %r2, 0, 0;\n\
                    st.global.u32 [%out], %r2;";
        assert_eq!(run(body), 1);
        assert_decodes(
            "addc.cc.u32 %r1, %r2, %r3;",
            "Carry { op: Add, ty: Ty { kind: U, bits: 32 }, use_cf: true, set_cf: true,",
        );
    }
}
