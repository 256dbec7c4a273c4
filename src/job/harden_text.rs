//! The text `gpuwmm harden` prints: the line that opens a hardening, and the report of one that
//! ran to its end (the fences kept as source lines, the kinds chosen, the fences the PTX model
//! requires, the patch and a summary). The JSON document is [`super::harden::HardenDocument`].

use super::harden::{
    braces, communication_source, first_failure, first_failure_of, original_fences_note,
    race_kept_text, replay_command, shown_path, Hardening, REQUIRED,
};
use super::naming::resuming_note;
use super::JobError;
use crate::check::journal::read_rows;
use crate::env::Environment;
use crate::harden::communication::StandInsFailed;
use crate::harden::recording::RaceRecording;
use crate::harden::run::{HardenMeta, HardenRow, Hardened};
use crate::harden::verify::{PatchCheck, PatchRuns};
use crate::ptx::demangle::source_name;
use crate::ptx::passes::fences::{FenceKind, Granularity};
use crate::stats::ZeroErrorBound;
use std::collections::BTreeMap;
use std::fmt::{self, Display, Formatter};
use std::path::Path;

/// What a hardening is about to run (after the provenance line): sites, stress, stability
/// check, seed and journal.
pub fn start_text(meta: &HardenMeta, path: &Path, done: usize) -> String {
    let recorded = match &meta.race_recording {
        Some(r) => format!(
            "\n{} (stress {} iterations there)",
            RaceRecording::describe(meta.target.backend),
            r.stress_iterations
        ),
        None => String::new(),
    };
    format!(
        "{}{recorded}\nhardening {} under {}: {} candidate sites ({}), I = {}, up to {} rounds, stability \
         check {}, seed {}, stress {} iterations, journal {}{}",
        meta.provenance,
        meta.target.app,
        meta.env,
        meta.sites.len(),
        meta.target.fence_kind,
        meta.initial_iterations,
        meta.max_rounds,
        meta.stable,
        meta.seed,
        meta.stress.stress_iterations,
        path.display(),
        resuming_note(done)
    )
}

/// The report of a finished hardening, with what it reads from the journal and the app read
/// up front, so that showing it cannot fail.
pub struct HardenText<'a> {
    hardening: &'a Hardening,
    wall_s: f64,
    confidence: Option<&'a ZeroErrorBound>,
    /// The journal's rows, for the runs that refuted weaker kinds.
    rows: Vec<HardenRow>,
    first_failure: Option<HardenRow>,
    original_fences: Option<String>,
}

