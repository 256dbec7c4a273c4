//! Running Algorithm 1 for real: a [`FenceChecker`] that answers each query by running the
//! application through an [`Executor`], journaling every run, so that a hardening killed at any
//! moment resumes where it stopped.
//!
//! The algorithm is deterministic, so resuming is replaying: the search starts again from the
//! beginning, and each query first takes the runs the journal already holds for its index
//! (checking that they are runs of the same question), then runs only what is missing. A query
//! answers `false` at its first run that does not pass (`CheckApplication` stops at the first
//! error), and `true` once `I` runs passed, or, for the stability check, once the hardening's
//! `stable` stop is reached.

use super::algorithm::{
    empirical_fence_insertion_from, fences_can_help, minimise_kinds, Context, FenceChecker,
    Insertion, KindChoice, Phase, Query,
};
use super::communication::{
    as_release_acquire, cross_cta_sites, required_partners, Completion, CrossCta, OrderablePairs,
    Recorder, RequiredFence, StandInsFailed, UnorderableRace, COMMUNICATION_RUNS, GUIDE_STREAM,
};
use super::recording::RaceRecording;
use crate::backend::sim::RaceLog;
use crate::check::driver::{CalibratedStress, CheckError, Stop, Tally};
use crate::check::executor::Executor;
use crate::check::journal::{Journal, JournalError};
use crate::check::outcome::{Outcome, RunRecord};
use crate::check::races::{run_races, RunRace};
pub use crate::check::spec::{changed_sites, SiteSummary};
use crate::check::spec::{run_seed, Fences, RunRequest, Target};
use crate::env::Environment;
use crate::ptx::passes::fences::FenceKind;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// One run of one query, as the hardening journal records it (flat, for CSV: the journal's header
/// is this struct's own field names, so the run's columns cannot be a nested [`RunRecord`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardenRow {
    /// The query's index in the search.
    pub query: usize,
    pub phase: Phase,
    pub round: u32,
    /// `I` of the query; empty for the stability check.
    pub iterations: Option<u64>,
    /// The fence set, as [`Fences::label`] writes it (`0 2 5`, or `none`).
    pub fences: String,
    /// The run's number within its query, from 0.
    pub run: u64,
    pub seed: u64,
    pub env: Environment,
    pub stress_blocks: String,
    pub stress_iterations: u32,
    pub outcome: Outcome,
    pub reason: String,
    pub kernel_us: f64,
    pub wall_ms: f64,
}

impl HardenRow {
    /// The row for `record`, a run of `query` whose fences are labelled `fences` (see
    /// [`query_fences`]).
    pub fn new(query: &Query, fences: String, record: RunRecord) -> HardenRow {
        HardenRow {
            query: query.index,
            phase: query.phase,
            round: query.round,
            iterations: query.iterations,
            fences,
            run: record.run,
            seed: record.seed,
            env: record.env,
            stress_blocks: record.stress_blocks,
            stress_iterations: record.stress_iterations,
            outcome: record.outcome,
            reason: record.reason,
            kernel_us: record.kernel_us,
            wall_ms: record.wall_ms,
        }
    }

    /// The run this row records.
    pub fn record(&self) -> RunRecord {
        RunRecord {
            run: self.run,
            seed: self.seed,
            env: self.env,
            stress_blocks: self.stress_blocks.clone(),
            stress_iterations: self.stress_iterations,
            outcome: self.outcome,
            reason: self.reason.clone(),
            kernel_us: self.kernel_us,
            wall_ms: self.wall_ms,
            races: None,
        }
    }

    /// Whether this row was recorded for the same question as `query`, whose fences are
    /// labelled `fences`.
    fn asks(&self, query: &Query, fences: &str) -> bool {
        self.phase == query.phase
            && self.round == query.round
            && self.iterations == query.iterations
            && self.fences == fences
    }
}

