//! The CUDA runtime's device headers (`cooperative_groups.h`, `cuda_fp16.h`, `cuda_bf16.h`,
//! `cuda_pipeline.h`, ...): where they are, and which include names are theirs.
//!
//! Kernels include these headers as they are, and NVRTC ships none of them, so without their
//! folder a real kernel stops at its first `#include`. A CUDA toolkit keeps them in `include/`;
//! the repository's `.cuda-tools` (the pinned `nvidia-cuda-runtime-cu12` wheel, linked by
//! `scripts/setup-cuda-tools.sh`) in `include/cudart/`. When neither is found, a kernel that
//! includes one gets an error naming the header and how to get it, not the host-code error that
//! other unopened includes get.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// Include folders under a tools root that may hold the runtime headers, most specific first.
const CUDART_INCLUDE_DIRS: [&str; 2] = ["include/cudart", "include"];

/// A device header every CUDA 11 and later runtime has; it marks the folder.
const CUDART_MARKER: &str = "cooperative_groups.h";

/// Device headers of the CUDA runtime a kernel may include (a folder name ends with `/`).
const DEVICE_HEADERS: [&str; 14] = [
    "cooperative_groups.h",
    "cooperative_groups/",
    "cuda_fp16.h",
    "cuda_bf16.h",
    "cuda_fp8.h",
    "cuda_pipeline.h",
    "cuda_pipeline_primitives.h",
    "cuda_awbarrier.h",
    "cuda_awbarrier_primitives.h",
    "mma.h",
    "sm_60_atomic_functions.h",
    "sm_61_intrinsics.h",
    "device_atomic_functions.h",
    "crt/",
];

/// The runtime's device-header folder under `root`, if it has one.
pub fn find_cudart_include(root: &Path) -> Option<PathBuf> {
    CUDART_INCLUDE_DIRS
        .iter()
        .map(|dir| root.join(dir))
        .find(|dir| dir.join(CUDART_MARKER).is_file())
}

/// Whether `name`, as an `#include` names it, is one of the runtime's device headers.
pub fn is_cudart_device_header(name: &str) -> bool {
    DEVICE_HEADERS.iter().any(|h| match h.strip_suffix('/') {
        Some(folder) => name.starts_with(folder) && name[folder.len()..].starts_with('/'),
        None => name == *h,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_with_cooperative_groups_is_found_wheel_layout_first() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(find_cudart_include(tmp.path()), None);
        let toolkit = tmp.path().join("include");
        std::fs::create_dir_all(&toolkit).unwrap();
        std::fs::write(toolkit.join(CUDART_MARKER), "").unwrap();
        assert_eq!(find_cudart_include(tmp.path()), Some(toolkit));
        let wheel = tmp.path().join("include/cudart");
        std::fs::create_dir_all(&wheel).unwrap();
        std::fs::write(wheel.join(CUDART_MARKER), "").unwrap();
        assert_eq!(find_cudart_include(tmp.path()), Some(wheel));
    }

    #[test]
    fn device_headers_are_told_from_host_ones() {
        for name in [
            "cooperative_groups.h",
            "cooperative_groups/reduce.h",
            "cuda_fp16.h",
        ] {
            assert!(is_cudart_device_header(name), "{name}");
        }
        for name in [
            "iostream",
            "cuda_runtime.h",
            "cooperative_groups_x.h",
            "crt",
        ] {
            assert!(!is_cudart_device_header(name), "{name}");
        }
    }
}
