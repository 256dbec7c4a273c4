//! NVRTC, loaded at run time with `libloading`.
//!
//! gpuwmm compiles each application's CUDA source to PTX itself (with line info, so fence sites
//! map back to `file:line`). NVRTC is opened by full path rather than linked, so the crate builds
//! and its tests run on machines without CUDA, and the pinned wheel's NVRTC can be used without
//! `LD_LIBRARY_PATH`: `libnvrtc-builtins` from the same folder is loaded first with `RTLD_GLOBAL`,
//! so NVRTC's own `dlopen` of it by name finds the copy already in the process.
//!
//! This is the only file of the toolchain layer with `unsafe` code: the FFI calls.

#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use libloading::Library;

/// Errors from loading or calling NVRTC.
#[derive(Debug, thiserror::Error)]
pub enum NvrtcError {
    /// The shared library could not be opened.
    #[error("cannot load NVRTC from {}: {source}", .path.display())]
    Load {
        path: PathBuf,
        #[source]
        source: libloading::Error,
    },
    /// The library lacks an NVRTC entry point (not an NVRTC library, or too old).
    #[error("{} has no symbol {name}: {source}", .path.display())]
    Symbol {
        path: PathBuf,
        name: &'static str,
        #[source]
        source: libloading::Error,
    },
    /// The source failed to compile; `log` is NVRTC's diagnostic output.
    #[error("NVRTC failed to compile {file}:\n{log}")]
    Compile { file: String, log: String },
    /// NVRTC rejected the options (for example an architecture it does not support).
    #[error("NVRTC rejected the options {options:?} for {file}: {message}\n{log}")]
    Options {
        file: String,
        options: Vec<String>,
        message: String,
        log: String,
    },
    /// Any other NVRTC API failure.
    #[error("{call} failed: {message} (nvrtcResult {code})")]
    Api {
        call: &'static str,
        code: i32,
        message: String,
    },
    /// Input that cannot be passed to NVRTC (an interior NUL byte, a bad architecture).
    #[error("invalid NVRTC input: {0}")]
    InvalidInput(String),
}

/// How to compile: the defaults are what gpuwmm's passes expect.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// `sm_XY` (compiled for the virtual `compute_XY`), `compute_XY`, or [`PORTABLE_ARCH`]
    /// (the default): the oldest the NVRTC that compiles accepts, see [`resolve_arch`].
    pub arch: String,
    /// Emit `.loc` line information (`-lineinfo`). Default true.
    pub line_info: bool,
    /// Further NVRTC options, passed last, as given.
    pub extra: Vec<String>,
    /// In-memory headers as (include name, text), which `#include <name>` finds before any
    /// folder (NVRTC's `headers`/`includeNames`). Default none.
    pub headers: Vec<(String, String)>,
    /// Folders searched for `#include` (`-I`), in order, before those in `extra`. The cache key
    /// covers the files the source includes from them. Default none.
    pub include_dirs: Vec<PathBuf>,
    /// C++ names of kernels and variables (`reduce<128, true>`) to instantiate and look up, so
    /// [`CompiledPtx::lowered_names`] gives their PTX names (NVRTC's name expressions). Default
    /// none.
    pub name_expressions: Vec<String>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            arch: PORTABLE_ARCH.to_string(),
            line_info: true,
            extra: Vec::new(),
            headers: Vec::new(),
            include_dirs: Vec::new(),
            name_expressions: Vec::new(),
        }
    }
}

impl CompileOptions {
    /// The command-line options these stand for to NVRTC `version` (which resolves
    /// [`PORTABLE_ARCH`]).
    pub fn to_args(&self, version: (i32, i32)) -> Result<Vec<String>, NvrtcError> {
        let arch = resolve_arch(&self.arch, version);
        let mut args = vec![format!("--gpu-architecture={}", virtual_arch(arch)?)];
        if self.line_info {
            args.push("-lineinfo".to_string());
        }
        for dir in &self.include_dirs {
            args.push(format!("-I{}", dir.display()));
        }
        args.extend(self.extra.iter().cloned());
        Ok(args)
    }
}

/// The architecture name that stands for the oldest one the NVRTC at hand accepts. Its PTX
/// JIT-compiles for every newer chip and is what the simulator runs. CUDA 12 accepts `sm_70`;
/// CUDA 13 dropped Volta, so there it is `sm_75`. Resolving it from the NVRTC actually loaded
/// lets the same binary use pinned CUDA 12 wheels in CI and a machine's CUDA 13 toolkit.
pub const PORTABLE_ARCH: &str = "portable";

