//! A hardening as a job: its defaults (the stability check, whether kinds are weakened, how
//! many workers), its journal started or resumed, the search run over it, the fences found as a
//! report and a patch beside the journal, and the result recorded in the sidecar and given as
//! the `--json` document.

use super::check_text::blind_loop_lines;
use super::naming::{choose_journal, Output};
use super::settings::{app_hash, refuse_changed_resume, stop_settings, target_settings, Settings};
use super::sidecar::{
    create_journal, now, refuse_another_journal, refuse_changed_sites, resume_journal, unfinished,
    JobKind,
};
use super::target::{calibrate, executor, find_and_compile_app, resolve, worker_executor};
use super::target::{BackendOptions, TargetOptions};
use super::{JobError, Say};
use crate::apps::builtin::BUILTIN_APP_NAMES;
use crate::apps::{Size, DEFAULT_ARCH};
use crate::backend::select::BackendChoice;
use crate::check::journal::{read_rows, set_meta_entry};
use crate::check::local::{target_app, target_blind_loops};
use crate::check::races::RunRace;
use crate::check::{BackendKind, Executor, Fences, Journal, Outcome, Pool, SimModel, Stop, Target};
use crate::env::Environment;
use crate::harden::algorithm::{Insertion, Phase};
use crate::harden::communication::{StandInsFailed, UnorderableRace};
use crate::harden::patch_journal::PatchJournal;
use crate::harden::recording::{RaceRecording, SiteMap, SiteMapped};
use crate::harden::report::{styled_fence_report, FenceReport, FenceStyle};
use crate::harden::run::{
    harden_recording_with, races_with_every_fence, run_with_every_fence, FailedQuery, HardenMeta,
    HardenRow, Hardened, QueryProgress, SiteSummary,
};
use crate::harden::verify::{check_patch, PatchCheck, PatchCheckPlan, PatchRuns};
use crate::ptx::passes::fences::{own_fences, FenceKind, Granularity, OwnFence};
use crate::stats::ZeroErrorBound;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The stability check on the simulator when none is given: runs are cheap there.
const SIM_STABLE_RUNS: u64 = 10_000;
/// The stability check on a GPU when none is given: the paper's hour.
const GPU_STABLE_SECONDS: f64 = 3600.0;

/// Whether a hardening weakens the fences it keeps (`--minimise-kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinimiseKind {
    /// Where the backend tells fence kinds apart: a GPU, or the simulator's `ptx` model.
    Auto,
    On,
    Off,
}

impl MinimiseKind {
    pub const ALL: [MinimiseKind; 3] = [MinimiseKind::Auto, MinimiseKind::On, MinimiseKind::Off];

    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            MinimiseKind::Auto => "auto",
            MinimiseKind::On => "on",
            MinimiseKind::Off => "off",
        }
    }
}

display_by_name!(MinimiseKind, name);

/// A hardening as given on the command line.
pub struct HardenOptions<'a> {
    pub app: &'a str,
    pub env: Environment,
    /// The stability check given, if any.
    pub stable: Option<Stop>,
    pub iterations: u64,
    pub max_rounds: u32,
    pub minimise_kinds: MinimiseKind,
    /// Worker processes; `None`: one per core on the simulator, one on a GPU.
    pub jobs: Option<usize>,
    pub journal: Output<'a>,
    pub target: &'a TargetOptions,
    /// How the patch writes its fences.
    pub fence_style: FenceStyle,
    /// Runs of the app rebuilt from the patch once the search ends (0: none).
    pub patch_runs: u64,
}

/// A hardening whose journal is open, ready to run.
pub struct OpenHardening {
    pub path: PathBuf,
    pub meta: HardenMeta,
    /// Runs recorded before a resume.
    pub done: Vec<HardenRow>,
    journal: Journal<HardenRow>,
    executor: Box<dyn Executor>,
    /// The simulator that records races when the executor records none (a GPU).
    race_executor: Option<SiteMapped>,
    fence_style: FenceStyle,
    /// Whether runs go in this process (also those of a diagnosis after the search).
    in_process: bool,
    patch_runs: u64,
}

/// A hardening that ran to its end: the fences found, as a report and a patch.
pub struct Hardening {
    pub path: PathBuf,
    pub meta: HardenMeta,
    pub hardened: Hardened,
    pub report: FenceReport,
    /// Where the patch was written (`<journal>.patch`).
    pub patch_path: PathBuf,
    /// What came of building the app from the patch and running it.
    pub patch_check: PatchCheck,
}

/// Opens the hardening `options` describe: the journal chosen (with `--resume` without a name,
/// the newest unfinished default one), started or resumed, and the app's own fences warned
/// about.
pub fn open_hardening(options: &HardenOptions, say: Say) -> Result<OpenHardening, JobError> {
    let parts = options.target.backend.name_parts();
    let path = choose_journal(
        "harden",
        (options.app, options.env),
        options.journal,
        parts,
        &|journal| unfinished(JobKind::Harden, journal, None),
        say,
    )?;
    super::interrupt::resumes("--journal", &path, &path);
    let opened = match options.journal.resume {
        true => resume(path, options, say)?,
        false => start(path, options, say)?,
    };
    warn_about_own_fences(&opened.meta.target, say)?;
    Ok(opened)
}

