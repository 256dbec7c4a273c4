//! `gpuwmm cost`: measure each app's variants into `cost.csv` (the plan, the journal and the
//! summaries are [`gpuwmm::job::cost`]'s), with a bar per app, and print the summary.

use super::{say, target_options, CmdResult};
use crate::cli::CostArgs;
use gpuwmm::check::Stop;
use gpuwmm::cost::journal::WindowPlan;
use gpuwmm::cost::summary::overhead_text;
use gpuwmm::cost::{CostMeta, CostPlan, CostProgress, Phase};
use gpuwmm::job::check::stop_of;
use gpuwmm::job::cost::{open_cost, CostOptions};
use gpuwmm::job::naming::Output;
use gpuwmm::job::settings::GivenOptions;
use indicatif::ProgressBar;

pub fn run(args: &CostArgs, given: GivenOptions) -> CmdResult {
    let target = target_options(&args.target, given);
    let options = CostOptions {
        apps: &args.apps,
        variants: &args.variants,
        emp: &args.emp,
        stop: stop_of(args.stop.runs, args.stop.duration),
        target_ci: args.target_ci,
        warmup: args.warmup,
        windows: WindowPlan {
            windows: args.windows,
            min_seconds: args.window_time.as_secs_f64(),
            min_repetitions: args.window_runs,
            ..WindowPlan::default()
        },
        out: Output::new(args.out.as_deref(), args.resume),
        target: &target,
    };
    let mut cost = open_cost(&options, &say)?;
    eprintln!("{}", cost.meta.provenance);
    eprintln!(
        "cost: {} (journal {})",
        describe(&cost.meta),
        cost.journal.path().display()
    );
    for i in 0..cost.meta.apps.len() {
        let plan = cost.plan_of(&cost.meta.apps[i]);
        let bar = progress_bar(&plan);
        let end = cost.measure(i, &mut |p| update(&bar, &plan, p))?;
        bar.finish_and_clear();
        eprintln!("{}: timing ended: {end}", plan.app);
    }
    let summary = cost.finish(&say)?;
    outln!("{}", summary.markdown())?;
    eprintln!("wrote {}", cost.out.display());
    Ok(())
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
