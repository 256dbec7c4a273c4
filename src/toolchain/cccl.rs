//! The CCCL headers (CUB, libcu++, Thrust): where they are and what NVRTC needs to use them.
//!
//! An app may include NVIDIA's own code (`<cub/...>`, `<cuda/atomic>`) so that gpuwmm tests
//! inter-block communication nobody here wrote. NVRTC ships none of these headers, so the
//! toolchain finds them beside the other tools: a CUDA 12 toolkit keeps them in `include/`, a
//! CUDA 13 toolkit and the repository's `.cuda-tools` (the pinned `nvidia-cuda-cccl-cu12` wheel,
//! linked by `scripts/setup-cuda-tools.sh`) in `include/cccl/`.
//!
//! Two of CUB's headers assume a host C++ standard library that NVRTC does not have
//! (`cub/detail/strong_load.cuh` includes `<iterator>`, `cub/thread/thread_store.cuh` names
//! `std::is_pointer`); [`nvrtc_std_shims`] supplies the one header and the one name from
//! libcu++, as in-memory NVRTC headers, so those CUB headers compile unchanged.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// Include folders under a tools root that may hold CCCL, most specific first.
const CCCL_INCLUDE_DIRS: [&str; 2] = ["include/cccl", "include"];

/// A file every CCCL release has; its presence marks an include folder as CCCL's.
const CCCL_MARKER: &str = "cuda/std/__cccl/version.h";

/// The CCCL include folder under `root`, if it has one.
pub fn find_cccl_include(root: &Path) -> Option<PathBuf> {
    CCCL_INCLUDE_DIRS
        .iter()
        .map(|dir| root.join(dir))
        .find(|dir| dir.join(CCCL_MARKER).is_file() && dir.join("cub").is_dir())
}

/// CCCL's version number (`CCCL_VERSION`, e.g. 2008002 for 2.8.2) as its headers define it.
pub fn cccl_version(include: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(include.join(CCCL_MARKER)).ok()?;
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("#define CCCL_VERSION ")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// NVRTC options that make CCCL's headers available: the include folder, and its version as a
/// macro so that the PTX cache key changes when the headers do (the path alone would not).
pub fn cccl_compile_args(include: &Path) -> Vec<String> {
    let mut args = vec![format!("-I{}", include.display())];
    if let Some(version) = cccl_version(include) {
        args.push(format!("-DGPUWMM_CCCL_VERSION={version}"));
    }
    args
}

/// In-memory headers (name, text) standing in for the host standard library pieces CUB's
/// headers expect and NVRTC lacks; each maps to libcu++'s device-side equivalent.
pub fn nvrtc_std_shims() -> Vec<(String, String)> {
    let iterator = "\
// gpuwmm: NVRTC has no host <iterator>; CUB's strong_load.cuh includes it, and
// thread_store.cuh names std::is_pointer. Both come from libcu++ here.
#pragma once
#include <cuda/std/iterator>
#include <cuda/std/type_traits>
namespace std {
using ::cuda::std::is_pointer;
}
";
    vec![("iterator".to_string(), iterator.to_string())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_cccl(include: &Path, version: &str) {
        fs::create_dir_all(include.join("cub")).unwrap();
        fs::create_dir_all(include.join("cuda/std/__cccl")).unwrap();
        fs::write(
            include.join(CCCL_MARKER),
            format!("#pragma once\n#define CCCL_VERSION {version}\n#define CCCL_MAJOR_VERSION 2\n"),
        )
        .unwrap();
    }

    #[test]
    fn wheel_layout_include_cccl_is_found_before_plain_include() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cccl(&tmp.path().join("include/cccl"), "2008002");
        fake_cccl(&tmp.path().join("include"), "2007000");
        let found = find_cccl_include(tmp.path()).unwrap();
        assert_eq!(found, tmp.path().join("include/cccl"));
        assert_eq!(cccl_version(&found), Some(2008002));
    }

    #[test]
    fn cuda12_toolkit_layout_plain_include_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cccl(&tmp.path().join("include"), "2008002");
        assert_eq!(
            find_cccl_include(tmp.path()),
            Some(tmp.path().join("include"))
        );
    }

    #[test]
    fn a_folder_without_cub_is_not_cccl() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cccl(&tmp.path().join("include"), "2008002");
        fs::remove_dir(tmp.path().join("include/cub")).unwrap();
        assert_eq!(find_cccl_include(tmp.path()), None);
        assert_eq!(find_cccl_include(&tmp.path().join("absent")), None);
    }

    #[test]
    fn compile_args_name_the_folder_and_the_version() {
        let tmp = tempfile::tempdir().unwrap();
        let include = tmp.path().join("include/cccl");
        fake_cccl(&include, "2008002");
        assert_eq!(
            cccl_compile_args(&include),
            [
                format!("-I{}", include.display()),
                "-DGPUWMM_CCCL_VERSION=2008002".to_string()
            ]
        );
    }

    /// Regression guard for the shim: CUB's look-back header does not compile under NVRTC with
    /// the include folder alone (no host `<iterator>`), and does with [`nvrtc_std_shims`].
    #[test]
    fn cub_look_back_header_needs_the_iterator_shim_under_nvrtc() {
        use crate::toolchain::{cccl_tools_for_tests, CompileOptions, Nvrtc, NvrtcError};
        let Some(tools) = cccl_tools_for_tests() else {
            return;
        };
        let include = tools.cccl_include.clone().unwrap();
        let nvrtc = Nvrtc::shared(tools.require_nvrtc().unwrap()).unwrap();
        let source = "#include <cub/agent/single_pass_scan_operators.cuh>\n\
            extern \"C\" __global__ void k(unsigned *s) { \
            cub::ScanTileState<int, false> t; t.d_tile_status = s; t.InitializeStatus(1); }\n";
        let bare = CompileOptions {
            extra: cccl_compile_args(&include),
            ..CompileOptions::default()
        };
        match nvrtc.compile(source, "k.cu", &bare) {
            Err(NvrtcError::Compile { log, .. }) => {
                assert!(log.contains("\"iterator\""), "{log}")
            }
            other => panic!("expected the missing <iterator> error, got {other:?}"),
        }
        let shimmed = CompileOptions {
            headers: nvrtc_std_shims(),
            ..bare
        };
        let ptx = nvrtc.compile(source, "k.cu", &shimmed).unwrap().ptx;
        assert!(ptx.contains(".entry k"), "{ptx}");
    }
}
