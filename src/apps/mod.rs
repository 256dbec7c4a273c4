//! Applications: the case studies and bring-your-own apps that the drivers check and harden.
//!
//! An application is CUDA source plus host logic: allocate and initialise buffers, launch one or
//! more kernels, check a post-condition. The drivers (`check`, `harden`, `cost`) treat every app
//! the same way, through the [`App`] trait, and never learn what it computes:
//!
//! 1. [`App::module`] gives the app's PTX (compiled with NVRTC, with line info);
//! 2. the driver transforms it (fences inserted or stripped, stress harness added) and loads it
//!    with [`LoadedApp::load`], which also loads the app's check kernels, untransformed;
//! 3. [`LoadedApp::run`] runs the app once: the app sets up its buffers, every launch of an app
//!    kernel passes through the driver's [`Launcher`] (which may swap the module, grid and
//!    arguments, e.g. to add stressing blocks), and the app checks its post-condition, giving a
//!    [`Verdict`]. Backend errors (a hung kernel, a fault) come back as [`AppError::Backend`], so
//!    the driver can count them as `timeout` or `crash`. The modules' `__device__` variables act
//!    as the one variable of a program ([`module_vars`]): the check kernel is given the app's
//!    contents, and each run starts from their initial contents.
//!
//! The app knows nothing about stress or fences; the launcher knows nothing about the app.
//!
//! Files: [`builtin`] (the registry and the `-nf` variants), [`cbe`] (cbe-dot and cbe-ht, Rust
//! apps with CPU reference checks), [`manifest`] (the `app.toml` format) and [`manifest_app`]
//! (running an app described by a manifest, with a CUDA check kernel), [`expr`] (size
//! expressions), [`words`] (host-side element types), [`module_vars`] (the modules'
//! `__device__` variables across a run).

pub mod app_program;
pub mod builtin;
pub mod cbe;
pub mod describe;
pub mod expr;
pub mod hash;
pub mod host_code;
pub mod kernel_names;
pub mod manifest;
pub mod manifest_app;
pub mod module_vars;
pub mod words;

pub use crate::backend::words::Word;
pub use builtin::{builtin_apps, find_app, load_app_dir, load_named_app_dir, StrippedVariant};
pub use manifest::{Manifest, ManifestError, Problem};
pub use manifest_app::ManifestApp;
pub use words::ElemType;

use crate::backend::{Backend, BackendError, Buffer, KernelArg, LaunchConfig, ModuleId};
use crate::ptx::{self, Module};
use module_vars::ModuleVariables;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// The architecture app kernels are compiled for: the oldest the NVRTC at hand supports (see
/// [`crate::compile`]); its PTX JIT-compiles for every newer chip and is what the simulator runs.
pub const DEFAULT_ARCH: &str = crate::toolchain::PORTABLE_ARCH;

/// Which input size to run an app at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// Small enough for the simulator: a few blocks of at most 64 threads.
    Sim,
    /// A realistic size for a GPU.
    Gpu,
}

impl Size {
    pub const ALL: [Size; 2] = [Size::Sim, Size::Gpu];

    pub fn name(self) -> &'static str {
        match self {
            Size::Sim => "sim",
            Size::Gpu => "gpu",
        }
    }
}

display_by_name!(Size, name);
parse_by_name!(Size, name, String, |s| format!(
    "unknown size '{s}' (expected sim or gpu)"
));

/// The result of one run's post-condition check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail { reason: String },
}

impl Verdict {
    pub fn is_pass(&self) -> bool {
        matches!(self, Verdict::Pass)
    }

    pub fn fail(reason: impl Into<String>) -> Verdict {
        Verdict::Fail {
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Pass => f.write_str("pass"),
            Verdict::Fail { reason } => write!(f, "fail: {reason}"),
        }
    }
}

/// An app's CUDA source: where it lives (for `file:line` reports and patches) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSource {
    /// The app's (first) source file.
    pub path: PathBuf,
    pub text: String,
    /// The app's other files that fences may go in: further source files and the headers they
    /// include from the app's folders, each with its text.
    pub others: Vec<(PathBuf, String)>,
}

