//! The `cuda` backend: runs kernels on a real NVIDIA GPU through the CUDA driver API.
//!
//! Why this module exists: drivers need a GPU behind the [`Backend`] trait, and the crate must
//! still build and pass its tests on machines without one. So `libcuda` is never linked: cudarc
//! (feature `dynamic-loading`) resolves each driver function on first use. cudarc *panics* when
//! the library or a symbol is missing (`sys::culib()` calls `panic_no_lib_found`, `sys::load`
//! panics with "Missing symbol"), so before any cudarc call this module probes, once per process,
//! the same library names cudarc will try, in the same order, with `libloading`, and checks that
//! every symbol this module calls is exported. A missing library or symbol is
//! [`BackendError::NoDriver`]; cudarc is only reached after the probe succeeded.
//!
//! Only cudarc's raw `sys` layer is used: one context per backend (`cuCtxCreate`; that does not
//! contain a fault: on an H100, driver 580, one kernel's illegal address left every context of
//! the process failing, new ones too, so whatever must survive a fault runs its kernels in a
//! worker process, [`crate::isolation`]), one non-blocking stream that every
//! copy, memset and launch is ordered on, PTX JIT-loaded with `cuModuleLoadDataEx` and its error
//! log, kernels launched with `cuLaunchKernel` and a raw parameter array, CUDA events around each
//! launch for kernel time. Nothing here tracks buffers across streams (as cudarc's safe API does
//! with its event tracking), so the wrapper adds no synchronisation of its own: what runs
//! concurrently is decided by the launches alone.
//!
//! Hung kernels: [`Backend::synchronize`] polls `cuStreamQuery` with short sleeps until the
//! deadline and then returns [`BackendError::Timeout`]. The kernel keeps running; CUDA has no way
//! to stop one kernel, so the context is unusable from then on. Every later call (except another
//! `synchronize`, which succeeds if the kernel finished after all) answers
//! [`BackendError::Cuda`], and the caller must drop the backend. Dropping a backend whose kernel
//! still runs leaks its context (freeing memory or destroying the context would wait for the
//! kernel, i.e. forever); the supervisor kills and restarts the worker process to get the GPU
//! back. Kernel faults (illegal address, ...) are sticky in CUDA too: after a
//! [`BackendError::Fault`] every call on this backend fails and it must be dropped, which
//! destroys its context and frees the device memory.
//!
//! Device-side `printf`: the CUDA driver writes a kernel's output to this process's standard
//! output itself when it flushes its printf FIFO (at a synchronisation), so
//! [`Device::take_device_output`] keeps its default here and returns nothing; only the
//! simulator, which has no driver to print for it, keeps the output for `gpuwmm replay` to show.

// The one module of the library that calls C (the CUDA driver); every unsafe block says why it
// is sound in a `// SAFETY:` comment. The rest of the crate denies `unsafe_code`.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use super::nvml::{Nvml, PowerMeter};
use super::{
    Backend, BackendError, BackendKind, Buffer, Device, DeviceInfo, KernelArg, KernelLaunch,
    KernelStats, ModuleId, Result,
};
use cudarc::driver::sys::{self, CUresult};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Driver functions this module calls through cudarc, by the symbol name cudarc resolves.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceGetPCIBusId",
    "cuCtxSetCurrent",
    "cuCtxDestroy_v2",
    "cuStreamCreate",
    "cuStreamQuery",
    "cuStreamDestroy_v2",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventDestroy_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8Async",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuModuleLoadDataEx",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuModuleGetGlobal_v2",
    "cuFuncSetAttribute",
    "cuLaunchKernel",
];

/// How long a deadline-free wait (a copy ordered after a launch) sleeps between polls, at most.
const MAX_POLL_SLEEP: Duration = Duration::from_millis(1);
/// Polls in the first this-long of a wait only yield the thread, so short kernels return fast.
const SPIN_PHASE: Duration = Duration::from_micros(100);
/// Size of each JIT log buffer.
const JIT_LOG_BYTES: usize = 1 << 16;

/// What the probe found out about the installed driver library.
struct Driver {
    /// Kept open for the life of the process (cudarc opens its own handle to the same file).
    _library: libloading::Library,
    /// `cuCtxCreate_v2` exported (else `cuCtxCreate_v4` is).
    ctx_create_v2: bool,
    /// `cuEventElapsedTime` exported (else `cuEventElapsedTime_v2` is).
    elapsed_v1: bool,
    /// `cuFuncGetParamInfo` exported (CUDA 12.4+): launches check their argument list.
    param_info: bool,
    /// `cuFuncLoad` exported (CUDA 12.4+): kernels are loaded when first looked up, not lazily
    /// inside the first launch.
    func_load: bool,
}

static DRIVER: OnceLock<std::result::Result<Driver, String>> = OnceLock::new();

/// Probes for the driver once per process; every function that calls cudarc goes through this.
fn driver() -> Result<&'static Driver> {
    DRIVER
        .get_or_init(load_driver)
        .as_ref()
        .map_err(|reason| BackendError::NoDriver(reason.clone()))
}

