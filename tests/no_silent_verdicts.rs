//! Regression tests of issue 27: places where gpuwmm gave a confident answer that was wrong (a
//! check that passes by accident, inputs without limits, options that were dropped on the way).
//! Each test is named after the bug it guards.
//!
//! Needs NVRTC (scripts/setup-cuda-tools.sh), no GPU. Figures are the simulator's.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::cli::{gpuwmm, words};

fn fixture_app(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/apps")
        .join(name)
}

/// A copy of the fixture app `name` in `dir`, with `edit` applied to its `kernel.cu`.
fn edited_copy(dir: &Path, name: &str, edit: impl FnOnce(&str) -> String) -> PathBuf {
    let copy = dir.join(name);
    std::fs::create_dir_all(&copy).unwrap();
    let from = fixture_app(name);
    std::fs::copy(from.join("app.toml"), copy.join("app.toml")).unwrap();
    let kernel = std::fs::read_to_string(from.join("kernel.cu")).unwrap();
    std::fs::write(copy.join("kernel.cu"), edit(&kernel)).unwrap();
    copy
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn stdout_of(out: &Output) -> String {
    text(&out.stdout)
}

#[test]
fn a_check_kernel_that_never_writes_its_result_is_an_error_never_a_pass() {
    let Some(dir) = common::temp_dir_with_tools() else {
        return;
    };
    let app = edited_copy(dir.path(), "handoff-block", |kernel| {
        let kept: Vec<&str> = kernel
            .lines()
            .filter(|line| !line.trim_start().starts_with("status["))
            .collect();
        assert_eq!(kept.len() + 2, kernel.lines().count(), "two status lines");
        kept.join("\n")
    });
    let app = app.to_str().unwrap();
    let args = [
        words("check handoff-block --runs 3 --backend sim --app-dir"),
        vec![app],
    ]
    .concat();
    let out = gpuwmm(&args, dir.path());
    let stdout = stdout_of(&out);
    assert!(
        stdout.contains("pass 0,") && stdout.contains("crash 3"),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("check kernel did not write its result"),
        "{stdout}"
    );
}