impl OpenHardening {
    /// Runs the search, calling `progress` as queries go, writes the patch beside the journal,
    /// and (when the search is stable) builds the app from the patch and runs it, calling
    /// `patch_progress` with the runs made and asked.
    pub fn run(
        mut self,
        progress: &mut dyn FnMut(&QueryProgress),
        patch_progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Hardening, JobError> {
        let done = std::mem::take(&mut self.done);
        let race_executor = self.race_executor.as_mut().map(|e| e as &mut dyn Executor);
        let hardened = harden_recording_with(
            self.executor.as_mut(),
            race_executor,
            &mut self.journal,
            &self.meta,
            done,
            progress,
        )?;
        if let Some(failed) = &hardened.every_fence_failed {
            let diagnosis = fences_cannot_help(&self.meta, failed, self.in_process, &self.path)?;
            return Err(JobError::Other(diagnosis));
        }
        let report = make_report(&self.meta, &hardened, self.fence_style)?;
        let patch_path = self.path.with_extension("patch");
        write_patch(&patch_path, &report.patch)?;
        let patch_check = match hardened.insertion.stable {
            true => check_patch(
                &self.meta.target,
                &report.patched,
                self.patch_check_plan(),
                patch_progress,
            ),
            false => PatchCheck::NotStable,
        };
        Ok(Hardening {
            path: self.path,
            meta: self.meta,
            hardened,
            report,
            patch_path,
            patch_check,
        })
    }

    /// The patch check: the hardening's environment, seed and stress.
    fn patch_check_plan(&self) -> PatchCheckPlan {
        PatchCheckPlan {
            runs: self.patch_runs,
            env: self.meta.env,
            seed: self.meta.seed,
            stress_iterations: self.meta.stress.stress_iterations,
            journal: Some(PatchJournal::path_for(&self.path)),
        }
    }
}

/// Writes `patch` to `path`; with no fence to insert, writes nothing and removes a patch an
/// earlier run of the journal left there (an empty file is no patch: `git apply` refuses it).
fn write_patch(path: &Path, patch: &str) -> std::io::Result<()> {
    if !patch.is_empty() {
        return std::fs::write(path, patch);
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The diagnosis when the app fails with a fence at every site (in query 0, or in a stability
/// check of the whole set): no fence at these sites can fix it. On the simulator the same
/// configuration is run under sequential consistency, for as many runs as the failure took: a
/// failure there too means the bug is not one of memory ordering at all.
fn fences_cannot_help(
    meta: &HardenMeta,
    failed: &FailedQuery,
    in_process: bool,
    journal: &Path,
) -> Result<String, JobError> {
    let (run, outcome, reason) = (failed.run, failed.outcome, &failed.reason);
    let (headline, query) = match failed.phase {
        Phase::Stable => (
            "fails the stability check with a fence at every site: no set of fences at these \
             sites is stable",
            "stability check, ",
        ),
        _ => (
            "fails with a fence at every site: fences cannot fix this",
            "",
        ),
    };
    let mut lines = vec![
        headline.to_string(),
        format!(
            "  query #{} ({query}{} sites fenced): {outcome} at run {run}: {reason}",
            failed.query, failed.fences
        ),
    ];
    let target = &meta.target;
    let mut sc_fails = false;
    if target.backend == BackendKind::Sim && target.sim_model != SimModel::Sc {
        let sc = Target {
            sim_model: SimModel::Sc,
            ..target.clone()
        };
        let mut sc_executor = executor(&sc, in_process)?;
        let runs = (run + 1).max(meta.initial_iterations);
        let tally = run_with_every_fence(sc_executor.as_mut(), meta, runs)?;
        sc_fails = tally.first_error.is_some();
        lines.push(match &tally.first_error {
            Some((run, outcome, reason)) => format!(
                "  fails under sequential consistency too (--sim-model sc, {outcome} at run {run}: \
                 {reason}): not a memory-ordering bug (e.g. warp-synchronous code, a logic race)"
            ),
            None => format!(
                "  passes {runs} runs under sequential consistency (--sim-model sc): a \
                 memory-ordering bug that {} fences at these sites do not fix",
                target.fence_kind
            ),
        });
        if tally.first_error.is_none() && target.races_recordable() {
            let mut executor = executor(target, in_process)?;
            let races = races_with_every_fence(executor.as_mut(), meta, RUNS_FOR_RACES_LEFT)?;
            lines.extend(races_left_lines(&races));
        }
    }
    if !sc_fails && target.granularity != Granularity::Instruction {
        lines.extend(lines_writing_twice(&meta.sites));
    }
    if outcome == Outcome::Timeout {
        let loops = target_blind_loops(target).unwrap_or_default();
        lines.extend(blind_loop_lines(&loops).iter().map(|l| format!("  {l}")));
    }
    lines.push(format!("  journal: {}", journal.display()));
    Ok(lines.join("\n"))
}

/// The hint for sites that write more than once on one line (several statements, a macro that
/// stores the data then raises the flag): a line's fence goes after all of its accesses, never
/// between two of them, so a release that must go between cannot be had at this granularity.
fn lines_writing_twice(sites: &[SiteSummary]) -> Vec<String> {
    let places: Vec<String> = (sites.iter())
        .filter(|s| s.writes() > 1)
        .filter_map(|s| {
            let file = Path::new(s.file.as_deref()?).file_name()?.to_string_lossy();
            Some(format!("{file}:{}", s.line?))
        })
        .collect();
    let verb = match places.len() {
        0 => return Vec::new(),
        1 => "writes",
        _ => "write",
    };
    vec![format!(
        "  hint: {} {verb} more than once on one line: a line's fence goes after all of its \
         accesses, never between them; where the data and the flag are written on one line, \
         `--granularity instruction` makes each access a site (its patch fences between the \
         statements of a line, not inside a macro's expansion)",
        places.join(", ")
    )]
}

/// Runs that look for the races fences at every site leave (see [`races_with_every_fence`]).
const RUNS_FOR_RACES_LEFT: u64 = 20;

/// The lines that name the races left with every site fenced, with what would order them.
fn races_left_lines(races: &[RunRace]) -> Vec<String> {
    if races.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "  races left with every site fenced (simulator, {RUNS_FOR_RACES_LEFT} runs recording \
         races):"
    )];
    for r in races.iter().take(4) {
        lines.push(format!(
            "    {} [{}] and {} [{}]: {}; {}",
            r.first.place(),
            r.first.ptx,
            r.second.place(),
            r.second.ptx,
            r.class.describe(),
            r.missing,
        ));
    }
    lines
}

/// A hardening that ran out of rounds is a failure, though its report and patch (the last
/// round's fences) are written: what the command ends with.
pub fn not_stable(insertion: &Insertion) -> JobError {
    JobError::Other(format!(
        "no stable fence set: after {} round(s) the fences kept still failed the stability check \
         (more --max-rounds or --iterations may help); the report above is the last round's",
        insertion.rounds
    ))
}

/// Ends a stable hardening: with an error when the app built from the patch does not build or
/// failed a run (the report above says which), naming the fences the patch left out if any
/// (their absence is the likely cause), else asking for a report of the app.
pub fn patch_checked(hardening: &Hardening) -> Result<(), JobError> {
    let found = match &hardening.patch_check {
        PatchCheck::DoesNotBuild { error } => format!("the patched source does not build: {error}"),
        PatchCheck::Ran(PatchRuns {
            failure: Some(f), ..
        }) => format!(
            "the app built from the patch did not pass run {} ({}: {})",
            f.run, f.outcome, f.reason
        ),
        _ => return Ok(()),
    };
    let left_out = hardening.report.left_out();
    let advice = match left_out.is_empty() {
        true => "the fences the search kept were stable in the PTX, so the patch does not put \
                 them where the search did: place the fences listed above by hand, and please \
                 report the app to gpuwmm's developers"
            .to_string(),
        false => format!(
            "the patch leaves out {} (see above): add them by hand where the report says",
            left_out.join(" ")
        ),
    };
    Err(JobError::Other(format!("{found}; {advice}")))
}

/// Continues the hardening in the journal, with the settings it records.
fn resume(path: PathBuf, options: &HardenOptions, say: Say) -> Result<OpenHardening, JobError> {
    let (journal, mut meta, done): (_, HardenMeta, _) = resume_journal(&path)?;
    refuse_another_journal(
        &path,
        JobKind::Harden,
        (&meta.target.app, meta.env),
        (options.app, options.env),
    )?;
    let settings = (
        &harden_settings(&meta),
        &asked(options, &meta, say)?,
        &options.target.given,
    );
    let recorded_hash = (&meta.target, meta.app_hash.as_ref());
    refuse_changed_resume(&path, done.len(), settings, recorded_hash, say)?;
    let executor = pooled_executor(&meta.target, options)?;
    let now_sites = executor.sites()?;
    refuse_changed_sites(&path, "resume", &meta.sites, &now_sites)?;
    // The same sites, now also with their accesses' inlining chains, which a journal made
    // before they were recorded lacks and the patch needs.
    meta.sites = now_sites.iter().map(SiteSummary::from).collect();
    let race_executor = match &meta.race_recording {
        Some(recording) => Some(recording_executor(recording, &meta.sites, options, say)?.1),
        None => None,
    };
    Ok(OpenHardening {
        fence_style: options.fence_style,
        path,
        meta,
        done,
        journal,
        executor,
        race_executor,
        in_process: options.target.in_process,
        patch_runs: options.patch_runs,
    })
}

/// The options a harden journal records, as the command line spells them. (`--jobs` and
/// `--fence-style` change neither the runs nor the journal.)
pub fn harden_settings(meta: &HardenMeta) -> Settings {
    let mut settings = target_settings(&meta.target);
    settings.insert("--seed", meta.seed.to_string());
    settings.insert("--iterations", meta.initial_iterations.to_string());
    settings.insert("--max-rounds", meta.max_rounds.to_string());
    stop_settings(
        &mut settings,
        ["--stable-runs", "--stable-duration"],
        meta.stable,
    );
    let kinds = if meta.minimise_kinds { "on" } else { "off" };
    settings.insert("--minimise-kind", kinds.to_string());
    settings
}

/// The settings a resume is asked for: the target resolved anew only when a target option is
/// given (else the journal's, which then cannot differ).
fn asked(options: &HardenOptions, meta: &HardenMeta, say: Say) -> Result<Settings, JobError> {
    let given = &options.target.given;
    let target = match target_settings(&meta.target).keys().any(|o| given.named(o)) {
        true => resolve(options.app, options.target, say)?.target,
        false => meta.target.clone(),
    };
    Ok(harden_settings(&HardenMeta {
        seed: options.target.backend.seed,
        initial_iterations: options.iterations,
        max_rounds: options.max_rounds,
        stable: stable_stop(options, &target),
        minimise_kinds: minimise_kinds(options.minimise_kinds, &target),
        target,
        ..meta.clone()
    }))
}

/// Resolves the target, lists its sites, calibrates stress once with every fence inserted, and
/// creates the journal.
fn start(path: PathBuf, options: &HardenOptions, say: Say) -> Result<OpenHardening, JobError> {
    let resolved = resolve(options.app, options.target, say)?;
    let mut executor = pooled_executor(&resolved.target, options)?;
    let sites: Vec<SiteSummary> = executor.sites()?.iter().map(SiteSummary::from).collect();
    let all = Fences::Sites(sites.iter().map(|s| s.id).collect());
    let seed = options.target.backend.seed;
    let stress = calibrate(executor.as_mut(), options.env, &all, seed, say)?;
    let minimise_kinds = minimise_kinds(options.minimise_kinds, &resolved.target);
    let hash = app_hash(&resolved.target)?;
    let recording = simulator_recording(options, &resolved.target, &sites, say)?;
    let (race_recording, race_executor) = recording.unzip();
    let meta = HardenMeta {
        app_hash: Some(hash),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        minimise_kinds,
        all_fences_first: true,
        race_guided: true,
        stable: stable_stop(options, &resolved.target),
        target: resolved.target,
        env: options.env,
        seed,
        initial_iterations: options.iterations,
        max_rounds: options.max_rounds,
        stress,
        sites,
        provenance: executor.provenance(),
        profile_source: resolved.profile_source,
        race_recording,
    };
    let journal = create_journal(&path, JobKind::Harden, &meta).map_err(super::bad_journal)?;
    Ok(OpenHardening {
        fence_style: options.fence_style,
        path,
        meta,
        done: Vec::new(),
        journal,
        executor,
        race_executor,
        in_process: options.target.in_process,
        patch_runs: options.patch_runs,
    })
}

/// For a GPU, whose runs record no races: the simulator that records them, running the same
/// app's PTX on the PTX model at the simulator's size with the simulator's stress profile and
/// stress calibrated there with every fence, and its executor. `None` on the simulator, whose
/// own runs record races (or, under a model other than PTX's, are not held to it).
fn simulator_recording(
    options: &HardenOptions,
    target: &Target,
    sites: &[SiteSummary],
    say: Say,
) -> Result<Option<(RaceRecording, SiteMapped)>, JobError> {
    if target.backend != BackendKind::Cuda {
        return Ok(None);
    }
    let seed = options.target.backend.seed;
    let on_the_simulator = TargetOptions {
        size: Some(Size::Sim),
        profile: None,
        backend: BackendOptions {
            backend: BackendChoice::Sim,
            sim_model: SimModel::Ptx,
            seed,
        },
        ..options.target.clone()
    };
    let sim = resolve(options.app, &on_the_simulator, say)?.target;
    let (pending, mut executor) = recording_executor(
        &RaceRecording {
            target: sim,
            stress_iterations: 0,
        },
        sites,
        options,
        say,
    )?;
    let all = Fences::Sites(sites.iter().map(|s| s.id).collect());
    let stress = calibrate(&mut executor, options.env, &all, seed, say)?;
    let recording = RaceRecording {
        stress_iterations: stress.stress_iterations,
        ..pending
    };
    Ok(Some((recording, executor)))
}

/// The simulator executor of `recording`, asked with the hardening's site ids (`sites`);
/// says which sites the simulator's build lacks (no fence goes there in its runs).
fn recording_executor(
    recording: &RaceRecording,
    sites: &[SiteSummary],
    options: &HardenOptions,
    say: Say,
) -> Result<(RaceRecording, SiteMapped), JobError> {
    let executor = pooled_executor(&recording.target, options)?;
    let recorder_sites: Vec<SiteSummary> =
        executor.sites()?.iter().map(SiteSummary::from).collect();
    let map = SiteMap::between(sites, &recorder_sites);
    let unpaired = map.unpaired(sites);
    if !unpaired.is_empty() {
        let ids: Vec<String> = unpaired.iter().map(|s| format!("#{}", s.id)).collect();
        say(&format!(
            "warning: sites {} have no site of the same source line in the simulator's build of \
             {}: the runs recording races have no fence there",
            ids.join(", "),
            recording.target.app
        ));
    }
    Ok((recording.clone(), SiteMapped::new(executor, map)))
}

/// The executor of a hardening: `jobs` worker processes side by side (by default one per core
/// on the simulator, one on a GPU), or one in this process when asked.
fn pooled_executor(
    target: &Target,
    options: &HardenOptions,
) -> Result<Box<dyn Executor>, JobError> {
    let in_process = options.target.in_process;
    let jobs = options.jobs.unwrap_or_else(|| match target.backend {
        BackendKind::Sim => std::thread::available_parallelism().map_or(1, |n| n.get()),
        BackendKind::Cuda => 1,
    });
    if jobs <= 1 || in_process {
        return executor(target, in_process);
    }
    find_and_compile_app(target)?;
    let workers = (0..jobs)
        .map(|_| worker_executor(target))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Box::new(Pool::new(workers)))
}

/// Whether to weaken kept fences: `auto` does where fence kinds can differ in effect.
fn minimise_kinds(choice: MinimiseKind, target: &Target) -> bool {
    match choice {
        MinimiseKind::On => true,
        MinimiseKind::Off => false,
        MinimiseKind::Auto => {
            target.backend != BackendKind::Sim || target.sim_model == SimModel::Ptx
        }
    }
}

/// The stability check asked for, else 10,000 runs on the simulator and an hour on a GPU.
fn stable_stop(options: &HardenOptions, target: &Target) -> Stop {
    options.stable.unwrap_or(match target.backend {
        BackendKind::Sim => Stop::Runs(SIM_STABLE_RUNS),
        BackendKind::Cuda => Stop::Seconds(GPU_STABLE_SECONDS),
    })
}

/// Fences the app has of its own stay in every run: the search only decides about the others.
fn warn_about_own_fences(target: &Target, say: Say) -> Result<(), JobError> {
    let own = own_fences(&target_app(target)?.module(DEFAULT_ARCH, target.size)?);
    if !own.is_empty() {
        say(&format!(
            "warning: {} already has {} fence(s) ({}); they are kept in every run, and the \
             search only decides about the candidate sites{}",
            target.app,
            own.len(),
            fence_places(&own),
            without_own_fences(target)
        ));
    }
    Ok(())
}

/// How to harden `target` without its own fences, where a `-nf` variant of it exists: every
/// app folder's, and the built-in ones listed.
fn without_own_fences(target: &Target) -> String {
    let variant = format!("{}-nf", target.app);
    let command = match &target.app_dir {
        Some(dir) => format!("gpuwmm harden {variant} --app-dir {}", dir.display()),
        None if BUILTIN_APP_NAMES.contains(&variant.as_str()) => {
            format!("gpuwmm harden {variant}")
        }
        None => return String::new(),
    };
    format!(" (for a search without them, harden the `-nf` variant: `{command}`)")
}

/// `apps/sdk-red/kernel.cu:46 (membar.gl), …`: where fences are, by source line where the PTX
/// has one (relative to the working directory when the file lies under it).
fn fence_places(fences: &[OwnFence]) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    let place = |f: &OwnFence| match f.written.as_ref().or(f.source.as_ref()) {
        Some(line) => format!("{}:{} ({})", shown_path(&line.file, &cwd), line.line, f.ptx),
        None => format!("{} in {}", f.ptx, f.function),
    };
    // A fence the PTX holds several times (a helper inlined at several calls, an unrolled
    // loop) is one place, with its count.
    let mut places: Vec<(String, usize)> = Vec::new();
    for name in fences.iter().map(place) {
        match places.iter_mut().find(|(p, _)| *p == name) {
            Some((_, n)) => *n += 1,
            None => places.push((name, 1)),
        }
    }
    let shown = places.into_iter().map(|(place, n)| match n {
        1 => place,
        n => format!("{place} × {n} copies in the PTX"),
    });
    shown.collect::<Vec<_>>().join(", ")
}

