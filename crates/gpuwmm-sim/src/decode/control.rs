//! Control flow and predicates: branches, returns, calls of device functions, `setp`/`set` and
//! `selp`. Calls are resolved here against the callee's parameter frame.

use super::layout::align_up;
use super::operands::{harmless, ty_of};
use super::{bad, check, definition, expect, frame, one_type, CallSite, Decoder, Why, R};
use crate::device::BackendError;
use crate::isa::*;
use crate::vars::parse_var;
use gpuwmm_ptx::Operand;

impl Decoder<'_, '_> {
    /// `bra{.uni} label`.
    pub(super) fn bra(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        check(m, &["uni"])?;
        expect(ops, 1)?;
        Ok(Op::Bra {
            target: self.label(&ops[0])?,
        })
    }

    /// `ret{.uni}`: returns from a device function, ends the thread in a kernel.
    pub(super) fn ret(&self, m: &[&str]) -> R<Op> {
        check(m, &["uni"])?;
        Ok(if self.in_func { Op::Return } else { Op::Exit })
    }

    /// `selp.type d, a, b, p`.
    pub(super) fn selp(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &[])?;
        expect(ops, 4)?;
        let d = self.dst(&ops[0])?;
        let (a, b, c) = self.sources3(ops, ty, Ty::PRED)?;
        Ok(Op::Selp { ty, d, a, b, c })
    }

    /// A call-site `.param` declaration inside a `{ }` block: a fresh local-memory slot.
    pub(super) fn declare_call_param(&mut self, text: &str) -> Result<(), BackendError> {
        let v = parse_var(text)
            .map_err(BackendError::BadModule)?
            .ok_or_else(|| BackendError::BadModule(format!("bad declaration '{text}'")))?;
        let (at, bytes) = (align_up(self.p.local, v.align), v.bytes());
        self.p.local = at + bytes;
        if let Some(scope) = self.params.last_mut() {
            scope.insert(v.name, (at, bytes));
        }
        Ok(())
    }

    pub(super) fn call_param(&self, o: &Operand) -> R<(u64, u64)> {
        let Operand::Symbol(name) = o else {
            return Err(Why::Unsupported);
        };
        self.params
            .iter()
            .rev()
            .find_map(|scope| scope.get(name.as_str()).copied())
            .map_or_else(|| bad(format!("'{name}' is not a call parameter")), Ok)
    }

    /// `call{.uni} [(ret),] func[, (args)]`: direct calls of defined device functions.
    pub(super) fn call(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        check(m, &[])?;
        let (rets, rest) = match ops.first() {
            Some(Operand::List(r)) => (r.as_slice(), &ops[1..]),
            _ => (&[][..], ops),
        };
        let (name, args) = match rest {
            [Operand::Symbol(n)] => (n, &[][..]),
            [Operand::Symbol(n), Operand::List(a)] => (n, a.as_slice()),
            _ => return Err(Why::Unsupported),
        };
        if definition(self.p.module, name).is_none() {
            return self.runtime_call(name, rets, args);
        }
        if rets.len() > 1 {
            return Err(Why::Unsupported);
        }
        let frame = frame(self.p, name).map_err(|e| Why::Bad(e.to_string()))?;
        if frame.params.len() != args.len() || frame.ret.is_some() != (rets.len() == 1) {
            return bad(format!("call of '{name}' does not match its declaration"));
        }
        let mut copies = Vec::new();
        for ((_, formal, size), a) in frame.params.iter().zip(args) {
            let (actual, actual_size) = self.call_param(a)?;
            copies.push((*formal, actual, (*size).min(actual_size)));
        }
        let ret = match (&frame.ret, rets.first()) {
            (Some((_, callee, size)), Some(r)) => {
                let (caller, caller_size) = self.call_param(r)?;
                Some((caller, *callee, (*size).min(caller_size)))
            }
            _ => None,
        };
        let site = self.p.calls.len();
        self.p.calls.push(CallSite {
            target: 0,
            args: copies,
            ret,
        });
        self.p.pending.push((site, name.clone()));
        Ok(Op::Call { site: site as u32 })
    }

    /// Calls of the CUDA runtime's device functions, which NVRTC leaves undefined: `vprintf`
    /// (`printf`: the format and argument buffer addresses are the call's two `.b64`
    /// parameters, see `printf/`) and `__assertfail` (a failed `assert`: the thread faults, as
    /// on a GPU). Any other undefined function is refused.
    fn runtime_call(&mut self, name: &str, rets: &[Operand], args: &[Operand]) -> R<Op> {
        match (name, rets, args) {
            ("__assertfail", [], _) => Ok(Op::AssertFail),
            ("vprintf", [], [format, buffer]) => self.vprintf(format, buffer, None),
            ("vprintf", [ret], [format, buffer]) => self.vprintf(format, buffer, Some(ret)),
            _ => Err(Why::Unsupported),
        }
    }

    /// `call (ret), vprintf, (format, buffer)`: the local-memory slots of its parameters.
    fn vprintf(&self, format: &Operand, buffer: &Operand, ret: Option<&Operand>) -> R<Op> {
        let slot = |o: &Operand, bytes: u64| -> R<u32> {
            let (at, size) = self.call_param(o)?;
            if size != bytes {
                return bad(format!("vprintf takes {bytes}-byte parameters, not {size}"));
            }
            u32::try_from(at).map_err(|_| Why::Unsupported)
        };
        Ok(Op::Printf {
            format: slot(format, 8)?,
            args: slot(buffer, 8)?,
            ret: ret.map(|r| slot(r, 4)).transpose()?,
        })
    }

    pub(super) fn label(&self, o: &Operand) -> R<u32> {
        match o {
            Operand::Symbol(l) => self
                .labels
                .get(l)
                .copied()
                .map_or_else(|| bad(format!("unknown label '{l}'")), Ok),
            _ => Err(Why::Unsupported),
        }
    }

    pub(super) fn setp(&mut self, is_set: bool, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ftz = m.contains(&"ftz");
        let mut words = m.iter().filter(|w| !harmless(w) && **w != "ftz");
        let cmp = words
            .next()
            .and_then(|w| w.parse::<Cmp>().ok())
            .ok_or(Why::Unsupported)?;
        let mut rest: Vec<&str> = words.copied().collect();
        let bool_op = match rest.first().copied() {
            Some("and") => Some(BoolOp::And),
            Some("or") => Some(BoolOp::Or),
            Some("xor") => Some(BoolOp::Xor),
            _ => None,
        };
        if bool_op.is_some() {
            rest.remove(0);
        }
        let (dty, ty) = match (is_set, rest.as_slice()) {
            (false, [t]) => (Ty::PRED, ty_of(t).ok_or(Why::Unsupported)?),
            (true, [dt, t]) => (
                ty_of(dt).ok_or(Why::Unsupported)?,
                ty_of(t).ok_or(Why::Unsupported)?,
            ),
            _ => return Err(Why::Unsupported),
        };
        if ty.kind == Kind::Pred || (ftz && !ty.is_float()) {
            return Err(Why::Unsupported);
        }
        let want = if bool_op.is_some() { 4 } else { 3 };
        expect(ops, want)?;
        let combine = match bool_op {
            Some(op) => {
                let (c, negate) = self.pred_src(&ops[3])?;
                Some(Combine { op, c, negate })
            }
            None => None,
        };
        let a = self.src(&ops[1], ty)?;
        let b = self.src(&ops[2], ty)?;
        if is_set {
            return Ok(Op::Set {
                cmp,
                ty,
                ftz,
                dty,
                d: self.dst(&ops[0])?,
                a,
                b,
                combine,
            });
        }
        let (p, q) = self.dst_pair(&ops[0])?;
        Ok(Op::Setp {
            cmp,
            ty,
            ftz,
            p,
            q,
            a,
            b,
            combine,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_decodes, first_op, run, unsupported};
    use crate::isa::*;

    #[test]
    fn setp_decodes_its_comparison_and_refuses_predicate_operands() {
        assert_decodes(
            "setp.lt.s32 %p1, %r1, %r2;",
            "Setp { cmp: Lt, ty: Ty { kind: S, bits: 32 }, ftz: false, p: 2, q: None, a: Reg(0),",
        );
        assert!(unsupported("setp.eq.pred %p1, %p2, %p3;"));
    }

    #[test]
    fn branches_target_the_index_of_their_label() {
        // the helper's kernel ends with `ret`, the instruction after the label
        assert_eq!(
            first_op("bra.uni DONE;\nDONE:").unwrap(),
            Op::Bra { target: 1 }
        );
        assert_eq!(first_op("ret;").unwrap(), Op::Exit);
    }

    #[test]
    fn a_guarded_branch_skips_what_it_jumps_over() {
        let body = "mov.u32 %r1, 3;\nsetp.gt.u32 %p1, %r1, 2;\n@%p1 bra BIG;\n\
                    st.global.u32 [%out], 1;\nret;\nBIG:\nselp.u32 %r2, 20, 10, %p1;\n\
                    st.global.u32 [%out], %r2;";
        assert_eq!(run(body), 20);
    }
}
