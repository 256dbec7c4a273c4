//! What PTX's ordering qualifiers mean to the simulator's memory models: the semantics and scope
//! of an access (`.weak`, `.volatile`, `.relaxed`, `.acquire`, `.release`, `.acq_rel`; `.cta`,
//! `.cluster`, `.gpu`, `.sys`) and the strength and scope of a fence become an [`Order`] or a
//! fence's [`Reach`]. It lives with the memory model rather than in the decoder, so that the
//! decoder only records qualifiers and one place decides what they mean.

use crate::isa::{Order, Reach};
use gpuwmm_ptx::{FenceStrength, Scope, Semantics};

/// The order of an access with these qualifiers. `volatile` is relaxed at sys scope, an
/// access with no scope (an `atom` or `red`) is at gpu scope, and `.cluster` counts as `.gpu`.
/// A reduction's read never forms an acquire pattern.
pub fn access_order(semantics: Semantics, scope: Option<Scope>, reduction: bool) -> Order {
    let reach = match (semantics, scope) {
        (Semantics::Weak, _) => Reach::Weak,
        (Semantics::Volatile, _) | (_, Some(Scope::Sys)) => Reach::Sys,
        (_, Some(Scope::Cta)) => Reach::Cta,
        _ => Reach::Gpu,
    };
    Order {
        reach,
        releases: matches!(semantics, Semantics::Release | Semantics::AcqRel),
        acquires: matches!(semantics, Semantics::Acquire | Semantics::AcqRel),
        reduction,
    }
}

/// The reach of a fence of this scope and whether it is a `fence.sc` (a `membar` is one).
pub fn fence_order(scope: Scope, strength: FenceStrength) -> (Reach, bool) {
    let reach = match scope {
        Scope::Cta => Reach::Cta,
        Scope::Cluster | Scope::Gpu => Reach::Gpu,
        Scope::Sys => Reach::Sys,
    };
    (reach, strength == FenceStrength::SequentiallyConsistent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_accesses_reach_nobody_whatever_their_scope() {
        let o = access_order(Semantics::Weak, None, false);
        assert_eq!(o.reach, Reach::Weak);
        assert!(!o.releases && !o.acquires && !o.reduction);
    }

    #[test]
    fn strong_accesses_reach_their_scope_with_cluster_as_gpu() {
        let reach = |scope| access_order(Semantics::Relaxed, scope, false).reach;
        assert_eq!(reach(Some(Scope::Cta)), Reach::Cta);
        assert_eq!(reach(Some(Scope::Cluster)), Reach::Gpu);
        assert_eq!(reach(Some(Scope::Gpu)), Reach::Gpu);
        assert_eq!(reach(Some(Scope::Sys)), Reach::Sys);
        // an atom without a scope is at gpu scope
        assert_eq!(reach(None), Reach::Gpu);
        // volatile is relaxed at sys scope
        let volatile = access_order(Semantics::Volatile, None, false);
        assert_eq!(volatile.reach, Reach::Sys);
        assert!(!volatile.acquires && !volatile.releases);
    }

    #[test]
    fn acquire_and_release_are_read_from_the_semantics() {
        let o = |s| access_order(s, Some(Scope::Gpu), false);
        assert!(o(Semantics::Acquire).acquires && !o(Semantics::Acquire).releases);
        assert!(o(Semantics::Release).releases && !o(Semantics::Release).acquires);
        assert!(o(Semantics::AcqRel).acquires && o(Semantics::AcqRel).releases);
        assert!(!o(Semantics::Relaxed).acquires && !o(Semantics::Relaxed).releases);
        assert!(access_order(Semantics::Relaxed, None, true).reduction);
    }

    #[test]
    fn fences_reach_their_scope_with_cluster_as_gpu_and_only_sc_is_sc() {
        use FenceStrength::{AcquireRelease, SequentiallyConsistent};
        assert_eq!(fence_order(Scope::Cta, AcquireRelease), (Reach::Cta, false));
        assert_eq!(
            fence_order(Scope::Cluster, AcquireRelease),
            (Reach::Gpu, false)
        );
        assert_eq!(fence_order(Scope::Gpu, AcquireRelease), (Reach::Gpu, false));
        assert_eq!(
            fence_order(Scope::Sys, SequentiallyConsistent),
            (Reach::Sys, true)
        );
    }
}
