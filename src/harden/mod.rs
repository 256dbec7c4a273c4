//! Hardening: find an empirically minimal set of fences that removes an application's
//! weak-memory errors, and show it as source changes.
//!
//! - [`algorithm`]: the paper's Algorithm 1 (empirical fence insertion), generic over how a fence
//!   set is checked, so that it can be tested with mock checkers and resumed from a journal;
//! - [`communication`]: what runs recording races add to what fails: the races that guide the
//!   search, the scope floor of kinds, the partners PTX requires, the races no fence can order;
//! - [`recording`]: where races are recorded when the backend records none (a GPU): the
//!   simulator running the same app's PTX, asked with the hardening's site ids;
//! - [`run`]: the checker that answers by running the application through an executor, with
//!   every run journaled so that a killed hardening resumes where it stopped;
//! - [`patch_journal`]: the runs of the patch check, journaled so that they survive a kill;
//! - [`patch`]: the chosen fences as statements inserted into a source file, and as a unified
//!   diff that `git apply` and `patch -p1` accept;
//! - [`statements`]: the statement structure of a CUDA source, where the patch places fences;
//! - [`report`]: the chosen fences as source lines, CUDA statements and a patch;
//! - [`verify`]: the app rebuilt from its patched source and run, before the patch is handed
//!   out.

pub mod algorithm;
pub mod communication;
pub mod patch;
pub mod patch_journal;
pub mod recording;
pub mod report;
pub mod run;
pub mod statements;
pub mod verify;