impl<'a> HardenText<'a> {
    /// The report of `hardening`, which took `wall_s` seconds.
    pub fn new(
        hardening: &'a Hardening,
        wall_s: f64,
        confidence: Option<&'a ZeroErrorBound>,
    ) -> Result<HardenText<'a>, JobError> {
        let rows = match hardening.hardened.kinds.is_empty() {
            true => Vec::new(),
            false => read_rows(&hardening.path).unwrap_or_default(),
        };
        Ok(HardenText {
            hardening,
            wall_s,
            confidence,
            rows,
            first_failure: first_failure(&hardening.path),
            original_fences: original_fences_note(&hardening.meta)?,
        })
    }

    fn fences(&self, f: &mut Formatter) -> fmt::Result {
        let (meta, hardened, report) = (
            &self.hardening.meta,
            &self.hardening.hardened,
            &self.hardening.report,
        );
        let count = report.placed.len() + report.unplaced.len();
        if count == 0 {
            writeln!(f, "\nfinal fences: none")?;
        } else if hardened.kinds.is_empty() {
            writeln!(
                f,
                "\nfinal fences: {count} ({}, in CUDA `{}`)",
                meta.target.fence_kind, report.statement
            )?;
        } else {
            writeln!(
                f,
                "\nfinal fences: {count}, each of the weakest kind that passed"
            )?;
        }
        let show_kind = !(hardened.kinds.is_empty() && hardened.required.is_none());
        let cwd = std::env::current_dir().unwrap_or_default();
        for fence in &report.placed {
            // Relative to the working folder when the file lies in it, else absolute.
            let path = shown_path(&report.root.join(&fence.path).to_string_lossy(), &cwd);
            let kind = match show_kind {
                true => format!("{}  ", fence.kind),
                false => String::new(),
            };
            writeln!(
                f,
                "  #{:<3} {}:{}  [{}]  {kind}{}",
                fence.site.id,
                path,
                fence.line,
                source_name(&fence.site.function),
                fence.text
            )?;
        }
        write_required(f, hardened)?;
        for header in &report.headers {
            writeln!(f, "  the fences need `#include {header}`: the patch adds it near the top of each file it fences that lacks it")?;
        }
        for fence in &report.placed {
            for note in fence.note.iter().chain(&fence.placement) {
                writeln!(f, "  #{}: {note}", fence.site.id)?;
            }
        }
        let inlined: Vec<String> = (report.placed.iter())
            .filter(|fence| fence.inside_helpers())
            .map(|fence| format!("#{}", fence.site.id))
            .collect();
        if meta.target.granularity == Granularity::SourceLine && !inlined.is_empty() {
            writeln!(
                f,
                "  hint: {} stand for code inlined from helpers; `--granularity inner-line` makes \
                 each line of a helper a site of its own, which can need fewer fences there",
                inlined.join(" ")
            )?;
        }
        for site in &report.unplaced {
            writeln!(
                f,
                "  #{:<3} [{}] no line in the app's source (left out of the patch): {}",
                site.id,
                source_name(&site.function),
                site.ptx.join("; ")
            )?;
        }
        Ok(())
    }

    /// Per kept fence, the kind kept and why each weaker kind tried was not (with the command
    /// that replays the run that refuted it).
    fn kind_choices(&self, f: &mut Formatter) -> fmt::Result {
        let (meta, hardened, path) = (
            &self.hardening.meta,
            &self.hardening.hardened,
            &self.hardening.path,
        );
        if hardened.kinds.is_empty() {
            return Ok(());
        }
        writeln!(
            f,
            "\nfence kinds (from {}, weaker kinds tried in the order {}):",
            meta.target.fence_kind,
            FenceKind::WEAKENING.map(|k| k.to_string()).join(", ")
        )?;
        write_scope(f, hardened)?;
        for choice in &hardened.kinds {
            writeln!(f, "  #{:<3} keeps {}", choice.site, choice.kind)?;
            for kind in &choice.refused_for_scope {
                writeln!(f, "        {kind} not tried: the site communicates with another CTA, where PTX gives a .cta fence no effect")?;
            }
            for (kind, query) in &choice.rejected {
                match first_failure_of(&self.rows, *query) {
                    Some(r) => writeln!(
                        f,
                        "        {kind} failed (query #{query} run {}: {}); replay: {}",
                        r.run,
                        r.outcome,
                        replay_command(path, r)
                    ),
                    None => writeln!(f, "        {kind} failed (query #{query})"),
                }?;
            }
            if kept_for_sc_order(choice.kind, &choice.rejected) {
                writeln!(
                    f,
                    "        what fence.sc adds to fence.acq_rel is one order of all \
                     fence.sc, which orders the thread's write before its later read of \
                     another location, as other threads see them (store buffering: a flag \
                     handshake, Dekker's or Peterson's lock); where the code has no such \
                     handshake, the failure may come from a fence missing elsewhere that \
                     fence.sc only made rarer: replay the failing run"
                )?;
            }
        }
        Ok(())
    }

    fn patch(&self, f: &mut Formatter) -> fmt::Result {
        let (report, patch_path) = (&self.hardening.report, &self.hardening.patch_path);
        let left_out = report.left_out().join(" ");
        if report.patch.is_empty() {
            return match left_out.is_empty() {
                true => writeln!(f, "\nno patch: no fence to insert in the source"),
                false => writeln!(
                    f,
                    "\nno patch: no kept fence could be written in the source ({left_out}: see \
                     above); add them by hand"
                ),
            };
        }
        writeln!(
            f,
            "\npatch (written to {}; apply it in {} with `git apply` or `patch -p1`):",
            patch_path.display(),
            crate::apps::patch_destination(&report.root)
        )?;
        if !left_out.is_empty() {
            writeln!(
                f,
                "  it leaves out {left_out} (see above): add them by hand, or the patched app is \
                 not the program harden checked"
            )?;
        }
        write!(f, "{}", report.patch)
    }

    fn summary(&self, f: &mut Formatter) -> fmt::Result {
        let (meta, hardened, path) = (
            &self.hardening.meta,
            &self.hardening.hardened,
            &self.hardening.path,
        );
        let (i, t) = (&hardened.insertion, &hardened.totals);
        writeln!(f, "\nsummary")?;
        writeln!(
            f,
            "  fences: {} initial -> {} final {}",
            meta.sites.len(),
            i.fences.len(),
            braces(&i.fences, &BTreeMap::new())
        )?;
        writeln!(
            f,
            "  rounds {}, final I {}, queries {}",
            i.rounds, i.final_iterations, i.queries
        )?;
        if hardened.kind_queries > 0 {
            writeln!(
                f,
                "  kinds: {} more queries, trying each fence's weaker kinds",
                hardened.kind_queries
            )?;
        }
        writeln!(
            f,
            "  runs {} ({} from the journal), failures seen {}",
            t.runs,
            hardened.replayed,
            t.errors()
        )?;
        writeln!(
            f,
            "  wall time {:.1} s (runs {:.1} s)",
            self.wall_s,
            t.elapsed_ms / 1e3
        )?;
        let stable = if i.stable { "yes" } else { "no" };
        writeln!(f, "  stable: {stable} (stability check {})", meta.stable)?;
        if let Some(confidence) = self.confidence {
            writeln!(f, "  confidence: {confidence}")?;
        }
        if let Some(checked) = patch_check_text(&self.hardening.patch_check, meta.env) {
            writeln!(f, "  patch check: {checked}")?;
        }
        // The provenance line says when the results are the simulator's.
        writeln!(f, "  {}", meta.provenance)?;
        if let Some(source) = communication_source(meta) {
            writeln!(f, "  {source}")?;
        }
        writeln!(f, "  journal: {}", path.display())?;
        if let Some(row) = &self.first_failure {
            writeln!(
                f,
                "  first failure: query #{} run {}; replay it with: {}",
                row.query,
                row.run,
                replay_command(path, row)
            )?;
        }
        Ok(())
    }
}

