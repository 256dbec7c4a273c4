//! `gpuwmm harden`: run the paper's empirical fence insertion on an app, journaling every run,
//! and show the fences it keeps as source lines and a patch (or, with `--json`, one JSON
//! document); what it came to is also recorded in the journal's sidecar.

use super::check_job::stop_of;
use super::journals::{
    choose_journal, now, print_json, refuse_another_journal, refuse_changed_sites, resuming_note,
};
use super::progress::{stop_length, stop_position};
use super::target::{calibrate, executor, find_and_compile_app, resolve, worker_executor};
use super::{CmdResult, Failure};
use crate::cli::{HardenArgs, MinimiseKind, StableArgs};
use gpuwmm::apps::DEFAULT_ARCH;
use gpuwmm::check::journal::{read_meta_entry, read_rows, set_meta_entry};
use gpuwmm::check::local::target_app;
use gpuwmm::check::{BackendChoice, Executor, Fences, Journal, Pool, SimModel, Stop, Target};
use gpuwmm::env::Environment;
use gpuwmm::harden::algorithm::{Insertion, Phase};
use gpuwmm::harden::report::{styled_fence_report, FenceReport, FenceStyle};
use gpuwmm::harden::run::{harden, HardenMeta, HardenRow, Hardened, QueryProgress, SiteSummary};
use gpuwmm::ptx::passes::fences::{own_fences, FenceKind, Granularity, OwnFence};
use gpuwmm::stats::ZeroErrorBound;
use indicatif::ProgressBar;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The stability check on the simulator when none is given: runs are cheap there.
const SIM_STABLE_RUNS: u64 = 10_000;
/// The stability check on a GPU when none is given: the paper's hour.
const GPU_STABLE_SECONDS: f64 = 3600.0;

pub fn run(args: &HardenArgs) -> CmdResult {
    let clock = Instant::now();
    let path = choose_journal(
        "harden",
        &args.app,
        args.env,
        &args.journal,
        &args.target.backend,
        &hardening_unfinished,
    )?;
    let (mut journal, meta, done, mut executor) = open(&path, args)?;
    warn_about_own_fences(&meta.target)?;
    report_start(&meta, &path, done.len());
    let mut printer = Printer::new(args.json);
    let hardened = harden(executor.as_mut(), &mut journal, &meta, done, &mut |p| {
        printer.update(p)
    })?;
    printer.bar.finish_and_clear();
    let report = make_report(&meta, &hardened, args.fence_style)?;
    let patch_path = path.with_extension("patch");
    std::fs::write(&patch_path, &report.patch)?;
    let files = (path.as_path(), patch_path.as_path());
    let document = HardenDocument::new(&meta, &hardened, &report, &printer, files, clock);
    record_result(&path, &document);
    if let Some(closed) = printer.stdout_error {
        return Err(closed.into());
    }
    if args.json {
        print_json(&document)?;
    } else {
        print_fences(&meta, &hardened, &report)?;
        print_kind_choices(&meta, &hardened, &path)?;
        print_original_fences(&meta)?;
        print_patch(&report, &patch_path)?;
        print_summary(&meta, &hardened, clock, &path, document.confidence.as_ref())?;
    }
    match hardened.insertion.stable {
        true => Ok(()),
        false => Err(not_stable(&hardened.insertion)),
    }
}

/// A hardening that ran out of rounds is a failure (exit code 1), though its report and patch
/// (the last round's fences) are written and printed.
fn not_stable(insertion: &Insertion) -> Failure {
    anyhow::anyhow!(
        "no stable fence set: after {} round(s) the fences kept still failed the stability check \
         (more --max-rounds or --iterations may help); the report above is the last round's",
        insertion.rounds
    )
    .into()
}

/// Whether the hardening journaled at `path` has not ended: its sidecar has no `result` yet (see
/// [`record_result`]). One whose sidecar cannot be read is not a hardening to resume.
fn hardening_unfinished(path: &Path) -> bool {
    matches!(
        read_meta_entry::<serde_json::Value>(path, "result"),
        Ok(None)
    )
}

