//! A cost measurement as a job: its folder (new, or the newest unfinished one with
//! `--resume`), its plan (each app's target and fence sets, finding or making the hardening
//! `emp` needs), each app measured into `cost.csv`, and the summaries and charts written at the
//! end, with the result recorded in the sidecar.

use super::naming::{choose_folder, default_folder, refuse_folder_clash, Output};
use super::settings::{
    app_hash, differences, hash_differences, refuse_or_force, stop_settings, target_settings,
    Settings,
};
use super::sidecar::{create_journal, now, resume_journal, unfinished, JobKind};
use super::target::{app_name, resolve, TargetOptions};
use super::{JobError, Say};
use crate::apps::find_app;
use crate::backend::select::provenance;
use crate::check::journal::set_meta_entry;
use crate::check::local::{open_target_backend, target_app};
use crate::check::{Journal, Stop, Target};
use crate::cost::app_measure::AppMeasurement;
use crate::cost::chart::{cost_chart, Quantity};
use crate::cost::emp::{harden_args, newest_harden_result, read_harden_result, HardenResult};
use crate::cost::journal::{AppPlan, WindowPlan};
use crate::cost::variant::parse_variants;
use crate::cost::DEFAULT_REPETITIONS;
use crate::cost::{
    measure_app, CostError, CostMeta, CostPlan, CostProgress, CostRow, CostSummary, Measurement,
    Variant,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The journal's name in a measurement's folder.
pub const JOURNAL: &str = "cost.csv";
/// Where `--emp auto` looks for harden journals.
const HARDEN_DIR: &str = "results/harden";

/// A cost measurement as given on the command line.
pub struct CostOptions<'a> {
    pub apps: &'a [String],
    /// `no,emp,cons` or a part of it.
    pub variants: &'a str,
    /// Per app (the last one for the rest): a harden result, or `auto`.
    pub emp: &'a [String],
    pub stop: Option<Stop>,
    pub target_ci: Option<f64>,
    pub warmup: u64,
    /// The energy windows of each variant.
    pub windows: WindowPlan,
    pub out: Output<'a>,
    pub target: &'a TargetOptions,
}

/// A measurement whose journal is open.
pub struct OpenCost {
    pub out: PathBuf,
    pub journal: Journal<CostRow>,
    pub meta: CostMeta,
    /// Every row so far, those recorded before a resume included.
    pub rows: Vec<CostRow>,
}

/// Opens the measurement `options` describe: its folder chosen, its journal started (after
/// planning every app) or resumed.
pub fn open_cost(options: &CostOptions, say: Say) -> Result<OpenCost, JobError> {
    let out = choose_out(options, say)?;
    let path = out.join(JOURNAL);
    if options.out.resume {
        let (journal, mut meta, rows): (_, CostMeta, _) = resume_journal(&path)?;
        refuse_other_apps(&path, &meta, options.apps)?;
        refuse_changes(&path, &mut meta, rows.len(), options, say)?;
        say(&format!("--resume: {} runs recorded", rows.len()));
        return Ok(OpenCost {
            out,
            journal,
            meta,
            rows,
        });
    }
    let apps = cost_apps(options)?;
    let meta = plan(options, &apps, say)?;
    std::fs::create_dir_all(&out)?;
    let journal = create_journal(&path, JobKind::Cost, &meta).map_err(super::bad_journal)?;
    Ok(OpenCost {
        out,
        journal,
        meta,
        rows: Vec::new(),
    })
}

/// The out folder: given, a new default folder, or with `resume` the newest unfinished one.
fn choose_out(options: &CostOptions, say: Say) -> Result<PathBuf, JobError> {
    let base = default_folder("cost", options.target.backend.name_parts());
    let unfinished = |dir: &Path| unfinished(JobKind::Cost, dir, None);
    let out = choose_folder(&base, options.out, "cost measurements", &unfinished, say)?
        .ok_or_else(|| {
            JobError::refused(format!(
                "nothing to resume: there is no {} (nor one numbered -2, -3, …); pass --out",
                base.display()
            ))
        })?;
    let journal = out.join(JOURNAL);
    refuse_folder_clash(&out, &journal, options.out.resume, "cost measurement")?;
    super::interrupt::resumes("--out", &out, &journal);
    Ok(out)
}

