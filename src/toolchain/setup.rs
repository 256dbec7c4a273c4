//! `gpuwmm setup`: the pinned CUDA tools (NVRTC, `ptxas`, `cuobjdump`, `nvdisasm`, CCCL headers)
//! for a machine without a toolkit.
//!
//! The repository's `scripts/setup-cuda-tools.sh` is the one definition of what gets installed
//! and how (pinned wheel versions, the links into them, the stamp that makes a second run a
//! check). The binary carries that script and runs it with the folder it chose, so an installed
//! binary and a checkout install exactly the same tools.

use super::{CudaTools, ToolchainError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The set-up script, as the repository has it.
pub const SETUP_SCRIPT: &str = include_str!("../../scripts/setup-cuda-tools.sh");

/// Where [`install_pinned_tools`] put the tools, and whether gpuwmm looks there by itself (else
/// `$GPUWMM_CUDA_TOOLS` must name the folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledTools {
    pub dir: PathBuf,
    pub searched: bool,
}

/// Installs the pinned tools into `dir` (default [`crate::places::setup_tools_dir`], created if
/// missing) with the set-up script, its output going to this process's standard output and
/// error. `force` installs even where a toolkit is found, and reinstalls over a complete folder.
pub fn install_pinned_tools(
    dir: Option<&Path>,
    force: bool,
) -> Result<InstalledTools, ToolchainError> {
    let dir = dir.map_or_else(crate::places::setup_tools_dir, Path::to_path_buf);
    run_script(&dir, force)?;
    let searched = CudaTools::search_roots().iter().any(|root| root.dir == dir);
    Ok(InstalledTools { dir, searched })
}

fn run_script(dir: &Path, force: bool) -> Result<(), ToolchainError> {
    let script = write_script()?;
    let mut command = Command::new("bash");
    command.arg(script.path()).arg("--dir").arg(dir);
    if force {
        command.arg("--force");
    }
    let status = command.status().map_err(|source| ToolchainError::Spawn {
        tool: "bash",
        path: "bash".into(),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(ToolchainError::Setup {
            dir: dir.to_path_buf(),
            status: status.to_string(),
        })
    }
}

/// The script in a temporary file, removed when the returned value is dropped.
fn write_script() -> Result<TempScript, ToolchainError> {
    let path = std::env::temp_dir().join(format!("gpuwmm-setup-{}.sh", std::process::id()));
    let mut file = std::fs::File::create(&path)
        .map_err(|e| ToolchainError::io(format!("writing {}", path.display()), e))?;
    file.write_all(SETUP_SCRIPT.as_bytes())
        .map_err(|e| ToolchainError::io(format!("writing {}", path.display()), e))?;
    Ok(TempScript(path))
}

struct TempScript(std::path::PathBuf);

impl TempScript {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempScript {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_carried_script_refuses_an_unknown_option_and_installs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("tools");
        let script = write_script().unwrap();
        let out = Command::new("bash")
            .arg(script.path())
            .args(["--dir", target.to_str().unwrap(), "--bogus"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument '--bogus'"));
        assert!(!target.exists());
    }
}
