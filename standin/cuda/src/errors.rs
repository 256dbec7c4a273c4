//! The result codes the stand-in returns, with the names and descriptions `cuGetErrorName` and
//! `cuGetErrorString` give for them.
//!
//! Why this module exists: the backend turns every failed call into a message through these two
//! functions, so the stand-in must answer them for every code it can return (and for the codes
//! the backend treats as kernel faults), with pointers to strings that live for the whole process.

use cudarc::driver::sys::CUresult;
use std::ffi::CString;
use std::sync::OnceLock;

/// Every code the stand-in knows, with its description (worded after the driver's documentation).
const CODES: &[(CUresult, &str)] = &[
    (CUresult::CUDA_SUCCESS, "no error"),
    (CUresult::CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    (CUresult::CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    (
        CUresult::CUDA_ERROR_NOT_INITIALIZED,
        "initialization error (cuInit has not been called)",
    ),
    (CUresult::CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    (
        CUresult::CUDA_ERROR_NO_DEVICE,
        "no CUDA-capable device is detected",
    ),
    (
        CUresult::CUDA_ERROR_INVALID_DEVICE,
        "invalid device ordinal",
    ),
    (
        CUresult::CUDA_ERROR_INVALID_IMAGE,
        "device kernel image is invalid",
    ),
    (
        CUresult::CUDA_ERROR_INVALID_CONTEXT,
        "invalid device context",
    ),
    (
        CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
        "context is destroyed",
    ),
    (
        CUresult::CUDA_ERROR_INVALID_PTX,
        "a PTX JIT compilation failed",
    ),
    (
        CUresult::CUDA_ERROR_INVALID_HANDLE,
        "invalid resource handle",
    ),
    (CUresult::CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    (CUresult::CUDA_ERROR_NOT_READY, "device not ready"),
    (
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        "an illegal memory access was encountered",
    ),
    (
        CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        "too many resources requested for launch",
    ),
    (
        CUresult::CUDA_ERROR_LAUNCH_FAILED,
        "unspecified launch failure",
    ),
    (
        CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
        "misaligned address",
    ),
    (
        CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE,
        "operation not supported on global/shared address space",
    ),
    (CUresult::CUDA_ERROR_INVALID_PC, "invalid program counter"),
    (
        CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        "an illegal instruction was encountered",
    ),
    (
        CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR,
        "hardware stack error",
    ),
    (CUresult::CUDA_ERROR_ASSERT, "device-side assert triggered"),
    (
        CUresult::CUDA_ERROR_LAUNCH_TIMEOUT,
        "the launch timed out and was terminated",
    ),
    (
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        "operation not supported",
    ),
    (CUresult::CUDA_ERROR_UNKNOWN, "unknown error"),
];

/// `(code, name, description)` as NUL-terminated strings that live as long as the process.
fn table() -> &'static [(u32, CString, CString)] {
    static TABLE: OnceLock<Vec<(u32, CString, CString)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        CODES
            .iter()
            .map(|&(code, text)| {
                let name = format!("{code:?}");
                (
                    code as u32,
                    CString::new(name).unwrap_or_default(),
                    CString::new(text).unwrap_or_default(),
                )
            })
            .collect()
    })
}

/// The name (`CUDA_ERROR_ILLEGAL_ADDRESS`) of a known code.
pub fn name(code: u32) -> Option<&'static CString> {
    table().iter().find(|e| e.0 == code).map(|e| &e.1)
}

/// The description of a known code.
pub fn description(code: u32) -> Option<&'static CString> {
    table().iter().find(|e| e.0 == code).map(|e| &e.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_driver_name() {
        let code = CUresult::CUDA_ERROR_ILLEGAL_ADDRESS as u32;
        assert_eq!(
            name(code).unwrap().to_str().unwrap(),
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        );
        assert!(description(code)
            .unwrap()
            .to_str()
            .unwrap()
            .contains("illegal"));
        assert!(name(12345).is_none());
    }
}
