//! Barriers as the PTX ISA defines them (ids 0 to 15, thread counts, `bar.arrive`), checked on
//! small kernels in which a few chosen threads play roles and the others exit at once: a warp's
//! arrival counts for the warp size once every live thread of the warp is there, a count is met
//! by warps, `bar.arrive` does not wait for the barrier, and each completion starts a new phase.

use super::device::{BackendError, Buffer, Device, KernelArg, LaunchConfig};
use super::{MemoryModel, SimBackend, SimConfig};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// A kernel over memory words `x` (0), `out` (1) and `flag` (2) in which thread `tid` of each
/// role runs its body and every other thread exits.
fn kernel(roles: &[(u32, &str)]) -> String {
    let mut text = String::from(
        ".version 7.8\n.target sm_70\n.address_size 64\n\
         .visible .entry k(.param .u64 k_mem)\n{\n\
         \t.reg .pred %p<3>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<2>;\n\
         \tld.param.u64 %rd1, [k_mem];\n\tmov.u32 %r1, %tid.x;\n",
    );
    for (i, (tid, _)) in roles.iter().enumerate() {
        text += &format!("\tsetp.eq.u32 %p1, %r1, {tid};\n\t@%p1 bra $R{i};\n");
    }
    text += "\tret;\n";
    for (i, (_, body)) in roles.iter().enumerate() {
        text += &format!("$R{i}:\n{body}\n\tret;\n");
    }
    text + "}\n"
}

/// Thread `tid` stores 1 to `x`, then runs `then`.
fn store_x(then: &str) -> String {
    format!("\tmov.u32 %r2, 1;\n\tst.global.u32 [%rd1], %r2;\n\t{then}")
}

/// Thread runs `first`, then loads `x` and stores what it read to `out`.
fn load_x(first: &str) -> String {
    format!("\t{first}\n\tld.global.u32 %r3, [%rd1];\n\tst.global.u32 [%rd1+4], %r3;")
}

/// Runs `roles` on one block of `threads` with `seed`; the words `x`, `out`, `flag` after.
fn run(roles: &[(u32, &str)], threads: u32, seed: u64) -> Result<[u32; 3], BackendError> {
    let mut sim = SimBackend::new(SimConfig::new(MemoryModel::Ptx, seed));
    let module = sim.load_module(&kernel(roles))?;
    let mem: Buffer = sim.alloc(12)?;
    sim.memset(mem, 0)?;
    let config = LaunchConfig::new((1, 1, 1), (threads, 1, 1));
    sim.launch(module, "k", &config, &[KernelArg::ptr(mem)])?;
    sim.synchronize(LONG)?;
    let mut bytes = [0u8; 12];
    sim.copy_out(mem, 0, &mut bytes)?;
    let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    Ok([word(0), word(1), word(2)])
}

/// Asserts that thread `loader`, loading `x` after `barrier`, sees the 1 thread `storer` stored
/// before it, in a block of `threads` under 50 seeds.
fn assert_the_load_after_the_barrier_sees_the_store(
    barrier: &str,
    storer: u32,
    loader: u32,
    threads: u32,
) {
    let (store, load) = (store_x(barrier), load_x(barrier));
    for seed in 0..50 {
        let got = run(&[(storer, &store), (loader, &load)], threads, seed).unwrap();
        assert_eq!(
            got[1], 1,
            "seed {seed}: the load after the barrier saw {got:?}"
        );
    }
}

#[test]
fn a_thread_count_is_met_by_warps_whose_other_lanes_exited() {
    assert_the_load_after_the_barrier_sees_the_store("barrier.sync 1, 64;", 0, 32, 96);
}

#[test]
fn two_lanes_of_one_warp_meet_a_count_of_one_warp() {
    assert_the_load_after_the_barrier_sees_the_store("barrier.sync 3, 32;", 1, 0, 32);
}

#[test]
fn arrive_goes_on_and_releases_its_earlier_writes_to_the_waiting_warp() {
    let arrive = store_x("barrier.arrive 2, 64;\n\tst.relaxed.gpu.global.u32 [%rd1+8], %r2;");
    let wait = load_x(
        "$SPIN:\n\tld.relaxed.gpu.global.u32 %r4, [%rd1+8];\n\tsetp.eq.u32 %p2, %r4, 0;\n\
         \t@%p2 bra $SPIN;\n\tbarrier.sync 2, 64;",
    );
    for seed in 0..50 {
        let got = run(&[(0, &arrive), (32, &wait)], 64, seed).unwrap();
        assert_eq!(got, [1, 1, 1], "seed {seed}");
    }
}

#[test]
fn a_lane_at_a_barrier_waits_for_the_live_lanes_of_its_warp() {
    // Lane 0 arrives and would then raise the flag lane 1 waits for before its own arrival:
    // the warp never arrives as a whole, so nothing completes.
    let arrive =
        "\tbarrier.arrive 1, 32;\n\tmov.u32 %r2, 1;\n\tst.relaxed.gpu.global.u32 [%rd1+8], %r2;";
    let spin = "$SPIN:\n\tld.relaxed.gpu.global.u32 %r4, [%rd1+8];\n\tsetp.eq.u32 %p2, %r4, 0;\n\
                \t@%p2 bra $SPIN;\n\tbarrier.arrive 1, 32;";
    for seed in 0..2 {
        let err = run(&[(0, arrive), (1, spin)], 32, seed).unwrap_err();
        assert!(matches!(err, BackendError::Hang(_)), "seed {seed}: {err}");
    }
}

#[test]
fn a_third_warp_at_a_barrier_of_two_waits_for_a_next_phase_that_never_completes() {
    let sync = "\tbarrier.sync 4, 64;";
    for seed in 0..10 {
        let err = run(&[(0, sync), (32, sync), (64, sync)], 96, seed).unwrap_err();
        assert!(matches!(err, BackendError::Hang(_)), "seed {seed}: {err}");
    }
    let twice = "\tbarrier.sync 4, 64;\n\tbarrier.sync 4, 64;";
    run(&[(0, twice), (32, sync), (64, sync)], 96, 0).unwrap();
}

#[test]
fn a_whole_cta_barrier_waits_only_for_warps_with_a_live_thread() {
    let (store, load) = (store_x("barrier.sync 0;"), load_x("barrier.sync 0;"));
    for seed in 0..20 {
        let got = run(&[(0, &store), (64, &load)], 128, seed).unwrap();
        assert_eq!(got[1], 1, "seed {seed}");
    }
    // Barriers with different ids are different barriers, each waiting for the whole CTA.
    let (a, b) = ("\tbarrier.sync 0;", "\tbarrier.sync 1;");
    let err = run(&[(0, a), (32, b)], 64, 0).unwrap_err();
    assert!(matches!(err, BackendError::Hang(_)), "{err}");
}

#[test]
fn a_thread_count_that_is_not_a_multiple_of_the_warp_size_faults() {
    let err = run(&[(0, "\tbarrier.sync 1, 48;")], 64, 0).unwrap_err();
    assert!(
        matches!(&err, BackendError::Fault(m) if m.contains("multiple of the warp size")),
        "{err}"
    );
}