impl KernelSource {
    /// A source of one file.
    pub fn single(path: PathBuf, text: String) -> KernelSource {
        KernelSource {
            path,
            text,
            others: Vec::new(),
        }
    }

    /// Every file of the source, the first one first.
    pub fn files(&self) -> impl Iterator<Item = (&Path, &str)> {
        std::iter::once((self.path.as_path(), self.text.as_str()))
            .chain(self.others.iter().map(|(p, t)| (p.as_path(), t.as_str())))
    }

    /// The file of the source that `name` names, with its text (see [`source_file`]).
    pub fn file(&self, name: &Path) -> Option<(&Path, &str)> {
        source_file(self.files(), name)
    }
}

/// The text of an app's source file: the one of `files` (an app's, as [`KernelSource::files`]
/// gives them) that `name` names, as its path or another spelling of it. Reports read an app's
/// lines here, never from the disk: a built-in app's sources are compiled into the binary, under
/// a path that exists nowhere for an installed one ([`builtin_apps_dir`]).
pub fn source_file<'f>(
    mut files: impl Iterator<Item = (&'f Path, &'f str)>,
    name: &Path,
) -> Option<(&'f Path, &'f str)> {
    files.find(|(path, _)| same_file(name, path))
}

/// Whether two spellings name the same source: equal, or one relative and the other ending in
/// it (a bring-your-own app given as a relative `--app-dir`, while NVRTC names files
/// absolutely).
fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || (b.is_relative() && a.ends_with(b))
        || (a.is_relative() && b.ends_with(a))
        || a.canonicalize()
            .is_ok_and(|a| b.canonicalize().is_ok_and(|b| a == b))
}

/// A file of an app's source with a patch applied (see [`App::patched`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchedFile {
    /// The file, as [`App::source`] names it.
    pub path: PathBuf,
    pub text: String,
    /// The lines of `text` (1-based) that the patch changed or inserted: where its fences are.
    pub changed_lines: std::collections::BTreeSet<u32>,
}

impl PatchedFile {
    /// `path` with the text `text`, no line marked as the patch's.
    pub fn new(path: PathBuf, text: String) -> PatchedFile {
        PatchedFile {
            path,
            text,
            changed_lines: Default::default(),
        }
    }
}

/// Why an app cannot be rebuilt from patched texts of its files (see [`App::patched`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Unpatchable {
    #[error("the patch changes {}, which is not one of the app's source files", .0.display())]
    OtherFile(PathBuf),
    #[error("{name} is not built from a CUDA source gpuwmm can replace")]
    NoSource { name: String },
}