fn load_driver() -> std::result::Result<Driver, String> {
    // The exact list and order `cudarc::driver::sys::culib()` tries, so the library checked here
    // is the one cudarc will load.
    let candidates: Vec<String> = ["cuda", "nvcuda"]
        .iter()
        .flat_map(|name| cudarc::get_lib_name_candidates(name))
        .collect();
    let mut canonical_error = None;
    let mut first_error = None;
    for name in &candidates {
        // SAFETY: loading the CUDA driver library runs only its own initialisers, which have no
        // preconditions on the caller; no symbol is called here.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return check_symbols(name, library),
            Err(e) => {
                if name == "libcuda.so.1" {
                    canonical_error = Some(e.to_string());
                }
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let reason = canonical_error
        .or(first_error)
        .unwrap_or_else(|| "no candidate names".to_string());
    Err(format!("libcuda.so.1 could not be loaded: {reason}"))
}

fn check_symbols(name: &str, library: libloading::Library) -> std::result::Result<Driver, String> {
    let has = |symbol: &str| {
        // SAFETY: the symbol is only looked up, never called or dereferenced, so the pointer
        // type given to `get` does not matter.
        unsafe { library.get::<*const c_void>(symbol.as_bytes()).is_ok() }
    };
    let missing: Vec<&str> = REQUIRED_SYMBOLS
        .iter()
        .copied()
        .filter(|s| !has(s))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{name} lacks {} (driver too old?)",
            missing.join(", ")
        ));
    }
    let ctx_create_v2 = has("cuCtxCreate_v2");
    if !ctx_create_v2 && !has("cuCtxCreate_v4") {
        return Err(format!("{name} lacks cuCtxCreate_v2 and cuCtxCreate_v4"));
    }
    let elapsed_v1 = has("cuEventElapsedTime");
    if !elapsed_v1 && !has("cuEventElapsedTime_v2") {
        return Err(format!("{name} lacks cuEventElapsedTime"));
    }
    let param_info = has("cuFuncGetParamInfo");
    let func_load = has("cuFuncLoad");
    Ok(Driver {
        _library: library,
        ctx_create_v2,
        elapsed_v1,
        param_info,
        func_load,
    })
}

/// `CUDA_ERROR_X: description` for a driver result code.
fn describe(code: CUresult) -> String {
    let mut name: *const c_char = std::ptr::null();
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: only called after the probe succeeded; both functions write a pointer to a static
    // NUL-terminated string (or leave it null for an unknown code, which is checked).
    let (name_ok, text_ok) = unsafe {
        (
            sys::cuGetErrorName(code, &mut name) == CUresult::CUDA_SUCCESS && !name.is_null(),
            sys::cuGetErrorString(code, &mut text) == CUresult::CUDA_SUCCESS && !text.is_null(),
        )
    };
    let name = if name_ok {
        // SAFETY: the pointers were checked non-null and point to static strings of the driver.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("CUDA error {}", code as u32)
    };
    if text_ok {
        // SAFETY: as above.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{name}: {text}")
    } else {
        name
    }
}

/// Errors a kernel leaves behind: sticky for the context, reported by whatever call comes next.
fn is_fault(code: CUresult) -> bool {
    use CUresult::*;
    matches!(
        code,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_NVLINK_UNCORRECTABLE
            | CUDA_ERROR_CONTAINED
            | CUDA_ERROR_TENSOR_MEMORY_LEAK
    )
}

/// Maps a failed call: kernel faults to [`BackendError::Fault`], the rest to
/// [`BackendError::Cuda`] naming the call.
fn check(code: CUresult, call: &str) -> Result<()> {
    if code == CUresult::CUDA_SUCCESS {
        Ok(())
    } else if is_fault(code) {
        Err(BackendError::Fault(describe(code)))
    } else {
        Err(BackendError::Cuda(format!("{call}: {}", describe(code))))
    }
}

/// A module id that names no loaded module (never loaded, or unloaded).
fn no_loaded_module(module: ModuleId) -> BackendError {
    BackendError::BadLaunch(format!("no loaded module {}", module.0))
}

/// `cuInit`, with the failures that mean "no usable driver / device" typed as such.
fn init() -> Result<()> {
    driver()?;
    // SAFETY: the probe found the library and every symbol; cuInit takes flags 0 and may be
    // called any number of times.
    let code = unsafe { sys::cuInit(0) };
    match code {
        CUresult::CUDA_SUCCESS => Ok(()),
        CUresult::CUDA_ERROR_NO_DEVICE | CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE => Err(
            BackendError::NoDevice(format!("cuInit: {}", describe(code))),
        ),
        _ => Err(BackendError::NoDriver(format!(
            "cuInit: {}",
            describe(code)
        ))),
    }
}

/// `13000` → `13.0`.
fn cuda_version_string(version: c_int) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// The driver API version, e.g. `CUDA 13.0`, with the kernel driver's own version in front when
/// NVML can tell it: `580.65.06 (CUDA 13.0)`.
fn driver_string(nvml: Option<&Nvml>) -> Result<String> {
    driver()?;
    let mut version: c_int = 0;
    check(
        // SAFETY: the probe succeeded; cuDriverGetVersion writes one int and needs no cuInit.
        unsafe { sys::cuDriverGetVersion(&mut version) },
        "cuDriverGetVersion",
    )?;
    let cuda = format!("CUDA {}", cuda_version_string(version));
    Ok(match nvml.and_then(|n| n.driver_version().ok()) {
        Some(kmd) => format!("{kmd} ({cuda})"),
        None => cuda,
    })
}

