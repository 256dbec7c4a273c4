//! A check as a job: started (target resolved, stress calibrated, journal created) or resumed
//! from its journal, run to its stop, and summed up as the `--json` document, with the running
//! error rate drawn beside the journal. `check` runs one; each cell of a campaign is one.

use super::naming::{choose_journal, Output};
use super::settings::{app_hash, refuse_changed_resume, target_settings, GivenOptions, Settings};
use super::sidecar::{
    create_journal, now, refuse_another_journal, refuse_changed_sites, resume_journal, unfinished,
    JobKind,
};
use super::target::{calibrate, resolve, Executors, TargetOptions};
use super::{JobError, Say};
use crate::check::journal::{read_rows, refuse_misnumbered, set_meta_entry};
use crate::check::local::{target_blind_loops, target_sites};
use crate::check::races::{summarise, RaceMode, RaceReport};
use crate::check::spec::SiteSummary;
use crate::check::{run_check, BackendKind, CheckMeta, Fences, Journal, RunRecord, Stop, Tally};
use crate::env::Environment;
use crate::plot::{running_rate, running_rate_chart, MAX_POINTS};
use crate::ptx::loops::BlindLoop;
use crate::ptx::passes::fences::{select_sites, FenceKind};
use crate::stats::{Rate, ZeroErrorBound};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A check's stop when none is given.
pub const DEFAULT_STOP: Stop = Stop::Runs(crate::check::driver::DEFAULT_RUNS);

/// A stop from a run count and a duration, either of which may be missing: the duration wins
/// when both are given (the command line lets only one through).
pub fn stop_of(runs: Option<u64>, duration: Option<Duration>) -> Option<Stop> {
    match (runs, duration) {
        (_, Some(d)) => Some(Stop::Seconds(d.as_secs_f64())),
        (Some(n), None) => Some(Stop::Runs(n)),
        (None, None) => None,
    }
}

/// The journal `check` writes: the one given, a new default one, or with `--resume` the newest
/// default one that has not reached `stop` (or the stop it records).
pub fn check_journal(
    (app, env): (&str, Environment),
    output: Output,
    stop: Option<Stop>,
    target: &TargetOptions,
    say: Say,
) -> Result<PathBuf, JobError> {
    let unfinished = |journal: &Path| unfinished(JobKind::Check, journal, stop);
    let parts = target.backend.name_parts();
    let path = choose_journal("check", (app, env), output, parts, &unfinished, say)?;
    super::interrupt::resumes("--journal", &path, &path);
    Ok(path)
}

/// What a check with 0 errors supports, also written to the journal's sidecar as `confidence`
/// (removed there when the runs had an error, e.g. after a resume). The journal holds the
/// results, so a sidecar that cannot be updated is a warning.
pub fn record_confidence(journal: &Path, tally: &Tally, say: Say) -> Option<ZeroErrorBound> {
    let confidence = ZeroErrorBound::of(tally.runs, tally.errors());
    if let Err(e) = set_meta_entry(journal, "confidence", &confidence) {
        say(&format!(
            "warning: the sidecar of {} has no confidence entry: {e}",
            journal.display()
        ));
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
    /// The stop; `None` keeps the one recorded on resume, and is [`DEFAULT_STOP`] for a new
    /// check.
    pub stop: Option<Stop>,
    pub journal: &'a Path,
    pub resume: bool,
    pub target: &'a TargetOptions,
    /// `check --races`: record races in every run (ignored on resume: the journal says).
    pub races: Option<RaceMode>,
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
    ) -> Result<Tally, JobError> {
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
pub fn open_check(
    spec: &CheckJob,
    executors: &mut Executors,
    say: Say,
) -> Result<OpenCheck, JobError> {
    if spec.resume {
        return resume(spec, say);
    }
    let resolved = resolve(spec.app, spec.target, say)?;
    let (fences, sites) = parse_fences(spec.fences, &resolved.target)?;
    let calibrator = executors.get(&resolved.target)?;
    let seed = spec.target.backend.seed;
    let stress = calibrate(calibrator, spec.env, &fences, seed, say)?;
    let hash = app_hash(&resolved.target)?;
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
        races: spec.races,
        app_hash: Some(hash),
    };
    let journal =
        create_journal(spec.journal, JobKind::Check, &meta).map_err(super::bad_journal)?;
    Ok(OpenCheck {
        journal,
        meta,
        done: Vec::new(),
    })
}

/// Reopens a journal; the app and environment given must be the ones it records, and so must
/// every option given and the app's sources and PTX (see [`super::settings`]).
fn resume(spec: &CheckJob, say: Say) -> Result<OpenCheck, JobError> {
    let path = spec.journal;
    let (journal, mut meta, done): (_, CheckMeta, Vec<RunRecord>) = resume_journal(path)?;
    refuse_misnumbered(path, done.iter().map(|r| r.run)).map_err(super::bad_journal)?;
    refuse_another_journal(
        path,
        JobKind::Check,
        (&meta.target.app, meta.env),
        (spec.app, spec.env),
    )?;
    let now = refuse_changed_resume(
        path,
        done.len(),
        (
            &check_settings(&meta),
            &asked(spec, &meta, say)?,
            given(spec),
        ),
        (&meta.target, meta.app_hash.as_ref()),
        say,
    )?;
    meta.app_hash = Some(now);
    if !meta.sites.is_empty() {
        let now = target_sites(&meta.target).map_err(JobError::BadApp)?;
        refuse_changed_sites(path, "resume", &meta.sites, &now)?;
    }
    // A new stop given with --resume extends (or shortens) the check, and the sidecar says so
    // (a campaign's collect and the next resume read it there).
    if let Some(stop) = spec.stop.filter(|&s| s != meta.stop) {
        meta.stop = stop;
        set_meta_entry(path, "stop", &stop).map_err(super::bad_journal)?;
    }
    Ok(OpenCheck {
        journal,
        meta,
        done,
    })
}

/// The options a check journal records, as the command line spells them.
pub fn check_settings(meta: &CheckMeta) -> Settings {
    let mut settings = target_settings(&meta.target);
    settings.insert("--seed", meta.seed.to_string());
    settings.insert("--fences", meta.fences.label());
    let races = match meta.races {
        None => "off",
        Some(RaceMode::All) => "all",
        Some(RaceMode::Strict) => "strict",
    };
    settings.insert("--races", races.to_string());
    settings
}

fn given<'a>(spec: &CheckJob<'a>) -> &'a GivenOptions {
    &spec.target.given
}