/// Everything that can go wrong with an app, other than a failed post-condition.
#[derive(Debug, Error)]
pub enum AppError {
    #[error("unknown application '{name}' (known: {known})")]
    UnknownApp { name: String, known: String },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{}: {message}", .path.display())]
    Compile { path: PathBuf, message: String },
    /// A listed source file holds host code, which NVRTC cannot compile.
    #[error(
        "{}:{line}: host code, which NVRTC cannot compile: `{text}`. gpuwmm compiles device code \
         only: guard the host part with `#ifndef __CUDACC_RTC__` ... `#endif`, or list only the \
         device files in `[source] files` of app.toml",
        .path.display()
    )]
    HostCode {
        path: PathBuf,
        /// The first host line (1-based) and its text.
        line: usize,
        text: String,
    },
    /// A file of the app includes a header NVRTC cannot open: a host header of the C++ library
    /// (NVRTC has none) outside those gpuwmm stands in for, or a file that is not there.
    #[error(
        "{}:{line}: NVRTC cannot open <{header}>: NVRTC compiles device code only and has no host \
         C++ library (gpuwmm stands in for {supplied}). Guard host-only includes with `#ifndef \
         __CUDACC_RTC__` ... `#endif`, or put stub headers in a folder and add it to `include` \
         in `[source]` of app.toml",
        .path.display()
    )]
    UnopenedHeader {
        path: PathBuf,
        /// The `#include` line (1-based).
        line: usize,
        header: String,
        /// The standard headers gpuwmm supplies, as `<cstdio>, <cstdint>, ...`.
        supplied: String,
    },
    /// A source file includes a device header of the CUDA runtime that NVRTC cannot open: no
    /// toolkit and no `.cuda-tools` with the runtime's headers was found.
    #[error(
        "{}:{line}: NVRTC cannot open <{header}>, a device header of the CUDA runtime: gpuwmm \
         gives NVRTC the `include/` folder of a CUDA toolkit, or `include/cudart` of the tools \
         `gpuwmm setup` installs, and found neither; {hint}",
        .path.display()
    )]
    MissingCudaHeader {
        path: PathBuf,
        /// The `#include` line (1-based).
        line: usize,
        header: String,
        hint: String,
    },
    /// The backend error is part of the message and deliberately not a `#[source]`: error
    /// reports that print the cause chain would otherwise print it twice.
    #[error("{app}: {step}: {error}")]
    Backend {
        app: String,
        /// What the app was doing: `launch 1 (kernel scan)`, `allocating buffer 'in'`.
        step: String,
        error: BackendError,
    },
    #[error("{app}: {message}")]
    Invalid { app: String, message: String },
    /// The check kernel left word 0 of its result buffer at
    /// [`manifest::UNWRITTEN_RESULT`]: the run has no verdict (never a pass).
    #[error(
        "{app}: check kernel did not write its result ({kernel} left {buffer}[0] at {:#x}, the \
         value set before it runs; a check kernel writes 0 or a failure code there)",
        manifest::UNWRITTEN_RESULT
    )]
    ResultNotWritten {
        app: String,
        kernel: String,
        buffer: String,
    },
}

impl AppError {
    /// The backend error behind this one, if any (a driver maps timeouts and faults to outcomes).
    pub fn backend_error(&self) -> Option<&BackendError> {
        match self {
            AppError::Backend { error, .. } => Some(error),
            _ => None,
        }
    }

    /// A hung kernel.
    pub fn is_timeout(&self) -> bool {
        self.backend_error().is_some_and(BackendError::is_timeout)
    }
}

/// A CUDA application with a post-condition.
pub trait App: Send + Sync {
    /// Short name, e.g. `cbe-dot`.
    fn name(&self) -> &str;

    /// The communication idiom, one sentence.
    fn description(&self) -> &str;

    /// The post-condition a run must satisfy, in words.
    fn postcondition(&self) -> &str;

    /// The CUDA source of the app's kernels.
    fn source(&self) -> &KernelSource;

    /// The kernels the app launches (through the [`Launcher`]) at `size`, by their names in
    /// the module, in launch order, without duplicates. Check kernels are not among them.
    fn kernels(&self, size: Size) -> Vec<String>;

    /// The named size parameters at `size` (for reports), e.g. `n = 256, blocks = 4`.
    fn parameters(&self, size: Size) -> Vec<(String, i64)>;

    /// The app's PTX at `size` (sizes may set preprocessor defines): its source compiled for
    /// `arch` with line info, after the variant's transformation (the `-nf` variants strip
    /// fences here), without check kernels. Drivers transform this module further and hand it
    /// to [`LoadedApp::load`].
    fn module(&self, arch: &str, _size: Size) -> Result<Module, AppError> {
        compile_source(self.source(), arch)
    }

    /// The module holding the app's check kernels at `size`, loaded untransformed next to the
    /// app module; `None` for apps that check on the host.
    fn check_module(&self, _arch: &str, _size: Size) -> Result<Option<Module>, AppError> {
        Ok(None)
    }

    /// For a `-nf` variant, the app whose fences it strips (reports compare fence sets with it).
    fn unstripped(&self) -> Option<&dyn App> {
        None
    }

    /// The manifest the app is described by (`None` for an app written in Rust).
    fn manifest(&self) -> Option<&Manifest> {
        None
    }

    /// The name in the module at `size` of the kernel the app names `kernel` (a manifest may
    /// name a template instance, compiled under a mangled name).
    fn resolved_kernel(&self, _size: Size, kernel: &str) -> String {
        kernel.to_string()
    }

