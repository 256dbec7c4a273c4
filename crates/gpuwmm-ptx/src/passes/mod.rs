//! Instrumentation passes: pure functions from one PTX module to another.

pub mod fences;
pub mod harness;
pub mod stress;