impl Display for HardenText<'_> {
    /// The fences, the kinds chosen, the original idiom's fences, the patch and the summary.
    fn fmt(&self, f: &mut Formatter) -> fmt::Result {
        self.fences(f)?;
        self.kind_choices(f)?;
        if let Some(note) = &self.original_fences {
            writeln!(f, "\n{note}")?;
        }
        self.patch(f)?;
        self.summary(f)
    }
}

/// What the summary says of the patch's check (`None` when there was nothing to check).
pub fn patch_check_text(check: &PatchCheck, env: Environment) -> Option<String> {
    Some(match check {
        PatchCheck::NoPatch | PatchCheck::NotStable => return None,
        PatchCheck::NotAsked => "not run (--patch-runs 0)".to_string(),
        PatchCheck::NotPossible { why } => format!("not run: {why}"),
        PatchCheck::DoesNotBuild { error } => {
            format!("FAILED: the patched source does not build: {error}")
        }
        PatchCheck::Ran(runs) => ran_text(runs, env),
    })
}

fn ran_text(runs: &PatchRuns, env: Environment) -> String {
    let races = match &runs.races {
        None => String::new(),
        Some(races) if races.is_empty() => "; races: none recorded".to_string(),
        Some(races) => format!(
            "; races recorded (lines of the patched source): {}",
            races.join(", ")
        ),
    };
    let journaled = match runs.journaled {
        0 => String::new(),
        n => format!(" (the first {n} from its journal, made before the resume)"),
    };
    match &runs.failure {
        None => format!(
            "the app built from the patch passed {} of {} runs under {env}{journaled}{races}",
            runs.made, runs.asked
        ),
        Some(f) => format!(
            "FAILED: the app built from the patch did not pass run {} of {} under {env} ({}: \
             {}; seed {}){journaled}{races}",
            f.run, runs.asked, f.outcome, f.reason, f.seed
        ),
    }
}