/// Adds to the journal's sidecar what the hardening came to: `result` (the `--json` document)
/// and `confidence` (what the passing stability check supports, or none). The journal holds
/// the results, so a sidecar that cannot be updated is a warning.
fn record_result(journal: &Path, document: &HardenDocument) {
    let written = set_meta_entry(journal, "result", document)
        .and_then(|()| set_meta_entry(journal, "confidence", &document.confidence));
    if let Err(e) = written {
        eprintln!(
            "warning: the sidecar of {} has no result entry: {e}",
            journal.display()
        );
    }
}

/// `harden --json`: the hardening's results as one document (also the sidecar's `result`).
#[derive(Debug, Serialize)]
struct HardenDocument<'a> {
    app: &'a str,
    env: Environment,
    /// The backend asked for (`auto`, `cuda`, `sim`); `provenance` says what ran.
    backend: BackendChoice,
    provenance: &'a str,
    seed: u64,
    /// The kind the search inserts; each fence says its own.
    fence_kind: FenceKind,
    /// What a site is (site ids count at this granularity).
    granularity: Granularity,
    candidate_sites: usize,
    /// The final fences, by site id.
    fences: Vec<FenceEntry>,
    stable: bool,
    /// The stability check asked for (`{"runs": N}` or `{"seconds": S}`).
    stability_check: Stop,
    /// Runs of the stability check that passed with the final fences, or (not stable) of the
    /// last one, which failed; `null` when none ran.
    stability_runs: Option<u64>,
    /// When stable: what the passing stability check's runs without an error support.
    confidence: Option<ZeroErrorBound>,
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
}

/// One final fence.
#[derive(Debug, Serialize)]
struct FenceEntry {
    site: usize,
    function: String,
    /// The source file, relative to the working directory when under it (for a fence without a
    /// line in the app's source, the file the PTX names, if any).
    file: Option<String>,
    /// The source line the fence goes after.
    line: Option<usize>,
    /// That line's text, trimmed.
    source: Option<String>,
    /// The site's accesses as PTX text: `cost --emp` checks that the id still names them.
    ptx: Vec<String>,
    kind: FenceKind,
    /// Whether the patch inserts it (a fence without a line in the app's source is left out).
    in_patch: bool,
}

/// The journal's first run that did not pass, and the command that replays it.
#[derive(Debug, Serialize)]
struct FirstFailure {
    query: usize,
    run: u64,
    outcome: gpuwmm::check::Outcome,
    reason: String,
    replay: String,
}

impl<'a> HardenDocument<'a> {
    fn new(
        meta: &'a HardenMeta,
        hardened: &Hardened,
        report: &FenceReport,
        printer: &Printer,
        (journal, patch): (&'a Path, &'a Path),
        clock: Instant,
    ) -> HardenDocument<'a> {
        let i = &hardened.insertion;
        let t = &hardened.totals;
        let stability_runs = match i.stable {
            true => printer.passed_stability,
            false => printer.last_stability,
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
            wall_s: clock.elapsed().as_secs_f64(),
            first_failure: first_failure(journal).map(|row| FirstFailure {
                replay: format!(
                    "gpuwmm replay {} {} --query {}",
                    journal.display(),
                    row.run,
                    row.query
                ),
                query: row.query,
                run: row.run,
                outcome: row.outcome,
                reason: row.reason,
            }),
            journal,
            patch: (!report.patch.is_empty()).then_some(patch),
        }
    }
}

