//! Operands: type words, special registers, register slots, immediates, the constant pool and
//! addresses. Every instruction family decodes its operands through these, so a register name or
//! a literal means the same thing in every instruction.

use super::{bad, Decoder, Symbol, Why, CALL_PARAM, R, SINK};
use crate::isa::*;
use crate::vars::literal_bits;
use crate::{LOCAL_WINDOW, SHARED_WINDOW};
use gpuwmm_ptx::Operand;

/// A PTX type word (`u32`, `f64`, `pred`); `None` for types the simulator does not implement.
pub(super) fn ty_of(word: &str) -> Option<Ty> {
    let kind = match word.as_bytes().first()? {
        b'u' => Kind::U,
        b's' => Kind::S,
        b'b' => Kind::B,
        b'f' => Kind::F,
        b'p' if word == "pred" => return Some(Ty::PRED),
        _ => return None,
    };
    let bits: u8 = word[1..].parse().ok()?;
    let ok = match kind {
        Kind::F => bits == 32 || bits == 64,
        _ => matches!(bits, 8 | 16 | 32 | 64),
    };
    ok.then_some(Ty { kind, bits })
}

pub(super) fn ty_word(ty: Ty) -> &'static str {
    match (ty.kind, ty.bits) {
        (Kind::F, 32) => "f32",
        (Kind::F, _) => "f64",
        _ => "u64",
    }
}

pub(super) fn mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

