//! A stand-in `libcuda.so.1`: the CUDA driver API entry points gpuwmm's `cuda` backend calls,
//! with the driver's C ABI and documented result codes, running every kernel on gpuwmm's PTX
//! simulator (PTX memory model).
//!
//! Why this crate exists: no CI machine has a GPU, so without it the `cuda` backend (cudarc,
//! dynamic loading) never runs before a GPU is lent. Built as `libcuda.so.1`
//! (`scripts/standin.sh`) and put first on `LD_LIBRARY_PATH`, it is what cudarc loads, unchanged:
//! parameter packing, contexts, streams, events, error mapping and deadlines all run for real.
//! What it cannot prove: anything about the real driver, real timing, energy or weak behaviour.
//! Its one device is named `gpuwmm stand-in (simulator)`, so nobody takes its results for a GPU's.
//!
//! Semantics, and where they differ from a GPU:
//! - A launch runs to completion on the simulator inside `cuLaunchKernel` (the stream is in
//!   order, so nothing observable changes but launch latency). A kernel that exceeds the
//!   instruction budget (`GPUWMM_STANDIN_BUDGET`) or deadlocks is one that *never ends*: its
//!   stream answers `CUDA_ERROR_NOT_READY` from then on, and work queued behind it never runs,
//!   so only the caller's deadline ends the wait, as on a GPU.
//! - A fault (illegal or misaligned address, `trap`, ...) poisons the context with
//!   `CUDA_ERROR_ILLEGAL_ADDRESS`. Like an asynchronous error on a GPU, it is first reported by a
//!   call that waits for the device (stream query or synchronisation, event time, allocation,
//!   module load); from then on by every call but handle destruction and `cuCtxSetCurrent`.
//!   Once reported, it is the whole process's: every other context answers it, and no new
//!   context can be created, as on an H100 (driver 580); a new process starts healthy.
//! - Events hold simulated time: every completed kernel advances a process-wide clock by its
//!   busiest thread's instruction count, at a nominal 1 ns per instruction.
//! - `GPUWMM_STANDIN_INJECT=fault@N,hang@M` makes launch N fault and launch M never end
//!   (counted per process, or across processes in the file `GPUWMM_STANDIN_COUNTER`);
//!   `GPUWMM_STANDIN_SEED` seeds the simulator (context k of a process gets a seed derived from it
//!   and k). A malformed variable makes `cuInit` fail with `CUDA_ERROR_INVALID_VALUE` and a message
//!   on stderr naming it.
//! - Only PTX images load (`cuModuleLoadDataEx`); a PTX the simulator rejects is
//!   `CUDA_ERROR_INVALID_PTX` (or `CUDA_ERROR_NOT_SUPPORTED` for an instruction it does not
//!   implement), with the reason in the error log buffer.
//!
//! cudarc resolves each symbol on first use, so only the functions the backend calls are
//! exported. Every exported function is `unsafe extern "C"`: its safety contract is the CUDA
//! driver API's own (valid pointers of the documented sizes), stated once here.
#![allow(clippy::missing_safety_doc)]

mod errors;
mod inject;
mod state;

use cudarc::driver::sys::{CUdevice_attribute as Attr, CUjit_option as Jit, CUresult};
use gpuwmm_sim::device::{BackendError, Buffer, Device, LaunchConfig};
use gpuwmm_sim::SimBackend;
use state::{Object, Stamp};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The device name: says what it is, so no result is mistaken for a GPU's.
pub const DEVICE_NAME: &str = "gpuwmm stand-in (simulator)";
/// The PCI bus id of the one device (the NVML stand-in answers to the same).
pub const PCI_BUS_ID: &str = "0000:00:00.0";
/// The CUDA version the stand-in claims: the one cudarc's bindings were generated for.
pub const DRIVER_VERSION: c_int = 12080;

type Handle = *mut c_void;
type Res = Result<(), CUresult>;

static INITIALIZED: AtomicBool = AtomicBool::new(false);

fn done(result: Res) -> CUresult {
    match result {
        Ok(()) => CUresult::CUDA_SUCCESS,
        Err(code) => code,
    }
}

fn initialized() -> Res {
    if INITIALIZED.load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(CUresult::CUDA_ERROR_NOT_INITIALIZED)
    }
}

fn settings() -> Result<&'static state::Settings, CUresult> {
    state::settings()
        .as_ref()
        .map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)
}

fn current() -> Result<Arc<state::Context>, CUresult> {
    initialized()?;
    state::current().ok_or(CUresult::CUDA_ERROR_INVALID_CONTEXT)
}

