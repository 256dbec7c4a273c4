//! Helpers for the decoder's one-instruction tests: decode a tiny kernel and look at the first
//! decoded instruction, or run it on the simulator (sequential consistency, one thread) and
//! read the 64-bit word it stored.

use super::{decode_kernel, module_symbols, module_vars, Op};
use crate::device::{BackendError, Device, KernelArg, LaunchConfig};
use crate::{MemoryModel, SimBackend, SimConfig};
use std::collections::HashMap;
use std::time::Duration;

/// A kernel `k(.param .u64 out)` around `body`.
fn kernel(body: &str) -> String {
    format!(
        ".version 8.8\n.target sm_70\n.address_size 64\n\
         .visible .entry k(.param .u64 out)\n{{\n{body}\nret;\n}}\n"
    )
}

/// The first decoded instruction of a kernel whose body is `body`.
pub fn first_op(body: &str) -> Result<Op, BackendError> {
    let module = gpuwmm_ptx::parse(&kernel(body)).expect("test PTX parses");
    let vars = module_vars(&module)?;
    let symbols = module_symbols(&vars, &HashMap::new());
    let f = module.kernels().next().expect("one kernel");
    let k = decode_kernel(f, &module, &symbols)?;
    Ok(k.code[0].op)
}

/// Whether the decoder refuses `body`'s first instruction as unsupported.
pub fn unsupported(body: &str) -> bool {
    matches!(first_op(body), Err(BackendError::Unsupported { .. }))
}

/// Runs `body` with `%out` holding the address of an 8-byte zeroed buffer; returns the word it
/// holds afterwards.
pub fn run(body: &str) -> u64 {
    let mut sim = SimBackend::new(SimConfig::new(MemoryModel::Sc, 1));
    let m = sim
        .load_module(&kernel(&format!("ld.param.u64 %out, [out];\n{body}")))
        .expect("test kernel loads");
    let out = sim.alloc(8).expect("alloc");
    sim.memset(out, 0).expect("memset");
    let one = LaunchConfig::new((1, 1, 1), (1, 1, 1));
    sim.launch(m, "k", &one, &[KernelArg::ptr(out)])
        .expect("launch");
    sim.synchronize(Duration::from_secs(60)).expect("runs");
    let mut bytes = [0u8; 8];
    sim.copy_out(out, 0, &mut bytes).expect("copy out");
    u64::from_le_bytes(bytes)
}

/// Asserts that `body`'s first instruction decodes to an op whose `{:?}` starts with `prefix`
/// (the variant and the fields that matter, in declaration order).
#[track_caller]
pub fn assert_decodes(body: &str, prefix: &str) {
    let shown = format!("{:?}", first_op(body).expect("decodes"));
    assert!(
        shown.starts_with(prefix),
        "`{body}` decoded to {shown}, expected {prefix}…"
    );
}