/// `arch` as NVRTC `version` should be asked for it: [`PORTABLE_ARCH`] becomes that NVRTC's
/// oldest architecture; any other name is kept, so an explicit `sm_70` on CUDA 13 is NVRTC's
/// error to report.
pub fn resolve_arch(arch: &str, version: (i32, i32)) -> &str {
    match arch {
        PORTABLE_ARCH => oldest_arch(version),
        named => named,
    }
}

/// The oldest architecture NVRTC `version` compiles for (CUDA 13 removed Maxwell to Volta).
pub fn oldest_arch(version: (i32, i32)) -> &'static str {
    if version.0 >= 13 {
        "sm_75"
    } else {
        "sm_70"
    }
}

/// `sm_70` → `compute_70`; `compute_70` stays; anything else is an error.
fn virtual_arch(arch: &str) -> Result<String, NvrtcError> {
    let (prefix, number) = if let Some(n) = arch.strip_prefix("sm_") {
        ("compute_", n)
    } else if let Some(n) = arch.strip_prefix("compute_") {
        ("compute_", n)
    } else {
        return Err(NvrtcError::InvalidInput(format!(
            "architecture '{arch}' is neither sm_XY nor compute_XY"
        )));
    };
    let digits = number.trim_end_matches(['a', 'f']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NvrtcError::InvalidInput(format!(
            "architecture '{arch}' has no version number"
        )));
    }
    Ok(format!("{prefix}{number}"))
}

/// The result of a successful compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledPtx {
    /// The PTX text.
    pub ptx: String,
    /// NVRTC's log (warnings), possibly empty.
    pub log: String,
    /// Each of [`CompileOptions::name_expressions`] with its name in the PTX, in that order.
    pub lowered_names: Vec<(String, String)>,
}

type Program = *mut c_void;
type FnVersion = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type FnErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type FnCreate = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type FnDestroy = unsafe extern "C" fn(*mut Program) -> c_int;
type FnCompile = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type FnSize = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type FnText = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type FnAddName = unsafe extern "C" fn(Program, *const c_char) -> c_int;
type FnLoweredName = unsafe extern "C" fn(Program, *const c_char, *mut *const c_char) -> c_int;

const NVRTC_SUCCESS: c_int = 0;
const NVRTC_ERROR_INVALID_OPTION: c_int = 5;
const NVRTC_ERROR_COMPILATION: c_int = 6;

/// NVRTC's entry points, copied out of the library. Valid only while the library that
/// [`Nvrtc`] holds is loaded.
#[derive(Clone, Copy)]
struct Api {
    version: FnVersion,
    error_string: FnErrorString,
    create: FnCreate,
    destroy: FnDestroy,
    compile: FnCompile,
    ptx_size: FnSize,
    ptx: FnText,
    log_size: FnSize,
    log: FnText,
    add_name: FnAddName,
    lowered_name: FnLoweredName,
}

/// A loaded NVRTC library. Dropping it unloads the library: outside this module's tests, use
/// [`Nvrtc::shared`], which never does.
pub struct Nvrtc {
    // Field order matters: the function pointers are dropped (trivially) before the libraries
    // that back them, and NVRTC is unloaded before its builtins.
    api: Api,
    version: (i32, i32),
    path: PathBuf,
    _lib: Library,
    _builtins: Option<Library>,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Nvrtc {
    /// Loads NVRTC from `path` (a `libnvrtc.so…` file), preloading `libnvrtc-builtins` from the
    /// same folder when it is there.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, NvrtcError> {
        let path = path.as_ref().to_path_buf();
        let builtins = preload_builtins(&path)?;
        // SAFETY: loading a shared library runs its initialisers; NVRTC's are sound to run in any
        // process and have no preconditions. The path is the caller's choice of NVRTC library.
        let lib = unsafe { Library::new(&path) }.map_err(|source| NvrtcError::Load {
            path: path.clone(),
            source,
        })?;
        let api = Api::resolve(&lib, &path)?;
        let version = query_version(&api)?;
        Ok(Self {
            api,
            version,
            path,
            _lib: lib,
            _builtins: builtins,
        })
    }

