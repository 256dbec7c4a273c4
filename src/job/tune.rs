//! A tuning as a job: the sidecar that says what its rows measure ([`TuneMeta`]), its folder
//! (new, or with `--resume` the newest unfinished tuning of the same settings), the profile it
//! may replace, and the summary, charts and stress profile written at the end.

use super::naming::{refuse_folder_clash, Output};
use super::settings::{all_differences, record_forced, Settings};
use super::sidecar::{create_journal, now, resume_journal, unfinished, JobKind};
use super::{JobError, Say};
use crate::backend::{BackendKind, DeviceInfo};
use crate::check::journal::{read_meta, Journal};
use crate::naming;
use crate::profile::{self, Provenance, StressProfile};
use crate::ptx::passes::stress::parse_sequence;
use crate::tune::runner::RunnerSettings;
use crate::tune::{charts, report, Budgets, ChoiceStage, Given, TuneOutcome, TuneRow};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Resident threads a simulator launch fills by default (the simulator's device has 32,768).
const SIM_MAX_THREADS: u32 = 1024;
const SIM_STRESS_ITERATIONS: u32 = 16;
const GPU_STRESS_ITERATIONS: u32 = 1000;
/// The deadline of one launch: a litmus launch takes microseconds.
pub const LAUNCH_DEADLINE: Duration = Duration::from_secs(30);
/// Where default out folders go: `<chip>-<date>`, then `-2`, `-3`, ….
const TUNE_DIR: &str = "results/tune";

/// A tuning as given on the command line.
pub struct TuneOptions<'a> {
    pub seed: u64,
    pub budgets: Budgets,
    pub patch_words: Option<u32>,
    pub sequence: Option<&'a str>,
    pub instances: u32,
    pub block_threads: u32,
    pub max_threads: Option<u32>,
    pub stress_iterations: Option<u32>,
    pub out: Output<'a>,
    pub profile_out: Option<&'a Path>,
    /// Replace an existing profile; with `resume`, also go on with a journal whose settings
    /// differ from those given, with the journal's settings (recorded in its sidecar).
    pub force: bool,
}

/// The values that skip stages, checked before anything runs.
pub fn given(options: &TuneOptions) -> Result<Given, JobError> {
    given_of(options.patch_words, options.sequence)
}

/// The values that skip stages, `--patch-words` and `--sequence` (as the command line spells it).
fn given_of(patch_words: Option<u32>, sequence: Option<&str>) -> Result<Given, JobError> {
    let sequence = match sequence {
        Some(text) => Some(
            parse_sequence(text)
                .map_err(|e| JobError::refused(format!("--sequence '{text}': {e}")))?,
        ),
        None => None,
    };
    if patch_words == Some(0) {
        return Err(JobError::refused("--patch-words must be at least 1"));
    }
    Ok(Given {
        patch_words,
        sequence,
    })
}

/// A tuning whose journal is open.
pub struct OpenTuning {
    pub out: PathBuf,
    /// Where the profile goes.
    pub profile_path: PathBuf,
    pub journal: Journal<TuneRow>,
    /// Rows recorded before a resume.
    pub recorded: Vec<TuneRow>,
    /// The recorded sidecar on resume (with its start time), else the new one.
    pub meta: TuneMeta,
    /// The values that skip stages, as `meta` records them (on a forced resume, the journal's
    /// rather than those given).
    pub given: Given,
}

/// Opens the tuning `options` describe on the device `info` (chip `chip`, described by
/// `provenance`): its folder chosen, the profile it writes checked, its journal started or
/// resumed.
pub fn open_tuning(
    options: &TuneOptions,
    info: &DeviceInfo,
    chip: &str,
    provenance: String,
    say: Say,
) -> Result<OpenTuning, JobError> {
    let meta = meta(options, info, chip, provenance);
    let out = tune_out(options, &meta, say)?;
    super::interrupt::resumes("--out", &out, &out.join("tune.csv"));
    let profile_path = options
        .profile_out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| profile::default_dir().join(format!("{chip}.toml")));
    let journal_path = out.join("tune.csv");
    refuse_folder_clash(&out, &journal_path, options.out.resume, "tuning")?;
    refuse_to_overwrite(&profile_path, options, &journal_path)?;
    let resume = (options.out.resume, options.force);
    let (journal, recorded, meta) = open_journal(&journal_path, meta, resume, say)?;
    let given = given_of(meta.patch_words, meta.sequence.as_deref())?;
    Ok(OpenTuning {
        out,
        profile_path,
        journal,
        recorded,
        meta,
        given,
    })
}

