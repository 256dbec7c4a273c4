//! The simulator on what real CUDA code uses beyond plain device-scope synchronisation
//! (issue 30): scoped atomics shared by several blocks, `__syncwarp`, named and partial
//! barriers. The kernels are NVRTC's output of `fixtures/ptx/sim_scoped.cu`; every figure is a
//! simulator figure over seeded launches (the seeds are the loop indices).

use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::backend::words::read_buffer;
use gpuwmm::backend::{Buffer, Device, KernelArg, LaunchConfig, ModuleId};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(600);
const PTX: &str = include_str!("fixtures/ptx/sim_scoped.ptx");

fn launch(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig::new((grid, 1, 1), (block, 1, 1))
}

fn sim(seed: u64) -> (SimBackend, ModuleId) {
    let mut b = SimBackend::new(SimConfig::new(MemoryModel::Ptx, seed));
    let m = b.load_module(PTX).unwrap();
    (b, m)
}

fn words(b: &mut SimBackend, buf: Buffer) -> Vec<u32> {
    read_buffer(b, buf).unwrap()
}

/// Final counter values of `runs` launches of `kernel` (4 blocks of 32 threads, one add each).
fn counters(kernel: &str, runs: u64) -> Vec<u32> {
    (0..runs)
        .map(|seed| {
            let (mut b, m) = sim(seed);
            let counter = b.alloc(4).unwrap();
            b.launch(m, kernel, &launch(4, 32), &[KernelArg::ptr(counter)])
                .unwrap();
            b.synchronize(LONG).unwrap();
            words(&mut b, counter)[0]
        })
        .collect()
}

/// Regression (issue 30: `atomicAdd_block` on one counter from 4 blocks was exact in 1,000 of
/// 1,000 runs): atomicity holds only between morally strong RMWs, so block-scope adds from
/// different blocks may lose updates; within a block, and at device scope, none is lost.
#[test]
fn block_scope_atomics_from_several_blocks_can_lose_updates() {
    let finals = counters("block_counter", 200);
    let lost = finals.iter().filter(|&&c| c < 128).count();
    let lowest = finals.iter().min().unwrap();
    eprintln!("atomicAdd_block, 4 blocks x 32: {lost} of 200 runs below 128 (lowest {lowest})");
    assert!(
        finals.iter().all(|&c| (32..=128).contains(&c)),
        "{finals:?}"
    );
    // measured 183 of 200 (seeds 0..200) below 128, lowest 66
    assert!((160..=200).contains(&lost), "{lost}");
}

#[test]
fn device_scope_atomics_never_lose_an_update() {
    assert!(counters("gpu_counter", 200).iter().all(|&c| c == 128));
}

#[test]
fn block_scope_atomics_within_one_block_never_lose_an_update() {
    for seed in 0..100 {
        let (mut b, m) = sim(seed);
        let counter = b.alloc(4).unwrap();
        b.launch(
            m,
            "block_counter",
            &launch(1, 128),
            &[KernelArg::ptr(counter)],
        )
        .unwrap();
        b.synchronize(LONG).unwrap();
        assert_eq!(words(&mut b, counter)[0], 128, "seed {seed}");
    }
}

/// Runs of a spin lock taken 3 times by thread 0 of each of 4 blocks that lost an increment.
fn lock_lost_updates(kernel: &str, runs: u64) -> usize {
    (0..runs)
        .filter(|&seed| {
            let (mut b, m) = sim(seed);
            let (lock, counter) = (b.alloc(4).unwrap(), b.alloc(4).unwrap());
            let args = [
                KernelArg::ptr(lock),
                KernelArg::ptr(counter),
                KernelArg::I32(3),
            ];
            b.launch(m, kernel, &launch(4, 32), &args).unwrap();
            b.synchronize(LONG).unwrap();
            words(&mut b, counter)[0] != 12
        })
        .count()
}

/// Regression (issue 30): a lock taken with `atomicCAS_block` by several blocks is no lock:
/// two blocks' CAS may both read it free.
#[test]
fn a_block_scope_lock_shared_by_blocks_can_be_held_twice() {
    let lost = lock_lost_updates("block_lock", 200);
    eprintln!("atomicCAS_block lock, 4 blocks: lost updates in {lost} of 200 runs");
    // measured 109 of 200 (seeds 0..200)
    assert!((80..=140).contains(&lost), "{lost}");
    assert_eq!(lock_lost_updates("gpu_lock", 200), 0);
}

