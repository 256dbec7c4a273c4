//! `gpuwmm tune`: the three tuning stages on the chosen backend, with a progress bar per stage;
//! writes the chip's stress profile, and the journal, summary and charts of the run.

use super::journals::now;
use super::{open, CmdResult, Failure};
use crate::cli::TuneArgs;
use anyhow::{anyhow, Context};
use gpuwmm::backend::select::provenance;
use gpuwmm::backend::{BackendKind, DeviceInfo};
use gpuwmm::check::journal::{read_meta, Journal};
use gpuwmm::naming;
use gpuwmm::profile::{self, Provenance, StressProfile};
use gpuwmm::ptx::passes::stress::{parse_sequence, sequence_to_string};
use gpuwmm::tune::runner::{BackendRunner, RunnerSettings};
use gpuwmm::tune::{
    charts, report, tune, Budgets, ChoiceStage, Given, Progress, TuneOutcome, TuneRow, Tuner,
};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Resident threads a simulator launch fills by default (the simulator's device has 32,768).
const SIM_MAX_THREADS: u32 = 1024;
const SIM_STRESS_ITERATIONS: u32 = 16;
const GPU_STRESS_ITERATIONS: u32 = 1000;
/// The deadline of one launch: a litmus launch takes microseconds.
const LAUNCH_DEADLINE: Duration = Duration::from_secs(30);
/// Where default out folders go: `<chip>-<date>`, then `-2`, `-3`, ….
const TUNE_DIR: &str = "results/tune";

/// The sidecar of a tuning journal: what its rows are measurements of. A resume must match it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TuneMeta {
    tool_version: String,
    started: String,
    chip: String,
    provenance: String,
    driver: String,
    seed: u64,
    budgets: Budgets,
    patch_words: Option<u32>,
    sequence: Option<String>,
    instances: u32,
    block_threads: u32,
    max_threads: u32,
    stress_iterations: u32,
}

pub fn run(args: &TuneArgs) -> CmdResult {
    if args.slurm.slurm {
        return super::tune_slurm::submit(args);
    }
    let given = given(args)?;
    let mut opened = open(&args.backend)?;
    let info = opened.backend.info().clone();
    let chip = profile::chip_of(&info);
    let meta = meta(args, &info, &chip, provenance(opened.backend.as_ref()));
    let out = tune_out(args, &meta)?;
    let profile_path = args
        .profile_out
        .clone()
        .unwrap_or_else(|| profile::default_dir().join(format!("{chip}.toml")));
    refuse_to_overwrite(&profile_path, args, &out.join("tune.csv"))?;
    let (journal, recorded, meta) = open_journal(&out.join("tune.csv"), meta, args.resume)?;
    let fallback = profile::default_for(&info);
    report_start(&meta, &out, recorded.len());
    let settings = runner_settings(&meta, &given, &fallback);
    let mut runner = BackendRunner::new(opened.backend.as_mut(), settings)?;
    let mut tuner = Tuner::new(
        &mut runner,
        meta.budgets.clone(),
        meta.seed,
        journal,
        recorded,
    )
    .map_err(Failure::bad_input)?;
    let mut bars = StageBars::default();
    let outcome = tune(&mut tuner, &given, &fallback, &mut |p| bars.update(p))?;
    bars.finish();
    drop(tuner);
    runner.release()?;
    write_results(&out, &meta, &outcome)?;
    let profile = write_profile(&profile_path, &outcome, &meta, &chip)?;
    print_summary(&outcome, &profile, &profile_path, &out)?;
    Ok(())
}

/// The values that skip stages, checked before anything runs.
fn given(args: &TuneArgs) -> Result<Given, Failure> {
    let sequence = match &args.sequence {
        Some(text) => Some(
            parse_sequence(text)
                .map_err(|e| Failure::bad_input(anyhow!("--sequence '{text}': {e}")))?,
        ),
        None => None,
    };
    if args.patch_words == Some(0) {
        return Err(Failure::bad_input(anyhow!(
            "--patch-words must be at least 1"
        )));
    }
    Ok(Given {
        patch_words: args.patch_words,
        sequence,
    })
}

