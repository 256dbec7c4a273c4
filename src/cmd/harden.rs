//! `gpuwmm harden`: run the paper's empirical fence insertion on an app, journaling every run,
//! and show the fences it keeps as source lines and a patch (or, with `--json`, one JSON
//! document); what it came to is also recorded in the journal's sidecar (see
//! [`gpuwmm::job::harden`]).

use super::progress::{stop_length, stop_position};
use super::{print_json, say, CmdResult};
use crate::cli::HardenArgs;
use gpuwmm::check::journal::read_rows;
use gpuwmm::harden::report::FenceReport;
use gpuwmm::harden::run::{HardenMeta, HardenRow, Hardened, QueryProgress};
use gpuwmm::job::check::stop_of;
use gpuwmm::job::harden::{
    answer_text, braces, first_failure, first_failure_of, not_stable, open_hardening,
    original_fences_note, query_text, race_kept_text, record_result, replay_command,
    HardenDocument, HardenOptions, Hardening, StabilityRuns, REQUIRED,
};
use gpuwmm::job::naming::resuming_note;
use gpuwmm::ptx::passes::fences::FenceKind;
use gpuwmm::stats::ZeroErrorBound;
use indicatif::ProgressBar;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::Instant;

pub fn run(args: &HardenArgs) -> CmdResult {
    let clock = Instant::now();
    let target = super::target_options(&args.target);
    let options = HardenOptions {
        app: &args.app,
        env: args.env,
        stable: stop_of(args.stable.stable_runs, args.stable.stable_duration),
        iterations: args.iterations,
        max_rounds: args.max_rounds,
        minimise_kinds: args.minimise_kind,
        jobs: args.jobs,
        journal: super::output(&args.journal),
        target: &target,
        fence_style: args.fence_style,
    };
    let opened = open_hardening(&options, &say)?;
    report_start(&opened.meta, &opened.path, opened.done.len());
    let mut printer = Printer::new(args.json);
    let hardening = opened.run(&mut |p| printer.update(p))?;
    printer.bar.finish_and_clear();
    let wall_s = clock.elapsed().as_secs_f64();
    let document = HardenDocument::new(&hardening, printer.stability, wall_s);
    record_result(&hardening.path, &document, &say);
    if let Some(closed) = printer.stdout_error {
        return Err(closed.into());
    }
    if args.json {
        print_json(&document)?;
    } else {
        print_report(&hardening, clock, document.confidence.as_ref())?;
    }
    match hardening.hardened.insertion.stable {
        true => Ok(()),
        false => Err(not_stable(&hardening.hardened.insertion).into()),
    }
}

/// The fences, the kinds chosen, the original idiom's fences, the patch and the summary.
fn print_report(h: &Hardening, clock: Instant, confidence: Option<&ZeroErrorBound>) -> CmdResult {
    print_fences(&h.meta, &h.hardened, &h.report)?;
    print_kind_choices(&h.meta, &h.hardened, &h.path)?;
    if let Some(note) = original_fences_note(&h.meta)? {
        outln!("\n{note}")?;
    }
    print_patch(&h.report, &h.patch_path)?;
    print_summary(&h.meta, &h.hardened, clock, &h.path, confidence)?;
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
/// takes note of the stability checks' run counts.
struct Printer {
    bar: ProgressBar,
    current: Option<usize>,
    to_stderr: bool,
    stability: StabilityRuns,
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
            stability: StabilityRuns::default(),
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
        self.stability.update(p);
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
        }
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
        let kind = match hardened.kinds.is_empty() && hardened.required.is_none() {
            true => String::new(),
            false => format!("{}  ", fence.kind),
        };
        outln!(
            "  #{:<3} {}:{}  [{}]  {kind}{}",
            fence.site.id,
            fence.path,
            fence.line,
            fence.site.function,
            fence.text
        )?;
    }
    print_required(hardened)?;
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
            "  first failure: query #{} run {}; replay it with: {}",
            row.query,
            row.run,
            replay_command(path, &row)
        )?;
    }
    Ok(())
}

/// Per kept fence, the kind kept and why each weaker kind tried was not (with the command that
/// replays the run that refuted it).
/// The fences the PTX model requires beside the kept ones, and whether races were recorded.
fn print_required(hardened: &Hardened) -> std::io::Result<()> {
    match &hardened.required {
        None if hardened.insertion.stable => outln!(
            "  (no partner fences checked: the backend records no races; release/acquire pairs \
             rest on the runs alone)"
        ),
        None => Ok(()),
        Some(required) if required.is_empty() => outln!(
            "  every kept release has its acquire and the reverse (races recorded, simulator)"
        ),
        Some(required) => {
            for r in required {
                let kept = hardened.insertion.fences.contains(&r.site);
                let what = if kept { "made" } else { "added" };
                outln!(
                    "  #{:<3} {what} {} as the {} side of {}: {REQUIRED}",
                    r.site,
                    r.kind,
                    r.role,
                    r.orders
                )?;
            }
            Ok(())
        }
    }?;
    for kept in &hardened.insertion.race_kept {
        outln!("  fence #{} {}", kept.site, race_kept_text(&kept.pair))?;
    }
    for race in hardened.unorderable.iter().flatten() {
        outln!(
            "  no fence can order {} (left as it is): {}",
            race.pair,
            race.advice
        )?;
    }
    Ok(())
}

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
    match &hardened.cross_cta {
        Some(c) if c.sites.is_empty() => outln!(
            "  scope from communication: no site met another CTA in {} runs recording races (simulator)",
            c.runs
        )?,
        Some(c) => outln!(
            "  scope from communication: sites {} met another CTA in {} runs recording races (simulator): no CTA-scoped fence there",
            c.sites.iter().map(|s| format!("#{s}")).collect::<Vec<_>>().join(", "),
            c.runs
        )?,
        None => outln!(
            "  scope from communication: the backend records no races, so scopes rest on the runs alone"
        )?,
    }
    for choice in &hardened.kinds {
        outln!("  #{:<3} keeps {}", choice.site, choice.kind)?;
        for kind in &choice.refused_for_scope {
            outln!("        {kind} not tried: the site communicates with another CTA, where PTX gives a .cta fence no effect")?;
        }
        for (kind, query) in &choice.rejected {
            match first_failure_of(&rows, *query) {
                Some(r) => outln!(
                    "        {kind} failed (query #{query} run {}: {}); replay: {}",
                    r.run,
                    r.outcome,
                    replay_command(journal, r)
                ),
                None => outln!("        {kind} failed (query #{query})"),
            }?;
        }
    }
    Ok(())
}
