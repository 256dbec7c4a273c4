//! An on-disk cache of NVRTC output.
//!
//! Compiling a kernel with NVRTC takes around a second on a CPU, and every driver run, test and
//! benchmark starts from the applications' PTX. The cache keys each compilation by everything that
//! determines its output (NVRTC version, file name, options with defines and include folders,
//! name expressions, source, and the text of every local file the source includes) so a hit is
//! always the PTX NVRTC would produce, and writes atomically (temporary file, then rename) so
//! concurrent test processes never see a half-written entry.

#![forbid(unsafe_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use super::includes::local_includes;
use super::{CompileOptions, CompiledPtx, Nvrtc, NvrtcError, ToolchainError};

/// Environment variable overriding the default cache folder.
pub use crate::places::CACHE_DIR_ENV;

/// Something that compiles CUDA to PTX: NVRTC, or a stand-in in tests.
pub trait PtxCompiler {
    /// The compiler's version; part of the cache key.
    fn version(&self) -> (i32, i32);
    /// Compiles `source` named `file_name` with `opts`.
    fn compile(
        &self,
        source: &str,
        file_name: &str,
        opts: &CompileOptions,
    ) -> Result<CompiledPtx, NvrtcError>;
}

impl PtxCompiler for Nvrtc {
    fn version(&self) -> (i32, i32) {
        Nvrtc::version(self)
    }

    fn compile(
        &self,
        source: &str,
        file_name: &str,
        opts: &CompileOptions,
    ) -> Result<CompiledPtx, NvrtcError> {
        Nvrtc::compile(self, source, file_name, opts)
    }
}

/// A folder of `<key>.ptx` files (and `<key>.log` with NVRTC's warnings, `<key>.names` with the
/// lowered names of the name expressions).
#[derive(Debug, Clone)]
pub struct PtxCache {
    dir: PathBuf,
}

impl PtxCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// A cache in [`Self::default_dir`].
    pub fn with_default_dir() -> Self {
        Self::new(Self::default_dir())
    }

    /// `$GPUWMM_CACHE_DIR`, else `.cache/ptx` of the build tree for a binary run from it, else
    /// the user's cache folder ([`crate::places::ptx_cache_dir`]).
    pub fn default_dir() -> PathBuf {
        crate::places::ptx_cache_dir()
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cached PTX for this compilation, compiling (and caching) it on a miss.
    /// Compile errors are returned, never cached.
    pub fn get_or_compile(
        &self,
        compiler: &impl PtxCompiler,
        source: &str,
        file_name: &str,
        opts: &CompileOptions,
    ) -> Result<CompiledPtx, ToolchainError> {
        let key = cache_key(compiler.version(), file_name, opts, source)?;
        if let Some(hit) = self.read(&key, opts) {
            return Ok(hit);
        }
        let compiled = compiler.compile(source, file_name, opts)?;
        self.write(&key, &compiled)?;
        Ok(compiled)
    }

    fn entry(&self, key: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("{key}.{ext}"))
    }

    /// An entry counts as present when its PTX file is (it is written last) and it has a
    /// lowered name for every name expression.
    fn read(&self, key: &str, opts: &CompileOptions) -> Option<CompiledPtx> {
        let ptx = fs::read_to_string(self.entry(key, "ptx")).ok()?;
        let log = fs::read_to_string(self.entry(key, "log")).unwrap_or_default();
        let lowered_names: Vec<(String, String)> = match opts.name_expressions.is_empty() {
            true => Vec::new(),
            false => {
                serde_json::from_str(&fs::read_to_string(self.entry(key, "names")).ok()?).ok()?
            }
        };
        let expressions = lowered_names.iter().map(|(e, _)| e);
        if !expressions.eq(opts.name_expressions.iter()) {
            return None;
        }
        Some(CompiledPtx {
            ptx,
            log,
            lowered_names,
        })
    }

    fn write(&self, key: &str, compiled: &CompiledPtx) -> Result<(), ToolchainError> {
        fs::create_dir_all(&self.dir).map_err(|e| {
            ToolchainError::io(format!("creating cache folder {}", self.dir.display()), e)
        })?;
        write_atomic(&self.entry(key, "log"), compiled.log.as_bytes())?;
        if !compiled.lowered_names.is_empty() {
            let names =
                serde_json::to_string(&compiled.lowered_names).expect("pairs of strings serialise");
            write_atomic(&self.entry(key, "names"), names.as_bytes())?;
        }
        write_atomic(&self.entry(key, "ptx"), compiled.ptx.as_bytes())
    }
}

