//! `gpuwmm litmus model` (the PTX model's allowed states, and agreement with known verdicts)
//! and `gpuwmm litmus generate` (families of tests with the model's verdicts).

use super::{CmdResult, Failure};
use crate::cli::{LitmusGenerateArgs, LitmusModelArgs};
use gpuwmm::litmus::file::collect_files;
use gpuwmm::litmus::file::expect::{write_csv, Expectations};
use gpuwmm::litmus::generate::{write_families, Spread};
use gpuwmm::litmus::model::suite::model_files;
use std::path::Path;

pub fn run(args: &LitmusModelArgs) -> CmdResult {
    let files = collect_files(&args.paths).map_err(Failure::bad_input)?;
    if files.is_empty() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "no .litmus files in the paths given"
        )));
    }
    let expectations = Expectations::load_if(args.expect.as_deref()).map_err(Failure::bad_input)?;
    let mut printed = Ok(());
    let suite = model_files(
        &files,
        expectations.as_ref(),
        args.csv.as_deref(),
        args.max_candidates,
        |_, result| {
            if let (Some(text), true) = (result.text(args.quiet), printed.is_ok()) {
                printed = outln!("{text}");
            }
        },
    )
    .map_err(Failure::bad_input)?;
    printed?;
    let summary = suite.table.summary();
    if expectations.is_some() {
        out!("\n{}", suite.table.render())?;
        outln!("{summary}")?;
    }
    if let Some(path) = &args.csv {
        write_csv(path, &suite.csv_rows)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        outln!("model verdicts written to {}", path.display())?;
    }
    let disagree = (summary.disagree > 0).then(|| {
        format!(
            "{} test(s) where the model's verdict disagrees with {}",
            summary.disagree,
            args.expect.as_deref().unwrap_or(Path::new("-")).display()
        )
    });
    super::litmus_file::finding_then_malformed(disagree, suite.malformed)
}

pub fn generate(args: &LitmusGenerateArgs) -> CmdResult {
    let spread = match args.across_gpus {
        true => Spread::AcrossGpus,
        false => Spread::OneGpu,
    };
    let written = write_families(&args.out, spread).map_err(|e| anyhow::anyhow!("{e}"))?;
    outln!("{written}")?;
    for file in &written.stale.foreign {
        eprintln!(
            "warning: {} is no generated test (kept): a run of {} runs it too, with no verdict",
            file.display(),
            args.out.display()
        );
    }
    Ok(())
}
