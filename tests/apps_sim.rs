//! Every application end to end on the simulator (figures here are properties of the simulator's
//! model, not of hardware):
//! - it passes every run under `Sc`, and under `Weak` with a `fence.sc.gpu` after every access;
//! - without fences, cbe-dot, cbe-ht, ct-octree, tpo-tm, sdk-red-nf and cub-scan-nf fail under
//!   `Weak`, and ct-octree and tpo-tm under `Ptx` at a pinned rate;
//! - ls-bh and ls-bh-nf (tests of their own, at the end) pass under `Sc` and under `Ptx` with a
//!   fence after every access, and both fail under `Ptx` at a pinned rate;
//! - cccl-scan (CUB's own look-back, at the end) passes under `Sc`, under `Ptx` as shipped and
//!   with a fence after every access; cccl-scan-nf fails under `Ptx` at a pinned rate. These
//!   need the CCCL headers too, and skip (or fail, with `GPUWMM_REQUIRE_TOOLS=1`) without them.
//!
//! Needs NVRTC (scripts/setup-cuda-tools.sh), no GPU. The run counts take seconds even in a debug
//! build (the fenceless test stops at the first failure); the ignored `failure_rates` test runs
//! 2,000 runs per app and setting (about 7 minutes in a debug build on 2 cores).

mod common;

use gpuwmm::apps::{
    find_app, App, AppError, DirectLauncher, LoadedApp, RunOptions, Size, Verdict, DEFAULT_ARCH,
};
use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::ptx::passes::fences::{fence_sites, insert_fences, FenceKind, Granularity};
use gpuwmm::ptx::Module;
use gpuwmm::toolchain::{cccl_tools_for_tests, tools_for_tests};
use std::time::{Duration, Instant};

const ALL_APPS: [&str; 8] = [
    "cbe-ht",
    "cbe-dot",
    "ct-octree",
    "tpo-tm",
    "sdk-red",
    "sdk-red-nf",
    "cub-scan",
    "cub-scan-nf",
];
/// Apps without (working) fences: the weak model must break them.
const FENCELESS: [&str; 6] = [
    "cbe-ht",
    "cbe-dot",
    "ct-octree",
    "tpo-tm",
    "sdk-red-nf",
    "cub-scan-nf",
];

/// A `fence.sc.gpu` after every global, generic or shared access.
fn fence_everything(module: Module) -> Module {
    let sites = fence_sites(&module, Granularity::Instruction);
    let all: Vec<_> = sites.iter().collect();
    insert_fences(&module, &all, FenceKind::ScGpu)
}

/// Outcome counts of a series of runs.
#[derive(Debug, Default)]
struct Tally {
    runs: u64,
    failures: u64,
    /// Runs the backend ended at their deadline or instruction budget.
    timeouts: u64,
    /// Runs that ended in a kernel fault (e.g. a store out of bounds through a stale index).
    faults: u64,
    first_failure: Option<(u64, String)>,
    elapsed: Duration,
}

/// Runs `app` once per seed in `seeds` (the seed drives both the scheduler and the inputs),
/// stopping after `stop_after` failures. A backend error (timeout, fault) fails the test.
fn campaign(
    app: &dyn App,
    config: SimConfig,
    transform: fn(Module) -> Module,
    seeds: std::ops::Range<u64>,
    stop_after: u64,
) -> Tally {
    let model = config.model;
    let tally = outcomes(app, config, transform, seeds, stop_after);
    assert_eq!(tally.timeouts, 0, "{} ({model:?}): {tally:?}", app.name());
    assert_eq!(tally.faults, 0, "{} ({model:?}): {tally:?}", app.name());
    tally
}

