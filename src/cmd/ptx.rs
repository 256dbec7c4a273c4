//! `gpuwmm ptx sites` and `gpuwmm ptx instrument`.

use super::{CmdResult, Failure};
use crate::cli::{InputArgs, InstrumentArgs, PtxCommand, SitesArgs};
use gpuwmm::input::{load_kernel_file, LoadedPtx};
use gpuwmm::job::sites::list_sites;
use gpuwmm::ptx::passes::fences::{
    fence_count, fence_sites, insert_fences, select_sites, strip_fences,
};
use gpuwmm::ptx::passes::harness::{harness, HarnessOptions};
use gpuwmm::ptx::{print, Module};
use std::io::Write;

pub fn run(command: PtxCommand) -> CmdResult {
    match command {
        PtxCommand::Sites(args) => sites(&args),
        PtxCommand::Instrument(args) => instrument(&args),
    }
}

fn load(input: &InputArgs) -> Result<LoadedPtx, Failure> {
    load_kernel_file(&input.input, &input.arch).map_err(Failure::bad_input)
}

fn sites(args: &SitesArgs) -> CmdResult {
    let input = args.input.as_deref();
    let listed = list_sites(input, args.app_dir.as_deref(), &args.arch, args.granularity)
        .map_err(Failure::bad_input)?;
    let sites = listed.sites();
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, sites)?;
        writeln!(out)?;
        return Ok(());
    }
    let (text, warnings) = listed.render();
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    write!(out, "{text}")?;
    Ok(())
}

fn instrument(args: &InstrumentArgs) -> CmdResult {
    let loaded = load(&args.input)?;
    let mut module = loaded.module;
    if args.strip {
        let (stripped, removed) = strip_fences(&module);
        eprintln!("stripped {removed} fences");
        module = stripped;
    }
    let sites = fence_sites(&module, args.input.granularity);
    let chosen =
        select_sites(&sites, &args.fences).map_err(|e| Failure::bad_input(anyhow::anyhow!(e)))?;
    if !chosen.is_empty() {
        eprintln!(
            "inserted {} {} fences at {} of {} sites",
            fence_count(&chosen),
            args.fence_kind,
            chosen.len(),
            sites.len()
        );
    }
    let mut module = insert_fences(&module, &chosen, args.fence_kind);
    if args.harness {
        module = add_harness(&module, args)?;
    }
    let text = print(&module);
    match &args.output {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(())
}

fn add_harness(module: &Module, args: &InstrumentArgs) -> Result<Module, Failure> {
    let kernel = match &args.kernel {
        Some(k) => k.clone(),
        None => only_kernel(module)?,
    };
    let stress = args
        .stress
        .strategy(&args.sequence)
        .map_err(Failure::bad_input)?;
    harness(module, &kernel, &HarnessOptions { stress }).map_err(Failure::bad_input)
}

fn only_kernel(module: &Module) -> Result<String, Failure> {
    let names: Vec<_> = module.kernels().map(|k| k.name.clone()).collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Failure::bad_input(anyhow::anyhow!(
            "the module has no kernel to harness"
        ))),
        _ => Err(Failure::bad_input(anyhow::anyhow!(
            "the module has several kernels ({}); choose one with --kernel",
            names.join(", ")
        ))),
    }
}
