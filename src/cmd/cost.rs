//! `gpuwmm cost`: resolve each app's variants (finding or making the harden result `emp`
//! needs), measure them app by app into `cost.csv`, and write the summaries and charts.

use super::check_job::given_stop;
use super::journals::now;
use super::target::resolve;
use super::Failure;
use crate::cli::CostArgs;
use gpuwmm::apps::find_app;
use gpuwmm::backend::select::provenance;
use gpuwmm::check::journal::{read_meta_entry, set_meta_entry};
use gpuwmm::check::local::{open_target_backend, target_app};
use gpuwmm::check::{Journal, Stop, Target};
use gpuwmm::cost::app_measure::AppMeasurement;
use gpuwmm::cost::chart::{cost_chart, Quantity};
use gpuwmm::cost::emp::{harden_args, newest_harden_result, read_harden_result, HardenResult};
use gpuwmm::cost::journal::{AppPlan, WindowPlan};
use gpuwmm::cost::summary::overhead_text;
use gpuwmm::cost::variant::parse_variants;
use gpuwmm::cost::{
    measure_app, CostError, CostMeta, CostPlan, CostProgress, CostRow, CostSummary, Measurement,
    Phase, Variant,
};
use gpuwmm::naming;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuwmm::cost::DEFAULT_REPETITIONS;
/// Where `--emp auto` looks for harden journals.
const HARDEN_DIR: &str = "results/harden";

pub fn run(args: &CostArgs) -> super::CmdResult {
    let out = choose_out(args)?;
    let (mut journal, meta, done) = open(&out, args)?;
    eprintln!("{}", meta.provenance);
    eprintln!(
        "cost: {} (journal {})",
        describe(&meta),
        journal.path().display()
    );
    let mut rows = done;
    for plan in &meta.apps {
        let new = measure_one(&meta, plan, &rows, &mut journal)?;
        rows.extend(new);
    }
    let summary = CostSummary::new(&meta, &rows);
    write_outputs(&out, &summary)?;
    set_meta_entry(journal.path(), "result", &summary)
        .map_err(|e| anyhow::anyhow!("cannot record the result in the sidecar: {e}"))?;
    outln!("{}", summary.markdown())?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// The out folder: --out, a new default folder, or with --resume the newest unfinished one.
fn choose_out(args: &CostArgs) -> Result<PathBuf, Failure> {
    if let Some(out) = &args.out {
        return Ok(out.clone());
    }
    let backend = &args.target.backend;
    let base = PathBuf::from(format!(
        "results/cost/{}-seed{}",
        backend.backend.name(),
        backend.seed
    ));
    if !args.resume {
        return Ok(naming::fresh(&base));
    }
    let unfinished = |dir: &Path| {
        matches!(
            read_meta_entry::<serde_json::Value>(&dir.join("cost.csv"), "result"),
            Ok(None)
        )
    };
    super::journals::newest_to_resume(&base, "cost measurements", &unfinished)?.ok_or_else(|| {
        Failure::bad_input(anyhow::anyhow!(
            "nothing to resume: there is no {} (nor one numbered -2, -3, …); pass --out",
            base.display()
        ))
    })
}

type OpenedCost = (Journal<CostRow>, CostMeta, Vec<CostRow>);

/// A new measurement's journal, or with --resume the recorded one.
fn open(out: &Path, args: &CostArgs) -> Result<OpenedCost, Failure> {
    let path = out.join("cost.csv");
    if args.resume {
        let (journal, meta, rows): (_, CostMeta, _) =
            Journal::resume(&path).map_err(Failure::bad_input)?;
        let recorded: Vec<&str> = meta.apps.iter().map(|a| a.target.app.as_str()).collect();
        if !args.apps.is_empty() && args.apps.iter().map(String::as_str).ne(recorded.clone()) {
            return Err(Failure::bad_input(anyhow::anyhow!(
                "cannot resume {}: it measures {} (not {}); leave the apps out or pass another --out",
                path.display(),
                recorded.join(", "),
                args.apps.join(", ")
            )));
        }
        eprintln!("--resume: {} runs recorded", rows.len());
        return Ok((journal, meta, rows));
    }
    if args.apps.is_empty() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "name at least one app (`gpuwmm apps` lists them)"
        )));
    }
    let meta = plan(args)?;
    std::fs::create_dir_all(out)?;
    let journal = Journal::create(&path, &meta).map_err(Failure::bad_input)?;
    Ok((journal, meta, Vec::new()))
}

