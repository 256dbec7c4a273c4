//! Float arithmetic: rounding and flush-to-zero modifiers and the float binary operations and
//! `fma`. The integer forms of the same opcodes are in [`super::int`].

use super::{Decoder, Why, R};
use crate::isa::*;
use gpuwmm_ptx::Operand;

/// Splits a float instruction's rounding (`.rn`, `.rz`, `.rm`, `.rp`) and `.ftz` off its
/// modifiers; the other modifiers are returned in order.
pub(super) fn split_float_mode<'a>(m: &[&'a str]) -> (FloatMode, Vec<&'a str>) {
    let mut mode = FloatMode::default();
    let mut rest = Vec::with_capacity(m.len());
    for &w in m {
        match w {
            "rn" => mode.round = FloatRound::Nearest,
            "rz" => mode.round = FloatRound::Zero,
            "rm" => mode.round = FloatRound::Down,
            "rp" => mode.round = FloatRound::Up,
            "ftz" => mode.ftz = true,
            w => rest.push(w),
        }
    }
    (mode, rest)
}

/// The float operation of a binary opcode. `min`, `max` and `copysign` are exact, so they take
/// no rounding; an integer multiply mode (`.lo`, `.hi`, `.wide`) is never valid on floats.
pub(super) fn float_op(base: &str, mode: FloatMode, has_int_mode: bool) -> R<FloatOp> {
    let exact = matches!(base, "min" | "max" | "copysign");
    if has_int_mode || (exact && mode.round != FloatRound::Nearest) {
        return Err(Why::Unsupported);
    }
    Ok(match base {
        "add" => FloatOp::Add,
        "sub" => FloatOp::Sub,
        "mul" => FloatOp::Mul,
        "div" => FloatOp::Div,
        "min" => FloatOp::Min,
        "max" => FloatOp::Max,
        "copysign" => FloatOp::CopySign,
        _ => return Err(Why::Unsupported),
    })
}

impl Decoder<'_, '_> {
    /// `fma` and float `mad` (always fused); `d` is the destination already decoded.
    pub(super) fn fma(
        &mut self,
        ty: Ty,
        mode: FloatMode,
        sat: bool,
        d: Reg,
        ops: &[Operand],
    ) -> R<Op> {
        let (a, b, c) = self.sources3(ops, ty, ty)?;
        Ok(Op::Fma {
            ty,
            mode,
            sat,
            d,
            a,
            b,
            c,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_decodes, first_op, run, unsupported};
    use crate::isa::*;

    #[test]
    fn float_add_keeps_its_rounding_and_flush_to_zero() {
        let op = first_op("add.rz.ftz.f32 %f1, %f2, %f3;").unwrap();
        let Op::Float { op, ty, mode, .. } = op else {
            panic!("not a float op: {op:?}");
        };
        assert_eq!(op, FloatOp::Add);
        assert_eq!(ty.bits, 32);
        assert_eq!(mode.round, FloatRound::Zero);
        assert!(mode.ftz);
    }

    #[test]
    fn exact_float_operations_take_no_rounding_and_floats_no_int_modes() {
        let refused = [
            "min.rz.f32 %f1, %f2, %f3;",
            "mul.lo.f32 %f1, %f2, %f3;",
            "mad.wide.f32 %f1, %f2, %f3, %f4;",
        ];
        for body in refused {
            assert!(unsupported(body), "{body} decoded");
        }
        let fused = "Fma { ty: Ty { kind: F, bits: 64 }, sat: false, d: 0, a: Reg(1), b: Reg(2),";
        assert_decodes("mad.rn.f64 %fd1, %fd2, %fd3, %fd4;", fused);
    }

    #[test]
    fn float_instructions_compute_what_ptx_says() {
        // 1.5 + 2.25
        let add = "add.f32 %f1, 0f3FC00000, 0f40100000;\nst.global.f32 [%out], %f1;";
        assert_eq!(run(add), u64::from(3.75f32.to_bits()));
        // 2 * 3 + 1, fused
        let fma = "fma.rn.f64 %fd1, 0d4000000000000000, 0d4008000000000000, \
                   0d3FF0000000000000;\nst.global.f64 [%out], %fd1;";
        assert_eq!(run(fma), 7.0f64.to_bits());
    }
}