    /// NVRTC from `path`, loaded once for the whole process and never unloaded. NVRTC keeps
    /// state per thread that it frees when the thread ends, so unloading it while a thread that
    /// compiled still runs leaves that thread to jump into unmapped code when it exits: a test
    /// process whose threads each loaded, used and dropped their own handle died with SIGSEGV
    /// now and then (device_variables, under load). Every compilation goes through this.
    pub fn shared(path: &Path) -> Result<&'static Nvrtc, NvrtcError> {
        static LOADED: Mutex<Vec<&'static Nvrtc>> = Mutex::new(Vec::new());
        let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(nvrtc) = loaded.iter().find(|n| n.path == path) {
            return Ok(nvrtc);
        }
        let nvrtc: &'static Nvrtc = Box::leak(Box::new(Nvrtc::load(path)?));
        loaded.push(nvrtc);
        Ok(nvrtc)
    }

    /// NVRTC's version, e.g. `(12, 9)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The library this was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Compiles CUDA `source` (named `file_name` in diagnostics and `.file` directives) to PTX.
    pub fn compile(
        &self,
        source: &str,
        file_name: &str,
        opts: &CompileOptions,
    ) -> Result<CompiledPtx, NvrtcError> {
        let args = opts.to_args(self.version)?;
        let c_source = c_string(source, "source")?;
        let c_name = c_string(file_name, "file name")?;
        let c_args = args
            .iter()
            .map(|a| c_string(a, "option"))
            .collect::<Result<Vec<_>, _>>()?;
        let headers = HeaderTexts::new(&opts.headers)?;
        let program = ProgramGuard::create(self, &c_source, &c_name, &headers)?;
        let c_expressions = opts
            .name_expressions
            .iter()
            .map(|e| c_string(e, "name expression"))
            .collect::<Result<Vec<_>, _>>()?;
        for expression in &c_expressions {
            program.add_name_expression(expression)?;
        }
        let code = program.compile(&c_args)?;
        let log = program.log()?;
        match code {
            NVRTC_SUCCESS => Ok(CompiledPtx {
                ptx: program.ptx()?,
                log,
                lowered_names: opts
                    .name_expressions
                    .iter()
                    .zip(&c_expressions)
                    .map(|(e, c)| Ok((e.clone(), program.lowered_name(c)?)))
                    .collect::<Result<_, NvrtcError>>()?,
            }),
            NVRTC_ERROR_COMPILATION => Err(NvrtcError::Compile {
                file: file_name.to_string(),
                log,
            }),
            NVRTC_ERROR_INVALID_OPTION => Err(NvrtcError::Options {
                file: file_name.to_string(),
                options: args,
                message: self.error_string(code),
                log,
            }),
            _ => Err(self.api_error("nvrtcCompileProgram", code)),
        }
    }

    fn error_string(&self, code: c_int) -> String {
        // SAFETY: nvrtcGetErrorString accepts any value and returns a pointer to a static,
        // NUL-terminated string (or NULL, handled below); the library is loaded while `self` lives.
        let ptr = unsafe { (self.api.error_string)(code) };
        if ptr.is_null() {
            return format!("unknown NVRTC error {code}");
        }
        // SAFETY: non-null pointers from nvrtcGetErrorString point to static C strings.
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }

    fn api_error(&self, call: &'static str, code: c_int) -> NvrtcError {
        NvrtcError::Api {
            call,
            code,
            message: self.error_string(code),
        }
    }

    fn check(&self, call: &'static str, code: c_int) -> Result<(), NvrtcError> {
        if code == NVRTC_SUCCESS {
            Ok(())
        } else {
            Err(self.api_error(call, code))
        }
    }
}

fn c_string(text: &str, what: &str) -> Result<CString, NvrtcError> {
    CString::new(text).map_err(|_| NvrtcError::InvalidInput(format!("{what} contains a NUL byte")))
}

