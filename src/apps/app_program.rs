//! Compiling a manifest app's sources as they are: its files, include folders, defines and
//! kernels named in C++.
//!
//! An app brought from elsewhere keeps its files byte for byte: the manifest's `[source]` lists
//! them, and they are compiled as one translation unit (a generated file that `#include`s each
//! by its absolute path, so each keeps its own folder for its relative includes and its own name
//! in the PTX line info). The app's folder, then the listed include folders, are on the include
//! path; the sizes' defines are passed as `-D`. Kernels are named as C++ names (templates
//! included), which NVRTC instantiates and lowers to their PTX names (name expressions), so no
//! `extern "C"` is needed. The check kernel may live in files of its own (`check_files`): they
//! join the unit of the check module only, so the app module (fence sites, stress harness) never
//! holds check code.
//!
//! A failed compilation is explained where it can be: host code in a listed file gets one error
//! naming its first host line and the fix; a kernel name NVRTC cannot resolve becomes the
//! manifest's own "no kernel" error for the launch that uses it.

use super::expr::is_identifier;
use super::host_code::{
    first_host_line, first_include_of, included_name, unopened_include_sites, unopened_includes,
};
use super::kernel_names::template_kernels;
use super::manifest::{Manifest, Problem};
use super::{AppError, KernelSource, Size};
use crate::compile::{compile_program, CudaProgram};
use crate::ptx::demangle::call_name;
use crate::toolchain::{is_cudart_device_header, CompiledPtx, NvrtcError, ToolchainError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The name of the generated file that includes the listed sources (in the app's folder; it is
/// never written to disk).
pub const UNIT_FILE: &str = "gpuwmm-sources.cu";

/// Which module a translation unit is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// The app's files: the module drivers transform.
    App,
    /// The app's files and the check's: the module the check kernel runs from.
    Check,
}

/// How a manifest app's source is compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppProgram {
    /// The app's folder (first on the include path; relative paths start here).
    dir: PathBuf,
    /// `None`: the app's one source text is compiled as it is (no `[source]` table).
    listed: Option<Listed>,
    include_dirs: Vec<PathBuf>,
    /// Files compiled from these texts instead of their files on disk (an app rebuilt from a
    /// patch), canonical paths.
    replaced: Vec<(PathBuf, String)>,
}

/// The files of a `[source]` table, as absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    files: Vec<PathBuf>,
    check_files: Vec<PathBuf>,
}

/// A compiled unit: its PTX and the PTX name of each kernel name it was asked for.
#[derive(Debug, Clone)]
pub struct CompiledUnit {
    pub ptx: String,
    pub lowered: BTreeMap<String, String>,
}

impl AppProgram {
    /// The program of `manifest`, whose files lie in `dir`; checks that the listed files can
    /// be read and the include folders exist, and reads the app's files for reports.
    pub fn new(manifest: &Manifest, dir: &Path) -> Result<(AppProgram, KernelSource), AppError> {
        let spec = &manifest.source;
        let absolute = |p: &Path| crate::places::absolute(&dir.join(p)).unwrap_or(dir.join(p));
        let mut include_dirs = vec![absolute(Path::new("."))];
        for (i, folder) in spec.include.iter().enumerate() {
            let path = absolute(folder);
            if !path.is_dir() {
                let message = format!("no folder '{}'", path.display());
                return Err(field_error(
                    manifest,
                    format!("source.include[{i}]"),
                    message,
                ));
            }
            include_dirs.push(path);
        }
        let read = |key: &str, i: usize, path: &Path| -> Result<String, AppError> {
            std::fs::read_to_string(path).map_err(|e| {
                if spec.declared {
                    let message = format!("cannot read '{}': {e}", path.display());
                    field_error(manifest, format!("source.{key}[{i}]"), message)
                } else {
                    AppError::Compile {
                        path: path.to_path_buf(),
                        message: format!("cannot read the app's kernel source: {e}"),
                    }
                }
            })
        };
        let mut texts = Vec::new();
        for (i, file) in spec.files.iter().enumerate() {
            let path = absolute(file);
            texts.push((path.clone(), read("files", i, &path)?));
        }
        let check_files: Vec<PathBuf> = spec.check_files.iter().map(|f| absolute(f)).collect();
        for (i, path) in check_files.iter().enumerate() {
            read("check_files", i, path)?;
        }
        let listed = spec.declared.then(|| Listed {
            files: texts.iter().map(|(p, _)| p.clone()).collect(),
            check_files,
        });
        let program = AppProgram {
            dir: dir.to_path_buf(),
            listed,
            include_dirs,
            replaced: Vec::new(),
        };
        let source = program.report_source(texts);
        Ok((program, source))
    }