    /// Runs the app once: set up buffers, launch through `ctx`, check the post-condition.
    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Verdict, AppError>;

    /// The same app built from `files` in place of those files: how `harden` compiles and runs
    /// its own patch without touching the user's files.
    fn patched(&self, _files: &[PatchedFile]) -> Result<Arc<dyn App>, Unpatchable> {
        Err(Unpatchable::NoSource {
            name: self.name().to_string(),
        })
    }
}

/// `source` with the texts `files` give its files; an error names a file of `files` that is
/// not one of its files.
pub fn replaced_texts(
    source: &KernelSource,
    files: &[PatchedFile],
) -> Result<KernelSource, Unpatchable> {
    let mut source = source.clone();
    for file in files {
        let slot = match same_file(&file.path, &source.path) {
            true => &mut source.text,
            false => match (source.others.iter_mut()).find(|(p, _)| same_file(&file.path, p)) {
                Some((_, text)) => text,
                None => return Err(Unpatchable::OtherFile(file.path.clone())),
            },
        };
        slot.clone_from(&file.text);
    }
    Ok(source)
}

/// The app's fence sites at `granularity`, numbered as `check --fences` and `harden` number
/// them: from its module for [`DEFAULT_ARCH`] at input size `size` (an app's per-size defines
/// may change its code), without its check kernels.
pub fn app_sites(
    app: &dyn App,
    size: Size,
    granularity: ptx::passes::fences::Granularity,
) -> Result<Vec<ptx::passes::fences::FenceSite>, AppError> {
    let module = app.module(DEFAULT_ARCH, size)?;
    Ok(ptx::passes::fences::fence_sites(&module, granularity))
}

/// Compiles an app's source to a parsed PTX module (NVRTC, cached by content).
pub fn compile_source(source: &KernelSource, arch: &str) -> Result<Module, AppError> {
    let compile_error = |message: String| AppError::Compile {
        path: source.path.clone(),
        message,
    };
    let text = crate::compile::compile_cuda(&source.path, &source.text, arch)
        .map_err(|e| compile_error(e.to_string()))?;
    ptx::parse(&text).map_err(|e| compile_error(format!("PTX line {}: {}", e.line, e.message)))
}

/// One launch of an app kernel, as the app asks for it. A [`Launcher`] may rewrite any field
/// except `index` and `kernel` before it starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// Position of this launch among the app's launches in this run, from 0.
    pub index: usize,
    /// The kernel's name (as in the app's module).
    pub kernel: String,
    /// The module to launch from: the app module of the [`LoadedApp`] unless a launcher swaps it.
    pub module: ModuleId,
    pub config: LaunchConfig,
    pub args: Vec<KernelArg>,
}

/// Intercepts the app's kernel launches. The stress harness implements this: it launches its
/// harnessed module instead, with its control block appended to the arguments and a larger grid
/// (e.g. through [`crate::stressed::StressedLauncher`]); the cost driver reads kernel times in
/// [`Launcher::after`]. Check kernels are never passed through it.
pub trait Launcher {
    /// Starts the app's launch. The default starts it unchanged; an implementation may change
    /// `launch.module`, `launch.config` and `launch.args` and then call [`Launch::start`], or
    /// start something else in its place (and should then record what it started in `launch`).
    /// The caller synchronises afterwards.
    fn launch(
        &mut self,
        backend: &mut dyn Backend,
        launch: &mut Launch,
    ) -> Result<(), BackendError> {
        launch.start(backend)
    }

    /// Called after the launch has completed (synchronised), with the launch as it was made.
    fn after(&mut self, _backend: &mut dyn Backend, _launch: &Launch) -> Result<(), BackendError> {
        Ok(())
    }
}

impl Launch {
    /// Starts this launch on `backend` as it stands.
    pub fn start(&self, backend: &mut dyn Backend) -> Result<(), BackendError> {
        backend.launch(self.module, &self.kernel, &self.config, &self.args)
    }
}

/// A launcher that launches exactly what the app asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectLauncher;

impl Launcher for DirectLauncher {}