/// The settings a resume is asked for: the target resolved anew only when a target option is
/// given (else the journal's, which then cannot differ).
fn asked(spec: &CheckJob, meta: &CheckMeta, say: Say) -> Result<Settings, JobError> {
    let journal_target = target_settings(&meta.target);
    let target = match journal_target.keys().any(|o| given(spec).named(o)) {
        true => resolve(spec.app, spec.target, say)?.target,
        false => meta.target.clone(),
    };
    let fences = match given(spec).named("--fences") {
        true => parse_fences(spec.fences, &target)?.0,
        false => meta.fences.clone(),
    };
    Ok(check_settings(&CheckMeta {
        target,
        seed: spec.target.backend.seed,
        fences,
        races: spec.races,
        ..meta.clone()
    }))
}

/// `as-is`, or a site selection checked against the app's sites, with those sites (which the
/// journal records, so that a resume can tell whether the ids still name them).
pub fn parse_fences(
    spec: &str,
    target: &crate::check::Target,
) -> Result<(Fences, Vec<SiteSummary>), JobError> {
    if spec.trim() == "as-is" {
        return Ok((Fences::AsIs, Vec::new()));
    }
    let sites = target_sites(target).map_err(JobError::BadApp)?;
    let fences = match spec.contains('@') {
        true => Fences::Kinded(select_kinded(&sites, spec).map_err(JobError::Refused)?),
        false => {
            let chosen = select_sites(&sites, spec).map_err(JobError::Refused)?;
            Fences::Sites(chosen.iter().map(|s| s.id).collect())
        }
    };
    Ok((fences, sites.iter().map(SiteSummary::from).collect()))
}

/// Sites each with its own kind, as harden's final fences and journal name them:
/// `0@fence.sc.gpu,2@fence.acq_rel.gpu` (commas or spaces between; a range `4-6@membar.cta`
/// gives each of its sites that kind).
fn select_kinded(
    sites: &[crate::ptx::passes::fences::FenceSite],
    spec: &str,
) -> Result<std::collections::BTreeMap<usize, FenceKind>, String> {
    let mut kinded = std::collections::BTreeMap::new();
    for part in spec
        .split([',', ' '])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (ids, kind) = part.split_once('@').ok_or_else(|| {
            format!("'{part}' names no fence kind (`id@kind`, as in `0@fence.sc.gpu`)")
        })?;
        let kind: FenceKind = kind.parse()?;
        for site in select_sites(sites, ids)? {
            kinded.insert(site.id, kind);
        }
    }
    Ok(kinded)
}

/// `check --json`: the check's results as one document.
#[derive(Debug, Serialize)]
pub struct CheckDocument<'a> {
    app: &'a str,
    env: Environment,
    /// `as-is`, `all`, `none`, or the site ids.
    fences: String,
    /// The backend that ran (`cuda` or `sim`; `auto` resolved); `provenance` says more.
    backend: BackendKind,
    provenance: &'a str,
    seed: u64,
    stop: Stop,
    runs: u64,
    /// The runs' wall time, seconds.
    elapsed_s: f64,
    outcomes: Outcomes,
    errors: u64,
    /// Errors out of runs, with the 95% Wilson interval (`low`, `high`).
    error_rate: Rate,
    /// Whether the error rate is above 5% (the paper's threshold).
    effective: bool,
    /// With 0 errors: what the runs support about the error rate; else `null`.
    confidence: Option<ZeroErrorBound>,
    first_error: Option<FirstError>,
    journal: &'a Path,
    chart: Option<PathBuf>,
    /// With `--races`: the races summed over the runs (simulator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub races: Option<Vec<RaceReport>>,
    /// Where runs timed out: loops that, once they go round, never leave ([`blind_loops_after`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blind_loops: Vec<BlindLoop>,
}

