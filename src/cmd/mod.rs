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
mod check_job;
mod cost;
mod devices;
mod harden;
mod journals;
mod litmus;
mod litmus_file;
mod litmus_model;
mod progress;
mod ptx;
mod replay;
mod slurm_job;
mod target;
mod tune;
mod tune_slurm;
mod worker;

use crate::cli::{BackendArgs, Command, LitmusCommand};
use gpuwmm::backend::select::{open_backend, BackendChoice, OpenedBackend};
use gpuwmm::backend::sim::SimConfig;

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
    fn from(error: E) -> Failure {
        Failure {
            error: error.into(),
            exit_code: EXIT_FAILURE,
        }
    }
}

pub type CmdResult = Result<(), Failure>;

pub fn run(command: Command) -> CmdResult {
    match command {
        Command::Ptx(c) => ptx::run(c),
        Command::Devices => devices::run(),
        Command::Litmus(args) => match &args.command {
            Some(LitmusCommand::Run(run)) => litmus_file::run(run),
            Some(LitmusCommand::Model(m)) => litmus_model::run(m),
            Some(LitmusCommand::Generate(g)) => litmus_model::generate(g),
            None => litmus::run(&args),
        },
        Command::Tune(args) => tune::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Campaign(args) => campaign::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Harden(args) => harden::run(&args),
        Command::Cost(args) => cost::run(&args),
        Command::Apps(args) => apps::run(&args),
        Command::Worker => worker::run(),
    }
}

/// The backend the user chose, and the simulator settings should it be (or fall back to) the
/// simulator.
fn backend_request(args: &BackendArgs) -> (BackendChoice, SimConfig) {
    (args.backend, args.sim_model.config(args.seed))
}

/// Opens the backend the user chose, saying so when `auto` fell back to the simulator.
fn open(args: &BackendArgs) -> Result<OpenedBackend, Failure> {
    let (choice, sim) = backend_request(args);
    let opened = open_backend(choice, &sim)?;
    if let Some(reason) = &opened.fallback_reason {
        eprintln!("note: running on the simulator: {reason}");
    }
    Ok(opened)
}
