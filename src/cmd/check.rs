//! `gpuwmm check`: run an app under a testing environment, journal every run, sum up.

use super::target::{executor, resolve};
use super::{Failure, Outcome};
use crate::cli::{BackendArgs, BackendChoice, CheckArgs, JournalArgs, StopArgs, TargetArgs};
use gpuwmm::check::driver::calibrate_stress;
use gpuwmm::check::journal::read_rows;
use gpuwmm::check::{
    run_check, CheckMeta, Executor, Fences, Journal, RunRecord, Stop, Tally, Target,
};
use gpuwmm::env::Environment;
use gpuwmm::plot::{running_rate, running_rate_chart, MAX_POINTS};
use gpuwmm::ptx::passes::fences::select_sites;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

pub fn run(args: &CheckArgs) -> Outcome {
    let path = journal_path("check", &args.app, &args.env.to_string(), args);
    let spec = CheckSpec {
        app: &args.app,
        env: args.env,
        fences: &args.fences,
        stop: given_stop(&args.stop),
        journal: &path,
        resume: args.journal.resume,
        target: &args.target,
    };
    let mut executors = Executors::new(args.target.in_process);
    let mut check = open_check(&spec, &mut executors)?;
    report_start(&check.meta, &path, check.done.len());
    let bar = progress_bar(&check.meta.stop);
    let stop = check.meta.stop;
    let tally = check.run(&mut executors, &mut |tally| update(&bar, &stop, tally))?;
    bar.finish_and_clear();
    print_summary(&check.meta, &tally, &path);
    write_chart(&check.meta, &path);
    Ok(())
}

/// Draws the running error rate of the whole journal next to it (`<journal>.svg`). The journal
/// holds the results, so a chart that cannot be made is a warning, not a failed check.
fn write_chart(meta: &CheckMeta, journal: &Path) {
    let chart_path = journal.with_extension("svg");
    let drawn = read_rows(journal)
        .map_err(anyhow::Error::from)
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
        Ok(()) => println!("chart: {}", chart_path.display()),
        Err(e) => eprintln!("warning: no chart at {}: {e:#}", chart_path.display()),
    }
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
        PathBuf::from(format!(
            "results/{command}/{app}-{env}-{}-seed{}.csv",
            backend_name(backend.backend),
            backend.seed
        ))
    })
}

/// The backend as chosen on the command line, for file names.
pub fn backend_name(choice: BackendChoice) -> &'static str {
    match choice {
        BackendChoice::Auto => "auto",
        BackendChoice::Cuda => "cuda",
        BackendChoice::Sim => "sim",
    }
}

/// One check to start, or to resume from its journal: what `check` runs, and each cell of
/// `campaign`.
pub struct CheckSpec<'a> {
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

/// An executor kept for the next check of the same target, so that a campaign starts one
/// worker per app rather than one per cell.
pub struct Executors {
    in_process: bool,
    current: Option<(Target, Box<dyn Executor>)>,
}

impl Executors {
    pub fn new(in_process: bool) -> Executors {
        Executors {
            in_process,
            current: None,
        }
    }

    /// The executor for `target`: the kept one when it runs the same target, else a new one.
    pub fn get(&mut self, target: &Target) -> Result<&mut dyn Executor, Failure> {
        if self.current.as_ref().is_none_or(|(t, _)| t != target) {
            self.current = None; // stop the old worker before starting another
            self.current = Some((target.clone(), executor(target, self.in_process)?));
        }
        Ok(self.current.as_mut().expect("set above").1.as_mut())
    }
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
pub fn open_check(spec: &CheckSpec, executors: &mut Executors) -> Result<OpenCheck, Failure> {
    if spec.resume {
        return resume(spec);
    }
    let resolved = resolve(spec.app, spec.target)?;
    let fences = parse_fences(spec.fences, &resolved.target)?;
    let calibrator = executors.get(&resolved.target)?;
    let seed = spec.target.backend.seed;
    let (stress_iterations, calibration, calibration_error) =
        calibrate_stress(calibrator, spec.env, &fences, seed)?;
    if let Some(e) = &calibration_error {
        eprintln!("warning: stress calibration failed ({e}); using {stress_iterations} iterations");
    }
    let meta = CheckMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        target: resolved.target,
        env: spec.env,
        fences,
        seed,
        stop: spec.stop.unwrap_or(DEFAULT_STOP),
        stress_iterations,
        calibration,
        calibration_error,
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

/// A journal to resume must record the app and environment asked for: `recorded` and `asked`
/// are (app, environment); `what` names the journal's kind (`check`, `hardening`).
pub fn refuse_another_journal(
    path: &Path,
    what: &str,
    recorded: (&str, Environment),
    asked: (&str, Environment),
) -> Result<(), Failure> {
    if recorded == asked {
        return Ok(());
    }
    Err(Failure::bad_input(anyhow::anyhow!(
        "{} is a {what} of {} under {}, not {} under {}",
        path.display(),
        recorded.0,
        recorded.1,
        asked.0,
        asked.1
    )))
}

/// Reopens a journal; the app and environment given must be the ones it records.
fn resume(spec: &CheckSpec) -> Result<OpenCheck, Failure> {
    let path = spec.journal;
    let (journal, mut meta, done): (_, CheckMeta, _) =
        Journal::resume(path).map_err(Failure::bad_input)?;
    refuse_another_journal(
        path,
        "check",
        (&meta.target.app, meta.env),
        (spec.app, spec.env),
    )?;
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
pub const DEFAULT_STOP: Stop = Stop::Runs(1000);

/// The stop given on the command line, if any.
pub fn given_stop(args: &StopArgs) -> Option<Stop> {
    match (args.runs, args.duration) {
        (_, Some(d)) => Some(Stop::Seconds(d.as_secs_f64())),
        (Some(n), None) => Some(Stop::Runs(n)),
        (None, None) => None,
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