/// The fences a query runs with: its sites with the hardening's kind, or, when some have
/// another kind, every site with its own.
pub fn query_fences(query: &Query, base: FenceKind) -> Fences {
    if query.kinds.is_empty() {
        return Fences::Sites(query.fences.clone());
    }
    let kind_of = |id: &usize| query.kinds.get(id).copied().unwrap_or(base);
    Fences::Kinded(query.fences.iter().map(|id| (*id, kind_of(id))).collect())
}

/// Everything a hardening is, stored beside its journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardenMeta {
    pub tool_version: String,
    /// When the hardening started (UTC, RFC 3339).
    pub started: String,
    pub target: Target,
    pub env: Environment,
    /// Query `q`'s run `r` has seed `run_seed(run_seed(seed, s), r)`, where `s` is `q` among
    /// the search's queries (see [`HardenMeta::seed_index`]).
    pub seed: u64,
    /// `I` of the first round.
    pub initial_iterations: u64,
    pub max_rounds: u32,
    /// How long the stability check runs.
    pub stable: Stop,
    /// Stress iterations of every run, calibrated once with every fence inserted.
    #[serde(flatten)]
    pub stress: CalibratedStress,
    /// The candidate sites: the search starts with a fence at each.
    pub sites: Vec<SiteSummary>,
    /// What ran the hardening (the simulator says it is one).
    pub provenance: String,
    /// Where the stress profile came from.
    pub profile_source: String,
    /// Whether kept fences are then weakened where a weaker kind suffices (absent, so false, in
    /// journals from before this step existed).
    #[serde(default)]
    pub minimise_kinds: bool,
    /// Whether the search is preceded by query 0, the app with a fence at every site
    /// ([`fences_can_help`]); absent, so false, in journals from before that query existed.
    #[serde(default)]
    pub all_fences_first: bool,
    /// The app's sources and PTX, hashed (absent in journals from before they were recorded):
    /// a resume or replay compares them (see [`crate::job::settings`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_hash: Option<crate::apps::hash::AppHash>,
    /// Whether races recorded in runs guide the search (the sites in races asked about first,
    /// a fence whose removal leaves a race that fences can order kept without a query, kinds
    /// weakened together first); absent, so false, in journals from before.
    #[serde(default)]
    pub race_guided: bool,
    /// Where races are recorded when the backend records none (a GPU): the simulator running
    /// the same app's PTX; absent when the backend records its own, and in journals from
    /// before, which record none on a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub race_recording: Option<RaceRecording>,
}

impl HardenMeta {
    /// The ids of every candidate site.
    pub fn site_ids(&self) -> Vec<usize> {
        self.sites.iter().map(|s| s.id).collect()
    }

    /// The index a query's run seeds derive from: its index among the search's own queries, so
    /// that the all-fences query before them changes none of their runs; that query has a
    /// stream of its own.
    pub fn seed_index(&self, query: &Query) -> u64 {
        match (self.all_fences_first, query.phase) {
            (true, Phase::All) => ALL_FENCES_SEED_INDEX,
            (true, _) => query.index as u64 - 1,
            (false, _) => query.index as u64,
        }
    }

    /// When `query` is answered `true`.
    pub fn stop(&self, query: &Query) -> Stop {
        query.iterations.map_or(self.stable, Stop::Runs)
    }
}

/// The seed stream of the all-fences query (see [`HardenMeta::seed_index`]).
const ALL_FENCES_SEED_INDEX: u64 = u64::MAX;
/// The seed stream of [`run_with_every_fence`].
const RECHECK_SEED_INDEX: u64 = u64::MAX - 1;

/// A hardening that cannot go on: the same causes as a check's. A journal that belongs to
/// another search is a [`JournalError::Mismatch`] naming the query where the two part.
pub type HardenError = CheckError;

/// Where one query stands, reported after each of its runs and once when it is answered.
#[derive(Debug, Clone, Copy)]
pub struct QueryProgress<'a> {
    pub query: &'a Query,
    /// When the query is answered `true`.
    pub stop: Stop,
    /// Its runs so far, those read from the journal included.
    pub tally: &'a Tally,
    /// The answer, once there is one.
    pub answer: Option<bool>,
    /// Runs of this query read from the journal rather than run now.
    pub replayed: u64,
}