/// `file` relative to `cwd` when it lies under it, else as it is.
pub(super) fn shown_path(file: &str, cwd: &Path) -> String {
    let path = Path::new(file);
    match path.strip_prefix(cwd_as_spelled_in(path, cwd)) {
        Ok(relative) if path.is_absolute() => relative.display().to_string(),
        _ => file.to_string(),
    }
}

/// For a `-nf` variant: the fences of the original idiom, to compare with the ones kept, and
/// why the patch goes into a source that still has them. A variant that keeps its fences (`-rlx`
/// weakens orderings instead) was warned about them at the start, and gets nothing here.
pub fn original_fences_note(meta: &HardenMeta) -> Result<Option<String>, JobError> {
    let app = target_app(&meta.target)?;
    let Some(original) = app.unstripped() else {
        return Ok(None);
    };
    if !own_fences(&app.module(DEFAULT_ARCH, meta.target.size)?).is_empty() {
        return Ok(None);
    }
    let own = own_fences(&original.module(DEFAULT_ARCH, meta.target.size)?);
    Ok(Some(format!(
        "original idiom: {} has {} fence(s) of its own: {}. {} strips them from the PTX only, \
         so the patch below is made against a source that still has them.",
        original.name(),
        own.len(),
        fence_places(&own),
        meta.target.app
    )))
}

