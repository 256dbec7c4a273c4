//! Integer instructions that CUDA's intrinsics compile to and the other integer families do
//! not cover: funnel shifts (`shf`: `__funnelshift_*`), byte dot products (`dp4a`, `dp2a`:
//! `__dp4a`, `__dp2a_lo/hi`), `fns` (`__fns`), `lop3` (inline PTX in CUDA's headers) and the
//! SIMD video instructions in the form `__vabsdiffu4` compiles to.

use super::{check, expect, Decoder, Why, R};
use crate::isa::*;
use gpuwmm_ptx::Operand;

const U32: Ty = Ty {
    kind: Kind::U,
    bits: 32,
};

impl Decoder<'_, '_> {
    /// `shf.{l,r}.{wrap,clamp}.b32 d, a, b, c`.
    pub(super) fn shf(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (left, clamp) = match m {
            [dir, mode, "b32"] => (
                match *dir {
                    "l" => true,
                    "r" => false,
                    _ => return Err(Why::Unsupported),
                },
                match *mode {
                    "clamp" => true,
                    "wrap" => false,
                    _ => return Err(Why::Unsupported),
                },
            ),
            _ => return Err(Why::Unsupported),
        };
        let (d, a, b, c) = self.word_operands(ops)?;
        Ok(Op::Shf {
            left,
            clamp,
            d,
            a,
            b,
            c,
        })
    }

    /// `dp4a.atype.btype d, a, b, c` and `dp2a.{lo,hi}.atype.btype d, a, b, c`.
    pub(super) fn dot(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let pairs = base == "dp2a";
        let (hi, types) = match (pairs, m) {
            (true, ["lo", rest @ ..]) => (false, rest),
            (true, ["hi", rest @ ..]) => (true, rest),
            (false, rest) => (false, rest),
            _ => return Err(Why::Unsupported),
        };
        let signed = |w: &str| match w {
            "s32" => Ok(true),
            "u32" => Ok(false),
            _ => Err(Why::Unsupported),
        };
        let [a_ty, b_ty] = types else {
            return Err(Why::Unsupported);
        };
        let (a_signed, b_signed) = (signed(a_ty)?, signed(b_ty)?);
        let (d, a, b, c) = self.word_operands(ops)?;
        Ok(Op::Dot {
            pairs,
            hi,
            a_signed,
            b_signed,
            d,
            a,
            b,
            c,
        })
    }

    /// `vop4.dtype.atype.btype{.sat} d, a, b, c` and `vop2`: without a mask on `d`, selectors
    /// on `a`/`b` or `.add`, so every element of `d` is written and `c` is not read.
    pub(super) fn simd(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (name, lanes) = match base.split_at(base.len() - 1) {
            (name, "4") => (name, 4),
            (name, "2") => (name, 2),
            _ => return Err(Why::Unsupported),
        };
        let op = match name {
            "vadd" => SimdOp::Add,
            "vsub" => SimdOp::Sub,
            "vavrg" => SimdOp::Avrg,
            "vabsdiff" => SimdOp::Absdiff,
            "vmin" => SimdOp::Min,
            "vmax" => SimdOp::Max,
            _ => return Err(Why::Unsupported),
        };
        let (types, sat) = match m {
            [d, a, b] => ([*d, *a, *b], false),
            [d, a, b, "sat"] => ([*d, *a, *b], true),
            _ => return Err(Why::Unsupported),
        };
        let signed = |w: &str| match w {
            "s32" => Ok(true),
            "u32" => Ok(false),
            _ => Err(Why::Unsupported),
        };
        let signs = [signed(types[1])?, signed(types[2])?, signed(types[0])?];
        expect(ops, 4)?;
        if !ops
            .iter()
            .all(|o| matches!(o, Operand::Register(_) | Operand::Immediate(_)))
        {
            return Err(Why::Unsupported);
        }
        let d = self.dst(&ops[0])?;
        let (a, b) = (self.src(&ops[1], U32)?, self.src(&ops[2], U32)?);
        Ok(Op::Simd {
            op,
            lanes,
            signs,
            sat,
            d,
            a,
            b,
        })
    }

    /// `add`, `sub`, `min`, `max` on `.u16x2`/`.s16x2` (sm_90): two wrapping 16-bit
    /// elements, as `vadd2` without saturation computes them.
    pub(super) fn packed16(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let signed = match m {
            ["u16x2"] => false,
            ["s16x2"] => true,
            _ => return Err(Why::Unsupported),
        };
        let op = match base {
            "add" => SimdOp::Add,
            "sub" => SimdOp::Sub,
            "min" => SimdOp::Min,
            "max" => SimdOp::Max,
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 3)?;
        let d = self.dst(&ops[0])?;
        let (a, b) = (self.src(&ops[1], U32)?, self.src(&ops[2], U32)?);
        Ok(Op::Simd {
            op,
            lanes: 2,
            signs: [signed; 3],
            sat: false,
            d,
            a,
            b,
        })
    }

