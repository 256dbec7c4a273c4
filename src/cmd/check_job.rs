//! A check to start, or to resume from its journal: what `check` runs and what each cell of
//! `campaign` runs, with the stop, fence and confidence rules they share (`harden` and `cost`
//! read their stops here too). Here once, rather than lent by `check` to its siblings.

use super::journals::{now, refuse_another_journal, refuse_changed_sites};
use super::target::{calibrate, resolve, Executors};
use super::Failure;
use crate::cli::{StopArgs, TargetArgs};
use gpuwmm::check::journal::set_meta_entry;
use gpuwmm::check::local::target_sites;
use gpuwmm::check::spec::SiteSummary;
use gpuwmm::check::{run_check, CheckMeta, Fences, Journal, RunRecord, Stop, Tally};
use gpuwmm::env::Environment;
use gpuwmm::ptx::passes::fences::select_sites;
use gpuwmm::stats::ZeroErrorBound;
use std::path::Path;
use std::time::Duration;

/// What a check with 0 errors supports, also written to the journal's sidecar as `confidence`
/// (removed there when the runs had an error, e.g. after a resume). The journal holds the
/// results, so a sidecar that cannot be updated is a warning.
pub fn record_confidence(journal: &Path, tally: &Tally) -> Option<ZeroErrorBound> {
    let confidence = ZeroErrorBound::of(tally.runs, tally.errors());
    if let Err(e) = set_meta_entry(journal, "confidence", &confidence) {
        eprintln!(
            "warning: the sidecar of {} has no confidence entry: {e}",
            journal.display()
        );
    }
    confidence
}

/// One check to start, or to resume from its journal: what `check` runs, and each cell of
/// `campaign`.
pub struct CheckJob<'a> {
    pub app: &'a str,
    pub env: Environment,
    /// `as-is`, `all`, `none` or site ids (see [`parse_fences`]); ignored on resume.
    pub fences: &'a str,
    /// The stop; `None` keeps the one recorded on resume, and is 1000 runs for a new check.
    pub stop: Option<Stop>,
    pub journal: &'a Path,
    pub resume: bool,
    pub target: &'a TargetArgs,
}

/// A check whose journal is open: what it is and the runs recorded so far.
pub struct OpenCheck {
    pub journal: Journal<RunRecord>,
    pub meta: CheckMeta,
    pub done: Vec<RunRecord>,
}

impl OpenCheck {
    /// Whether the runs recorded already reach the stop.
    pub fn finished(&self) -> bool {
        self.meta.stop.reached(&Tally::of(&self.done))
    }

    /// Runs the check to its stop (a finished one needs no executor), calling `progress` after
    /// each run; returns the tally of all its runs, those before a resume included.
    pub fn run(
        &mut self,
        executors: &mut Executors,
        progress: &mut dyn FnMut(&Tally),
    ) -> Result<Tally, Failure> {
        if self.finished() {
            return Ok(Tally::of(&self.done));
        }
        let executor = executors.get(&self.meta.target)?;
        Ok(run_check(
            executor,
            &mut self.journal,
            &self.meta,
            &self.done,
            &mut |_, tally| progress(tally),
            &|| false,
        )?)
    }
}

/// Starts the check `spec` describes (resolving the target, calibrating stress, creating the
/// journal), or with `resume` reopens its journal.
pub fn open_check(spec: &CheckJob, executors: &mut Executors) -> Result<OpenCheck, Failure> {
    if spec.resume {
        return resume(spec);
    }
    let resolved = resolve(spec.app, spec.target)?;
    let (fences, sites) = parse_fences(spec.fences, &resolved.target)?;
    let calibrator = executors.get(&resolved.target)?;
    let seed = spec.target.backend.seed;
    let stress = calibrate(calibrator, spec.env, &fences, seed)?;
    let meta = CheckMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        target: resolved.target,
        env: spec.env,
        fences,
        sites,
        seed,
        stop: spec.stop.unwrap_or(DEFAULT_STOP),
        stress,
        provenance: calibrator.provenance(),
        profile_source: resolved.profile_source,
    };
    let journal = Journal::create(spec.journal, &meta).map_err(Failure::bad_input)?;
    Ok(OpenCheck {
        journal,
        meta,
        done: Vec::new(),
    })
}

/// Reopens a journal; the app and environment given must be the ones it records.
fn resume(spec: &CheckJob) -> Result<OpenCheck, Failure> {
    let path = spec.journal;
    let (journal, mut meta, done): (_, CheckMeta, _) =
        Journal::resume(path).map_err(Failure::bad_input)?;
    refuse_another_journal(
        path,
        "check",
        (&meta.target.app, meta.env),
        (spec.app, spec.env),
    )?;
    if !meta.sites.is_empty() {
        let now = target_sites(&meta.target).map_err(Failure::bad_input)?;
        refuse_changed_sites(path, "resume", &meta.sites, &now)?;
    }
    // A new stop given with --resume extends (or shortens) the check.
    if let Some(stop) = spec.stop {
        meta.stop = stop;
    }
    Ok(OpenCheck {
        journal,
        meta,
        done,
    })
}

/// A check's stop when none is given.
pub const DEFAULT_STOP: Stop = Stop::Runs(gpuwmm::check::driver::DEFAULT_RUNS);

/// The stop given on the command line (`--runs`, `--duration`), if any.
pub fn given_stop(args: &StopArgs) -> Option<Stop> {
    stop_of(args.runs, args.duration)
}

/// A stop from a run count and a duration, either of which may be missing: the duration wins
/// when both are given (clap lets only one through where they form a group).
pub fn stop_of(runs: Option<u64>, duration: Option<Duration>) -> Option<Stop> {
    match (runs, duration) {
        (_, Some(d)) => Some(Stop::Seconds(d.as_secs_f64())),
        (Some(n), None) => Some(Stop::Runs(n)),
        (None, None) => None,
    }
}

/// `as-is`, or a site selection checked against the app's sites, with those sites (which the
/// journal records, so that a resume can tell whether the ids still name them).
pub fn parse_fences(
    spec: &str,
    target: &gpuwmm::check::Target,
) -> Result<(Fences, Vec<SiteSummary>), Failure> {
    if spec.trim() == "as-is" {
        return Ok((Fences::AsIs, Vec::new()));
    }
    let sites = target_sites(target).map_err(Failure::bad_input)?;
    let chosen = select_sites(&sites, spec).map_err(|e| Failure::bad_input(anyhow::anyhow!(e)))?;
    let fences = Fences::Sites(chosen.iter().map(|s| s.id).collect());
    Ok((fences, sites.iter().map(SiteSummary::from).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_wins_over_a_run_count() {
        let minute = Duration::from_secs(60);
        assert_eq!(stop_of(Some(5), Some(minute)), Some(Stop::Seconds(60.0)));
        assert_eq!(stop_of(None, Some(minute)), Some(Stop::Seconds(60.0)));
        assert_eq!(stop_of(Some(5), None), Some(Stop::Runs(5)));
        assert_eq!(stop_of(None, None), None);
    }

    #[test]
    fn a_check_without_a_stop_runs_a_thousand_times() {
        let given = StopArgs {
            runs: Some(7),
            duration: None,
        };
        assert_eq!(given_stop(&given), Some(Stop::Runs(7)));
        let none = StopArgs {
            runs: None,
            duration: None,
        };
        assert_eq!(given_stop(&none), None);
        assert_eq!(DEFAULT_STOP, Stop::Runs(1000));
    }
}