/// A [`FenceChecker`] that runs queries through an executor and journals every run.
pub struct JournaledChecker<'a> {
    executor: &'a mut dyn Executor,
    journal: &'a mut Journal<HardenRow>,
    meta: &'a HardenMeta,
    recorded: BTreeMap<usize, Vec<HardenRow>>,
    progress: &'a mut dyn FnMut(&QueryProgress),
    /// What records races when the executor does not (a GPU's hardening: the simulator).
    race_executor: Option<&'a mut dyn Executor>,
    /// The races that fences can order, recorded per fence set (with the guide's seeds), with
    /// how many of the recorded runs failed.
    orderable: HashMap<Vec<usize>, Option<Guide>>,
    /// Set when the race guide counts only the runs that pass: see [`StandInsFailed`].
    stand_ins_failed: Option<StandInsFailed>,
    /// Every run of every query asked so far, replayed ones included.
    pub totals: Tally,
    /// Runs taken from the journal.
    pub replayed: u64,
    /// The last query that failed, with its first failing run.
    last_failure: Option<FailedQuery>,
}

impl<'a> JournaledChecker<'a> {
    /// A checker that first reuses `done` (the journal's rows so far).
    pub fn new(
        executor: &'a mut dyn Executor,
        journal: &'a mut Journal<HardenRow>,
        meta: &'a HardenMeta,
        done: Vec<HardenRow>,
        progress: &'a mut dyn FnMut(&QueryProgress),
    ) -> JournaledChecker<'a> {
        let mut recorded: BTreeMap<usize, Vec<HardenRow>> = BTreeMap::new();
        for row in done {
            recorded.entry(row.query).or_default().push(row);
        }
        JournaledChecker {
            executor,
            journal,
            meta,
            recorded,
            progress,
            race_executor: None,
            orderable: HashMap::new(),
            stand_ins_failed: None,
            totals: Tally::default(),
            replayed: 0,
            last_failure: None,
        }
    }

    /// Records races with `race_executor` (the simulator running the same PTX) instead of the
    /// executor, which records none.
    pub fn recording_races_with(mut self, race_executor: Option<&'a mut dyn Executor>) -> Self {
        self.race_executor = race_executor;
        self
    }

    /// What records the races: the race executor if there is one (with the stress calibrated
    /// for it), else the executor.
    fn recorder(&mut self) -> Recorder<'_> {
        let recording = self.meta.race_recording.as_ref();
        let (executor, stress_iterations): (&mut dyn Executor, u32) =
            match (self.race_executor.as_deref_mut(), recording) {
                (Some(e), Some(r)) => (e, r.stress_iterations),
                (Some(e), None) => (e, self.meta.stress.stress_iterations),
                (None, _) => (&mut *self.executor, self.meta.stress.stress_iterations),
            };
        Recorder {
            executor,
            env: self.meta.env,
            seed: self.meta.seed,
            stress_iterations,
        }
    }

    /// The races that fences can order left unordered with `fences` (the hardening's kind, run
    /// as release/acquire stand-ins), with how many of the recorded runs failed; `None` when
    /// races are not recorded or do not guide this hardening.
    fn orderable_with(&mut self, fences: &[usize]) -> Result<Option<Guide>, HardenError> {
        if !self.meta.race_guided {
            return Ok(None);
        }
        if let Some(known) = self.orderable.get(fences) {
            return Ok(known.clone());
        }
        let base = self.meta.target.fence_kind;
        let kinded = as_release_acquire(fences.iter().map(|&site| (site, base)));
        let runs = self
            .recorder()
            .record_with_outcomes(&kinded, GUIDE_STREAM, 0)?;
        let sites = &self.meta.sites;
        let guide = runs.map(|runs| {
            let passed = |(outcome, _): &&(Outcome, RaceLog)| !outcome.is_error();
            Guide {
                all: OrderablePairs::of(runs.iter().map(|(_, log)| log), sites),
                passing: OrderablePairs::of(runs.iter().filter(passed).map(|(_, log)| log), sites),
                failed: runs.iter().filter(|run| !passed(run)).count() as u64,
            }
        });
        self.orderable.insert(fences.to_vec(), guide.clone());
        Ok(guide)
    }

    /// The journal's runs of `query`, checked to be runs 0, 1, ... of the same question.
    fn take_recorded(&mut self, query: &Query) -> Result<Vec<RunRecord>, HardenError> {
        let rows = self.recorded.remove(&query.index).unwrap_or_default();
        let label = self.fences(query).label();
        for (expected, row) in rows.iter().enumerate() {
            if !row.asks(query, &label) {
                let message = format!(
                    "the journal has {}, the search asks {}",
                    describe(row.phase, row.round, row.iterations, &row.fences),
                    describe(query.phase, query.round, query.iterations, &label)
                );
                return Err(mismatch(self.journal.path(), query.index, message));
            }
            if row.run != expected as u64 {
                let message = format!("run {} recorded where run {expected} belongs", row.run);
                return Err(mismatch(self.journal.path(), query.index, message));
            }
        }
        Ok(rows.iter().map(HardenRow::record).collect())
    }

    /// The request for run `run` of `query`: its seed depends only on the query and the run.
    fn request(&self, query: &Query, run: u64) -> RunRequest {
        RunRequest {
            run,
            seed: run_seed(run_seed(self.meta.seed, self.meta.seed_index(query)), run),
            env: self.meta.env,
            fences: self.fences(query),
            stress_iterations: self.meta.stress.stress_iterations,
            races: false,
        }
    }

    /// Runs `first..` of `query`, as many at once as the executor runs side by side (never past
    /// a run-count stop). The records come back in run order; only those the caller takes are
    /// journaled, so what is journaled does not depend on how many ran at once.
    fn run_batch(
        &mut self,
        query: &Query,
        first: u64,
        stop: &Stop,
    ) -> Result<Vec<RunRecord>, HardenError> {
        let mut count = self.executor.parallelism().max(1) as u64;
        if let Stop::Runs(n) = stop {
            count = count.min(n.saturating_sub(first)).max(1);
        }
        let requests: Vec<RunRequest> = (first..first + count)
            .map(|run| self.request(query, run))
            .collect();
        let records = self.executor.execute_many(&requests);
        Ok(records.into_iter().collect::<Result<Vec<_>, _>>()?)
    }

    /// Journals `record`, a run of `query`.
    fn journal_run(&mut self, query: &Query, record: &RunRecord) -> Result<(), HardenError> {
        let label = self.fences(query).label();
        self.journal
            .append(&HardenRow::new(query, label, record.clone()))?;
        Ok(())
    }

    /// The fences `query` runs with.
    fn fences(&self, query: &Query) -> Fences {
        query_fences(query, self.meta.target.fence_kind)
    }

    /// Rows left in the journal that no query of the search asked for.
    pub fn unused_rows(&self) -> usize {
        self.recorded.values().map(Vec::len).sum()
    }

    fn report(&mut self, query: &Query, tally: &Tally, answer: Option<bool>, replayed: u64) {
        let stop = self.meta.stop(query);
        (self.progress)(&QueryProgress {
            query,
            stop,
            tally,
            answer,
            replayed,
        });
    }
}

