//! CUDA source to PTX: NVRTC found by the toolchain locator, results cached by content.
//!
//! Kernels are compiled for a *portable* architecture unless one is named: the oldest that the
//! NVRTC at hand accepts ([`crate::toolchain::PORTABLE_ARCH`], resolved by the NVRTC layer).

use crate::toolchain::{
    cccl_compile_args, include_names_of, local_includes, nvrtc_std_headers, nvrtc_std_shims,
    without_shadowing, CompileOptions, CompiledPtx, CudaTools, Nvrtc, PtxCache, ToolchainError,
};
use std::path::{Path, PathBuf};

/// Compiles a CUDA source to PTX for `arch` (an `sm_XY`, or
/// [`crate::toolchain::PORTABLE_ARCH`]) with line info.
/// Where the tools' root has CCCL headers, every compilation can include them (`<cub/...>`,
/// `<cuda/...>`): their folder goes on the include path, with the shims CUB needs under NVRTC.
/// The `.file` directive of the PTX records `path` (made absolute), so fence sites can show the
/// source line.
pub fn compile_cuda(path: &Path, source: &str, arch: &str) -> Result<String, ToolchainError> {
    let program = CudaProgram::new(path, source);
    Ok(compile_program(&program, arch)?.ptx)
}

/// One translation unit as an app describes it: a source, the folders its `#include`s are
/// searched in, preprocessor defines, and the C++ names of the kernels and variables to look up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaProgram<'a> {
    /// The file the source is (named in `.file` directives and diagnostics).
    pub path: &'a Path,
    pub source: &'a str,
    pub include_dirs: Vec<PathBuf>,
    /// `-D NAME=VALUE`, in order.
    pub defines: Vec<(String, String)>,
    /// C++ names whose PTX names [`CompiledPtx::lowered_names`] gives (templates are
    /// instantiated by being named).
    pub name_expressions: Vec<String>,
    /// Files the source includes (canonical paths) that are compiled from these texts instead
    /// of their files: NVRTC's in-memory headers, under every name they are included by.
    pub replaced: Vec<(PathBuf, String)>,
}

impl<'a> CudaProgram<'a> {
    /// A plain source: no include folder, define or name expression.
    pub fn new(path: &'a Path, source: &'a str) -> CudaProgram<'a> {
        CudaProgram {
            path,
            source,
            include_dirs: Vec::new(),
            defines: Vec::new(),
            name_expressions: Vec::new(),
            replaced: Vec::new(),
        }
    }
}

/// Compiles `program` to PTX for `arch` with line info (see [`compile_cuda`]), with the lowered
/// names of its name expressions.
pub fn compile_program(program: &CudaProgram, arch: &str) -> Result<CompiledPtx, ToolchainError> {
    let tools = CudaTools::locate();
    let nvrtc = Nvrtc::shared(tools.require_nvrtc()?)?;
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut options = CompileOptions {
        arch: arch.to_string(),
        include_dirs: program.include_dirs.iter().map(|d| absolute(d)).collect(),
        name_expressions: program.name_expressions.clone(),
        extra: program
            .defines
            .iter()
            .map(|(name, value)| format!("-D{name}={value}"))
            .collect(),
        ..CompileOptions::default()
    };
    // Stand-ins for the standard headers NVRTC cannot open (<cstdio>, <cstdint>, ...).
    options.headers = nvrtc_std_headers(tools.cccl_include.is_some());
    match &tools.cccl_include {
        Some(include) => {
            options.extra.extend(cccl_compile_args(include));
            options.headers.extend(nvrtc_std_shims());
        }
        // Without the headers NVRTC would only say "cannot open source file"; say what is missing.
        None if includes_cccl(program.source) => return Err(tools.require_cccl().unwrap_err()),
        None => {}
    }
    // The runtime's device headers (cooperative_groups.h, cuda_fp16.h), after the app's own
    // folders; a CUDA 12 toolkit's CCCL folder is the same one, given once.
    if let Some(cudart) = tools
        .cudart_include
        .as_ref()
        .filter(|dir| tools.cccl_include.as_ref() != Some(*dir))
    {
        options.extra.push(format!("-I{}", cudart.display()));
    }
    // NVRTC makes a relative name absolute against the working directory; naming the file
    // absolutely keeps the cache key and the `.file` directive in step.
    let name = absolute(program.path);
    // A stand-in never hides a file of the app's: NVRTC would take it first.
    let headers = std::mem::take(&mut options.headers);
    options.headers = without_shadowing(headers, &app_folders(&name, program, &options));
    options
        .headers
        .extend(replacing_headers(&name, program, &options.include_dirs)?);
    PtxCache::with_default_dir().get_or_compile(
        nvrtc,
        program.source,
        &name.to_string_lossy(),
        &options,
    )
}

/// The in-memory headers that stand in for the program's replaced files: each text under every
/// name the source and its local files include it by (NVRTC looks among them first).
fn replacing_headers(
    path: &Path,
    program: &CudaProgram,
    include_dirs: &[PathBuf],
) -> Result<Vec<(String, String)>, ToolchainError> {
    if program.replaced.is_empty() {
        return Ok(Vec::new());
    }
    let files: Vec<PathBuf> = program.replaced.iter().map(|(p, _)| p.clone()).collect();
    let names = include_names_of(path, program.source, include_dirs, &files).map_err(|why| {
        ToolchainError::Replaced {
            path: files[0].clone(),
            why,
        }
    })?;
    if let Some(missing) = files.iter().find(|f| !names.iter().any(|(_, t)| t == *f)) {
        return Err(ToolchainError::Replaced {
            path: missing.clone(),
            why: "no file of the program includes it".to_string(),
        });
    }
    Ok(names
        .into_iter()
        .map(|(name, target)| {
            let text = program.replaced.iter().find(|(p, _)| *p == target);
            (name, text.expect("a replaced file").1.clone())
        })
        .collect())
}

/// The folders an `#include` of the app may be found in: its include folders, and the folders of
/// the source and of every local file it includes (a quoted name is looked for beside its
/// includer).
fn app_folders(path: &Path, program: &CudaProgram, options: &CompileOptions) -> Vec<PathBuf> {
    let mut folders = options.include_dirs.clone();
    let files = local_includes(path, program.source, &options.include_dirs);
    for file in std::iter::once(path).chain(files.iter().map(|(p, _)| p.as_path())) {
        if let Some(dir) = file.parent() {
            if !folders.iter().any(|f| f == dir) {
                folders.push(dir.to_path_buf());
            }
        }
    }
    folders
}

/// True when `source` includes a CCCL header (`<cub/...>`, `<cuda/...>`, `<thrust/...>`).
fn includes_cccl(source: &str) -> bool {
    source.lines().any(|line| {
        let line = line.trim_start();
        line.strip_prefix('#')
            .map(|rest| rest.trim_start())
            .and_then(|rest| rest.strip_prefix("include"))
            .map(|rest| rest.trim_start())
            .is_some_and(|name| {
                ["<cub/", "<cuda/", "<thrust/"]
                    .iter()
                    .any(|prefix| name.starts_with(prefix))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cccl_includes_are_recognised_and_others_are_not() {
        assert!(includes_cccl(
            "// x\n#include <cub/agent/single_pass_scan_operators.cuh>\n"
        ));
        assert!(includes_cccl("  #  include <cuda/atomic>"));
        assert!(!includes_cccl("#include \"local.h\"\n// <cub/x>\n"));
        assert!(!includes_cccl("__global__ void k() {}"));
    }
}