fn meta(args: &TuneArgs, info: &DeviceInfo, chip: &str, provenance: String) -> TuneMeta {
    let sim = info.backend == BackendKind::Sim;
    TuneMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        chip: chip.to_string(),
        provenance,
        driver: info.driver.clone(),
        seed: args.backend.seed,
        budgets: Budgets {
            distances: args.distances,
            distance_step: args.distance_step,
            locations: args.locations,
            executions: args.executions,
            max_sequence: args.max_sequence,
            max_spread: args.max_spread,
            epsilon: args.epsilon,
            tests: args.tests.clone(),
        },
        patch_words: args.patch_words,
        sequence: args.sequence.clone(),
        instances: args.instances.max(1),
        block_threads: args.block_threads.max(1),
        max_threads: args.max_threads.unwrap_or(if sim {
            SIM_MAX_THREADS
        } else {
            info.max_resident_threads
        }),
        stress_iterations: args.stress_iterations.unwrap_or(if sim {
            SIM_STRESS_ITERATIONS
        } else {
            GPU_STRESS_ITERATIONS
        }),
    }
}

/// `--out`; else a new folder of the default family (`results/tune/<chip>-<date>`, then `-2`,
/// `-3`, …), or with `--resume` the newest unfinished tuning under `results/tune/` (without
/// `summary.md`) that records the settings `asked` for, else the newest such.
fn tune_out(args: &TuneArgs, asked: &TuneMeta) -> Result<PathBuf, Failure> {
    if let Some(out) = &args.out {
        return Ok(out.clone());
    }
    let dir = Path::new(TUNE_DIR);
    if !args.resume {
        let base = dir.join(format!("{}-{}", asked.chip, &asked.started[..10]));
        return Ok(naming::fresh(&base));
    }
    let tunings = same_tunings(dir, asked);
    let unfinished = tunings
        .iter()
        .rev()
        .find(|out| !out.join("summary.md").exists());
    let (chosen, which) = match (unfinished, tunings.last()) {
        (Some(out), _) => (out, "the newest unfinished"),
        (None, Some(out)) => (out, "every one is finished; the newest"),
        (None, None) => {
            return Err(Failure::bad_input(anyhow!(
                "nothing to resume: no tuning of {} with seed {} and these budgets under {}; \
                 pass --out to name one",
                asked.chip,
                asked.seed,
                dir.display()
            )))
        }
    };
    eprintln!(
        "--resume: continuing {} ({which} of {} tunings of {} with these settings under {})",
        chosen.display(),
        tunings.len(),
        asked.chip,
        dir.display()
    );
    Ok(chosen.clone())
}

/// The folders in `dir` holding a tuning with the settings `asked` for, oldest first.
fn same_tunings(dir: &Path, asked: &TuneMeta) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter_map(|out| {
            let recorded: TuneMeta = read_meta(&out.join("tune.csv")).ok()?;
            same_tuning(&recorded, asked).then_some((recorded.started, out))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, out)| out).collect()
}

/// Whether a recorded tuning measures what `asked` describes (when and by which build and
/// device it started aside).
fn same_tuning(recorded: &TuneMeta, asked: &TuneMeta) -> bool {
    let asked = TuneMeta {
        started: recorded.started.clone(),
        tool_version: recorded.tool_version.clone(),
        provenance: recorded.provenance.clone(),
        ..asked.clone()
    };
    asked == *recorded
}