/// A query in words, for mismatch messages.
fn describe(phase: Phase, round: u32, iterations: Option<u64>, fences: &str) -> String {
    let runs = iterations.map_or("the stable stop".to_string(), |i| format!("I = {i}"));
    format!("{phase} round {round} with fences {{{fences}}} and {runs}")
}

fn mismatch(path: &Path, query: usize, message: String) -> HardenError {
    JournalError::Mismatch {
        path: path.to_path_buf(),
        message: format!("at query {query}, {message}; the journal belongs to another hardening"),
    }
    .into()
}

/// The answer a query's runs so far give: `false` after an error, `true` at the stop.
fn answer(tally: &Tally, stop: &Stop) -> Option<bool> {
    if tally.errors() > 0 {
        Some(false)
    } else if stop.reached(tally) {
        Some(true)
    } else {
        None
    }
}

impl FenceChecker for JournaledChecker<'_> {
    type Error = HardenError;

    fn check(&mut self, query: &Query) -> Result<bool, HardenError> {
        let stop = self.meta.stop(query);
        let done = self.take_recorded(query)?;
        let replayed = done.len() as u64;
        let mut tally = Tally::default();
        for (i, record) in done.iter().enumerate() {
            if answer(&tally, &stop).is_some() {
                let message = format!("{} runs recorded after its answer", done.len() - i);
                return Err(mismatch(self.journal.path(), query.index, message));
            }
            tally.add(record);
            self.totals.add(record);
        }
        self.replayed += replayed;
        loop {
            if let Some(answer) = answer(&tally, &stop) {
                self.report(query, &tally, Some(answer), replayed);
                if let (false, Some((run, outcome, reason))) = (answer, &tally.first_error) {
                    self.last_failure = Some(FailedQuery {
                        query: query.index,
                        phase: query.phase,
                        fences: query.fences.len(),
                        run: *run,
                        outcome: *outcome,
                        reason: reason.clone(),
                    });
                }
                return Ok(answer);
            }
            for record in self.run_batch(query, tally.runs, &stop)? {
                if answer(&tally, &stop).is_some() {
                    break;
                }
                self.journal_run(query, &record)?;
                tally.add(&record);
                self.totals.add(&record);
                self.report(query, &tally, None, replayed);
            }
        }
    }

    fn unordered_without(
        &mut self,
        current: &[usize],
        reduced: &[usize],
    ) -> Result<Option<String>, HardenError> {
        let Some(before) = self.orderable_with(current)? else {
            return Ok(None);
        };
        // `current` passed its query: if its stand-ins fail, they are not the app's fences.
        if before.failed > 0 && self.stand_ins_failed.is_none() {
            self.stand_ins_failed = Some(StandInsFailed {
                fences: current.to_vec(),
                failed: before.failed,
                runs: COMMUNICATION_RUNS,
            });
        }
        let Some(after) = self.orderable_with(reduced)? else {
            return Ok(None);
        };
        Ok(match self.stand_ins_failed.is_some() {
            true => after.passing.new_since(&before.passing),
            false => after.all.new_since(&before.all),
        })
    }

    fn race_sites(&mut self) -> Result<Vec<usize>, HardenError> {
        let races = self.orderable_with(&[])?;
        Ok(races
            .map(|r| r.all.sites.into_iter().collect())
            .unwrap_or_default())
    }
}

