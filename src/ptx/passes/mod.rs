//! Instrumentation passes: pure functions from one PTX module to another.

pub mod fences;
