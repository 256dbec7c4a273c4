//! The device interface: what a driver may ask of a GPU, real or simulated.
//!
//! It lives with the simulator, its one implementation that needs nothing else, so that the
//! simulator and the stand-in driver build without the tool; the tool's `Backend` trait extends
//! [`Device`] with what only a real GPU has (NVML power readings), and its `cuda` backend
//! implements both.

use serde::Serialize;
use std::time::Duration;
use thiserror::Error;

/// Which implementation a backend is: what `--backend auto` resolves to, and what a target,
/// a journal and a result record as the backend that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Cuda,
    Sim,
}

impl BackendKind {
    /// The name as the command line and file names spell it.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cuda => "cuda",
            BackendKind::Sim => "sim",
        }
    }
}

/// What a driver may want to know about the device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceInfo {
    pub backend: BackendKind,
    pub name: String,
    pub sm_count: u32,
    pub max_threads_per_sm: u32,
    /// `sm_count * max_threads_per_sm`.
    pub max_resident_threads: u32,
    pub l2_bytes: u64,
    pub compute_capability: (u32, u32),
    /// NVML total-energy counter readable (Volta and later).
    pub energy_counter: bool,
    /// NVML instantaneous power readable.
    pub power_readable: bool,
    /// Driver version, or the simulator's memory model for `sim`.
    pub driver: String,
}

/// A device allocation. Its `address` is the device address a kernel sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Buffer {
    pub id: u64,
    pub address: u64,
    pub bytes: usize,
}

/// A loaded module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModuleId(pub usize);

/// A 1-, 2- or 3-D extent.
pub type Dim3 = (u32, u32, u32);

/// Grid, block and dynamic shared memory of a launch, and whether it is cooperative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: Dim3,
    pub block: Dim3,
    pub shared_bytes: u32,
    /// A cooperative launch (`cudaLaunchCooperativeKernel`): every block is resident at once
    /// and the kernel gets a grid workspace, so that `cooperative_groups::this_grid().sync()`
    /// works.
    pub cooperative: bool,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads, without dynamic shared memory, not
    /// cooperative.
    pub const fn new(grid: Dim3, block: Dim3) -> LaunchConfig {
        LaunchConfig {
            grid,
            block,
            shared_bytes: 0,
            cooperative: false,
        }
    }
}

/// A kernel to start ([`Device::launch`]): which kernel of which module, on what grid, with what
/// arguments.
#[derive(Debug, Clone, Copy)]
pub struct KernelLaunch<'a> {
    pub module: ModuleId,
    pub kernel: &'a str,
    pub config: &'a LaunchConfig,
    pub args: &'a [KernelArg],
}

/// One kernel argument, passed by value in the kernel's parameter order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelArg {
    /// The device address of a buffer (plus a byte offset).
    Pointer(Buffer, u64),
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl KernelArg {
    pub fn ptr(buffer: Buffer) -> KernelArg {
        KernelArg::Pointer(buffer, 0)
    }

    /// The little-endian bytes the kernel receives for this parameter.
    pub fn bytes(&self) -> Vec<u8> {
        match *self {
            KernelArg::Pointer(b, offset) => (b.address + offset).to_le_bytes().to_vec(),
            KernelArg::U32(v) => v.to_le_bytes().to_vec(),
            KernelArg::I32(v) => v.to_le_bytes().to_vec(),
            KernelArg::U64(v) => v.to_le_bytes().to_vec(),
            KernelArg::F32(v) => v.to_le_bytes().to_vec(),
            KernelArg::F64(v) => v.to_le_bytes().to_vec(),
        }
    }
}

/// What the last completed kernel cost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct KernelStats {
    /// CUDA-event time on a GPU; wall time of the interpretation on the simulator.
    pub time: Duration,
    /// Thread-instructions executed (simulator only).
    pub instructions: Option<u64>,
    /// Instructions executed by the busiest thread (simulator only): the simulator's measure of
    /// how long a launch lasts, since on a GPU all threads run at once.
    pub longest_thread: Option<u64>,
}

impl KernelStats {
    /// How long the kernel lasted, in the backend's own unit: seconds on a GPU, instructions of
    /// the busiest thread on the simulator. Only ratios of durations on one backend mean anything.
    pub fn duration(&self) -> f64 {
        match self.longest_thread {
            Some(instructions) => instructions as f64,
            None => self.time.as_secs_f64(),
        }
    }
}

/// Everything that can go wrong below a driver. A driver maps [`BackendError::is_timeout`] to the
/// `timeout` outcome and other launch-time errors to `crash`.
#[derive(Debug, Error)]
pub enum BackendError {
    #[error("no CUDA driver found ({0}); use --backend sim to run on the simulator")]
    NoDriver(String),
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    #[error("PTX JIT compilation failed:\n{log}")]
    Jit { log: String },
    #[error("PTX rejected by the simulator: {0}")]
    BadModule(String),
    #[error("kernel '{0}' not found in the module")]
    NoKernel(String),
    #[error("variable '{0}' not found in the module")]
    NoVariable(String),
    #[error("bad launch: {0}")]
    BadLaunch(String),
    #[error("kernel did not finish within {0:?}")]
    Timeout(Duration),
    /// The simulator's way of not finishing: the instruction budget ran out, or every thread
    /// waits at a barrier or rendezvous that cannot complete.
    #[error("kernel did not finish on the simulator: {0}")]
    Hang(String),
    #[error("kernel fault: {0}")]
    Fault(String),
    /// `origin`: the source line the instruction was compiled from (`kernel.cu:42`, with the
    /// inlined function's line after it when it differs), when the PTX has line information.
    #[error(
        "the simulator does not support `{instruction}` (PTX line {line}{})",
        origin.as_ref().map(|o| format!(", from {o}")).unwrap_or_default()
    )]
    Unsupported {
        instruction: String,
        line: usize,
        origin: Option<String>,
    },
    #[error("CUDA error: {0}")]
    Cuda(String),
}