/// The final fences, placed in the source or not, by site id.
fn fence_entries(meta: &HardenMeta, hardened: &Hardened, report: &FenceReport) -> Vec<FenceEntry> {
    let kind_of = |id: usize| {
        let choice = hardened.kinds.iter().find(|c| c.site == id);
        choice.map_or(meta.target.fence_kind, |c| c.kind)
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let file = shown_path(&report.root.join(&report.path).to_string_lossy(), &cwd);
    let placed = report.placed.iter().map(|f| FenceEntry {
        site: f.site.id,
        function: f.site.function.clone(),
        file: Some(file.clone()),
        line: Some(f.line),
        source: Some(f.text.clone()),
        ptx: f.site.ptx.clone(),
        kind: f.kind,
        in_patch: true,
    });
    let unplaced = report.unplaced.iter().map(|s| FenceEntry {
        site: s.id,
        function: s.function.clone(),
        file: s.file.clone(),
        line: s.line.map(|l| l as usize),
        source: None,
        ptx: s.ptx.clone(),
        kind: kind_of(s.id),
        in_patch: false,
    });
    let mut entries: Vec<FenceEntry> = placed.chain(unplaced).collect();
    entries.sort_by_key(|e| e.site);
    entries
}

type OpenedHardening = (
    Journal<HardenRow>,
    HardenMeta,
    Vec<HardenRow>,
    Box<dyn Executor>,
);

/// A new hardening, or the one in the journal with `--resume`.
fn open(path: &Path, args: &HardenArgs) -> Result<OpenedHardening, Failure> {
    if !args.journal.resume {
        return start(path, args);
    }
    let (journal, meta, done): (_, HardenMeta, _) =
        Journal::resume(path).map_err(Failure::bad_input)?;
    refuse_another_journal(
        path,
        "hardening",
        (&meta.target.app, meta.env),
        (&args.app, args.env),
    )?;
    warn_about_ignored_settings(args, &meta);
    let executor = pooled_executor(&meta.target, args)?;
    refuse_changed_sites(path, "resume", &meta.sites, &executor.sites()?)?;
    Ok((journal, meta, done, executor))
}

/// A resumed hardening replays its journal, so it must keep the settings it started with.
fn warn_about_ignored_settings(args: &HardenArgs, meta: &HardenMeta) {
    let changed = args.stable.stable_runs.is_some()
        || args.stable.stable_duration.is_some()
        || args.iterations != meta.initial_iterations
        || args.max_rounds != meta.max_rounds;
    if changed {
        eprintln!(
            "warning: --resume keeps the journal's settings (I = {}, at most {} rounds, \
             stability check {}); the ones given are ignored",
            meta.initial_iterations, meta.max_rounds, meta.stable
        );
    }
}

/// Resolves the target, lists its sites, calibrates stress once with every fence inserted, and
/// creates the journal.
fn start(path: &Path, args: &HardenArgs) -> Result<OpenedHardening, Failure> {
    let resolved = resolve(&args.app, &args.target)?;
    let mut executor = pooled_executor(&resolved.target, args)?;
    let sites: Vec<SiteSummary> = executor.sites()?.iter().map(SiteSummary::from).collect();
    let all = Fences::Sites(sites.iter().map(|s| s.id).collect());
    let seed = args.target.backend.seed;
    let stress = calibrate(executor.as_mut(), args.env, &all, seed)?;
    let minimise_kinds = minimise_kinds(args.minimise_kind, &resolved.target);
    let meta = HardenMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        minimise_kinds,
        stable: stable_stop(&args.stable, &resolved.target),
        target: resolved.target,
        env: args.env,
        seed,
        initial_iterations: args.iterations,
        max_rounds: args.max_rounds,
        stress,
        sites,
        provenance: executor.provenance(),
        profile_source: resolved.profile_source,
    };
    let journal = Journal::create(path, &meta).map_err(Failure::bad_input)?;
    Ok((journal, meta, Vec::new(), executor))
}

/// The executor of a hardening: `--jobs` worker processes side by side (by default one per
/// core on the simulator, one on a GPU), or one in this process with `--in-process`.
fn pooled_executor(target: &Target, args: &HardenArgs) -> Result<Box<dyn Executor>, Failure> {
    let jobs = args.jobs.unwrap_or_else(|| match target.backend {
        BackendChoice::Sim => std::thread::available_parallelism().map_or(1, |n| n.get()),
        _ => 1,
    });
    if jobs <= 1 || args.target.in_process {
        return executor(target, args.target.in_process);
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
            target.backend != BackendChoice::Sim || target.sim_model == SimModel::Ptx
        }
    }
}