/// An existing profile is replaced only with `--force`, or with `--resume` when the tuning in
/// `journal` wrote it itself before it was stopped (a Slurm job requeued after its profile was
/// written resumes, replays its journal and writes the same profile again).
fn refuse_to_overwrite(path: &Path, args: &TuneArgs, journal: &Path) -> Result<(), Failure> {
    let ours = || args.resume && written_by(path, journal);
    if path.exists() && !args.force && !ours() {
        return Err(Failure::bad_input(anyhow!(
            "{} exists: pass --force to replace it, or --profile-out to write elsewhere",
            path.display()
        )));
    }
    Ok(())
}

/// Whether the profile at `path` is the one the tuning journaled at `journal` writes: its
/// provenance names that tuning's start and device.
fn written_by(path: &Path, journal: &Path) -> bool {
    let (Ok(profile), Ok(meta)) = (StressProfile::load(path), read_meta::<TuneMeta>(journal))
    else {
        return false;
    };
    let p = &profile.provenance;
    p.source == "tune"
        && p.date.as_deref() == Some(meta.started.as_str())
        && p.device.as_deref() == Some(meta.provenance.as_str())
}

/// A new journal, or with `resume` the recorded one, whose measurements must be of the same
/// kind as those asked for now (the recorded sidecar wins, with its start time).
fn open_journal(
    path: &Path,
    meta: TuneMeta,
    resume: bool,
) -> Result<(Journal<TuneRow>, Vec<TuneRow>, TuneMeta), Failure> {
    if !resume {
        let journal = Journal::create(path, &meta).map_err(Failure::bad_input)?;
        return Ok((journal, Vec::new(), meta));
    }
    let (journal, recorded, rows): (_, TuneMeta, _) =
        Journal::resume(path).map_err(Failure::bad_input)?;
    if !same_tuning(&recorded, &meta) {
        return Err(Failure::bad_input(anyhow!(
            "cannot resume {}: it records another tuning (chip {}, seed {}, budgets {}, \
             instances {}, block threads {}, max threads {}, stress iterations {}); give the \
             same options, or another --out",
            path.display(),
            recorded.chip,
            recorded.seed,
            recorded.budgets,
            recorded.instances,
            recorded.block_threads,
            recorded.max_threads,
            recorded.stress_iterations
        )));
    }
    Ok((journal, rows, recorded))
}

fn runner_settings(meta: &TuneMeta, given: &Given, fallback: &StressProfile) -> RunnerSettings {
    let b = &meta.budgets;
    let largest_patch = given
        .patch_words
        .unwrap_or(b.locations.max(fallback.patch_words));
    RunnerSettings {
        block_threads: meta.block_threads,
        max_threads: meta.max_threads,
        stress_iterations: meta.stress_iterations,
        instances: meta.instances,
        max_distance: b.distances,
        scratch_words: b.locations.max(largest_patch.saturating_mul(b.max_spread)),
        deadline: LAUNCH_DEADLINE,
    }
}

fn report_start(meta: &TuneMeta, out: &Path, recorded: usize) {
    let b = &meta.budgets;
    let per = |n: u64| n * b.tests.len() as u64 * b.distance_list().len() as u64;
    let stage1 = if meta.patch_words.is_some() {
        0
    } else {
        per(b.locations as u64)
    };
    eprintln!("{}", meta.provenance);
    eprintln!(
        "tuning {} (seed {}): stage 1 {} configurations, stage 2 {} sequences x the patch-start \
         locations, stage 3 {} spreads; {} executions each, {} per launch; {} threads at most, \
         {} stress iterations; journal {}{}",
        meta.chip,
        meta.seed,
        stage1,
        gpuwmm::tune::analysis::all_sequences(b.max_sequence).len(),
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
    );
}

/// One progress bar per stage.
#[derive(Default)]
struct StageBars {
    bar: Option<(u8, ProgressBar)>,
}

impl StageBars {
    fn update(&mut self, p: Progress) {
        if self.bar.as_ref().map(|(s, _)| *s) != Some(p.stage) {
            self.finish();
            let bar = super::progress::bar(p.cells, "{pos}/{len} configurations");
            bar.set_prefix(format!("stage {} ", p.stage));
            self.bar = Some((p.stage, bar));
        }
        if let Some((_, bar)) = &self.bar {
            bar.set_position(p.done);
            bar.set_message(format!("{} weak", p.weak));
        }
    }