/// A query that failed: which, how many fences it ran with, and its first failing run.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedQuery {
    pub query: usize,
    pub phase: Phase,
    pub fences: usize,
    pub run: u64,
    pub outcome: Outcome,
    pub reason: String,
}

/// The outcome of [`harden`].
#[derive(Debug, Clone, PartialEq)]
pub struct Hardened {
    /// With a failure of query 0 in [`Hardened::every_fence_failed`], the all-fences query
    /// alone (no search ran).
    pub insertion: Insertion,
    /// The app failed with a fence at every site: in query 0 (so the search did not run) or in
    /// a stability check of the whole set (so the search stopped). No set of fences at these
    /// sites makes it pass.
    pub every_fence_failed: Option<FailedQuery>,
    /// The kind kept per fence, when kinds were minimised (a stable search with fences).
    pub kinds: Vec<KindChoice>,
    /// The queries that minimising kinds asked, after the search's.
    pub kind_queries: usize,
    /// When kinds were minimised: the sites that met another CTA in runs recording races
    /// (`None`: the backend records none, so scopes rest on runs alone).
    pub cross_cta: Option<CrossCta>,
    /// For a stable search: the fences the PTX model requires beside the kept ones (a release
    /// without its acquire, or the reverse), not seen failing; `None` when the backend records
    /// no races.
    pub required: Option<Vec<RequiredFence>>,
    /// For a stable search: the races no fence can order, left as they are, with advice;
    /// `None` when the backend records no races.
    pub unorderable: Option<Vec<UnorderableRace>>,
    /// Every run of the search, those read from the journal included.
    pub totals: Tally,
    /// Runs read from the journal rather than run now.
    pub replayed: u64,
    /// Set when the race guide counted only the runs that passed.
    pub stand_ins_failed: Option<StandInsFailed>,
    /// Set when the fences the PTX model requires were asked of only the recorded runs that
    /// passed.
    pub required_stand_ins_failed: Option<StandInsFailed>,
}

