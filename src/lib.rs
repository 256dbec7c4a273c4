//! gpuwmm: expose weak-memory bugs in CUDA applications and harden them.
//!
//! The library is layered so that each layer only looks down:
//! - [`ptx`]: a PTX parser, printer and the instrumentation passes (pure functions over the IR);
//! - [`control`]: the host side of the harness control block (thread randomisation, stress
//!   parameters) that instrumented kernels read;
//! - [`toolchain`]: NVRTC, `ptxas` and `cuobjdump`, found on the machine or installed from wheels;
//! - the binary (`src/main.rs`, `src/cli.rs`) wires them to the command line.

pub mod apps;
pub mod backend;
pub mod check;
pub mod compile;
pub mod control;
pub mod env;
pub mod input;
pub mod litmus;
pub mod profile;
pub mod ptx;
pub mod stressed;
pub mod toolchain;
