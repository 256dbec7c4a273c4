//! PTX: the intermediate representation, its parser and printer, and the instrumentation passes.
//!
//! Everything gpuwmm does to an application (fences in, fences out, stressing blocks, thread
//! randomisation) is a pure function from one [`Module`] to another, so each can be tested on its
//! own and composed freely. Nothing here knows about backends or the command line.

pub mod access;
pub mod ir;
pub mod lines;
pub mod parse;
pub mod passes;
pub mod print;

pub use access::{AccessKind, Fence, FenceStrength, MemoryAccess, Scope, Semantics, StateSpace};
pub use ir::*;
pub use parse::{parse, ParseError};
pub use print::print;
