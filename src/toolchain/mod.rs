//! CUDA toolchain discovery: NVRTC, `ptxas`, `cuobjdump` and `nvdisasm`.
//!
//! gpuwmm compiles application kernels to PTX (NVRTC), assembles transformed PTX to check that it
//! is valid for real chips (`ptxas`) and inspects the machine code (`cuobjdump -sass`). None of
//! this needs a GPU, but the tools have to come from somewhere: a CUDA toolkit where one is
//! installed, otherwise pinned NVIDIA wheels that `scripts/setup-cuda-tools.sh` installs into the
//! repository's git-ignored `.cuda-tools/` folder. This module finds them and, when one is missing,
//! says where it looked and how to get it. The same root may hold the CCCL headers (CUB,
//! libcu++), which apps that use NVIDIA's own inter-block code include (`cccl.rs`), and the CUDA
//! runtime's device headers (`cooperative_groups.h`, `cuda_fp16.h`: `cudart.rs`).
//!
//! Search order, first match wins (see [`CudaTools::locate`]):
//! 1. `$GPUWMM_CUDA_TOOLS` (a folder laid out like `.cuda-tools`: `bin/`, `lib/`),
//! 2. `$CUDA_PATH`,
//! 3. the toolkit whose `bin/ptxas` is first on `PATH`,
//! 4. `/usr/local/cuda`,
//! 5. the folder `gpuwmm setup` fills for an installed binary (`$XDG_DATA_HOME/gpuwmm/cuda-tools`),
//! 6. the checkout's `.cuda-tools` for a binary run from its build tree, and a `.cuda-tools`
//!    found by walking up from the current directory.

#![deny(unsafe_code)]

mod cache;
mod cccl;
mod cudart;
mod includes;
mod nvrtc;
mod ptxas;
mod sass;
mod setup;
mod std_headers;

pub use cache::{cache_key, PtxCache, PtxCompiler, CACHE_DIR_ENV};
pub use cccl::{cccl_compile_args, cccl_version, find_cccl_include, nvrtc_std_shims};
pub use cudart::{find_cudart_include, is_cudart_device_header};
pub use includes::{include_names, include_names_of, local_includes};
pub use nvrtc::{
    oldest_arch, resolve_arch, CompileOptions, CompiledPtx, Nvrtc, NvrtcError, PORTABLE_ARCH,
};
pub use ptxas::{assemble, disassemble};
pub use sass::{parse_sass, SassFunction, SassInstruction};
pub use setup::{install_pinned_tools, InstalledTools, SETUP_SCRIPT};
pub use std_headers::{nvrtc_std_headers, std_header_names, without_shadowing};

use std::fmt;
use std::path::{Path, PathBuf};

/// Environment variable naming a folder laid out like `.cuda-tools` (`bin/ptxas`, `lib/libnvrtc…`).
pub const TOOLS_ENV: &str = "GPUWMM_CUDA_TOOLS";
/// Environment variable that makes [`tools_for_tests`] fail instead of skip when tools are missing.
pub const REQUIRE_TOOLS_ENV: &str = "GPUWMM_REQUIRE_TOOLS";
/// Name of the repository folder that `scripts/setup-cuda-tools.sh` fills.
pub const REPO_TOOLS_DIR: &str = ".cuda-tools";

/// What to do when a tool or header is missing.
pub const SETUP_HINT: &str = "run `gpuwmm setup` (installs pinned NVIDIA wheels, no GPU needed), \
    install a CUDA toolkit, or point GPUWMM_CUDA_TOOLS or CUDA_PATH at one";

