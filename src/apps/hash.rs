//! An app's sources and PTX, hashed: what a journal records so that a resume or replay can tell
//! whether the app it runs is the one whose runs the journal holds (see
//! [`crate::job::settings`]).

use super::manifest::Init;
use super::{App, AppError, Size, DEFAULT_ARCH};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// What an app's runs are made of, hashed: its sources and its PTX.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppHash {
    /// SHA-256 over the app's source files (kernel and the headers it includes from the app's
    /// folders; a bring-your-own app's `app.toml` too), each with its name relative to the
    /// kernel's folder (so that a moved folder hashes the same).
    pub sources_sha256: String,
    /// SHA-256 over the PTX the app runs at the size: its kernels and its check kernels, as the
    /// NVRTC at hand compiles them, with the app's folder left out of the file names.
    pub ptx_sha256: String,
    /// SHA-256 of each data file the app's buffers are read from (`init = { file = ... }`), by
    /// its name as the manifest gives it: over the elements read from it. Empty for an app
    /// without one, and in journals written before gpuwmm recorded them (which then resume and
    /// replay without comparing them: their sources hash covers which files are read).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs_sha256: BTreeMap<String, String>,
}

impl AppHash {
    /// The hashes of `app` at `size`; `app_dir` is a bring-your-own app's folder.
    pub fn of(app: &dyn App, size: Size, app_dir: Option<&Path>) -> Result<AppHash, AppError> {
        let mut sources = Hasher::default();
        let source = app.source();
        let base = source.path.parent().unwrap_or(Path::new(""));
        for (path, text) in source.files() {
            let name = path.strip_prefix(base).unwrap_or(path);
            sources.field(name.to_string_lossy().as_bytes());
            sources.field(text.as_bytes());
        }
        if let Some(dir) = app_dir {
            let path = dir.join("app.toml");
            let manifest = std::fs::read(&path).map_err(|e| AppError::Compile {
                path,
                message: format!("cannot read the manifest: {e}"),
            })?;
            sources.field(b"app.toml");
            sources.field(&manifest);
        }
        // The PTX names its source files (`.file`) by absolute path: the app's folder is left
        // out, so that a folder moved (`replay --app-dir`) hashes the same.
        let folder = base.to_string_lossy();
        let printed = |module: &crate::ptx::Module| match folder.is_empty() {
            true => crate::ptx::print(module),
            false => crate::ptx::print(module).replace(folder.as_ref(), "<app>"),
        };
        let mut ptx = Hasher::default();
        ptx.field(printed(&app.module(DEFAULT_ARCH, size)?).as_bytes());
        if let Some(check) = app.check_module(DEFAULT_ARCH, size)? {
            ptx.field(b"check");
            ptx.field(printed(&check).as_bytes());
        }
        Ok(AppHash {
            sources_sha256: sources.finish(),
            ptx_sha256: ptx.finish(),
            inputs_sha256: inputs_hash(app),
        })
    }
}

/// SHA-256 over the files of a patch, each its path and patched text: what the patch check's
/// journal names its patch by.
pub fn patch_sha256(patched: &[super::PatchedFile]) -> String {
    let mut hasher = Hasher::default();
    for file in patched {
        hasher.field(file.path.to_string_lossy().as_bytes());
        hasher.field(file.text.as_bytes());
    }
    hasher.finish()
}

/// SHA-256 of one file's bytes (length-prefixed, as every hash here): how a journal names a
/// data file or a litmus test as it was.
pub fn bytes_sha256(bytes: &[u8]) -> String {
    let mut hasher = Hasher::default();
    hasher.field(bytes);
    hasher.finish()
}

/// The hash of each data file `app`'s buffers are read from, by its name in the manifest.
fn inputs_hash(app: &dyn App) -> BTreeMap<String, String> {
    let buffers = app.manifest().map_or(&[][..], |m| &m.buffers[..]);
    let mut hashes = BTreeMap::new();
    for buffer in buffers {
        if let (Some(file), Init::Data(data)) = (&buffer.file, &buffer.init) {
            hashes.insert(file.to_string_lossy().into_owned(), bytes_sha256(data));
        }
    }
    hashes
}

/// SHA-256 over length-prefixed fields, so that no two field lists hash the same byte stream.
#[derive(Default)]
struct Hasher(Sha256);

impl Hasher {
    fn field(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn finish(self) -> String {
        self.0
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}
