//! `cost`: what fences cost in runtime and energy, measured with confidence.
//!
//! The paper's figure 5 compares each app natively with no fences, with the fences its empirical
//! insertion found (`emp`) and with a fence after every memory access (`cons`). This module does
//! that with three improvements: variants are interleaved run by run with the same input per
//! repetition (so drift and heat hit them alike and ratios can be paired), every figure carries
//! a distribution-free 95% interval ([`crate::stats::median_interval`]), and energy comes from
//! NVML's total-energy counter over windows long enough for it to move, with idle power beside
//! it, rather than from sampled power.
//!
//! The pieces: [`variant`] (the three fence sets as PTX transformations), [`emp`] (reading a
//! harden result), [`measure`] (the [`Measurement`] trait: one run, energy and power readings,
//! the clock), [`app_measure`] (the measurement of an app on a backend), [`synthetic`] (a
//! made-up measurement for tests), [`journal`] (the rows of `cost.csv`), [`driver`] (warm-up,
//! interleaved timing, energy windows, stopping rules), [`summary`] (medians, intervals,
//! overheads; Markdown) and [`chart`] (figure 5 as SVG).

/// Timing repetitions per app when neither a run count nor a duration is given.
pub const DEFAULT_REPETITIONS: u64 = 200;

pub mod app_measure;
pub mod chart;
pub mod driver;
pub mod emp;
pub mod journal;
pub mod measure;
pub mod summary;
pub mod synthetic;
pub mod variant;

pub use driver::{measure_app, CostPlan, CostProgress};
pub use journal::{CostMeta, CostRow, Phase};
pub use measure::{EnergyMethod, Measurement, RunSample, TimeMethod};
pub use summary::{AppSummary, CostSummary};
pub use variant::Variant;

use thiserror::Error;

/// Everything that can go wrong while measuring cost.
#[derive(Debug, Error)]
pub enum CostError {
    #[error(transparent)]
    App(#[from] crate::apps::AppError),
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
    #[error(transparent)]
    Journal(#[from] crate::check::journal::JournalError),
    #[error("energy: {0}")]
    Energy(String),
    #[error("{path}: {message}")]
    EmpResult { path: String, message: String },
    #[error("fence site {site} does not exist (the app has {sites} sites at this granularity)")]
    NoSuchSite { site: usize, sites: usize },
    #[error(
        "fence site {site} is not the site that was hardened: it accessed `{recorded}`, and now \
         accesses `{now}` (the compiler or gpuwmm changed since); harden the app again"
    )]
    AnotherSite {
        site: usize,
        recorded: String,
        now: String,
    },
}