    /// The program of a built-in app: `source` compiled as it is, its folder on the include path.
    pub fn of_text(source: &KernelSource) -> AppProgram {
        let dir = source.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        AppProgram {
            include_dirs: vec![dir.clone()],
            dir,
            listed: None,
            replaced: Vec::new(),
        }
    }

    /// The program with `files` (canonical paths of files it compiles from disk) compiled from
    /// the texts given instead.
    pub fn with_replaced(&self, files: Vec<(PathBuf, String)>) -> AppProgram {
        AppProgram {
            replaced: files,
            ..self.clone()
        }
    }

    /// Whether its files are compiled from disk (a `[source]` table), not from the text held.
    pub fn compiles_from_disk(&self) -> bool {
        self.listed.is_some()
    }

    /// Whether the check module is compiled from more than the app module.
    pub fn has_check_files(&self) -> bool {
        self.listed
            .as_ref()
            .is_some_and(|l| !l.check_files.is_empty())
    }

    /// The source reports place fences in: the listed files, then the headers they include
    /// from the app's include folders.
    fn report_source(&self, texts: Vec<(PathBuf, String)>) -> KernelSource {
        let mut files = texts.into_iter();
        let (path, text) = files.next().expect("a source has at least one file");
        let mut others: Vec<(PathBuf, String)> = files.collect();
        if self.listed.is_some() {
            let listed: Vec<(PathBuf, String)> = std::iter::once((path.clone(), text.clone()))
                .chain(others.clone())
                .collect();
            for (file, text) in listed {
                for (header, header_text) in
                    crate::toolchain::local_includes(&file, &text, &self.include_dirs)
                {
                    if !others.iter().any(|(p, _)| p == &header) && header != path {
                        others.push((header, header_text));
                    }
                }
            }
        }
        KernelSource { path, text, others }
    }

    /// Compiles `unit` of the app at `size` for `arch`, asking for the PTX names of `kernels`.
    /// `source` is the app's source as [`AppProgram::new`] gave it (compiled as it is when no
    /// files are listed).
    pub fn compile(
        &self,
        manifest: &Manifest,
        source: &KernelSource,
        unit: Unit,
        size: Size,
        arch: &str,
        kernels: &[String],
    ) -> Result<CompiledUnit, AppError> {
        let unit_path = self.dir.join(UNIT_FILE);
        let unit_text;
        let (path, text) = match &self.listed {
            None => (source.path.as_path(), source.text.as_str()),
            Some(listed) => {
                unit_text = unit_source(listed, unit);
                (unit_path.as_path(), unit_text.as_str())
            }
        };
        let program = CudaProgram {
            path,
            source: text,
            include_dirs: self.include_dirs.clone(),
            defines: manifest.plan(size).defines.clone(),
            name_expressions: kernels.to_vec(),
            replaced: self.replaced.clone(),
        };
        match compile_program(&program, arch) {
            Ok(compiled) => Ok(compiled_unit(compiled)),
            Err(error) => Err(self.explain(manifest, source, unit, &program, arch, error)),
        }
    }

    /// The clearest error for a failed compilation.
    fn explain(
        &self,
        manifest: &Manifest,
        source: &KernelSource,
        unit: Unit,
        program: &CudaProgram,
        arch: &str,
        error: ToolchainError,
    ) -> AppError {
        let compile_error = |message: String| AppError::Compile {
            path: source.path.clone(),
            message,
        };
        let ToolchainError::Nvrtc(NvrtcError::Compile { log, .. }) = &error else {
            return compile_error(error.to_string());
        };
        // NVRTC names the generated unit; say what it is.
        let failed = || match &self.listed {
            Some(_) => compile_error(format!(
                "NVRTC failed to compile {} ({UNIT_FILE} in its messages is the file gpuwmm \
                 generates to #include them as one unit):\n{log}",
                manifest.source_names()
            )),
            None => compile_error(error.to_string()),
        };
        if let Some(host) = self.host_code(source, unit, log) {
            return host;
        }
        if let Some(unopened) = unopened_header(log) {
            return unopened;
        }
        if let Some(name) = unresolved_name(log, &program.name_expressions) {
            return unknown_kernel(manifest, source, program, arch, &name, log)
                .unwrap_or_else(failed);
        }
        failed()
    }

