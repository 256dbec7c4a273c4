//! `gpuwmm check`: run an app under a testing environment, journal every run, sum up.

use super::target::{executor, resolve};
use super::{Failure, Outcome};
use crate::cli::{BackendArgs, BackendChoice, CheckArgs, JournalArgs, StopArgs};
use gpuwmm::check::driver::calibrate_stress;
use gpuwmm::check::{run_check, CheckMeta, Executor, Fences, Journal, RunRecord, Stop, Tally};
use gpuwmm::ptx::passes::fences::select_sites;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

pub fn run(args: &CheckArgs) -> Outcome {
    let path = journal_path("check", &args.app, &args.env.to_string(), args);
    let (mut journal, meta, done, mut executor) = if args.journal.resume {
        let (journal, meta, done) = resume(&path, args)?;
        let executor = executor(&meta.target, args.target.in_process)?;
        (journal, meta, done, executor)
    } else {
        let (journal, meta, executor) = start(&path, args)?;
        (journal, meta, Vec::new(), executor)
    };
    report_start(&meta, &path, done.len());
    let bar = progress_bar(&meta.stop);
    let tally = run_check(
        executor.as_mut(),
        &mut journal,
        &meta,
        &done,
        &mut |_, tally| update(&bar, &meta.stop, tally),
        &|| false,
    )?;
    bar.finish_and_clear();
    print_summary(&meta, &tally, &path);
    Ok(())
}

/// `--journal`, or `results/<command>/<app>-<env>-<backend>-seed<seed>.csv`.
pub fn journal_path(command: &str, app: &str, env: &str, args: &CheckArgs) -> PathBuf {
    default_journal(command, app, env, &args.journal, &args.target.backend)
}

/// The journal named by `journal`, or the default one for these arguments.
pub fn default_journal(
    command: &str,
    app: &str,
    env: &str,
    journal: &JournalArgs,
    backend: &BackendArgs,
) -> PathBuf {
    journal.journal.clone().unwrap_or_else(|| {
        let choice = match backend.backend {
            BackendChoice::Auto => "auto",
            BackendChoice::Cuda => "cuda",
            BackendChoice::Sim => "sim",
        };
        PathBuf::from(format!(
            "results/{command}/{app}-{env}-{choice}-seed{}.csv",
            backend.seed
        ))
    })
}

/// Starts a new check: resolves the target, calibrates stress, creates the journal.
type Started = (Journal<RunRecord>, CheckMeta, Box<dyn Executor>);

fn start(path: &Path, args: &CheckArgs) -> Result<Started, Failure> {
    let resolved = resolve(&args.app, &args.target)?;
    let fences = parse_fences(&args.fences, &resolved.target)?;
    let mut calibrator = executor(&resolved.target, args.target.in_process)?;
    let seed = args.target.backend.seed;
    let (stress_iterations, calibration, calibration_error) =
        calibrate_stress(calibrator.as_mut(), args.env, &fences, seed)?;
    if let Some(e) = &calibration_error {
        eprintln!("warning: stress calibration failed ({e}); using {stress_iterations} iterations");
    }
    let meta = CheckMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        target: resolved.target,
        env: args.env,
        fences,
        seed,
        stop: stop(&args.stop),
        stress_iterations,
        calibration,
        calibration_error,
        provenance: calibrator.provenance(),
        profile_source: resolved.profile_source,
    };
    let journal = Journal::create(path, &meta).map_err(Failure::bad_input)?;
    Ok((journal, meta, calibrator))
}

/// Reopens a journal; the app and environment given must be the ones it records.
fn resume(
    path: &Path,
    args: &CheckArgs,
) -> Result<(Journal<RunRecord>, CheckMeta, Vec<RunRecord>), Failure> {
    let (journal, mut meta, done): (_, CheckMeta, _) =
        Journal::resume(path).map_err(Failure::bad_input)?;
    if meta.target.app != args.app || meta.env != args.env {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "{} is a check of {} under {}, not {} under {}",
            path.display(),
            meta.target.app,
            meta.env,
            args.app,
            args.env
        )));
    }
    // A new stop given with --resume extends (or shortens) the check.
    if args.stop.runs.is_some() || args.stop.duration.is_some() {
        meta.stop = stop(&args.stop);
    }
    Ok((journal, meta, done))
}