/// How to run an app once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunOptions {
    pub size: Size,
    /// Seeds the app's random inputs; the same seed gives the same inputs.
    pub input_seed: u64,
    /// Deadline of each kernel (a kernel still running then is a timeout).
    pub deadline: Duration,
}

impl RunOptions {
    pub fn new(size: Size, input_seed: u64) -> RunOptions {
        RunOptions {
            size,
            input_seed,
            deadline: Duration::from_secs(30),
        }
    }
}

/// An app whose (possibly transformed) module and check module are loaded on a backend; run it
/// as often as needed.
pub struct LoadedApp<'a> {
    app: &'a dyn App,
    parts: LoadedParts,
}

/// What [`LoadedApp::load`] loaded, to keep while the app is borrowed elsewhere.
#[derive(Debug, Clone)]
pub struct LoadedParts {
    module: ModuleId,
    check_module: Option<ModuleId>,
    /// The modules' `__device__` variables (see [`module_vars`]).
    variables: Arc<ModuleVariables>,
}

impl<'a> LoadedApp<'a> {
    /// Loads `module` (the app's module from [`App::module`], transformed by the driver) and the
    /// app's check module compiled for `arch` at `size`.
    pub fn load(
        app: &'a dyn App,
        backend: &mut dyn Backend,
        module: &Module,
        arch: &str,
        size: Size,
    ) -> Result<LoadedApp<'a>, AppError> {
        let backend_error = |step: &str, error| AppError::Backend {
            app: app.name().to_string(),
            step: step.to_string(),
            error,
        };
        let check = app.check_module(arch, size)?;
        let variables =
            ModuleVariables::new(module, check.as_ref()).map_err(|message| AppError::Invalid {
                app: app.name().to_string(),
                message,
            })?;
        let module = backend
            .load_module(&ptx::print(module))
            .map_err(|e| backend_error("loading the app module", e))?;
        let check_module = match check {
            Some(check) => Some(
                backend
                    .load_module(&ptx::print(&check))
                    .map_err(|e| backend_error("loading the check module", e))?,
            ),
            None => None,
        };
        Ok(LoadedApp {
            app,
            parts: LoadedParts {
                module,
                check_module,
                variables: Arc::new(variables),
            },
        })
    }

    pub fn app(&self) -> &'a dyn App {
        self.app
    }

    /// The loaded modules, to keep while the app is borrowed elsewhere.
    pub fn parts(&self) -> LoadedParts {
        self.parts.clone()
    }

    /// The app again, with what [`LoadedApp::load`] loaded for it on the same backend (as
    /// [`LoadedApp::parts`] returned it).
    pub fn from_parts(app: &'a dyn App, parts: LoadedParts) -> LoadedApp<'a> {
        LoadedApp { app, parts }
    }

    /// The loaded app module.
    pub fn module(&self) -> ModuleId {
        self.parts.module
    }

    /// Runs the app once. Buffers the app allocated are freed afterwards, and the modules'
    /// variables get their initial contents back, also on error.
    pub fn run(
        &self,
        backend: &mut dyn Backend,
        launcher: &mut dyn Launcher,
        options: &RunOptions,
    ) -> Result<Verdict, AppError> {
        let mut ctx = RunContext {
            app: self.app.name(),
            backend,
            launcher,
            module: self.parts.module,
            check_module: self.parts.check_module,
            variables: &self.parts.variables,
            launched_from: Vec::new(),
            options: *options,
            buffers: Vec::new(),
            launches: 0,
        };
        self.app.run(&mut ctx)
    }
}

/// Compiles `app` for `arch`, applies `transform` to its module, loads it and runs it once.
/// Convenient for one-off runs; a campaign should load once and run a [`LoadedApp`] many times.
pub fn run_once(
    app: &dyn App,
    backend: &mut dyn Backend,
    transform: impl FnOnce(Module) -> Module,
    launcher: &mut dyn Launcher,
    options: &RunOptions,
) -> Result<Verdict, AppError> {
    let module = transform(app.module(DEFAULT_ARCH, options.size)?);
    LoadedApp::load(app, backend, &module, DEFAULT_ARCH, options.size)?
        .run(backend, launcher, options)
}

