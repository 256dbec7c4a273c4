//! What the command-line tests share: running the built binary in a folder, and the argument
//! lists that several of them start from (a small simulator tuning, a simulator campaign).

use std::path::Path;
use std::process::{Command, Output};

/// The words of a command line written as one string (`"check cbe-dot --runs 10"`), for
/// arguments without spaces.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs the built `gpuwmm` with `args` in `dir` and waits for it.
pub fn gpuwmm(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `gpuwmm harden --app-dir <the fixture app> --backend sim --journal h.csv <extra…>` in `dir`.
pub fn harden_fixture_on_sim(app: &str, dir: &Path, extra: &[&str]) -> Output {
    let app = super::fixture_app(app);
    harden_on_sim(&app, dir, &[&["--journal", "h.csv"], extra].concat())
}

/// `gpuwmm harden --app-dir <app_dir> --backend sim <extra…>` in `dir`.
#[allow(dead_code)]
pub fn harden_on_sim(app_dir: &Path, dir: &Path, extra: &[&str]) -> Output {
    let args = [
        "harden",
        "--app-dir",
        app_dir.to_str().unwrap(),
        "--backend",
        "sim",
    ];
    gpuwmm(&[&args[..], extra].concat(), dir)
}

/// Runs the built `gpuwmm` with `args` in the repository root (where `apps/` and the fixtures
/// lie) and waits for it.
pub fn gpuwmm_in_repo(args: &[&str]) -> Output {
    gpuwmm(args, Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// Asserts that a command succeeded (its stdout and stderr in the message when not), and returns
/// its stdout.
pub fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Asserts that a command was refused as bad input: exit code 2 and `needle` in its stderr.
pub fn assert_bad_input(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(needle), "{needle:?} not in:\n{stderr}");
}

/// A tuning small enough for CI on the simulator: 3 tests × 2 distances × 4 locations, 2
/// sequences, spreads 1–2, 6 executions each (the seed is the caller's).
pub const SMALL_TUNE: [&str; 15] = [
    "tune",
    "--backend",
    "sim",
    "--distances",
    "2",
    "--locations",
    "4",
    "--executions",
    "6",
    "--max-sequence",
    "1",
    "--max-spread",
    "2",
    "--block-threads",
    "32",
];

/// A hardening of cbe-dot on the simulator short enough for CI: 300-run stability checks.
pub const SMALL_HARDEN_CBE_DOT: [&str; 6] = [
    "harden",
    "cbe-dot",
    "--backend",
    "sim",
    "--stable-runs",
    "300",
];

/// A simulator campaign of `apps` × `envs` (comma-separated), `runs` runs a cell, into `out`.
pub fn campaign_args<'a>(
    apps: &'a str,
    envs: &'a str,
    runs: &'a str,
    out: &'a str,
) -> Vec<&'a str> {
    vec![
        "campaign",
        "--apps",
        apps,
        "--envs",
        envs,
        "--runs",
        runs,
        "--backend",
        "sim",
        "--out",
        out,
    ]
}

/// A copy of the built `gpuwmm` outside the checkout, as `cargo install` leaves it: it takes
/// built-in apps from the binary and names their sources under `/built-in/gpuwmm/apps`. One
/// copy per test binary.
#[allow(dead_code)]
pub fn installed_gpuwmm() -> &'static Path {
    static COPY: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf)> =
        std::sync::OnceLock::new();
    let (_, exe) = COPY.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("gpuwmm");
        std::fs::copy(env!("CARGO_BIN_EXE_gpuwmm"), &exe).unwrap();
        (dir, exe)
    });
    exe
}

/// Runs the [`installed_gpuwmm`] with `args` in `dir` (a folder outside the checkout), with the
/// tests' CUDA tools (`$GPUWMM_CUDA_TOOLS`) and a PTX cache and home in `dir`.
#[allow(dead_code)]
pub fn gpuwmm_installed(args: &[&str], dir: &Path) -> Output {
    let mut command = Command::new(installed_gpuwmm());
    if let Some(root) = gpuwmm::toolchain::tools_for_tests().and_then(|t| t.root) {
        command.env("GPUWMM_CUDA_TOOLS", root);
    }
    command
        .args(args)
        .env("GPUWMM_CACHE_DIR", dir.join(".cache"))
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CACHE_HOME")
        .current_dir(dir)
        .output()
        .unwrap()
}