/// The sidecar of a tuning journal: what its rows are measurements of. A resume must match it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneMeta {
    pub tool_version: String,
    pub started: String,
    pub chip: String,
    pub provenance: String,
    pub driver: String,
    pub seed: u64,
    pub budgets: Budgets,
    pub patch_words: Option<u32>,
    pub sequence: Option<String>,
    pub instances: u32,
    pub block_threads: u32,
    pub max_threads: u32,
    pub stress_iterations: u32,
}

fn meta(options: &TuneOptions, info: &DeviceInfo, chip: &str, provenance: String) -> TuneMeta {
    let sim = info.backend == BackendKind::Sim;
    TuneMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        chip: chip.to_string(),
        provenance,
        driver: info.driver.clone(),
        seed: options.seed,
        budgets: options.budgets.clone(),
        patch_words: options.patch_words,
        sequence: options.sequence.map(str::to_string),
        instances: options.instances.max(1),
        block_threads: options.block_threads.max(1),
        max_threads: options.max_threads.unwrap_or(if sim {
            SIM_MAX_THREADS
        } else {
            info.max_resident_threads
        }),
        stress_iterations: options.stress_iterations.unwrap_or(if sim {
            SIM_STRESS_ITERATIONS
        } else {
            GPU_STRESS_ITERATIONS
        }),
    }
}