pub(super) fn special(name: &str) -> Option<Special> {
    let dim = |s: &str| match s {
        "x" => Some(0u8),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    let name = name.strip_prefix('%')?;
    if let Some((reg, d)) = name.split_once('.') {
        let d = dim(d)?;
        return match reg {
            "tid" => Some(Special::Tid(d)),
            "ntid" => Some(Special::Ntid(d)),
            "ctaid" => Some(Special::Ctaid(d)),
            "nctaid" => Some(Special::Nctaid(d)),
            _ => None,
        };
    }
    Some(match name {
        "laneid" => Special::LaneId,
        "warpid" => Special::WarpId,
        "nwarpid" => Special::NWarpId,
        "smid" => Special::SmId,
        "nsmid" => Special::NSmId,
        "gridid" => Special::GridId,
        "clock" | "clock64" | "globaltimer" | "globaltimer_lo" => Special::Clock,
        "lanemask_eq" => Special::LanemaskEq,
        "lanemask_lt" => Special::LanemaskLt,
        "lanemask_le" => Special::LanemaskLe,
        "lanemask_gt" => Special::LanemaskGt,
        "lanemask_ge" => Special::LanemaskGe,
        env if env
            .strip_prefix("envreg")
            .and_then(|n| n.parse::<u8>().ok())
            .is_some_and(|n| n < 32) =>
        {
            Special::EnvReg(env["envreg".len()..].parse().unwrap_or(0))
        }
        _ => return None,
    })
}

/// The modifiers that never change what the simulator computes.
pub(super) fn harmless(m: &str) -> bool {
    matches!(
        m,
        "approx"
            | "full"
            | "uni"
            | "aligned"
            | "sync"
            | "nc"
            | "ca"
            | "cg"
            | "cs"
            | "lu"
            | "cv"
            | "wb"
            | "wt"
            | "noftz"
    ) || m.starts_with("L1::")
        || m.starts_with("L2::")
}

impl Decoder<'_, '_> {
    /// Declares the registers of a `.reg` directive; with `only_bare`, only those whose name
    /// has no `%` (as inline PTX in CUDA headers declares them: `.reg .f16 low, high;`), which
    /// operands name like symbols; the others get their slot on first use.
    pub(super) fn declare_regs(&mut self, text: &str, only_bare: bool) {
        let rest = text.trim_start_matches(".reg").trim();
        let names = rest
            .split_whitespace()
            .skip_while(|w| w.starts_with('.'))
            .collect::<Vec<_>>()
            .join(" ");
        let names = names.split(',').map(str::trim).filter(|n| !n.is_empty());
        for name in names.filter(|n| !only_bare || !n.starts_with('%')) {
            if let Some((prefix, count)) = name.split_once('<') {
                let count: u32 = count.trim_end_matches('>').parse().unwrap_or(0);
                for i in 0..count {
                    self.fresh(&format!("{prefix}{i}"));
                }
            } else {
                self.fresh(name);
            }
        }
    }

    pub(super) fn fresh(&mut self, name: &str) -> Reg {
        let r = self.p.next_reg;
        self.p.next_reg += 1;
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), r);
        }
        r
    }

    pub(super) fn reg(&mut self, name: &str) -> Reg {
        for scope in self.scopes.iter().rev() {
            if let Some(&r) = scope.get(name) {
                return r;
            }
        }
        let r = self.p.next_reg;
        self.p.next_reg += 1;
        self.scopes[0].insert(name.to_string(), r);
        r
    }

    /// The slot of a declared register named without `%` (see [`Self::declare_regs`]).
    fn bare_reg(&self, name: &str) -> Option<Reg> {
        self.scopes
            .iter()
            .rev()
            .find_map(|scope| scope.get(name).copied())
    }

    pub(super) fn dst(&mut self, o: &Operand) -> R<Reg> {
        match o {
            Operand::Register(r) if special(r).is_none() => Ok(self.reg(r)),
            Operand::Symbol(s) if self.bare_reg(s).is_some() => Ok(self.reg(s)),
            Operand::Symbol(s) if s == "_" => Ok(SINK),
            _ => bad(format!("'{o}' is not a destination register")),
        }
    }

    /// A destination that may be a pair `p|q` (`setp`, `shfl`): the second is optional.
    pub(super) fn dst_pair(&mut self, o: &Operand) -> R<(Reg, Option<Reg>)> {
        match o {
            Operand::Other(t) if t.contains('|') => {
                let (p, q) = t.split_once('|').unwrap_or_default();
                Ok((self.reg(p.trim()), Some(self.reg(q.trim()))))
            }
            o => Ok((self.dst(o)?, None)),
        }
    }

    /// The sources `a, b, c` of a four-operand instruction `d, a, b, c`; `c` has type `c_ty`.
    pub(super) fn sources3(&mut self, ops: &[Operand], ty: Ty, c_ty: Ty) -> R<(Src, Src, Src)> {
        Ok((
            self.src(&ops[1], ty)?,
            self.src(&ops[2], ty)?,
            self.src(&ops[3], c_ty)?,
        ))
    }

    pub(super) fn src(&mut self, o: &Operand, ty: Ty) -> R<Src> {
        match o {
            Operand::Register(r) => Ok(match special(r) {
                Some(s) => Src::Special(s),
                None => Src::Reg(self.reg(r)),
            }),
            // The IR parser leaves literals it cannot read as i64 (`-9223372036854775808`) as
            // `Other`.
            Operand::Immediate(text) | Operand::Other(text)
                if literal_bits(text, ty_word(ty)).is_some() =>
            {
                let bits = literal_bits(text, ty_word(ty)).unwrap_or_default();
                let bits = if ty.is_float() {
                    bits
                } else {
                    bits & mask(ty.bits.max(1))
                };
                Ok(self.constant(bits))
            }
            Operand::Symbol(s) if self.bare_reg(s).is_some() => Ok(Src::Reg(self.reg(s))),
            Operand::Symbol(s) => match self.symbols.get(s) {
                Some(
                    Symbol::Global(a) | Symbol::Shared(a) | Symbol::Local(a) | Symbol::Param(a),
                ) => Ok(self.constant(*a)),
                Some(Symbol::CallParam(_)) => Err(Why::Unsupported),
                None => bad(format!("unknown symbol '{s}'")),
            },
            _ => bad(format!("bad source operand '{o}'")),
        }
    }

    /// A constant operand: inline when it fits in 32 bits, else in the constant pool.
    pub(super) fn constant(&mut self, v: u64) -> Src {
        if v <= u64::from(u32::MAX) {
            return Src::Imm(v as u32);
        }
        let pool = &mut self.p.consts;
        let i = pool.iter().position(|&c| c == v).unwrap_or_else(|| {
            pool.push(v);
            pool.len() - 1
        });
        Src::Const(i as u32)
    }

    /// A predicate source, possibly negated (`!%p`).
    pub(super) fn pred_src(&mut self, o: &Operand) -> R<(Src, bool)> {
        match o {
            Operand::Other(t) if t.starts_with('!') => Ok((Src::Reg(self.reg(&t[1..])), true)),
            _ => Ok((self.src(o, Ty::PRED)?, false)),
        }
    }

    pub(super) fn addr(&mut self, o: &Operand, space: Space) -> R<Addr> {
        let Operand::Address { base, offset } = o else {
            return bad(format!("'{o}' is not an address"));
        };
        if base.is_empty() {
            return Ok(Addr {
                base: None,
                offset: *offset,
            });
        }
        if base.starts_with('%') {
            return Ok(Addr {
                base: Some(self.reg(base)),
                offset: *offset,
            });
        }
        if let Some(&(at, _)) = self
            .params
            .iter()
            .rev()
            .find_map(|scope| scope.get(base.as_str()))
        {
            if space != Space::Param {
                return Err(Why::Unsupported);
            }
            return Ok(Addr {
                base: None,
                offset: (CALL_PARAM | at) as i64 + offset,
            });
        }
        let at = match (self.symbols.get(base.as_str()), space) {
            (None, _) => return bad(format!("unknown symbol '{base}'")),
            (Some(Symbol::CallParam(a)), Space::Param) => CALL_PARAM | a,
            (Some(Symbol::CallParam(_)), _) => return Err(Why::Unsupported),
            (Some(Symbol::Shared(a)), Space::Generic) => SHARED_WINDOW + a,
            (Some(Symbol::Local(a)), Space::Generic) => LOCAL_WINDOW + a,
            (Some(Symbol::Param(_)), Space::Generic) => return Err(Why::Unsupported),
            (
                Some(Symbol::Global(a) | Symbol::Shared(a) | Symbol::Local(a) | Symbol::Param(a)),
                _,
            ) => *a,
        };
        Ok(Addr {
            base: None,
            offset: at as i64 + offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{first_op, run};
    use super::*;
    use crate::device::BackendError;

    #[test]
    fn type_words_decode_to_the_types_the_simulator_implements() {
        assert_eq!(
            ty_of("u16"),
            Some(Ty {
                kind: Kind::U,
                bits: 16
            })
        );
        assert_eq!(ty_of("pred"), Some(Ty::PRED));
        assert_eq!(ty_of("f16"), None);
        assert_eq!(ty_of("u128"), None);
    }

    #[test]
    fn special_registers_are_sources_not_slots() {
        assert_eq!(
            first_op("mov.u32 %r1, %tid.y;").unwrap(),
            Op::Mov {
                ty: Ty {
                    kind: Kind::U,
                    bits: 32
                },
                d: 0,
                a: Src::Special(Special::Tid(1)),
            }
        );
    }

    #[test]
    fn wide_constants_go_to_the_pool_and_keep_every_bit() {
        assert!(matches!(
            first_op("mov.u64 %rd1, 0x123456789;").unwrap(),
            Op::Mov {
                a: Src::Const(0),
                ..
            }
        ));
        let body = "mov.u64 %rd1, 0x123456789;\nst.global.u64 [%out], %rd1;";
        assert_eq!(run(body), 0x1_2345_6789);
    }

    #[test]
    fn an_unknown_symbol_is_a_bad_module_naming_it() {
        match first_op("ld.global.u32 %r1, [nowhere];") {
            Err(BackendError::BadModule(msg)) => assert!(msg.contains("nowhere"), "{msg}"),
            other => panic!("expected a bad module, got {other:?}"),
        }
    }
}