/// Loads `libnvrtc-builtins.so*` from NVRTC's folder with `RTLD_GLOBAL`, so NVRTC's later
/// `dlopen` by soname finds it without `LD_LIBRARY_PATH`. Absent builtins are not an error here:
/// NVRTC may still find them itself, and reports it clearly when it does not.
fn preload_builtins(nvrtc: &Path) -> Result<Option<Library>, NvrtcError> {
    let Some(builtins) = find_builtins(nvrtc) else {
        return Ok(None);
    };
    use libloading::os::unix::{Library as UnixLibrary, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: as for NVRTC itself, loading the builtins library only runs its initialisers,
    // which have no preconditions; it is NVRTC's own companion from the same folder.
    let lib = unsafe { UnixLibrary::open(Some(&builtins), RTLD_NOW | RTLD_GLOBAL) }.map_err(
        |source| NvrtcError::Load {
            path: builtins.clone(),
            source,
        },
    )?;
    Ok(Some(lib.into()))
}

/// `libnvrtc-builtins.so.X.Y` beside `nvrtc` (resolving symlinks), ignoring the `.alt` variant.
fn find_builtins(nvrtc: &Path) -> Option<PathBuf> {
    let dirs = [
        nvrtc.parent().map(Path::to_path_buf),
        std::fs::canonicalize(nvrtc)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf)),
    ];
    dirs.into_iter().flatten().find_map(|dir| {
        let entries = std::fs::read_dir(&dir).ok()?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libnvrtc-builtins.so"))
            })
            .collect();
        found.sort();
        found.pop()
    })
}

impl Api {
    fn resolve(lib: &Library, path: &Path) -> Result<Self, NvrtcError> {
        Ok(Self {
            version: symbol(lib, path, "nvrtcVersion")?,
            error_string: symbol(lib, path, "nvrtcGetErrorString")?,
            create: symbol(lib, path, "nvrtcCreateProgram")?,
            destroy: symbol(lib, path, "nvrtcDestroyProgram")?,
            compile: symbol(lib, path, "nvrtcCompileProgram")?,
            ptx_size: symbol(lib, path, "nvrtcGetPTXSize")?,
            ptx: symbol(lib, path, "nvrtcGetPTX")?,
            log_size: symbol(lib, path, "nvrtcGetProgramLogSize")?,
            log: symbol(lib, path, "nvrtcGetProgramLog")?,
            add_name: symbol(lib, path, "nvrtcAddNameExpression")?,
            lowered_name: symbol(lib, path, "nvrtcGetLoweredName")?,
        })
    }
}

/// Looks up `name` and copies the function pointer out. `T` must be the C signature of `name`.
fn symbol<T: Copy>(lib: &Library, path: &Path, name: &'static str) -> Result<T, NvrtcError> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0);
    // SAFETY: every call site pairs `name` with `T` = its exact signature from nvrtc.h (the type
    // aliases above). The copied pointer is used only while `lib` is loaded: `Nvrtc` owns both.
    let sym = unsafe { lib.get::<T>(&bytes) };
    sym.map(|s| *s).map_err(|source| NvrtcError::Symbol {
        path: path.to_path_buf(),
        name,
        source,
    })
}

fn query_version(api: &Api) -> Result<(i32, i32), NvrtcError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: nvrtcVersion writes two ints through the two valid, exclusive pointers.
    let code = unsafe { (api.version)(&mut major, &mut minor) };
    if code != NVRTC_SUCCESS {
        return Err(NvrtcError::Api {
            call: "nvrtcVersion",
            code,
            message: String::new(),
        });
    }
    Ok((major, minor))
}

/// In-memory headers as NUL-terminated strings, with the pointer arrays NVRTC takes.
struct HeaderTexts {
    _owned: Vec<(CString, CString)>,
    names: Vec<*const c_char>,
    texts: Vec<*const c_char>,
}

impl HeaderTexts {
    fn new(headers: &[(String, String)]) -> Result<Self, NvrtcError> {
        let owned = headers
            .iter()
            .map(|(name, text)| Ok((c_string(name, "header name")?, c_string(text, "header")?)))
            .collect::<Result<Vec<_>, NvrtcError>>()?;
        // The pointers stay valid when `owned` moves: they point into each CString's heap buffer.
        let names = owned.iter().map(|(name, _)| name.as_ptr()).collect();
        let texts = owned.iter().map(|(_, text)| text.as_ptr()).collect();
        Ok(Self {
            _owned: owned,
            names,
            texts,
        })
    }

    fn count(&self) -> Result<c_int, NvrtcError> {
        c_int::try_from(self.names.len())
            .map_err(|_| NvrtcError::InvalidInput("too many headers".to_string()))
    }

    /// The array pointer NVRTC expects: NULL when there are no headers.
    fn array(pointers: &[*const c_char]) -> *const *const c_char {
        if pointers.is_empty() {
            std::ptr::null()
        } else {
            pointers.as_ptr()
        }
    }
}