/// Resolves every app and its fences, and how they will be measured.
fn plan(args: &CostArgs) -> Result<CostMeta, Failure> {
    let variants = parse_variants(&args.variants)
        .map_err(|e| Failure::bad_input(anyhow::anyhow!("--variants {}: {e}", args.variants)))?;
    let mut apps = Vec::new();
    for (i, name) in args.apps.iter().enumerate() {
        let target = resolve(name, &args.target)?.target;
        let app = target_app(&target).map_err(Failure::bad_input)?;
        let emp = match variants.contains(&Variant::Emp) {
            true => Some(emp_result(args, i, &target)?),
            false => None,
        };
        apps.push(AppPlan {
            cons_fences: AppMeasurement::cons_fences(&*app).map_err(Failure::bad_input)?,
            fence_kind: emp
                .as_ref()
                .map_or(args.target.fence_kind, |e| e.fence_kind),
            emp: emp.map(|e| e.fences),
            target,
        });
    }
    let first = open_measurement(&apps[0], &variants)?;
    Ok(CostMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started: now(),
        provenance: first.1,
        seed: args.target.backend.seed,
        variants,
        apps,
        warmup: args.warmup,
        time_method: first.0.time_method(),
        energy_method: first.0.energy_method(),
        windows: WindowPlan {
            windows: args.windows,
            min_seconds: args.window_time.as_secs_f64(),
            min_repetitions: args.window_runs,
            ..WindowPlan::default()
        },
        stop: stop(args),
        target_ci: args.target_ci,
    })
}

fn stop(args: &CostArgs) -> Stop {
    given_stop(&args.stop).unwrap_or(Stop::Runs(DEFAULT_REPETITIONS))
}

/// The harden result of app number `i`: the file given for it, or with `auto` the newest one
/// (after running `gpuwmm harden` when there is none).
fn emp_result(args: &CostArgs, i: usize, target: &Target) -> Result<HardenResult, Failure> {
    let given = args
        .emp
        .get(i)
        .or(args.emp.last())
        .map_or("auto", String::as_str);
    let result = if given == "auto" {
        auto_emp(args, target)?
    } else {
        read_harden_result(Path::new(given)).map_err(Failure::bad_input)?
    };
    let app = &target.app;
    if result.app != *app
        && result.app != format!("{app}-nf")
        && format!("{}-nf", app) != result.app
    {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "{given}: a hardening of {}, not of {app} (or {app}-nf)",
            result.app
        )));
    }
    if !result.stable {
        eprintln!(
            "warning: {given}: the hardening of {} did not end stable; its fences are measured \
             all the same",
            result.app
        );
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

fn auto_emp(args: &CostArgs, target: &Target) -> Result<HardenResult, Failure> {
    let names = vec![target.app.clone(), hardened_name(&target.app)];
    let dir = Path::new(HARDEN_DIR);
    if let Some((path, result)) = newest_harden_result(dir, &names, target.backend) {
        eprintln!(
            "emp for {}: the hardening in {}",
            target.app,
            path.display()
        );
        return Ok(result);
    }
    let name = hardened_name(&target.app);
    eprintln!(
        "emp for {}: no finished, stable hardening of {} on this backend under {HARDEN_DIR}; \
         running `gpuwmm harden {name}` first",
        target.app,
        names.join(" or ")
    );
    run_harden(args, target, &name)?;
    newest_harden_result(dir, &names, target.backend)
        .map(|(_, result)| result)
        .ok_or_else(|| {
            Failure::from(anyhow::anyhow!(
                "`gpuwmm harden {name}` did not end with a stable fence set; pass --emp FILE \
                 or leave emp out (--variants no,cons)"
            ))
        })
}

/// Runs `gpuwmm harden` on the same backend, letting it print its progress.
fn run_harden(args: &CostArgs, target: &Target, name: &str) -> Result<(), Failure> {
    let profile = args.target.profile.as_deref();
    let seed = args.target.backend.seed;
    let status = Command::new(std::env::current_exe()?)
        .args(harden_args(target, profile, seed, name))
        .status()?;
    if !status.success() {
        return Err(anyhow::anyhow!(
            "`gpuwmm harden {name}` failed ({status}; its error above says why): pass --emp FILE \
             or leave emp out (--variants no,cons)"
        )
        .into());
    }
    Ok(())
}

/// Opens an app's measurement: its variants loaded on its backend, and the backend's
/// provenance.
fn open_measurement(
    plan: &AppPlan,
    variants: &[Variant],
) -> Result<(AppMeasurement, String), Failure> {
    let target = &plan.target;
    let backend = open_target_backend(target)?;
    let provenance = provenance(&*backend);
    let app = target_app(target).map_err(Failure::bad_input)?;
    let measurement = AppMeasurement::open(
        target,
        backend,
        app,
        variants,
        plan.emp.as_ref(),
        plan.fence_kind,
    )
    .map_err(bad_input_if_app)?;
    Ok((measurement, provenance))
}

fn bad_input_if_app(e: CostError) -> Failure {
    match e {
        CostError::App(_)
        | CostError::NoSuchSite { .. }
        | CostError::AnotherSite { .. }
        | CostError::EmpResult { .. } => Failure::bad_input(e),
        other => Failure::from(other),
    }
}

/// Measures one app, journaling every run; returns the new rows.
fn measure_one(
    meta: &CostMeta,
    plan: &AppPlan,
    done: &[CostRow],
    journal: &mut Journal<CostRow>,
) -> Result<Vec<CostRow>, Failure> {
    let (mut measurement, provenance) = open_measurement(plan, &meta.variants)?;
    if provenance != meta.provenance {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "cannot measure {} here: the measurement was started on \"{}\", this is \"{}\"; \
             pass another --out",
            plan.target.app,
            meta.provenance,
            provenance
        )));
    }
    let cost_plan = CostPlan {
        app: plan.target.app.clone(),
        variants: meta.variants.clone(),
        seed: meta.seed,
        warmup: meta.warmup,
        stop: meta.stop,
        target_ci: meta.target_ci,
        windows: meta.windows,
    };
    let bar = progress_bar(&cost_plan);
    let mut new = Vec::new();
    let mut record = |row: &CostRow| -> Result<(), CostError> {
        journal.append(row)?;
        new.push(row.clone());
        Ok(())
    };
    let end = measure_app(&mut measurement, &cost_plan, done, &mut record, &mut |p| {
        update(&bar, &cost_plan, p)
    })
    .map_err(bad_input_if_app)?;
    bar.finish_and_clear();
    eprintln!("{}: timing ended: {end}", cost_plan.app);
    Ok(new)
}

