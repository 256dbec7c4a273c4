//! The `gpuwmm` binary: parse the command line, run the command, report errors.

mod cli;
mod cmd;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops early (`gpuwmm apps | head`) is not an error.
        Err(failure) if is_broken_pipe(&failure.error) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {:#}", failure.error);
            ExitCode::from(failure.exit_code)
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}
