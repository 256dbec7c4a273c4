//! Litmus tests written as files, in the dialect of Dat3M's PTX suite (`shared/litmus/ptx/`):
//! run them on any backend, report them herd-style, and compare them with known verdicts.
//!
//! The built-in tests of [`crate::litmus`] are four fixed shapes between two blocks; a file can
//! say anything the PTX memory model speaks about (scopes, release/acquire, atomics, fences,
//! barriers, branches) and where each thread runs, which is what checking a memory model
//! against a suite of tests with known verdicts needs.
//!
//! - [`ast`]: what a file says (threads, instructions with their lines, the condition);
//! - [`parse`]: the dialect into an [`ast::LitmusFile`], malformed text naming file and line;
//! - [`kernel`]: a file into one PTX kernel running many instances, or a [`kernel::Refusal`]
//!   naming the construct it cannot express (per test, so a directory still runs);
//! - [`run`]: launches on a [`crate::backend::Backend`] and the histogram of final states;
//! - [`deadlock`]: whether a test can end at all under PTX's barriers (a proof, not a guess
//!   from runs that hung);
//! - [`suite`]: a directory of files run one after another, in this process or (on a GPU,
//!   where a fault ends CUDA for the process) in a worker process;
//! - [`expect`]: `expected.csv`, the verdict of each test and the conformance table.

pub mod ast;
pub mod deadlock;
pub mod expect;
pub mod kernel;
pub mod parse;
pub mod run;
pub mod suite;

use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a litmus file could not be read.
#[derive(Debug, Error)]
pub enum LitmusFileError {
    #[error("{}:{line}: {message}", file.display())]
    Syntax {
        file: PathBuf,
        line: usize,
        message: String,
    },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The litmus files named by `paths`: files as given, directories walked recursively for
/// `*.litmus` files (sorted), in the order given; a file named twice (also through a folder)
/// comes once, where it was first named.
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LitmusFileError> {
    let mut out = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|source| LitmusFileError::Io {
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)?;
            found.sort();
            out.extend(found);
        } else {
            out.push(path.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())));
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LitmusFileError> {
    let io = |source| LitmusFileError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "litmus") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