/// Errors of the toolchain layer.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    /// A tool was not found in any searched folder.
    #[error("{tool} not found (searched: {}); {hint}", display_paths(.searched))]
    Missing {
        tool: &'static str,
        searched: Vec<PathBuf>,
        hint: String,
    },
    /// An architecture name that is not `sm_<number>` (optionally with an `a`/`f` suffix).
    #[error("invalid GPU architecture '{0}' (expected e.g. sm_70, sm_80, sm_90)")]
    BadArch(String),
    /// A file-system operation failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A tool could not be started.
    #[error("cannot run {tool} ({}): {source}", .path.display())]
    Spawn {
        tool: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `ptxas` rejected the PTX; `stderr` names the offending PTX lines.
    #[error("ptxas failed for {arch} ({status}):\n{stderr}")]
    Ptxas {
        arch: String,
        status: String,
        stderr: String,
    },
    /// `cuobjdump` failed (for example on an sm_70 cubin, which the 13.x `nvdisasm` refuses).
    #[error("cuobjdump -sass failed ({status}):\n{stderr}")]
    Cuobjdump { status: String, stderr: String },
    /// NVRTC failed to load or to compile.
    #[error(transparent)]
    Nvrtc(#[from] NvrtcError),
    /// Files to be compiled from texts in memory (a patched app) that no in-memory header can
    /// stand in for.
    #[error("cannot compile {} from its text in memory: {why}", .path.display())]
    Replaced { path: PathBuf, why: String },
    /// The set-up script of `gpuwmm setup` failed; it has said why on standard error.
    #[error("installing the CUDA tools into {} failed ({status})", .dir.display())]
    Setup { dir: PathBuf, status: String },
}

impl ToolchainError {
    /// Wraps an I/O error with a description of what was being done.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nowhere".to_string();
    }
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

/// Where the located tools came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOrigin {
    /// The folder named by `$GPUWMM_CUDA_TOOLS`.
    EnvOverride,
    /// The toolkit named by `$CUDA_PATH`.
    CudaPath,
    /// The toolkit whose `bin/ptxas` is on `PATH`.
    SearchPath,
    /// The toolkit at `/usr/local/cuda`.
    SystemToolkit,
    /// The folder `gpuwmm setup` fills for an installed binary (pinned wheels).
    UserWheels,
    /// The repository's `.cuda-tools` (pinned wheels).
    RepoWheels,
    /// No folder held any tool.
    NotFound,
}

impl fmt::Display for ToolOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::EnvOverride => "$GPUWMM_CUDA_TOOLS",
            Self::CudaPath => "$CUDA_PATH",
            Self::SearchPath => "ptxas on PATH",
            Self::SystemToolkit => "/usr/local/cuda",
            Self::UserWheels => "gpuwmm setup (pinned wheels)",
            Self::RepoWheels => "repository .cuda-tools (pinned wheels)",
            Self::NotFound => "not found",
        };
        f.write_str(text)
    }
}

/// A folder to search, with the origin it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRoot {
    pub origin: ToolOrigin,
    pub dir: PathBuf,
}

/// The CUDA tools found on this machine; any of them may be missing.
#[derive(Debug, Clone)]
pub struct CudaTools {
    /// The NVRTC shared library (`libnvrtc.so…`).
    pub nvrtc: Option<PathBuf>,
    pub ptxas: Option<PathBuf>,
    pub cuobjdump: Option<PathBuf>,
    pub nvdisasm: Option<PathBuf>,
    /// The CCCL include folder (CUB, libcu++) of the same root, if it has one; optional, only
    /// apps that include NVIDIA's headers need it (see `cccl.rs`).
    pub cccl_include: Option<PathBuf>,
    /// The folder of the CUDA runtime's device headers (`cooperative_groups.h`, `cuda_fp16.h`)
    /// of the same root, if it has one (see `cudart.rs`).
    pub cudart_include: Option<PathBuf>,
    /// Which search root the tools came from.
    pub origin: ToolOrigin,
    /// The folder the tools came from, if any.
    pub root: Option<PathBuf>,
    /// Every folder that was searched, in order.
    pub searched: Vec<PathBuf>,
}

impl CudaTools {
    /// Searches the standard places (module docs) and returns what was found; never fails:
    /// a missing tool is reported by the `require_*` accessors.
    pub fn locate() -> Self {
        Self::locate_in(&Self::search_roots())
    }

    /// The folders [`CudaTools::locate`] searches, in order, from the environment and the
    /// current directory. Folders that do not exist are kept, so errors can name them.
    pub fn search_roots() -> Vec<SearchRoot> {
        let mut roots = Vec::new();
        let mut push = |origin, dir: PathBuf| {
            if !roots.iter().any(|r: &SearchRoot| r.dir == dir) {
                roots.push(SearchRoot { origin, dir });
            }
        };
        if let Some(dir) = env_dir(TOOLS_ENV) {
            push(ToolOrigin::EnvOverride, dir);
        }
        if let Some(dir) = env_dir("CUDA_PATH") {
            push(ToolOrigin::CudaPath, dir);
        }
        if let Some(dir) = toolkit_on_path() {
            push(ToolOrigin::SearchPath, dir);
        }
        push(ToolOrigin::SystemToolkit, PathBuf::from("/usr/local/cuda"));
        push(ToolOrigin::UserWheels, crate::places::user_tools_dir());
        if let Some(checkout) = crate::places::source_tree() {
            push(ToolOrigin::RepoWheels, checkout.join(REPO_TOOLS_DIR));
        }
        if let Some(dir) = std::env::current_dir().ok().and_then(|d| find_up(&d)) {
            push(ToolOrigin::RepoWheels, dir);
        }
        roots
    }

