//! Atomics and reductions: `atom.op` (returns the old value) and `red.op` (returns nothing), with
//! the type each operation accepts. The qualifiers they share with loads and stores are decoded in
//! [`super::memory`].

use super::memory::Access;
use super::{expect, Decoder, Why, R, SINK};
use crate::isa::*;
use gpuwmm_ptx::Operand;

impl Decoder<'_, '_> {
    /// `atom.op d, [addr], b{, c}` and `red.op [addr], b`; `cas` takes the extra operand.
    pub(super) fn atomic(
        &mut self,
        a: Access,
        op: Option<AtomOp>,
        is_red: bool,
        ops: &[Operand],
    ) -> R<Op> {
        let op = op.ok_or(Why::Unsupported)?;
        if a.n != 1 || !atom_type_ok(op, a.ty) {
            return Err(Why::Unsupported);
        }
        let (d, rest) = if is_red {
            (SINK, ops)
        } else {
            (self.dst(ops.first().ok_or(Why::Unsupported)?)?, &ops[1..])
        };
        let want = if op == AtomOp::Cas { 3 } else { 2 };
        expect(rest, want)?;
        let addr = self.addr(&rest[0], a.space)?;
        let b = self.src(&rest[1], a.ty)?;
        let c = if op == AtomOp::Cas {
            self.src(&rest[2], a.ty)?
        } else {
            Src::Imm(0)
        };
        Ok(Op::Atom {
            op,
            d,
            b,
            c,
            mem: a.at(addr),
        })
    }
}

/// The operation word of an `atom` or `red`.
pub(super) fn atom_op_of(w: &str) -> Option<AtomOp> {
    Some(match w {
        "add" => AtomOp::Add,
        "exch" => AtomOp::Exch,
        "cas" => AtomOp::Cas,
        "min" => AtomOp::Min,
        "max" => AtomOp::Max,
        "inc" => AtomOp::Inc,
        "dec" => AtomOp::Dec,
        "and" => AtomOp::And,
        "or" => AtomOp::Or,
        "xor" => AtomOp::Xor,
        _ => return None,
    })
}

/// Whether the simulator implements `op` on `ty` (the types PTX allows each operation).
fn atom_type_ok(op: AtomOp, ty: Ty) -> bool {
    let wide = ty.bits == 32 || ty.bits == 64;
    match op {
        AtomOp::Add => wide && ty.kind != Kind::B,
        // `atom.cas.b16` (sm_70 and later): what `atomicCAS` on an `unsigned short` compiles to.
        AtomOp::Cas => (wide || ty.bits == 16) && ty.kind == Kind::B,
        AtomOp::Exch | AtomOp::And | AtomOp::Or | AtomOp::Xor => wide && ty.kind == Kind::B,
        AtomOp::Min | AtomOp::Max => wide && matches!(ty.kind, Kind::U | Kind::S),
        AtomOp::Inc | AtomOp::Dec => ty.bits == 32 && ty.kind == Kind::U,
        AtomOp::HalfAdd(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_decodes, first_op, run, unsupported};
    use crate::isa::*;

    #[test]
    fn atom_decodes_its_operation_and_red_is_a_reduction() {
        assert_decodes(
            "atom.global.add.u32 %r1, [%rd1], 5;",
            "Atom { op: Add, d: 0, b: Imm(5), c: Imm(0), mem: MemRef { space: Global,",
        );
        let Op::Atom { mem, .. } = first_op("red.global.add.u32 [%rd1], 5;").unwrap() else {
            panic!("red is not an atom");
        };
        assert!(mem.order.reduction);
    }

    #[test]
    fn atomics_take_only_the_types_their_operation_allows() {
        assert!(unsupported("atom.global.add.b32 %r1, [%rd1], 5;"));
        assert!(unsupported("atom.global.exch.u32 %r1, [%rd1], 5;"));
        assert!(unsupported("atom.global.inc.u64 %rd2, [%rd1], 5;"));
        let cas = "atom.global.cas.b32 %r1, [%rd1], 0, 9;";
        assert_decodes(cas, "Atom { op: Cas, d: 0, b: Imm(0), c: Imm(9),");
    }

    #[test]
    fn atom_returns_the_old_value_and_updates_memory() {
        let add = "atom.global.add.u32 %r1, [%out], 5;\natom.global.add.u32 %r2, [%out], 7;\n\
                   st.global.u32 [%out+4], %r2;";
        assert_eq!(run(add), 12 | (5 << 32));
        let cas = "atom.global.cas.b32 %r1, [%out], 0, 9;\natom.global.cas.b32 %r2, [%out], 0, 3;";
        assert_eq!(run(cas), 9);
    }

    /// `atomicCAS` on an `unsigned short` compiles to `atom.cas.b16`, which the simulator
    /// refused, so an app using it could not be loaded.
    #[test]
    fn a_sixteen_bit_cas_swaps_only_its_half_word() {
        let cas = "mov.u64 %rd9, -1;\nst.global.u64 [%out], %rd9;\n\
                   atom.global.cas.b16 %rs1, [%out], 65535, 9;\n\
                   atom.global.cas.b16 %rs2, [%out], 0, 3;\n\
                   cvt.u32.u16 %r1, %rs1;\ncvt.u32.u16 %r2, %rs2;\n\
                   st.global.u32 [%out+4], %r2;";
        // The first swaps 0xffff for 9 in the low half word, the second fails (it reads 9),
        // and the old value 9 goes to the upper word.
        assert_eq!(run(cas), 9 | (0xffff << 16) | (9 << 32));
    }
}
