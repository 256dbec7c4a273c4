//! `gpuwmm worker` (hidden): the worker process of a supervised check.

use super::CmdResult;

pub fn run() -> CmdResult {
    gpuwmm::job::interrupt::ignore_in_worker()?;
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    gpuwmm::check::worker::serve(stdin, stdout)?;
    Ok(())
}
