//! CUDA source to PTX: NVRTC found by the toolchain locator, results cached by content.

use crate::toolchain::{CompileOptions, CudaTools, Nvrtc, PtxCache, ToolchainError};
use std::path::Path;

/// Compiles a CUDA source to PTX for `arch` with line info. The `.file` directive of the PTX
/// records `path` as given, so fence sites can show the source line.
pub fn compile_cuda(path: &Path, source: &str, arch: &str) -> Result<String, ToolchainError> {
    let tools = CudaTools::locate();
    let nvrtc = Nvrtc::load(tools.require_nvrtc()?)?;
    let options = CompileOptions {
        arch: arch.to_string(),
        ..CompileOptions::default()
    };
    let compiled = PtxCache::with_default_dir().get_or_compile(
        &nvrtc,
        source,
        &path.to_string_lossy(),
        &options,
    )?;
    Ok(compiled.ptx)
}