/// `--out`; else a new folder of the default family (`results/tune/<chip>-<date>`, then `-2`,
/// `-3`, …), or with `--resume` the newest unfinished tuning under `results/tune/` (without
/// `summary.md`) that records the settings `asked` for, else the newest such.
fn tune_out(options: &TuneOptions, asked: &TuneMeta, say: Say) -> Result<PathBuf, JobError> {
    if let Some(out) = options.out.given {
        return Ok(out.to_path_buf());
    }
    let dir = Path::new(TUNE_DIR);
    if !options.out.resume {
        let base = dir.join(format!("{}-{}", asked.chip, &asked.started[..10]));
        return Ok(naming::fresh(&base));
    }
    let tunings = same_tunings(dir, asked);
    let unfinished = tunings
        .iter()
        .rev()
        .find(|out| unfinished(JobKind::Tune, out, None));
    let (chosen, which) = match (unfinished, tunings.last()) {
        (Some(out), _) => (out, "the newest unfinished"),
        (None, Some(out)) => (out, "every one is finished; the newest"),
        (None, None) => {
            return Err(JobError::refused(format!(
                "nothing to resume: no tuning of {} with seed {} and these budgets under {}; \
                 pass --out to name one",
                asked.chip,
                asked.seed,
                dir.display()
            )))
        }
    };
    say(&format!(
        "--resume: continuing {} ({which} of {} tunings of {} with these settings under {})",
        chosen.display(),
        tunings.len(),
        asked.chip,
        dir.display()
    ));
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

/// The options a tuning records, as the command line spells them (`chip` is the device's).
fn tune_settings(meta: &TuneMeta) -> Settings {
    let b = &meta.budgets;
    let tests: Vec<&str> = b.tests.iter().map(|t| t.name()).collect();
    let or_none = |v: Option<String>| v.unwrap_or_else(|| "none".into());
    Settings::from([
        ("chip", meta.chip.clone()),
        ("--seed", meta.seed.to_string()),
        ("--distances", b.distances.to_string()),
        ("--distance-step", b.distance_step.to_string()),
        ("--locations", b.locations.to_string()),
        ("--executions", b.executions.to_string()),
        ("--max-sequence", b.max_sequence.to_string()),
        ("--max-spread", b.max_spread.to_string()),
        ("--epsilon", b.epsilon.to_string()),
        ("--tests", tests.join(",")),
        (
            "--patch-words",
            or_none(meta.patch_words.map(|p| p.to_string())),
        ),
        ("--sequence", or_none(meta.sequence.clone())),
        ("--instances", meta.instances.to_string()),
        ("--block-threads", meta.block_threads.to_string()),
        ("--max-threads", meta.max_threads.to_string()),
        ("--stress-iterations", meta.stress_iterations.to_string()),
        ("driver", meta.driver.clone()),
    ])
}

/// An existing profile is replaced only with `--force`, or with `--resume` when the tuning in
/// `journal` wrote it itself before it was stopped (a Slurm job requeued after its profile was
/// written resumes, replays its journal and writes the same profile again).
fn refuse_to_overwrite(path: &Path, options: &TuneOptions, journal: &Path) -> Result<(), JobError> {
    // Said now, not after hours of tuning: a folder cannot be replaced by a profile.
    if path.is_dir() {
        return Err(JobError::refused(format!(
            "{} is a folder: --profile-out names the profile's file (e.g. {})",
            path.display(),
            path.join("chip.toml").display()
        )));
    }
    let ours = || options.out.resume && written_by(path, journal);
    if path.exists() && !options.force && !ours() {
        return Err(JobError::refused(format!(
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
/// kind as those asked for now (the recorded sidecar wins, with its start time); with `force`
/// too, one whose settings differ goes on with its own settings, and its sidecar's `forced` list
/// records what differed.
fn open_journal(
    path: &Path,
    meta: TuneMeta,
    (resume, force): (bool, bool),
    say: Say,
) -> Result<(Journal<TuneRow>, Vec<TuneRow>, TuneMeta), JobError> {
    if !resume {
        let journal = create_journal(path, JobKind::Tune, &meta).map_err(super::bad_journal)?;
        return Ok((journal, Vec::new(), meta));
    }
    let (journal, recorded, rows): (_, TuneMeta, _) = resume_journal(path)?;
    if same_tuning(&recorded, &meta) {
        return Ok((journal, rows, recorded));
    }
    let differences = all_differences(&tune_settings(&recorded), &tune_settings(&meta));
    let listed: Vec<String> = differences.iter().map(|d| d.to_string()).collect();
    if !force {
        return Err(JobError::refused(format!(
            "cannot resume {}: it records another tuning ({}); give the same options, another \
             --out, or pass --force to go on with the journal's settings (recorded in its \
             sidecar)",
            path.display(),
            listed.join("; ")
        )));
    }
    record_forced(path, rows.len(), differences)?;
    say(&format!(
        "warning: --force: going on with {} from row {} with its own settings, although {}; \
         recorded in its sidecar",
        path.display(),
        rows.len(),
        listed.join("; ")
    ));
    Ok((journal, rows, recorded))
}

/// How the runner launches the tests the tuning `meta` describes.
pub fn runner_settings(meta: &TuneMeta, given: &Given, fallback: &StressProfile) -> RunnerSettings {
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

/// The chart of stage 2 or 3 (`what`: its title and what its candidates are): each
/// candidate's score per test, the chosen one marked.
fn choice_chart<T>(
    meta: &TuneMeta,
    stage: &ChoiceStage<T>,
    (title, candidates): (&str, &str),
    labels: &[String],
) -> Result<String, crate::plot::PlotError> {
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
pub fn write_results(out: &Path, meta: &TuneMeta, outcome: &TuneOutcome) -> Result<(), JobError> {
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
        std::fs::write(&path, text).map_err(|e| writing(&path, e))?;
    }
    Ok(())
}

/// Writes the stress profile the tuning came to, saying where it came from.
pub fn write_profile(
    path: &Path,
    outcome: &TuneOutcome,
    meta: &TuneMeta,
    chip: &str,
) -> Result<StressProfile, JobError> {
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
        toml::to_string(&profile)
            .map_err(|e| JobError::Other(format!("serialising the profile: {e}")))?
    );
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| JobError::Other(format!("creating {}: {e}", dir.display())))?;
    }
    std::fs::write(path, text).map_err(|e| writing(path, e))?;
    Ok(profile)
}

fn writing(path: &Path, e: std::io::Error) -> JobError {
    JobError::Other(format!("writing {}: {e}", path.display()))
}
