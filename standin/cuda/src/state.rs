//! The stand-in driver's objects (contexts, streams, events, modules, functions) behind opaque
//! handles, and the simulated clock.
//!
//! Why this module exists: the C entry points in `lib.rs` receive and hand out raw handles; this
//! module keeps what each handle stands for, so that a stale or foreign handle is answered with
//! `CUDA_ERROR_INVALID_HANDLE` instead of being dereferenced. Each context owns one
//! [`SimBackend`] behind its own lock, so a kernel simulated in one context never blocks calls on
//! another (tests open several backends side by side).

use cudarc::driver::sys::CUresult;
use gpuwmm_sim::device::{Buffer, ModuleId};
use gpuwmm_sim::{SimBackend, SimConfig};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Locks a mutex, taking the data even if a panicking thread poisoned it (the C ABI must not
/// unwind, and the data stays consistent: every update is a single assignment).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Simulated nanoseconds: advanced by every kernel that completes, by its busiest thread's
/// instruction count times [`NS_PER_INSTRUCTION`]. Events read it; the NVML stand-in's energy
/// counter follows it.
pub static SIMULATED_NS: AtomicU64 = AtomicU64::new(0);

/// The stand-in's nominal speed: one instruction per nanosecond per thread (a 1 GHz core that
/// issues one instruction per cycle). A convention, not a measurement of any GPU.
pub const NS_PER_INSTRUCTION: u64 = 1;

/// The simulator state of one context: its backend, the buffers it allocated, and the module
/// variables `cuModuleGetGlobal` handed out, by address.
pub struct Device {
    pub sim: SimBackend,
    pub buffers: BTreeMap<u64, Buffer>,
    pub variables: BTreeMap<u64, Buffer>,
}

impl Device {
    /// The buffer or module variable holding `[address, address + len)`, and the offset of
    /// `address` in it.
    pub fn locate(&self, address: u64, len: usize) -> Option<(Buffer, usize)> {
        [&self.buffers, &self.variables]
            .into_iter()
            .find_map(|table| {
                let (_, buffer) = table.range(..=address).next_back()?;
                let offset = (address - buffer.address) as usize;
                (offset.checked_add(len)? <= buffer.bytes).then_some((*buffer, offset))
            })
    }
}

/// The process's first observed kernel fault. On an H100 (driver 580, 2026-11-27) one kernel's
/// illegal address left every context of the process failing, contexts created afterwards
/// too; the stand-in does the same from the moment a call has reported the fault.
static PROCESS_FAULT: Mutex<Option<CUresult>> = Mutex::new(None);

/// The process's fault, once a call has reported one: every context answers it from then on.
pub fn process_fault() -> Result<(), CUresult> {
    match *lock(&PROCESS_FAULT) {
        Some(code) => Err(code),
        None => Ok(()),
    }
}

/// A context's sticky error: set by a faulting kernel, reported by every call once a call that
/// waits for the device (stream query or synchronisation, allocation, module load) has seen it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Health {
    pub sticky: Option<CUresult>,
    pub observed: bool,
}

pub struct Context {
    pub device: Mutex<Device>,
    pub health: Mutex<Health>,
    /// The legacy default stream (handle 0) of this context never ends its work once hung.
    pub null_stream_hung: Arc<AtomicBool>,
}

impl Context {
    /// For calls that wait for the device: the sticky error, which from now on every call sees.
    pub fn observe(&self) -> Result<(), CUresult> {
        let mut h = lock(&self.health);
        match h.sticky {
            Some(code) => {
                h.observed = true;
                lock(&PROCESS_FAULT).get_or_insert(code);
                Err(code)
            }
            None => process_fault(),
        }
    }

    /// For calls that only enqueue work: the sticky error once it has been observed.
    pub fn enqueue_check(&self) -> Result<(), CUresult> {
        let h = lock(&self.health);
        match h.sticky {
            Some(code) if h.observed => Err(code),
            Some(_) => Ok(()),
            None => process_fault(),
        }
    }

    /// Whether a fault left this context dead (work queued on it never runs).
    pub fn is_dead(&self) -> bool {
        lock(&self.health).sticky.is_some() || process_fault().is_err()
    }

    pub fn poison(&self, code: CUresult) {
        lock(&self.health).sticky.get_or_insert(code);
    }
}

pub struct Stream {
    pub ctx: Arc<Context>,
    /// A kernel on this stream never ends: nothing after it runs, queries answer NOT_READY.
    pub hung: Arc<AtomicBool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    Unrecorded,
    /// Recorded behind a kernel that never ends.
    Never,
    At(u64),
}

pub struct Event {
    pub ctx: Arc<Context>,
    pub stamp: Mutex<Stamp>,
}

pub struct Module {
    pub ctx: Arc<Context>,
    pub id: ModuleId,
}