/// The fences kept as source lines and a patch, each fence of the kind the search chose.
fn make_report(
    meta: &HardenMeta,
    hardened: &Hardened,
    style: FenceStyle,
) -> Result<FenceReport, JobError> {
    let app = target_app(&meta.target)?;
    let cwd = cwd_as_spelled_in(&app.source().path, &std::env::current_dir()?);
    let chosen = hardened.final_fences(meta.target.fence_kind);
    Ok(styled_fence_report(
        &chosen,
        &meta.sites,
        app.source(),
        meta.target.fence_kind,
        &cwd,
        style,
    )?)
}

/// The kind of the final fence at site `id`: the weaker one chosen for it, the one the PTX
/// model required, else the hardening's.
fn kind_of(meta: &HardenMeta, hardened: &Hardened, id: usize) -> FenceKind {
    let finals = hardened.final_fences(meta.target.fence_kind);
    let kind = finals.iter().find(|f| f.0 == id).map(|f| f.1);
    kind.unwrap_or(meta.target.fence_kind)
}

/// Where a hardening records the races and communication its PTX rules rest on, as the report
/// says it; `None` when it records none (a GPU hardening from before, or a simulator model
/// other than PTX's).
pub fn communication_source(meta: &HardenMeta) -> Option<String> {
    let backend = meta.target.backend;
    match &meta.race_recording {
        Some(_) => Some(RaceRecording::describe(backend)),
        None if meta.race_guided && meta.target.races_recordable() => {
            Some(RaceRecording::describe(backend))
        }
        None => None,
    }
}

