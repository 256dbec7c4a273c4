//! Reading the user's kernel: a `.ptx` file as it is, or a `.cu` file compiled with NVRTC.
//!
//! Every command that takes a kernel file goes through here, so they all give the same errors:
//! the file name and, for malformed PTX, the line.

use crate::ptx::{self, Module};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A kernel file that could not be turned into a PTX module.
#[derive(Debug, Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: expected a .cu or .ptx file")]
    UnknownKind { path: PathBuf },
    #[error("{path}: {message}")]
    Compile { path: PathBuf, message: String },
}

/// A parsed module with the PTX text it came from.
#[derive(Debug, Clone)]
pub struct LoadedPtx {
    pub module: Module,
    pub text: String,
}

/// Parses PTX text, attributing errors to `path`.
pub fn parse_ptx(path: &Path, text: String) -> Result<LoadedPtx, InputError> {
    match ptx::parse(&text) {
        Ok(module) => Ok(LoadedPtx { module, text }),
        Err(e) => Err(InputError::Malformed {
            path: path.to_path_buf(),
            line: e.line,
            message: e.message,
        }),
    }
}

/// Reads a `.ptx` file, or compiles a `.cu` file for `arch` with line info.
pub fn load_kernel_file(path: &Path, arch: &str) -> Result<LoadedPtx, InputError> {
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("ptx") => parse_ptx(path, text),
        Some("cu") => {
            let ptx = crate::compile::compile_cuda(path, &text, arch).map_err(|e| {
                InputError::Compile {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                }
            })?;
            parse_ptx(path, ptx)
        }
        _ => Err(InputError::UnknownKind {
            path: path.to_path_buf(),
        }),
    }
}

/// Source files a PTX module names, each read once, for showing the line of a site.
#[derive(Default)]
pub struct SourceLines {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceLines {
    /// Line `line` (1-based) of `file`; `None` when the file cannot be read or is shorter.
    pub fn line(&mut self, file: &str, line: u32) -> Option<String> {
        let lines = self.files.entry(file.to_string()).or_insert_with(|| {
            std::fs::read_to_string(file)
                .ok()
                .map(|t| t.lines().map(str::to_string).collect())
        });
        lines.as_ref()?.get(line.checked_sub(1)? as usize).cloned()
    }
}