/// Like [`campaign`], but counts timeouts and kernel faults as their own outcomes instead of
/// failing the test.
fn outcomes(
    app: &dyn App,
    config: SimConfig,
    transform: fn(Module) -> Module,
    seeds: std::ops::Range<u64>,
    stop_after: u64,
) -> Tally {
    let start = Instant::now();
    let model = config.model;
    let mut backend = SimBackend::new(config);
    let module = transform(app.module(DEFAULT_ARCH, Size::Sim).unwrap());
    let loaded = LoadedApp::load(app, &mut backend, &module, DEFAULT_ARCH, Size::Sim)
        .unwrap_or_else(|e| panic!("{}: {e}", app.name()));
    let mut tally = Tally::default();
    for seed in seeds {
        gpuwmm::backend::Device::reseed(&mut backend, seed);
        let options = RunOptions {
            size: Size::Sim,
            input_seed: seed,
            deadline: Duration::from_secs(60),
        };
        let verdict = loaded.run(&mut backend, &mut DirectLauncher, &options);
        tally.runs += 1;
        match verdict {
            Ok(Verdict::Pass) => {}
            Ok(Verdict::Fail { reason }) => {
                tally.failures += 1;
                tally.first_failure.get_or_insert((seed, reason));
                if tally.failures >= stop_after {
                    break;
                }
            }
            Err(e) if e.is_timeout() => tally.timeouts += 1,
            Err(e @ AppError::Backend { .. }) => {
                tally.faults += 1;
                tally
                    .first_failure
                    .get_or_insert((seed, format!("({model:?}) {e}")));
            }
            Err(e) => panic!("{}: {e}", app.name()),
        }
    }
    tally.elapsed = start.elapsed();
    tally
}

/// The simulator's default settings for `model` (the seed is set per run).
fn sim(model: MemoryModel) -> SimConfig {
    SimConfig::new(model, 0)
}

/// The module of built-in app `name` at the simulator's size.
fn sim_module(name: &str) -> Module {
    let app = find_app(name).unwrap();
    app.module(DEFAULT_ARCH, Size::Sim).unwrap()
}

fn no_change(m: Module) -> Module {
    m
}

#[test]
fn every_app_passes_under_sc() {
    common::or_skip!(tools_for_tests());
    assert_every_run_passes(&ALL_APPS, MemoryModel::Sc, no_change, 0..100);
}

/// Asserts that every app of `names`, changed by `transform`, passes every run of `seeds` under
/// `model`.
fn assert_every_run_passes(
    names: &[&str],
    model: MemoryModel,
    transform: fn(Module) -> Module,
    seeds: std::ops::Range<u64>,
) {
    for name in names {
        let app = find_app(name).unwrap();
        let t = campaign(app.as_ref(), sim(model), transform, seeds.clone(), 1);
        assert_eq!(
            t.failures, 0,
            "{name} under {model:?}: {:?}",
            t.first_failure
        );
        eprintln!("{name}: {} {model:?} runs in {:?}", t.runs, t.elapsed);
    }
}

#[test]
fn every_app_passes_under_weak_with_a_fence_after_every_access() {
    common::or_skip!(tools_for_tests());
    assert_every_run_passes(&ALL_APPS, MemoryModel::Weak, fence_everything, 1000..1100);
}

#[test]
fn fenceless_apps_fail_under_weak() {
    common::or_skip!(tools_for_tests());
    for name in FENCELESS {
        let app = find_app(name).unwrap();
        let t = campaign(app.as_ref(), sim(MemoryModel::Weak), no_change, 0..2000, 1);
        let (seed, reason) = t
            .first_failure
            .unwrap_or_else(|| panic!("{name}: no failure in {} Weak runs", t.runs));
        eprintln!(
            "{name}: first Weak failure at seed {seed} after {:?}: {reason}",
            t.elapsed
        );
    }
}

/// The failure rates quoted in the apps' READMEs:
/// `cargo test --release --test apps_sim -- --ignored --nocapture failure_rates`.
#[test]
#[ignore]
fn failure_rates() {
    common::or_skip!(tools_for_tests());
    let runs: u64 = std::env::var("GPUWMM_APP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    for name in ALL_APPS {
        let app = find_app(name).unwrap();
        let stale = SimConfig {
            stale_loads: true,
            ..sim(MemoryModel::Weak)
        };
        for (config, label, transform) in [
            (
                sim(MemoryModel::Sc),
                "Sc",
                no_change as fn(Module) -> Module,
            ),
            (sim(MemoryModel::Weak), "Weak", no_change),
            (stale.clone(), "Weak+stale", no_change),
            (sim(MemoryModel::Weak), "Weak+fences", fence_everything),
            (stale, "Weak+stale+fences", fence_everything),
        ] {
            let t = campaign(app.as_ref(), config, transform, 0..runs, u64::MAX);
            println!(
                "{name:12} {label:18} seeds 0..{runs}: {} / {} failed ({:.2}%) in {:.1?}{}",
                t.failures,
                t.runs,
                100.0 * t.failures as f64 / t.runs as f64,
                t.elapsed,
                t.first_failure
                    .map(|(s, r)| format!("; first: seed {s}: {r}"))
                    .unwrap_or_default()
            );
        }
    }
}