impl BackendError {
    /// A hung kernel (deadline or instruction budget exceeded).
    pub fn is_timeout(&self) -> bool {
        matches!(self, BackendError::Timeout(_) | BackendError::Hang(_))
    }

    /// An error after which a GPU context answers every call with an error (a kernel fault, or
    /// a kernel still running past its deadline): the caller must open a new backend to go on.
    pub fn loses_context(&self) -> bool {
        matches!(self, BackendError::Fault(_) | BackendError::Timeout(_))
    }
}

pub type Result<T> = std::result::Result<T, BackendError>;

/// A GPU, real or simulated.
pub trait Device {
    fn info(&self) -> &DeviceInfo;

    /// Allocates `bytes` of zeroed global memory.
    fn alloc(&mut self, bytes: usize) -> Result<Buffer>;
    fn free(&mut self, buffer: Buffer) -> Result<()>;
    fn copy_in(&mut self, buffer: Buffer, offset: usize, data: &[u8]) -> Result<()>;
    fn copy_out(&mut self, buffer: Buffer, offset: usize, out: &mut [u8]) -> Result<()>;
    fn memset(&mut self, buffer: Buffer, byte: u8) -> Result<()>;

    /// Loads (JIT-compiles, for `cuda`) a module from PTX text.
    fn load_module(&mut self, ptx: &str) -> Result<ModuleId>;

    /// The module-scope variable `name` of `module` (a `.global` or `.const` variable: a
    /// `__device__` or `__constant__` variable in CUDA) as a buffer that [`Device::copy_in`] and
    /// [`Device::copy_out`] reach, as `cuModuleGetGlobal` gives it. It lives as long as the
    /// module and is not to be freed. No such variable is [`BackendError::NoVariable`].
    fn module_global(&mut self, module: ModuleId, name: &str) -> Result<Buffer>;

    /// Starts a kernel. Errors that happen while it runs are reported by [`Device::synchronize`].
    fn launch(
        &mut self,
        module: ModuleId,
        kernel: &str,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<()> {
        self.start(KernelLaunch {
            module,
            kernel,
            config,
            args,
        })
    }

    /// Starts `launch`: what a device implements for [`Device::launch`].
    fn start(&mut self, launch: KernelLaunch<'_>) -> Result<()>;

    /// Waits for all launched work; a kernel still running at `deadline` is a
    /// [`BackendError::Timeout`].
    fn synchronize(&mut self, deadline: Duration) -> Result<()>;

    /// Cost of the last kernel that completed.
    fn last_kernel_stats(&self) -> KernelStats;

    /// Seeds the backend's own nondeterminism (the simulator's scheduler and memory model) so a
    /// run can be replayed. Real GPUs have none to seed.
    fn reseed(&mut self, _seed: u64) {}

    /// Places the blocks of the launches that follow on GPUs of one system: block `b` on GPU
    /// `gpus[b % gpus.len()]` (litmus tests across GPUs, where `.gpu` reaches only the blocks
    /// of the same GPU and `.sys` reaches all); a list naming one GPU, or none, puts every
    /// block on one GPU again. Returns whether the device can: the simulator can, a GPU
    /// backend is one device and can only place every block on itself.
    fn place_on_gpus(&mut self, gpus: &[u32]) -> bool {
        crate::ptx_model::Gpus::new(gpus).is_one()
    }

    /// A hint for the next launch only: its blocks with a linear id at or above
    /// `first_stressing_block` are stressing blocks whose memory nothing reads back, so the launch
    /// may end as soon as the blocks below it have finished. The simulator takes it (on the
    /// simulator stress past the application's end changes nothing the application can see, and
    /// is most of a stressed run's work); a GPU ignores it and the stress runs its course.
    fn end_next_launch_with_app(&mut self, _first_stressing_block: u32) {}

    /// Switches recording of races (conflicting accesses that causality order leaves
    /// unordered, and morally strong communication) on or off for the launches that follow;
    /// returns whether the device records them (the simulator's PTX model does, a GPU cannot).
    fn record_races(&mut self, _on: bool) -> bool {
        false
    }

    /// What the launches since the last call recorded, when recording is on.
    fn take_races(&mut self) -> Option<crate::races::RaceLog> {
        None
    }

    /// What kernels printed with `printf` since the last call, in the order the calls
    /// executed: the simulator keeps it (bounded like CUDA's printf FIFO, 1 MiB per launch;
    /// what does not fit is dropped and a line says how many bytes). A GPU returns nothing
    /// here: its `printf` output goes to the process's standard output by itself, when the
    /// CUDA driver flushes its FIFO at a synchronisation.
    fn take_device_output(&mut self) -> Vec<u8> {
        Vec::new()
    }
}
