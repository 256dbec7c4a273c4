//! `ptxas` and `cuobjdump -sass`, run as child processes.
//!
//! Every PTX transformation gpuwmm makes must still be valid PTX for real chips, and inserted
//! fences and stress accesses must survive into the machine code. Assembling with `ptxas` (for
//! sm_70, sm_80, sm_90) checks the first without a GPU; disassembling the cubin with
//! `cuobjdump -sass` and parsing it ([`super::parse_sass`]) checks the second.
//! Both tools work on files, so each call uses a private temporary folder, removed afterwards.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{CudaTools, ToolchainError};

/// Name of the PTX file given to `ptxas`; its diagnostics say `input.ptx, line N`.
const PTX_NAME: &str = "input.ptx";

/// Assembles `ptx_text` for `arch` (`sm_70`, `sm_80`, `sm_90`, …) and returns the cubin.
/// On failure the error carries `ptxas`'s stderr, which names the offending PTX lines.
pub fn assemble(tools: &CudaTools, ptx_text: &str, arch: &str) -> Result<Vec<u8>, ToolchainError> {
    check_arch(arch)?;
    let ptxas = tools.require_ptxas()?;
    let dir = ScratchDir::new("ptxas")?;
    let input = dir.write(PTX_NAME, ptx_text.as_bytes())?;
    let output_path = dir.path().join("output.cubin");
    let mut command = Command::new(ptxas);
    command
        .arg(format!("-arch={arch}"))
        .arg("-o")
        .arg(&output_path)
        .arg(&input);
    let output = run(&mut command, "ptxas", ptxas)?;
    if !output.status.success() {
        return Err(ToolchainError::Ptxas {
            arch: arch.to_string(),
            status: output.status.to_string(),
            stderr: tidy_stderr(&output.stderr, dir.path()),
        });
    }
    fs::read(&output_path).map_err(|e| ToolchainError::io("reading the cubin ptxas wrote", e))
}

/// Disassembles a cubin with `cuobjdump -sass` and returns the SASS text.
/// The 13.x `nvdisasm` only knows sm_75 and newer: an sm_70 cubin is an error.
pub fn disassemble(tools: &CudaTools, cubin: &[u8]) -> Result<String, ToolchainError> {
    let cuobjdump = tools.require_cuobjdump()?;
    let nvdisasm = tools.require_nvdisasm()?;
    let dir = ScratchDir::new("cuobjdump")?;
    let input = dir.write("input.cubin", cubin)?;
    let mut command = Command::new(cuobjdump);
    command
        .arg("-sass")
        .arg(&input)
        .env("PATH", path_with(nvdisasm.parent()));
    let output = run(&mut command, "cuobjdump", cuobjdump)?;
    if !output.status.success() {
        return Err(ToolchainError::Cuobjdump {
            status: output.status.to_string(),
            stderr: tidy_stderr(&output.stderr, dir.path()),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Accepts `sm_<digits>` with an optional `a`/`f` suffix (`sm_90a`).
fn check_arch(arch: &str) -> Result<(), ToolchainError> {
    let digits = arch
        .strip_prefix("sm_")
        .map(|rest| rest.trim_end_matches(['a', 'f']));
    match digits {
        Some(d) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err(ToolchainError::BadArch(arch.to_string())),
    }
}

/// `$PATH` with `first` put in front (cuobjdump runs `nvdisasm` from `PATH`).
fn path_with(first: Option<&Path>) -> OsString {
    let current = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = first.map(Path::to_path_buf).into_iter().collect();
    dirs.extend(std::env::split_paths(&current));
    std::env::join_paths(dirs).unwrap_or(current)
}

fn run(command: &mut Command, tool: &'static str, path: &Path) -> Result<Output, ToolchainError> {
    command.output().map_err(|source| ToolchainError::Spawn {
        tool,
        path: path.to_path_buf(),
        source,
    })
}

/// Stderr as text, with the scratch folder removed from paths so messages read `input.ptx`.
fn tidy_stderr(stderr: &[u8], scratch: &Path) -> String {
    let text = String::from_utf8_lossy(stderr);
    let prefix = format!("{}/", scratch.display());
    text.replace(&prefix, "").trim_end().to_string()
}

/// A uniquely named temporary folder, removed (with its contents) when dropped.
struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    fn new(purpose: &str) -> Result<Self, ToolchainError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        let mut last_error = None;
        for _ in 0..16 {
            let name = format!(
                "gpuwmm-{purpose}-{}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed),
                nanos()
            );
            let path = base.join(name);
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Self { path }),
                Err(e) => last_error = Some(e),
            }
        }
        let error = last_error.unwrap_or_else(|| std::io::Error::other("no attempt made"));
        Err(ToolchainError::io(
            format!("creating a temporary folder in {}", base.display()),
            error,
        ))
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, ToolchainError> {
        let path = self.path.join(name);
        fs::write(&path, bytes)
            .map_err(|e| ToolchainError::io(format!("writing {}", path.display()), e))?;
        Ok(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolchain::{SearchRoot, ToolOrigin};

    fn no_tools() -> CudaTools {
        CudaTools::locate_in(&[SearchRoot {
            origin: ToolOrigin::CudaPath,
            dir: PathBuf::from("/nonexistent"),
        }])
    }

    #[test]
    fn arch_names() {
        for good in ["sm_70", "sm_80", "sm_90", "sm_90a", "sm_100f"] {
            assert!(check_arch(good).is_ok(), "{good}");
        }
        for bad in ["", "sm_", "compute_70", "sm70", "sm_7x", "sm_a"] {
            assert!(
                matches!(check_arch(bad), Err(ToolchainError::BadArch(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn missing_tools_are_errors() {
        let tools = no_tools();
        let err = assemble(&tools, ".version 8.8", "sm_80").unwrap_err();
        assert!(matches!(err, ToolchainError::Missing { tool: "ptxas", .. }));
        let err = disassemble(&tools, b"").unwrap_err();
        assert!(matches!(
            err,
            ToolchainError::Missing {
                tool: "cuobjdump",
                ..
            }
        ));
    }

    #[test]
    fn scratch_dir_is_removed_on_drop() {
        let dir = ScratchDir::new("test").unwrap();
        let path = dir.path().to_path_buf();
        dir.write("f", b"x").unwrap();
        assert!(path.join("f").is_file());
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn stderr_loses_the_scratch_prefix() {
        let text = tidy_stderr(
            b"ptxas /tmp/x/input.ptx, line 3; error   : bad\n",
            Path::new("/tmp/x"),
        );
        assert_eq!(text, "ptxas input.ptx, line 3; error   : bad");
    }

    #[test]
    fn path_puts_the_tool_folder_first() {
        let path = path_with(Some(Path::new("/opt/nv/bin")));
        let first = std::env::split_paths(&path).next().unwrap();
        assert_eq!(first, PathBuf::from("/opt/nv/bin"));
    }
}
