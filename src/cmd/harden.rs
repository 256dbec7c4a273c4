//! `gpuwmm harden`: run the paper's empirical fence insertion on an app, journaling every run,
//! and show the fences it keeps as source lines and a patch.

use super::check::{default_journal, now, refuse_another_journal};
use super::target::{executor, resolve};
use super::{Failure, Outcome};
use crate::cli::{HardenArgs, StableArgs};
use gpuwmm::apps::DEFAULT_ARCH;
use gpuwmm::check::driver::calibrate_stress;
use gpuwmm::check::journal::read_rows;
use gpuwmm::check::local::target_app;
use gpuwmm::check::{BackendName, Executor, Fences, Journal, Stop, Target};
use gpuwmm::harden::algorithm::Phase;
use gpuwmm::harden::report::{fence_report, FenceReport};
use gpuwmm::harden::run::{harden, HardenMeta, HardenRow, Hardened, QueryProgress, SiteSummary};
use gpuwmm::ptx::passes::fences::{own_fences, OwnFence};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The stability check on the simulator when none is given: runs are cheap there.
const SIM_STABLE_RUNS: u64 = 10_000;
/// The stability check on a GPU when none is given: the paper's hour.
const GPU_STABLE_SECONDS: f64 = 3600.0;

pub fn run(args: &HardenArgs) -> Outcome {
    let clock = Instant::now();
    let env = args.env.to_string();
    let path = default_journal(
        "harden",
        &args.app,
        &env,
        &args.journal,
        &args.target.backend,
    );
    let (mut journal, meta, done, mut executor) = open(&path, args)?;
    warn_about_own_fences(&meta.target)?;
    report_start(&meta, &path, done.len());
    let mut printer = Printer::new();
    let hardened = harden(executor.as_mut(), &mut journal, &meta, done, &mut |p| {
        printer.update(p)
    })?;
    printer.bar.finish_and_clear();
    let report = make_report(&meta, &hardened)?;
    let patch_path = path.with_extension("patch");
    std::fs::write(&patch_path, &report.patch)?;
    print_fences(&meta, &report);
    print_original_fences(&meta)?;
    print_patch(&report, &patch_path);
    print_summary(&meta, &hardened, clock, &path);
    Ok(())
}

type Opened = (
    Journal<HardenRow>,
    HardenMeta,
    Vec<HardenRow>,
    Box<dyn Executor>,
);

/// A new hardening, or the one in the journal with `--resume`.
fn open(path: &Path, args: &HardenArgs) -> Result<Opened, Failure> {
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
    let executor = executor(&meta.target, args.target.in_process)?;
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
fn start(path: &Path, args: &HardenArgs) -> Result<Opened, Failure> {
    let resolved = resolve(&args.app, &args.target)?;
    let mut executor = executor(&resolved.target, args.target.in_process)?;
    let sites: Vec<SiteSummary> = executor.sites()?.iter().map(SiteSummary::from).collect();
    let all = Fences::Sites(sites.iter().map(|s| s.id).collect());
    let seed = args.target.backend.seed;
    let (stress_iterations, calibration, calibration_error) =
        calibrate_stress(executor.as_mut(), args.env, &all, seed)?;
    if let Some(e) = &calibration_error {
        eprintln!("warning: stress calibration failed ({e}); using {stress_iterations} iterations");
    }
    let meta = HardenMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        stable: stable_stop(&args.stable, &resolved.target),
        target: resolved.target,
        env: args.env,
        seed,
        initial_iterations: args.iterations,
        max_rounds: args.max_rounds,
        stress_iterations,
        calibration,
        calibration_error,
        sites,
        provenance: executor.provenance(),
        profile_source: resolved.profile_source,
    };
    let journal = Journal::create(path, &meta).map_err(Failure::bad_input)?;
    Ok((journal, meta, Vec::new(), executor))
}

/// The stability check asked for, else 10,000 runs on the simulator and an hour on a GPU.
fn stable_stop(args: &StableArgs, target: &Target) -> Stop {
    match (args.stable_runs, args.stable_duration) {
        (_, Some(d)) => Stop::Seconds(d.as_secs_f64()),
        (Some(n), None) => Stop::Runs(n),
        (None, None) if target.backend == BackendName::Sim => Stop::Runs(SIM_STABLE_RUNS),
        (None, None) => Stop::Seconds(GPU_STABLE_SECONDS),
    }
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
/// why the patch goes into a source that still has them.
fn print_original_fences(meta: &HardenMeta) -> Result<(), Failure> {
    let app = target_app(&meta.target)?;
    let Some(original) = app.unstripped() else {
        return Ok(());
    };
    let own = own_fences(&original.module(DEFAULT_ARCH)?);
    println!(
        "\noriginal idiom: {} has {} fence(s) of its own: {}. {} strips them from the PTX only, \
         so the patch below is made against a source that still has them.",
        original.name(),
        own.len(),
        fence_places(&own),
        meta.target.app
    );
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
        meta.stress_iterations,
        path.display(),
        if done > 0 {
            format!(" (resuming after {done} runs)")
        } else {
            String::new()
        }
    );
}