    /// `lop3.b32 d, a, b, c, lut`.
    pub(super) fn lop3(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        if m != ["b32"] {
            return Err(Why::Unsupported);
        }
        expect(ops, 5)?;
        let d = self.dst(&ops[0])?;
        let (a, b, c) = self.sources3(ops, U32, U32)?;
        let lut = match self.src(&ops[4], U32)? {
            Src::Imm(v) if v <= 0xff => v as u8,
            _ => return Err(Why::Unsupported),
        };
        Ok(Op::Lop3 { d, a, b, c, lut })
    }

    /// `fns.b32 d, mask, base, offset`.
    pub(super) fn fns(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        check(m, &["b32"])?;
        let (d, a, b, c) = self.word_operands(ops)?;
        Ok(Op::Fns { d, a, b, c })
    }

    /// The operands `d, a, b, c` of a four-operand instruction on 32-bit words.
    fn word_operands(&mut self, ops: &[Operand]) -> R<(Reg, Src, Src, Src)> {
        expect(ops, 4)?;
        let d = self.dst(&ops[0])?;
        let (a, b, c) = self.sources3(ops, U32, U32)?;
        Ok((d, a, b, c))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, unsupported};

    #[test]
    fn funnel_shifts_dot_products_and_fns_compute_what_ptx_says() {
        let shf = "shf.l.wrap.b32 %r1, 0x89abcdef, 0x01234567, 36;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(shf), 0x1234_5678);
        let clamp = "shf.r.clamp.b32 %r1, 0x89abcdef, 0x01234567, 40;\nst.global.u32 [%out], %r1;";
        // clamped to 32: the upper word itself
        assert_eq!(run(clamp), 0x0123_4567);
        // bytes (-1, 2, 3, 4) . (5, 6, 7, 8) + 10 = -5 + 12 + 21 + 32 + 10
        let dp4a = "dp4a.s32.u32 %r1, 0x040302ff, 0x08070605, 10;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(dp4a), 70);
        // halves (-2, 3) . bytes 2 and 3 of b (7, 8) + 1 = -14 + 24 + 1
        let dp2a = "dp2a.hi.s32.s32 %r1, 0x0003fffe, 0x08070605, 1;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(dp2a), 11);
        // set bits of 0b1011_0100 from bit 0: 2, 4, 5, 7; the third is 5, the second below 6 is 4
        let fns = "fns.b32 %r1, 0xb4, 0, 3;\nfns.b32 %r2, 0xb4, 6, -2;\n\
                   mov.b64 %rd1, {%r1, %r2};\nst.global.u64 [%out], %rd1;";
        assert_eq!(run(fns), 4 << 32 | 5);
        // 0x96: a ^ b ^ c
        let lop3 = "lop3.b32 %r1, 0xff00ff00, 0xf0f0f0f0, 0xcccccccc, 0x96;\n\
                    st.global.u32 [%out], %r1;";
        assert_eq!(run(lop3), 0xff00_ff00 ^ 0xf0f0_f0f0 ^ 0xcccc_cccc);
        // bytes |(1, 200, 7, 0) - (3, 100, 7, 255)| = (2, 100, 0, 255)
        let vabsdiff = "vabsdiff4.u32.u32.u32 %r1, 0x0007c801, 0xff076403, 0;\n\
                        st.global.u32 [%out], %r1;";
        assert_eq!(run(vabsdiff), 0xff00_6402);
        // signed halves (-5, 3000) + (3, 30000), saturated to s16: (-2, 32767)
        let vadd = "vadd2.s32.s32.s32.sat %r1, 0x0bb8fffb, 0x75300003, 0;\n\
                    st.global.u32 [%out], %r1;";
        assert_eq!(run(vadd), 0x7fff_fffe);
        assert!(unsupported("vadd4.u32.u32.u32.add %r1, %r2, %r3, %r4;"));
        // signed 16-bit elements: max(-1, 2) and max(7, -3)
        let max = "max.s16x2 %r1, 0x0007ffff, 0xfffd0002;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(max), 0x0007_0002);
        assert!(unsupported("shf.l.b32 %r1, %r2, %r3, %r4;"));
    }
}
