//! `gpuwmm campaign`: a check of every app under every environment, one journal per cell, and
//! the matrix as the paper's tables show it.
//!
//! Each cell is an ordinary check (see [`super::check_job`]), so `--resume` and `gpuwmm replay` work
//! on a cell's journal as on any check's; the worker of an app is kept across its environments.
//! The cells run here, one after another, or (`--slurm`, see [`super::campaign_slurm`]) as the
//! tasks of a Slurm job array, each running one cell (`--cell`) of the folder's plan.

use super::campaign_slurm;
use super::check_job::{
    given_stop, open_check, record_confidence, CheckJob, OpenCheck, DEFAULT_STOP,
};
use super::journals::newest_to_resume;
use super::target::Executors;
use super::{CmdResult, Failure};
use crate::cli::{CampaignArgs, TargetArgs};
use gpuwmm::apps::builtin::BUILTIN_APP_NAMES;
use gpuwmm::apps::load_app_dir;
use gpuwmm::campaign::plan::CampaignPlan;
use gpuwmm::campaign::{parse_apps, parse_envs, write_summaries, CampaignTable, Counts};
use gpuwmm::check::journal::read_meta;
use gpuwmm::check::{CheckMeta, Stop, Tally};
use gpuwmm::env::Environment;
use gpuwmm::naming;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

/// Progress units per cell on the matrix's bar.
const CELL_UNITS: u64 = 1000;

pub fn run(args: &CampaignArgs) -> CmdResult {
    if let Some(dir) = &args.collect {
        return campaign_slurm::collect(dir);
    }
    if let Some(index) = args.cell {
        return run_task(args, index);
    }
    let (apps, dir_app) = app_list(args)?;
    let envs = parse_envs(list_arg(&args.envs)).map_err(Failure::bad_input)?;
    let out = campaign_out(args)?;
    if !args.resume {
        refuse_existing(&out)?;
    }
    let cells: Vec<(String, Environment)> = apps
        .iter()
        .flat_map(|app| envs.iter().map(move |&env| (app.clone(), env)))
        .collect();
    let stop = campaign_stop(args, &out, &cells);
    let mut plan = CampaignPlan::new(&apps, &envs, stop);
    if args.slurm.slurm {
        return campaign_slurm::submit(args, &mut plan, &out);
    }
    // A campaign resumed here keeps the Slurm job a plan names, if any.
    plan.slurm = CampaignPlan::read(&out).ok().and_then(|p| p.slurm);
    plan.write(&out).map_err(anyhow::Error::from)?;
    eprintln!(
        "campaign: {} apps × {} environments, {stop} per cell, journals in {}",
        apps.len(),
        envs.len(),
        out.display()
    );
    let campaign = Campaign {
        args,
        out: &out,
        stop,
        dir_app,
        cells: cells.len(),
    };
    let table = campaign.run_cells(&cells)?;
    write_summaries(std::slice::from_ref(&table), None, &out).map_err(anyhow::Error::from)?;
    out!("{}", table.to_markdown())?;
    outln!(
        "\nsummary: {0}/summary.md, {0}/summary.csv, chart {0}/summary.svg",
        out.display()
    )?;
    Ok(())
}

/// `--cell N` (a Slurm array task): cell `N` of the plan in `--out`, resumed where its journal
/// stops, so a requeued task loses no run.
fn run_task(args: &CampaignArgs, index: usize) -> CmdResult {
    let out = args
        .out
        .as_deref()
        .expect("clap requires --out with --cell");
    let plan = CampaignPlan::read(out).map_err(Failure::bad_input)?;
    let cell = plan.cell(out, index).map_err(Failure::bad_input)?;
    let (_, dir_app) = app_list(args)?;
    let campaign = Campaign {
        args,
        out,
        stop: plan.stop,
        dir_app,
        cells: plan.cells.len(),
    };
    eprintln!(
        "campaign task {index}: {} under {}, {}, journal {}",
        cell.app,
        cell.env,
        plan.stop,
        out.join(&cell.journal).display()
    );
    let mut executors = Executors::new(args.target.in_process);
    let (_, tally, skipped) = campaign.run_cell(&cell.app, cell.env, &mut executors, &|_| {})?;
    eprintln!(
        "{}",
        campaign.cell_line(index, &cell.app, cell.env, &tally, skipped)
    );
    Ok(())
}

/// `--apps` or `--envs`, which clap requires unless --collect is given.
fn list_arg(list: &Option<String>) -> &str {
    list.as_deref()
        .expect("clap requires --apps and --envs without --collect")
}

/// The apps asked for, and the name of the `--app-dir` app if there is one.
fn app_list(args: &CampaignArgs) -> Result<(Vec<String>, Option<String>), Failure> {
    let dir_app = match &args.target.app_dir {
        Some(dir) => Some(
            load_app_dir(dir)
                .map_err(Failure::bad_input)?
                .name()
                .to_string(),
        ),
        None => None,
    };
    let mut known: Vec<&str> = BUILTIN_APP_NAMES.to_vec();
    known.extend(dir_app.as_deref());
    let apps = parse_apps(list_arg(&args.apps), &known).map_err(Failure::bad_input)?;
    Ok((apps, dir_app))
}

/// `results/campaign/<backend>-seed<seed>`.
fn default_out(target: &TargetArgs) -> PathBuf {
    PathBuf::from(format!(
        "results/campaign/{}-seed{}",
        target.backend.backend.name(),
        target.backend.seed
    ))
}

