//! `gpuwmm ptx sites` and `gpuwmm ptx instrument`.

use super::{CmdResult, Failure};
use crate::cli::{InputArgs, InstrumentArgs, PtxCommand, SitesArgs, StressArg};
use gpuwmm::apps::{app_sites, find_app, load_app_dir};
use gpuwmm::input::{load_kernel_file, read_named_source, LoadedPtx};
use gpuwmm::ptx::passes::fences::{
    fence_count, fence_sites, insert_fences, select_sites, strip_fences, FenceSite,
};
use gpuwmm::ptx::passes::harness::{harness, HarnessOptions};
use gpuwmm::ptx::passes::stress::{parse_sequence, StressStrategy};
use gpuwmm::ptx::{print, Module};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

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
    let granularity = args.granularity.into();
    let listed = match (&args.input, &args.app_dir) {
        (Some(input), None) if is_kernel_file(input) => {
            let loaded = load_kernel_file(input, &args.arch).map_err(Failure::bad_input)?;
            let sites = fence_sites(&loaded.module, granularity);
            match input.extension().is_some_and(|e| e == "cu") {
                true => Listed::Cuda(sites),
                false => Listed::App(sites),
            }
        }
        (name, dir) => {
            let app = match dir {
                Some(dir) => load_app_dir(dir),
                None => find_app(&name.as_ref().expect("required").to_string_lossy()),
            }
            .map_err(Failure::bad_input)?;
            Listed::App(app_sites(&*app, granularity).map_err(Failure::bad_input)?)
        }
    };
    let sites = listed.sites();
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, sites)?;
        writeln!(out)?;
        return Ok(());
    }
    let mut sources = SourceCache::default();
    let mut function = None;
    for site in sites {
        if matches!(listed, Listed::Cuda(_)) && function != Some(&site.function) {
            writeln!(out, "kernel {}:", site.function)?;
            function = Some(&site.function);
        }
        write_site(&mut out, site, &mut sources)?;
    }
    let accesses: usize = sites.iter().map(|s| s.accesses.len()).sum();
    writeln!(
        out,
        "{} fence sites, {accesses} access instructions",
        sites.len()
    )?;
    if let Listed::Cuda(_) = listed {
        writeln!(
            out,
            "note: numbered over every function of the file, check kernels included; for the \
             ids check --fences and harden use, name the app (`ptx sites APP` or --app-dir DIR)"
        )?;
    }
    Ok(())
}

/// What `ptx sites` lists: a `.cu` file's sites (every kernel, listed kernel by kernel), or
/// the sites of an app or a PTX file, as they are numbered when it runs.
enum Listed {
    Cuda(Vec<FenceSite>),
    App(Vec<FenceSite>),
}

impl Listed {
    fn sites(&self) -> &[FenceSite] {
        match self {
            Listed::Cuda(sites) | Listed::App(sites) => sites,
        }
    }
}

/// Whether `path` names a file rather than an app: it exists, or has an extension or a folder.
fn is_kernel_file(path: &Path) -> bool {
    path.exists() || path.extension().is_some() || path.components().count() > 1
}

fn write_site(
    out: &mut impl Write,
    site: &FenceSite,
    sources: &mut SourceCache,
) -> std::io::Result<()> {
    let place = site
        .source
        .as_ref()
        .map_or_else(|| "(no line info)".to_string(), |s| s.to_string());
    writeln!(out, "#{:<3} {place}  [{}]", site.id, site.function)?;
    if let Some(line) = site
        .source
        .as_ref()
        .and_then(|s| sources.line(&s.file, s.line))
    {
        writeln!(out, "       | {}", line.trim())?;
    }
    for access in &site.accesses {
        let inner = match &access.inner {
            Some(inner) if Some(inner) != site.source.as_ref() => {
                format!("   (inlined from {inner})")
            }
            _ => String::new(),
        };
        writeln!(out, "       > {}{inner}", access.ptx.replace('\t', " "))?;
    }
    Ok(())
}

/// Source files read once, for showing the line of each site; a file that is not read (not a
/// regular file, too large) gets one warning saying why, and its sites no line.
#[derive(Default)]
struct SourceCache {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceCache {
    fn line(&mut self, file: &str, line: u32) -> Option<String> {
        let lines = self.files.entry(file.to_string()).or_insert_with(|| {
            match read_named_source(Path::new(file)) {
                Ok(text) => Some(text.lines().map(str::to_string).collect()),
                Err(why) => {
                    eprintln!("warning: {file}: source lines not shown: {why}");
                    None
                }
            }
        });
        lines.as_ref()?.get(line.checked_sub(1)? as usize).cloned()
    }
}

fn instrument(args: &InstrumentArgs) -> CmdResult {
    let loaded = load(&args.input)?;
    let mut module = loaded.module;
    if args.strip {
        let (stripped, removed) = strip_fences(&module);
        eprintln!("stripped {removed} fences");
        module = stripped;
    }
    let sites = fence_sites(&module, args.input.granularity.into());
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
    let stress = match args.stress {
        StressArg::None => StressStrategy::None,
        StressArg::Rand => StressStrategy::Rand,
        StressArg::Cache => StressStrategy::Cache,
        StressArg::Sys => StressStrategy::Sys {
            sequence: parse_sequence(&args.sequence).map_err(Failure::bad_input)?,
        },
    };
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
