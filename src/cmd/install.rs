//! `gpuwmm setup`, `gpuwmm completions` and `gpuwmm man`: what an installed tool needs around it.

use super::CmdResult;
use crate::cli::{Cli, SetupArgs};
use clap::CommandFactory;
use gpuwmm::toolchain::install_pinned_tools;
use std::io::Write;

pub fn setup(args: &SetupArgs) -> CmdResult {
    let installed = install_pinned_tools(args.dir.as_deref(), args.force)?;
    if !installed.searched {
        let dir = installed.dir.display();
        outln!("note: gpuwmm does not look in {dir} by itself; export GPUWMM_CUDA_TOOLS={dir}")?;
    }
    Ok(())
}

pub fn completions(shell: clap_complete::Shell) -> CmdResult {
    // Into a buffer first: `generate` panics on a write error, and a reader that stops early
    // (`| head`) is not one.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "gpuwmm", &mut script);
    std::io::stdout().lock().write_all(&script)?;
    Ok(())
}

pub fn man() -> CmdResult {
    clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
    Ok(())
}
