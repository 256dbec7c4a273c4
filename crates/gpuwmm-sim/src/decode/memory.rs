//! Memory accesses: `ld`, `ldu` and `st`, and the qualifiers every access shares with `atom` and
//! `red` (state space, type, vector width). The decoder only records an access's semantics and
//! scope; what they mean for the memory models is decided by
//! [`crate::ptx_model::access_order`].

use super::atomics::atom_op_of;
use super::half::{bits_of, half_ty_of};
use super::operands::{harmless, ty_of};
use super::{bad, expect, Decoder, Why, R, SINK};
use crate::isa::*;
use crate::ptx_model::access_order;
use gpuwmm_ptx::{self as ptx, Instruction, Operand};

/// An access's place in memory and the qualifiers the simulator acts on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Access {
    pub space: Space,
    pub ty: Ty,
    /// Vector width: 1, 2 or 4.
    pub n: u8,
    pub order: Order,
}

impl Access {
    /// The access at `addr`.
    pub fn at(self, addr: Addr) -> MemRef {
        MemRef {
            space: self.space,
            ty: self.ty,
            n: self.n,
            addr,
            order: self.order,
        }
    }
}

impl Decoder<'_, '_> {
    /// Any memory instruction: the shared qualifiers, then the family's operands.
    pub(super) fn memory(&mut self, i: &Instruction, m: &[&str]) -> R<Op> {
        let access = i.memory_access().ok_or(Why::Unsupported)?;
        let base = i.opcode.base.as_str();
        let space = space_of(access.space);
        let order = access_order(access.semantics, access.scope, base == "red");
        let (ty, atom_op) = value_type(base, m)?;
        let n = access.vector;
        if !matches!(n, 1 | 2 | 4) {
            return Err(Why::Unsupported);
        }
        let a = Access {
            space,
            ty,
            n,
            order,
        };
        let ops = &i.operands;
        match base {
            "ld" | "ldu" => self.load(a, ops),
            "st" => self.store(a, ops),
            _ => self.atomic(a, atom_op, base == "red", ops),
        }
    }

    /// `ld{.v2,.v4} d, [addr]`.
    fn load(&mut self, a: Access, ops: &[Operand]) -> R<Op> {
        expect(ops, 2)?;
        let mut d = [SINK; 4];
        match &ops[0] {
            Operand::Vector(parts) if parts.len() == a.n as usize => {
                for (k, p) in parts.iter().enumerate() {
                    d[k] = self.dst(p)?;
                }
            }
            o if a.n == 1 => d[0] = self.dst(o)?,
            _ => return bad("vector width does not match the operand"),
        }
        let addr = self.addr(&ops[1], a.space)?;
        Ok(Op::Ld { d, mem: a.at(addr) })
    }

    /// `st{.v2,.v4} [addr], s`.
    fn store(&mut self, a: Access, ops: &[Operand]) -> R<Op> {
        expect(ops, 2)?;
        let addr = self.addr(&ops[0], a.space)?;
        let mut s = [Src::Imm(0); 4];
        match &ops[1] {
            Operand::Vector(parts) if parts.len() == a.n as usize => {
                for (k, p) in parts.iter().enumerate() {
                    s[k] = self.src(p, a.ty)?;
                }
            }
            o if a.n == 1 => s[0] = self.src(o, a.ty)?,
            _ => return bad("vector width does not match the operand"),
        }
        Ok(Op::St { s, mem: a.at(addr) })
    }
}

fn space_of(space: ptx::StateSpace) -> Space {
    match space {
        ptx::StateSpace::Global => Space::Global,
        ptx::StateSpace::Shared => Space::Shared,
        ptx::StateSpace::Local => Space::Local,
        ptx::StateSpace::Param => Space::Param,
        ptx::StateSpace::Const => Space::Const,
        ptx::StateSpace::Generic => Space::Generic,
    }
}

