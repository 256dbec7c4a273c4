//! `gpuwmm litmus run`: litmus files on either backend, each reported herd-style, and with
//! `--expect` a conformance table against known verdicts.

use super::{backend_options, CmdResult, Failure, EXIT_BAD_INPUT};
use crate::cli::LitmusRunArgs;
use gpuwmm::backend::select::{open_backend, probe_backend, provenance, OpenedBackend};
use gpuwmm::backend::BackendKind;
use gpuwmm::isolation::WorkerCommand;
use gpuwmm::job::litmus::{litmus_settings, SuiteJournal};
use gpuwmm::litmus::file::collect_files;
use gpuwmm::litmus::file::expect::{csv_writable, test_name, Expectations, Row, Table};
use gpuwmm::litmus::file::run::{
    default_executions, default_instances, default_max_executions, default_sim_budget, FileSettings,
};
use gpuwmm::litmus::file::suite::{
    self, InProcess, Isolated, OpenBackend, SuiteError, SuiteRunner,
};
use indicatif::ProgressBar;

pub fn run(args: &LitmusRunArgs) -> CmdResult {
    if args.serve {
        return serve(args, file_settings(args)?);
    }
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
    let settings = file_settings(args)?;
    let opened = open(args, settings.instances, true)?;
    let mut journal = journal(args, &settings, opened.kind)?;
    outln!("{}", provenance(opened.backend.as_ref()))?;
    outln!(
        "{} test(s), {} executions each{}, {} instance(s) per launch, distance {} words, seed {}",
        files.len(),
        settings.executions,
        hunt_text(&settings),
        settings.instances,
        settings.distance,
        args.backend.seed
    )?;
    if let (Some(path), n @ 1..) = (&args.journal, journal.journaled()) {
        outln!("{n} test(s) journaled in {}: not run again", path.display())?;
    }
    let mut runner = runner(args, settings, opened)?;
    let bar = progress_bar(files.len() as u64 * settings.executions);
    let mut table = Table::default();
    let mut malformed = 0;
    for (i, file) in files.iter().enumerate() {
        bar.set_message(file.display().to_string());
        let run = || {
            runner.run(file, &mut |n| bar.inc(n)).map_err(|e| match e {
                SuiteError::File(e) => Failure::bad_input(e),
                other => anyhow::Error::new(other).into(),
            })
        };
        let (result, journaled) = journal.result_of(file, run)?;
        malformed += usize::from(result.malformed);
        let from = if journaled { "(from the journal) " } else { "" };
        bar.suspend(|| outln!("{from}{}", result.report))?;
        bar.set_position((i as u64 + 1) * settings.executions);
        let expectation = expectations.as_ref().and_then(|e| e.find(file));
        let name = test_name(expectations.as_ref(), file);
        table
            .rows
            .push(Row::new(&name, expectation, &result.finding));
    }
    bar.finish_and_clear();
    finish(args, &table, expectations.is_some(), malformed)
}

/// The suite's journal: `--journal`'s, new or resumed, recording the settings the tests run
/// with; none without it.
fn journal(
    args: &LitmusRunArgs,
    settings: &FileSettings,
    kind: BackendKind,
) -> Result<SuiteJournal, Failure> {
    let Some(path) = &args.journal else {
        return Ok(SuiteJournal::none());
    };
    let sim_budget = args
        .sim_budget
        .unwrap_or(default_sim_budget(settings.instances));
    let recorded = litmus_settings(
        settings,
        (kind, args.backend.seed),
        (args.backend.sim_model, sim_budget),
    );
    Ok(SuiteJournal::open(path, args.resume, &recorded)?)
}

/// What the header says of hunting rare allowed states.
fn hunt_text(settings: &FileSettings) -> String {
    match settings.max_executions > settings.executions {
        true => format!(
            " (up to {} while a state the PTX model allows is not reached)",
            settings.max_executions
        ),
        false => String::new(),
    }
}

/// How each file runs: the options, with the backend's default instances per launch.
fn file_settings(args: &LitmusRunArgs) -> Result<FileSettings, Failure> {
    let backend = backend_options(&args.backend);
    let kind = probe_backend(backend.backend, &backend.sim_config())?.kind;
    let executions = args.executions.unwrap_or(default_executions(kind));
    if let Some(max) = args.max_executions.filter(|&m| m < executions) {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "--max-executions {max} is below the {executions} executions each test runs: it \
             caps a test's executions in all, so give at least --executions"
        )));
    }
    Ok(FileSettings {
        executions,
        max_executions: (args.max_executions)
            .unwrap_or(default_max_executions(kind, executions))
            .max(executions),
        instances: args.instances.unwrap_or(default_instances(kind)).max(1),
        distance: args.distance,
        deadline: args.deadline,
    })
}

/// The suite's runner: on a GPU a worker process (a fault ends CUDA for a whole process), on
/// the simulator this process.
fn runner(
    args: &LitmusRunArgs,
    settings: FileSettings,
    opened: OpenedBackend,
) -> Result<Box<dyn SuiteRunner>, Failure> {
    if opened.kind == BackendKind::Cuda {
        drop(opened);
        let command = WorkerCommand {
            program: std::env::current_exe().map_err(anyhow::Error::new)?,
            args: std::env::args()
                .skip(1)
                .chain(["--serve".to_string()])
                .collect(),
            env: Vec::new(),
        };
        return Ok(Box::new(Isolated::new(command, settings)));
    }
    Ok(Box::new(InProcess::new(
        opened.backend,
        opener(args, settings.instances),
        settings,
        args.backend.seed,
    )))
}

/// Opens the backend of `args` again, quietly (what a runner calls after a test lost one).
fn opener(args: &LitmusRunArgs, instances: u32) -> OpenBackend {
    let args = args.clone();
    Box::new(move || {
        open(&args, instances, false)
            .map(|o| o.backend)
            .map_err(|f| format!("{:#}", f.error))
    })
}

/// `--serve`: the worker of [`Isolated`], answering on standard output.
fn serve(args: &LitmusRunArgs, settings: FileSettings) -> CmdResult {
    let mut open_backend = opener(args, settings.instances);
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    suite::serve(
        &mut open_backend,
        &settings,
        args.backend.seed,
        stdin,
        stdout,
    )?;
    Ok(())
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
    let unsound = (summary.unsound > 0).then(|| {
        format!(
            "{} test(s) UNSOUND: the backend reached a state the PTX memory model forbids",
            summary.unsound
        )
    });
    finding_then_malformed(unsound, malformed)
}

/// How a litmus command ends: a finding (an UNSOUND test, a verdict that disagrees) exits 1,
/// also beside malformed files, and its error line counts them; else malformed files exit 2.
pub fn finding_then_malformed(finding: Option<String>, malformed: usize) -> CmdResult {
    let malformed_note = format!("{malformed} malformed litmus file(s) (see the errors above)");
    match (finding, malformed) {
        (Some(finding), 0) => Err(anyhow::anyhow!(finding).into()),
        (Some(finding), _) => Err(anyhow::anyhow!("{finding}; also {malformed_note}").into()),
        (None, 0) => Ok(()),
        (None, _) => Err(Failure {
            error: anyhow::anyhow!(malformed_note),
            exit_code: EXIT_BAD_INPUT,
        }),
    }
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

fn progress_bar(len: u64) -> ProgressBar {
    super::progress::bar(len, "{pos}/{len} executions")
}
