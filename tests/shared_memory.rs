//! Shared memory under the PTX model: a handoff between two warps of one block through a plain
//! shared payload and a `volatile` shared flag can fail, as PTX allows, and the same handoff
//! with a CTA-scope fence on each side never does. Before, the simulator kept shared memory
//! sequentially consistent: the unfenced handoff passed every run (0 of 500 failed) and
//! `check --races` recorded nothing, a bug missed. Simulator results.

mod common;

use common::fixture_verdicts_on_sim;
use gpuwmm::apps::Verdict;

#[test]
fn an_unfenced_handoff_between_warps_through_shared_memory_can_fail() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let verdicts = fixture_verdicts_on_sim("shared-handoff", 200);
    let failed = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Fail { .. }))
        .count();
    assert!(failed > 0, "0 of 200 runs failed");
}

#[test]
fn a_handoff_through_shared_memory_with_cta_fences_never_fails() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let verdicts = fixture_verdicts_on_sim("shared-handoff-fenced", 500);
    let failed: Vec<_> = verdicts.iter().filter(|v| !v.is_pass()).collect();
    assert!(
        failed.is_empty(),
        "{} of 500 failed: {:?}",
        failed.len(),
        failed[0]
    );
}