/// The value type among a memory instruction's modifiers, and the operation of an `atom` or
/// `red`; any other modifier must be a space, semantics, scope, vector width or harmless.
fn value_type(base: &str, m: &[&str]) -> R<(Ty, Option<AtomOp>)> {
    let mut ty = None;
    let mut atom_op = None;
    let mut half = None;
    for w in m {
        if let Some(t) = ty_of(w) {
            ty = Some(t);
            continue;
        }
        if let Some(h) = half_ty_of(w).filter(|_| base == "atom" || base == "red") {
            (ty, half) = (Some(bits_of(h)), Some(h));
            continue;
        }
        if ordering_word(w) || harmless(w) {
            continue;
        }
        match (base, atom_op_of(w)) {
            ("atom" | "red", Some(op)) if atom_op.is_none() => atom_op = Some(op),
            _ => return Err(Why::Unsupported),
        }
    }
    let ty = ty.ok_or(Why::Unsupported)?;
    if ty.kind == Kind::Pred {
        return Err(Why::Unsupported);
    }
    // 16-bit floats: only `add` (`atom.add.noftz.f16x2`, what `atomicAdd(__half2 *)` is)
    match (half, atom_op) {
        (None, _) => Ok((ty, atom_op)),
        (Some(h), Some(AtomOp::Add)) => Ok((ty, Some(AtomOp::HalfAdd(h)))),
        (Some(_), _) => Err(Why::Unsupported),
    }
}

/// A state space, semantics, scope or vector width word (the IR has classified them already).
fn ordering_word(w: &str) -> bool {
    let head = w.split("::").next().unwrap_or(w);
    matches!(
        head,
        "global"
            | "shared"
            | "local"
            | "param"
            | "const"
            | "weak"
            | "volatile"
            | "relaxed"
            | "acquire"
            | "release"
            | "acq_rel"
            | "cta"
            | "gpu"
            | "sys"
            | "v2"
            | "v4"
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_decodes, first_op, run, unsupported};
    use crate::isa::*;

    fn order_of(body: &str) -> Order {
        match first_op(body).unwrap() {
            Op::Ld { mem, .. } | Op::St { mem, .. } => mem.order,
            op => panic!("not a load or store: {op:?}"),
        }
    }

    #[test]
    fn a_plain_load_is_weak_and_records_space_type_and_width() {
        assert_eq!(
            first_op("ld.global.u32 %r1, [%rd1+8];").unwrap(),
            Op::Ld {
                d: [0, 2, 2, 2],
                mem: MemRef {
                    space: Space::Global,
                    ty: Ty {
                        kind: Kind::U,
                        bits: 32
                    },
                    n: 1,
                    addr: Addr {
                        base: Some(1),
                        offset: 8
                    },
                    order: Order::default(),
                },
            }
        );
    }

    #[test]
    fn semantics_and_scope_reach_the_decoded_order() {
        let acquire = order_of("ld.acquire.gpu.global.u32 %r1, [%rd1];");
        assert!(acquire.acquires && !acquire.releases && acquire.reach == Reach::Gpu);
        let volatile = order_of("ld.volatile.global.u32 %r1, [%rd1];");
        assert!(!volatile.acquires && volatile.reach == Reach::Sys);
        let release = order_of("st.release.cta.global.u32 [%rd1], %r1;");
        assert!(release.releases && release.reach == Reach::Cta);
    }

    #[test]
    fn vector_accesses_need_a_matching_operand() {
        assert_decodes(
            "st.global.v2.u32 [%rd1], {%r1, %r2};",
            "St { s: [Reg(1), Reg(2), Imm(0), Imm(0)], mem: MemRef { space: Global,",
        );
        assert!(matches!(
            first_op("ld.global.v4.u32 {%r1, %r2}, [%rd1];"),
            Err(crate::device::BackendError::BadModule(_))
        ));
        assert!(unsupported(
            "ld.global.v8.u32 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd1];"
        ));
    }

    #[test]
    fn a_store_and_a_load_round_trip_through_global_memory() {
        let body = "st.global.u32 [%out+4], 41;\nld.global.u32 %r1, [%out+4];\n\
                    add.u32 %r1, %r1, 1;\nst.global.u32 [%out], %r1;";
        assert_eq!(run(body), 42 | (41 << 32));
    }
}
