//! `gpuwmm litmus model` (the PTX model's allowed states, and agreement with known verdicts)
//! and `gpuwmm litmus generate` (families of tests with the model's verdicts).

use super::{CmdResult, Failure, EXIT_BAD_INPUT};
use crate::cli::{LitmusGenerateArgs, LitmusModelArgs};
use gpuwmm::litmus::file::collect_files;
use gpuwmm::litmus::file::expect::Expectations;
use gpuwmm::litmus::generate::write_families;
use gpuwmm::litmus::model::compare::write_csv;
use gpuwmm::litmus::model::suite::{model_files, FileResult};
use std::path::Path;

pub fn run(args: &LitmusModelArgs) -> CmdResult {
    let files = collect_files(&args.paths).map_err(Failure::bad_input)?;
    if files.is_empty() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "no .litmus files in the paths given"
        )));
    }
    let expectations = args
        .expect
        .as_deref()
        .map(Expectations::load)
        .transpose()
        .map_err(Failure::bad_input)?;
    let csv_dir = args
        .csv
        .as_deref()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut printed = Ok(());
    let suite = model_files(&files, expectations.as_ref(), &csv_dir, |file, result| {
        let text = match result {
            FileResult::Modelled(o) if !args.quiet => o.report(),
            FileResult::Modelled(_) => return,
            FileResult::Refused(why) => format!("Test {} refused: {why}\n", file.display()),
            FileResult::Malformed(why) => format!("error: {why}\n"),
        };
        if printed.is_ok() {
            printed = outln!("{text}");
        }
    })
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
    if suite.malformed > 0 {
        return Err(Failure {
            error: anyhow::anyhow!(
                "{} malformed litmus file(s) (see the errors above)",
                suite.malformed
            ),
            exit_code: EXIT_BAD_INPUT,
        });
    }
    if summary.disagree > 0 {
        return Err(anyhow::anyhow!(
            "{} test(s) where the model's verdict disagrees with {}",
            summary.disagree,
            args.expect.as_deref().unwrap_or(Path::new("-")).display()
        )
        .into());
    }
    Ok(())
}

pub fn generate(args: &LitmusGenerateArgs) -> CmdResult {
    let written = write_families(&args.out).map_err(|e| anyhow::anyhow!("{e}"))?;
    outln!("{written}")?;
    Ok(())
}