/// A measurement resumed with apps named must be of those apps.
fn refuse_other_apps(path: &Path, meta: &CostMeta, apps: &[String]) -> Result<(), JobError> {
    let recorded: Vec<&str> = meta.apps.iter().map(|a| a.target.app.as_str()).collect();
    if apps.is_empty() || apps.iter().map(String::as_str).eq(recorded.iter().copied()) {
        return Ok(());
    }
    Err(JobError::refused(format!(
        "cannot resume {}: it measures {} (not {}); leave the apps out or pass another --out",
        path.display(),
        recorded.join(", "),
        apps.join(", ")
    )))
}

/// The options a cost journal records, as the command line spells them (the target's are its
/// first app's).
pub fn cost_settings(meta: &CostMeta) -> Settings {
    let mut settings = meta
        .apps
        .first()
        .map_or_else(Settings::new, |app| target_settings(&app.target));
    let variants: Vec<String> = meta.variants.iter().map(|v| v.to_string()).collect();
    settings.insert("--variants", variants.join(","));
    settings.insert("--seed", meta.seed.to_string());
    settings.insert("--warmup", meta.warmup.to_string());
    settings.insert("--windows", meta.windows.windows.to_string());
    settings.insert("--window-time", format!("{} s", meta.windows.min_seconds));
    settings.insert("--window-runs", meta.windows.min_repetitions.to_string());
    let target_ci = meta.target_ci.map_or("none".into(), |c| c.to_string());
    settings.insert("--target-ci", target_ci);
    stop_settings(&mut settings, ["--runs", "--duration"], meta.stop);
    settings
}

/// A measurement resumes only with the options it records (those given) and with its apps'
/// sources and PTX unchanged, unless `--force` (see [`super::settings`]).
fn refuse_changes(
    path: &Path,
    meta: &mut CostMeta,
    rows: usize,
    options: &CostOptions,
    say: Say,
) -> Result<(), JobError> {
    let given = &options.target.given;
    let mut changed = differences(&cost_settings(meta), &asked(options, meta, say)?, given);
    for app in &mut meta.apps {
        let now = app_hash(&app.target)?;
        for mut difference in hash_differences(app.app_hash.as_ref(), &now) {
            difference.option = format!("{} of {}", difference.option, app.target.app);
            changed.push(difference);
        }
        app.app_hash = Some(now);
    }
    let apps = serde_json::to_value(&meta.apps).map_err(|e| JobError::Other(e.to_string()))?;
    refuse_or_force(path, rows, changed, (given, ("apps", apps)), say)
}

/// The settings a resume is asked for: the first app's target resolved anew only when a target
/// option is given (else the journal's, which then cannot differ).
fn asked(options: &CostOptions, meta: &CostMeta, say: Say) -> Result<Settings, JobError> {
    let given = &options.target.given;
    let mut apps = meta.apps.clone();
    if let Some(first) = apps.first_mut() {
        if target_settings(&first.target)
            .keys()
            .any(|o| given.named(o))
        {
            first.target = resolve(&first.target.app, options.target, say)?.target;
        }
    }
    let variants = match given.named("--variants") {
        true => parse_variants(options.variants)
            .map_err(|e| JobError::refused(format!("--variants {}: {e}", options.variants)))?,
        false => meta.variants.clone(),
    };
    Ok(cost_settings(&CostMeta {
        apps,
        variants,
        seed: options.target.backend.seed,
        warmup: options.warmup,
        windows: options.windows,
        target_ci: options.target_ci,
        stop: options.stop.unwrap_or(meta.stop),
        ..meta.clone()
    }))
}

/// The apps a new measurement measures: those named, else the app of `--app-dir` (as `check`
/// and `harden` take it).
fn cost_apps(options: &CostOptions) -> Result<Vec<String>, JobError> {
    if !options.apps.is_empty() {
        return Ok(options.apps.to_vec());
    }
    Ok(vec![app_name(None, options.target.app_dir.as_deref())?])
}

