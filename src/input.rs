//! Reading the user's kernel: a `.ptx` file as it is, or a `.cu` file compiled with NVRTC; and
//! the source files its PTX names (`.file`, `#line`), to show their lines.
//!
//! Every command that takes a kernel file goes through here, so they all give the same errors:
//! the file name and, for malformed PTX, the line. A file the PTX names is anything its author
//! wrote there (`/dev/zero`, a FIFO), so it is read only when it is a regular file of at most
//! [`MAX_SOURCE_BYTES`].

use crate::apps::KernelSource;
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

/// The largest source file whose lines are shown for fence sites.
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// The text of a source file that PTX names, when it is a regular file of at most
/// [`MAX_SOURCE_BYTES`]; otherwise why it is not read (it is never opened unless regular, so a
/// FIFO cannot block and a device cannot feed bytes without end).
pub fn read_named_source(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(format!(
            "{} bytes, more than the {MAX_SOURCE_BYTES} read for source lines",
            meta.len()
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_SOURCE_BYTES).read_to_string(&mut text))
        .map_err(|e| format!("cannot read it: {e}"))?;
    Ok(text)
}

/// Source files a PTX module names, each read once (by [`read_named_source`]), for showing the
/// line of a site. A file that is not read gets one warning saying why, taken with
/// [`SourceLines::take_warnings`], and its sites no line.
#[derive(Default)]
pub struct SourceLines {
    files: HashMap<String, Option<Vec<String>>>,
    warnings: Vec<String>,
    /// The app whose files are read from its source, not from the disk.
    app: Option<KernelSource>,
}

impl SourceLines {
    /// Lines of the files of `app` taken from its source ([`KernelSource::file`], as harden
    /// takes them: a built-in app's files are in the binary), other files read from the disk.
    pub fn of_app(app: &KernelSource) -> SourceLines {
        SourceLines {
            app: Some(app.clone()),
            ..SourceLines::default()
        }
    }

    /// Line `line` (1-based) of `file`; `None` when the file is not read or is shorter.
    pub fn line(&mut self, file: &str, line: u32) -> Option<String> {
        let warnings = &mut self.warnings;
        let app = self.app.as_ref();
        let lines = self.files.entry(file.to_string()).or_insert_with(|| {
            let own = app.and_then(|source| source.file(Path::new(file)));
            if let Some((_, text)) = own {
                return Some(text.lines().map(str::to_string).collect());
            }
            match read_named_source(Path::new(file)) {
                Ok(text) => Some(text.lines().map(str::to_string).collect()),
                Err(why) => {
                    warnings.push(format!("{file}: source lines not shown: {why}"));
                    None
                }
            }
        });
        lines.as_ref()?.get(line.checked_sub(1)? as usize).cloned()
    }

    /// The warnings about files not read since the last call.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_source_is_read_only_when_it_is_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k.cu");
        std::fs::write(&file, "a\nb\n").unwrap();
        assert_eq!(read_named_source(&file).unwrap(), "a\nb\n");
        assert_eq!(
            read_named_source(Path::new("/dev/zero")).unwrap_err(),
            "not a regular file"
        );
        assert_eq!(
            read_named_source(dir.path()).unwrap_err(),
            "not a regular file"
        );
        let big = dir.path().join("big.cu");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_SOURCE_BYTES + 1).unwrap();
        assert!(read_named_source(&big).unwrap_err().contains("more than"));
        assert!(read_named_source(&dir.path().join("none")).is_err());
    }
}
