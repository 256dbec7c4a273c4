//! A campaign as a job: the apps × environments it runs, its folder (new, or the newest
//! unfinished one with `--resume`) and plan, each cell an ordinary check with its own journal
//! (so `--resume` and `gpuwmm replay` work on a cell's journal as on any check's), and the
//! summaries written at the end.

use super::check::{open_check, record_confidence, CheckJob, DEFAULT_STOP};
use super::naming::{choose_folder, default_folder, Output};
use super::settings::{differences, refuse_unless_forced, target_settings};
use super::sidecar::{unfinished, JobKind};
use super::target::resolve;
use super::target::{Executors, TargetOptions};
use super::{JobError, Say};
use crate::apps::builtin::BUILTIN_APP_NAMES;
use crate::apps::load_app_dir;
use crate::campaign::plan::{CampaignPlan, PlannedCell};
use crate::campaign::{parse_apps, parse_envs, write_summaries, CampaignTable};
use crate::check::journal::read_meta;
use crate::check::{CheckMeta, Stop, Tally};
use crate::env::Environment;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A campaign as given on the command line.
pub struct CampaignOptions<'a> {
    /// `all`, or app names separated by commas.
    pub apps: &'a str,
    /// `all`, or environment names separated by commas.
    pub envs: &'a str,
    /// Which fences every app runs with.
    pub fences: &'a str,
    /// The stop given, if any.
    pub stop: Option<Stop>,
    pub out: Output<'a>,
    pub target: &'a TargetOptions,
}

/// A campaign whose folder and cells are decided.
pub struct Campaign<'a> {
    options: &'a CampaignOptions<'a>,
    pub out: PathBuf,
    /// Each cell's stop.
    pub stop: Stop,
    /// The app of `--app-dir`, if there is one.
    dir_app: Option<String>,
    pub apps: Vec<String>,
    pub envs: Vec<Environment>,
    /// App by app, every environment.
    pub cells: Vec<(String, Environment)>,
    /// The options every cell runs with (the plan's on resume).
    settings: BTreeMap<String, String>,
}

/// A cell's check as it ended: what it was, its runs, and whether it had ended before.
pub struct CellResult {
    pub meta: CheckMeta,
    pub tally: Tally,
    pub finished_before: bool,
}

impl CellResult {
    /// `[2/16] cbe-dot under sys-str+: 3 of 10 runs erroneous, …`: cell `i` of `cells`.
    pub fn line(&self, i: usize, cells: usize) -> String {
        let tally = &self.tally;
        let rate = tally.error_rate();
        format!(
            "[{}/{cells}] {} under {}: {} of {} runs erroneous, {rate}{}{}",
            i + 1,
            self.meta.target.app,
            self.meta.env,
            tally.errors(),
            tally.runs,
            if rate.is_effective() {
                ", effective"
            } else {
                ""
            },
            if self.finished_before {
                " (finished before)"
            } else {
                ""
            }
        )
    }
}

/// Decides the campaign `options` describe: its apps, environments, folder and stop. A new
/// campaign never writes into a folder that holds journals.
pub fn plan_campaign<'a>(
    options: &'a CampaignOptions<'a>,
    say: Say,
) -> Result<Campaign<'a>, JobError> {
    let (apps, dir_app) = app_list(options.apps, options.target)?;
    let envs = parse_envs(options.envs)?;
    let out = campaign_out(options, say)?;
    let mut settings = campaign_settings(options, &apps)?;
    match options.out.resume {
        false => refuse_existing(&out)?,
        true => {
            refuse_another_plan(&out, &apps, &envs)?;
            settings = refuse_other_settings(&out, settings, options, say)?;
        }
    }
    let cells: Vec<(String, Environment)> = apps
        .iter()
        .flat_map(|app| envs.iter().map(move |&env| (app.clone(), env)))
        .collect();
    let stop = campaign_stop(options, &out, &cells);
    Ok(Campaign {
        options,
        out,
        stop,
        dir_app,
        apps,
        envs,
        cells,
        settings,
    })
}

