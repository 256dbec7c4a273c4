//! Flags narrower than a word (`bool`, `char`, `short`): release and acquire through a 1- or
//! 2-byte flag synchronise as through a 4-byte one. Before, the simulator kept no history for
//! 1- and 2-byte accesses, so an acquire of such a flag took nothing and a correct handoff
//! failed (233 of 300 runs of a `st.release.u8`/`ld.acquire.u8` handoff): a failure PTX
//! forbids. Simulator results.

mod common;

use common::{assert_fixture_fails_some_run_on_sim, assert_fixture_passes_every_run_on_sim};

#[test]
fn a_release_acquire_handoff_through_narrow_flags_never_fails() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    assert_fixture_passes_every_run_on_sim("narrow-flag-relacq", 200);
}

/// The same kernel with relaxed flags still fails: narrow accesses are not made stronger than
/// PTX.
#[test]
fn a_relaxed_handoff_through_narrow_flags_can_fail() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    assert_fixture_fails_some_run_on_sim("narrow-flag-relaxed", 200);
}
