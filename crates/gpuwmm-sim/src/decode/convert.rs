//! Moves and conversions: `mov` (including packing and unpacking vectors), `cvt` and `cvta`.

use super::float::split_float_mode;
use super::operands::{harmless, ty_of};
use super::{expect, one_type, Decoder, Why, R, SINK};
use crate::isa::*;
use gpuwmm_ptx::Operand;

impl Decoder<'_, '_> {
    pub(super) fn mov(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &[])?;
        expect(ops, 2)?;
        match (&ops[0], &ops[1]) {
            (Operand::Vector(parts), a) => {
                let n = parts.len();
                if !(2..=4).contains(&n) {
                    return Err(Why::Unsupported);
                }
                let mut d = [SINK; 4];
                for (k, p) in parts.iter().enumerate() {
                    d[k] = self.dst(p)?;
                }
                Ok(Op::Unpack {
                    bits: ty.bits / n as u8,
                    n: n as u8,
                    d,
                    a: self.src(a, ty)?,
                })
            }
            (d, Operand::Vector(parts)) => {
                let n = parts.len();
                if !(2..=4).contains(&n) {
                    return Err(Why::Unsupported);
                }
                let bits = ty.bits / n as u8;
                let part_ty = Ty {
                    kind: Kind::B,
                    bits,
                };
                let mut srcs = [Src::Imm(0); 4];
                for (k, p) in parts.iter().enumerate() {
                    srcs[k] = self.src(p, part_ty)?;
                }
                Ok(Op::Pack {
                    bits,
                    n: n as u8,
                    d: self.dst(d)?,
                    parts: srcs,
                })
            }
            (d, a) => Ok(Op::Mov {
                ty,
                d: self.dst(d)?,
                a: self.src(a, ty)?,
            }),
        }
    }

    pub(super) fn cvt(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (mode, m) = split_float_mode(m);
        let mut round = Round::Default;
        let mut sat = false;
        let mut types = Vec::new();
        for w in &m {
            match *w {
                "rni" => round = Round::Nearest,
                "rzi" => round = Round::Zero,
                "rmi" => round = Round::Down,
                "rpi" => round = Round::Up,
                "sat" => sat = true,
                w if harmless(w) => {}
                w => types.push(ty_of(w).ok_or(Why::Unsupported)?),
            }
        }
        let [dst, src] = types[..] else {
            return Err(Why::Unsupported);
        };
        if dst.kind == Kind::Pred || src.kind == Kind::Pred {
            return Err(Why::Unsupported);
        }
        // a float rounding needs a float result; `.ftz` an `f32` side
        let f32_side = (dst.is_float() && dst.bits == 32) || (src.is_float() && src.bits == 32);
        if (mode.round != FloatRound::Nearest && !dst.is_float()) || (mode.ftz && !f32_side) {
            return Err(Why::Unsupported);
        }
        expect(ops, 2)?;
        Ok(Op::Cvt {
            dst,
            src,
            round,
            mode,
            sat,
            d: self.dst(&ops[0])?,
            a: self.src(&ops[1], src)?,
        })
    }

    pub(super) fn cvta(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let to = m.first() == Some(&"to");
        let words = if to { &m[1..] } else { m };
        let (space, ty) = match words {
            [s, t] => (*s, ty_of(t).ok_or(Why::Unsupported)?),
            _ => return Err(Why::Unsupported),
        };
        let space = match space {
            "global" => Space::Global,
            "shared" => Space::Shared,
            "local" => Space::Local,
            "const" => Space::Const,
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 2)?;
        Ok(Op::Cvta {
            space,
            to_generic: !to,
            d: self.dst(&ops[0])?,
            a: self.src(&ops[1], ty)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_decodes, run, unsupported};

    #[test]
    fn mov_of_a_vector_decodes_to_pack_and_unpack() {
        assert_decodes(
            "mov.b64 %rd1, {%r1, %r2};",
            "Pack { bits: 32, n: 2, d: 2, parts: [Reg(0), Reg(1), Imm(0), Imm(0)] }",
        );
        assert_decodes(
            "mov.b32 {%h1, %h2}, %r1;",
            "Unpack { bits: 16, n: 2, d: [0, 1,",
        );
    }

    #[test]
    fn packing_puts_the_first_part_in_the_low_bits() {
        let body = "mov.b64 %rd1, {1, 2};\nst.global.u64 [%out], %rd1;";
        assert_eq!(run(body), 0x2_0000_0001);
    }

    #[test]
    fn cvt_rounds_as_its_modifier_says_and_refuses_float_rounding_to_integers() {
        // -2.5 toward zero
        let body = "cvt.rzi.s32.f32 %r1, 0fC0200000;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(body), u64::from((-2i32) as u32));
        assert!(unsupported("cvt.rz.u32.u64 %r1, %rd1;"));
    }

    #[test]
    fn cvta_records_the_space_and_the_direction() {
        assert_decodes(
            "cvta.to.global.u64 %rd1, %rd2;",
            "Cvta { space: Global, to_generic: false, d: 0, a: Reg(1) }",
        );
        assert_decodes(
            "cvta.shared.u64 %rd1, %rd2;",
            "Cvta { space: Shared, to_generic: true,",
        );
    }
}