/// The options every cell of a campaign runs with: `--fences`, `--seed` and the target's (as
/// the first app resolves them; `--app-dir` as given).
fn campaign_settings(
    options: &CampaignOptions,
    apps: &[String],
) -> Result<BTreeMap<String, String>, JobError> {
    let Some(first) = apps.first() else {
        return Ok(BTreeMap::new());
    };
    // Quiet: the first cell resolves the same target and says what there is to say (the
    // simulator fallback note was printed twice).
    let mut settings = target_settings(&resolve(first, options.target, &|_| {})?.target);
    let app_dir = match &options.target.app_dir {
        Some(dir) => crate::places::absolute(dir)?.display().to_string(),
        None => "none (built-in app)".into(),
    };
    settings.insert("--app-dir", app_dir);
    settings.insert("--fences", options.fences.trim().to_string());
    settings.insert("--seed", options.target.backend.seed.to_string());
    Ok(settings
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect())
}

/// A resumed campaign runs with the options its plan records: one given that differs is
/// refused (with `--force`, said; the plan keeps its settings, a cell not started yet runs with
/// the options given). Returns the plan's settings (`asked` for a plan from before they were
/// recorded).
fn refuse_other_settings(
    out: &Path,
    asked: BTreeMap<String, String>,
    options: &CampaignOptions,
    say: Say,
) -> Result<BTreeMap<String, String>, JobError> {
    let Ok(plan) = CampaignPlan::read(out) else {
        return Ok(asked);
    };
    if plan.settings.is_empty() {
        return Ok(asked);
    }
    let given = &options.target.given;
    let changed = differences(&plan.settings, &asked, given);
    let consequence = "cells not started yet would run with the options given now, and each \
                       started cell's journal refuses them (or, with --force, records them)";
    refuse_unless_forced(("resume", out), &changed, (given, consequence), say)?;
    Ok(plan.settings)
}

/// The campaign in `out` whose cell `index` a Slurm array task runs, with that cell.
pub fn campaign_task<'a>(
    options: &'a CampaignOptions<'a>,
    out: &Path,
    index: usize,
) -> Result<(Campaign<'a>, PlannedCell), JobError> {
    let plan = CampaignPlan::read(out).map_err(JobError::BadPlan)?;
    let cell = plan.cell(out, index).map_err(JobError::BadPlan)?.clone();
    let (_, dir_app) = app_list(options.apps, options.target)?;
    let campaign = Campaign {
        options,
        out: out.to_path_buf(),
        stop: plan.stop,
        dir_app,
        apps: Vec::new(),
        envs: Vec::new(),
        cells: plan.cells.iter().map(|c| (c.app.clone(), c.env)).collect(),
        settings: plan.settings.clone(),
    };
    Ok((campaign, cell))
}

impl Campaign<'_> {
    /// The plan of this campaign.
    pub fn plan(&self) -> CampaignPlan {
        CampaignPlan {
            settings: self.settings.clone(),
            ..CampaignPlan::new(&self.apps, &self.envs, self.stop)
        }
    }

    /// Writes the plan into the folder, keeping the Slurm job an earlier plan there names.
    pub fn write_plan(&self) -> Result<(), JobError> {
        let mut plan = self.plan();
        plan.slurm = CampaignPlan::read(&self.out).ok().and_then(|p| p.slurm);
        Ok(plan.write(&self.out)?)
    }

    /// One cell: its check started, resumed, or found finished, and its confidence recorded.
    pub fn run_cell(
        &self,
        (app, env): (&str, Environment),
        executors: &mut Executors,
        progress: &dyn Fn(&Tally),
        say: Say,
    ) -> Result<CellResult, JobError> {
        let journal = cell_journal(&self.out, app, env);
        let target = self.target_for(app);
        let spec = CheckJob {
            app,
            env,
            fences: self.options.fences,
            stop: Some(self.stop),
            journal: &journal,
            resume: self.options.out.resume && journal.exists(),
            target: &target,
            races: None,
        };
        let mut check = open_check(&spec, executors, say)?;
        let finished_before = check.finished();
        let tally = check.run(executors, &mut |tally| progress(tally))?;
        record_confidence(&journal, &tally, say);
        Ok(CellResult {
            meta: check.meta,
            tally,
            finished_before,
        })
    }

    /// Whether cells run in this process rather than a supervised worker.
    pub fn in_process(&self) -> bool {
        self.options.target.in_process
    }

    /// Writes `summary.csv`, `summary.md` and the chart of `table` into the folder.
    pub fn write_summaries(&self, table: &CampaignTable) -> Result<(), JobError> {
        Ok(write_summaries(
            std::slice::from_ref(table),
            None,
            &self.out,
        )?)
    }

    /// The target options for `app`: `--app-dir` only for the app it holds.
    fn target_for(&self, app: &str) -> TargetOptions {
        let mut target = self.options.target.clone();
        if self.dir_app.as_deref() != Some(app) {
            target.app_dir = None;
        }
        target
    }
}