/// Checks that a CUDA driver is installed and answers; returns its version as
/// [`DeviceInfo::driver`] shows it (`580.65.06 (CUDA 13.0)`, or `CUDA 13.0` without NVML).
/// `gpuwmm devices` calls this first; it never panics.
pub fn probe_driver() -> Result<String> {
    driver_string(Nvml::probe().as_ref())
}

fn device_count() -> Result<usize> {
    let mut count: c_int = 0;
    check(
        // SAFETY: cuInit succeeded before every call of this function; one int is written.
        unsafe { sys::cuDeviceGetCount(&mut count) },
        "cuDeviceGetCount",
    )?;
    Ok(count.max(0) as usize)
}

fn get_device(ordinal: usize) -> Result<sys::CUdevice> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(BackendError::NoDevice(format!(
            "device {ordinal} requested, {count} present"
        )));
    }
    let mut device: sys::CUdevice = 0;
    check(
        // SAFETY: cuInit succeeded and the ordinal is below the device count.
        unsafe { sys::cuDeviceGet(&mut device, ordinal as c_int) },
        "cuDeviceGet",
    )?;
    Ok(device)
}

fn attribute(device: sys::CUdevice, attribute: sys::CUdevice_attribute) -> Result<u32> {
    let mut value: c_int = 0;
    check(
        // SAFETY: `device` came from cuDeviceGet; one int is written.
        unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, device) },
        "cuDeviceGetAttribute",
    )?;
    Ok(value.max(0) as u32)
}

fn device_name(device: sys::CUdevice) -> Result<String> {
    c_string_out::<256>("cuDeviceGetName", |buf, len| {
        // SAFETY: the buffer holds `len` chars; the driver writes a NUL-terminated string into it.
        unsafe { sys::cuDeviceGetName(buf, len, device) }
    })
}

fn pci_bus_id(device: sys::CUdevice) -> Result<String> {
    c_string_out::<64>("cuDeviceGetPCIBusId", |buf, len| {
        // SAFETY: the buffer holds `len` chars; the driver writes a NUL-terminated string into it.
        unsafe { sys::cuDeviceGetPCIBusId(buf, len, device) }
    })
}

