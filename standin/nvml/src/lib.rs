//! A stand-in `libnvidia-ml.so.1`: the NVML entry points gpuwmm's meter (`backend::nvml`, through
//! nvml-wrapper) calls, for the one device of the stand-in CUDA driver.
//!
//! Why this crate exists: the energy and power paths of `gpuwmm devices` and `gpuwmm cost` must
//! run in CI, where there is no NVIDIA driver. The device is named like the CUDA stand-in's
//! (`gpuwmm stand-in (simulator)`) and sits at the same PCI bus id, so the backend matches the
//! two. Its power is a constant nominal [`NOMINAL_POWER_MW`]. Its total-energy counter behaves like
//! a real one in the ways `gpuwmm cost` depends on: it grows at [`IDLE_POWER_MW`] with wall-clock
//! time, in steps every [`COUNTER_STEP_MS`] (as NVML's does), plus the difference to the nominal
//! power over the *simulated* time of the CUDA stand-in's kernels (read from `libcuda.so.1`'s
//! `gpuwmmStandinSimulatedNanoseconds`; 0 where that library is not the stand-in). No figure it
//! gives is a measurement of anything.
//!
//! Every exported function is `unsafe extern "C"`; its safety contract is NVML's own (valid
//! pointers of the documented sizes), stated once here.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_uint, c_ulonglong, c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The device name, the same as the CUDA stand-in's.
pub const DEVICE_NAME: &str = "gpuwmm stand-in (simulator)";
/// The driver version NVML reports: says it is the stand-in.
pub const DRIVER_VERSION: &str = "gpuwmm-standin-0.1";
/// Constant board power the stand-in claims: 100 W (a convention, not a measurement).
pub const NOMINAL_POWER_MW: u32 = 100_000;
/// The power the energy counter grows at while no kernel runs: 50 W (a convention).
pub const IDLE_POWER_MW: u64 = 50_000;
/// The energy counter's wall-clock part advances in steps this long, like NVML's (about 100 ms).
pub const COUNTER_STEP_MS: u64 = 100;
/// The PCI bus id of the CUDA stand-in's device.
pub const PCI_BUS_ID: &str = "0000:00:00.0";

type NvmlReturn = c_uint;
const SUCCESS: NvmlReturn = 0;
const UNINITIALIZED: NvmlReturn = 1;
const INVALID_ARGUMENT: NvmlReturn = 2;
const NOT_FOUND: NvmlReturn = 6;
const INSUFFICIENT_SIZE: NvmlReturn = 7;

/// `nvmlInit` calls not yet matched by `nvmlShutdown` (NVML counts them).
static INIT_COUNT: AtomicU32 = AtomicU32::new(0);

/// The one device's handle: the address of a private static (never dereferenced by callers).
static DEVICE: u8 = 0;

fn device_handle() -> *mut c_void {
    &DEVICE as *const u8 as *mut c_void
}

fn ready() -> Result<(), NvmlReturn> {
    if INIT_COUNT.load(Ordering::SeqCst) > 0 {
        Ok(())
    } else {
        Err(UNINITIALIZED)
    }
}

fn valid(device: *mut c_void) -> Result<(), NvmlReturn> {
    ready()?;
    if device == device_handle() {
        Ok(())
    } else {
        Err(INVALID_ARGUMENT)
    }
}

fn done(result: Result<(), NvmlReturn>) -> NvmlReturn {
    result.err().unwrap_or(SUCCESS)
}

/// # Safety
/// `out` is null or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> Result<(), NvmlReturn> {
    if out.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null and writable by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Copies `text` and its NUL into a buffer of `len` chars; too small is INSUFFICIENT_SIZE.
///
/// # Safety
/// `out` is null or valid for `len` chars.
unsafe fn put_str(out: *mut c_char, len: c_uint, text: &str) -> Result<(), NvmlReturn> {
    if out.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    if text.len() + 1 > len as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: the buffer holds `len` >= text.len() + 1 chars.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr() as *const c_char, out, text.len());
        out.add(text.len()).write(0);
    }
    Ok(())
}

/// `domain:bus:device.function` in either of the forms NVML accepts (`0000:00:00.0`,
/// `00000000:00:00.0`), as numbers.
pub fn parse_bus_id(text: &str) -> Option<(u32, u32, u32, u32)> {
    let (domain, rest) = text.trim().split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    Some((hex(domain)?, hex(bus)?, hex(device)?, hex(function)?))
}

/// The CUDA stand-in's simulated nanoseconds, or 0 where `libcuda.so.1` is not the stand-in.
fn simulated_ns() -> u64 {
    type Clock = unsafe extern "C" fn() -> u64;
    static CLOCK: OnceLock<Option<(libloading::Library, Clock)>> = OnceLock::new();
    let clock = CLOCK.get_or_init(|| {
        // SAFETY: loading libcuda.so.1 runs only its initialisers (none for the stand-in).
        let library = unsafe { libloading::Library::new("libcuda.so.1") }.ok()?;
        // SAFETY: the stand-in exports this symbol with exactly this signature.
        let f: Clock =
            *unsafe { library.get::<Clock>(b"gpuwmmStandinSimulatedNanoseconds\0") }.ok()?;
        Some((library, f))
    });
    // SAFETY: the function takes nothing and only reads an atomic counter.
    clock.as_ref().map_or(0, |(_, f)| unsafe { f() })
}