/// The apps asked for, and the name of the `--app-dir` app if there is one.
fn app_list(list: &str, target: &TargetOptions) -> Result<(Vec<String>, Option<String>), JobError> {
    let dir_app = match &target.app_dir {
        Some(dir) => Some(
            load_app_dir(dir)
                .map_err(JobError::BadApp)?
                .name()
                .to_string(),
        ),
        None => None,
    };
    let mut known: Vec<&str> = BUILTIN_APP_NAMES.to_vec();
    known.extend(dir_app.as_deref());
    let apps = parse_apps(list, &known)?;
    Ok((apps, dir_app))
}

/// `--out`; else a new folder of the default family (`results/campaign/<backend>-seed<seed>`,
/// then `-2`, `-3`, …), or with `--resume` the newest unfinished one, else the newest; a resume
/// that finds none starts the first.
pub fn campaign_out(options: &CampaignOptions, say: Say) -> Result<PathBuf, JobError> {
    let parts = options.target.backend.name_parts();
    let base = default_folder("campaign", parts);
    let what = format!(
        "default campaign folders on {}, seed {}",
        parts.backend.name(),
        parts.seed
    );
    let unfinished = |dir: &Path| unfinished(JobKind::Campaign, dir, None);
    let out = choose_folder(&base, options.out, &what, &unfinished, say)?.unwrap_or(base);
    super::interrupt::resumes("--out", &out, &CampaignPlan::path(&out));
    Ok(out)
}

/// A new campaign never writes into a folder that holds journals.
fn refuse_existing(out: &Path) -> Result<(), JobError> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Ok(());
    };
    let has_journal = entries
        .filter_map(Result::ok)
        .any(|e| e.path().extension().is_some_and(|x| x == "csv"));
    if has_journal {
        return Err(JobError::refused(format!(
            "{} already holds a campaign's journals: pass --resume to continue it, or --out to \
             write another",
            out.display()
        )));
    }
    Ok(())
}

/// A campaign resumed must run the cells its plan records: with other apps or environments an
/// unfinished cell would drop out of its summary unseen.
fn refuse_another_plan(out: &Path, apps: &[String], envs: &[Environment]) -> Result<(), JobError> {
    let Ok(recorded) = CampaignPlan::read(out) else {
        return Ok(());
    };
    let mut recorded_apps: Vec<String> = Vec::new();
    let mut recorded_envs: Vec<Environment> = Vec::new();
    for cell in &recorded.cells {
        if !recorded_apps.contains(&cell.app) {
            recorded_apps.push(cell.app.clone());
        }
        if !recorded_envs.contains(&cell.env) {
            recorded_envs.push(cell.env);
        }
    }
    let differs = |field: &str, recorded: String, given: String| {
        JobError::refused(format!(
            "cannot resume {}: its plan has {field} {recorded}, not {given}; give the same \
             {field}, or --out for another campaign",
            out.display()
        ))
    };
    let names = |envs: &[Environment]| envs.iter().map(|e| e.to_string()).collect::<Vec<_>>();
    if recorded_apps != apps {
        return Err(differs("--apps", recorded_apps.join(","), apps.join(",")));
    }
    if recorded_envs != envs {
        let (recorded, given) = (names(&recorded_envs), names(envs));
        return Err(differs("--envs", recorded.join(","), given.join(",")));
    }
    Ok(())
}

/// The stop given; on resume without one, the stop a cell already recorded; else the default.
fn campaign_stop(options: &CampaignOptions, out: &Path, cells: &[(String, Environment)]) -> Stop {
    if let Some(stop) = options.stop {
        return stop;
    }
    let recorded = cells.iter().find_map(|(app, env)| {
        let path = cell_journal(out, app, *env);
        read_meta::<CheckMeta>(&path).ok().map(|m| m.stop)
    });
    match (options.out.resume, recorded) {
        (true, Some(stop)) => stop,
        _ => DEFAULT_STOP,
    }
}

/// `<out>/<app>-<env>.csv`, as the plan names it.
fn cell_journal(out: &Path, app: &str, env: Environment) -> PathBuf {
    out.join(PlannedCell::new(app, env).journal)
}
