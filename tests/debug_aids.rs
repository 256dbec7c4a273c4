//! Debugging aids left in a kernel, as they often are: `printf` (whose argument buffer is a
//! local depot), a local array indexed at run time, and `assert` with `#include <assert.h>`.
//! Each stopped the app from loading: NVRTC cannot open `<assert.h>`, the PTX printer dropped
//! the `;` of the `.local` depot declaration, and the simulator refused `call vprintf`.
//! Simulator results.

mod common;

use common::cli::{gpuwmm, words};
use common::fixture_verdicts_on_sim;
use gpuwmm::apps::Verdict;

#[test]
fn a_kernel_with_printf_a_local_array_and_assert_runs_and_passes() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let verdicts = fixture_verdicts_on_sim("printf-assert", 5);
    assert!(verdicts.iter().all(Verdict::is_pass), "{verdicts:?}");
}

/// A failed assert faults the thread, as on a GPU: every run is a crash that says so.
#[test]
fn a_failed_device_assert_is_a_crash_naming_it() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app_dir = common::fixture_app("printf-assert-fails");
    let line = "check printf-assert-fails --backend sim --runs 3 --seed 1 --journal j.csv";
    let args = [&words(line)[..], &["--app-dir", app_dir.to_str().unwrap()]].concat();
    let out = gpuwmm(&args, dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("pass 0, fail 0, timeout 0, crash 3"),
        "{stdout}"
    );
    assert!(stdout.contains("device-side assert failed"), "{stdout}");
}