/// The stability check asked for, else 10,000 runs on the simulator and an hour on a GPU.
fn stable_stop(args: &StableArgs, target: &Target) -> Stop {
    let given = stop_of(args.stable_runs, args.stable_duration);
    given.unwrap_or(if target.backend == BackendChoice::Sim {
        Stop::Runs(SIM_STABLE_RUNS)
    } else {
        Stop::Seconds(GPU_STABLE_SECONDS)
    })
}

/// Fences the app has of its own stay in every run: the search only decides about the others.
fn warn_about_own_fences(target: &Target) -> Result<(), Failure> {
    let own = own_fences(&target_app(target)?.module(DEFAULT_ARCH)?);
    if !own.is_empty() {
        eprintln!(
            "warning: {} already has {} fence(s) ({}); they are kept in every run, and the \
             search only decides about the candidate sites (for a search without them, harden \
             the `-nf` variant, e.g. `gpuwmm harden sdk-red-nf`)",
            target.app,
            own.len(),
            fence_places(&own)
        );
    }
    Ok(())
}

/// `apps/sdk-red/kernel.cu:46 (membar.gl), …`: where fences are, by source line where the PTX
/// has one (relative to the working directory when the file lies under it).
fn fence_places(fences: &[OwnFence]) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    let place = |f: &OwnFence| match &f.source {
        Some(line) => format!("{}:{} ({})", shown_path(&line.file, &cwd), line.line, f.ptx),
        None => format!("{} in {}", f.ptx, f.function),
    };
    fences.iter().map(place).collect::<Vec<_>>().join(", ")
}

/// `file` relative to `cwd` when it lies under it, else as it is.
fn shown_path(file: &str, cwd: &Path) -> String {
    let path = Path::new(file);
    match path.strip_prefix(cwd_as_spelled_in(path, cwd)) {
        Ok(relative) if path.is_absolute() => relative.display().to_string(),
        _ => file.to_string(),
    }
}

/// For a `-nf` variant: the fences of the original idiom, to compare with the ones kept, and
/// why the patch goes into a source that still has them. A variant that keeps its fences (`-rlx`
/// weakens orderings instead) was warned about them at the start, and gets nothing here.
fn print_original_fences(meta: &HardenMeta) -> Result<(), Failure> {
    let app = target_app(&meta.target)?;
    let Some(original) = app.unstripped() else {
        return Ok(());
    };
    if !own_fences(&app.module(DEFAULT_ARCH)?).is_empty() {
        return Ok(());
    }
    let own = own_fences(&original.module(DEFAULT_ARCH)?);
    outln!(
        "\noriginal idiom: {} has {} fence(s) of its own: {}. {} strips them from the PTX only, \
         so the patch below is made against a source that still has them.",
        original.name(),
        own.len(),
        fence_places(&own),
        meta.target.app
    )?;
    Ok(())
}

fn report_start(meta: &HardenMeta, path: &Path, done: usize) {
    eprintln!("{}", meta.provenance);
    eprintln!(
        "hardening {} under {}: {} candidate sites ({}), I = {}, up to {} rounds, stability \
         check {}, seed {}, stress {} iterations, journal {}{}",
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
    );
}

/// One line per answered query (on stderr with `--json`), and a bar for the query being run;
/// remembers the stability checks' run counts.
struct Printer {
    bar: ProgressBar,
    current: Option<usize>,
    to_stderr: bool,
    /// Runs of the last stability check that passed: the final fences' (a later change is kept
    /// only after a stability check of its own passed).
    passed_stability: Option<u64>,
    /// Runs of the last stability check.
    last_stability: Option<u64>,
    /// The first failed write of a line to stdout (a closed pipe); the hardening goes on and
    /// ends with it once its result is recorded.
    stdout_error: Option<std::io::Error>,
}

