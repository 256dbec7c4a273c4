//! gpuwmm-ptx: the PTX intermediate representation, its parser and printer, the fence sites
//! and the instrumentation passes.
//!
//! This crate is the lowest layer of gpuwmm: the simulator (`gpuwmm-sim`) and the tool
//! (`gpuwmm`) build on it, and it depends on neither.
//!
//! Everything gpuwmm does to an application (fences in, fences out, stressing blocks, thread
//! randomisation) is a pure function from one [`Module`] to another, so each can be tested on its
//! own and composed freely. Nothing here knows about backends or the command line.

#![deny(unsafe_code)]

#[macro_use]
mod named;

pub mod access;
pub mod demangle;
pub mod ir;
pub mod lines;
pub mod loops;
pub mod parse;
pub mod passes;
pub mod print;

pub use access::{AccessKind, Fence, FenceStrength, MemoryAccess, Scope, Semantics, StateSpace};
pub use ir::*;
pub use parse::{parse, ParseError};
pub use print::print;