fn progress_bar(plan: &CostPlan) -> ProgressBar {
    let length = match plan.stop {
        Stop::Runs(n) => n,
        Stop::Seconds(s) => s.ceil() as u64,
    };
    let unit = match plan.stop {
        Stop::Runs(_) => "{pos}/{len} repetitions",
        Stop::Seconds(_) => "{pos}/{len} s",
    };
    let bar = super::progress::bar(length, unit);
    bar.set_prefix(format!("{} ", plan.app));
    bar
}

fn update(bar: &ProgressBar, plan: &CostPlan, p: &CostProgress) {
    bar.set_position(match plan.stop {
        Stop::Runs(_) => p.repetitions,
        Stop::Seconds(_) => p.elapsed_s as u64,
    });
    let overheads: Vec<String> = p
        .overheads
        .iter()
        .map(|(v, i)| format!("{v} {}", i.map_or("…".to_string(), |i| overhead_text(&i))))
        .collect();
    let phase = match p.phase {
        Phase::Time => String::new(),
        Phase::Energy => format!("energy window {}/{} · ", p.windows.0 + 1, p.windows.1),
    };
    bar.set_message(format!(
        "{phase}{} · {} discarded",
        overheads.join(" · "),
        p.discarded
    ));
}

fn describe(meta: &CostMeta) -> String {
    let apps: Vec<&str> = meta.apps.iter().map(|a| a.target.app.as_str()).collect();
    let variants: Vec<&str> = meta.variants.iter().map(|v| v.name()).collect();
    format!(
        "{} × {}, {}; time: {}; energy: {}",
        apps.join(", "),
        variants.join("/"),
        meta.stop,
        meta.time_method.describe(),
        meta.energy_method
    )
}

/// summary.json, summary.md, cost.svg and (where energy was measured) energy.svg.
fn write_outputs(out: &Path, summary: &CostSummary) -> Result<(), Failure> {
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(summary)?,
    )?;
    std::fs::write(out.join("summary.md"), summary.markdown())?;
    let note = format!("{} · medians with 95% intervals", summary.provenance);
    for (quantity, file) in [
        (Quantity::Time, "cost.svg"),
        (Quantity::Energy, "energy.svg"),
    ] {
        match cost_chart(summary, quantity, &note) {
            Ok(Some(svg)) => std::fs::write(out.join(file), svg)?,
            Ok(None) => {}
            Err(e) => eprintln!("warning: {file}: {e}"),
        }
    }
    Ok(())
}