impl Printer {
    fn new(to_stderr: bool) -> Printer {
        // The unit (runs or ms, as the stability check counts) is the bar's message.
        let bar = super::progress::bar(1, "{pos}/{len}");
        Printer {
            bar,
            current: None,
            to_stderr,
            passed_stability: None,
            last_stability: None,
            stdout_error: None,
        }
    }

    fn update(&mut self, p: &QueryProgress) {
        if self.current != Some(p.query.index) {
            self.current = Some(p.query.index);
            self.bar.set_prefix(format!("{} ", query_text(p)));
            let (length, unit) = stop_length(&p.stop);
            self.bar.set_length(length);
            self.bar.set_message(unit);
        }
        self.bar.set_position(stop_position(&p.stop, p.tally));
        if let Some(answer) = p.answer {
            let line = format!("{} -> {}", query_text(p), answer_text(p, answer));
            match self.to_stderr {
                true => self.bar.suspend(|| eprintln!("{line}")),
                false => {
                    if let Err(e) = self.bar.suspend(|| outln!("{line}")) {
                        self.stdout_error.get_or_insert(e);
                    }
                }
            }
            // A query without `I` runs to the hardening's stability stop.
            if p.query.iterations.is_none() {
                self.last_stability = Some(p.tally.runs);
                if answer {
                    self.passed_stability = Some(p.tally.runs);
                }
            }
        }
    }
}

