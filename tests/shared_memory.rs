//! Shared memory under the PTX model: a handoff between two warps of one block through a plain
//! shared payload and a `volatile` shared flag can fail, as PTX allows, and the same handoff
//! with a CTA-scope fence on each side never does. Before, the simulator kept shared memory
//! sequentially consistent: the unfenced handoff passed every run (0 of 500 failed) and
//! `check --races` recorded nothing, a bug missed; then its accesses were no fence sites, so
//! `harden` could not fix it. Simulator results.

mod common;

use common::{assert_fixture_fails_some_run_on_sim, assert_fixture_passes_every_run_on_sim};

#[test]
fn an_unfenced_handoff_between_warps_through_shared_memory_can_fail() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    assert_fixture_fails_some_run_on_sim("shared-handoff", 200);
}

#[test]
fn a_handoff_through_shared_memory_with_cta_fences_never_fails() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    assert_fixture_passes_every_run_on_sim("shared-handoff-fenced", 500);
}

/// Regression: shared-memory accesses were no fence sites, so `harden` said fences at every
/// site could not fix the unfenced handoff. Now they are sites, and harden keeps a fence after
/// the payload's line and one on the spin, each of CTA scope (both threads are in one block).
#[test]
fn harden_fixes_a_shared_memory_handoff_with_cta_fences_at_shared_sites() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let out = common::cli::harden_fixture_on_sim("shared-handoff", dir.path(), &["--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kept: Vec<(&str, &str)> = report["fences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["source"].as_str().unwrap(), f["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kept,
        [
            ("data = in[0];", "fence.acq_rel.cta"),
            ("while (flag == 0) {", "fence.acq_rel.cta")
        ],
        "{stderr}"
    );
}
