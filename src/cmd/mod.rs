//! One module per subcommand; each turns parsed arguments into library calls and prints results.

mod ptx;

use crate::cli::Command;

/// Exit code for bad input (malformed files, unknown names): the same as clap's usage errors.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code for a subcommand that is not built yet.
pub const EXIT_NOT_IMPLEMENTED: u8 = 3;
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

pub type Outcome = Result<(), Failure>;

pub fn run(command: Command) -> Outcome {
    match command {
        Command::Ptx(c) => ptx::run(c),
        Command::Devices => not_yet("devices", "the backends issue"),
        Command::Litmus(_) => not_yet("litmus", "the backends issue"),
        Command::Tune(_) => not_yet("tune", "the tuning issue"),
        Command::Check(_) => not_yet("check", "the check-and-harden issue"),
        Command::Harden(_) => not_yet("harden", "the check-and-harden issue"),
        Command::Cost(_) => not_yet("cost", "the cost issue"),
        Command::Apps(_) => not_yet("apps", "the applications issue"),
    }
}

fn not_yet(name: &str, issue: &str) -> Outcome {
    Err(Failure {
        error: anyhow::anyhow!("`gpuwmm {name}` is not implemented yet (planned in {issue})"),
        exit_code: EXIT_NOT_IMPLEMENTED,
    })
}