/// The stress harness as a [`Launcher`]: every app launch runs the harnessed kernel, with
/// stressing blocks and randomised block and warp ids. This is what the check driver plugs in.
struct Stress {
    launcher: gpuwmm::stressed::StressedLauncher,
    module: gpuwmm::backend::ModuleId,
    settings: gpuwmm::stressed::StressSettings,
    launches: usize,
}

impl gpuwmm::apps::Launcher for Stress {
    fn launch(
        &mut self,
        backend: &mut dyn gpuwmm::backend::Backend,
        launch: &mut gpuwmm::apps::Launch,
    ) -> Result<(), gpuwmm::backend::BackendError> {
        let app = gpuwmm::stressed::AppLaunch {
            module: self.module,
            kernel: &launch.kernel,
            config: &launch.config,
            args: &launch.args,
        };
        let control = self.launcher.launch(backend, app, &self.settings)?;
        let (grid, block) = control.launch_grid();
        launch.module = self.module;
        launch.config.grid = grid;
        launch.config.block = block;
        self.launches += 1;
        Ok(())
    }
}

#[test]
fn every_app_passes_under_stress_and_thread_randomisation_when_fenced() {
    use gpuwmm::ptx::passes::harness::{harness_kernels, HarnessOptions};
    use gpuwmm::ptx::passes::stress::{parse_sequence, StressStrategy};
    use gpuwmm::ptx::print;
    use gpuwmm::stressed::{StressSettings, StressedLauncher};
    common::or_skip!(tools_for_tests());
    for name in ALL_APPS {
        let app = find_app(name).unwrap();
        let kernels = app.kernels(Size::Sim);
        let kernels: Vec<&str> = kernels.iter().map(String::as_str).collect();
        let options = HarnessOptions {
            stress: StressStrategy::Sys {
                sequence: parse_sequence("ld st").unwrap(),
            },
        };
        for (model, transform) in [
            (MemoryModel::Sc, no_change as fn(Module) -> Module),
            (MemoryModel::Weak, fence_everything),
        ] {
            let mut backend = SimBackend::new(sim(model));
            let module = transform(app.module(DEFAULT_ARCH, Size::Sim).unwrap());
            let harnessed = harness_kernels(&module, &kernels, &options).unwrap();
            let loaded =
                LoadedApp::load(app.as_ref(), &mut backend, &module, DEFAULT_ARCH, Size::Sim)
                    .unwrap();
            let harnessed =
                gpuwmm::backend::Device::load_module(&mut backend, &print(&harnessed)).unwrap();
            for seed in 0..10 {
                gpuwmm::backend::Device::reseed(&mut backend, seed);
                let mut stress = Stress {
                    launcher: StressedLauncher::new(&mut backend, 1024).unwrap(),
                    module: harnessed,
                    settings: StressSettings {
                        stress_blocks: 2,
                        stress_iterations: 20,
                        randomise: true,
                        spread: 2,
                        patch_words: 32,
                        seed,
                    },
                    launches: 0,
                };
                let options = RunOptions::new(Size::Sim, seed);
                let verdict = loaded.run(&mut backend, &mut stress, &options);
                assert_eq!(
                    verdict.unwrap_or_else(|e| panic!("{name} {model:?} seed {seed}: {e}")),
                    Verdict::Pass,
                    "{name} {model:?} seed {seed}"
                );
                assert_eq!(stress.launches, kernels.len(), "{name}: harnessed launches");
                stress.launcher.release(&mut backend).unwrap();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The case studies added with the PTX memory model (ct-octree, tpo-tm): under the model the
// simulator runs by default, a fence after every access makes them pass, and without fences they
// fail at a rate pinned for seeds 0..RUNS_PTX (a simulator figure, not hardware).

const QUEUE_APPS: [&str; 2] = ["ct-octree", "tpo-tm"];
const RUNS_PTX: u64 = 200;
/// Failed or faulted runs of the fence-less apps in seeds 0..RUNS_PTX (pinned from measurement:
/// ct-octree 183 failures and 17 faults, tpo-tm 200 failures at h26sim, where RMWs that are not
/// morally strong may read before newer writes and a thread's own writes left its block clock;
/// ct-octree was 182 and 18 before; simulator figures). ct-octree's
/// faults (a stale node count or index sends a store out of bounds) appeared when the model
/// stopped letting `__syncthreads()` after a relaxed tail read act as an acquire of the queue
/// item: it was 190..=200 failures and no fault before.
const FAILS_CT_OCTREE: std::ops::RangeInclusive<u64> = 190..=200;
const FAILS_TPO_TM: std::ops::RangeInclusive<u64> = 190..=200;

#[test]
fn queue_apps_pass_under_ptx_with_a_fence_after_every_access() {
    common::or_skip!(tools_for_tests());
    assert_every_run_passes(&QUEUE_APPS, MemoryModel::Ptx, fence_everything, 0..RUNS_PTX);
}

#[test]
fn queue_apps_without_fences_fail_under_ptx_at_the_pinned_rate() {
    common::or_skip!(tools_for_tests());
    for (name, expected) in [("ct-octree", FAILS_CT_OCTREE), ("tpo-tm", FAILS_TPO_TM)] {
        assert_fails_under_ptx_at_the_pinned_rate(name, 0..RUNS_PTX, expected);
    }
}

/// Runs `name` under Ptx for `seeds`, its module as the registry gives it, and checks the
/// count of erroneous runs (a failed post-condition, or a kernel fault: a stale index read
/// without fences may send a store out of bounds, as it may on a GPU) against `expected`.
fn assert_fails_under_ptx_at_the_pinned_rate(
    name: &str,
    seeds: std::ops::Range<u64>,
    expected: std::ops::RangeInclusive<u64>,
) {
    let app = find_app(name).unwrap();
    let t = outcomes(
        app.as_ref(),
        sim(MemoryModel::Ptx),
        no_change,
        seeds,
        u64::MAX,
    );
    eprintln!(
        "{name}: {} failures and {} faults in {} Ptx runs, {:?}; first: {:?}",
        t.failures, t.faults, t.runs, t.elapsed, t.first_failure
    );
    assert_eq!(t.timeouts, 0, "{name}: {t:?}");
    let errors = t.failures + t.faults;
    assert!(
        expected.contains(&errors),
        "{name}: {errors} of {} Ptx runs failed or faulted, expected {expected:?}",
        t.runs
    );
}

// ---------------------------------------------------------------------------------------------
// ls-bh (Barnes-Hut, five kernels a time step, three fences of its own, all on the writer's side)
// and ls-bh-nf (those fences stripped). Simulator figures, not hardware: under Sc and with a
// fence after every access both pass; under Ptx ls-bh-nf fails, and so does ls-bh with only its
// own fences (the readers' loads are unordered; see apps/ls-bh/README.md).

const RUNS_LS_BH: u64 = 50;
/// Enough for a correct run (a launch takes well under a million thread-instructions at the sim
/// size) and small enough that a run the weak model sends into a livelock ends quickly.
const LS_BH_BUDGET: u64 = 5_000_000;

/// The outcomes of `name` on seeds 0..RUNS_LS_BH under `model` with [`LS_BH_BUDGET`].
fn ls_bh_outcomes(name: &str, model: MemoryModel, transform: fn(Module) -> Module) -> Tally {
    let app = find_app(name).unwrap();
    let mut config = sim(model);
    config.instruction_budget = LS_BH_BUDGET;
    outcomes(app.as_ref(), config, transform, 0..RUNS_LS_BH, u64::MAX)
}

#[test]
fn ls_bh_passes_under_sc() {
    common::or_skip!(tools_for_tests());
    for name in ["ls-bh", "ls-bh-nf"] {
        let t = ls_bh_outcomes(name, MemoryModel::Sc, no_change);
        assert_eq!(
            (t.failures, t.timeouts, t.faults),
            (0, 0, 0),
            "{name} under Sc: {t:?}"
        );
    }
}

#[test]
fn ls_bh_passes_under_ptx_with_a_fence_after_every_access() {
    common::or_skip!(tools_for_tests());
    for name in ["ls-bh", "ls-bh-nf"] {
        let t = ls_bh_outcomes(name, MemoryModel::Ptx, fence_everything);
        assert_eq!(
            (t.failures, t.timeouts, t.faults),
            (0, 0, 0),
            "{name} fenced, Ptx: {t:?}"
        );
    }
}

/// Asserts that `name`, without fences added, fails under Ptx in `expected` of seeds
/// 0..RUNS_LS_BH and that no run hangs (skipped without NVRTC).
fn assert_ls_bh_fails_under_ptx(name: &str, expected: std::ops::RangeInclusive<u64>) {
    common::or_skip!(tools_for_tests());
    let t = ls_bh_outcomes(name, MemoryModel::Ptx, no_change);
    eprintln!(
        "{name}: {} failures, {} timeouts in {RUNS_LS_BH} Ptx runs; first: {:?}",
        t.failures, t.timeouts, t.first_failure
    );
    assert!(
        expected.contains(&t.failures),
        "{name}: {} failures in {RUNS_LS_BH} Ptx runs, expected {expected:?}",
        t.failures
    );
    assert_eq!(t.timeouts, 0, "{name}: {} runs hung", t.timeouts);
    assert_eq!(t.faults, 0, "{name}: {t:?}");
}

/// Seeds 0..RUNS_LS_BH under Ptx: how many runs of ls-bh-nf failed (pinned from measurement: 50;
/// a simulator figure).
const FAILS_LS_BH_NF: std::ops::RangeInclusive<u64> = 45..=50;

#[test]
fn ls_bh_nf_fails_under_ptx_at_the_pinned_rate() {
    // Regression: a tree corrupted by stale reads once sent the summarisation's wait or the
    // force walk round a cycle, so runs hung (a timeout, which the GPU tests treat as an error);
    // the kernels now reject child cells not allocated after their parent, and every run ends.
    assert_ls_bh_fails_under_ptx("ls-bh-nf", FAILS_LS_BH_NF);
}

/// The provided fences are not enough under the PTX model (as the paper found on hardware):
/// ls-bh itself fails (pinned from measurement: 50 of 50), so that a change to the app or the
/// model that alters it is seen.
const FAILS_LS_BH: std::ops::RangeInclusive<u64> = 45..=50;

#[test]
fn ls_bh_with_only_its_own_fences_fails_under_ptx() {
    assert_ls_bh_fails_under_ptx("ls-bh", FAILS_LS_BH);
}

// ---------------------------------------------------------------------------------------------
// cccl-scan: the look-back is CUB's own (cub::ScanTileState<int, false> +
// cub::TilePrefixCallbackOp from the pinned CCCL headers). Simulator figures, not hardware: as
// shipped it passes under Sc, under Ptx with a fence after every access and under Ptx with only
// CUB's ordering (no false alarm); cccl-scan-nf (CUB's reader-side membar.gl stripped, its
// writer-side st.release kept) fails under Ptx. Needs the CCCL headers as well as NVRTC.

const CCCL_SCAN_APPS: [&str; 3] = ["cccl-scan", "cccl-scan-nf", "cccl-scan-rlx"];
const RUNS_CCCL_SCAN: u64 = 200;
/// Runs of cccl-scan as shipped under Ptx: the no-false-alarm check (about 8 s in a release build).
const RUNS_CCCL_SCAN_SHIPPED: u64 = 1000;
/// Failures in seeds 0..RUNS_CCCL_SCAN under Ptx (pinned from measurement: 192 for -nf, 176 for
/// -rlx at h26sim, 199 and 179 before it; simulator figures). -rlx was 60 until the model stopped passing an observed relaxed
/// status on as its writer's whole history (through `fence.sc`, `bar.sync` or a release), which
/// had hidden most of the stale values PTX allows behind the relaxed status stores.
const FAILS_CCCL_SCAN_NF: std::ops::RangeInclusive<u64> = 190..=200;
const FAILS_CCCL_SCAN_RLX: std::ops::RangeInclusive<u64> = 165..=195;

#[test]
fn cccl_scan_passes_under_sc() {
    common::or_skip!(cccl_tools_for_tests());
    assert_every_run_passes(
        &CCCL_SCAN_APPS,
        MemoryModel::Sc,
        no_change,
        0..RUNS_CCCL_SCAN,
    );
}

#[test]
fn cccl_scan_passes_under_ptx_with_a_fence_after_every_access() {
    common::or_skip!(cccl_tools_for_tests());
    let seeds = 0..RUNS_CCCL_SCAN;
    assert_every_run_passes(&CCCL_SCAN_APPS, MemoryModel::Ptx, fence_everything, seeds);
}

/// No false alarm: CUB's own ordering (writer st.release.gpu, reader membar.gl) is enough under
/// the PTX model.
#[test]
fn cccl_scan_as_shipped_passes_under_ptx() {
    common::or_skip!(cccl_tools_for_tests());
    let module = sim_module("cccl-scan");
    assert!(module.fence_count() > 0, "CUB's membar.gl is in the PTX");
    let seeds = 0..RUNS_CCCL_SCAN_SHIPPED;
    assert_every_run_passes(&["cccl-scan"], MemoryModel::Ptx, no_change, seeds);
}

/// Without CUB's reader-side membar.gl (its st.release stays) the look-back reads stale values.
#[test]
fn cccl_scan_nf_fails_under_ptx_at_the_pinned_rate() {
    common::or_skip!(cccl_tools_for_tests());
    let module = sim_module("cccl-scan-nf");
    assert_eq!(module.fence_count(), 0);
    assert_fails_under_ptx_at_the_pinned_rate(
        "cccl-scan-nf",
        0..RUNS_CCCL_SCAN,
        FAILS_CCCL_SCAN_NF,
    );
}

/// With CUB's st.release.gpu status stores weakened to relaxed (its membar.gl stays), the writer
/// side is unordered: the look-back can see a status before the value it announces.
#[test]
fn cccl_scan_rlx_fails_under_ptx_at_the_pinned_rate() {
    common::or_skip!(cccl_tools_for_tests());
    let module = sim_module("cccl-scan-rlx");
    let text = gpuwmm::ptx::print(&module);
    assert!(!text.contains("st.release"), "no release store is left");
    assert!(text.contains("membar.gl"), "the reader's fence stays");
    assert_fails_under_ptx_at_the_pinned_rate(
        "cccl-scan-rlx",
        0..RUNS_CCCL_SCAN,
        FAILS_CCCL_SCAN_RLX,
    );
}

/// Fences (`fence.sc.gpu`) after the instruction-granularity sites `ids` of cccl-scan-rlx, each
/// checked to be the value store (`st.cg`) of a `SetPartial` or `SetInclusive`.
fn fence_value_stores(module: Module, ids: &[usize]) -> Module {
    let sites = fence_sites(&module, Granularity::Instruction);
    let chosen: Vec<_> = ids.iter().map(|&id| &sites[id]).collect();
    for site in &chosen {
        let ptx = &site.accesses[0].ptx;
        assert!(ptx.starts_with("st.cg.u32"), "site {}: {ptx}", site.id);
    }
    insert_fences(&module, &chosen, FenceKind::ScGpu)
}

/// `SetPartial`'s value store (site 8) and tile 0's `SetInclusive` (site 10) ordered before their
/// status stores; the final `SetInclusive` of the other tiles (site 18) not.
fn fence_partial_and_tile_zero(module: Module) -> Module {
    fence_value_stores(module, &[8, 10])
}

fn fence_every_value_store(module: Module) -> Module {
    fence_value_stores(module, &[8, 10, 18])
}

const RUNS_STAGGER: u64 = 300;
/// Failures of cccl-scan-rlx with fences at sites 8 and 10 only, seeds 0..RUNS_STAGGER, under
/// the default scheduler (pinned from measurement: 58; simulator figures).
const FAILS_FINAL_SET_INCLUSIVE: std::ops::RangeInclusive<u64> = 50..=66;

/// Bug: with every block of a launch starting at once, the simulator never needed cccl-scan's
/// final `SetInclusive` ordered (0 failures in 12,000 runs), though PTX allows its stale value:
/// a block sees a predecessor's INCLUSIVE status only if it starts after that predecessor's
/// whole look-back. Launches that start their blocks one after another expose it.
#[test]
fn cccl_scan_rlx_needs_its_final_set_inclusive_ordered_once_blocks_start_staggered() {
    common::or_skip!(cccl_tools_for_tests());
    let app = find_app("cccl-scan-rlx").unwrap();
    let runs = |config: SimConfig, transform: fn(Module) -> Module, stop_after: u64| {
        campaign(&*app, config, transform, 0..RUNS_STAGGER, stop_after)
    };
    let ptx = sim(MemoryModel::Ptx);
    let at_once = SimConfig {
        stagger_probability: 0.0,
        ..ptx.clone()
    };
    let together = runs(at_once, fence_partial_and_tile_zero, 1);
    assert_eq!(
        together.failures, 0,
        "blocks started together: {together:?}"
    );
    let staggered = runs(ptx.clone(), fence_partial_and_tile_zero, u64::MAX);
    eprintln!("cccl-scan-rlx, sites 8 and 10 fenced: {staggered:?}");
    assert!(
        FAILS_FINAL_SET_INCLUSIVE.contains(&staggered.failures),
        "{staggered:?}"
    );
    let fenced = runs(ptx, fence_every_value_store, 1);
    assert_eq!(fenced.failures, 0, "{fenced:?}");
}
