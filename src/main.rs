//! The `gpuwmm` binary: parse the command line, run the command, report errors.

#![forbid(unsafe_code)]

mod cli;
mod cmd;

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    let matches = cli::Cli::command().get_matches();
    let cli = cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let given = cmd::given_options(&matches);
    if let Some(dir) = &cli.cache_dir {
        // Before any thread or worker process starts, which inherit it.
        std::env::set_var(gpuwmm::places::CACHE_DIR_ENV, dir);
    }
    match cmd::run(cli.command, given) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops early (`gpuwmm apps | head`) is not an error.
        Err(failure) if is_broken_pipe(&failure.error) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", error_text(&failure.error));
            ExitCode::from(failure.exit_code)
        }
    }
}

/// The error and its causes, `: `-separated, leaving out a cause whose text an outer message
/// already includes (many errors show their source in their own message).
fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}
