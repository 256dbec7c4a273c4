//! The simulator's PTX memory model on whole kernels: regressions of the store-buffer model,
//! named after the bugs, and the idioms the model must keep correct.
//!
//! The kernels are hand-written PTX in the shapes a user's kernel compiles to (NVRTC spells
//! `volatile` as `.volatile`, `__threadfence()` as `fence.sc.gpu`, `atomicCAS` as
//! `atom.global.cas.b32`). Each test runs many seeded launches.

use gpuwmm::backend::sim::{MemoryModel, SimBackend, SimConfig};
use gpuwmm::backend::words::read_buffer;
use gpuwmm::backend::Device;
use gpuwmm::backend::{KernelArg, LaunchConfig};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(600);

/// Message passing between thread 0 of block 0 (writer) and of block 1 (reader). `{W1}` is
/// placed between the payload and the flag store, `{W2}` after the flag store, `{R}` between
/// the reader's flag loop and its payload load.
const MP: &str = include_str!("fixtures/ptx/small/mp.ptx");

/// A spin-lock around `*counter += 1`, taken `iters` times by thread 0 of every block:
/// `atomicCAS(lock, 0, 1)` to take it, `{ACQ}` after taking it, `{REL}` before releasing,
/// `{UNLOCK}` to release, `{AFTER}` after releasing.
const LOCK: &str = include_str!("fixtures/ptx/small/lock.ptx");

const FENCE: &str = "fence.sc.gpu;";
const PLAIN_UNLOCK: &str = "st.global.u32 [%rd1], 0;";
const RELAXED_UNLOCK: &str = "atom.global.exch.b32 %r6, [%rd1], 0;";

fn launch(grid: u32) -> LaunchConfig {
    LaunchConfig::new((grid, 1, 1), (32, 1, 1))
}

fn read_u32(b: &mut SimBackend, buf: gpuwmm::backend::Buffer) -> u32 {
    read_buffer::<u32, _>(b, buf).unwrap()[0]
}

/// How many of `runs` message-passing launches read the flag but not the payload.
fn mp_stale_payloads(w1: &str, w2: &str, r: &str, runs: u64) -> u64 {
    let ptx = MP.replace("{W1}", w1).replace("{W2}", w2).replace("{R}", r);
    let mut stale = 0;
    for seed in 0..runs {
        let mut b = SimBackend::new(SimConfig::new(MemoryModel::Ptx, seed));
        let m = b.load_module(&ptx).unwrap();
        let bufs = [
            b.alloc(4).unwrap(),
            b.alloc(4).unwrap(),
            b.alloc(4).unwrap(),
        ];
        let args = bufs.map(KernelArg::ptr);
        b.launch(m, "mp", &launch(2), &args).unwrap();
        b.synchronize(LONG).unwrap();
        if read_u32(&mut b, bufs[2]) != 1 {
            stale += 1;
        }
    }
    stale
}

/// How many of `runs` lock launches (4 blocks, 3 critical sections each) lost an update.
fn lock_lost_updates(acq: &str, rel: &str, unlock: &str, after: &str, runs: u64) -> u64 {
    let ptx = LOCK
        .replace("{ACQ}", acq)
        .replace("{REL}", rel)
        .replace("{UNLOCK}", unlock)
        .replace("{AFTER}", after);
    let mut lost = 0;
    for seed in 0..runs {
        let mut b = SimBackend::new(SimConfig::new(MemoryModel::Ptx, seed));
        let m = b.load_module(&ptx).unwrap();
        let (lock, counter) = (b.alloc(4).unwrap(), b.alloc(4).unwrap());
        let args = [
            KernelArg::ptr(lock),
            KernelArg::ptr(counter),
            KernelArg::U32(3),
        ];
        b.launch(m, "lock", &launch(4), &args).unwrap();
        b.synchronize(LONG).unwrap();
        if read_u32(&mut b, counter) != 12 {
            lost += 1;
        }
    }
    lost
}

#[test]
fn fence_after_the_flag_store_does_not_stop_a_reader_seeing_the_flag_before_the_payload() {
    let stale = mp_stale_payloads("", FENCE, "", 400);
    eprintln!("fence after the flag store: stale payload in {stale} of 400 runs");
    // measured 200 of 400 (seeds 0..400): half the loads that may read an older value do
    assert!((170..=230).contains(&stale), "{stale}");
}

#[test]
fn fence_after_a_plain_unlock_store_does_not_protect_the_critical_section() {
    let lost = lock_lost_updates("", "", PLAIN_UNLOCK, FENCE, 300);
    eprintln!("fence after the unlock store: lost updates in {lost} of 300 runs");
    // measured 300 of 300 (seeds 0..300) at h26reach, where the racing weak counter stores of
    // different blocks may also go below each other in coherence; 276 at h26sim, 296 before
    // the lock's CAS could read before the weak unlock store of another block, as PTX allows
    assert!((280..=300).contains(&lost), "{lost}");
}

#[test]
fn a_writer_fence_alone_does_not_make_message_passing_safe() {
    let stale = mp_stale_payloads(FENCE, "", "", 400);
    eprintln!("writer-side fence only: stale payload in {stale} of 400 runs");
    // measured 199 of 400 (seeds 0..400)
    assert!((170..=230).contains(&stale), "{stale}");
}

#[test]
fn fences_on_both_sides_make_message_passing_safe() {
    assert_eq!(mp_stale_payloads(FENCE, "", FENCE, 1000), 0);
    assert_eq!(
        mp_stale_payloads("fence.acq_rel.gpu;", "", "fence.acq_rel.gpu;", 1000),
        0
    );
}

#[test]
fn cta_scope_fences_do_not_order_message_passing_between_blocks() {
    let stale = mp_stale_payloads("fence.sc.cta;", "", "fence.sc.cta;", 400);
    eprintln!("cta-scope fences on both sides: stale payload in {stale} of 400 runs");
    // measured 200 of 400 (seeds 0..400): as weak as no fence at all
    assert!((170..=230).contains(&stale), "{stale}");
}

#[test]
fn a_lock_with_acquire_and_release_fences_loses_no_update() {
    assert_eq!(lock_lost_updates(FENCE, FENCE, RELAXED_UNLOCK, "", 300), 0);
}

#[test]
fn a_lock_without_the_acquire_fence_can_lose_an_update() {
    let lost = lock_lost_updates("", FENCE, RELAXED_UNLOCK, "", 300);
    eprintln!("lock without the acquire fence: lost updates in {lost} of 300 runs");
    // measured 295 of 300 (seeds 0..300)
    assert!((280..=300).contains(&lost), "{lost}");
}
