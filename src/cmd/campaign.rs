//! `gpuwmm campaign`: a check of every app under every environment, one journal per cell, and
//! the matrix as the paper's tables show it.
//!
//! The cells and their rules are [`gpuwmm::job::campaign`]'s; they run here, one after another,
//! or (`--slurm`, see [`super::campaign_slurm`]) as the tasks of a Slurm job array, each running
//! one cell (`--cell`) of the folder's plan.

use super::campaign_slurm;
use super::{say, target_options, CmdResult, Failure};
use crate::cli::CampaignArgs;
use gpuwmm::campaign::{CampaignTable, Counts};
use gpuwmm::check::Tally;
use gpuwmm::env::Environment;
use gpuwmm::job::campaign::{campaign_task, plan_campaign, Campaign, CampaignOptions};
use gpuwmm::job::check::stop_of;
use gpuwmm::job::naming::Output;
use gpuwmm::job::settings::GivenOptions;
use gpuwmm::job::target::Executors;
use indicatif::ProgressBar;

/// Progress units per cell on the matrix's bar.
const CELL_UNITS: u64 = 1000;

pub fn run(args: &CampaignArgs, given: GivenOptions) -> CmdResult {
    if let Some(dir) = &args.collect {
        return campaign_slurm::collect(dir);
    }
    let target = target_options(&args.target, given);
    let options = CampaignOptions {
        apps: args
            .apps
            .as_deref()
            .expect("clap requires --apps without --collect"),
        envs: args
            .envs
            .as_deref()
            .expect("clap requires --envs without --collect"),
        fences: &args.fences,
        stop: stop_of(args.stop.runs, args.stop.duration),
        out: Output::new(args.out.as_deref(), args.resume),
        target: &target,
    };
    if let Some(index) = args.cell {
        return run_task(&options, index);
    }
    let campaign = plan_campaign(&options, &say)?;
    if args.slurm.slurm {
        return campaign_slurm::submit(args, &mut campaign.plan(), &campaign.out);
    }
    campaign.write_plan()?;
    eprintln!(
        "campaign: {} apps × {} environments, {} per cell, journals in {}",
        campaign.apps.len(),
        campaign.envs.len(),
        campaign.stop,
        campaign.out.display()
    );
    let table = run_cells(&campaign)?;
    campaign.write_summaries(&table)?;
    out!("{}", table.to_markdown())?;
    outln!(
        "\nsummary: {0}/summary.md, {0}/summary.csv, chart {0}/summary.svg",
        campaign.out.display()
    )?;
    Ok(())
}

/// `--cell N` (a Slurm array task): cell `N` of the plan in `--out`, resumed where its journal
/// stops, so a requeued task loses no run.
fn run_task(options: &CampaignOptions, index: usize) -> CmdResult {
    let out = options.out.given.expect("clap requires --out with --cell");
    let (campaign, cell) = campaign_task(options, out, index)?;
    eprintln!(
        "campaign task {index}: {} under {}, {}, journal {}",
        cell.app,
        cell.env,
        campaign.stop,
        out.join(&cell.journal).display()
    );
    let mut executors = Executors::new(options.target.in_process);
    let result = campaign.run_cell((&cell.app, cell.env), &mut executors, &|_| {}, &say)?;
    eprintln!("{}", result.line(index, campaign.cells.len()));
    Ok(())
}

/// Runs (or resumes, or skips when finished) every cell in turn, under one bar.
fn run_cells(campaign: &Campaign) -> Result<CampaignTable, Failure> {
    let bar = super::progress::bar(
        campaign.cells.len() as u64 * CELL_UNITS,
        "{percent}% of the matrix",
    );
    let mut executors = Executors::new(campaign.in_process());
    let mut table = CampaignTable::new();
    // Lines from the cells go above the bar; a note every cell repeats is said once.
    let notes = std::cell::RefCell::new(std::collections::HashSet::new());
    let say_above_bar = |line: &str| {
        if !line.starts_with("note:") || notes.borrow_mut().insert(line.to_string()) {
            bar.suspend(|| eprintln!("{line}"));
        }
    };
    for (i, (app, env)) in campaign.cells.iter().enumerate() {
        let base = i as u64 * CELL_UNITS;
        bar.set_position(base);
        let progress = |tally: &Tally| show_progress(&bar, campaign, base, (app, *env), tally);
        let result = campaign.run_cell((app, *env), &mut executors, &progress, &say_above_bar)?;
        table.add(
            app,
            *env,
            Counts::from(&result.tally),
            &result.meta.provenance,
        );
        let line = result.line(i, campaign.cells.len());
        bar.suspend(|| eprintln!("{line}"));
    }
    bar.finish_and_clear();
    Ok(table)
}

fn show_progress(
    bar: &ProgressBar,
    campaign: &Campaign,
    base: u64,
    (app, env): (&str, Environment),
    tally: &Tally,
) {
    let fraction = campaign.stop.fraction(tally);
    bar.set_position(base + (fraction * CELL_UNITS as f64) as u64);
    bar.set_message(format!(
        "{app} {env}: {} runs, {} errors",
        tally.runs,
        tally.errors()
    ));
}