/// Resolves every app (`names`) and its fences, and how they will be measured.
fn plan(options: &CostOptions, names: &[String], say: Say) -> Result<CostMeta, JobError> {
    let variants = parse_variants(options.variants)
        .map_err(|e| JobError::refused(format!("--variants {}: {e}", options.variants)))?;
    let mut apps = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let target = resolve(name, options.target, say)?.target;
        let app = target_app(&target).map_err(JobError::BadApp)?;
        let emp = match variants.contains(&Variant::Emp) {
            true => Some(emp_result(options, i, &target, say)?),
            false => None,
        };
        apps.push(AppPlan {
            app_hash: Some(app_hash(&target)?),
            cons_fences: AppMeasurement::cons_fences(&*app, target.size)
                .map_err(JobError::BadCost)?,
            fence_kind: emp
                .as_ref()
                .map_or(options.target.fence_kind, |e| e.fence_kind),
            emp: emp.map(|e| e.fences),
            target,
        });
    }
    let first = open_measurement(&apps[0], &variants)?;
    Ok(CostMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        provenance: first.1,
        seed: options.target.backend.seed,
        variants,
        apps,
        warmup: options.warmup,
        time_method: first.0.time_method(),
        energy_method: first.0.energy_method(),
        windows: options.windows,
        stop: options.stop.unwrap_or(Stop::Runs(DEFAULT_REPETITIONS)),
        target_ci: options.target_ci,
    })
}

/// The harden result of app number `i`: the file given for it, or with `auto` the newest one
/// (after running `gpuwmm harden` when there is none).
fn emp_result(
    options: &CostOptions,
    i: usize,
    target: &Target,
    say: Say,
) -> Result<HardenResult, JobError> {
    let given = options
        .emp
        .get(i)
        .or(options.emp.last())
        .map_or("auto", String::as_str);
    let result = if given == "auto" {
        auto_emp(options, target, say)?
    } else {
        read_harden_result(Path::new(given)).map_err(JobError::BadCost)?
    };
    let app = &target.app;
    if result.app != *app && result.app != format!("{app}-nf") {
        return Err(JobError::refused(format!(
            "{given}: a hardening of {}, not of {app} (or {app}-nf)",
            result.app
        )));
    }
    if !result.stable {
        say(&format!(
            "warning: {given}: the hardening of {} did not end stable; its fences are measured \
             all the same",
            result.app
        ));
    }
    Ok(result)
}

/// The app whose hardening gives `emp`: the `-nf` variant of an app that has one (the paper
/// hardened the fence-less variants), else the app itself.
fn hardened_name(app: &str) -> String {
    let nf = format!("{app}-nf");
    match find_app(&nf) {
        Ok(_) => nf,
        Err(_) => app.to_string(),
    }
}

fn auto_emp(options: &CostOptions, target: &Target, say: Say) -> Result<HardenResult, JobError> {
    let names = vec![target.app.clone(), hardened_name(&target.app)];
    let dir = Path::new(HARDEN_DIR);
    if let Some((path, result)) = newest_harden_result(dir, &names, target.backend) {
        say(&format!(
            "emp for {}: the hardening in {}",
            target.app,
            path.display()
        ));
        return Ok(result);
    }
    let name = hardened_name(&target.app);
    say(&format!(
        "emp for {}: no finished, stable hardening of {} on this backend under {HARDEN_DIR}; \
         running `gpuwmm harden {name}` first",
        target.app,
        names.join(" or ")
    ));
    run_harden(options, target, &name)?;
    newest_harden_result(dir, &names, target.backend)
        .map(|(_, result)| result)
        .ok_or_else(|| {
            JobError::Other(format!(
                "`gpuwmm harden {name}` did not end with a stable fence set; pass --emp FILE \
                 or leave emp out (--variants no,cons)"
            ))
        })
}