    /// The error for the first listed file of `unit` that includes a CUDA runtime header NVRTC
    /// could not open, else the host-code error for the first with a host line.
    fn host_code(&self, source: &KernelSource, unit: Unit, log: &str) -> Option<AppError> {
        let (headers, unopened): (Vec<String>, Vec<String>) = unopened_includes(log)
            .into_iter()
            .partition(|name| is_cudart_device_header(name));
        let files: Vec<PathBuf> = match &self.listed {
            None => vec![source.path.clone()],
            Some(listed) => match unit {
                Unit::App => listed.files.clone(),
                Unit::Check => listed
                    .files
                    .iter()
                    .chain(&listed.check_files)
                    .cloned()
                    .collect(),
            },
        };
        files.iter().find_map(|file| {
            let text = match source.files().find(|(p, _)| p == file) {
                Some((_, text)) => text.to_string(),
                None => std::fs::read_to_string(file).ok()?,
            };
            if let Some(include) = first_include_of(&text, &headers) {
                return Some(AppError::MissingCudaHeader {
                    path: file.clone(),
                    line: include.line,
                    header: included_header(&include.text),
                    hint: crate::toolchain::SETUP_HINT.to_string(),
                });
            }
            let host = first_host_line(&text, &unopened)?;
            Some(AppError::HostCode {
                path: file.clone(),
                line: host.line,
                text: host.text,
            })
        })
    }
}

/// The error for the first include NVRTC could not open, at the file and line it is in (a header
/// of the app, where the listed files hold no host line), naming the standard headers gpuwmm
/// stands in for.
fn unopened_header(log: &str) -> Option<AppError> {
    let (path, line, header) = unopened_include_sites(log).into_iter().next()?;
    let cccl = crate::toolchain::CudaTools::locate().cccl_include.is_some();
    let supplied: Vec<String> = crate::toolchain::std_header_names(cccl)
        .iter()
        .map(|n| format!("<{n}>"))
        .collect();
    Some(AppError::UnopenedHeader {
        path,
        line,
        header,
        supplied: supplied.join(", "),
    })
}

/// The name an `#include` line names (the line itself if it names none).
fn included_header(line: &str) -> String {
    included_name(line).unwrap_or(line).to_string()
}

/// The generated unit: an `#include` of each file, by absolute path.
fn unit_source(listed: &Listed, unit: Unit) -> String {
    let check: &[PathBuf] = match unit {
        Unit::App => &[],
        Unit::Check => &listed.check_files,
    };
    listed
        .files
        .iter()
        .chain(check)
        .map(|f| format!("#include \"{}\"\n", f.display()))
        .collect()
}

fn compiled_unit(compiled: CompiledPtx) -> CompiledUnit {
    CompiledUnit {
        ptx: compiled.ptx,
        lowered: compiled.lowered_names.into_iter().collect(),
    }
}

fn field_error(manifest: &Manifest, field: String, message: String) -> AppError {
    AppError::Manifest(manifest.field_error(field, Problem::BadValue { message }))
}

/// The first of `names` the NVRTC log says it could not resolve (`#pragma nv_mangled_name X`
/// under an error), in the order the names were given.
fn unresolved_name(log: &str, names: &[String]) -> Option<String> {
    let failed: Vec<&str> = log
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#pragma nv_mangled_name "))
        .map(str::trim)
        .collect();
    names.iter().find(|n| failed.contains(&n.trim())).cloned()
}

/// The manifest's "no kernel" error for `name`, at the first launch that uses it, listing the
/// kernels the source has by their C++ names (compiled again without name expressions to list
/// them; the template kernels its files declare are added as `name<...>`), and saying why where
/// it can: a template named without its arguments, or NVRTC's reason for a name expression.
fn unknown_kernel(
    manifest: &Manifest,
    source: &KernelSource,
    program: &CudaProgram,
    arch: &str,
    name: &str,
    log: &str,
) -> Option<AppError> {
    let bare = CudaProgram {
        name_expressions: Vec::new(),
        ..program.clone()
    };
    let module = crate::ptx::parse(&compile_program(&bare, arch).ok()?.ptx).ok()?;
    let templates = template_kernels(source.files().map(|(_, text)| text));
    let kernels: Vec<String> = module
        .kernels()
        .map(|f| call_name(&f.name))
        .chain(templates.iter().map(|t| format!("{}<...>", t.name)))
        .collect();
    let field = manifest
        .sim
        .launches
        .iter()
        .chain([&manifest.sim.check])
        .find(|l| l.kernel == name)
        .map(|l| format!("{}.kernel", l.field))?;
    let template = templates.iter().find(|t| t.name == name.trim());
    let detail = match template {
        Some(t) => format!(
            "'{}' is a template kernel (template <{}>): name it with its template arguments, \
             e.g. \"{}\"",
            t.name,
            t.params,
            t.example()
        ),
        None => (!is_identifier(name))
            .then(|| log.lines())
            .into_iter()
            .flatten()
            .find(|l| l.contains("__nv_name_map") && l.contains("error:"))
            .and_then(|l| l.split("error: ").nth(1))
            .filter(|w| !w.starts_with("Error in parsing"))
            .map(|w| format!("NVRTC says: {}", w.trim()))
            .unwrap_or_default(),
    };
    Some(AppError::Manifest(manifest.field_error(
        field,
        Problem::NoSuchKernel {
            name: name.to_string(),
            detail,
            kernels: kernels.join(", "),
            source: manifest.source_names(),
        },
    )))
}