/// `round 0 binary #3: fences {0 2} x 32 runs`.
fn query_text(p: &QueryProgress) -> String {
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
fn braces(fences: &[usize], kinds: &BTreeMap<usize, FenceKind>) -> String {
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
fn answer_text(p: &QueryProgress, answer: bool) -> String {
    let mut text = match (p.query.phase, answer) {
        (Phase::Kind, true) => "passes".to_string(),
        (Phase::Kind, false) => format!("fails ({})", first_error(p)),
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

fn make_report(
    meta: &HardenMeta,
    hardened: &Hardened,
    style: FenceStyle,
) -> Result<FenceReport, Failure> {
    let app = target_app(&meta.target)?;
    let cwd = cwd_as_spelled_in(&app.source().path, &std::env::current_dir()?);
    let base = meta.target.fence_kind;
    let kind_of = |id: usize| {
        let choice = hardened.kinds.iter().find(|c| c.site == id);
        choice.map_or(base, |c| c.kind)
    };
    let chosen: Vec<(usize, FenceKind)> = hardened
        .insertion
        .fences
        .iter()
        .map(|&id| (id, kind_of(id)))
        .collect();
    Ok(styled_fence_report(
        &chosen,
        &meta.sites,
        app.source(),
        base,
        &cwd,
        style,
    )?)
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

fn print_fences(
    meta: &HardenMeta,
    hardened: &Hardened,
    report: &FenceReport,
) -> std::io::Result<()> {
    let count = report.placed.len() + report.unplaced.len();
    if hardened.kinds.is_empty() {
        outln!(
            "\nfinal fences: {count} ({}, in CUDA `{}`)",
            meta.target.fence_kind,
            report.statement
        )?;
    } else {
        outln!("\nfinal fences: {count}, each of the weakest kind that passed")?;
    }
    for fence in &report.placed {
        let kind = match hardened.kinds.is_empty() {
            true => String::new(),
            false => format!("{}  ", fence.kind),
        };
        outln!(
            "  #{:<3} {}:{}  [{}]  {kind}{}",
            fence.site.id,
            report.path,
            fence.line,
            fence.site.function,
            fence.text
        )?;
    }
    for header in &report.headers {
        outln!("  the fences need `#include {header}`: the patch adds it at the top of the source where it lacks it")?;
    }
    for fence in report.placed.iter().filter(|f| f.note.is_some()) {
        outln!(
            "  #{}: {}",
            fence.site.id,
            fence.note.as_deref().unwrap_or_default()
        )?;
    }
    for site in &report.unplaced {
        outln!(
            "  #{:<3} [{}] no line in the app's source (left out of the patch): {}",
            site.id,
            site.function,
            site.ptx.join("; ")
        )?;
    }
    Ok(())
}

fn print_patch(report: &FenceReport, patch_path: &Path) -> std::io::Result<()> {
    if report.patch.is_empty() {
        outln!("\nno patch: no fence to insert in the source")?;
        return Ok(());
    }
    outln!(
        "\npatch (written to {}; apply it in {} with `git apply` or `patch -p1`):",
        patch_path.display(),
        report.root.display()
    )?;
    out!("{}", report.patch)?;
    Ok(())
}

fn print_summary(
    meta: &HardenMeta,
    hardened: &Hardened,
    clock: Instant,
    path: &Path,
    confidence: Option<&ZeroErrorBound>,
) -> std::io::Result<()> {
    let i = &hardened.insertion;
    let t = &hardened.totals;
    outln!("\nsummary")?;
    outln!(
        "  fences: {} initial -> {} final {}",
        meta.sites.len(),
        i.fences.len(),
        braces(&i.fences, &BTreeMap::new())
    )?;
    outln!(
        "  rounds {}, final I {}, queries {}",
        i.rounds,
        i.final_iterations,
        i.queries
    )?;
    if hardened.kind_queries > 0 {
        outln!(
            "  kinds: {} more queries, trying each fence's weaker kinds",
            hardened.kind_queries
        )?;
    }
    outln!(
        "  runs {} ({} from the journal), failures seen {}",
        t.runs,
        hardened.replayed,
        t.errors()
    )?;
    outln!(
        "  wall time {:.1} s (runs {:.1} s)",
        clock.elapsed().as_secs_f64(),
        t.elapsed_ms / 1e3
    )?;
    outln!(
        "  stable: {} (stability check {})",
        if i.stable { "yes" } else { "no" },
        meta.stable
    )?;
    if let Some(confidence) = confidence {
        outln!("  confidence: {confidence}")?;
    }
    // The provenance line says when the results are the simulator's.
    outln!("  {}", meta.provenance)?;
    outln!("  journal: {}", path.display())?;
    if let Some(row) = first_failure(path) {
        outln!(
            "  first failure: query #{} run {}; replay it with: gpuwmm replay {} {} --query {}",
            row.query,
            row.run,
            path.display(),
            row.run,
            row.query
        )?;
    }
    Ok(())
}

/// Per kept fence, the kind kept and why each weaker kind tried was not (with the command that
/// replays the run that refuted it).
fn print_kind_choices(meta: &HardenMeta, hardened: &Hardened, journal: &Path) -> io::Result<()> {
    if hardened.kinds.is_empty() {
        return Ok(());
    }
    let rows: Vec<HardenRow> = read_rows(journal).unwrap_or_default();
    outln!(
        "\nfence kinds (from {}, weaker kinds tried in the order {}):",
        meta.target.fence_kind,
        FenceKind::WEAKENING.map(|k| k.to_string()).join(", ")
    )?;
    for choice in &hardened.kinds {
        outln!("  #{:<3} keeps {}", choice.site, choice.kind)?;
        for (kind, query) in &choice.rejected {
            let failed = rows
                .iter()
                .find(|r| r.query == *query && r.outcome.is_error());
            match failed {
                Some(r) => outln!(
                    "        {kind} failed (query #{query} run {}: {}); replay: gpuwmm replay {} {} --query {query}",
                    r.run,
                    r.outcome,
                    journal.display(),
                    r.run
                ),
                None => outln!("        {kind} failed (query #{query})"),
            }?;
        }
    }
    Ok(())
}

/// The journal's first run that did not pass, if it can be read.
fn first_failure(journal: &Path) -> Option<HardenRow> {
    let rows: Vec<HardenRow> = read_rows(journal).ok()?;
    rows.into_iter().find(|r| r.outcome.is_error())
}

#[cfg(test)]
mod tests {
    use super::*;

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