    /// Searches `roots` in order. The first root holding NVRTC, `ptxas` and `cuobjdump` wins;
    /// failing that, the first root holding any tool. Tools are never mixed across roots, so a
    /// toolkit's NVRTC is not paired with another version's `ptxas`.
    pub fn locate_in(roots: &[SearchRoot]) -> Self {
        let searched = roots.iter().map(|r| r.dir.clone()).collect();
        let found: Vec<(&SearchRoot, Self)> = roots.iter().map(|r| (r, probe_root(r))).collect();
        let best = found
            .iter()
            .find(|(_, t)| t.is_complete())
            .or_else(|| found.iter().find(|(_, t)| t.has_any()));
        match best {
            Some((root, tools)) => Self {
                searched,
                root: Some(root.dir.clone()),
                ..tools.clone()
            },
            None => Self {
                nvrtc: None,
                ptxas: None,
                cuobjdump: None,
                nvdisasm: None,
                cccl_include: None,
                cudart_include: None,
                origin: ToolOrigin::NotFound,
                root: None,
                searched,
            },
        }
    }

    /// True when NVRTC, `ptxas`, `cuobjdump` and `nvdisasm` were all found.
    pub fn is_complete(&self) -> bool {
        self.nvrtc.is_some()
            && self.ptxas.is_some()
            && self.cuobjdump.is_some()
            && self.nvdisasm.is_some()
    }

    fn has_any(&self) -> bool {
        self.nvrtc.is_some()
            || self.ptxas.is_some()
            || self.cuobjdump.is_some()
            || self.nvdisasm.is_some()
    }

    /// The NVRTC library, or an error naming where it was looked for.
    pub fn require_nvrtc(&self) -> Result<&Path, ToolchainError> {
        self.require("NVRTC (libnvrtc.so)", self.nvrtc.as_deref())
    }

    /// The `ptxas` executable, or an error naming where it was looked for.
    pub fn require_ptxas(&self) -> Result<&Path, ToolchainError> {
        self.require("ptxas", self.ptxas.as_deref())
    }

    /// The `cuobjdump` executable, or an error naming where it was looked for.
    pub fn require_cuobjdump(&self) -> Result<&Path, ToolchainError> {
        self.require("cuobjdump", self.cuobjdump.as_deref())
    }

    /// The `nvdisasm` executable (which `cuobjdump -sass` runs), or an error.
    pub fn require_nvdisasm(&self) -> Result<&Path, ToolchainError> {
        self.require("nvdisasm", self.nvdisasm.as_deref())
    }

    /// The CCCL include folder (CUB, libcu++), or an error naming where it was looked for.
    pub fn require_cccl(&self) -> Result<&Path, ToolchainError> {
        self.require(
            "CCCL headers (cub/, cuda/std/)",
            self.cccl_include.as_deref(),
        )
    }

    fn require<'a>(
        &self,
        tool: &'static str,
        path: Option<&'a Path>,
    ) -> Result<&'a Path, ToolchainError> {
        path.ok_or_else(|| ToolchainError::Missing {
            tool,
            searched: self.searched.clone(),
            hint: SETUP_HINT.to_string(),
        })
    }

    /// A human-readable, multi-line summary for `gpuwmm` to print.
    pub fn describe(&self) -> String {
        let mut out = match &self.root {
            Some(root) => format!("CUDA tools from {} ({})\n", self.origin, root.display()),
            None => "CUDA tools: none found\n".to_string(),
        };
        for (name, path) in [
            ("nvrtc", &self.nvrtc),
            ("ptxas", &self.ptxas),
            ("cuobjdump", &self.cuobjdump),
            ("nvdisasm", &self.nvdisasm),
            ("cccl", &self.cccl_include),
            ("cudart", &self.cudart_include),
        ] {
            let shown = path
                .as_ref()
                .map_or("not found".to_string(), |p| p.display().to_string());
            out.push_str(&format!("  {name:<10} {shown}\n"));
        }
        out.push_str(&format!("  searched:  {}\n", display_paths(&self.searched)));
        if !self.is_complete() {
            out.push_str(&format!("  hint:      {SETUP_HINT}\n"));
        }
        out
    }
}

/// The toolkit folder of the first `ptxas` on `PATH` (`<toolkit>/bin/ptxas`).
fn toolkit_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("ptxas"))
        .find(|ptxas| is_executable(ptxas))
        .and_then(|ptxas| Some(ptxas.parent()?.parent()?.to_path_buf()))
}