/// One NVRTC program, destroyed when dropped (on every path, errors included).
struct ProgramGuard<'a> {
    nvrtc: &'a Nvrtc,
    program: Program,
}

impl<'a> ProgramGuard<'a> {
    fn create(
        nvrtc: &'a Nvrtc,
        source: &CStr,
        name: &CStr,
        headers: &HeaderTexts,
    ) -> Result<Self, NvrtcError> {
        let mut program: Program = std::ptr::null_mut();
        let count = headers.count()?;
        // SAFETY: `program` is a valid out-pointer; `source` and `name` are NUL-terminated and
        // outlive the call (NVRTC copies them); `headers` holds `count` pointers to NUL-terminated
        // texts and as many to names, alive for the call (zero headers with NULL arrays is allowed).
        let code = unsafe {
            (nvrtc.api.create)(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                count,
                HeaderTexts::array(&headers.texts),
                HeaderTexts::array(&headers.names),
            )
        };
        nvrtc.check("nvrtcCreateProgram", code)?;
        Ok(Self { nvrtc, program })
    }

    /// Runs the compiler; returns NVRTC's result code, which the caller interprets.
    fn compile(&self, args: &[CString]) -> Result<c_int, NvrtcError> {
        let pointers: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
        let count = c_int::try_from(pointers.len())
            .map_err(|_| NvrtcError::InvalidInput("too many options".to_string()))?;
        // SAFETY: `self.program` is a live program; `pointers` holds `count` pointers to
        // NUL-terminated strings in `args`, all alive for the duration of the call.
        Ok(unsafe { (self.nvrtc.api.compile)(self.program, count, pointers.as_ptr()) })
    }

    /// Asks NVRTC to instantiate `expression` and record its lowered name (before compiling).
    fn add_name_expression(&self, expression: &CStr) -> Result<(), NvrtcError> {
        // SAFETY: `self.program` is a live program; `expression` is NUL-terminated and alive
        // for the call (NVRTC copies it).
        let code = unsafe { (self.nvrtc.api.add_name)(self.program, expression.as_ptr()) };
        self.nvrtc.check("nvrtcAddNameExpression", code)
    }

    /// The PTX name of `expression`, added before a successful compilation.
    fn lowered_name(&self, expression: &CStr) -> Result<String, NvrtcError> {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: `self.program` is live and compiled; `expression` is NUL-terminated; `name`
        // is a valid out-pointer that NVRTC sets to a string owned by the program.
        let code =
            unsafe { (self.nvrtc.api.lowered_name)(self.program, expression.as_ptr(), &mut name) };
        self.nvrtc.check("nvrtcGetLoweredName", code)?;
        if name.is_null() {
            return Err(self.nvrtc.api_error("nvrtcGetLoweredName", code));
        }
        // SAFETY: a non-null name from nvrtcGetLoweredName is a NUL-terminated string that
        // lives as long as the program, which `self` still holds; it is copied out here.
        Ok(unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned())
    }

    fn ptx(&self) -> Result<String, NvrtcError> {
        self.read_text(
            ("nvrtcGetPTXSize", self.nvrtc.api.ptx_size),
            ("nvrtcGetPTX", self.nvrtc.api.ptx),
        )
    }

    fn log(&self) -> Result<String, NvrtcError> {
        self.read_text(
            ("nvrtcGetProgramLogSize", self.nvrtc.api.log_size),
            ("nvrtcGetProgramLog", self.nvrtc.api.log),
        )
    }

