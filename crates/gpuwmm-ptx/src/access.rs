//! Classification of memory accesses and fences.
//!
//! Fence placement, the simulator and the optcheck all need to know, for an instruction, whether
//! it touches memory, in which state space, with which semantics and scope. This module reads
//! that from the opcode's modifiers, applying the PTX defaults (a plain `ld`/`st` is weak; an
//! `atom`/`red` without qualifiers is relaxed at gpu scope; no state space means generic).

use super::ir::{Function, Instruction, Module, Opcode};

/// What an access does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessKind {
    Load,
    Store,
    Atomic,
    Reduction,
}

/// Where an access goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateSpace {
    Global,
    Generic,
    Shared,
    Local,
    Param,
    Const,
}

/// The memory-consistency semantics of an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Semantics {
    Weak,
    Volatile,
    Relaxed,
    Acquire,
    Release,
    AcqRel,
}

/// A scope qualifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Cta,
    Cluster,
    Gpu,
    Sys,
}

impl Scope {
    /// The scope a qualifier word names (`cta`, `cluster`, `gpu`, `sys`), as PTX and litmus
    /// files spell it.
    pub fn from_word(word: &str) -> Option<Scope> {
        match word {
            "cta" => Some(Scope::Cta),
            "cluster" => Some(Scope::Cluster),
            "gpu" => Some(Scope::Gpu),
            "sys" => Some(Scope::Sys),
            _ => None,
        }
    }

    /// The qualifier word, without its dot.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Cta => "cta",
            Scope::Cluster => "cluster",
            Scope::Gpu => "gpu",
            Scope::Sys => "sys",
        }
    }
}

/// A classified memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemoryAccess {
    pub kind: AccessKind,
    pub space: StateSpace,
    pub semantics: Semantics,
    /// Explicit or implied scope; `None` for weak and volatile accesses.
    pub scope: Option<Scope>,
    /// 1, 2, 4 or 8 elements.
    pub vector: u8,
    /// Width of one element in bits.
    pub bits: u16,
}

impl MemoryAccess {
    /// True for the accesses that may touch global memory.
    pub fn may_be_global(&self) -> bool {
        matches!(self.space, StateSpace::Global | StateSpace::Generic)
    }

    /// True for the accesses through which threads can communicate: global, generic and shared
    /// memory (local memory is the thread's own; param and const memory are read-only). These
    /// are the fence candidates.
    pub fn may_communicate(&self) -> bool {
        self.may_be_global() || self.space == StateSpace::Shared
    }

    /// The access an instruction spelled `opcode` (`st.shared.u32`) performs, if any.
    pub fn of_opcode(opcode: &str) -> Option<MemoryAccess> {
        classify_access(&Opcode::parse(opcode))
    }
}

/// The ordering strength of a fence instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FenceStrength {
    /// `fence.sc` and all `membar` (a synonym of `fence.sc` on sm_70 and later).
    SequentiallyConsistent,
    AcquireRelease,
}

/// A classified fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fence {
    pub strength: FenceStrength,
    pub scope: Scope,
}

impl Instruction {
    /// The memory access this instruction performs, if any.
    pub fn memory_access(&self) -> Option<MemoryAccess> {
        classify_access(&self.opcode)
    }

    /// The ordering fence this instruction is, if any (`fence.proxy.*` and other non-ordering
    /// fences are not).
    pub fn fence(&self) -> Option<Fence> {
        classify_fence(&self.opcode)
    }

    /// Whether this is a CTA or warp barrier its thread waits at (`bar.sync`, `bar.red`,
    /// `barrier.sync`, `barrier.cta.red`, `bar.warp.sync`, ...; not `bar.arrive`, which does
    /// not wait, nor a cluster barrier). What the threads it joins (the block's, or the lanes
    /// of the warp mask) did before it precedes what each does after it; a release fence after
    /// it, followed by a strong write, passes all of that on to another thread (PTX: base
    /// causality is po and synchronizes-with, and a release pattern is a fence followed by a
    /// write of its own thread).
    pub fn waits_at_barrier(&self) -> bool {
        let op = &self.opcode;
        matches!(op.base.as_str(), "bar" | "barrier") && !op.has("arrive") && !op.has("cluster")
    }
}