/// For tests: the located tools when all four are present. Otherwise, panics when
/// `GPUWMM_REQUIRE_TOOLS=1` (so CI cannot silently skip), or reports the skip
/// ([`report_test_skip`]) and returns `None`.
pub fn tools_for_tests() -> Option<CudaTools> {
    let tools = CudaTools::locate();
    let complete = tools.is_complete();
    tools_or_skip(tools, complete, "CUDA tools")
}

/// For tests of apps that include CCCL headers: [`tools_for_tests`], and the CCCL include
/// folder as well. A missing folder panics under `GPUWMM_REQUIRE_TOOLS=1` and is otherwise
/// reported as a skip.
pub fn cccl_tools_for_tests() -> Option<CudaTools> {
    let tools = tools_for_tests()?;
    let found = tools.cccl_include.is_some();
    tools_or_skip(tools, found, "CCCL headers")
}

/// `tools` when `present`; otherwise a panic under `GPUWMM_REQUIRE_TOOLS=1`, or a reported skip.
fn tools_or_skip(tools: CudaTools, present: bool, what: &str) -> Option<CudaTools> {
    if present {
        return Some(tools);
    }
    if std::env::var(REQUIRE_TOOLS_ENV).is_ok_and(|v| v == "1") {
        panic!(
            "{REQUIRE_TOOLS_ENV}=1 but {what} are missing:\n{}",
            tools.describe()
        );
    }
    report_test_skip(&format!(
        "{what} not found (run scripts/setup-cuda-tools.sh)"
    ));
    None
}

/// For tests that return early because something they need is missing: prints
/// `skipped <test>: <why> (<n> skipped in this test binary)` to stderr past the test harness's
/// output capture, so `cargo test` shows every skip and the count so far even for tests that
/// pass (`cargo test 2>&1 | grep -c '^skipped '` counts them over all binaries).
pub fn report_test_skip(why: &str) {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SKIPPED: AtomicUsize = AtomicUsize::new(0);
    let n = SKIPPED.fetch_add(1, Ordering::Relaxed) + 1;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // io::stderr() directly: the harness captures only the print macros
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipped {test}: {why} ({n} skipped in this test binary)"
    );
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Walks up from `start` to the first ancestor holding a `.cuda-tools` folder.
fn find_up(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join(REPO_TOOLS_DIR))
        .find(|candidate| candidate.is_dir())
}

/// Looks for each tool in one root laid out like a CUDA toolkit or like `.cuda-tools`.
fn probe_root(root: &SearchRoot) -> CudaTools {
    let bin = |name: &str| Some(root.dir.join("bin").join(name)).filter(|p| is_executable(p));
    CudaTools {
        nvrtc: find_nvrtc(&root.dir),
        ptxas: bin("ptxas"),
        cuobjdump: bin("cuobjdump"),
        nvdisasm: bin("nvdisasm"),
        cccl_include: find_cccl_include(&root.dir),
        cudart_include: find_cudart_include(&root.dir),
        origin: root.origin,
        root: Some(root.dir.clone()),
        searched: vec![root.dir.clone()],
    }
}

const NVRTC_LIB_DIRS: [&str; 4] = [
    "lib",
    "lib64",
    "targets/x86_64-linux/lib",
    "targets/sbsa-linux/lib",
];

/// Finds `libnvrtc.so` (preferred) or the highest-versioned `libnvrtc.so.N` under a root.
fn find_nvrtc(root: &Path) -> Option<PathBuf> {
    NVRTC_LIB_DIRS
        .iter()
        .find_map(|dir| find_nvrtc_in(&root.join(dir)))
}

fn find_nvrtc_in(dir: &Path) -> Option<PathBuf> {
    let plain = dir.join("libnvrtc.so");
    if plain.is_file() {
        return Some(plain);
    }
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && is_versioned_nvrtc(p))
        .max_by_key(|p| nvrtc_version_key(p))
}