    /// Reads a NUL-terminated text of NVRTC-reported size (size includes the NUL).
    fn read_text(
        &self,
        (size_call, size_fn): (&'static str, FnSize),
        (text_call, text_fn): (&'static str, FnText),
    ) -> Result<String, NvrtcError> {
        let mut size = 0usize;
        // SAFETY: `self.program` is live and `size` is a valid out-pointer.
        let code = unsafe { size_fn(self.program, &mut size) };
        self.nvrtc.check(size_call, code)?;
        let mut buffer = vec![0u8; size.max(1)];
        // SAFETY: NVRTC writes at most `size` bytes (what it just reported) into `buffer`,
        // which holds at least that many.
        let code = unsafe { text_fn(self.program, buffer.as_mut_ptr().cast::<c_char>()) };
        self.nvrtc.check(text_call, code)?;
        let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
        Ok(String::from_utf8_lossy(&buffer[..end]).into_owned())
    }
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `self.program` was created by nvrtcCreateProgram and is destroyed exactly once,
        // here; the library is still loaded because `self.nvrtc` is borrowed. A failure cannot
        // be reported from `drop` and leaks at most the program.
        let _ = unsafe { (self.nvrtc.api.destroy)(&mut self.program) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_options_target_compute_70_with_line_info_before_cuda_13() {
        let args = CompileOptions::default().to_args((12, 9)).unwrap();
        assert_eq!(args, ["--gpu-architecture=compute_70", "-lineinfo"]);
    }

    /// Regression: the default said `sm_70`, which NVRTC 13 refuses (H100, CUDA 13.0); every
    /// caller had to remember to resolve the architecture itself.
    #[test]
    fn default_options_ask_nvrtc_13_for_compute_75() {
        let args = CompileOptions::default().to_args((13, 0)).unwrap();
        assert_eq!(args, ["--gpu-architecture=compute_75", "-lineinfo"]);
    }

    #[test]
    fn portable_is_volta_before_cuda_13_and_turing_from_it() {
        assert_eq!(resolve_arch(PORTABLE_ARCH, (12, 9)), "sm_70");
        assert_eq!(resolve_arch(PORTABLE_ARCH, (13, 0)), "sm_75");
        assert_eq!(resolve_arch(PORTABLE_ARCH, (14, 1)), "sm_75");
    }

    #[test]
    fn named_architectures_are_passed_through() {
        assert_eq!(resolve_arch("sm_90", (13, 0)), "sm_90");
        assert_eq!(resolve_arch("sm_70", (13, 0)), "sm_70");
    }

    #[test]
    fn options_keep_extra_flags_last_and_accept_virtual_arch() {
        let opts = CompileOptions {
            arch: "compute_90a".into(),
            line_info: false,
            extra: vec!["-DN=4".into()],
            ..CompileOptions::default()
        };
        assert_eq!(
            opts.to_args((13, 0)).unwrap(),
            ["--gpu-architecture=compute_90a", "-DN=4"]
        );
    }

    #[test]
    fn bad_arch_is_an_error_not_a_panic() {
        for arch in ["", "sm_", "70", "sm_x0", "gfx90a"] {
            let opts = CompileOptions {
                arch: arch.into(),
                ..CompileOptions::default()
            };
            assert!(
                matches!(opts.to_args((12, 9)), Err(NvrtcError::InvalidInput(_))),
                "{arch}"
            );
        }
    }

    #[test]
    fn loading_a_non_library_fails_cleanly() {
        let tmp = tempfile::tempdir().unwrap();
        let fake = tmp.path().join("libnvrtc.so.12");
        std::fs::write(&fake, "not an ELF file").unwrap();
        let err = Nvrtc::load(&fake).unwrap_err();
        assert!(matches!(err, NvrtcError::Load { .. }), "{err}");
        let err = Nvrtc::load(tmp.path().join("absent.so")).unwrap_err();
        assert!(err.to_string().contains("absent.so"), "{err}");
    }

    /// Regression (a test process died with SIGSEGV now and then: each compilation loaded NVRTC
    /// and unloaded it after, while other threads that had compiled still ran). Every thread
    /// gets the one NVRTC loaded for the process, and a failed load is not remembered.
    #[test]
    fn every_thread_shares_one_nvrtc_that_stays_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(Nvrtc::shared(&tmp.path().join("absent.so")).is_err());
        let Some(tools) = crate::toolchain::tools_for_tests() else {
            return;
        };
        let path = tools.require_nvrtc().unwrap().to_path_buf();
        let loaded: Vec<usize> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| s.spawn(|| Nvrtc::shared(&path).unwrap() as *const Nvrtc as usize))
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(loaded.iter().all(|&n| n == loaded[0]), "{loaded:?}");
        let nvrtc = Nvrtc::shared(&path).unwrap();
        assert_eq!(nvrtc as *const Nvrtc as usize, loaded[0]);
        let ptx = nvrtc.compile(
            "extern \"C\" __global__ void k(int *p) { *p = 1; }",
            "k.cu",
            &CompileOptions::default(),
        );
        assert!(ptx.is_ok(), "{ptx:?}");
    }
}