/// One fence set's guide: the races that fences can order, in all its recorded runs and in
/// those that passed, and how many failed.
#[derive(Debug, Clone)]
struct Guide {
    all: OrderablePairs,
    passing: OrderablePairs,
    failed: u64,
}

impl Hardened {
    /// Every final fence with its kind: the kept ones (with their minimised kinds) and the ones
    /// the PTX model requires.
    pub fn final_fences(&self, base: FenceKind) -> Vec<(usize, FenceKind)> {
        let mut fences: BTreeMap<usize, FenceKind> = self
            .insertion
            .fences
            .iter()
            .map(|&id| {
                let kind = self
                    .kinds
                    .iter()
                    .find(|c| c.site == id)
                    .map_or(base, |c| c.kind);
                (id, kind)
            })
            .collect();
        for r in self.required.iter().flatten() {
            fences.insert(r.site, r.kind);
        }
        fences.into_iter().collect()
    }
}

/// Runs (or, from `done`, resumes) the hardening `meta` describes, appending every new run to
/// `journal` and calling `progress` after each run and each answer.
pub fn harden(
    executor: &mut dyn Executor,
    journal: &mut Journal<HardenRow>,
    meta: &HardenMeta,
    done: Vec<HardenRow>,
    progress: &mut dyn FnMut(&QueryProgress),
) -> Result<Hardened, HardenError> {
    harden_recording_with(executor, None, journal, meta, done, progress)
}

/// [`harden`] whose races are recorded by `race_executor` when there is one (the simulator
/// running the same app's PTX, for a backend that records none: see [`RaceRecording`]).
pub fn harden_recording_with<'a>(
    executor: &'a mut dyn Executor,
    race_executor: Option<&'a mut dyn Executor>,
    journal: &'a mut Journal<HardenRow>,
    meta: &'a HardenMeta,
    done: Vec<HardenRow>,
    progress: &'a mut dyn FnMut(&QueryProgress),
) -> Result<Hardened, HardenError> {
    let mut checker = JournaledChecker::new(executor, journal, meta, done, progress)
        .recording_races_with(race_executor);
    let all = meta.site_ids();
    let first_index = usize::from(meta.all_fences_first);
    if meta.all_fences_first && !fences_can_help(&mut checker, &all, meta.initial_iterations)? {
        return Ok(Hardened {
            insertion: Insertion {
                fences: all,
                rounds: 0,
                final_iterations: meta.initial_iterations,
                queries: 1,
                stable: false,
                race_kept: Vec::new(),
            },
            every_fence_failed: checker.last_failure.take(),
            stand_ins_failed: None,
            required_stand_ins_failed: None,
            cross_cta: None,
            required: None,
            unorderable: None,
            kinds: Vec::new(),
            kind_queries: 0,
            totals: checker.totals,
            replayed: checker.replayed,
        });
    }
    let insertion = empirical_fence_insertion_from(
        &mut checker,
        &all,
        meta.initial_iterations,
        meta.max_rounds,
        first_index,
    )?;
    let mut context = Context {
        round: insertion.rounds,
        iterations: insertion.final_iterations,
        next_index: insertion.queries,
        race_kept: Vec::new(),
    };
    let (kinds, cross_cta) = if meta.minimise_kinds && insertion.stable {
        let base = meta.target.fence_kind;
        let cross_cta = cross_cta_sites(&mut checker.recorder(), &meta.sites)?;
        let floor = cross_cta
            .as_ref()
            .map(|c| c.sites.clone())
            .unwrap_or_default();
        let kinds = minimise_kinds(
            &mut checker,
            &insertion.fences,
            base,
            &floor,
            meta.race_guided,
            &mut context,
        )?;
        (kinds, cross_cta)
    } else {
        (Vec::new(), None)
    };
    let completion = if insertion.stable {
        let base = meta.target.fence_kind;
        let kept: BTreeMap<usize, FenceKind> = insertion
            .fences
            .iter()
            .map(|&id| {
                let kind = kinds.iter().find(|c| c.site == id).map_or(base, |c| c.kind);
                (id, kind)
            })
            .collect();
        required_partners(&mut checker.recorder(), &meta.sites, &kept)?
    } else {
        None
    };
    let (required, unorderable, required_stand_ins_failed) = match completion {
        Some(Completion {
            required,
            unorderable,
            stand_ins_failed,
        }) => (Some(required), Some(unorderable), stand_ins_failed),
        None => (None, None, None),
    };
    let unused = checker.unused_rows();
    if unused > 0 {
        let message = format!("{unused} rows belong to queries the search never asked");
        return Err(mismatch(
            checker.journal.path(),
            context.next_index,
            message,
        ));
    }
    Ok(Hardened {
        kind_queries: context.next_index - insertion.queries,
        every_fence_failed: checker
            .last_failure
            .take()
            .filter(|_| !insertion.stable && insertion.fences == all),
        insertion,
        kinds,
        cross_cta,
        required,
        unorderable,
        totals: checker.totals,
        replayed: checker.replayed,
        stand_ins_failed: checker.stand_ins_failed,
        required_stand_ins_failed,
    })
}