/// `warp_handoff` on 2 blocks of 64 threads (4 warps): the words lane 15 of each warp copied.
fn handoffs(mask: u32, sync: i32, seed: u64) -> Vec<u32> {
    let (mut b, m) = sim(seed);
    let (data, out) = (b.alloc(16).unwrap(), b.alloc(16).unwrap());
    let args = [
        KernelArg::ptr(data),
        KernelArg::ptr(out),
        KernelArg::U32(mask),
        KernelArg::I32(sync),
    ];
    b.launch(m, "warp_handoff", &launch(2, 64), &args).unwrap();
    b.synchronize(LONG).unwrap();
    words(&mut b, out)
}

/// Regression (issue 30: "the simulator does not support bar.warp.sync -1"): `__syncwarp`
/// waits for the lanes of its mask and orders memory among them, full mask or partial.
#[test]
fn syncwarp_hands_a_word_from_lane_0_to_lane_15() {
    for seed in 0..200 {
        for mask in [u32::MAX, 0xffff] {
            assert_eq!(
                handoffs(mask, 1, seed),
                [1, 2, 3, 4],
                "seed {seed}, mask {mask:#x}"
            );
        }
    }
    let racy = (0..200)
        .filter(|&seed| handoffs(u32::MAX, 0, seed) != [1, 2, 3, 4])
        .count();
    eprintln!("without __syncwarp: a stale handoff in {racy} of 200 runs");
    // measured 198 of 200 (seeds 0..200): the handoff is a race without the barrier
    assert!(racy > 0);
}

/// `bar.arrive 1, 128` (producers), `bar.sync 1, 128` (consumers) and `barrier.sync 2, 64`
/// (producers only) on 2 blocks of 128 threads: every word arrives, in every run.
#[test]
fn named_barriers_with_counts_order_producers_before_consumers() {
    for seed in 0..200 {
        let (mut b, m) = sim(seed);
        let (data, out) = (b.alloc(2 * 64 * 4).unwrap(), b.alloc(2 * 128 * 4).unwrap());
        b.launch(
            m,
            "named_barriers",
            &launch(2, 128),
            &[KernelArg::ptr(data), KernelArg::ptr(out)],
        )
        .unwrap();
        b.synchronize(LONG).unwrap();
        let got = words(&mut b, out);
        for (block, o) in got.chunks(128).enumerate() {
            let want: Vec<u32> = (0..64).map(|t| 64 - t).chain(1..=64).collect();
            assert_eq!(o, want, "seed {seed}, block {block}");
        }
    }
}

/// Threads below `limit` of a block of 128 run `bar.red.popc.u32 d, 3, 64, (t odd)` (or,
/// with `count` 0, `bar.sync 1, 64` alone) and store what they got; the others exit.
const NAMED_RED: &str = include_str!("fixtures/ptx/small/named_red.ptx");

fn named_red(limit: u32) -> Result<Vec<u32>, gpuwmm::backend::BackendError> {
    let mut b = SimBackend::new(SimConfig::new(MemoryModel::Ptx, 3));
    let m = b.load_module(NAMED_RED).unwrap();
    let out = b.alloc(128 * 4).unwrap();
    b.launch(
        m,
        "red3",
        &launch(1, 128),
        &[KernelArg::ptr(out), KernelArg::U32(limit)],
    )
    .unwrap();
    b.synchronize(LONG)?;
    Ok(words(&mut b, out))
}

#[test]
fn a_named_barrier_reduction_counts_the_threads_of_its_count() {
    let got = named_red(64).unwrap();
    assert!(got[..64].iter().all(|&n| n == 32), "{got:?}");
    assert!(got[64..].iter().all(|&n| n == 0));
}

#[test]
fn a_named_barrier_waits_for_its_count_even_when_the_other_threads_exit() {
    let err = named_red(32).unwrap_err();
    assert!(
        matches!(err, gpuwmm::backend::BackendError::Hang(_)),
        "{err}"
    );
}
