//! One module per subcommand; each turns parsed arguments into library calls and prints results.

/// `println!` that returns the write's error instead of panicking: a reader that stops early
/// (`gpuwmm devices | head -1`) closes the pipe, and the command then ends with that error, which
/// `main` treats as success. Defined before the modules so that each can use it.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `print!` as [`outln!`] is `println!`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod apps;
mod campaign;
mod campaign_slurm;
mod check;
mod cost;
mod devices;
mod harden;
mod install;
mod litmus;
mod litmus_file;
mod litmus_model;
mod progress;
mod ptx;
mod replay;
mod tune;
mod tune_slurm;
mod worker;

use crate::cli::{BackendArgs, Command, JournalArgs, LitmusCommand, TargetArgs};
use gpuwmm::backend::select::{open_backend, OpenedBackend};
use gpuwmm::job::naming::Output;
use gpuwmm::job::settings::GivenOptions;
use gpuwmm::job::target::{BackendOptions, TargetOptions};
use gpuwmm::job::JobError;
use serde::Serialize;

/// Exit code for bad input (malformed files, unknown names): the same as clap's usage errors.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code for everything else that went wrong.
pub const EXIT_FAILURE: u8 = 1;

/// An error with the exit code it ends the process with.
pub struct Failure {
    pub error: anyhow::Error,
    pub exit_code: u8,
}

impl Failure {
    pub fn bad_input(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            error: error.into(),
            exit_code: EXIT_BAD_INPUT,
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    /// A job's error says whether it is bad input; anything else is a failure.
    fn from(error: E) -> Failure {
        let error = error.into();
        let bad_input = error
            .downcast_ref::<JobError>()
            .is_some_and(JobError::is_bad_input);
        Failure {
            error,
            exit_code: if bad_input {
                EXIT_BAD_INPUT
            } else {
                EXIT_FAILURE
            },
        }
    }
}

pub type CmdResult = Result<(), Failure>;

/// The options the command line named for the subcommand (`--fences`, …), as the library
/// compares them on `--resume` (an option left out takes the journal's value).
pub fn given_options(matches: &clap::ArgMatches) -> GivenOptions {
    let mut names = Vec::new();
    let mut current = matches;
    while let Some((_, sub)) = current.subcommand() {
        current = sub;
    }
    for id in current.ids() {
        let named =
            current.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine);
        if named {
            names.push(format!("--{}", id.as_str().replace('_', "-")));
        }
    }
    GivenOptions::new(names)
}

pub fn run(command: Command, given: GivenOptions) -> CmdResult {
    let journaled = matches!(
        command,
        Command::Check(_)
            | Command::Harden(_)
            | Command::Cost(_)
            | Command::Tune(_)
            | Command::Campaign(_)
    ) || matches!(&command, Command::Litmus(l) if matches!(
        &l.command,
        Some(LitmusCommand::Run(run)) if run.journal.is_some() && !run.serve
    ));
    if journaled {
        gpuwmm::job::interrupt::on_signals(std::env::args().collect())?;
    }
    match command {
        Command::Ptx(c) => ptx::run(c),
        Command::Devices => devices::run(),
        Command::Setup(args) => install::setup(&args),
        Command::Completions { shell } => install::completions(shell),
        Command::Man => install::man(),
        Command::Litmus(args) => match &args.command {
            Some(LitmusCommand::Run(run)) => litmus_file::run(run),
            Some(LitmusCommand::Model(m)) => litmus_model::run(m),
            Some(LitmusCommand::Generate(g)) => litmus_model::generate(g),
            None => litmus::run(&args),
        },
        Command::Tune(args) => tune::run(&args),
        Command::Check(args) => check::run(&args, given),
        Command::Campaign(args) => campaign::run(&args, given),
        Command::Replay(args) => replay::run(&args, &given),
        Command::Harden(args) => harden::run(&args, given),
        Command::Cost(args) => cost::run(&args, given),
        Command::Apps(args) => apps::run(&args),
        Command::Worker => worker::run(),
    }
}

/// The backend options as the library takes them.
fn backend_options(args: &BackendArgs) -> BackendOptions {
    BackendOptions {
        backend: args.backend,
        sim_model: args.sim_model,
        seed: args.seed,
    }
}

/// The target options as the library takes them, with the options the command line named.
fn target_options(args: &TargetArgs, given: GivenOptions) -> TargetOptions {
    TargetOptions {
        app_dir: args.app_dir.clone(),
        size: args.size,
        fence_kind: args.fence_kind,
        granularity: args.granularity,
        deadline: args.deadline,
        stress_factor: args.stress_factor,
        profile: args.profile.clone(),
        sim_budget: args.sim_budget,
        in_process: args.in_process,
        backend: backend_options(&args.backend),
        given,
    }
}

/// `--journal` and `--resume` as the library takes them.
fn output(args: &JournalArgs) -> Output<'_> {
    Output::new(args.journal.as_deref(), args.resume)
}

/// Prints a job's note or warning on stderr.
fn say(line: &str) {
    eprintln!("{line}");
}

/// Prints `document` as pretty JSON on stdout (`--json`).
fn print_json(document: &impl Serialize) -> CmdResult {
    outln!("{}", serde_json::to_string_pretty(document)?)?;
    Ok(())
}

/// Opens the backend the user chose, saying so when `auto` fell back to the simulator.
fn open(args: &BackendArgs) -> Result<OpenedBackend, Failure> {
    let options = backend_options(args);
    let opened = open_backend(options.backend, &options.sim_config())?;
    if let Some(reason) = &opened.fallback_reason {
        eprintln!("note: running on the simulator: {reason}");
    }
    Ok(opened)
}