fn is_versioned_nvrtc(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("libnvrtc.so."))
        .is_some_and(|rest| !rest.is_empty() && rest.split('.').all(is_number))
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn nvrtc_version_key(path: &Path) -> Vec<u32> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let rest = name.strip_prefix("libnvrtc.so.").unwrap_or("");
    rest.split('.').filter_map(|s| s.parse().ok()).collect()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn make_exe(path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn fake_wheels(dir: &Path) {
        for tool in ["ptxas", "cuobjdump", "nvdisasm"] {
            make_exe(&dir.join("bin").join(tool));
        }
        fs::create_dir_all(dir.join("lib")).unwrap();
        fs::write(dir.join("lib/libnvrtc.so.12"), "").unwrap();
        fs::write(dir.join("lib/libnvrtc-builtins.so.12.9"), "").unwrap();
    }

    fn root(origin: ToolOrigin, dir: &Path) -> SearchRoot {
        SearchRoot {
            origin,
            dir: dir.to_path_buf(),
        }
    }

    #[test]
    fn finds_a_wheel_layout() {
        let tmp = tempfile::tempdir().unwrap();
        fake_wheels(tmp.path());
        let tools = CudaTools::locate_in(&[root(ToolOrigin::RepoWheels, tmp.path())]);
        assert!(tools.is_complete());
        assert_eq!(tools.origin, ToolOrigin::RepoWheels);
        assert_eq!(tools.nvrtc.unwrap(), tmp.path().join("lib/libnvrtc.so.12"));
    }

    #[test]
    fn complete_root_beats_earlier_partial_root() {
        let partial = tempfile::tempdir().unwrap();
        make_exe(&partial.path().join("bin/ptxas"));
        let full = tempfile::tempdir().unwrap();
        fake_wheels(full.path());
        let tools = CudaTools::locate_in(&[
            root(ToolOrigin::CudaPath, partial.path()),
            root(ToolOrigin::RepoWheels, full.path()),
        ]);
        assert_eq!(tools.origin, ToolOrigin::RepoWheels);
        assert_eq!(tools.searched.len(), 2);
    }

    #[test]
    fn partial_root_is_used_when_nothing_is_complete() {
        let partial = tempfile::tempdir().unwrap();
        make_exe(&partial.path().join("bin/ptxas"));
        let tools = CudaTools::locate_in(&[root(ToolOrigin::CudaPath, partial.path())]);
        assert!(tools.require_ptxas().is_ok());
        assert!(tools.require_cuobjdump().is_err());
    }

    #[test]
    fn toolkit_layout_prefers_unversioned_then_highest_nvrtc() {
        let tmp = tempfile::tempdir().unwrap();
        let lib64 = tmp.path().join("lib64");
        fs::create_dir_all(&lib64).unwrap();
        for name in [
            "libnvrtc.so.12",
            "libnvrtc.so.13.0.1",
            "libnvrtc-builtins.so.13.0",
        ] {
            fs::write(lib64.join(name), "").unwrap();
        }
        assert_eq!(
            find_nvrtc(tmp.path()).unwrap(),
            lib64.join("libnvrtc.so.13.0.1")
        );
        fs::write(lib64.join("libnvrtc.so"), "").unwrap();
        assert_eq!(find_nvrtc(tmp.path()).unwrap(), lib64.join("libnvrtc.so"));
    }

    #[test]
    fn non_executable_tool_is_not_found() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("bin")).unwrap();
        fs::write(tmp.path().join("bin/ptxas"), "").unwrap();
        let tools = CudaTools::locate_in(&[root(ToolOrigin::CudaPath, tmp.path())]);
        assert!(tools.ptxas.is_none());
    }

    #[test]
    fn missing_error_names_tool_places_and_script() {
        let tools = CudaTools::locate_in(&[
            root(ToolOrigin::CudaPath, Path::new("/nonexistent/cuda")),
            root(
                ToolOrigin::RepoWheels,
                Path::new("/nonexistent/repo/.cuda-tools"),
            ),
        ]);
        assert_eq!(tools.origin, ToolOrigin::NotFound);
        let msg = tools.require_ptxas().unwrap_err().to_string();
        assert!(msg.starts_with("ptxas not found"), "{msg}");
        assert!(
            msg.contains("/nonexistent/cuda, /nonexistent/repo/.cuda-tools"),
            "{msg}"
        );
        assert!(msg.contains("gpuwmm setup"), "{msg}");
        let described = tools.describe();
        assert!(described.contains("none found"), "{described}");
        assert!(described.contains("gpuwmm setup"), "{described}");
    }

    #[test]
    fn find_up_walks_to_an_ancestor() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(".cuda-tools")).unwrap();
        let deep = tmp.path().join("a/b/c");
        fs::create_dir_all(&deep).unwrap();
        assert_eq!(find_up(&deep).unwrap(), tmp.path().join(".cuda-tools"));
    }

    #[test]
    fn search_roots_end_with_the_repo_folder() {
        let roots = CudaTools::search_roots();
        assert!(roots
            .iter()
            .any(|r| r.dir == Path::new(env!("CARGO_MANIFEST_DIR")).join(".cuda-tools")));
        assert!(roots.iter().any(|r| r.dir == Path::new("/usr/local/cuda")));
    }
}