impl Function {
    /// The ordering fences in the body.
    pub fn fence_count(&self) -> usize {
        self.instructions().filter(|i| i.fence().is_some()).count()
    }
}

impl Module {
    /// The ordering fences in every function.
    pub fn fence_count(&self) -> usize {
        self.functions().map(Function::fence_count).sum()
    }
}

fn classify_access(op: &Opcode) -> Option<MemoryAccess> {
    let kind = match op.base.as_str() {
        "ld" | "ldu" => AccessKind::Load,
        "st" => AccessKind::Store,
        "atom" => AccessKind::Atomic,
        "red" => AccessKind::Reduction,
        _ => return None,
    };
    // Matrix, bulk and asynchronous variants are not plain accesses.
    if op.has("async") || op.has("bulk") {
        return None;
    }
    let mut access = MemoryAccess {
        kind,
        space: StateSpace::Generic,
        semantics: default_semantics(kind),
        scope: None,
        vector: 1,
        bits: 0,
    };
    for m in &op.modifiers {
        apply_modifier(&mut access, m);
    }
    if access.scope.is_none() && !matches!(access.semantics, Semantics::Weak | Semantics::Volatile)
    {
        access.scope = Some(Scope::Gpu);
    }
    Some(access)
}

fn default_semantics(kind: AccessKind) -> Semantics {
    match kind {
        AccessKind::Load | AccessKind::Store => Semantics::Weak,
        AccessKind::Atomic | AccessKind::Reduction => Semantics::Relaxed,
    }
}

fn apply_modifier(access: &mut MemoryAccess, modifier: &str) {
    // `shared::cta`, `shared::cluster`: the part before `::` names the space.
    let head = modifier.split("::").next().unwrap_or(modifier);
    match head {
        "global" => access.space = StateSpace::Global,
        "shared" => access.space = StateSpace::Shared,
        "local" => access.space = StateSpace::Local,
        "param" => access.space = StateSpace::Param,
        "const" => access.space = StateSpace::Const,
        "weak" => access.semantics = Semantics::Weak,
        "volatile" => access.semantics = Semantics::Volatile,
        "relaxed" => access.semantics = Semantics::Relaxed,
        "acquire" => access.semantics = Semantics::Acquire,
        "release" => access.semantics = Semantics::Release,
        "acq_rel" => access.semantics = Semantics::AcqRel,
        "v2" => access.vector = 2,
        "v4" => access.vector = 4,
        "v8" => access.vector = 8,
        other => {
            if let Some(scope) = parse_scope(other) {
                access.scope = Some(scope);
            } else if let Some(bits) = type_bits(other) {
                access.bits = bits;
            }
        }
    }
}

fn parse_scope(word: &str) -> Option<Scope> {
    Scope::from_word(word)
}

/// The width in bits of a PTX fundamental type such as `u32` or `f64`.
pub fn type_bits(word: &str) -> Option<u16> {
    let (class, width) = word.split_at(word.find(|c: char| c.is_ascii_digit())?);
    if !matches!(class, "b" | "u" | "s" | "f") {
        return None;
    }
    match width.parse::<u16>().ok()? {
        w @ (8 | 16 | 32 | 64 | 128) => Some(w),
        _ => None,
    }
}