/// `--out`; else a new folder of the default family ([`default_out`], then `-2`, `-3`, …), or
/// with `--resume` the newest unfinished one (without `summary.csv`), else the newest; a resume
/// that finds none starts the first.
pub(super) fn campaign_out(args: &CampaignArgs) -> Result<PathBuf, Failure> {
    if let Some(out) = &args.out {
        return Ok(out.clone());
    }
    let base = default_out(&args.target);
    if !args.resume {
        return Ok(naming::fresh(&base));
    }
    let what = format!(
        "default campaign folders on {}, seed {}",
        args.target.backend.backend.name(),
        args.target.backend.seed
    );
    let unfinished = |dir: &Path| !dir.join("summary.csv").exists();
    Ok(newest_to_resume(&base, &what, &unfinished)?.unwrap_or(base))
}

/// A new campaign never writes into a folder that holds journals.
fn refuse_existing(out: &Path) -> Result<(), Failure> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Ok(());
    };
    let has_journal = entries
        .filter_map(Result::ok)
        .any(|e| e.path().extension().is_some_and(|x| x == "csv"));
    if has_journal {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "{} already holds a campaign's journals: pass --resume to continue it, or --out to \
             write another",
            out.display()
        )));
    }
    Ok(())
}

/// The stop given; on resume without one, the stop a cell already recorded; else the default.
fn campaign_stop(args: &CampaignArgs, out: &Path, cells: &[(String, Environment)]) -> Stop {
    if let Some(stop) = given_stop(&args.stop) {
        return stop;
    }
    let recorded = cells.iter().find_map(|(app, env)| {
        let path = cell_journal(out, app, *env);
        read_meta::<CheckMeta>(&path).ok().map(|m| m.stop)
    });
    match (args.resume, recorded) {
        (true, Some(stop)) => stop,
        _ => DEFAULT_STOP,
    }
}

/// `<out>/<app>-<env>.csv`, as the plan names it.
fn cell_journal(out: &Path, app: &str, env: Environment) -> PathBuf {
    out.join(gpuwmm::campaign::plan::PlannedCell::new(app, env).journal)
}

/// What every cell of a campaign shares.
struct Campaign<'a> {
    args: &'a CampaignArgs,
    out: &'a Path,
    stop: Stop,
    dir_app: Option<String>,
    cells: usize,
}

impl Campaign<'_> {
    /// Runs (or resumes, or skips when finished) every cell in turn.
    fn run_cells(&self, cells: &[(String, Environment)]) -> Result<CampaignTable, Failure> {
        let bar = matrix_bar(cells.len());
        let mut executors = Executors::new(self.args.target.in_process);
        let mut table = CampaignTable::new();
        for (i, (app, env)) in cells.iter().enumerate() {
            let base = i as u64 * CELL_UNITS;
            bar.set_position(base);
            let (meta, tally, skipped) = self.run_cell(app, *env, &mut executors, &|tally| {
                let fraction = self.stop.fraction(tally);
                bar.set_position(base + (fraction * CELL_UNITS as f64) as u64);
                bar.set_message(format!(
                    "{app} {env}: {} runs, {} errors",
                    tally.runs,
                    tally.errors()
                ));
            })?;
            let counts = Counts::from(&tally);
            table.add(app, *env, counts, &meta.provenance);
            let line = self.cell_line(i, app, *env, &tally, skipped);
            bar.suspend(|| eprintln!("{line}"));
        }
        bar.finish_and_clear();
        Ok(table)
    }

    /// One cell: its check started, resumed, or found finished.
    fn run_cell(
        &self,
        app: &str,
        env: Environment,
        executors: &mut Executors,
        progress: &dyn Fn(&Tally),
    ) -> Result<(CheckMeta, Tally, bool), Failure> {
        let journal = cell_journal(self.out, app, env);
        let target = self.target_for(app);
        let spec = CheckJob {
            app,
            env,
            fences: &self.args.fences,
            stop: Some(self.stop),
            journal: &journal,
            resume: self.args.resume && journal.exists(),
            target: &target,
            races: None,
        };
        let mut check: OpenCheck = open_check(&spec, executors)?;
        let skipped = check.finished();
        let tally = check.run(executors, &mut |tally| progress(tally))?;
        record_confidence(&journal, &tally);
        Ok((check.meta, tally, skipped))
    }

    /// The target options for `app`: `--app-dir` only for the app it holds.
    fn target_for(&self, app: &str) -> TargetArgs {
        let mut target = self.args.target.clone();
        if self.dir_app.as_deref() != Some(app) {
            target.app_dir = None;
        }
        target
    }

    fn cell_line(
        &self,
        i: usize,
        app: &str,
        env: Environment,
        tally: &Tally,
        skipped: bool,
    ) -> String {
        let rate = tally.error_rate();
        format!(
            "[{}/{}] {app} under {env}: {} of {} runs erroneous, {rate}{}{}",
            i + 1,
            self.cells,
            tally.errors(),
            tally.runs,
            if rate.is_effective() {
                ", effective"
            } else {
                ""
            },
            if skipped { " (finished before)" } else { "" }
        )
    }
}

/// One bar for the whole matrix.
fn matrix_bar(cells: usize) -> ProgressBar {
    super::progress::bar(cells as u64 * CELL_UNITS, "{percent}% of the matrix")
}
