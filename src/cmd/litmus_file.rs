//! `gpuwmm litmus run`: litmus files on either backend, each reported herd-style, and with
//! `--expect` a conformance table against known verdicts.

use super::{backend_options, CmdResult, Failure, EXIT_BAD_INPUT};
use crate::cli::LitmusRunArgs;
use gpuwmm::backend::select::{open_backend, probe_backend, provenance, OpenedBackend};
use gpuwmm::litmus::file::expect::{csv_writable, Expectations, Finding, Row, Table};
use gpuwmm::litmus::file::parse::parse_file;
use gpuwmm::litmus::file::run::{
    default_instances, default_sim_budget, run_litmus_file, FileRunError, FileSettings,
};
use gpuwmm::litmus::file::{collect_files, LitmusFileError};
use indicatif::ProgressBar;

pub fn run(args: &LitmusRunArgs) -> CmdResult {
    let files = collect_files(&args.paths).map_err(Failure::bad_input)?;
    if files.is_empty() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "no .litmus files in {}",
            args.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let expectations = Expectations::load_if(args.expect.as_deref()).map_err(Failure::bad_input)?;
    if let Some(path) = &args.csv {
        csv_writable(path).map_err(Failure::bad_input)?;
    }
    let backend = backend_options(&args.backend);
    let kind = probe_backend(backend.backend, &backend.sim_config())?.kind;
    let settings = FileSettings {
        executions: args.executions,
        instances: args.instances.unwrap_or(default_instances(kind)).max(1),
        distance: args.distance.max(1),
        deadline: args.deadline,
    };
    let mut opened = open(args, settings.instances, true)?;
    outln!("{}", provenance(opened.backend.as_ref()))?;
    outln!(
        "{} test(s), {} executions each, {} instance(s) per launch, distance {} words, seed {}",
        files.len(),
        settings.executions,
        settings.instances,
        settings.distance,
        args.backend.seed
    )?;
    let bar = progress_bar(files.len() as u64 * settings.executions);
    let mut table = Table::default();
    let mut malformed = 0;
    for (i, file) in files.iter().enumerate() {
        bar.set_message(file.display().to_string());
        let finding = match parse_file(file) {
            Err(e @ LitmusFileError::Syntax { .. }) => {
                malformed += 1;
                bar.suspend(|| outln!("error: {e}\n"))?;
                Finding::NotRun(format!("malformed: {e}"))
            }
            Err(e) => return Err(Failure::bad_input(e)),
            Ok(test) => {
                let result = run_litmus_file(
                    opened.backend.as_mut(),
                    &test,
                    &settings,
                    args.backend.seed,
                    |n| bar.inc(n),
                );
                match result {
                    Ok(outcome) => {
                        bar.suspend(|| outln!("{}", outcome.report()))?;
                        if outcome.backend_lost {
                            opened = open(args, settings.instances, false)?;
                        }
                        outcome.finding(&test)
                    }
                    Err(FileRunError::Refused(r)) => {
                        bar.suspend(|| outln!("Test {} refused: {r}\n", test.name))?;
                        Finding::NotRun(format!(
                            "refused (line {}): `{}`: {}",
                            r.line, r.construct, r.reason
                        ))
                    }
                    Err(FileRunError::Backend(e)) => {
                        bar.suspend(|| outln!("Test {} failed on the backend: {e}\n", test.name))?;
                        if e.loses_context() {
                            opened = open(args, settings.instances, false)?;
                        }
                        Finding::NotRun(format!("backend: {}", first_line(&e.to_string())))
                    }
                }
            }
        };
        bar.set_position((i as u64 + 1) * settings.executions);
        let expectation = expectations.as_ref().and_then(|e| e.find(file));
        table
            .rows
            .push(Row::new(&file.display().to_string(), expectation, &finding));
    }
    bar.finish_and_clear();
    finish(args, &table, expectations.is_some(), malformed)
}

/// Prints the table and summary, writes the CSV, and picks the exit code.
fn finish(args: &LitmusRunArgs, table: &Table, expect: bool, malformed: usize) -> CmdResult {
    let summary = table.summary();
    if expect {
        out!("\n{}", table.render())?;
        outln!("{summary}")?;
    }
    if let Some(path) = &args.csv {
        table.write_csv(path).map_err(|e| {
            Failure::bad_input(anyhow::anyhow!("cannot write {}: {e}", path.display()))
        })?;
        outln!("conformance table written to {}", path.display())?;
    }
    if malformed > 0 {
        return Err(Failure {
            error: anyhow::anyhow!("{malformed} malformed litmus file(s) (see the errors above)"),
            exit_code: EXIT_BAD_INPUT,
        });
    }
    if summary.unsound > 0 {
        return Err(anyhow::anyhow!(
            "{} test(s) UNSOUND: the backend reached a state the PTX memory model forbids",
            summary.unsound
        )
        .into());
    }
    Ok(())
}

/// Opens the backend, with the simulator's instruction budget sized for `instances` per launch;
/// `say_fallback` notes when `auto` fell back to the simulator.
fn open(
    args: &LitmusRunArgs,
    instances: u32,
    say_fallback: bool,
) -> Result<OpenedBackend, Failure> {
    let backend = backend_options(&args.backend);
    let (choice, mut sim) = (backend.backend, backend.sim_config());
    sim.instruction_budget = args.sim_budget.unwrap_or(default_sim_budget(instances));
    let opened = open_backend(choice, &sim)?;
    if let (Some(reason), true) = (&opened.fallback_reason, say_fallback) {
        eprintln!("note: running on the simulator: {reason}");
    }
    Ok(opened)
}

/// The first line of a message, tabs as spaces (PTX text in backend errors has tabs).
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or(text).replace('\t', " ")
}

fn progress_bar(len: u64) -> ProgressBar {
    super::progress::bar(len, "{pos}/{len} executions")
}