pub struct Function {
    pub ctx: Arc<Context>,
    pub module: ModuleId,
    pub name: String,
    pub params: Vec<(u64, u64)>,
}

#[derive(Clone)]
pub enum Object {
    Context(Arc<Context>),
    Stream(Arc<Stream>),
    Event(Arc<Event>),
    Module(Arc<Module>),
    Function(Arc<Function>),
}

/// Every live object by handle. Handles are never reused.
#[derive(Default)]
struct Registry {
    next: usize,
    objects: HashMap<usize, Object>,
    contexts_created: u64,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Mutex::new(Registry {
            next: 0x5000,
            ..Registry::default()
        })
    })
}

/// Registers an object and returns its handle (never 0).
pub fn insert(object: Object) -> usize {
    let mut r = lock(registry());
    r.next += 16;
    let handle = r.next;
    r.objects.insert(handle, object);
    handle
}

pub fn get(handle: usize) -> Option<Object> {
    lock(registry()).objects.get(&handle).cloned()
}

pub fn remove(handle: usize) -> Option<Object> {
    lock(registry()).objects.remove(&handle)
}

/// Forgets every object that belongs to `ctx` (after `cuCtxDestroy`).
pub fn remove_owned_by(ctx: &Arc<Context>) {
    lock(registry()).objects.retain(|_, o| {
        let owner = match o {
            Object::Context(c) => c,
            Object::Stream(s) => &s.ctx,
            Object::Event(e) => &e.ctx,
            Object::Module(m) => &m.ctx,
            Object::Function(f) => &f.ctx,
        };
        !Arc::ptr_eq(owner, ctx)
    });
}

/// Settings from the environment, read once per process.
pub struct Settings {
    /// `GPUWMM_STANDIN_SEED` (default 0): context k of the process simulates with a seed
    /// derived from it and k.
    pub seed: u64,
    /// `GPUWMM_STANDIN_BUDGET` (default the simulator's, 100,000,000 thread-instructions): a
    /// launch that runs longer is a kernel that never ends.
    pub budget: u64,
    pub plan: crate::inject::Plan,
    /// `GPUWMM_STANDIN_COUNTER`: a file that counts launches across processes.
    pub counter_file: Option<String>,
}

/// The settings, or why an environment variable is malformed.
pub fn settings() -> &'static Result<Settings, String> {
    static SETTINGS: OnceLock<Result<Settings, String>> = OnceLock::new();
    SETTINGS.get_or_init(read_settings)
}

fn read_settings() -> Result<Settings, String> {
    let number = |name: &str, default: u64| -> Result<u64, String> {
        match std::env::var(name) {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|_| format!("{name}='{text}' is not a whole number")),
            Err(_) => Ok(default),
        }
    };
    let plan = match std::env::var("GPUWMM_STANDIN_INJECT") {
        Ok(spec) => crate::inject::Plan::parse(&spec)
            .map_err(|e| format!("GPUWMM_STANDIN_INJECT='{spec}': {e}"))?,
        Err(_) => crate::inject::Plan::default(),
    };
    Ok(Settings {
        seed: number("GPUWMM_STANDIN_SEED", 0)?,
        budget: number(
            "GPUWMM_STANDIN_BUDGET",
            SimConfig::default().instruction_budget,
        )?,
        plan,
        counter_file: std::env::var("GPUWMM_STANDIN_COUNTER").ok(),
    })
}

/// A new context with its own simulator, seeded from the settings and the context's number.
pub fn new_context(settings: &Settings) -> Arc<Context> {
    let k = {
        let mut r = lock(registry());
        r.contexts_created += 1;
        r.contexts_created - 1
    };
    let config = SimConfig {
        seed: splitmix(settings.seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        instruction_budget: settings.budget,
        ..SimConfig::default()
    };
    Arc::new(Context {
        device: Mutex::new(Device {
            sim: SimBackend::new(config),
            buffers: BTreeMap::new(),
            variables: BTreeMap::new(),
        }),
        health: Mutex::new(Health::default()),
        null_stream_hung: Arc::new(AtomicBool::new(false)),
    })
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

thread_local! {
    /// The calling thread's current context (`cuCtxSetCurrent`).
    static CURRENT: RefCell<Option<Arc<Context>>> = const { RefCell::new(None) };
}

pub fn set_current(ctx: Option<Arc<Context>>) {
    CURRENT.with(|c| *c.borrow_mut() = ctx);
}

pub fn current() -> Option<Arc<Context>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Clears the current context of this thread if it is `ctx`.
pub fn forget_current(ctx: &Arc<Context>) {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, ctx)) {
            *c = None;
        }
    });
}

pub fn now_ns() -> u64 {
    SIMULATED_NS.load(Ordering::SeqCst)
}

pub fn advance_ns(ns: u64) {
    SIMULATED_NS.fetch_add(ns, Ordering::SeqCst);
}