/// What an app sees of the machine during one run.
pub struct RunContext<'r> {
    app: &'r str,
    backend: &'r mut dyn Backend,
    launcher: &'r mut dyn Launcher,
    module: ModuleId,
    check_module: Option<ModuleId>,
    variables: &'r ModuleVariables,
    /// The modules the app's launches of this run ran from (the launcher may swap the module),
    /// in the order they were first used.
    launched_from: Vec<ModuleId>,
    options: RunOptions,
    buffers: Vec<Buffer>,
    launches: usize,
}

impl RunContext<'_> {
    pub fn size(&self) -> Size {
        self.options.size
    }

    pub fn input_seed(&self) -> u64 {
        self.options.input_seed
    }

    /// A generator for the run's random inputs, seeded by the input seed.
    pub fn rng(&self) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.options.input_seed)
    }

    /// The backend, for anything the helpers below do not cover.
    pub fn backend(&mut self) -> &mut dyn Backend {
        &mut *self.backend
    }

    fn error(&self, step: impl Into<String>, error: BackendError) -> AppError {
        AppError::Backend {
            app: self.app.to_string(),
            step: step.into(),
            error,
        }
    }

    /// Allocates `bytes` of zeroed device memory, freed at the end of the run.
    pub fn alloc(&mut self, what: &str, bytes: usize) -> Result<Buffer, AppError> {
        let buffer = self
            .backend
            .alloc(bytes.max(1))
            .map_err(|e| self.error(format!("allocating buffer '{what}'"), e))?;
        self.buffers.push(buffer);
        Ok(buffer)
    }

    /// Allocates a buffer holding `data`.
    pub fn upload<T: Word>(&mut self, what: &str, data: &[T]) -> Result<Buffer, AppError> {
        let buffer = self.alloc(what, std::mem::size_of_val(data))?;
        self.write(what, buffer, data)?;
        Ok(buffer)
    }

    /// Overwrites the start of `buffer` with `data`.
    pub fn write<T: Word>(
        &mut self,
        what: &str,
        buffer: Buffer,
        data: &[T],
    ) -> Result<(), AppError> {
        let bytes = crate::backend::words::to_bytes(data);
        self.backend
            .copy_in(buffer, 0, &bytes)
            .map_err(|e| self.error(format!("writing buffer '{what}'"), e))
    }

    /// Sets every byte of `buffer` to `byte`.
    pub fn memset(&mut self, what: &str, buffer: Buffer, byte: u8) -> Result<(), AppError> {
        self.backend
            .memset(buffer, byte)
            .map_err(|e| self.error(format!("setting buffer '{what}'"), e))
    }

    /// Reads the first `len` elements of `buffer`.
    pub fn download<T: Word>(
        &mut self,
        what: &str,
        buffer: Buffer,
        len: usize,
    ) -> Result<Vec<T>, AppError> {
        let mut bytes = vec![0u8; len * T::BYTES];
        self.backend
            .copy_out(buffer, 0, &mut bytes)
            .map_err(|e| self.error(format!("reading buffer '{what}'"), e))?;
        Ok(crate::backend::words::from_bytes(&bytes))
    }

    /// Launches an app kernel through the driver's launcher and waits for it.
    pub fn launch(
        &mut self,
        kernel: &str,
        config: LaunchConfig,
        args: Vec<KernelArg>,
    ) -> Result<(), AppError> {
        let mut launch = Launch {
            index: self.launches,
            kernel: kernel.to_string(),
            module: self.module,
            config,
            args,
        };
        self.launches += 1;
        let name = ptx::demangle::call_name(kernel);
        let step = format!("launch {} (kernel {name})", launch.index);
        let started = self.launcher.launch(&mut *self.backend, &mut launch);
        self.launched_from.retain(|&m| m != launch.module);
        self.launched_from.push(launch.module);
        started
            .and_then(|()| self.backend.synchronize(self.options.deadline))
            .map_err(|e| self.error(step.clone(), e))?;
        self.launcher
            .after(&mut *self.backend, &launch)
            .map_err(|e| self.error(step, e))
    }

    /// Launches a check kernel from the untransformed check module (not through the launcher)
    /// and waits for it.
    pub fn launch_check(
        &mut self,
        kernel: &str,
        config: LaunchConfig,
        args: &[KernelArg],
    ) -> Result<(), AppError> {
        let Some(module) = self.check_module else {
            return Err(AppError::Invalid {
                app: self.app.to_string(),
                message: format!(
                    "check kernel '{kernel}' launched, but the app has no check module"
                ),
            });
        };
        let from = self.launched_from.last().copied().unwrap_or(self.module);
        self.variables
            .pass_to_check(&mut *self.backend, from, module)
            .map_err(|e| self.error("giving the check module the app's variables", e))?;
        let step = format!("check kernel {kernel}");
        self.backend
            .launch(module, kernel, &config, args)
            .and_then(|()| self.backend.synchronize(self.options.deadline))
            .map_err(|e| self.error(step, e))
    }
}

