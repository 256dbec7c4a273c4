//! The text `gpuwmm check` prints: the line that opens a check (app, environment, fences,
//! stress, journal) and the summary of its runs (outcomes, error rate, first error).

use super::naming::resuming_note;
use crate::backend::BackendKind;
use crate::check::{CheckMeta, Outcome, Tally};
use crate::ptx::loops::BlindLoop;
use crate::stats::ZeroErrorBound;
use std::fmt::Write;
use std::path::Path;

/// What a check is about to run (after the provenance line); `done` runs come from the journal.
pub fn start_text(meta: &CheckMeta, path: &Path, done: usize) -> String {
    format!(
        "{}\nchecking {} under {} with fences {}: {}, seed {}, stress {} (profile {}), journal \
         {}{}",
        meta.provenance,
        meta.target.app,
        meta.env,
        meta.fences.label(),
        meta.stop,
        meta.seed,
        stress_text(meta),
        meta.profile_source,
        path.display(),
        resuming_note(done)
    )
}

/// The stress of every run: `none`, or iterations, sequence, spread and patch size.
fn stress_text(meta: &CheckMeta) -> String {
    if !meta.env.stresses() {
        return "none".into();
    }
    let p = &meta.target.profile;
    format!(
        "{} iterations of '{}' x spread {} x patch {}{}",
        meta.stress.stress_iterations,
        p.sequence,
        p.spread,
        p.patch_words,
        calibrated_text(meta)
    )
}

/// What the stress was sized to: `--stress-factor` times the app's own kernel with idle
/// stressing blocks, in the backend's unit (a long kernel, a spin that gives up after many
/// rounds say, makes every run long).
fn calibrated_text(meta: &CheckMeta) -> String {
    let Some(c) = &meta.stress.calibration else {
        return String::new();
    };
    let base = match meta.target.backend {
        BackendKind::Sim => format!("{:.0} instructions of its busiest thread", c.base),
        BackendKind::Cuda => format!("{:.3} ms", c.base * 1e3),
    };
    format!(
        ", sized to {}x the app's kernel with idle stress ({base}; --stress-factor)",
        meta.target.stress_factor
    )
}

/// The check's runs summed up: outcomes, error rate, confidence, the first error with the
/// command that replays it, and the journal at `path`.
pub fn summary_text(
    meta: &CheckMeta,
    tally: &Tally,
    path: &Path,
    confidence: Option<&ZeroErrorBound>,
) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "{}", meta.provenance);
    let _ = writeln!(
        t,
        "app {} | env {} | fences {}",
        meta.target.app,
        meta.env,
        meta.fences.label()
    );
    let _ = writeln!(t, "runs {} in {:.1} s", tally.runs, tally.elapsed_ms / 1e3);
    let kinds: Vec<String> = Outcome::ALL
        .iter()
        .map(|o| format!("{o} {}", tally.count(*o)))
        .collect();
    let _ = writeln!(t, "outcomes: {}", kinds.join(", "));
    let rate = tally.error_rate();
    let effective = match rate.is_effective() {
        true => " — effective (above 5%)",
        false => "",
    };
    let _ = writeln!(t, "error rate {rate} (95% Wilson interval){effective}");
    if let Some(confidence) = confidence {
        let _ = writeln!(t, "confidence: {confidence}");
    }
    if let Some((run, outcome, reason)) = &tally.first_error {
        let _ = writeln!(t, "first error: run {run}, {outcome}: {reason}");
        let _ = writeln!(t, "replay it with: gpuwmm replay {} {run}", path.display());
    }
    let _ = write!(t, "journal: {}", path.display());
    t
}

/// What a report says of each blind loop ([`crate::ptx::loops`]) where runs timed out: the line,
/// why it cannot leave, and the fix.
pub fn blind_loop_lines(loops: &[BlindLoop]) -> Vec<String> {
    let cwd = std::env::current_dir().unwrap_or_default();
    loops
        .iter()
        .map(|l| {
            let place = match &l.source {
                Some(line) => format!(
                    "{}:{}",
                    super::harden::shown_path(&line.file, &cwd),
                    line.line
                ),
                None => "a loop".to_string(),
            };
            format!(
                "hang: {place} [{}] spins without reading memory, and nothing in the loop \
                 changes what decides it, so once it goes round it never leaves (a spin on a \
                 plain, non-volatile, non-atomic variable ends so: the compiler may read it \
                 once, before the loop); read such a variable through `volatile`, \
                 `cuda::atomic_ref` or an atomic",
                l.function
            )
        })
        .collect()
}