/// What marks a fence that completes a release/acquire pair without a failing run.
pub const REQUIRED: &str = "required by the PTX model, not seen failing";

/// Why a fence that no failing run needed was kept: its removal leaves `pair` unordered.
pub fn race_kept_text(pair: &str) -> String {
    format!("kept: its removal leaves {pair} unordered under PTX")
}

/// Why a fence no failing run needed is there: [`REQUIRED`] for a partner the PTX model
/// requires, [`race_kept_text`] for one the search kept for a race.
fn why(hardened: &Hardened, id: usize) -> Option<String> {
    let kept = hardened.insertion.fences.contains(&id);
    let required = hardened.required.iter().flatten().any(|r| r.site == id);
    if required && !kept {
        return Some(REQUIRED.to_string());
    }
    let race = hardened.insertion.race_kept.iter().find(|k| k.site == id);
    race.map(|k| race_kept_text(&k.pair))
}

/// `cwd` as `path` spells it when `path` lies under `cwd` through a symbolic link (a built-in
/// app's path is the build directory, which may be a link to this checkout), so the patch names
/// the file relative to here; otherwise `cwd` itself.
fn cwd_as_spelled_in(path: &Path, cwd: &Path) -> PathBuf {
    let (Ok(real_path), Ok(real_cwd)) = (path.canonicalize(), cwd.canonicalize()) else {
        return cwd.to_path_buf();
    };
    let Ok(below) = real_path.strip_prefix(&real_cwd) else {
        return cwd.to_path_buf();
    };
    match path.ancestors().nth(below.components().count()) {
        Some(prefix) if prefix.canonicalize().is_ok_and(|p| p == real_cwd) => prefix.to_path_buf(),
        _ => cwd.to_path_buf(),
    }
}