/// Runs per outcome.
#[derive(Debug, Serialize)]
struct Outcomes {
    pass: u64,
    fail: u64,
    timeout: u64,
    crash: u64,
}

impl Outcomes {
    fn of(tally: &Tally) -> Outcomes {
        use crate::check::Outcome::{Crash, Fail, Pass, Timeout};
        Outcomes {
            pass: tally.count(Pass),
            fail: tally.count(Fail),
            timeout: tally.count(Timeout),
            crash: tally.count(Crash),
        }
    }
}

/// The first run that did not pass, and the command that replays it.
#[derive(Debug, Serialize)]
struct FirstError {
    run: u64,
    outcome: crate::check::Outcome,
    reason: String,
    replay: String,
}

impl<'a> CheckDocument<'a> {
    pub fn new(
        meta: &'a CheckMeta,
        tally: &Tally,
        journal: &'a Path,
        chart: Option<PathBuf>,
    ) -> CheckDocument<'a> {
        let rate = tally.error_rate();
        CheckDocument {
            app: &meta.target.app,
            env: meta.env,
            fences: meta.fences.label(),
            backend: meta.target.backend,
            provenance: &meta.provenance,
            seed: meta.seed,
            stop: meta.stop,
            runs: tally.runs,
            elapsed_s: tally.elapsed_ms / 1e3,
            outcomes: Outcomes::of(tally),
            errors: tally.errors(),
            error_rate: rate,
            effective: rate.is_effective(),
            confidence: ZeroErrorBound::of(tally.runs, tally.errors()),
            first_error: tally
                .first_error
                .as_ref()
                .map(|(run, outcome, reason)| FirstError {
                    run: *run,
                    outcome: *outcome,
                    reason: reason.clone(),
                    replay: format!("gpuwmm replay {} {run}", journal.display()),
                }),
            journal,
            chart,
            races: None,
            blind_loops: Vec::new(),
        }
    }
}

/// With `--races`: the races of every run the journal has, summed from its races journal
/// (so a resumed check reports what one uninterrupted check would).
pub fn race_summary(meta: &CheckMeta, journal: &Path) -> std::io::Result<Option<Vec<RaceReport>>> {
    let Some(mode) = meta.races else {
        return Ok(None);
    };
    let rows: Vec<RunRecord> = crate::check::journal::read_rows(journal)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    summarise(journal, rows.iter().map(|r| r.run), mode).map(Some)
}

/// The app's blind loops when some runs timed out ([`crate::ptx::loops`]; none otherwise, or
/// when the app cannot be compiled here): where those runs may be stuck, for the report.
pub fn blind_loops_after(meta: &CheckMeta, tally: &Tally) -> Vec<BlindLoop> {
    if tally.count(crate::check::Outcome::Timeout) == 0 {
        return Vec::new();
    }
    target_blind_loops(&meta.target).unwrap_or_default()
}

/// Draws the running error rate of the whole journal next to it (`<journal>.svg`) and returns
/// its path. The journal holds the results, so a chart that cannot be made is a warning, not a
/// failed check.
pub fn write_chart(meta: &CheckMeta, journal: &Path, say: Say) -> Option<PathBuf> {
    let chart_path = journal.with_extension("svg");
    let drawn = read_rows(journal)
        .map_err(JobError::from)
        .and_then(|rows| {
            let errors: Vec<bool> = rows
                .iter()
                .map(|r: &RunRecord| r.outcome.is_error())
                .collect();
            let title = format!("{} under {}: running error rate", meta.target.app, meta.env);
            let points = running_rate(&errors, MAX_POINTS);
            Ok(running_rate_chart(&title, &meta.provenance, &points)?)
        })
        .and_then(|svg| Ok(std::fs::write(&chart_path, svg)?));
    match drawn {
        Ok(()) => Some(chart_path),
        Err(e) => {
            say(&format!(
                "warning: no chart at {}: {}",
                chart_path.display(),
                with_causes(&e)
            ));
            None
        }
    }
}

/// An error and its causes, `: `-separated.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
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
        assert_eq!(stop_of(Some(7), None), Some(Stop::Runs(7)));
        assert_eq!(
            stop_of(None, None).unwrap_or(DEFAULT_STOP),
            Stop::Runs(1000)
        );
    }
}