impl Drop for RunContext<'_> {
    fn drop(&mut self) {
        // Best effort: a backend that lost its context after a crash can neither free nor copy,
        // and the run that follows fails on it anyway.
        for buffer in self.buffers.drain(..) {
            let _ = self.backend.free(buffer);
        }
        if !self.variables.is_empty() {
            let mut modules = vec![self.module];
            modules.extend(self.launched_from.iter().filter(|&&m| m != self.module));
            let _ = self
                .variables
                .restore(&mut *self.backend, &modules, self.check_module);
        }
    }
}

/// A 1-D launch configuration.
pub fn linear(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig::new((grid, 1, 1), (block, 1, 1))
}

/// The folder reports name the built-in apps' sources under (the sources themselves are compiled
/// into the binary): `apps/` of the checkout for a binary run from its build tree, else
/// `/built-in/gpuwmm/apps`, a path that exists nowhere, so an installed binary never names or
/// reads a source tree it may no longer have.
pub fn builtin_apps_dir() -> &'static Path {
    static DIR: std::sync::LazyLock<PathBuf> =
        std::sync::LazyLock::new(|| match crate::places::source_tree() {
            Some(checkout) => checkout.join("apps"),
            None => PathBuf::from("/built-in/gpuwmm/apps"),
        });
    &DIR
}

/// Where a patch whose paths are relative to `root` applies, as a report says it: `root`
/// itself, or, for a built-in app's folder that exists nowhere (an installed binary, see
/// [`builtin_apps_dir`]), a copy of that folder of gpuwmm's repository.
pub fn patch_destination(root: &Path) -> String {
    let dir = builtin_apps_dir();
    match root.strip_prefix(dir) {
        Ok(app) if !dir.exists() => format!(
            "a copy of apps/{} of gpuwmm's repository (the built-in app's sources are compiled \
             into this binary)",
            app.display()
        ),
        _ => root.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_error_is_reported_once_not_again_as_its_cause() {
        let e = AppError::Backend {
            app: "cbe-dot".into(),
            step: "launch 1 (kernel dot)".into(),
            error: BackendError::Fault("out of bounds".into()),
        };
        assert_eq!(
            e.to_string(),
            "cbe-dot: launch 1 (kernel dot): kernel fault: out of bounds"
        );
        // Reports that print the cause chain (anyhow's `{:#}`) would repeat a source.
        assert!(std::error::Error::source(&e).is_none());
        assert!(matches!(e.backend_error(), Some(BackendError::Fault(_))));
    }

    /// Bug: an installed binary's harden of a built-in app said to apply the patch in
    /// `/built-in/gpuwmm/apps/sdk-red`, which exists nowhere.
    #[test]
    fn a_patch_of_a_built_in_app_applies_to_a_copy_of_its_folder_when_there_is_none() {
        let root = builtin_apps_dir().join("sdk-red");
        let said = patch_destination(&root);
        match builtin_apps_dir().exists() {
            true => assert_eq!(said, root.display().to_string()),
            false => assert!(said.starts_with("a copy of apps/sdk-red of"), "{said}"),
        }
        let elsewhere = Path::new("/tmp/proj");
        assert_eq!(patch_destination(elsewhere), "/tmp/proj");
    }
}
