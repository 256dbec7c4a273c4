//! `gpuwmm worker` (hidden): the worker process of a supervised check.

use super::Outcome;

pub fn run() -> Outcome {
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    gpuwmm::check::worker::serve(stdin, stdout)?;
    Ok(())
}