/// The runs of the stability checks, as the search answers them: the document reports the
/// passing one's (or, not stable, the last one's).
#[derive(Debug, Default, Clone, Copy)]
pub struct StabilityRuns {
    /// Runs of the last stability check that passed: the final fences' (a later change is kept
    /// only after a stability check of its own passed).
    pub passed: Option<u64>,
    /// Runs of the last stability check.
    pub last: Option<u64>,
}

impl StabilityRuns {
    /// Takes note of an answered query.
    pub fn update(&mut self, p: &QueryProgress) {
        // A query without `I` runs to the hardening's stability stop.
        if let (Some(answer), None) = (p.answer, p.query.iterations) {
            self.last = Some(p.tally.runs);
            if answer {
                self.passed = Some(p.tally.runs);
            }
        }
    }
}

/// Adds to the journal's sidecar what the hardening came to: `result` (the `--json` document)
/// and `confidence` (what the passing stability check supports, or none). The journal holds
/// the results, so a sidecar that cannot be updated is a warning.
pub fn record_result(journal: &Path, document: &HardenDocument, say: Say) {
    let written = set_meta_entry(journal, "result", document)
        .and_then(|()| set_meta_entry(journal, "confidence", &document.confidence));
    if let Err(e) = written {
        say(&format!(
            "warning: the sidecar of {} has no result entry: {e}",
            journal.display()
        ));
    }
}

/// `harden --json`: the hardening's results as one document (also the sidecar's `result`).
#[derive(Debug, Serialize)]
pub struct HardenDocument<'a> {
    app: &'a str,
    env: Environment,
    /// The backend that ran (`cuda` or `sim`; `auto` resolved); `provenance` says more.
    backend: BackendKind,
    provenance: &'a str,
    seed: u64,
    /// The kind the search inserts; each fence says its own.
    fence_kind: FenceKind,
    /// What a site is (site ids count at this granularity).
    granularity: Granularity,
    candidate_sites: usize,
    /// The final fences, by site id.
    fences: Vec<FenceEntry>,
    /// Where the races and communication that the PTX model's rules rest on were recorded:
    /// `communication recorded on the simulator (PTX model), runs on cuda` for a GPU,
    /// `... runs on sim` on the simulator; `null` when none were.
    communication: Option<String>,
    /// Races no fence can order, recorded with the final fences (`pair`, `advice`): left as
    /// they are; `null` when the backend records no races.
    unorderable_races: Option<&'a [UnorderableRace]>,
    /// Set when the race guide counted only the runs that passed (see
    /// [`crate::harden::communication::StandInsFailed`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    race_guide_stand_ins_failed: Option<&'a StandInsFailed>,
    /// Set when the fences the PTX model requires were asked of only the recorded runs that
    /// passed: the release/acquire stand-ins of the kept fences failed in the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    required_stand_ins_failed: Option<&'a StandInsFailed>,
    stable: bool,
    /// The stability check asked for (`{"runs": N}` or `{"seconds": S}`).
    stability_check: Stop,
    /// Runs of the stability check that passed with the final fences, or (not stable) of the
    /// last one, which failed; `null` when none ran.
    stability_runs: Option<u64>,
    /// When stable: what the passing stability check's runs without an error support.
    pub confidence: Option<ZeroErrorBound>,
    rounds: u32,
    final_iterations: u64,
    queries: usize,
    /// Every run of the search, those read from the journal included.
    runs: u64,
    runs_from_journal: u64,
    errors_seen: u64,
    /// This invocation's wall time up to the report, seconds.
    wall_s: f64,
    first_failure: Option<FirstFailure>,
    journal: &'a Path,
    /// The patch file; `null` when no fence goes into the source.
    patch: Option<&'a Path>,
    /// The app built from the patch and run: `{"verdict": "ran", "asked", "made", "failure",
    /// "races"}`, or `no-patch`, `not-stable`, `not-asked`, `not-possible` (`why`),
    /// `does-not-build` (`error`).
    patch_check: &'a PatchCheck,
}

