//! Instructions held back behind a deferred load (`exec/held.rs`): they compute and store with
//! the registers as they were when issued and their guards as they stood then, and later
//! accesses to a held store's address wait for it, whatever runs before the load is performed.

use super::device::{BackendError, Buffer, Device, KernelArg, LaunchConfig};
use super::{MemoryModel, SimBackend, SimConfig};
use std::time::Duration;

/// One thread over words 0 to 3 of `mem`: `body` runs after `%r5` is set to 10 and `%p2` to
/// false; word 0 holds 5 at the start.
fn kernel(body: &str) -> String {
    format!(
        ".version 7.8\n.target sm_70\n.address_size 64\n\
         .visible .entry k(.param .u64 k_mem)\n{{\n\
         \t.reg .pred %p<3>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<2>;\n\
         \tld.param.u64 %rd1, [k_mem];\n\tmov.u32 %r5, 10;\n\tmov.u32 %r6, 7;\n\
         \tsetp.eq.u32 %p2, %r5, 0;\n{body}\n\tret;\n}}\n"
    )
}

/// Runs `body` with every global load deferred under `seed`; words 1 to 3 after.
fn run(body: &str, seed: u64) -> Result<[u32; 3], BackendError> {
    let mut config = SimConfig::new(MemoryModel::Ptx, seed);
    config.defer_probability = 1.0;
    let mut sim = SimBackend::new(config);
    let module = sim.load_module(&kernel(body))?;
    let mem: Buffer = sim.alloc(16)?;
    sim.memset(mem, 0)?;
    sim.copy_in(mem, 0, &5u32.to_le_bytes())?;
    sim.launch(
        module,
        "k",
        &LaunchConfig::new((1, 1, 1), (1, 1, 1)),
        &[KernelArg::ptr(mem)],
    )?;
    sim.synchronize(Duration::from_secs(60))?;
    let mut bytes = [0u8; 16];
    sim.copy_out(mem, 0, &mut bytes)?;
    let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    Ok([word(1), word(2), word(3)])
}

#[test]
fn held_arithmetic_reads_a_register_overwritten_after_it_as_it_was() {
    // The add uses the loaded 5 and %r5 = 10; %r5 is overwritten before the add's result is
    // stored.
    let body = "\tld.global.u32 %r3, [%rd1];\n\tadd.u32 %r4, %r3, %r5;\n\tmov.u32 %r5, 100;\n\
                \tst.global.u32 [%rd1+4], %r4;\n\tst.global.u32 [%rd1+8], %r5;";
    for seed in 0..50 {
        assert_eq!(run(body, seed).unwrap(), [15, 100, 0], "seed {seed}");
    }
}

#[test]
fn a_chain_of_held_arithmetic_and_a_false_guard_give_the_program_order_result() {
    // add and mul both wait for the load; the guarded add is skipped (%p2 is false), so %r6
    // keeps its 7.
    let body = "\tld.global.u32 %r3, [%rd1];\n\tadd.u32 %r4, %r3, 1;\n\tmul.lo.u32 %r4, %r4, 3;\n\
                \t@%p2 add.u32 %r6, %r3, 1;\n\tsetp.eq.u32 %p1, %r4, 18;\n\
                \tselp.u32 %r7, 1, 2, %p1;\n\tst.global.u32 [%rd1+4], %r4;\n\
                \tst.global.u32 [%rd1+8], %r6;\n\tst.global.u32 [%rd1+12], %r7;";
    for seed in 0..50 {
        assert_eq!(run(body, seed).unwrap(), [18, 7, 1], "seed {seed}");
    }
}

#[test]
fn a_load_of_a_held_stores_address_reads_what_it_stored() {
    // The store of the loaded 5 waits for the load; the load of its address waits for it.
    let body = "\tld.global.u32 %r3, [%rd1];\n\tst.global.u32 [%rd1+4], %r3;\n\
                \tld.global.u32 %r4, [%rd1+4];\n\tst.global.u32 [%rd1+8], %r4;";
    for seed in 0..50 {
        assert_eq!(run(body, seed).unwrap(), [5, 5, 0], "seed {seed}");
    }
}

#[test]
fn a_held_vector_store_writes_its_loaded_and_its_known_values() {
    // %r5 (10) is known when the store is issued and overwritten before it is performed.
    let body = "\tld.global.u32 %r3, [%rd1];\n\tst.global.v2.u32 [%rd1+8], {%r3, %r5};\n\
                \tmov.u32 %r5, 100;\n\tst.global.u32 [%rd1+4], %r5;";
    for seed in 0..50 {
        assert_eq!(run(body, seed).unwrap(), [100, 5, 10], "seed {seed}");
    }
}
