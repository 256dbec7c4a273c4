//! The litmus tests on the simulator: the weak model shows MP and SB, fences forbid them,
//! cta-scope fences do not help across blocks, and sequential consistency never shows them.
//! All figures here are simulator results.

use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::litmus::run::{run_litmus, LitmusRun};
use gpuwmm::litmus::{Histogram, LitmusShape, LitmusTest};
use gpuwmm::ptx::passes::fences::FenceKind;

fn run(
    model: MemoryModel,
    shape: LitmusShape,
    fence: Option<FenceKind>,
    iterations: u64,
) -> Histogram {
    run_seeded(model, shape, fence, iterations, 1000)
}

fn run_seeded(
    model: MemoryModel,
    shape: LitmusShape,
    fence: Option<FenceKind>,
    iterations: u64,
    seed: u64,
) -> Histogram {
    let mut sim = SimBackend::new(SimConfig::new(model, 7));
    let mut test = LitmusTest::new(shape, 64);
    test.fences = [fence, fence];
    let run = LitmusRun {
        iterations,
        ..LitmusRun::default()
    };
    run_litmus(&mut sim, &test, &run, seed, |_| {}).unwrap()
}

#[test]
fn mp_and_sb_are_weak_at_the_measured_rates_without_fences() {
    for shape in [LitmusShape::Mp, LitmusShape::Sb] {
        let h = run(MemoryModel::Weak, shape, None, 10_000);
        assert_eq!(h.total(), 10_000);
        // seed 7 measured 361 (MP) and 3,900 (SB) of 10,000; a tight range, so a model
        // regression fails here rather than only when the rate reaches zero
        let expected = match shape {
            LitmusShape::Mp => 300..=430,
            _ => 3_500..=4_300,
        };
        assert!(
            expected.contains(&h.weak(shape)),
            "{shape}: {}",
            h.report(shape)
        );
    }
}

#[test]
fn gpu_scope_fences_forbid_mp_and_sb() {
    for shape in [LitmusShape::Mp, LitmusShape::Sb] {
        for kind in [FenceKind::ScGpu, FenceKind::MembarGl, FenceKind::ScSys] {
            let iterations = if kind == FenceKind::ScGpu {
                100_000
            } else {
                10_000
            };
            let h = run(MemoryModel::Weak, shape, Some(kind), iterations);
            assert_eq!(h.weak(shape), 0, "{shape} {kind}: {}", h.report(shape));
        }
    }
}

#[test]
fn cta_scope_fences_do_not_order_across_blocks() {
    let h = run(
        MemoryModel::Weak,
        LitmusShape::Mp,
        Some(FenceKind::MembarCta),
        10_000,
    );
    // seed 7 measured 296 of 10,000: a cta-scope fence leaves MP as weak as no fence
    assert!(
        (240..=360).contains(&h.weak(LitmusShape::Mp)),
        "{}",
        h.report(LitmusShape::Mp)
    );
}

#[test]
fn sequential_consistency_is_never_weak() {
    for shape in LitmusShape::ALL {
        let h = run(MemoryModel::Sc, shape, None, 10_000);
        assert_eq!(h.weak(shape), 0, "{shape}: {}", h.report(shape));
        assert!(
            h.outcomes.len() > 1,
            "{shape}: the scheduler interleaves: {}",
            h.report(shape)
        );
    }
}

#[test]
fn coherence_holds_in_the_weak_model() {
    let h = run(MemoryModel::Weak, LitmusShape::Corr, None, 10_000);
    assert_eq!(
        h.weak(LitmusShape::Corr),
        0,
        "{}",
        h.report(LitmusShape::Corr)
    );
}

#[test]
fn the_same_seed_replays_the_same_histogram() {
    let a = run(MemoryModel::Weak, LitmusShape::Mp, None, 2_000);
    let b = run(MemoryModel::Weak, LitmusShape::Mp, None, 2_000);
    assert_eq!(a, b);
}

/// QA: launch `n` was reseeded with `seed + n`, so `--seed 2` replayed the launches of
/// `--seed 1` shifted by one and ten seeds gave nearly one sample ten times (MP: 552 and 551
/// weak of 3,000). Neighbouring seeds now differ in far more than one launch.
#[test]
fn neighbouring_seeds_share_no_launches() {
    let a = run_seeded(MemoryModel::Ptx, LitmusShape::Sb, None, 2_000, 1);
    let b = run_seeded(MemoryModel::Ptx, LitmusShape::Sb, None, 2_000, 2);
    let states: std::collections::BTreeSet<_> =
        a.outcomes.keys().chain(b.outcomes.keys()).collect();
    let count = |h: &Histogram, k| h.outcomes.get(k).copied().unwrap_or(0);
    let apart: u64 = states
        .iter()
        .map(|k| count(&a, k).abs_diff(count(&b, k)))
        .sum();
    assert!(apart > 10, "seed 1: {a:?}\nseed 2: {b:?}");
}