/// One final fence.
#[derive(Debug, Serialize)]
struct FenceEntry {
    site: usize,
    function: String,
    /// The source file, relative to the working directory when under it (for a fence without a
    /// line in the app's source, the file the PTX names, if any).
    file: Option<String>,
    /// The site's source line (of the outermost call, for inlined code): the fence goes after
    /// it, unless `placement` says where else.
    line: Option<usize>,
    /// That line's text, trimmed.
    source: Option<String>,
    /// The site's accesses as PTX text: `cost --emp` checks that the id still names them.
    ptx: Vec<String>,
    kind: FenceKind,
    /// Whether the patch inserts it (a fence without a line in the app's source is left out).
    in_patch: bool,
    /// For a fence no failing run needed: "required by the PTX model, not seen failing", or
    /// "kept: its removal leaves <pair> unordered under PTX".
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
    /// Where the patch puts the fence when not simply after `line` (inside inlined functions,
    /// around a library call, between two statements of the line, in braces around a body,
    /// before a `return`), and what of it the patch leaves out, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    placement: Option<String>,
}

/// The journal's first run that did not pass, and the command that replays it.
#[derive(Debug, Serialize)]
struct FirstFailure {
    query: usize,
    run: u64,
    outcome: crate::check::Outcome,
    reason: String,
    replay: String,
}

impl<'a> HardenDocument<'a> {
    /// The document of `hardening`, whose stability checks ran `stability` runs, after
    /// `wall_s` seconds.
    pub fn new(
        hardening: &'a Hardening,
        stability: StabilityRuns,
        wall_s: f64,
    ) -> HardenDocument<'a> {
        let Hardening {
            meta,
            hardened,
            report,
            path: journal,
            patch_path: patch,
            patch_check,
        } = hardening;
        let i = &hardened.insertion;
        let t = &hardened.totals;
        let stability_runs = match i.stable {
            true => stability.passed,
            false => stability.last,
        };
        HardenDocument {
            app: &meta.target.app,
            env: meta.env,
            backend: meta.target.backend,
            provenance: &meta.provenance,
            seed: meta.seed,
            fence_kind: meta.target.fence_kind,
            granularity: meta.target.granularity,
            candidate_sites: meta.sites.len(),
            fences: fence_entries(meta, hardened, report),
            communication: communication_source(meta),
            unorderable_races: hardened.unorderable.as_deref(),
            race_guide_stand_ins_failed: hardened.stand_ins_failed.as_ref(),
            required_stand_ins_failed: hardened.required_stand_ins_failed.as_ref(),
            stable: i.stable,
            stability_check: meta.stable,
            stability_runs,
            confidence: stability_runs
                .filter(|_| i.stable)
                .and_then(|runs| ZeroErrorBound::of(runs, 0)),
            rounds: i.rounds,
            final_iterations: i.final_iterations,
            queries: i.queries,
            runs: t.runs,
            runs_from_journal: hardened.replayed,
            errors_seen: t.errors(),
            wall_s,
            first_failure: first_failure(journal).map(|row| FirstFailure {
                replay: replay_command(journal, &row),
                query: row.query,
                run: row.run,
                outcome: row.outcome,
                reason: row.reason,
            }),
            journal,
            patch: (!report.patch.is_empty()).then_some(patch.as_path()),
            patch_check,
        }
    }
}

/// `gpuwmm replay <journal> <run> --query <query>`: the command that replays `row`.
pub fn replay_command(journal: &Path, row: &HardenRow) -> String {
    format!(
        "gpuwmm replay {} {} --query {}",
        journal.display(),
        row.run,
        row.query
    )
}

/// The final fences, placed in the source or not, by site id.
fn fence_entries(meta: &HardenMeta, hardened: &Hardened, report: &FenceReport) -> Vec<FenceEntry> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let shown = |path: &str| shown_path(&report.root.join(path).to_string_lossy(), &cwd);
    let placed = report.placed.iter().map(|f| FenceEntry {
        site: f.site.id,
        function: f.site.function.clone(),
        file: Some(shown(&f.path)),
        line: Some(f.line),
        source: Some(f.text.clone()),
        ptx: f.site.ptx.clone(),
        kind: f.kind,
        in_patch: f.in_patch,
        why: why(hardened, f.site.id),
        placement: f.placement.clone(),
    });
    let unplaced = report.unplaced.iter().map(|s| FenceEntry {
        site: s.id,
        function: s.function.clone(),
        file: s.file.clone(),
        line: s.line.map(|l| l as usize),
        source: None,
        ptx: s.ptx.clone(),
        kind: kind_of(meta, hardened, s.id),
        in_patch: false,
        why: why(hardened, s.id),
        placement: None,
    });
    let mut entries: Vec<FenceEntry> = placed.chain(unplaced).collect();
    entries.sort_by_key(|e| e.site);
    entries
}

