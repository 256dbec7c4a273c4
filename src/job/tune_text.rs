//! The text `gpuwmm tune` prints: the line that opens a tuning (what each stage will run) and
//! the summary of its outcome (each value of the profile and where it came from).

use super::tune::TuneMeta;
use crate::profile::StressProfile;
use crate::ptx::passes::stress::sequence_to_string;
use crate::tune::analysis::all_sequences;
use crate::tune::{Source, TuneOutcome};
use std::path::Path;

/// What a tuning is about to run (after the provenance line): the configurations of each
/// stage, executions, threads and the journal; `recorded` configurations are not run again.
pub fn start_text(meta: &TuneMeta, out: &Path, recorded: usize) -> String {
    let b = &meta.budgets;
    let stage1 = match meta.patch_words {
        Some(p) => format!("stage 1 skipped (patch {p} words given)"),
        None => format!(
            "stage 1 {} configurations",
            b.locations as u64 * b.tests.len() as u64 * b.distance_list().len() as u64
        ),
    };
    let stage2 = match &meta.sequence {
        Some(s) => format!("stage 2 skipped (sequence '{s}' given)"),
        None => format!(
            "stage 2 {} sequences x the patch-start locations",
            all_sequences(b.max_sequence).len()
        ),
    };
    format!(
        "{}\ntuning {} (seed {}): {stage1}, {stage2}, stage 3 {} spreads; {} executions each, {} \
         per launch; {} threads at most, {} stress iterations; journal {}{}",
        meta.provenance,
        meta.chip,
        meta.seed,
        b.max_spread,
        b.executions,
        meta.instances,
        meta.max_threads,
        meta.stress_iterations,
        out.join("tune.csv").display(),
        match recorded {
            0 => String::new(),
            n => format!(" ({n} configurations recorded: not run again)"),
        }
    )
}

/// The profile's values and where each came from, then where the profile (`path`) and the
/// tuning's outputs (`out`) are.
pub fn summary_text(
    outcome: &TuneOutcome,
    profile: &StressProfile,
    path: &Path,
    out: &Path,
) -> String {
    let how = |s: &Source| match s {
        Source::Measured(how) => format!("measured ({how})"),
        Source::Given => "given".to_string(),
        Source::Fallback(why) => format!("DEFAULT: {why}"),
    };
    format!(
        "critical patch size {} words: {}\naccess sequence {}: {}\nspread {}: {}\nprofile: {}\n\
         journal, summary.md and charts: {}",
        profile.patch_words,
        how(&outcome.patch_words.source),
        sequence_to_string(&outcome.sequence.value),
        how(&outcome.sequence.source),
        profile.spread,
        how(&outcome.spread.source),
        path.display(),
        out.display()
    )
}