/// Runs the app `runs` times with a fence at every site through `executor` (another backend
/// setting, e.g. the simulator under sequential consistency), stopping at the first run that
/// does not pass. The runs are not journaled: they diagnose, they answer no query. Their seeds
/// come from the hardening's seed, on a stream of their own.
pub fn run_with_every_fence(
    executor: &mut dyn Executor,
    meta: &HardenMeta,
    runs: u64,
) -> Result<Tally, HardenError> {
    let mut tally = Tally::default();
    for run in 0..runs {
        let record = executor.execute(&every_fence_request(meta, run, false))?;
        tally.add(&record);
        if tally.errors() > 0 {
            break;
        }
    }
    Ok(tally)
}

/// Run `run` of the hardening's configuration with every site fenced, outside its search (its
/// seeds are the rechecks'), recording races when `races`.
fn every_fence_request(meta: &HardenMeta, run: u64, races: bool) -> RunRequest {
    RunRequest {
        run,
        seed: run_seed(run_seed(meta.seed, RECHECK_SEED_INDEX), run),
        env: meta.env,
        fences: Fences::Sites(meta.site_ids()),
        stress_iterations: meta.stress.stress_iterations,
        races,
    }
}

/// The races that `runs` runs with every site fenced still record (simulator, PTX model): what
/// fences at the sites leave unordered, a too narrow scope say. Each pair once, by its two
/// places and class, with `check --races`' advice, most frequent first.
pub fn races_with_every_fence(
    executor: &mut dyn Executor,
    meta: &HardenMeta,
    runs: u64,
) -> Result<Vec<RunRace>, HardenError> {
    let mut found: BTreeMap<(String, String, &'static str), RunRace> = BTreeMap::new();
    for run in 0..runs {
        let log = executor
            .execute(&every_fence_request(meta, run, true))?
            .races
            .unwrap_or_default();
        for race in run_races(run, &log).races {
            let key = (
                race.first.place(),
                race.second.place(),
                race.class.describe(),
            );
            let seen = found.entry(key).or_insert_with(|| RunRace {
                occurrences: 0,
                ..race.clone()
            });
            seen.occurrences += race.occurrences;
        }
    }
    let mut races: Vec<RunRace> = found.into_values().collect();
    races.sort_by_key(|r| std::cmp::Reverse(r.occurrences));
    Ok(races)
}

#[cfg(test)]
mod tests;