/// The journal's first run that did not pass, if it can be read.
pub fn first_failure(journal: &Path) -> Option<HardenRow> {
    let rows: Vec<HardenRow> = read_rows(journal).ok()?;
    rows.into_iter().find(|r| r.outcome.is_error())
}

/// The first run of `query` that did not pass, among `rows`.
pub fn first_failure_of(rows: &[HardenRow], query: usize) -> Option<&HardenRow> {
    rows.iter()
        .find(|r| r.query == query && r.outcome.is_error())
}

/// `round 0 binary #3: fences {0 2} x 32 runs`.
pub fn query_text(p: &QueryProgress) -> String {
    let q = p.query;
    format!(
        "round {} {} #{}: fences {} x {}",
        q.round,
        q.phase,
        q.index,
        braces(&q.fences, &q.kinds),
        p.stop
    )
}

/// `{0 2}` (`{}` for no fence), each site with `@kind` where `kinds` gives it another kind than
/// the hardening's: `{0@fence.acq_rel.gpu 2}`.
pub fn braces(fences: &[usize], kinds: &BTreeMap<usize, FenceKind>) -> String {
    let ids: Vec<String> = fences
        .iter()
        .map(|id| match kinds.get(id) {
            Some(kind) => format!("{id}@{kind}"),
            None => id.to_string(),
        })
        .collect();
    format!("{{{}}}", ids.join(" "))
}

/// `removed`, `needed (fail at run 5: ...)`, `stable`, `not stable (...)`.
pub fn answer_text(p: &QueryProgress, answer: bool) -> String {
    let mut text = match (p.query.phase, answer) {
        (Phase::Kind | Phase::All, true) => "passes".to_string(),
        (Phase::Kind | Phase::All, false) => format!("fails ({})", first_error(p)),
        (Phase::Stable, true) => "stable".to_string(),
        (Phase::Stable, false) => format!("not stable ({})", first_error(p)),
        (_, true) => "removed".to_string(),
        (_, false) => format!("needed ({})", first_error(p)),
    };
    if p.replayed > 0 {
        text.push_str(&format!(" [{} runs from the journal]", p.replayed));
    }
    text
}

fn first_error(p: &QueryProgress) -> String {
    p.tally.first_error_text()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QA: a grid barrier's three `__threadfence()`s in a helper inlined six times were
    /// listed as 18 fences at the calling lines.
    #[test]
    fn own_fences_of_an_inlined_helper_are_named_once_at_their_own_line() {
        let line = |line| {
            Some(crate::ptx::passes::fences::SourceLine {
                file: "k.cu".into(),
                line,
            })
        };
        let fence = |written, source| OwnFence {
            function: "k".into(),
            source: line(source),
            written: line(written),
            ptx: "membar.gl".into(),
        };
        let fences = [fence(13, 38), fence(13, 41), fence(17, 38), fence(23, 23)];
        assert_eq!(
            fence_places(&fences),
            "k.cu:13 (membar.gl) × 2 copies in the PTX, k.cu:17 (membar.gl), k.cu:23 (membar.gl)"
        );
    }

    /// Bug: a hardening that kept no fence wrote an empty `<journal>.patch`, which `git apply`
    /// refuses ("No valid patches in input"), and a rerun of a journal whose patch had fences
    /// left that stale patch beside a report of none. No fence, no patch file.
    #[test]
    fn a_hardening_without_fences_leaves_no_patch_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.patch");
        write_patch(&path, "").unwrap();
        assert!(!path.exists());
        write_patch(&path, "--- a/k.cu\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "--- a/k.cu\n");
        write_patch(&path, "").unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_source_reached_through_a_link_to_the_working_directory_gets_a_relative_patch() {
        let dir = tempfile::tempdir().unwrap();
        let checkout = dir.path().join("checkout");
        std::fs::create_dir_all(checkout.join("apps/x")).unwrap();
        std::fs::write(checkout.join("apps/x/kernel.cu"), "k\n").unwrap();
        let link = dir.path().join("build-dir");
        std::os::unix::fs::symlink(&checkout, &link).unwrap();

        let source = link.join("apps/x/kernel.cu");
        assert_eq!(cwd_as_spelled_in(&source, &checkout), link);
        assert_eq!(cwd_as_spelled_in(&source, dir.path()), dir.path());
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(
            cwd_as_spelled_in(&source, elsewhere.path()),
            elsewhere.path()
        );

        let file = source.to_str().unwrap();
        assert_eq!(shown_path(file, &checkout), "apps/x/kernel.cu");
        assert_eq!(shown_path(file, elsewhere.path()), file);
        assert_eq!(
            shown_path("apps/x/kernel.cu", &checkout),
            "apps/x/kernel.cu"
        );
    }
}