/// Millijoules used: idle power over the wall-clock time up to the last counter step, plus the
/// nominal power's excess over idle during the simulated kernel time.
pub fn energy_mj(wall_ms: u64, simulated_ns: u64) -> u64 {
    let stepped_ms = wall_ms / COUNTER_STEP_MS * COUNTER_STEP_MS;
    let idle = IDLE_POWER_MW * stepped_ms / 1000;
    let busy_extra_mw = u128::from(u64::from(NOMINAL_POWER_MW) - IDLE_POWER_MW);
    idle + (u128::from(simulated_ns) * busy_extra_mw / 1_000_000_000) as u64
}

/// Milliseconds since this library first answered a call.
fn wall_ms() -> u64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    INIT_COUNT.fetch_add(1, Ordering::SeqCst);
    SUCCESS
}

#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    nvmlInit_v2()
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    match INIT_COUNT.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
        Ok(_) => SUCCESS,
        Err(_) => UNINITIALIZED,
    }
}

#[no_mangle]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    let text: &'static CStr = match result {
        SUCCESS => c"Success",
        UNINITIALIZED => c"Uninitialized",
        INVALID_ARGUMENT => c"Invalid Argument",
        NOT_FOUND => c"Not Found",
        INSUFFICIENT_SIZE => c"Insufficient Size",
        _ => c"Unknown Error",
    };
    text.as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    len: c_uint,
) -> NvmlReturn {
    // SAFETY: the caller passes a buffer of `len` chars.
    done(ready().and_then(|()| unsafe { put_str(version, len, DRIVER_VERSION) }))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    // SAFETY: the caller passes a pointer to one unsigned int.
    done(ready().and_then(|()| unsafe { put(count, 1) }))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut *mut c_void,
) -> NvmlReturn {
    done(ready().and_then(|()| {
        if index != 0 {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: the caller passes a pointer to one nvmlDevice_t.
        unsafe { put(device, device_handle()) }
    }))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut *mut c_void,
) -> NvmlReturn {
    done(ready().and_then(|()| {
        if bus_id.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: the caller passes a NUL-terminated string.
        let text = unsafe { CStr::from_ptr(bus_id) }.to_string_lossy();
        let ours = parse_bus_id(PCI_BUS_ID);
        match parse_bus_id(&text) {
            None => Err(INVALID_ARGUMENT),
            Some(id) if Some(id) == ours => {
                // SAFETY: the caller passes a pointer to one nvmlDevice_t.
                unsafe { put(device, device_handle()) }
            }
            Some(_) => Err(NOT_FOUND),
        }
    }))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: *mut c_void, index: *mut c_uint) -> NvmlReturn {
    // SAFETY: the caller passes a pointer to one unsigned int.
    done(valid(device).and_then(|()| unsafe { put(index, 0) }))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: *mut c_void,
    name: *mut c_char,
    len: c_uint,
) -> NvmlReturn {
    // SAFETY: the caller passes a buffer of `len` chars.
    done(valid(device).and_then(|()| unsafe { put_str(name, len, DEVICE_NAME) }))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: *mut c_void,
    power: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: the caller passes a pointer to one unsigned int.
    done(valid(device).and_then(|()| unsafe { put(power, NOMINAL_POWER_MW) }))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: *mut c_void,
    energy: *mut c_ulonglong,
) -> NvmlReturn {
    // SAFETY: the caller passes a pointer to one unsigned long long.
    done(valid(device).and_then(|()| unsafe { put(energy, energy_mj(wall_ms(), simulated_ns())) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_match_in_both_forms() {
        assert_eq!(
            parse_bus_id("0000:00:00.0"),
            parse_bus_id("00000000:00:00.0")
        );
        assert_ne!(parse_bus_id("ffff:ff:1f.7"), parse_bus_id("0000:00:00.0"));
        assert_eq!(parse_bus_id("nonsense"), None);
    }

    #[test]
    fn energy_is_idle_power_in_steps_plus_the_busy_excess_over_simulated_time() {
        assert_eq!(energy_mj(0, 0), 0);
        // 1 ms of simulated kernels at 100 W over a 50 W idle: 50 mJ more.
        assert_eq!(energy_mj(0, 1_000_000), 50);
        // Idle time counts only once a 100 ms step completes: 0.1 s at 50 W is 5 J.
        assert_eq!(energy_mj(99, 0), 0);
        assert_eq!(energy_mj(100, 0), 5_000);
        assert_eq!(energy_mj(250, 1_000_000), 10_050);
    }

    #[test]
    fn calls_before_init_are_uninitialized() {
        let mut count = 0;
        // SAFETY: a pointer to a live local.
        let code = unsafe { nvmlDeviceGetCount_v2(&mut count) };
        // Other tests may have initialised; then the count is 1.
        assert!(code == UNINITIALIZED || count == 1);
        assert_eq!(nvmlInit_v2(), SUCCESS);
        // SAFETY: as above.
        assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut count) }, SUCCESS);
        assert_eq!(count, 1);
        assert_eq!(nvmlShutdown(), SUCCESS);
    }
}