    fn finish(&mut self) {
        if let Some((_, bar)) = self.bar.take() {
            bar.finish();
        }
    }
}

/// The chart of stage 2 or 3 (`what`: its title and what its candidates are): each
/// candidate's score per test, the chosen one marked.
fn choice_chart<T>(
    meta: &TuneMeta,
    stage: &ChoiceStage<T>,
    (title, candidates): (&str, &str),
    labels: &[String],
) -> Result<String, gpuwmm::plot::PlotError> {
    charts::score_chart(
        &format!("{title} ({})", meta.chip),
        &meta.provenance,
        candidates,
        labels,
        &meta.budgets.tests,
        &stage.scores,
        stage.best.map(|(c, _)| c),
    )
}

/// summary.md and the charts, next to the journal.
fn write_results(out: &Path, meta: &TuneMeta, outcome: &TuneOutcome) -> Result<(), Failure> {
    let note = meta.provenance.as_str();
    let mut files = vec![("summary.md", report::markdown(outcome, &meta.budgets, note))];
    if let Some(stage) = &outcome.patch_stage {
        let title = format!(
            "Stage 1: weak behaviours by stressed location ({})",
            meta.chip
        );
        files.push(("patches.svg", charts::patch_heatmap(&title, note, stage)?));
    }
    if let Some(stage) = &outcome.sequence_stage {
        let labels = report::sequence_labels(&stage.candidates);
        let what = ("Stage 2: access sequences", "access sequence σ");
        files.push(("sequences.svg", choice_chart(meta, stage, what, &labels)?));
    }
    if let Some(stage) = &outcome.spread_stage {
        let labels: Vec<String> = stage.candidates.iter().map(u32::to_string).collect();
        let what = ("Stage 3: spread", "spread (stressed regions)");
        files.push(("spread.svg", choice_chart(meta, stage, what, &labels)?));
    }
    for (name, text) in files {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn write_profile(
    path: &Path,
    outcome: &TuneOutcome,
    meta: &TuneMeta,
    chip: &str,
) -> Result<StressProfile, Failure> {
    let b = &meta.budgets;
    let provenance = Provenance {
        source: "tune".into(),
        device: Some(meta.provenance.clone()),
        driver: Some(meta.driver.clone()),
        date: Some(meta.started.clone()),
        tool_version: Some(meta.tool_version.clone()),
        note: Some(format!("gpuwmm tune: {b}, seed {}", meta.seed)),
    };
    let profile = report::profile(outcome, chip, provenance);
    let text = format!(
        "# Stress profile written by `gpuwmm tune` ({}).\n{}",
        meta.provenance,
        toml::to_string(&profile).context("serialising the profile")?
    );
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(profile)
}

fn print_summary(
    outcome: &TuneOutcome,
    profile: &StressProfile,
    path: &Path,
    out: &Path,
) -> std::io::Result<()> {
    let how = |s: &gpuwmm::tune::Source| match s {
        gpuwmm::tune::Source::Measured(how) => format!("measured ({how})"),
        gpuwmm::tune::Source::Given => "given".to_string(),
        gpuwmm::tune::Source::Fallback(why) => format!("DEFAULT: {why}"),
    };
    outln!(
        "critical patch size {} words: {}",
        profile.patch_words,
        how(&outcome.patch_words.source)
    )?;
    outln!(
        "access sequence {}: {}",
        sequence_to_string(&outcome.sequence.value),
        how(&outcome.sequence.source)
    )?;
    outln!("spread {}: {}", profile.spread, how(&outcome.spread.source))?;
    outln!("profile: {}", path.display())?;
    outln!("journal, summary.md and charts: {}", out.display())?;
    Ok(())
}
