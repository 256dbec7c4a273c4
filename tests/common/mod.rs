//! Helpers shared by the integration tests that run the CUDA tools (no GPU needed); [`cli`]
//! holds those of the tests that run the built binary.
#![allow(dead_code)]

pub mod cli;

use gpuwmm::backend::cuda::CudaBackend;
use gpuwmm::backend::BackendError;
use gpuwmm::ptx::{parse, print, Module};
use gpuwmm::toolchain::{
    assemble, disassemble, parse_sass, CompileOptions, CudaTools, Nvrtc, SassFunction,
};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub const ARCHS: [&str; 3] = ["sm_70", "sm_80", "sm_90"];
/// cuobjdump 13.x refuses sm_70 cubins, so SASS is read from these.
pub const SASS_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// The CUDA kernels of the round-trip corpus, relative to the repository root.
pub const CORPUS: [&str; 5] = [
    "apps/cbe-dot/kernel.cu",
    "apps/cbe-ht/kernel.cu",
    "apps/sdk-red/kernel.cu",
    "apps/cub-scan/kernel.cu",
    "tests/fixtures/kernels/shapes.cu",
];

fn nvrtc(tools: &CudaTools) -> &'static Nvrtc {
    static NVRTC: OnceLock<Nvrtc> = OnceLock::new();
    NVRTC.get_or_init(|| Nvrtc::load(tools.require_nvrtc().unwrap()).unwrap())
}