/// A string the driver writes into a buffer of `N` chars by `call(buffer, N)`.
fn c_string_out<const N: usize>(
    what: &str,
    call: impl FnOnce(*mut c_char, c_int) -> CUresult,
) -> Result<String> {
    let mut buf = [0 as c_char; N];
    check(call(buf.as_mut_ptr(), N as c_int), what)?;
    buf[N - 1] = 0;
    // SAFETY: the buffer is NUL-terminated (forced above).
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

/// Everything [`DeviceInfo`] holds for one device, plus its NVML meter.
fn describe_device(
    device: sys::CUdevice,
    driver: &str,
    nvml: Option<&Nvml>,
) -> Result<(DeviceInfo, String, Option<PowerMeter>)> {
    use sys::CUdevice_attribute::*;
    let sm_count = attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let max_threads_per_sm = attribute(device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?;
    let bus_id = pci_bus_id(device)?;
    let meter = nvml.and_then(|n| n.meter_by_pci_bus_id(&bus_id).ok());
    let info = DeviceInfo {
        backend: BackendKind::Cuda,
        name: device_name(device)?,
        sm_count,
        max_threads_per_sm,
        max_resident_threads: sm_count.saturating_mul(max_threads_per_sm),
        l2_bytes: u64::from(attribute(device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?),
        compute_capability: (
            attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        energy_counter: meter.as_ref().is_some_and(|m| m.supports_energy_counter()),
        power_readable: meter.as_ref().is_some_and(|m| m.supports_power()),
        driver: driver.to_string(),
    };
    Ok((info, bus_id, meter))
}

/// Every CUDA device (as CUDA numbers them, so index = `open` ordinal). An installed driver with
/// no device gives an empty list; no driver gives [`BackendError::NoDriver`]. Never panics.
pub fn list_devices() -> Result<Vec<DeviceInfo>> {
    match init() {
        Ok(()) => {}
        Err(BackendError::NoDevice(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    }
    let nvml = Nvml::probe();
    let driver = driver_string(nvml.as_ref())?;
    (0..device_count()?)
        .map(|ordinal| {
            let device = get_device(ordinal)?;
            Ok(describe_device(device, &driver, nvml.as_ref())?.0)
        })
        .collect()
}

/// A device allocation owned by the backend.
#[derive(Debug, Clone, Copy)]
struct Allocation {
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

/// A kernel looked up in a module, with its parameter sizes when the driver can tell them.
#[derive(Debug, Clone)]
struct Kernel {
    function: sys::CUfunction,
    param_sizes: Option<Vec<usize>>,
}

/// One GPU, one CUDA context, one stream. See the module documentation for the threading and
/// failure rules.
pub struct CudaBackend {
    info: DeviceInfo,
    ordinal: usize,
    pci_bus_id: String,
    meter: Option<PowerMeter>,
    driver: &'static Driver,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    start: sys::CUevent,
    end: sys::CUevent,
    buffers: HashMap<u64, Allocation>,
    next_buffer: u64,
    modules: Vec<Option<sys::CUmodule>>,
    kernels: HashMap<(usize, String), Kernel>,
    /// Module variables handed out by [`Device::module_global`], by (module, name) and by
    /// buffer id: copies reach them like buffers; they are never freed (their module owns them).
    variables: HashMap<(usize, String), Buffer>,
    variable_memory: HashMap<u64, Allocation>,
    /// A launch was recorded whose time has not been read yet.
    pending_timing: bool,
    /// A `synchronize` timed out and the work may still be running.
    hung: bool,
    /// A kernel faulted: the context is dead (CUDA errors of this kind are sticky).
    faulted: Option<String>,
    stats: KernelStats,
    jit_info_log: String,
}

// SAFETY: the raw handles are process-wide driver objects, valid on any thread once the context
// is current there, and every method that calls the driver first makes this backend's context
// current on the calling thread. `&mut self` on all of them rules out concurrent use.
unsafe impl Send for CudaBackend {}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("ordinal", &self.ordinal)
            .field("info", &self.info)
            .field("pci_bus_id", &self.pci_bus_id)
            .field("buffers", &self.buffers.len())
            .field("modules", &self.modules.iter().flatten().count())
            .field("hung", &self.hung)
            .field("faulted", &self.faulted)
            .finish_non_exhaustive()
    }
}

impl CudaBackend {
    /// Opens CUDA device `ordinal` with a context of its own. No driver (library missing, too old,
    /// a stub, or `cuInit` failing) is [`BackendError::NoDriver`]; no such device is
    /// [`BackendError::NoDevice`]. Never panics.
    pub fn open(ordinal: usize) -> Result<CudaBackend> {
        let driver = driver()?;
        init()?;
        let device = get_device(ordinal)?;
        let nvml = Nvml::probe();
        let driver_version = driver_string(nvml.as_ref())?;
        let (info, pci_bus_id, meter) = describe_device(device, &driver_version, nvml.as_ref())?;

        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `device` came from cuDeviceGet; flags 0 = automatic scheduling; the params
        // pointer of the v4 call may be null. The new context becomes current on this thread.
        let code = unsafe {
            if driver.ctx_create_v2 {
                sys::cuCtxCreate_v2(&mut ctx, 0, device)
            } else {
                sys::cuCtxCreate_v4(&mut ctx, std::ptr::null_mut(), 0, device)
            }
        };
        match code {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE => {
                return Err(BackendError::NoDevice(format!(
                    "device {ordinal} is busy or unavailable: {}",
                    describe(code)
                )))
            }
            _ => check(code, "cuCtxCreate")?,
        }
        // From here on, `Drop` cleans up whatever exists.
        let mut backend = CudaBackend {
            info,
            ordinal,
            pci_bus_id,
            meter,
            driver,
            ctx,
            stream: std::ptr::null_mut(),
            start: std::ptr::null_mut(),
            end: std::ptr::null_mut(),
            buffers: HashMap::new(),
            next_buffer: 1,
            modules: Vec::new(),
            kernels: HashMap::new(),
            variables: HashMap::new(),
            variable_memory: HashMap::new(),
            pending_timing: false,
            hung: false,
            faulted: None,
            stats: KernelStats::default(),
            jit_info_log: String::new(),
        };
        // SAFETY: the context is current; each call writes one handle.
        unsafe {
            check(
                sys::cuStreamCreate(
                    &mut backend.stream,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as c_uint,
                ),
                "cuStreamCreate",
            )?;
            check(
                sys::cuEventCreate(
                    &mut backend.start,
                    sys::CUevent_flags::CU_EVENT_DEFAULT as c_uint,
                ),
                "cuEventCreate",
            )?;
            check(
                sys::cuEventCreate(
                    &mut backend.end,
                    sys::CUevent_flags::CU_EVENT_DEFAULT as c_uint,
                ),
                "cuEventCreate",
            )?;
        }
        Ok(backend)
    }

    /// The CUDA ordinal this backend was opened with.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's PCI bus id, as CUDA writes it (`0000:3b:00.0`).
    pub fn pci_bus_id(&self) -> &str {
        &self.pci_bus_id
    }

    /// NVML power and energy readings of this device, if NVML is available and matched it.
    pub fn power_meter(&self) -> Option<&PowerMeter> {
        self.meter.as_ref()
    }

    /// The JIT's info log of the last successful [`Backend::load_module`] (register use etc.).
    pub fn jit_info_log(&self) -> &str {
        &self.jit_info_log
    }

    /// The handle of `module`, while it is loaded.
    fn loaded_module(&self, module: ModuleId) -> Result<sys::CUmodule> {
        self.modules
            .get(module.0)
            .copied()
            .flatten()
            .ok_or_else(|| no_loaded_module(module))
    }

    /// Unloads a module (its kernels can no longer be launched). Long campaigns that load a new
    /// PTX per iteration call this to keep device memory bounded.
    pub fn unload_module(&mut self, module: ModuleId) -> Result<()> {
        self.usable()?;
        let handle = self
            .modules
            .get_mut(module.0)
            .and_then(Option::take)
            .ok_or_else(|| no_loaded_module(module))?;
        self.kernels.retain(|(m, _), _| *m != module.0);
        let memory = &mut self.variable_memory;
        self.variables.retain(|(m, _), buffer| {
            let keep = *m != module.0;
            if !keep {
                memory.remove(&buffer.id);
            }
            keep
        });
        // SAFETY: the context is current (usable() bound it) and the handle was loaded into it
        // and is unloaded only once (it was taken out of the table).
        check(unsafe { sys::cuModuleUnload(handle) }, "cuModuleUnload")
    }

    /// Makes this backend's context current on the calling thread.
    fn bind(&self) -> Result<()> {
        // SAFETY: `ctx` is a live context created in `open` and destroyed only in `drop`.
        check(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Records a fault, which makes every later call fail the same way.
    fn note<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(BackendError::Fault(message)) = &result {
            self.faulted.get_or_insert_with(|| message.clone());
        }
        result
    }

    /// The error every call answers after a fault.
    fn dead(&self) -> Result<()> {
        match &self.faulted {
            Some(message) => Err(BackendError::Fault(format!(
                "{message} (an earlier kernel faulted; this context is unusable, drop the backend)"
            ))),
            None => Ok(()),
        }
    }

    /// Binds the context and refuses to go on after a fault or while a timed-out kernel still
    /// runs.
    fn usable(&mut self) -> Result<()> {
        self.dead()?;
        self.bind()?;
        if self.hung {
            // SAFETY: the stream is live; cuStreamQuery does not block.
            match unsafe { sys::cuStreamQuery(self.stream) } {
                CUresult::CUDA_SUCCESS => self.hung = false,
                CUresult::CUDA_ERROR_NOT_READY => {
                    return Err(BackendError::Cuda(
                        "a kernel that timed out is still running; this context is unusable, \
                         drop the backend"
                            .to_string(),
                    ))
                }
                code => {
                    self.hung = false;
                    let checked = check(code, "cuStreamQuery");
                    self.note(checked)?;
                }
            }
        }
        Ok(())
    }

    /// Polls the stream until it is idle. `None` waits as long as it takes.
    fn wait(&mut self, deadline: Option<Duration>) -> Result<()> {
        let begun = Instant::now();
        let mut nap = Duration::from_micros(20);
        loop {
            // SAFETY: the stream is live and the context current; cuStreamQuery does not block.
            match unsafe { sys::cuStreamQuery(self.stream) } {
                CUresult::CUDA_SUCCESS => return Ok(()),
                CUresult::CUDA_ERROR_NOT_READY => {}
                code => {
                    self.pending_timing = false;
                    let checked = check(code, "cuStreamQuery");
                    return self.note(checked);
                }
            }
            let waited = begun.elapsed();
            if let Some(deadline) = deadline {
                if waited >= deadline {
                    self.hung = true;
                    return Err(BackendError::Timeout(deadline));
                }
            }
            if waited < SPIN_PHASE {
                std::thread::yield_now();
            } else {
                let left = deadline.map_or(nap, |d| d.saturating_sub(waited));
                std::thread::sleep(nap.min(left));
                nap = (nap * 2).min(MAX_POLL_SLEEP);
            }
        }
    }

    /// The allocation or module variable `buffer` names.
    fn allocation(&self, buffer: &Buffer) -> Result<Allocation> {
        let known = self.buffers.get(&buffer.id);
        match known.or_else(|| self.variable_memory.get(&buffer.id)) {
            Some(a) if a.ptr == buffer.address => Ok(*a),
            _ => Err(BackendError::BadLaunch(format!(
                "buffer {} (address {:#x}) is not allocated on this backend",
                buffer.id, buffer.address
            ))),
        }
    }

    /// One copy between host and device: checks `len` bytes of `buffer` at `offset`, issues
    /// `call(device address, stream)` (nothing for an empty copy) and waits for it.
    fn copy(
        &mut self,
        buffer: &Buffer,
        offset: usize,
        len: usize,
        what: &str,
        call: impl FnOnce(sys::CUdeviceptr, sys::CUstream) -> CUresult,
    ) -> Result<()> {
        self.usable()?;
        let at = self.range(buffer, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        check(call(at, self.stream), what)?;
        self.wait(None)
    }

    fn range(&self, buffer: &Buffer, offset: usize, len: usize) -> Result<sys::CUdeviceptr> {
        let a = self.allocation(buffer)?;
        match offset.checked_add(len) {
            Some(end) if end <= a.bytes => Ok(a.ptr + offset as u64),
            _ => Err(BackendError::BadLaunch(format!(
                "{len} bytes at offset {offset} overrun buffer {} of {} bytes",
                buffer.id, a.bytes
            ))),
        }
    }

    fn kernel(&mut self, module: ModuleId, name: &str) -> Result<Kernel> {
        if let Some(k) = self.kernels.get(&(module.0, name.to_string())) {
            return Ok(k.clone());
        }
        let handle = self.loaded_module(module)?;
        let c_name = CString::new(name).map_err(|_| BackendError::NoKernel(name.to_string()))?;
        let mut function: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded in the current context; the name is NUL-terminated.
        let code = unsafe { sys::cuModuleGetFunction(&mut function, handle, c_name.as_ptr()) };
        match code {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NOT_FOUND => return Err(BackendError::NoKernel(name.to_string())),
            _ => check(code, "cuModuleGetFunction")?,
        }
        if self.driver.func_load {
            // SAFETY: `function` was just returned by the driver for a loaded module.
            check(unsafe { sys::cuFuncLoad(function) }, "cuFuncLoad")?;
        }
        let param_sizes = if self.driver.param_info {
            let mut sizes = Vec::new();
            loop {
                let (mut offset, mut size) = (0usize, 0usize);
                // SAFETY: `function` is valid; two size_t are written. An index past the last
                // parameter answers CUDA_ERROR_INVALID_VALUE, which ends the loop.
                let code = unsafe {
                    sys::cuFuncGetParamInfo(function, sizes.len(), &mut offset, &mut size)
                };
                match code {
                    CUresult::CUDA_SUCCESS => sizes.push(size),
                    CUresult::CUDA_ERROR_INVALID_VALUE => break,
                    _ => {
                        check(code, "cuFuncGetParamInfo")?;
                    }
                }
            }
            Some(sizes)
        } else {
            None
        };
        let kernel = Kernel {
            function,
            param_sizes,
        };
        self.kernels
            .insert((module.0, name.to_string()), kernel.clone());
        Ok(kernel)
    }

    fn elapsed(&self) -> Result<Duration> {
        let mut ms: f32 = 0.0;
        // SAFETY: both events were recorded on the stream, which is idle, so both completed.
        let code = unsafe {
            if self.driver.elapsed_v1 {
                sys::cuEventElapsedTime(&mut ms, self.start, self.end)
            } else {
                sys::cuEventElapsedTime_v2(&mut ms, self.start, self.end)
            }
        };
        check(code, "cuEventElapsedTime")?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

/// The words a launch parameter is copied into, so each parameter's bytes start 8-aligned.
fn param_words(bytes: &[u8]) -> Vec<u64> {
    let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_ne_bytes(b);
    }
    words
}

fn jit_log(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end])
        .trim_end()
        .to_string()
}

impl Backend for CudaBackend {
    fn power_meter(&self) -> Option<PowerMeter> {
        self.meter.clone()
    }
}

impl Device for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&mut self, bytes: usize) -> Result<Buffer> {
        self.usable()?;
        let mut ptr: sys::CUdeviceptr = 0;
        check(
            // SAFETY: the context is current; one device pointer is written. Zero-byte requests get
            // one byte so every buffer has a distinct address.
            unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.max(1)) },
            "cuMemAlloc",
        )?;
        // SAFETY: `ptr` points to `bytes.max(1)` freshly allocated bytes; the memset is ordered
        // on the stream before anything else that touches the buffer.
        let zeroed = check(
            unsafe { sys::cuMemsetD8Async(ptr, 0, bytes.max(1), self.stream) },
            "cuMemsetD8Async",
        );
        if let Err(e) = zeroed {
            // SAFETY: `ptr` was allocated above and is not in the table.
            unsafe { sys::cuMemFree_v2(ptr) };
            return Err(e);
        }
        let id = self.next_buffer;
        self.next_buffer += 1;
        self.buffers.insert(id, Allocation { ptr, bytes });
        Ok(Buffer {
            id,
            address: ptr,
            bytes,
        })
    }

    fn free(&mut self, buffer: Buffer) -> Result<()> {
        self.usable()?;
        if self.variable_memory.contains_key(&buffer.id) {
            return Err(BackendError::BadLaunch(format!(
                "buffer {} is a module variable, not an allocation",
                buffer.id
            )));
        }
        let a = self.allocation(&buffer)?;
        self.buffers.remove(&buffer.id);
        // SAFETY: `a.ptr` was allocated by this backend and is freed once (removed from the
        // table above). cuMemFree waits for work that may still use it.
        check(unsafe { sys::cuMemFree_v2(a.ptr) }, "cuMemFree")
    }

    fn copy_in(&mut self, buffer: Buffer, offset: usize, data: &[u8]) -> Result<()> {
        self.copy(
            &buffer,
            offset,
            data.len(),
            "cuMemcpyHtoDAsync",
            |dst, stream| {
                // SAFETY: `dst..dst+len` lies inside a live allocation (checked by `range`); `data` is
                // valid for `len` bytes and stays borrowed until the wait in `copy` finished the copy.
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        dst,
                        data.as_ptr() as *const c_void,
                        data.len(),
                        stream,
                    )
                }
            },
        )
    }

    fn copy_out(&mut self, buffer: Buffer, offset: usize, out: &mut [u8]) -> Result<()> {
        let len = out.len();
        self.copy(&buffer, offset, len, "cuMemcpyDtoHAsync", |src, stream| {
            // SAFETY: `src..src+len` lies inside a live allocation (checked by `range`); `out` is
            // valid for `len` bytes and stays borrowed until the wait in `copy` finished the copy.
            unsafe { sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr() as *mut c_void, src, len, stream) }
        })
    }

    fn memset(&mut self, buffer: Buffer, byte: u8) -> Result<()> {
        self.usable()?;
        let a = self.allocation(&buffer)?;
        // SAFETY: the whole range is one live allocation; the memset is ordered on the stream.
        check(
            unsafe { sys::cuMemsetD8Async(a.ptr, byte, a.bytes.max(1), self.stream) },
            "cuMemsetD8Async",
        )
    }

    fn load_module(&mut self, ptx: &str) -> Result<ModuleId> {
        self.usable()?;
        let image = CString::new(ptx).map_err(|e| BackendError::Jit {
            log: format!(
                "PTX text contains a NUL byte at offset {}",
                e.nul_position()
            ),
        })?;
        let mut error_log = vec![0u8; JIT_LOG_BYTES];
        let mut info_log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        ];
        // Sizes are passed as pointer-sized integers, as the driver API specifies.
        let mut values: [*mut c_void; 4] = [
            error_log.as_mut_ptr() as *mut c_void,
            error_log.len() as *mut c_void,
            info_log.as_mut_ptr() as *mut c_void,
            info_log.len() as *mut c_void,
        ];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: the image is NUL-terminated PTX; `options` and `values` both hold 4 entries;
        // the log buffers have the sizes given and outlive the call.
        let code = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr() as *const c_void,
                options.len() as c_uint,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        match code {
            CUresult::CUDA_SUCCESS => {
                self.jit_info_log = jit_log(&info_log);
                self.modules.push(Some(module));
                Ok(ModuleId(self.modules.len() - 1))
            }
            CUresult::CUDA_ERROR_OUT_OF_MEMORY
            | CUresult::CUDA_ERROR_INVALID_CONTEXT
            | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
            | CUresult::CUDA_ERROR_DEINITIALIZED => Err(BackendError::Cuda(format!(
                "cuModuleLoadDataEx: {}",
                describe(code)
            ))),
            _ if is_fault(code) => Err(BackendError::Fault(describe(code))),
            _ => {
                let log = jit_log(&error_log);
                let reason = describe(code);
                Err(BackendError::Jit {
                    log: if log.is_empty() {
                        reason
                    } else {
                        format!("{log}\n({reason})")
                    },
                })
            }
        }
    }

    fn module_global(&mut self, module: ModuleId, name: &str) -> Result<Buffer> {
        if let Some(buffer) = self.variables.get(&(module.0, name.to_string())) {
            return Ok(*buffer);
        }
        self.usable()?;
        let handle = self.loaded_module(module)?;
        let c_name = CString::new(name).map_err(|_| BackendError::NoVariable(name.to_string()))?;
        let (mut ptr, mut bytes): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: the module is loaded in the current context; the name is NUL-terminated; one
        // device pointer and one size_t are written.
        let code =
            unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, handle, c_name.as_ptr()) };
        match code {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NOT_FOUND => {
                return Err(BackendError::NoVariable(name.to_string()))
            }
            _ => check(code, "cuModuleGetGlobal")?,
        }
        let id = self.next_buffer;
        self.next_buffer += 1;
        self.variable_memory.insert(id, Allocation { ptr, bytes });
        let buffer = Buffer {
            id,
            address: ptr,
            bytes,
        };
        self.variables.insert((module.0, name.to_string()), buffer);
        Ok(buffer)
    }

    fn start(&mut self, launch: KernelLaunch<'_>) -> Result<()> {
        let KernelLaunch {
            module,
            kernel,
            config,
            args,
        } = launch;
        self.usable()?;
        let k = self.kernel(module, kernel)?;
        let (grid, block) = (config.grid, config.block);
        if [grid.0, grid.1, grid.2, block.0, block.1, block.2].contains(&0) {
            return Err(BackendError::BadLaunch(format!(
                "empty launch of '{kernel}': grid {grid:?}, block {block:?}"
            )));
        }
        let bytes: Vec<Vec<u8>> = args.iter().map(KernelArg::bytes).collect();
        // Drivers before CUDA 12.4 cannot tell the parameter list; a short list is then undefined
        // behaviour in the driver, so the caller must get it right.
        if let Some(sizes) = &k.param_sizes {
            if sizes.len() != args.len() {
                return Err(BackendError::BadLaunch(format!(
                    "kernel '{kernel}' takes {} parameters, {} given",
                    sizes.len(),
                    args.len()
                )));
            }
            for (i, (size, b)) in sizes.iter().zip(&bytes).enumerate() {
                if *size != b.len() {
                    return Err(BackendError::BadLaunch(format!(
                        "parameter {i} of '{kernel}' has {size} bytes, argument {:?} has {}",
                        args[i],
                        b.len()
                    )));
                }
            }
        }
        if config.shared_bytes > 48 * 1024 {
            check(
                // SAFETY: valid function handle; asks for more than the default dynamic shared
                // memory, which the launch then checks against the device limit.
                unsafe {
                    sys::cuFuncSetAttribute(
                        k.function,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        config.shared_bytes as c_int,
                    )
                },
                "cuFuncSetAttribute",
            )
            .map_err(|e| match e {
                BackendError::Cuda(m) => BackendError::BadLaunch(m),
                other => other,
            })?;
        }
        let mut words: Vec<Vec<u64>> = bytes.iter().map(|b| param_words(b)).collect();
        let mut params: Vec<*mut c_void> = words
            .iter_mut()
            .map(|w| w.as_mut_ptr() as *mut c_void)
            .collect();
        let params_ptr = if params.is_empty() {
            std::ptr::null_mut()
        } else {
            params.as_mut_ptr()
        };
        // SAFETY: the context is current and the stream and events are live. `params` holds one
        // pointer per kernel parameter (count and sizes checked above where the driver can tell),
        // each to at least as many bytes as the parameter has; the driver copies them before
        // the launch call returns, and `words`/`params` outlive the call.
        unsafe {
            check(sys::cuEventRecord(self.start, self.stream), "cuEventRecord")?;
            let code = if config.cooperative {
                // Every block resident at once, and a grid workspace for cooperative_groups'
                // grid syncs; the driver refuses a grid larger than the device holds.
                sys::cuLaunchCooperativeKernel(
                    k.function,
                    grid.0,
                    grid.1,
                    grid.2,
                    block.0,
                    block.1,
                    block.2,
                    config.shared_bytes,
                    self.stream,
                    params_ptr,
                )
            } else {
                sys::cuLaunchKernel(
                    k.function,
                    grid.0,
                    grid.1,
                    grid.2,
                    block.0,
                    block.1,
                    block.2,
                    config.shared_bytes,
                    self.stream,
                    params_ptr,
                    std::ptr::null_mut(),
                )
            };
            if code != CUresult::CUDA_SUCCESS {
                // The start event now belongs to a launch that never happened.
                self.pending_timing = false;
                let failed = Err(if is_fault(code) {
                    BackendError::Fault(describe(code))
                } else {
                    BackendError::BadLaunch(format!("'{kernel}': {}", describe(code)))
                });
                return self.note(failed);
            }
            check(sys::cuEventRecord(self.end, self.stream), "cuEventRecord")?;
        }
        self.pending_timing = true;
        Ok(())
    }

    /// Polls until all launched work is done. A kernel still running after `deadline` (counted
    /// from this call) is [`BackendError::Timeout`]; it keeps running and the backend must be
    /// dropped (see the module documentation).
    fn synchronize(&mut self, deadline: Duration) -> Result<()> {
        self.dead()?;
        self.bind()?;
        self.wait(Some(deadline))?;
        self.hung = false;
        if self.pending_timing {
            self.pending_timing = false;
            self.stats = KernelStats {
                time: self.elapsed()?,
                instructions: None,
                longest_thread: None,
            };
        }
        Ok(())
    }

    fn last_kernel_stats(&self) -> KernelStats {
        self.stats
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if self.ctx.is_null() || self.bind().is_err() {
            return;
        }
        if self.hung {
            // SAFETY: the stream is live; cuStreamQuery does not block.
            if unsafe { sys::cuStreamQuery(self.stream) } == CUresult::CUDA_ERROR_NOT_READY {
                // Freeing or destroying would wait for a kernel that may never end: leak the
                // context; the process exit (the supervisor) reclaims the GPU.
                return;
            }
        }
        // SAFETY: every handle below was created in this context, is destroyed exactly once, and
        // is not used afterwards. Errors are ignored: after a fault they report the fault again,
        // and cuCtxDestroy releases whatever remains.
        unsafe {
            for (_, a) in self.buffers.drain() {
                sys::cuMemFree_v2(a.ptr);
            }
            for module in self.modules.drain(..).flatten() {
                sys::cuModuleUnload(module);
            }
            for event in [self.start, self.end] {
                if !event.is_null() {
                    sys::cuEventDestroy_v2(event);
                }
            }
            if !self.stream.is_null() {
                sys::cuStreamDestroy_v2(self.stream);
            }
            sys::cuCtxDestroy_v2(self.ctx);
        }
        self.ctx = std::ptr::null_mut();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings() {
        assert_eq!(cuda_version_string(13000), "13.0");
        assert_eq!(cuda_version_string(12080), "12.8");
        assert_eq!(cuda_version_string(11040), "11.4");
    }

    #[test]
    fn parameters_are_packed_into_aligned_words() {
        assert_eq!(
            param_words(&[1, 0, 0, 0]),
            vec![u64::from_ne_bytes([1, 0, 0, 0, 0, 0, 0, 0])]
        );
        assert_eq!(param_words(&7u64.to_le_bytes()).len(), 1);
        assert_eq!(param_words(&[0u8; 12]).len(), 2);
        assert_eq!(param_words(&[]).len(), 1);
    }

    #[test]
    fn jit_logs_stop_at_the_terminator() {
        let mut buffer = b"ptxas error   : bad\n\0garbage".to_vec();
        buffer.extend([0u8; 8]);
        assert_eq!(jit_log(&buffer), "ptxas error   : bad");
        assert_eq!(jit_log(&[0u8; 4]), "");
    }

    #[test]
    fn kernel_errors_are_faults() {
        assert!(is_fault(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(is_fault(CUresult::CUDA_ERROR_LAUNCH_FAILED));
        assert!(!is_fault(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert!(!is_fault(CUresult::CUDA_ERROR_NOT_READY));
    }

    #[test]
    fn probing_without_a_driver_is_a_typed_error() {
        // Holds on any machine: either a driver answers, or the error is NoDriver.
        match probe_driver() {
            Ok(version) => assert!(version.contains("CUDA "), "{version}"),
            Err(e) => assert!(matches!(e, BackendError::NoDriver(_)), "{e}"),
        }
    }
}
