//! CUDA toolchain discovery (NVRTC, ptxas, cuobjdump).