/// Why the race guide counted only the runs that passed, in the report's words.
fn stand_ins_failed_text(off: &StandInsFailed) -> String {
    format!(
        "race guide: with release/acquire fences in place of fences {}, which passed, {} of \
         {} recorded runs failed (the app needs fence.sc order, as a flag handshake does), so \
         from then on only the recorded runs that passed guided the search",
        braces(&off.fences, &BTreeMap::new()),
        off.failed,
        off.runs
    )
}

/// Why the fences the PTX model requires were asked of only the runs that passed.
fn required_stand_ins_failed_text(off: &StandInsFailed) -> String {
    format!(
        "required fences: with release/acquire fences in place of the kept fences {}, {} of \
         {} recorded runs failed (the app needs fence.sc order there), so only the runs that \
         passed were asked which fences the PTX model requires (a failed run's pairs are those of \
         the algorithm the weaker fences broke)",
        braces(&off.fences, &BTreeMap::new()),
        off.failed,
        off.runs
    )
}

/// Whether a fence kept as `fence.sc.gpu` had its release/acquire kind of the same scope
/// refuted by a run: what it needs is the order of sequentially consistent fences.
fn kept_for_sc_order(kept: FenceKind, rejected: &[(FenceKind, usize)]) -> bool {
    kept == FenceKind::ScGpu
        && rejected
            .iter()
            .any(|(kind, _)| *kind == FenceKind::AcqRelGpu)
}

/// The fences the PTX model requires beside the kept ones, and whether races were recorded.
fn write_required(f: &mut Formatter, hardened: &Hardened) -> fmt::Result {
    match &hardened.required {
        None if hardened.insertion.stable => writeln!(
            f,
            "  (no partner fences checked: the backend records no races; release/acquire pairs \
             rest on the runs alone)"
        ),
        None => Ok(()),
        Some(required) if required.is_empty() => writeln!(
            f,
            "  no partner fence missing: with the kept fences, no recorded pair lacks a release \
             or an acquire (races recorded, simulator)"
        ),
        Some(required) => {
            for r in required {
                let kept = hardened.insertion.fences.contains(&r.site);
                let what = if kept { "made" } else { "added" };
                writeln!(
                    f,
                    "  #{:<3} {what} {} as the {} side of {}: {REQUIRED}",
                    r.site, r.kind, r.role, r.orders
                )?;
            }
            Ok(())
        }
    }?;
    for kept in &hardened.insertion.race_kept {
        writeln!(f, "  fence #{} {}", kept.site, race_kept_text(&kept.pair))?;
    }
    if let Some(off) = &hardened.stand_ins_failed {
        writeln!(f, "  {}", stand_ins_failed_text(off))?;
    }
    if let Some(off) = &hardened.required_stand_ins_failed {
        writeln!(f, "  {}", required_stand_ins_failed_text(off))?;
    }
    for race in hardened.unorderable.iter().flatten() {
        writeln!(
            f,
            "  no fence can order {} (left as it is): {}",
            race.pair, race.advice
        )?;
    }
    Ok(())
}

/// Which sites met another CTA, so that no CTA-scoped fence was tried there.
fn write_scope(f: &mut Formatter, hardened: &Hardened) -> fmt::Result {
    match &hardened.cross_cta {
        Some(c) if c.sites.is_empty() => writeln!(
            f,
            "  scope from communication: no site met another CTA in {} runs recording races (simulator)",
            c.runs
        ),
        Some(c) => writeln!(
            f,
            "  scope from communication: sites {} met another CTA in {} runs recording races (simulator): no CTA-scoped fence there",
            c.sites.iter().map(|s| format!("#{s}")).collect::<Vec<_>>().join(", "),
            c.runs
        ),
        None => writeln!(
            f,
            "  scope from communication: the backend records no races, so scopes rest on the runs alone"
        ),
    }
}