fn object(handle: Handle) -> Result<Object, CUresult> {
    initialized()?;
    state::get(handle as usize).ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// Releases `handle` when it names an object of the kind `is_kind` accepts.
fn destroy(handle: Handle, is_kind: fn(&Object) -> bool) -> CUresult {
    match object(handle) {
        Ok(o) if is_kind(&o) => {
            state::remove(handle as usize);
            CUresult::CUDA_SUCCESS
        }
        Ok(_) => CUresult::CUDA_ERROR_INVALID_HANDLE,
        Err(e) => e,
    }
}

fn context(handle: Handle) -> Result<Arc<state::Context>, CUresult> {
    match object(handle) {
        Ok(Object::Context(c)) => Ok(c),
        Ok(_) | Err(CUresult::CUDA_ERROR_INVALID_HANDLE) => {
            Err(CUresult::CUDA_ERROR_INVALID_CONTEXT)
        }
        Err(e) => Err(e),
    }
}

/// A stream's context and its "never ends" flag; handle 0 is the current context's null stream.
fn stream(handle: Handle) -> Result<(Arc<state::Context>, Arc<AtomicBool>), CUresult> {
    if handle.is_null() {
        let ctx = current()?;
        let hung = ctx.null_stream_hung.clone();
        return Ok((ctx, hung));
    }
    match object(handle)? {
        Object::Stream(s) => Ok((s.ctx.clone(), s.hung.clone())),
        _ => Err(CUresult::CUDA_ERROR_INVALID_HANDLE),
    }
}

fn event(handle: Handle) -> Result<Arc<state::Event>, CUresult> {
    match object(handle)? {
        Object::Event(e) => Ok(e),
        _ => Err(CUresult::CUDA_ERROR_INVALID_HANDLE),
    }
}

fn module(handle: Handle) -> Result<Arc<state::Module>, CUresult> {
    match object(handle)? {
        Object::Module(m) => Ok(m),
        _ => Err(CUresult::CUDA_ERROR_INVALID_HANDLE),
    }
}

fn function(handle: Handle) -> Result<Arc<state::Function>, CUresult> {
    match object(handle)? {
        Object::Function(f) => Ok(f),
        _ => Err(CUresult::CUDA_ERROR_INVALID_HANDLE),
    }
}

/// Writes `value` through an out-pointer, refusing null.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> Res {
    non_null(out)?;
    // SAFETY: non-null, and valid for a write of T by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Copies `text` (NUL-terminated, cut to fit) into a caller's buffer of `len` chars.
///
/// # Safety
/// `out` is null or valid for `len` chars.
unsafe fn put_str(out: *mut c_char, len: c_int, text: &str) -> Res {
    if out.is_null() || len <= 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let n = text.len().min(len as usize - 1);
    // SAFETY: `out` holds `len` chars and n + 1 <= len are written.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr() as *const c_char, out, n);
        out.add(n).write(0);
    }
    Ok(())
}

// ---- initialisation, version, errors -------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    if flags != 0 {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    if let Err(message) = state::settings() {
        eprintln!("gpuwmm stand-in libcuda: {message}");
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    INITIALIZED.store(true, Ordering::SeqCst);
    CUresult::CUDA_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    // SAFETY: the caller passes a pointer to one int (or null, refused).
    done(unsafe { put(version, DRIVER_VERSION) })
}