/// Compiles a corpus kernel with NVRTC (the oldest architecture that NVRTC supports: sm_70, or
/// sm_75 from CUDA 13; line info) and parses the PTX.
///
/// Regression (H100, NVRTC 13.0): this asked for sm_70, which NVRTC 13 refuses.
pub fn compile_corpus(tools: &CudaTools, relative: &str) -> Module {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let source = std::fs::read_to_string(&path).unwrap();
    let nvrtc = nvrtc(tools);
    let ptx = nvrtc
        .compile(&source, &path.to_string_lossy(), &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
        .ptx;
    parse(&ptx).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// Every corpus kernel, compiled ([`compile_corpus`]), with its path.
pub fn corpus_modules(tools: &CudaTools) -> impl Iterator<Item = (&'static str, Module)> + '_ {
    CORPUS
        .into_iter()
        .map(|path| (path, compile_corpus(tools, path)))
}

/// Assembles a module for `arch`, panicking with ptxas's message and the PTX on failure.
pub fn assemble_or_panic(tools: &CudaTools, module: &Module, arch: &str, what: &str) -> Vec<u8> {
    let text = print(module);
    assemble(tools, &text, arch).unwrap_or_else(|e| panic!("{what} for {arch}: {e}\n{text}"))
}

/// The SASS of the first function of a module assembled for `arch`.
pub fn sass_of(tools: &CudaTools, module: &Module, arch: &str, kernel: &str) -> SassFunction {
    let cubin = assemble_or_panic(tools, module, arch, kernel);
    let text = disassemble(tools, &cubin).unwrap();
    parse_sass(&text)
        .into_iter()
        .find(|f| f.name == kernel)
        .unwrap_or_else(|| panic!("no SASS for {kernel} in:\n{text}"))
}

/// Hand-written and NVRTC-made PTX fixtures with the kernel each instruments: (file, kernel).
pub const PTX_FIXTURES: [(&str, &str); 6] = [
    ("harness_small.ptx", "small"),
    ("cbe_dot.ptx", "dot"),
    ("cbe_ht.ptx", "ht_insert"),
    ("sdk_red.ptx", "reduce"),
    ("shapes.ptx", "shapes"),
    ("dot_inlined.ptx", "dot"),
];

/// A parsed fixture from `tests/fixtures/ptx/`.
pub fn ptx_fixture(name: &str) -> Module {
    let path = format!("{}/tests/fixtures/ptx/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Device 0, or `None` (after printing why) where no driver or device is present;
/// `GPUWMM_REQUIRE_GPU` turns the skip into a failure.
pub fn gpu() -> Option<CudaBackend> {
    match CudaBackend::open(0) {
        Ok(backend) => Some(backend),
        Err(e @ (BackendError::NoDriver(_) | BackendError::NoDevice(_))) => {
            if std::env::var_os("GPUWMM_REQUIRE_GPU").is_some() {
                panic!("GPUWMM_REQUIRE_GPU is set, but: {e}");
            }
            gpuwmm::toolchain::report_test_skip(&format!("no CUDA driver ({e})"));
            None
        }
        Err(e) => panic!("opening CUDA device 0 failed: {e}"),
    }
}

/// Device 0 for a test that also needs the CUDA tools: `None` (after printing why) where the
/// tools, a driver or a device is missing.
pub fn gpu_with_tools() -> Option<CudaBackend> {
    gpuwmm::toolchain::tools_for_tests()?;
    gpu()
}

/// Whether `backend` is the stand-in driver (`standin/cuda`, `scripts/standin.sh`), which runs
/// kernels on the simulator: tests then use simulator-sized inputs, since a GPU-sized launch (a
/// million threads) takes minutes to interpret. Everything else they check is unchanged.
#[allow(dead_code)]
pub fn is_standin(backend: &CudaBackend) -> bool {
    use gpuwmm::backend::Device;
    backend.info().name.contains("stand-in")
}

/// A temporary folder holding one file, `name`, with `text`; the folder goes when the first
/// value is dropped.
pub fn file_in_temp_dir(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// A temporary folder for a test that needs the CUDA tools, or `None` when they are missing
/// ([`gpuwmm::toolchain::tools_for_tests`] then prints the skip line and the test returns).
pub fn temp_dir_with_tools() -> Option<tempfile::TempDir> {
    gpuwmm::toolchain::tools_for_tests()?;
    Some(tempfile::tempdir().unwrap())
}

/// The value of a probe that prints why a test is skipped and gives `None` then (such as
/// [`temp_dir_with_tools`], [`gpu`] or `tools_for_tests`), or a return from the calling test.
/// A macro because only the test's own body can return from it.
#[allow(unused_macros)]
macro_rules! or_skip {
    ($probe:expr) => {
        match $probe {
            Some(value) => value,
            None => return,
        }
    };
}
#[allow(unused_imports)]
pub(crate) use or_skip;

/// The folder of the fixture app `name`: `tests/fixtures/apps/<name>`.
pub fn fixture_app(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/apps")
        .join(name)
}

/// A copy of the fixture app `name` (its `app.toml` and `kernel.cu`) in the new folder `to`;
/// returns `to`.
pub fn copy_fixture_app(name: &str, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for file in ["app.toml", "kernel.cu"] {
        std::fs::copy(fixture_app(name).join(file), to.join(file)).unwrap();
    }
    to.to_path_buf()
}

/// The 1-based line of the fixture app `app`'s kernel.cu that contains `needle`.
pub fn fixture_kernel_line(app: &str, needle: &str) -> usize {
    let path = fixture_app(app).join("kernel.cu");
    let text = std::fs::read_to_string(&path).unwrap();
    let index = text.lines().position(|l| l.contains(needle));
    index.unwrap_or_else(|| panic!("no line with {needle:?} in {}", path.display())) + 1
}

/// Loads the app in `tests/fixtures/apps/<name>` on `backend` as it is (no fences, no stress)
/// and runs it `runs` times at `size`, input seeds 0, 1, ...; the verdicts in order.
pub fn run_fixture_app(
    backend: &mut dyn gpuwmm::backend::Backend,
    name: &str,
    size: gpuwmm::apps::Size,
    runs: u64,
) -> Vec<gpuwmm::apps::Verdict> {
    use gpuwmm::apps::{load_app_dir, DirectLauncher, LoadedApp, RunOptions, DEFAULT_ARCH};
    let dir = fixture_app(name);
    let app = load_app_dir(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
    let module = app.module(DEFAULT_ARCH, size).unwrap();
    let loaded = LoadedApp::load(app.as_ref(), backend, &module, DEFAULT_ARCH, size)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (0..runs)
        .map(|seed| {
            let options = RunOptions::new(size, seed);
            loaded
                .run(backend, &mut DirectLauncher, &options)
                .unwrap_or_else(|e| panic!("{name} run {seed}: {e}"))
        })
        .collect()
}

/// The verdicts of `runs` runs of fixture app `name` at its simulator size on the simulator's
/// PTX model (seed 1), as [`run_fixture_app`] gives them.
#[allow(dead_code)]
pub fn fixture_verdicts_on_sim(name: &str, runs: u64) -> Vec<gpuwmm::apps::Verdict> {
    use gpuwmm::backend::sim::{SimBackend, SimModel};
    let mut sim = SimBackend::new(SimModel::Ptx.config(1));
    run_fixture_app(&mut sim, name, gpuwmm::apps::Size::Sim, runs)
}

/// Asserts that every one of `runs` runs of fixture app `name` on the simulator passes
/// ([`fixture_verdicts_on_sim`]); the count that did not and the first of them otherwise.
pub fn assert_fixture_passes_every_run_on_sim(name: &str, runs: u64) {
    let verdicts = fixture_verdicts_on_sim(name, runs);
    let failed: Vec<_> = verdicts.iter().filter(|v| !v.is_pass()).collect();
    assert!(
        failed.is_empty(),
        "{name}: {} of {runs} failed: {:?}",
        failed.len(),
        failed[0]
    );
}

/// Asserts that at least one of `runs` runs of fixture app `name` on the simulator fails (a
/// failed check, not a crash or a timeout; [`fixture_verdicts_on_sim`]).
pub fn assert_fixture_fails_some_run_on_sim(name: &str, runs: u64) {
    let verdicts = fixture_verdicts_on_sim(name, runs);
    let failed = verdicts
        .iter()
        .filter(|v| matches!(v, gpuwmm::apps::Verdict::Fail { .. }))
        .count();
    assert!(failed > 0, "{name}: 0 of {runs} runs failed");
}

/// A simulator target (PTX model, default deadline and stress factor, `tuning/sim.toml`) for
/// `app` at its simulator size, from `app_dir` when it is a bring-your-own app.
pub fn sim_target(
    app: &str,
    app_dir: Option<std::path::PathBuf>,
    fence_kind: gpuwmm::ptx::passes::fences::FenceKind,
) -> gpuwmm::check::Target {
    use gpuwmm::check::spec::{DEFAULT_DEADLINE_MS, DEFAULT_STRESS_FACTOR};
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    gpuwmm::check::Target {
        app: app.to_string(),
        app_dir,
        size: gpuwmm::apps::Size::Sim,
        backend: gpuwmm::check::BackendKind::Sim,
        sim_model: gpuwmm::backend::sim::SimModel::Ptx,
        fence_kind,
        granularity: gpuwmm::ptx::passes::fences::Granularity::SourceLine,
        profile: gpuwmm::profile::StressProfile::load(&repo.join("tuning/sim.toml")).unwrap(),
        deadline_ms: DEFAULT_DEADLINE_MS,
        stress_factor: DEFAULT_STRESS_FACTOR,
        sim_budget: None,
    }
}

/// The outcomes of up to `runs` stressed runs of `app` on `target` in `env` with run seeds
/// from `seed` (stress calibrated once, the app's fences as they are), stopping at the first
/// that does not pass (its reason printed).
pub fn stressed_outcomes(
    target: &gpuwmm::check::Target,
    app: std::sync::Arc<dyn gpuwmm::apps::App>,
    env: gpuwmm::env::Environment,
    seed: u64,
    runs: u64,
) -> Vec<gpuwmm::check::Outcome> {
    use gpuwmm::check::{Executor, Fences, Outcome, RunRequest};
    let backend = gpuwmm::check::local::open_target_backend(target).unwrap();
    let mut executor = gpuwmm::check::LocalExecutor::with_app(target, backend, app).unwrap();
    let stress = gpuwmm::check::driver::calibrate_stress(
        &mut executor,
        env,
        &Fences::AsIs,
        seed,
        &mut |_, _| {},
    )
    .unwrap();
    let mut outcomes = Vec::new();
    for run in 0..runs {
        let request = RunRequest {
            run,
            seed: gpuwmm::check::spec::run_seed(seed, run),
            env,
            fences: Fences::AsIs,
            stress_iterations: stress.stress_iterations,
            races: false,
        };
        let record = executor.execute(&request).unwrap();
        outcomes.push(record.outcome);
        if record.outcome != Outcome::Pass {
            eprintln!("{}: run {run}: {}", target.app, record.reason);
            break;
        }
    }
    outcomes
}

/// Writes `patch` to `dir/fences.patch` and applies it there with `git apply`, which must
/// succeed (its error and the patch shown otherwise).
pub fn git_apply(dir: &Path, patch: &str) {
    std::fs::write(dir.join("fences.patch"), patch).unwrap();
    let out = std::process::Command::new("git")
        .args(["apply", "fences.patch"])
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{patch}");
}

/// harden's check of a patch, made by the library on the simulator: `app` from the folder
/// `dir`, its files replaced by `files`, run `runs` times under `sys-str+` (seed 1, light
/// stress).
pub fn check_patch_on_sim(
    app: &str,
    dir: &Path,
    runs: u64,
    files: &[(std::path::PathBuf, String)],
) -> gpuwmm::harden::verify::PatchCheck {
    use gpuwmm::harden::verify::{check_patch, PatchCheckPlan};
    let kind = gpuwmm::ptx::passes::fences::FenceKind::ScGpu;
    let target = sim_target(app, Some(dir.to_path_buf()), kind);
    let plan = PatchCheckPlan {
        runs,
        env: "sys-str+".parse().unwrap(),
        seed: 1,
        stress_iterations: 4,
        journal: None,
    };
    let files: Vec<gpuwmm::apps::PatchedFile> = (files.iter())
        .map(|(path, text)| gpuwmm::apps::PatchedFile::new(path.clone(), text.clone()))
        .collect();
    check_patch(&target, &files, plan, &mut |_, _| {})
}