/// The cache key: SHA-256 (hex) over the NVRTC version, the file name, the NVRTC options (defines
/// and include folders among them), the in-memory headers, the name expressions, the source and
/// every local file it includes (path and text, see [`local_includes`]), each length-prefixed so
/// that no two different inputs hash the same byte stream.
pub fn cache_key(
    nvrtc_version: (i32, i32),
    file_name: &str,
    opts: &CompileOptions,
    source: &str,
) -> Result<String, ToolchainError> {
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    field(b"gpuwmm-ptx-cache-v2");
    field(format!("{}.{}", nvrtc_version.0, nvrtc_version.1).as_bytes());
    field(file_name.as_bytes());
    for arg in opts.to_args(nvrtc_version)? {
        field(arg.as_bytes());
    }
    for (name, text) in &opts.headers {
        field(name.as_bytes());
        field(text.as_bytes());
    }
    for expression in &opts.name_expressions {
        field(b"name expression");
        field(expression.as_bytes());
    }
    field(source.as_bytes());
    for (path, text) in local_includes(Path::new(file_name), source, &opts.include_dirs) {
        field(path.to_string_lossy().as_bytes());
        field(text.as_bytes());
    }
    let digest = hasher.finalize();
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `bytes` to a unique temporary file beside `path`, then renames it over `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ToolchainError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let unique = format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = path.with_file_name(unique);
    let result = fs::write(&tmp, bytes).and_then(|()| fs::rename(&tmp, path));
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        ToolchainError::io(format!("writing cache entry {}", path.display()), e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn key(version: (i32, i32), file: &str, opts: &CompileOptions, source: &str) -> String {
        cache_key(version, file, opts, source).unwrap()
    }

    #[test]
    fn key_is_stable_hex_sha256() {
        let opts = CompileOptions::default();
        let a = key((12, 9), "k.cu", &opts, "src");
        assert_eq!(a, key((12, 9), "k.cu", &opts, "src"));
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn key_changes_with_every_input() {
        let opts = CompileOptions::default();
        let base = key((12, 9), "k.cu", &opts, "src");
        assert_ne!(base, key((12, 9), "k.cu", &opts, "src "));
        assert_ne!(base, key((13, 0), "k.cu", &opts, "src"));
        assert_ne!(base, key((12, 9), "j.cu", &opts, "src"));
        let sm80 = CompileOptions {
            arch: "sm_80".into(),
            ..opts.clone()
        };
        assert_ne!(base, key((12, 9), "k.cu", &sm80, "src"));
        let no_lines = CompileOptions {
            line_info: false,
            ..opts.clone()
        };
        assert_ne!(base, key((12, 9), "k.cu", &no_lines, "src"));
        let extra = CompileOptions {
            extra: vec!["-G".into()],
            ..opts
        };
        assert_ne!(base, key((12, 9), "k.cu", &extra, "src"));
        let header = CompileOptions {
            headers: vec![("iterator".into(), "// shim".into())],
            ..CompileOptions::default()
        };
        assert_ne!(base, key((12, 9), "k.cu", &header, "src"));
    }

    #[test]
    fn key_changes_with_defines_include_folders_and_name_expressions() {
        let opts = CompileOptions::default();
        let base = key((12, 9), "k.cu", &opts, "src");
        let defined = CompileOptions {
            extra: vec!["-DNBLOCKS=4".into()],
            ..opts.clone()
        };
        assert_ne!(base, key((12, 9), "k.cu", &defined, "src"));
        let included = CompileOptions {
            include_dirs: vec!["/apps/x/include".into()],
            ..opts.clone()
        };
        assert_ne!(base, key((12, 9), "k.cu", &included, "src"));
        let named = CompileOptions {
            name_expressions: vec!["reduce<128, true>".into()],
            ..opts.clone()
        };
        let other_name = CompileOptions {
            name_expressions: vec!["reduce<64, true>".into()],
            ..opts
        };
        assert_ne!(base, key((12, 9), "k.cu", &named, "src"));
        assert_ne!(
            key((12, 9), "k.cu", &named, "src"),
            key((12, 9), "k.cu", &other_name, "src")
        );
    }

    /// Regression guard: NVRTC reads included headers itself, so a key of the source text alone
    /// would hand out the PTX of a header's old text.
    #[test]
    fn key_changes_when_an_included_header_changes() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("k.cu");
        let main = main.to_string_lossy();
        std::fs::create_dir(dir.path().join("inc")).unwrap();
        let header = dir.path().join("inc/h.cuh");
        std::fs::write(&header, "#define N 1\n").unwrap();
        let opts = CompileOptions {
            include_dirs: vec![dir.path().join("inc")],
            ..CompileOptions::default()
        };
        let source = "#include <h.cuh>\n";
        let before = key((12, 9), &main, &opts, source);
        assert_eq!(before, key((12, 9), &main, &opts, source));
        std::fs::write(&header, "#define N 2\n").unwrap();
        assert_ne!(before, key((12, 9), &main, &opts, source));
    }

    #[test]
    fn lowered_names_come_back_from_a_hit() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = PtxCache::new(tmp.path());
        let fake = FakeCompiler {
            calls: Cell::new(0),
        };
        let opts = CompileOptions {
            name_expressions: vec!["k<1>".into()],
            ..CompileOptions::default()
        };
        let first = cache.get_or_compile(&fake, "a", "k.cu", &opts).unwrap();
        let second = cache.get_or_compile(&fake, "a", "k.cu", &opts).unwrap();
        assert_eq!(fake.calls.get(), 1);
        assert_eq!(
            second.lowered_names,
            [("k<1>".into(), "lowered_k<1>".into())]
        );
        assert_eq!(first, second);
    }

    #[test]
    fn key_fields_do_not_run_together() {
        let opts = CompileOptions::default();
        assert_ne!(
            key((12, 9), "ab", &opts, "c"),
            key((12, 9), "a", &opts, "bc")
        );
    }

    #[test]
    fn sm_and_compute_spellings_share_a_key() {
        let sm = CompileOptions::default();
        let compute = CompileOptions {
            arch: "compute_70".into(),
            ..CompileOptions::default()
        };
        assert_eq!(
            key((12, 9), "k.cu", &sm, "s"),
            key((12, 9), "k.cu", &compute, "s")
        );
    }

    #[test]
    fn bad_options_are_an_error() {
        let opts = CompileOptions {
            arch: "bogus".into(),
            ..CompileOptions::default()
        };
        assert!(cache_key((12, 9), "k.cu", &opts, "s").is_err());
    }

    /// Counts compilations; fails when the source contains "error".
    struct FakeCompiler {
        calls: Cell<u32>,
    }

    impl PtxCompiler for FakeCompiler {
        fn version(&self) -> (i32, i32) {
            (12, 9)
        }

        fn compile(
            &self,
            source: &str,
            file_name: &str,
            opts: &CompileOptions,
        ) -> Result<CompiledPtx, NvrtcError> {
            self.calls.set(self.calls.get() + 1);
            if source.contains("error") {
                return Err(NvrtcError::Compile {
                    file: file_name.into(),
                    log: "bad".into(),
                });
            }
            Ok(CompiledPtx {
                ptx: format!("// ptx of {source}"),
                log: "warning".into(),
                lowered_names: opts
                    .name_expressions
                    .iter()
                    .map(|e| (e.clone(), format!("lowered_{e}")))
                    .collect(),
            })
        }
    }

    #[test]
    fn second_request_is_a_hit() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = PtxCache::new(tmp.path().join("ptx"));
        let fake = FakeCompiler {
            calls: Cell::new(0),
        };
        let opts = CompileOptions::default();
        let first = cache.get_or_compile(&fake, "a", "k.cu", &opts).unwrap();
        let second = cache.get_or_compile(&fake, "a", "k.cu", &opts).unwrap();
        assert_eq!(first, second);
        assert_eq!(second.log, "warning");
        assert_eq!(fake.calls.get(), 1);
        cache.get_or_compile(&fake, "b", "k.cu", &opts).unwrap();
        assert_eq!(fake.calls.get(), 2);
        let leftovers: Vec<_> = fs::read_dir(cache.dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn compile_errors_are_not_cached() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = PtxCache::new(tmp.path());
        let fake = FakeCompiler {
            calls: Cell::new(0),
        };
        let opts = CompileOptions::default();
        for _ in 0..2 {
            let err = cache
                .get_or_compile(&fake, "error", "k.cu", &opts)
                .unwrap_err();
            assert!(matches!(
                err,
                ToolchainError::Nvrtc(NvrtcError::Compile { .. })
            ));
        }
        assert_eq!(fake.calls.get(), 2);
    }
}
