pub mod harness;
pub mod stress;