fn stop(args: &StopArgs) -> Stop {
    match (args.runs, args.duration) {
        (_, Some(d)) => Stop::Seconds(d.as_secs_f64()),
        (Some(n), None) => Stop::Runs(n),
        (None, None) => Stop::Runs(1000),
    }
}

/// `as-is`, or a site selection checked against the app's sites.
pub fn parse_fences(spec: &str, target: &gpuwmm::check::Target) -> Result<Fences, Failure> {
    if spec.trim() == "as-is" {
        return Ok(Fences::AsIs);
    }
    let sites = gpuwmm::check::local::target_sites(target).map_err(Failure::bad_input)?;
    let chosen = select_sites(&sites, spec).map_err(|e| Failure::bad_input(anyhow::anyhow!(e)))?;
    Ok(Fences::Sites(chosen.iter().map(|s| s.id).collect()))
}

/// The current time, UTC, RFC 3339 (seconds).
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) date in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn report_start(meta: &CheckMeta, path: &Path, done: usize) {
    eprintln!("{}", meta.provenance);
    eprintln!(
        "checking {} under {} with fences {}: {}, seed {}, stress {} (profile {}), journal {}{}",
        meta.target.app,
        meta.env,
        meta.fences.label(),
        meta.stop,
        meta.seed,
        stress_text(meta),
        meta.profile_source,
        path.display(),
        if done > 0 {
            format!(" (resuming after {done} runs)")
        } else {
            String::new()
        }
    );
}

fn stress_text(meta: &CheckMeta) -> String {
    if !meta.env.stresses() {
        return "none".into();
    }
    let p = &meta.target.profile;
    format!(
        "{} iterations of '{}' x spread {} x patch {}",
        meta.stress_iterations, p.sequence, p.spread, p.patch_words
    )
}

fn progress_bar(stop: &Stop) -> ProgressBar {
    let (len, unit) = match *stop {
        Stop::Runs(n) => (n, "runs"),
        Stop::Seconds(s) => ((s * 1e3) as u64, "ms"),
    };
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{bar:30}} {{pos}}/{{len}} {unit} | {{msg}} [{{elapsed_precise}}<{{eta_precise}}]"
        ))
        .expect("valid template"),
    );
    bar
}

fn update(bar: &ProgressBar, stop: &Stop, tally: &Tally) {
    let position = match stop {
        Stop::Runs(_) => tally.runs,
        Stop::Seconds(_) => tally.elapsed_ms as u64,
    };
    bar.set_position(position);
    bar.set_message(format!(
        "{} runs, {} errors, rate {:.2}%",
        tally.runs,
        tally.errors(),
        100.0 * tally.error_rate().rate
    ));
}

fn print_summary(meta: &CheckMeta, tally: &Tally, path: &Path) {
    println!("{}", meta.provenance);
    println!(
        "app {} | env {} | fences {}",
        meta.target.app,
        meta.env,
        meta.fences.label()
    );
    println!("runs {} in {:.1} s", tally.runs, tally.elapsed_ms / 1e3);
    let kinds: Vec<String> = gpuwmm::check::Outcome::ALL
        .iter()
        .map(|o| format!("{o} {}", tally.count(*o)))
        .collect();
    println!("outcomes: {}", kinds.join(", "));
    let rate = tally.error_rate();
    println!(
        "error rate {rate} (95% Wilson interval){}",
        if rate.is_effective() {
            " — effective (above 5%)"
        } else {
            ""
        }
    );
    if let Some((run, outcome, reason)) = &tally.first_error {
        println!("first error: run {run}, {outcome}: {reason}");
        println!("replay it with: gpuwmm replay {} {run}", path.display());
    }
    println!("journal: {}", path.display());
}