/// One line per answered query, and a bar for the query being run.
struct Printer {
    bar: ProgressBar,
    current: Option<usize>,
}

impl Printer {
    fn new() -> Printer {
        let bar = ProgressBar::new(1);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {prefix} {bar:30} {pos}/{len} {msg} [{elapsed_precise}]",
            )
            .expect("valid template"),
        );
        Printer { bar, current: None }
    }

    fn update(&mut self, p: &QueryProgress) {
        if self.current != Some(p.query.index) {
            self.current = Some(p.query.index);
            self.bar.set_prefix(query_text(p));
            let (length, unit) = match p.stop {
                Stop::Runs(n) => (n, "runs"),
                Stop::Seconds(s) => ((s * 1e3) as u64, "ms"),
            };
            self.bar.set_length(length);
            self.bar.set_message(unit);
        }
        let position = match p.stop {
            Stop::Runs(_) => p.tally.runs,
            Stop::Seconds(_) => p.tally.elapsed_ms as u64,
        };
        self.bar.set_position(position);
        if let Some(answer) = p.answer {
            let line = format!("{} -> {}", query_text(p), answer_text(p, answer));
            self.bar.suspend(|| println!("{line}"));
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
        braces(&q.fences),
        p.stop
    )
}

/// `{0 2}`, or `{}` for no fence.
fn braces(fences: &[usize]) -> String {
    let ids: Vec<String> = fences.iter().map(usize::to_string).collect();
    format!("{{{}}}", ids.join(" "))
}

/// `removed`, `needed (fail at run 5: ...)`, `stable`, `not stable (...)`.
fn answer_text(p: &QueryProgress, answer: bool) -> String {
    let stable = p.query.phase == Phase::Stable;
    let mut text = match (stable, answer) {
        (false, true) => "removed".to_string(),
        (true, true) => "stable".to_string(),
        (false, false) => format!("needed ({})", first_error(p)),
        (true, false) => format!("not stable ({})", first_error(p)),
    };
    if p.replayed > 0 {
        text.push_str(&format!(" [{} runs from the journal]", p.replayed));
    }
    text
}

fn first_error(p: &QueryProgress) -> String {
    let Some((run, outcome, reason)) = &p.tally.first_error else {
        return "no error recorded".to_string();
    };
    let mut reason = reason.clone();
    if reason.chars().count() > 100 {
        reason = reason.chars().take(100).collect::<String>() + "…";
    }
    format!("{outcome} at run {run}: {reason}")
}

fn make_report(meta: &HardenMeta, hardened: &Hardened) -> Result<FenceReport, Failure> {
    let app = target_app(&meta.target)?;
    let cwd = cwd_as_spelled_in(&app.source().path, &std::env::current_dir()?);
    let report = fence_report(
        &hardened.insertion.fences,
        &meta.sites,
        app.source(),
        meta.target.fence_kind,
        &cwd,
    )?;
    Ok(report)
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

fn print_fences(meta: &HardenMeta, report: &FenceReport) {
    let count = report.placed.len() + report.unplaced.len();
    println!(
        "\nfinal fences: {count} ({}, in CUDA `{}`)",
        meta.target.fence_kind, report.statement
    );
    for fence in &report.placed {
        println!(
            "  #{:<3} {}:{}  [{}]  {}",
            fence.site.id, report.path, fence.line, fence.site.function, fence.text
        );
    }
    for site in &report.unplaced {
        println!(
            "  #{:<3} [{}] no line in the app's source (left out of the patch): {}",
            site.id,
            site.function,
            site.ptx.join("; ")
        );
    }
}

fn print_patch(report: &FenceReport, patch_path: &Path) {
    if report.patch.is_empty() {
        println!("\nno patch: no fence to insert in the source");
        return;
    }
    println!(
        "\npatch (written to {}; apply it in {} with `git apply` or `patch -p1`):",
        patch_path.display(),
        report.root.display()
    );
    print!("{}", report.patch);
}

fn print_summary(meta: &HardenMeta, hardened: &Hardened, clock: Instant, path: &Path) {
    let i = &hardened.insertion;
    let t = &hardened.totals;
    println!("\nsummary");
    println!(
        "  fences: {} initial -> {} final {}",
        meta.sites.len(),
        i.fences.len(),
        braces(&i.fences)
    );
    println!(
        "  rounds {}, final I {}, queries {}",
        i.rounds, i.final_iterations, i.queries
    );
    println!(
        "  runs {} ({} from the journal), failures seen {}",
        t.runs,
        hardened.replayed,
        t.errors()
    );
    println!(
        "  wall time {:.1} s (runs {:.1} s)",
        clock.elapsed().as_secs_f64(),
        t.elapsed_ms / 1e3
    );
    println!(
        "  stable: {} (stability check {})",
        if i.stable { "yes" } else { "no" },
        meta.stable
    );
    // The provenance line says when the results are the simulator's.
    println!("  {}", meta.provenance);
    println!("  journal: {}", path.display());
    if let Some(row) = first_failure(path) {
        println!(
            "  first failure: query #{} run {}; replay it with: gpuwmm replay {} {} --query {}",
            row.query,
            row.run,
            path.display(),
            row.run,
            row.query
        );
    }
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