/// Runs this program's `harden` on the same target (backend, app dir, size, profile, fences,
/// stress, deadline, seed), letting it print its progress.
fn run_harden(options: &CostOptions, target: &Target, name: &str) -> Result<(), JobError> {
    let profile = options.target.profile.as_deref();
    let seed = options.target.backend.seed;
    let status = Command::new(std::env::current_exe()?)
        .args(harden_args(target, profile, seed, name))
        .status()?;
    if !status.success() {
        return Err(JobError::Other(format!(
            "`gpuwmm harden {name}` failed ({status}; its error above says why): pass --emp FILE \
             or leave emp out (--variants no,cons)"
        )));
    }
    Ok(())
}

/// Opens an app's measurement: its variants loaded on its backend, and the backend's
/// provenance.
fn open_measurement(
    plan: &AppPlan,
    variants: &[Variant],
) -> Result<(AppMeasurement, String), JobError> {
    let target = &plan.target;
    let backend = open_target_backend(target)?;
    let provenance = provenance(&*backend);
    let app = target_app(target).map_err(JobError::BadApp)?;
    let measurement = AppMeasurement::open(
        target,
        backend,
        app,
        variants,
        plan.emp.as_ref(),
        plan.fence_kind,
    )?;
    Ok((measurement, provenance))
}

impl OpenCost {
    /// What each app's measurement runs.
    pub fn plan_of(&self, app: &AppPlan) -> CostPlan {
        let meta = &self.meta;
        CostPlan {
            app: app.target.app.clone(),
            variants: meta.variants.clone(),
            seed: meta.seed,
            warmup: meta.warmup,
            stop: meta.stop,
            target_ci: meta.target_ci,
            windows: meta.windows,
        }
    }

    /// Measures app number `i`, journaling every run, calling `progress` as it goes; returns
    /// how its timing ended.
    pub fn measure(
        &mut self,
        i: usize,
        progress: &mut dyn FnMut(&CostProgress),
    ) -> Result<crate::cost::driver::TimingEnd, JobError> {
        let plan = self.meta.apps[i].clone();
        let (mut measurement, provenance) = open_measurement(&plan, &self.meta.variants)?;
        if provenance != self.meta.provenance {
            return Err(JobError::refused(format!(
                "cannot measure {} here: the measurement was started on \"{}\", this is \"{}\"; \
                 pass another --out",
                plan.target.app, self.meta.provenance, provenance
            )));
        }
        let cost_plan = self.plan_of(&plan);
        let (journal, rows) = (&mut self.journal, &mut self.rows);
        let done = rows.clone();
        let mut record = |row: &CostRow| -> Result<(), CostError> {
            journal.append(row)?;
            rows.push(row.clone());
            Ok(())
        };
        Ok(measure_app(
            &mut measurement,
            &cost_plan,
            &done,
            &mut record,
            progress,
        )?)
    }

    /// Sums the rows up, writes summary.json, summary.md, cost.svg and (where energy was
    /// measured) energy.svg, and records the summary in the sidecar.
    pub fn finish(&self, say: Say) -> Result<CostSummary, JobError> {
        let summary = CostSummary::new(&self.meta, &self.rows);
        write_outputs(&self.out, &summary, say)?;
        set_meta_entry(self.journal.path(), "result", &summary).map_err(|e| {
            JobError::Other(format!("cannot record the result in the sidecar: {e}"))
        })?;
        Ok(summary)
    }
}

/// summary.json, summary.md, cost.svg and (where energy was measured) energy.svg.
fn write_outputs(out: &Path, summary: &CostSummary, say: Say) -> Result<(), JobError> {
    let json = serde_json::to_string_pretty(summary).map_err(|e| JobError::Other(e.to_string()))?;
    std::fs::write(out.join("summary.json"), json)?;
    std::fs::write(out.join("summary.md"), summary.markdown())?;
    let note = format!("{} · medians with 95% intervals", summary.provenance);
    for (quantity, file) in [
        (Quantity::Time, "cost.svg"),
        (Quantity::Energy, "energy.svg"),
    ] {
        match cost_chart(summary, quantity, &note) {
            Ok(Some(svg)) => std::fs::write(out.join(file), svg)?,
            Ok(None) => {}
            Err(e) => say(&format!("warning: {file}: {e}")),
        }
    }
    Ok(())
}
