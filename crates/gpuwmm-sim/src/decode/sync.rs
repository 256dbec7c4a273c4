//! Synchronisation and warp collectives: `bar.sync`, `bar.red`, fences (`membar`, `fence`),
//! `shfl`, `vote` and `activemask`. What a fence's scope and strength mean for the memory models
//! is decided by [`crate::ptx_model::fence_order`].

use super::{expect, Decoder, Why, R};
use crate::isa::*;
use crate::ptx_model::fence_order;
use gpuwmm_ptx::{Instruction, Operand};

/// `bar.sync` / `barrier.sync` of the whole block on barrier 0; named barriers and thread
/// counts are not implemented.
pub(super) fn bar(m: &[&str], ops: &[Operand]) -> R<Op> {
    let plain = matches!(m, ["sync"] | ["sync", "aligned"] | [] if ops.len() <= 1);
    let zero = ops
        .first()
        .is_none_or(|o| matches!(o, Operand::Immediate(t) if t == "0"));
    if plain && zero {
        Ok(Op::Bar)
    } else {
        Err(Why::Unsupported)
    }
}

/// `membar` and `fence`: the IR reads scope and strength, the memory model says what they mean;
/// `fence.proxy` orders nothing the simulator models.
pub(super) fn fence(i: &Instruction, m: &[&str]) -> R<Op> {
    match i.fence() {
        Some(f) => {
            let (reach, sc) = fence_order(f.scope, f.strength);
            Ok(Op::Fence { reach, sc })
        }
        None if m.first() == Some(&"proxy") => Ok(Op::Nop),
        None => Err(Why::Unsupported),
    }
}

impl Decoder<'_, '_> {
    /// `bar.red.popc.u32 d, 0, p` and `bar.red.{and,or}.pred d, 0, {!}p` (whole block only).
    pub(super) fn bar_red(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let op = match m {
            ["red", "popc", "u32"] => BarRedOp::Popc,
            ["red", "and", "pred"] => BarRedOp::And,
            ["red", "or", "pred"] => BarRedOp::Or,
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 3)?;
        if !matches!(&ops[1], Operand::Immediate(t) if t == "0") {
            return Err(Why::Unsupported);
        }
        let (p, negate) = self.pred_src(&ops[2])?;
        Ok(Op::BarRed {
            op,
            d: self.dst(&ops[0])?,
            p,
            negate,
        })
    }

    pub(super) fn shfl(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let mode = match m {
            ["sync", mode, "b32"] => match *mode {
                "up" => ShflMode::Up,
                "down" => ShflMode::Down,
                "bfly" => ShflMode::Bfly,
                "idx" => ShflMode::Idx,
                _ => return Err(Why::Unsupported),
            },
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 5)?;
        let u32t = Ty {
            kind: Kind::B,
            bits: 32,
        };
        let (d, p) = self.dst_pair(&ops[0])?;
        Ok(Op::Shfl {
            mode,
            d,
            p,
            a: self.src(&ops[1], u32t)?,
            b: self.src(&ops[2], u32t)?,
            c: self.src(&ops[3], u32t)?,
            mask: self.src(&ops[4], u32t)?,
        })
    }

    pub(super) fn vote(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let mode = match m {
            ["sync", "all", "pred"] => VoteMode::All,
            ["sync", "any", "pred"] => VoteMode::Any,
            ["sync", "uni", "pred"] => VoteMode::Uni,
            ["sync", "ballot", "b32"] => VoteMode::Ballot,
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 3)?;
        let (a, negate) = self.pred_src(&ops[1])?;
        Ok(Op::Vote {
            mode,
            d: self.dst(&ops[0])?,
            a,
            negate,
            mask: self.src(
                &ops[2],
                Ty {
                    kind: Kind::B,
                    bits: 32,
                },
            )?,
        })
    }

    /// `activemask.b32 d`.
    pub(super) fn activemask(&mut self, ops: &[Operand]) -> R<Op> {
        expect(ops, 1)?;
        Ok(Op::ActiveMask {
            d: self.dst(&ops[0])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_decodes, first_op, run, unsupported};
    use crate::isa::*;

    #[test]
    fn only_the_whole_block_barrier_zero_is_decoded() {
        assert_eq!(first_op("bar.sync 0;").unwrap(), Op::Bar);
        assert_eq!(first_op("barrier.sync.aligned 0;").unwrap(), Op::Bar);
        assert!(unsupported("bar.sync 1;"));
        assert!(unsupported("bar.sync 0, 64;"));
    }

    #[test]
    fn fences_decode_to_their_reach_and_strength() {
        assert_eq!(
            first_op("membar.gl;").unwrap(),
            Op::Fence {
                reach: Reach::Gpu,
                sc: true
            }
        );
        assert_eq!(
            first_op("fence.acq_rel.cta;").unwrap(),
            Op::Fence {
                reach: Reach::Cta,
                sc: false
            }
        );
        assert_eq!(first_op("fence.proxy.alias;").unwrap(), Op::Nop);
    }

    #[test]
    fn warp_collectives_decode_their_mode() {
        assert_decodes(
            "shfl.sync.bfly.b32 %r1, %r2, 1, 31, -1;",
            "Shfl { mode: Bfly, d: 0, p: None, a: Reg(1), b: Imm(1), c: Imm(31),",
        );
        assert_decodes(
            "vote.sync.ballot.b32 %r1, %p1, -1;",
            "Vote { mode: Ballot, d: 1, a: Reg(0), negate: false, mask: Imm(4294967295) }",
        );
        assert!(unsupported("shfl.up.b32 %r1, %r2, 1, 0;"));
    }

    #[test]
    fn a_lone_thread_sees_itself_in_the_active_mask_and_the_ballot() {
        assert_eq!(run("activemask.b32 %r1;\nst.global.u32 [%out], %r1;"), 1);
        let ballot = "setp.eq.u32 %p1, 0, 0;\nvote.sync.ballot.b32 %r1, %p1, 1;\n\
                      st.global.u32 [%out], %r1;";
        assert_eq!(run(ballot), 1);
    }
}