fn classify_fence(op: &Opcode) -> Option<Fence> {
    match op.base.as_str() {
        "membar" => {
            let scope = match op.modifiers.first().map(String::as_str) {
                Some("cta") => Scope::Cta,
                Some("gl") => Scope::Gpu,
                Some("sys") => Scope::Sys,
                _ => return None,
            };
            Some(Fence {
                strength: FenceStrength::SequentiallyConsistent,
                scope,
            })
        }
        "fence" => {
            let strength = if op.has("acq_rel") {
                FenceStrength::AcquireRelease
            } else if op.has("sc") {
                FenceStrength::SequentiallyConsistent
            } else {
                return None;
            };
            let scope = op.modifiers.iter().find_map(|m| parse_scope(m))?;
            Some(Fence { strength, scope })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(op: &str) -> Option<MemoryAccess> {
        classify_access(&Opcode::parse(op))
    }

    #[test]
    fn plain_global_load_is_weak() {
        let a = access("ld.global.f32").unwrap();
        assert_eq!(a.kind, AccessKind::Load);
        assert_eq!(a.space, StateSpace::Global);
        assert_eq!(a.semantics, Semantics::Weak);
        assert_eq!(a.scope, None);
        assert_eq!(a.bits, 32);
    }

    #[test]
    fn no_state_space_means_generic() {
        assert_eq!(access("st.u32").unwrap().space, StateSpace::Generic);
        assert_eq!(access("atom.cas.b32").unwrap().space, StateSpace::Generic);
    }

    #[test]
    fn atomics_default_to_relaxed_gpu() {
        let a = access("atom.global.cas.b32").unwrap();
        assert_eq!(a.kind, AccessKind::Atomic);
        assert_eq!(a.semantics, Semantics::Relaxed);
        assert_eq!(a.scope, Some(Scope::Gpu));
        let r = access("red.global.add.u32").unwrap();
        assert_eq!(r.kind, AccessKind::Reduction);
    }

    #[test]
    fn explicit_semantics_and_scope() {
        let a = access("ld.acquire.sys.global.u32").unwrap();
        assert_eq!(a.semantics, Semantics::Acquire);
        assert_eq!(a.scope, Some(Scope::Sys));
        let s = access("st.release.cta.u32").unwrap();
        assert_eq!(s.semantics, Semantics::Release);
        assert_eq!(s.scope, Some(Scope::Cta));
        assert_eq!(
            access("st.volatile.global.u32").unwrap().semantics,
            Semantics::Volatile
        );
        assert_eq!(
            access("atom.acq_rel.gpu.global.add.u32").unwrap().semantics,
            Semantics::AcqRel
        );
    }

    #[test]
    fn vectors_and_spaces() {
        let a = access("ld.global.v4.u32").unwrap();
        assert_eq!((a.vector, a.bits), (4, 32));
        assert_eq!(
            access("ld.shared::cta.u32").unwrap().space,
            StateSpace::Shared
        );
        assert_eq!(access("ld.param.u64").unwrap().space, StateSpace::Param);
        assert_eq!(
            access("ld.global.nc.f32").unwrap().space,
            StateSpace::Global
        );
        assert!(access("ld.local.u8").unwrap().bits == 8);
        assert!(access("cp.async.ca.shared.global").is_none());
        assert!(access("mov.u32").is_none());
    }

    #[test]
    fn fences_are_classified() {
        let f = classify_fence(&Opcode::parse("membar.gl")).unwrap();
        assert_eq!(
            (f.strength, f.scope),
            (FenceStrength::SequentiallyConsistent, Scope::Gpu)
        );
        let f = classify_fence(&Opcode::parse("fence.acq_rel.gpu")).unwrap();
        assert_eq!(f.strength, FenceStrength::AcquireRelease);
        assert_eq!(
            classify_fence(&Opcode::parse("membar.cta")).unwrap().scope,
            Scope::Cta
        );
        assert_eq!(
            classify_fence(&Opcode::parse("fence.sc.sys"))
                .unwrap()
                .scope,
            Scope::Sys
        );
        assert!(classify_fence(&Opcode::parse("fence.proxy.alias")).is_none());
    }

    #[test]
    fn type_widths() {
        assert_eq!(type_bits("u64"), Some(64));
        assert_eq!(type_bits("b8"), Some(8));
        assert_eq!(type_bits("f16"), Some(16));
        assert_eq!(type_bits("v4"), None);
        assert_eq!(type_bits("pred"), None);
    }
}
