//! gpuwmm: expose weak-memory bugs in CUDA applications and harden them.
//!
//! The library is layered so that each layer only looks down, and the lowest two layers are
//! crates of their own so the compiler keeps the order:
//! - [`ptx`] (the `gpuwmm-ptx` crate): a PTX parser, printer and the instrumentation passes (pure
//!   functions over the IR);
//! - [`control`]: the host side of the harness control block (thread randomisation, stress
//!   parameters) that instrumented kernels read;
//! - [`toolchain`]: NVRTC, `ptxas` and `cuobjdump`, found on the machine or installed from wheels;
//! - [`backend`]: the `cuda` backend and the simulator (the `gpuwmm-sim` crate, which implements
//!   the device interface it defines) behind one trait; [`apps`]: the
//!   applications under test behind one trait;
//! - [`env`], [`profile`]: testing environments and per-chip stress profiles;
//! - [`check`]: running an app under stress run after run, in a supervised worker process, with
//!   a resumable journal;
//! - [`stats`]: rates of erroneous runs with Wilson confidence intervals, bounds after runs
//!   without an error, and medians (pure);
//! - [`places`]: where the PTX cache, chip profiles and CUDA tools live, from the build tree
//!   or installed;
//! - [`naming`]: numbered default names for journals and output folders, so none collides;
//! - [`campaign`]: a campaign's apps × environments results as CSV and Markdown tables, its
//!   plan (`plan.json`), and reading a campaign folder back with each cell's status;
//! - [`slurm`]: a campaign as a Slurm job array: the batch script, `sbatch`, and task states;
//! - [`plot`]: rate charts as SVG (pure);
//! - [`harden`]: the paper's empirical fence insertion (Algorithm 1) over any fence checker, and
//!   the chosen fences as inserted source lines and a unified diff (pure);
//! - [`tune`]: the paper's three tuning stages (patch size, access sequence, spread) over any
//!   litmus runner, journaled, with the decisions as pure functions;
//! - [`cost`]: runtime and energy of no, empirical and conservative fences, interleaved and
//!   paired, with distribution-free intervals, over a [`cost::Measurement`];
//! - [`job`]: the long jobs (check, harden, campaign, cost, tune) as commands run them: output
//!   naming, what "finished" means, which output `--resume` continues, the kind-tagged sidecar
//!   and the `--json` documents;
//! - the binary (`src/main.rs`, `src/cli.rs`, `src/cmd/`) reads arguments, calls [`job`] and the
//!   other layers, and prints.
//!
//! Unsafe code is denied everywhere but in the two modules that call C libraries,
//! `backend::cuda` (the driver) and `toolchain::nvrtc`, which allow it and document each unsafe
//! block (`clippy::undocumented_unsafe_blocks`).

#![deny(unsafe_code)]

/// The PTX layer (`gpuwmm-ptx`): parser, IR, printer, sites and passes.
#[macro_use]
pub extern crate gpuwmm_ptx as ptx;

pub mod apps;
pub mod backend;
pub mod campaign;
pub mod check;
pub mod compile;
pub mod control;
pub mod cost;
pub mod env;
pub mod harden;
pub mod input;
pub mod isolation;
pub mod job;
pub mod limits;
pub mod litmus;
pub mod naming;
pub mod places;
pub mod plot;
pub mod profile;
pub mod slurm;
pub mod stats;
pub mod stressed;
pub mod toolchain;
pub mod tune;
