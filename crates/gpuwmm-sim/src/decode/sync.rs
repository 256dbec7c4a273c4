//! Synchronisation and warp collectives: CTA barriers (`bar`/`barrier` `.sync`, `.arrive`,
//! `.red`, ids 0 to 15 with optional thread counts), `bar.warp.sync`, fences (`membar`,
//! `fence`), `shfl`, `vote` and `activemask`. What a fence's scope and strength mean for the
//! memory models is decided by [`crate::ptx_model::fence_order`].

use super::{bad, expect, Decoder, Why, R};
use crate::isa::*;
use crate::ptx_model::fence_order;
use gpuwmm_ptx::{Instruction, Operand};

/// A 32-bit untyped operand (masks, lanes, shuffled values).
const U32: Ty = Ty {
    kind: Kind::B,
    bits: 32,
};

/// The modifiers of a barrier instruction without those that change nothing here (`.cta`, the
/// only scope; `.aligned`, a promise about the warp the simulator need not rely on).
fn barrier_words<'m>(m: &[&'m str]) -> Vec<&'m str> {
    m.iter()
        .copied()
        .filter(|w| !matches!(*w, "cta" | "aligned"))
        .collect()
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
    /// `bar{.cta}.sync a{, b}` / `barrier{.cta}.sync{.aligned} a{, b}` (wait) and
    /// `bar{.cta}.arrive a, b` / `barrier{.cta}.arrive{.aligned} a, b`; `bar.warp.sync mask`.
    pub(super) fn bar(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let wait = match barrier_words(m).as_slice() {
            ["sync"] | [] => true,
            ["arrive"] => false,
            ["warp", "sync"] => {
                expect(ops, 1)?;
                return Ok(Op::WarpSync {
                    mask: self.src(&ops[0], U32)?,
                });
            }
            _ => return Err(Why::Unsupported),
        };
        let counted = if wait { 1..=2 } else { 2..=2 };
        if !counted.contains(&ops.len()) {
            return bad(format!(
                "a barrier takes an id{} count, {} operand(s) given",
                if wait { " and an optional" } else { " and a" },
                ops.len()
            ));
        }
        Ok(Op::Bar {
            bar: self.barrier_ref(ops)?,
            wait,
        })
    }

    /// The barrier id and optional thread count of a barrier's operands.
    fn barrier_ref(&mut self, ops: &[Operand]) -> R<BarrierRef> {
        let id = self.src(&ops[0], U32)?;
        if matches!(id, Src::Imm(i) if i > 15) {
            return bad("barrier ids go from 0 to 15");
        }
        let count = ops.get(1).map(|o| self.src(o, U32)).transpose()?;
        Ok(BarrierRef { id, count })
    }

    /// `bar.red.popc.u32 d, a{, b}, {!}c` and `bar.red.{and,or}.pred d, a{, b}, {!}c`.
    pub(super) fn bar_red(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let op = match barrier_words(m).as_slice() {
            ["red", "popc", "u32"] => BarRedOp::Popc,
            ["red", "and", "pred"] => BarRedOp::And,
            ["red", "or", "pred"] => BarRedOp::Or,
            _ => return Err(Why::Unsupported),
        };
        if !(3..=4).contains(&ops.len()) {
            return bad(format!(
                "bar.red takes a destination, an id, an optional count and a predicate, {} operand(s) given",
                ops.len()
            ));
        }
        let last = ops.len() - 1;
        let (p, negate) = self.pred_src(&ops[last])?;
        Ok(Op::BarRed {
            op,
            d: self.dst(&ops[0])?,
            p,
            negate,
            bar: self.barrier_ref(&ops[1..last])?,
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
        let (d, p) = self.dst_pair(&ops[0])?;
        Ok(Op::Shfl {
            mode,
            d,
            p,
            a: self.src(&ops[1], U32)?,
            b: self.src(&ops[2], U32)?,
            c: self.src(&ops[3], U32)?,
            mask: self.src(&ops[4], U32)?,
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
            mask: self.src(&ops[2], U32)?,
        })
    }

    /// `match.any.sync.b32 d, a, mask` and `match.all.sync.b64 d|p, a, mask` (b32 or b64).
    pub(super) fn match_sync(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (all, bits) = match m {
            [mode @ ("any" | "all"), "sync", "b32"] => (*mode == "all", 32),
            [mode @ ("any" | "all"), "sync", "b64"] => (*mode == "all", 64),
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 3)?;
        let (d, p) = self.dst_pair(&ops[0])?;
        if p.is_some() && !all {
            return Err(Why::Unsupported);
        }
        Ok(Op::Match {
            all,
            d,
            p,
            a: self.src(
                &ops[1],
                Ty {
                    kind: Kind::B,
                    bits,
                },
            )?,
            mask: self.src(&ops[2], U32)?,
        })
    }

    /// `redux.sync.{add,min,max}.{u32,s32} d, a, mask` and `redux.sync.{and,or,xor}.b32`.
    pub(super) fn redux(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let op = match m {
            ["sync", "add", "u32" | "s32"] => ReduxOp::Add,
            ["sync", "min", ty @ ("u32" | "s32")] => ReduxOp::Min {
                signed: *ty == "s32",
            },
            ["sync", "max", ty @ ("u32" | "s32")] => ReduxOp::Max {
                signed: *ty == "s32",
            },
            ["sync", "and", "b32"] => ReduxOp::And,
            ["sync", "or", "b32"] => ReduxOp::Or,
            ["sync", "xor", "b32"] => ReduxOp::Xor,
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 3)?;
        Ok(Op::Redux {
            op,
            d: self.dst(&ops[0])?,
            a: self.src(&ops[1], U32)?,
            mask: self.src(&ops[2], U32)?,
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

    const WHOLE_CTA_0: Op = Op::Bar {
        bar: BarrierRef {
            id: Src::Imm(0),
            count: None,
        },
        wait: true,
    };

    #[test]
    fn match_decodes_any_and_all_with_the_all_predicate_only() {
        assert_decodes(
            "match.any.sync.b64 %r1, %rd1, -1;",
            "Match { all: false, d: 0, p: None,",
        );
        assert_decodes(
            "match.all.sync.b32 %r1|%p1, %r2, -1;",
            "Match { all: true, d: 0, p: Some(1),",
        );
        assert!(unsupported("match.any.sync.b32 %r1|%p1, %r2, -1;"));
        assert!(unsupported("match.any.sync.u32 %r1, %r2, -1;"));
    }

    #[test]
    fn barriers_decode_their_id_count_and_whether_they_wait() {
        assert_eq!(first_op("bar.sync 0;").unwrap(), WHOLE_CTA_0);
        assert_eq!(first_op("barrier.sync.aligned 0;").unwrap(), WHOLE_CTA_0);
        assert_eq!(first_op("bar.cta.sync 0;").unwrap(), WHOLE_CTA_0);
        assert_eq!(
            first_op("bar.arrive 1, 64;").unwrap(),
            Op::Bar {
                bar: BarrierRef {
                    id: Src::Imm(1),
                    count: Some(Src::Imm(64))
                },
                wait: false
            }
        );
        assert_decodes(
            "barrier.sync %r1, 96;",
            "Bar { bar: BarrierRef { id: Reg(0), count: Some(Imm(96)) }, wait: true }",
        );
        assert_decodes("bar.warp.sync -1;", "WarpSync { mask: Imm(4294967295) }");
        assert_decodes(
            "bar.red.popc.u32 %r1, 2, 64, %p1;",
            "BarRed { op: Popc, d: 1, p: Reg(0), negate: false, bar: BarrierRef { id: Imm(2), count: Some(Imm(64)) } }",
        );
        assert!(unsupported("bar.warp.arrive 1;"));
    }

    #[test]
    fn a_barrier_id_above_15_or_an_arrive_without_count_is_malformed() {
        assert!(first_op("bar.sync 16;").is_err() && !unsupported("bar.sync 16;"));
        assert!(first_op("bar.arrive 1;").is_err() && !unsupported("bar.arrive 1;"));
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