/// Puts the static `text` about an error code in `out`; for an unknown code (no text) the
/// driver leaves null there and answers an invalid value.
///
/// # Safety
/// `out` is null (refused) or points to one pointer.
unsafe fn put_code_text(out: *mut *const c_char, text: Option<&'static CString>) -> CUresult {
    match text {
        // SAFETY: the caller's pointer; the string is static.
        Some(text) => done(unsafe { put(out, text.as_ptr()) }),
        None => {
            // SAFETY: as above.
            let _ = unsafe { put(out, std::ptr::null()) };
            CUresult::CUDA_ERROR_INVALID_VALUE
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(code: c_uint, out: *mut *const c_char) -> CUresult {
    // SAFETY: the caller passes a pointer to one pointer.
    unsafe { put_code_text(out, errors::name(code)) }
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(code: c_uint, out: *mut *const c_char) -> CUresult {
    // SAFETY: the caller passes a pointer to one pointer.
    unsafe { put_code_text(out, errors::description(code)) }
}

/// The driver's private function tables. NVRTC opens `libcuda.so.1` and asks for one (and
/// crashes if the symbol is missing); the stand-in has none, and answers as the driver does for
/// a table id it does not know.
#[no_mangle]
pub unsafe extern "C" fn cuGetExportTable(
    table: *mut *const c_void,
    _id: *const c_void,
) -> CUresult {
    // SAFETY: the caller passes a pointer to one pointer (or null, refused).
    let _ = unsafe { put(table, std::ptr::null()) };
    CUresult::CUDA_ERROR_INVALID_VALUE
}

/// Simulated nanoseconds so far (all contexts of the process). Not a CUDA function: the NVML
/// stand-in reads it to advance its energy counter.
#[no_mangle]
pub extern "C" fn gpuwmmStandinSimulatedNanoseconds() -> u64 {
    state::now_ns()
}

// ---- devices -------------------------------------------------------------------------------

fn valid_device(device: c_int) -> Res {
    initialized()?;
    if device == 0 {
        Ok(())
    } else {
        Err(CUresult::CUDA_ERROR_INVALID_DEVICE)
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    // SAFETY: the caller passes a pointer to one int.
    done(initialized().and_then(|()| unsafe { put(count, 1) }))
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CUresult {
    // SAFETY: the caller passes a pointer to one CUdevice (an int).
    done(valid_device(ordinal).and_then(|()| unsafe { put(device, ordinal) }))
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, device: c_int) -> CUresult {
    // SAFETY: the caller passes a buffer of `len` chars.
    done(valid_device(device).and_then(|()| unsafe { put_str(name, len, DEVICE_NAME) }))
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(
    id: *mut c_char,
    len: c_int,
    device: c_int,
) -> CUresult {
    // SAFETY: the caller passes a buffer of `len` chars.
    done(valid_device(device).and_then(|()| unsafe { put_str(id, len, PCI_BUS_ID) }))
}

/// The attributes the stand-in answers: the simulator's own figures (16 SMs of 2048 threads, a
/// 64 KiB "L2" that sizes the cache-stress scratchpad, compute capability 7.0).
fn attribute_value(attribute: c_int) -> Option<c_int> {
    let known = [
        (
            Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            gpuwmm_sim::SM_COUNT as c_int,
        ),
        (
            Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            2048,
        ),
        (Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024),
        (Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32),
        (Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 64 << 10),
        (Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 7),
        (Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0),
        (
            Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
            48 << 10,
        ),
        (
            Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            96 << 10,
        ),
    ];
    known
        .iter()
        .find(|(a, _)| *a as c_int == attribute)
        .map(|&(_, v)| v)
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    value: *mut c_int,
    attribute: c_int,
    device: c_int,
) -> CUresult {
    done(valid_device(device).and_then(|()| {
        let v = attribute_value(attribute).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: the caller passes a pointer to one int.
        unsafe { put(value, v) }
    }))
}

// ---- contexts ------------------------------------------------------------------------------

fn create_context(out: *mut Handle, device: c_int) -> Res {
    valid_device(device)?;
    state::process_fault()?;
    let ctx = state::new_context(settings()?);
    let handle = state::insert(Object::Context(ctx.clone()));
    // SAFETY: the caller passes a pointer to one CUcontext.
    unsafe { put(out, handle as Handle) }?;
    state::set_current(Some(ctx));
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v2(
    ctx: *mut Handle,
    _flags: c_uint,
    device: c_int,
) -> CUresult {
    done(create_context(ctx, device))
}

/// The CUDA 12.5+ form; execution-affinity and CIG parameters are not supported.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v4(
    ctx: *mut Handle,
    params: *mut c_void,
    _flags: c_uint,
    device: c_int,
) -> CUresult {
    if !params.is_null() {
        return CUresult::CUDA_ERROR_NOT_SUPPORTED;
    }
    done(create_context(ctx, device))
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: Handle) -> CUresult {
    if ctx.is_null() {
        state::set_current(None);
        return done(initialized());
    }
    done(context(ctx).map(|c| state::set_current(Some(c))))
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    done(current().and_then(|c| {
        c.observe()?;
        if c.null_stream_hung.load(Ordering::SeqCst) {
            // A real cuCtxSynchronize would wait forever; the stand-in says so instead.
            return Err(CUresult::CUDA_ERROR_NOT_READY);
        }
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: Handle) -> CUresult {
    done(context(ctx).map(|c| {
        state::remove_owned_by(&c);
        state::forget_current(&c);
    }))
}

// ---- streams and events --------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(out: *mut Handle, _flags: c_uint) -> CUresult {
    done(current().and_then(|ctx| {
        ctx.enqueue_check()?;
        let s = state::Stream {
            ctx,
            hung: Arc::new(AtomicBool::new(false)),
        };
        let handle = state::insert(Object::Stream(Arc::new(s)));
        // SAFETY: the caller passes a pointer to one CUstream.
        unsafe { put(out, handle as Handle) }
    }))
}

/// Idle, busy forever, or the context's fault.
fn query(handle: Handle) -> Res {
    let (ctx, hung) = stream(handle)?;
    ctx.observe()?;
    if hung.load(Ordering::SeqCst) {
        Err(CUresult::CUDA_ERROR_NOT_READY)
    } else {
        Ok(())
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery(stream: Handle) -> CUresult {
    done(query(stream))
}

/// Returns at once: work is done by the time it is enqueued, except behind a kernel that never
/// ends, which a real synchronise would wait for forever (the stand-in answers NOT_READY).
#[no_mangle]
pub unsafe extern "C" fn cuStreamSynchronize(stream: Handle) -> CUresult {
    done(query(stream))
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(stream: Handle) -> CUresult {
    destroy(stream, |o| matches!(o, Object::Stream(_)))
}

#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(out: *mut Handle, _flags: c_uint) -> CUresult {
    done(current().and_then(|ctx| {
        ctx.enqueue_check()?;
        let e = state::Event {
            ctx,
            stamp: std::sync::Mutex::new(Stamp::Unrecorded),
        };
        let handle = state::insert(Object::Event(Arc::new(e)));
        // SAFETY: the caller passes a pointer to one CUevent.
        unsafe { put(out, handle as Handle) }
    }))
}

#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(event: Handle, stream: Handle) -> CUresult {
    done((|| {
        let e = self::event(event)?;
        let (ctx, hung) = self::stream(stream)?;
        ctx.enqueue_check()?;
        let stamp = if hung.load(Ordering::SeqCst) || ctx.is_dead() {
            Stamp::Never
        } else {
            Stamp::At(state::now_ns())
        };
        *state::lock(&e.stamp) = stamp;
        Ok(())
    })())
}

fn stamp_of(e: &state::Event) -> Result<u64, CUresult> {
    e.ctx.observe()?;
    match *state::lock(&e.stamp) {
        Stamp::At(ns) => Ok(ns),
        Stamp::Never => Err(CUresult::CUDA_ERROR_NOT_READY),
        Stamp::Unrecorded => Err(CUresult::CUDA_ERROR_INVALID_HANDLE),
    }
}

fn elapsed(ms: *mut f32, start: Handle, end: Handle) -> Res {
    let (start, end) = (event(start)?, event(end)?);
    let (a, b) = (stamp_of(&start)?, stamp_of(&end)?);
    let millis = (b as f64 - a as f64) / 1e6;
    // SAFETY: the caller passes a pointer to one float.
    unsafe { put(ms, millis as f32) }
}

#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime(ms: *mut f32, start: Handle, end: Handle) -> CUresult {
    done(elapsed(ms, start, end))
}

#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime_v2(
    ms: *mut f32,
    start: Handle,
    end: Handle,
) -> CUresult {
    done(elapsed(ms, start, end))
}

#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(event: Handle) -> CUresult {
    done(self::event(event).and_then(|e| match stamp_of(&e) {
        Err(CUresult::CUDA_ERROR_INVALID_HANDLE) => Ok(()),
        other => other.map(|_| ()),
    }))
}

#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(event: Handle) -> CUresult {
    destroy(event, |o| matches!(o, Object::Event(_)))
}

// ---- memory --------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(out: *mut u64, bytes: usize) -> CUresult {
    done(current().and_then(|ctx| {
        ctx.observe()?;
        if bytes == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let mut device = state::lock(&ctx.device);
        let buffer = device
            .sim
            .alloc(bytes)
            .map_err(|_| CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
        device.buffers.insert(buffer.address, buffer);
        // SAFETY: the caller passes a pointer to one CUdeviceptr.
        unsafe { put(out, buffer.address) }
    }))
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(address: u64) -> CUresult {
    done(current().and_then(|ctx| {
        ctx.observe()?;
        let mut device = state::lock(&ctx.device);
        let buffer = device
            .buffers
            .remove(&address)
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        device
            .sim
            .free(buffer)
            .map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)
    }))
}

/// Runs `work` on the device of `stream`'s context unless the stream or the context can no longer
/// run anything (then the work is queued forever, i.e. dropped).
fn on_stream(stream: Handle, work: impl FnOnce(&mut state::Device) -> Res) -> Res {
    let (ctx, hung) = self::stream(stream)?;
    ctx.enqueue_check()?;
    if hung.load(Ordering::SeqCst) || ctx.is_dead() {
        return Ok(());
    }
    let mut device = state::lock(&ctx.device);
    work(&mut device)
}

/// Runs `copy` on `stream`'s device with the buffer and offset of `[address, address + bytes)`;
/// a range outside every buffer is an invalid value.
fn on_range(
    stream: Handle,
    address: u64,
    bytes: usize,
    copy: impl FnOnce(&mut SimBackend, Buffer, usize) -> Res,
) -> CUresult {
    done(on_stream(stream, |d| {
        let (buffer, offset) = d
            .locate(address, bytes)
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        copy(&mut d.sim, buffer, offset)
    }))
}

/// A null pointer where the call needs host memory or a name: an invalid value.
fn non_null<T>(pointer: *const T) -> Res {
    if pointer.is_null() {
        Err(CUresult::CUDA_ERROR_INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// A copy the simulator refuses: an invalid value.
fn invalid(_: BackendError) -> CUresult {
    CUresult::CUDA_ERROR_INVALID_VALUE
}

#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8Async(
    address: u64,
    byte: u8,
    count: usize,
    stream: Handle,
) -> CUresult {
    on_range(stream, address, count, |sim, buffer, offset| {
        let fill = vec![byte; count];
        sim.copy_in(buffer, offset, &fill).map_err(invalid)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: u64,
    src: *const c_void,
    bytes: usize,
    stream: Handle,
) -> CUresult {
    on_range(stream, dst, bytes, |sim, buffer, offset| {
        non_null(src)?;
        // SAFETY: the caller passes host memory valid for `bytes` bytes.
        let data = unsafe { std::slice::from_raw_parts(src as *const u8, bytes) };
        sim.copy_in(buffer, offset, data).map_err(invalid)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: u64,
    bytes: usize,
    stream: Handle,
) -> CUresult {
    on_range(stream, src, bytes, |sim, buffer, offset| {
        non_null(dst)?;
        // SAFETY: the caller passes host memory valid for writes of `bytes` bytes, not aliased
        // while the call runs.
        let out = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, bytes) };
        sim.copy_out(buffer, offset, out).map_err(invalid)
    })
}

// ---- modules and functions -----------------------------------------------------------------

/// The log buffers `cuModuleLoadDataEx` was given: (buffer, size slot) for errors and for info.
struct JitLogs {
    error: Option<(*mut c_char, *mut *mut c_void)>,
    info: Option<(*mut c_char, *mut *mut c_void)>,
}

/// Reads the JIT options. Unknown option numbers are `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `options` and `values` are null or hold `count` entries each.
unsafe fn jit_logs(
    count: c_uint,
    options: *const c_uint,
    values: *mut *mut c_void,
) -> Result<JitLogs, CUresult> {
    let mut logs = JitLogs {
        error: None,
        info: None,
    };
    if count == 0 {
        return Ok(logs);
    }
    if options.is_null() || values.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let (mut error_buf, mut error_size, mut info_buf, mut info_size) = (None, None, None, None);
    for i in 0..count as usize {
        // SAFETY: both arrays hold `count` entries.
        let (option, slot) = unsafe { (*options.add(i), values.add(i)) };
        // SAFETY: `slot` points into the values array.
        let value = unsafe { *slot };
        if option == Jit::CU_JIT_ERROR_LOG_BUFFER as c_uint {
            error_buf = Some(value as *mut c_char);
        } else if option == Jit::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES as c_uint {
            error_size = Some(slot);
        } else if option == Jit::CU_JIT_INFO_LOG_BUFFER as c_uint {
            info_buf = Some(value as *mut c_char);
        } else if option == Jit::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES as c_uint {
            info_size = Some(slot);
        } else if option >= Jit::CU_JIT_NUM_OPTIONS as c_uint {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
    }
    logs.error = error_buf.zip(error_size);
    logs.info = info_buf.zip(info_size);
    Ok(logs)
}

/// Writes a log into a JIT log buffer, cut to its size, and the bytes written (with the NUL)
/// back into its size slot, as the driver does.
///
/// # Safety
/// The buffer holds as many bytes as its size slot says.
unsafe fn write_log(log: Option<(*mut c_char, *mut *mut c_void)>, text: &str) {
    let Some((buffer, size_slot)) = log else {
        return;
    };
    // SAFETY: the slot is an entry of the caller's values array.
    let size = unsafe { *size_slot } as usize;
    if buffer.is_null() || size == 0 {
        return;
    }
    let n = text.len().min(size - 1);
    // SAFETY: the buffer holds `size` bytes; n + 1 <= size are written; the slot is writable.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr() as *const c_char, buffer, n);
        buffer.add(n).write(0);
        *size_slot = (n + 1) as *mut c_void;
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    out: *mut Handle,
    image: *const c_void,
    count: c_uint,
    options: *const c_uint,
    values: *mut *mut c_void,
) -> CUresult {
    done((|| {
        let ctx = current()?;
        ctx.observe()?;
        // SAFETY: the caller passes `count` options and values.
        let logs = unsafe { jit_logs(count, options, values) }?;
        non_null(image)?;
        // SAFETY: a PTX image is a NUL-terminated string; a cubin (ELF) has a NUL within its
        // first eight bytes, so reading up to the first NUL stays inside either.
        let text = unsafe { CStr::from_ptr(image as *const c_char) }.to_bytes();
        if text.starts_with(b"\x7fELF") {
            // SAFETY: the log buffers have the sizes given.
            unsafe {
                write_log(
                    logs.error,
                    "gpuwmm stand-in: only PTX images load (the simulator cannot run cubins)",
                )
            };
            return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
        }
        let ptx = String::from_utf8_lossy(text);
        let loaded = state::lock(&ctx.device).sim.load_module(&ptx);
        match loaded {
            Ok(id) => {
                // SAFETY: the log buffers have the sizes given.
                unsafe {
                    write_log(
                        logs.info,
                        "gpuwmm stand-in: PTX loaded by the simulator (no JIT, no SASS)",
                    )
                };
                let handle = state::insert(Object::Module(Arc::new(state::Module { ctx, id })));
                // SAFETY: the caller passes a pointer to one CUmodule.
                unsafe { put(out, handle as Handle) }
            }
            Err(e) => {
                let code = match e {
                    BackendError::Unsupported { .. } => CUresult::CUDA_ERROR_NOT_SUPPORTED,
                    _ => CUresult::CUDA_ERROR_INVALID_PTX,
                };
                // SAFETY: the log buffers have the sizes given.
                unsafe { write_log(logs.error, &format!("gpuwmm stand-in: error: {e}")) };
                Err(code)
            }
        }
    })())
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleUnload(module: Handle) -> CUresult {
    // The simulator keeps a module's code until its context goes; only the handle is released.
    done(self::module(module).map(|_| {
        state::remove(module as usize);
    }))
}

/// The module `module` of a context with no sticky fault, and the symbol `name` to look up in
/// it (null is an invalid value).
///
/// # Safety
/// `name` is null or NUL-terminated.
unsafe fn module_symbol(
    module: Handle,
    name: *const c_char,
) -> Result<(Arc<state::Module>, String), CUresult> {
    let m = self::module(module)?;
    m.ctx.observe()?;
    non_null(name)?;
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    Ok((m, name))
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(
    out: *mut Handle,
    module: Handle,
    name: *const c_char,
) -> CUresult {
    done((|| {
        // SAFETY: the caller passes a NUL-terminated name.
        let (m, name) = unsafe { module_symbol(module, name) }?;
        let params = state::lock(&m.ctx.device)
            .sim
            .kernel_params(m.id, &name)
            .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
        let f = state::Function {
            ctx: m.ctx.clone(),
            module: m.id,
            name,
            params,
        };
        let handle = state::insert(Object::Function(Arc::new(f)));
        // SAFETY: the caller passes a pointer to one CUfunction.
        unsafe { put(out, handle as Handle) }
    })())
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleGetGlobal_v2(
    address: *mut u64,
    bytes: *mut usize,
    module: Handle,
    name: *const c_char,
) -> CUresult {
    done((|| {
        // SAFETY: the caller passes a NUL-terminated name.
        let (m, name) = unsafe { module_symbol(module, name) }?;
        let mut device = state::lock(&m.ctx.device);
        let variable = device
            .sim
            .module_global(m.id, &name)
            .map_err(|_| CUresult::CUDA_ERROR_NOT_FOUND)?;
        device.variables.insert(variable.address, variable);
        // Either output may be null: the driver then leaves it out.
        if !address.is_null() {
            // SAFETY: non-null, a pointer to one CUdeviceptr by the caller's contract.
            unsafe { put(address, variable.address) }?;
        }
        if !bytes.is_null() {
            // SAFETY: non-null, a pointer to one size_t by the caller's contract.
            unsafe { put(bytes, variable.bytes) }?;
        }
        Ok(())
    })())
}

#[no_mangle]
pub unsafe extern "C" fn cuFuncLoad(function: Handle) -> CUresult {
    done(self::function(function).map(|_| ()))
}

#[no_mangle]
pub unsafe extern "C" fn cuFuncGetParamInfo(
    function: Handle,
    index: usize,
    offset: *mut usize,
    size: *mut usize,
) -> CUresult {
    done(self::function(function).and_then(|f| {
        let &(o, s) = f
            .params
            .get(index)
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: the caller passes pointers to one size_t each.
        unsafe {
            put(offset, o as usize)?;
            put(size, s as usize)
        }
    }))
}

#[no_mangle]
pub unsafe extern "C" fn cuFuncSetAttribute(
    function: Handle,
    attribute: c_int,
    value: c_int,
) -> CUresult {
    done(self::function(function).and_then(|_| {
        use cudarc::driver::sys::CUfunction_attribute as F;
        if attribute == F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as c_int
            && !(0..=96 << 10).contains(&value)
        {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        Ok(())
    }))
}

// ---- launches ------------------------------------------------------------------------------

/// Reads each parameter's bytes through the `kernelParams` array.
///
/// # Safety
/// `params` is null or holds one pointer per parameter, each to at least its size in bytes.
unsafe fn parameter_bytes(
    f: &state::Function,
    params: *mut *mut c_void,
) -> Result<Vec<Vec<u8>>, CUresult> {
    if f.params.is_empty() {
        return Ok(Vec::new());
    }
    if params.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let mut bytes = Vec::with_capacity(f.params.len());
    for (i, &(_, size)) in f.params.iter().enumerate() {
        // SAFETY: the array holds one pointer per parameter.
        let p = unsafe { *params.add(i) } as *const u8;
        if p.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: each pointer addresses at least the parameter's size in bytes.
        bytes.push(unsafe { std::slice::from_raw_parts(p, size as usize) }.to_vec());
    }
    Ok(bytes)
}

/// Runs one launch on the simulator and records what it did to the clock, the stream and the
/// context.
fn simulate(
    f: &state::Function,
    config: &LaunchConfig,
    args: &[Vec<u8>],
    hung: &AtomicBool,
) -> Res {
    let settings = settings()?;
    if !settings.plan.is_empty() {
        let n = inject::next_launch_number(settings.counter_file.as_deref());
        match settings.plan.decide(n) {
            inject::Planned::Fault => {
                f.ctx.poison(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
                return Ok(());
            }
            inject::Planned::Hang => {
                hung.store(true, Ordering::SeqCst);
                return Ok(());
            }
            inject::Planned::Run => {}
        }
    }
    let mut device = state::lock(&f.ctx.device);
    let slices: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    device
        .sim
        .launch_raw(f.module, &f.name, config, &slices)
        .map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let finished = device.sim.synchronize(Duration::MAX);
    print_device_output(&device.sim.take_device_output());
    match finished {
        Ok(()) => {
            let longest = device.sim.last_kernel_stats().longest_thread.unwrap_or(0);
            state::advance_ns(longest.max(1) * state::NS_PER_INSTRUCTION);
        }
        Err(e) if e.is_timeout() => hung.store(true, Ordering::SeqCst),
        Err(BackendError::Fault(_)) => f.ctx.poison(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        Err(_) => f.ctx.poison(CUresult::CUDA_ERROR_LAUNCH_FAILED),
    }
    Ok(())
}

/// Writes a launch's `printf` output to standard output, as a GPU's driver does when it
/// flushes the printf FIFO at a synchronisation (the stand-in's launches are synchronous), with
/// whatever line ends the kernels wrote.
fn print_device_output(output: &[u8]) {
    if output.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(output).and_then(|()| stdout.flush());
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuLaunchKernel(
    function: Handle,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_bytes: c_uint,
    stream: Handle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    let config = LaunchConfig {
        grid: (grid_x, grid_y, grid_z),
        block: (block_x, block_y, block_z),
        shared_bytes,
        cooperative: false,
    };
    // SAFETY: the caller's parameters, as the driver API requires.
    unsafe { launch(function, config, stream, (params, extra)) }
}

/// A cooperative launch: the simulator gives the kernel a grid workspace, and every block of
/// its grid runs at once (it interleaves them all), so `cooperative_groups` grid syncs work.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuLaunchCooperativeKernel(
    function: Handle,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_bytes: c_uint,
    stream: Handle,
    params: *mut *mut c_void,
) -> CUresult {
    let config = LaunchConfig {
        grid: (grid_x, grid_y, grid_z),
        block: (block_x, block_y, block_z),
        shared_bytes,
        cooperative: true,
    };
    // SAFETY: the caller's parameters, as the driver API requires.
    unsafe { launch(function, config, stream, (params, std::ptr::null_mut())) }
}

/// Checks and runs a launch of `function` on `stream` with `cuLaunchKernel`'s `kernelParams`
/// and `extra` (which the stand-in does not take).
///
/// # Safety
/// `params` holds one pointer per kernel parameter, each to that parameter's bytes.
unsafe fn launch(
    function: Handle,
    config: LaunchConfig,
    stream: Handle,
    (params, extra): (*mut *mut c_void, *mut *mut c_void),
) -> CUresult {
    done((|| {
        let f = self::function(function)?;
        let (ctx, hung) = self::stream(stream)?;
        if !Arc::ptr_eq(&ctx, &f.ctx) {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        }
        ctx.enqueue_check()?;
        if !extra.is_null() {
            return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
        }
        let ((grid_x, grid_y, grid_z), (block_x, block_y, block_z)) = (config.grid, config.block);
        let dims = [grid_x, grid_y, grid_z, block_x, block_y, block_z];
        let threads = u64::from(block_x) * u64::from(block_y) * u64::from(block_z);
        if dims.contains(&0) || threads > 1024 || config.shared_bytes > 96 << 10 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: the caller passes one pointer per parameter, as the driver API requires.
        let args = unsafe { parameter_bytes(&f, params) }?;
        if hung.load(Ordering::SeqCst) || ctx.is_dead() {
            // Queued behind a kernel that never ends, or in a dead context: it never runs.
            return Ok(());
        }
        simulate(&f, &config, &args, &hung)
    })())
}

#[cfg(test)]
mod tests {
    //! The entry points called directly, as C would: the paths the backend does not take (the
    //! `_v4` context, null streams) and the ordering of sticky faults.
    use super::*;

    const STORE: &str = include_str!("../../../tests/fixtures/ptx/small/store_to.ptx");

    /// Launches `store_to(address, value)` on the null stream.
    fn store(f: Handle, mut address: u64, mut value: u32) -> CUresult {
        let mut params = [
            &mut address as *mut u64 as *mut c_void,
            &mut value as *mut u32 as *mut c_void,
        ];
        // SAFETY: two parameters, each pointing to a live local of its size.
        unsafe {
            cuLaunchKernel(
                f,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    }

    #[test]
    fn a_v4_context_runs_a_kernel_and_a_fault_is_sticky_once_observed() {
        use CUresult::*;
        // SAFETY: every pointer passed below points to a live local of the documented type.
        unsafe {
            assert_eq!(cuInit(0), CUDA_SUCCESS);
            let mut ctx: Handle = std::ptr::null_mut();
            let mut bogus = 0u8;
            assert_eq!(
                cuCtxCreate_v4(&mut ctx, &mut bogus as *mut u8 as *mut c_void, 0, 0),
                CUDA_ERROR_NOT_SUPPORTED
            );
            assert_eq!(
                cuCtxCreate_v4(&mut ctx, std::ptr::null_mut(), 0, 0),
                CUDA_SUCCESS
            );
            let image = std::ffi::CString::new(STORE).unwrap();
            let mut module: Handle = std::ptr::null_mut();
            let code = cuModuleLoadDataEx(
                &mut module,
                image.as_ptr() as *const c_void,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            );
            assert_eq!(code, CUDA_SUCCESS);
            let mut f: Handle = std::ptr::null_mut();
            assert_eq!(
                cuModuleGetFunction(&mut f, module, c"store_to".as_ptr()),
                CUDA_SUCCESS
            );
            let mut missing: Handle = std::ptr::null_mut();
            assert_eq!(
                cuModuleGetFunction(&mut missing, module, c"nope".as_ptr()),
                CUDA_ERROR_NOT_FOUND
            );
            let mut data = 0u64;
            assert_eq!(cuMemAlloc_v2(&mut data, 8), CUDA_SUCCESS);
            assert_eq!(store(f, data + 4, 7), CUDA_SUCCESS);
            let mut out = [0u8; 8];
            let code = cuMemcpyDtoHAsync_v2(
                out.as_mut_ptr() as *mut c_void,
                data,
                8,
                std::ptr::null_mut(),
            );
            assert_eq!(code, CUDA_SUCCESS);
            assert_eq!(out, [0, 0, 0, 0, 7, 0, 0, 0]);
            // Out of bounds: the launch itself succeeds (errors are asynchronous) ...
            assert_eq!(store(f, data + 64, 1), CUDA_SUCCESS);
            // ... work may still be enqueued until a waiting call has seen the fault ...
            let mut event: Handle = std::ptr::null_mut();
            assert_eq!(cuEventCreate(&mut event, 0), CUDA_SUCCESS);
            assert_eq!(cuEventRecord(event, std::ptr::null_mut()), CUDA_SUCCESS);
            assert_eq!(
                cuStreamQuery(std::ptr::null_mut()),
                CUDA_ERROR_ILLEGAL_ADDRESS
            );
            // ... and from then on every call fails the same way.
            assert_eq!(store(f, data, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
            assert_eq!(cuMemAlloc_v2(&mut data, 8), CUDA_ERROR_ILLEGAL_ADDRESS);
            assert_eq!(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
            assert_eq!(cuMemAlloc_v2(&mut data, 8), CUDA_ERROR_INVALID_CONTEXT);
        }
    }
}
