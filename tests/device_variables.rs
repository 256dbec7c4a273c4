//! A check kernel reads the app's `__device__` variables by name (issue 30): the `devcount`
//! fixture counts into `__device__ unsigned int matches`, and its check kernel, in a file of its
//! own, declares `extern __device__ unsigned int matches` and compares it with the count it
//! computes from the input. `devcount-short` runs the same files with one block too few, so the
//! app's count is wrong and the check must say so. Simulator results.

mod common;

use common::cli::{gpuwmm, ok, words};
use common::fixture_verdicts_on_sim;
use gpuwmm::apps::Verdict;
use std::path::Path;

fn fixture(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apps");
    dir.join(name).to_str().unwrap().to_string()
}

/// Before the check kernel had the app's variable it read its own copy, still 0, and failed
/// every run; before each run got the variables' initial contents back, the counts of earlier
/// runs added up and every run but the first failed. Both would fail here.
#[test]
fn the_check_kernel_reads_the_count_the_app_left_in_its_device_variable_in_every_run() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    common::assert_fixture_passes_every_run_on_sim("devcount", 5);
}

#[test]
fn a_wrong_count_in_the_apps_device_variable_fails_the_check_with_both_values() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    // 4 blocks of 32 over 0..127, threshold 64: 63 elements above it, 31 of them in the three
    // blocks that devcount-short launches.
    for verdict in fixture_verdicts_on_sim("devcount-short", 3) {
        let Verdict::Fail { reason } = &verdict else {
            panic!("devcount-short passed: its count misses a block");
        };
        assert!(reason.ends_with("result[1..]: 31, 63"), "{reason}");
    }
}

/// Under stress the app's launches run from the harnessed copy of its module: the check kernel
/// gets that module's variable. Without stress, from the module as loaded.
#[test]
fn under_check_with_and_without_stress_the_verdict_follows_the_apps_count() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    for env in ["sys-str+", "no-str-"] {
        let outcomes = |app: &str| {
            let line = format!(
                "check {app} --backend sim --runs 30 --seed 1 --env {env} --journal {app}-{env}.csv"
            );
            let app_dir = fixture(app);
            let args = [&words(&line)[..], &["--app-dir", &app_dir]].concat();
            ok(&gpuwmm(&args, dir.path()))
        };
        let right = outcomes("devcount");
        assert!(
            right.contains("outcomes: pass 30, fail 0,"),
            "{env}: {right}"
        );
        let short = outcomes("devcount-short");
        assert!(
            short.contains("outcomes: pass 0, fail 30,"),
            "{env}: {short}"
        );
        assert!(short.contains("result[1..]: 31, 63"), "{env}: {short}");
    }
}
