//! gpuwmm-sim: a [`Device`] that interprets the PTX NVRTC emits, with a seeded random scheduler and an
//! operational weak-memory model, so that every driver, application and pass runs end to end
//! without a GPU. Every result it produces is a property of this model, not of hardware.
//!
//! Files: `decode/` turns PTX into compact instructions (`isa.rs`) once per module, one file per
//! instruction family;
//! `vars.rs` lays out variables and parameters; `sched.rs` runs a launch (scheduler, barriers,
//! warp rendezvous); `exec.rs` executes instructions and memory accesses; `alu.rs` holds the value
//! semantics (`rounding.rs` the directed roundings and `.ftz` it cannot take from Rust);
//! `memory.rs` global memory; `ptx_model.rs` the PTX memory model (`ptx_model/ordering.rs`: what
//! an access's or fence's qualifiers mean to it; `ptx_model/view.rs`: a thread's causal past, a
//! per-block clock plus single observed writes); `weak.rs` the store
//! buffers and stale caches of the older store-buffer model.
//!
//! Launches are queued by `launch` and run by `synchronize` (or by the next copy, `memset` or
//! `free`, which synchronise like CUDA's default stream). Device functions (`.func`) are called
//! with their `.param` frames in the thread's local memory; recursion is rejected at load time, as
//! is every instruction the interpreter does not implement ([`BackendError::Unsupported`]).
//! Speed (`cargo bench --bench sim_speed`, release, one core): 49 to 59 million
//! thread-instructions per second; the PTX model runs a memory-bound kernel at 0.82 times the
//! speed of `sc` (README, "Simulator speed").
//!
//! # Scheduling
//!
//! All blocks are resident. Each step picks a runnable *thread* uniformly at random and runs it
//! for `1..=max_quantum` instructions (see `sched.rs`). The threads of a warp run independently
//! (as Volta and later may): warp-synchronous code without `__syncwarp` fails here. CTA
//! barriers have ids 0 to 15; one with a thread count completes when that many threads have
//! arrived (`bar.arrive` arrives without waiting), one without when every live thread of the
//! block has; `bar.warp.sync` waits for the live lanes of its mask. A launch that executes more than
//! `instruction_budget` thread-instructions, or whose threads all wait on a barrier or warp
//! rendezvous that cannot complete, ends in [`BackendError::Hang`]. Out-of-bounds, unmapped or
//! misaligned accesses, integer division by zero and `trap` end it in [`BackendError::Fault`].
//!
//! A launch told which of its blocks are stressing blocks ([`Backend::end_next_launch_with_app`],
//! as checking runs do) ends once the others have finished: stress only hammers a scratchpad
//! nothing reads back, so what runs after the application's last block can change nothing it
//! sees, and it was about 90% of a stressed run's work (stress is calibrated to last 10× the
//! longest launch). Calibration lets stress run its course, as a GPU always does. The scheduler's
//! choices up to the application's end are the same either way, so a single-launch app's runs
//! are unchanged; a multi-launch app's later launches draw from a different point of the stream.
//!
//! # Memory models
//!
//! [`MemoryModel::Ptx`] (the default, `--sim-model ptx`): the PTX memory consistency model, as
//! an operational model that runs whole applications; `ptx_model.rs` says how it works and
//! where it is deliberately stronger than PTX. Global memory is weak; shared, local, param and
//! const memory are sequentially consistent. In short:
//!
//! - Each write is a message in its location's history; a load may return any message not older
//!   than what the thread's causal past and coherence require, so writes become visible to each
//!   reader on their own (no multi-copy atomicity), and weak loads may read older values than
//!   earlier loads did.
//! - Scopes and morally strong pairs decide what synchronises: release/acquire patterns (a
//!   release or acquire access, or `fence` + a strong access), `fence.sc` (a total order of SC
//!   fences of a scope) apart from `fence.acq_rel` (no such order, so store buffering stays
//!   possible), CTA barriers and `bar.warp.sync` (the threads that wait get what every
//!   arriving thread passes on), atomics and `red` (`red` forms no acquire pattern). An RMW is
//!   atomic only with the writes that are morally strong with it: it may read an older value
//!   than a newer write that is not (two blocks' `atom.cta.add` on one word can lose an
//!   update).
//! - A thread's own writes bound its own reads through coherence only; they reach other
//!   threads through its releases, `fence.sc` and barriers, so threads of one block can show
//!   store buffering and message passing weakly, as PTX allows. `membar.{cta,gl,sys}`
//!   is `fence.sc` at that scope, `volatile` is `relaxed.sys`, and sys scope is gpu scope (one
//!   device; the host touches memory only between launches).
//! - A write goes after every write of its location that it must follow (its own, those it
//!   read strongly, those in its causal past) but may take effect below newer writes it need
//!   not follow (`older_value_probability`): a store may precede in coherence a racing store
//!   that executed earlier (2+2W, S, CoRW-WW), and memory keeps the coherence-last value.
//! - A global load, or an `atom` without release or acquire semantics, may be deferred
//!   (`defer_probability`): later loads, stores and relaxed atomics to other addresses overtake
//!   it until an instruction needs its register or its address; a thread waiting for one lets
//!   others run first half the time. A fence, release store or acquire load may overtake a
//!   deferred load too, which then reads only a write it does not synchronise with (not
//!   morally strong with it, or any for a weak load) that the overtaking release did not
//!   cause; acquire loads are deferred only on those terms. So load buffering (LB, also
//!   through RMWs, and with fences that synchronise nothing) is observable, and dependencies
//!   keep values from appearing out of thin air.
//!
//! Where the model differs from PTX it is only stronger (it can miss a bug, never report an
//! outcome PTX forbids); `ptx_model.rs` lists how, and the weak behaviours never shown by
//! reason: RMWs never overtaken by a fence or release, deferred loads never reading a morally
//! strong write once overtaken, no speculation past branches, synchronisation tracked per
//! block.
//!
//! Litmus tests between threads of *different blocks* unless the row says otherwise
//! (`tests/sim.rs`, `tests/sim_ptx.rs`, `tests/sim_scoped.rs`, and the conformance table of the
//! README, measured on `../shared/litmus/ptx/` and `tests/litmus/`):
//!
//! | shape | weak outcome | `Ptx` | `Ptx`, `fence.sc.gpu` in both | `Ptx`, `fence.acq_rel.gpu` in both | `Ptx`, `fence.sc.cta` in both |
//! |---|---|---|---|---|---|
//! | MP | `r_y == 1 && r_x == 0` | yes | - | - | yes |
//! | MP, fence in the writer only | as MP | yes | | | |
//! | SB | `r0 == 0 && r1 == 0` | yes | - | yes | yes |
//! | LB | `r0 == 1 && r1 == 1` | yes (rare) | - | - | |
//! | 2+2W | both locations end with the first store | yes | - | yes | yes |
//! | SB, two threads of one block | `r0 == 0 && r1 == 0` | yes | - | yes (`.cta`) | - |
//! | two blocks' `atom.cta.add` | an update lost | yes | | | |
//! | CoRR (volatile) | `1` then `0` | - | | | |
//!
//! [`MemoryModel::Sc`]: every access takes effect in memory when it executes (sequential
//! consistency over the scheduler's interleaving).
//!
//! [`MemoryModel::Weak`] (`--sim-model weak`/`weak-stale`): the store-buffer model of gpuwmm
//! 0.1, kept so that journals recorded with it replay. It is *not* PTX: a fence drains the whole
//! buffer at once, so a fence after a publishing store is rewarded; loads are never reordered;
//! scopes and `fence.acq_rel` are not told apart. Its rules:
//!
//! 1. Each thread has a FIFO store buffer. A global store that is not a gpu/sys-scope release is
//!    appended to it (after its address is checked, so faults are reported at the store).
//! 2. Buffered stores drain to memory at random times: when a thread is picked by the scheduler,
//!    with probability `drain_probability` one random entry of its buffer drains; when a buffer
//!    exceeds `store_buffer_capacity`, a random entry drains at once. An entry may only drain
//!    after every older entry of the same buffer that overlaps it (FIFO per address). An exited
//!    thread stays schedulable until its buffer is empty.
//! 3. A global load of a thread first sees its own buffer (byte-wise newest pending store), then
//!    memory.
//! 4. With `stale_loads`, each block has a cache of the newest value its threads have read from
//!    global memory per location; a *weak* load that finds a cached value different from memory
//!    returns the cached one with probability `stale_probability`.
//! 5. Gpu/sys-scope fences drain the thread's whole buffer and clear its block's stale cache;
//!    cta-scope fences do nothing (with `cta_drains`, they and `bar.sync` drain too).
//! 6. Release stores and release atomics drain the buffer first; acquire loads and atomics clear
//!    the block's stale cache. Atomics act on memory after draining the thread's pending stores
//!    to the same location.
//!
//! Measured for the store-buffer model (seed 42, 10,000 instances, `tests/sim.rs`): MP 405 weak
//! outcomes (one instance per launch), SB 3908; with `fence.sc.gpu` 0 of 100,000 for both.

#![deny(unsafe_code)]

#[macro_use]
extern crate gpuwmm_ptx;

mod alu;
mod decode;
pub mod device;
mod dispatch;
mod exec;
mod isa;
mod memory;
mod ptx_model;
mod races;
mod rounding;
mod sched;
mod vars;
mod weak;

use self::decode::Kernel;
use self::memory::GlobalMemory;
use self::races::LaunchRaces;
pub use self::races::{
    AccessKind as RaceAccessKind, Communication, Conflict, RaceAccess, RaceLog, RaceSite, Strength,
};
use self::vars::VarSpace;
pub use crate::device::Device;
use crate::device::{
    BackendError, BackendKind, Buffer, DeviceInfo, KernelArg, KernelStats, LaunchConfig, ModuleId,
    Result,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Generic addresses in `[SHARED_WINDOW, SHARED_WINDOW + WINDOW_SIZE)` are shared memory.
pub const SHARED_WINDOW: u64 = 0x1000_0000_0000;
/// Generic addresses in `[LOCAL_WINDOW, LOCAL_WINDOW + WINDOW_SIZE)` are local memory.
pub const LOCAL_WINDOW: u64 = 0x2000_0000_0000;
pub const WINDOW_SIZE: u64 = 1 << 32;
/// SMs the simulator reports (`%smid` is the block index modulo this).
pub const SM_COUNT: u32 = 16;

/// Which memory model the simulator implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryModel {
    /// The PTX memory consistency model (the default): write histories and per-thread views,
    /// see `ptx_model.rs`.
    Ptx,
    /// Sequential consistency.
    Sc,
    /// The store-buffer model of gpuwmm 0.1 (kept to replay journals recorded with it): FIFO
    /// store buffers and optionally stale loads; see the module docs. Not PTX.
    Weak,
}

/// The simulator's memory model as the user chooses it (`--sim-model`) and journals record it;
/// [`SimModel::config`] turns it into the interpreter's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SimModel {
    /// The PTX memory consistency model (the default).
    Ptx,
    /// The store-buffer model of gpuwmm 0.1 (journals recorded with it replay with it). Not PTX.
    Weak,
    /// The store-buffer model with stale per-block values for plain loads (`stale_loads`).
    WeakStale,
    /// Sequential consistency.
    Sc,
}

impl SimModel {
    pub const ALL: [SimModel; 4] = [
        SimModel::Ptx,
        SimModel::Weak,
        SimModel::WeakStale,
        SimModel::Sc,
    ];

    /// What each model is, for `--help`.
    pub fn help(self) -> &'static str {
        match self {
            SimModel::Ptx => "The PTX memory consistency model (the default)",
            SimModel::Weak => {
                "The store-buffer model of gpuwmm 0.1 (journals recorded with it replay with it). Not PTX"
            }
            SimModel::WeakStale => {
                "The store-buffer model with stale per-block values for plain loads"
            }
            SimModel::Sc => "Sequential consistency",
        }
    }

    /// The name as the command line (`--sim-model`) and journals spell it.
    pub fn name(self) -> &'static str {
        match self {
            SimModel::Ptx => "ptx",
            SimModel::Weak => "weak",
            SimModel::WeakStale => "weak-stale",
            SimModel::Sc => "sc",
        }
    }

    /// The default simulator settings for this model and seed.
    pub fn config(self, seed: u64) -> SimConfig {
        let model = match self {
            SimModel::Ptx => MemoryModel::Ptx,
            SimModel::Weak | SimModel::WeakStale => MemoryModel::Weak,
            SimModel::Sc => MemoryModel::Sc,
        };
        SimConfig {
            stale_loads: self == SimModel::WeakStale,
            ..SimConfig::new(model, seed)
        }
    }
}

display_by_name!(SimModel, name);
parse_by_name!(SimModel, name, String, |s| format!(
    "no simulator model '{s}' (ptx, weak, weak-stale or sc)"
));

/// Simulator settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub model: MemoryModel,
    /// Seeds scheduling and the memory model; the same seed replays the same executions.
    pub seed: u64,
    /// Thread-instructions per launch before it ends in [`BackendError::Hang`].
    pub instruction_budget: u64,
    /// Weak model: let weak loads return stale values from a per-block cache.
    pub stale_loads: bool,
    /// Weak model: chance that a scheduling pick drains one pending store of the picked thread.
    /// Default 0.25: with it, MP across blocks shows its weak outcome in about 4% of runs and SB
    /// in about 39% (`tests/sim.rs`, `litmus_rates`).
    pub drain_probability: f64,
    /// Weak model: chance that a weak load with a stale cached value returns it. Default 0.5.
    pub stale_probability: f64,
    /// Weak model: pending stores per thread before one is forced out. Default 16.
    pub store_buffer_capacity: usize,
    /// Most instructions a thread runs per scheduling pick. Default 8.
    pub max_quantum: u32,
    /// Chance that a launch starts its blocks one after another, in order, rather than all at
    /// once (`dispatch.rs`), as a GPU dispatching blocks as resources free. Default 0.5 (0 for
    /// the `weak` model); 0 is the scheduler before staggering existed.
    pub stagger_probability: f64,
    /// PTX model: chance that a load which may read an older write than the newest does so
    /// (then uniformly among those it may read). Default 0.5.
    pub older_value_probability: f64,
    /// PTX model: chance that a global load (or an `atom` without release or acquire
    /// semantics) is deferred, so that later independent accesses of its thread overtake it.
    /// Default 0.25.
    pub defer_probability: f64,
    /// Weak model: make `bar.sync` and cta-scope fences drain the store buffers of the threads
    /// involved, like gpu-scope fences. Default false (they order no global memory, see the
    /// module docs); true trades weak behaviours across blocks that PTX allows for the absence
    /// of intra-block false alarms on global memory.
    pub cta_drains: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            model: MemoryModel::Ptx,
            seed: 0,
            instruction_budget: 100_000_000,
            stale_loads: false,
            drain_probability: 0.25,
            stale_probability: 0.5,
            store_buffer_capacity: 16,
            max_quantum: 8,
            stagger_probability: 0.5,
            older_value_probability: 0.5,
            defer_probability: 0.25,
            cta_drains: false,
        }
    }
}

impl SimConfig {
    /// The default settings with this model and seed.
    pub fn new(model: MemoryModel, seed: u64) -> SimConfig {
        // The store-buffer model is kept so that its journals replay as recorded: it keeps the
        // scheduler it was recorded with.
        let stagger_probability = match model {
            MemoryModel::Weak => 0.0,
            _ => SimConfig::default().stagger_probability,
        };
        SimConfig {
            model,
            seed,
            stagger_probability,
            ..SimConfig::default()
        }
    }
}

struct SimModule {
    kernels: Vec<Kernel>,
    by_name: HashMap<String, usize>,
    /// The PTX text, to resolve the lines the race recorder names.
    text: String,
}

struct QueuedLaunch {
    module: usize,
    kernel: usize,
    config: LaunchConfig,
    params: Vec<u8>,
    /// Blocks from this linear id on are stressing blocks the launch need not finish.
    stress_from: Option<u32>,
}

/// The simulator backend.
pub struct SimBackend {
    config: SimConfig,
    info: DeviceInfo,
    memory: GlobalMemory,
    modules: Vec<SimModule>,
    rng: ChaCha8Rng,
    queue: Vec<QueuedLaunch>,
    stats: KernelStats,
    /// [`Backend::end_next_launch_with_app`]'s hint, taken by the next launch.
    stress_from: Option<u32>,
    /// Whether launches record races ([`Device::record_races`]).
    record_races: bool,
    /// What they recorded since the last [`Device::take_races`], by module.
    races: Vec<(usize, LaunchRaces)>,
}

impl SimBackend {
    pub fn new(config: SimConfig) -> SimBackend {
        let driver = match config.model {
            MemoryModel::Ptx => "sim: PTX memory model".to_string(),
            MemoryModel::Sc => "sim: sequentially consistent model".to_string(),
            MemoryModel::Weak if config.stale_loads => {
                "sim: store-buffer model of gpuwmm 0.1 (stale loads), not PTX".to_string()
            }
            MemoryModel::Weak => "sim: store-buffer model of gpuwmm 0.1, not PTX".to_string(),
        };
        let info = DeviceInfo {
            backend: BackendKind::Sim,
            name: "gpuwmm PTX simulator".to_string(),
            sm_count: SM_COUNT,
            max_threads_per_sm: 2048,
            max_resident_threads: SM_COUNT * 2048,
            // The simulator has no cache. This small "L2" sizes the `cache` stress scratchpad: one
            // walk over it is a few thousand instructions per stressing thread, not a million.
            l2_bytes: 64 << 10,
            compute_capability: (7, 0),
            energy_counter: false,
            power_readable: false,
            driver,
        };
        SimBackend {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            config,
            info,
            memory: GlobalMemory::default(),
            modules: Vec::new(),
            queue: Vec::new(),
            stats: KernelStats::default(),
            stress_from: None,
            record_races: false,
            races: Vec::new(),
        }
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    fn region(&mut self, buffer: Buffer, offset: usize, len: usize) -> Result<&mut [u8]> {
        let bytes = self
            .memory
            .bytes_mut(buffer.id)
            .ok_or_else(|| BackendError::Fault(format!("buffer {} is not allocated", buffer.id)))?;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| {
                BackendError::Fault(format!(
                    "copy of {len} bytes at offset {offset} exceeds buffer {} of {} bytes",
                    buffer.id, buffer.bytes
                ))
            })?;
        Ok(&mut bytes[offset..end])
    }

    /// Runs every queued launch (copies and `synchronize` do this first).
    fn flush(&mut self, deadline: Duration) -> Result<()> {
        let queue = std::mem::take(&mut self.queue);
        for launch in queue {
            let kernel = &self.modules[launch.module].kernels[launch.kernel];
            let start = Instant::now();
            let machine = sched::Machine::new(
                kernel,
                &mut self.memory,
                &self.config,
                &mut self.rng,
                &launch.config,
                launch.params,
            )
            .ending_with_app(launch.stress_from)
            .recording_races(self.record_races);
            let (executed, longest, races) = machine.run(deadline)?;
            if let Some(races) = races {
                self.races.push((launch.module, races));
            }
            self.stats = KernelStats {
                time: start.elapsed(),
                instructions: Some(executed),
                longest_thread: Some(longest),
            };
        }
        Ok(())
    }

    fn load(&mut self, ptx_text: &str) -> Result<SimModule> {
        let module =
            gpuwmm_ptx::parse(ptx_text).map_err(|e| BackendError::BadModule(e.to_string()))?;
        let vars = decode::module_vars(&module)?;
        let mut globals = HashMap::new();
        for v in vars
            .iter()
            .filter(|v| matches!(v.space, VarSpace::Global | VarSpace::Const))
        {
            if v.is_extern && v.init.is_none() {
                return Err(BackendError::BadModule(format!(
                    "external variable '{}' is not defined",
                    v.name
                )));
            }
            let (id, address) = self.memory.alloc(v.bytes().max(1) as usize);
            if let (Some(init), Some(bytes)) = (&v.init, self.memory.bytes_mut(id)) {
                bytes[..init.len()].copy_from_slice(init);
            }
            globals.insert(v.name.clone(), address);
        }
        let symbols = decode::module_symbols(&vars, &globals);
        let mut kernels = Vec::new();
        let mut by_name = HashMap::new();
        for f in module.kernels() {
            by_name.insert(f.name.clone(), kernels.len());
            kernels.push(decode::decode_kernel(f, &module, &symbols)?);
        }
        Ok(SimModule {
            kernels,
            by_name,
            text: ptx_text.to_string(),
        })
    }
}

impl SimBackend {
    /// Kernel `kernel` of `module`: its index in the module and its decoded form.
    fn find_kernel(&self, module: ModuleId, kernel: &str) -> Result<(usize, &Kernel)> {
        let m = self
            .modules
            .get(module.0)
            .ok_or_else(|| BackendError::BadLaunch(format!("no module {}", module.0)))?;
        let index = *m
            .by_name
            .get(kernel)
            .ok_or_else(|| BackendError::NoKernel(kernel.to_string()))?;
        Ok((index, &m.kernels[index]))
    }

    /// Queues a launch of kernel `index` of `module` with its parameter buffer (and the hint of
    /// [`Backend::end_next_launch_with_app`], if one was given).
    fn enqueue(&mut self, module: ModuleId, index: usize, config: &LaunchConfig, params: Vec<u8>) {
        self.queue.push(QueuedLaunch {
            module: module.0,
            kernel: index,
            config: *config,
            params,
            stress_from: self.stress_from.take(),
        });
    }

    /// Byte offset and size of each parameter of `kernel` in `module`, in order: what
    /// `cuFuncGetParamInfo` reports on a GPU. `None` when there is no such module or kernel.
    pub fn kernel_params(&self, module: ModuleId, kernel: &str) -> Option<Vec<(u64, u64)>> {
        let (_, k) = self.find_kernel(module, kernel).ok()?;
        Some(k.params.clone())
    }

    /// Queues a launch whose arguments are the raw bytes of each parameter, in order (as a
    /// driver receives them through `cuLaunchKernel`'s `kernelParams`). Each argument must have
    /// exactly its parameter's size.
    pub fn launch_raw(
        &mut self,
        module: ModuleId,
        kernel: &str,
        config: &LaunchConfig,
        args: &[&[u8]],
    ) -> Result<()> {
        let (index, k) = self.find_kernel(module, kernel)?;
        check_config(config)?;
        if args.len() != k.params.len() {
            return Err(BackendError::BadLaunch(format!(
                "kernel '{kernel}' takes {} parameters, {} given",
                k.params.len(),
                args.len()
            )));
        }
        let mut params = vec![0u8; k.param_bytes as usize];
        for (i, (bytes, &(offset, size))) in args.iter().zip(&k.params).enumerate() {
            if bytes.len() as u64 != size {
                return Err(BackendError::BadLaunch(format!(
                    "argument {i} of kernel '{kernel}' has {} bytes, the parameter {size}",
                    bytes.len()
                )));
            }
            params[offset as usize..(offset + size) as usize].copy_from_slice(bytes);
        }
        self.enqueue(module, index, config, params);
        Ok(())
    }
}

fn param_buffer(kernel: &Kernel, args: &[KernelArg]) -> Result<Vec<u8>> {
    if args.len() != kernel.params.len() {
        return Err(BackendError::BadLaunch(format!(
            "kernel '{}' takes {} parameters, {} given",
            kernel.name,
            kernel.params.len(),
            args.len()
        )));
    }
    let mut params = vec![0u8; kernel.param_bytes as usize];
    for (i, (arg, &(offset, size))) in args.iter().zip(&kernel.params).enumerate() {
        let bytes = arg.bytes();
        if bytes.len() as u64 > size {
            return Err(BackendError::BadLaunch(format!(
                "argument {i} of kernel '{}' has {} bytes, the parameter {size}",
                kernel.name,
                bytes.len()
            )));
        }
        params[offset as usize..offset as usize + bytes.len()].copy_from_slice(&bytes);
    }
    Ok(params)
}

fn check_config(config: &LaunchConfig) -> Result<()> {
    let (g, b) = (config.grid, config.block);
    let threads = u64::from(b.0) * u64::from(b.1) * u64::from(b.2);
    let blocks = u64::from(g.0) * u64::from(g.1) * u64::from(g.2);
    if threads == 0 || blocks == 0 || threads > 1024 {
        return Err(BackendError::BadLaunch(format!(
            "grid {g:?} with blocks of {b:?} threads"
        )));
    }
    if threads * blocks > 1 << 24 {
        return Err(BackendError::BadLaunch(format!(
            "{} threads are too many for the simulator",
            threads * blocks
        )));
    }
    Ok(())
}

impl Device for SimBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&mut self, bytes: usize) -> Result<Buffer> {
        let (id, address) = self.memory.alloc(bytes);
        Ok(Buffer { id, address, bytes })
    }

    fn free(&mut self, buffer: Buffer) -> Result<()> {
        self.flush(Duration::MAX)?;
        if self.memory.free(buffer.id) {
            Ok(())
        } else {
            Err(BackendError::Fault(format!(
                "buffer {} is not allocated",
                buffer.id
            )))
        }
    }

    fn copy_in(&mut self, buffer: Buffer, offset: usize, data: &[u8]) -> Result<()> {
        self.flush(Duration::MAX)?;
        self.region(buffer, offset, data.len())?
            .copy_from_slice(data);
        Ok(())
    }

    fn copy_out(&mut self, buffer: Buffer, offset: usize, out: &mut [u8]) -> Result<()> {
        self.flush(Duration::MAX)?;
        out.copy_from_slice(self.region(buffer, offset, out.len())?);
        Ok(())
    }

    fn memset(&mut self, buffer: Buffer, byte: u8) -> Result<()> {
        self.flush(Duration::MAX)?;
        let len = buffer.bytes;
        self.region(buffer, 0, len)?.fill(byte);
        Ok(())
    }

    fn load_module(&mut self, ptx: &str) -> Result<ModuleId> {
        let module = self.load(ptx)?;
        self.modules.push(module);
        Ok(ModuleId(self.modules.len() - 1))
    }

    fn launch(
        &mut self,
        module: ModuleId,
        kernel: &str,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<()> {
        let (index, k) = self.find_kernel(module, kernel)?;
        check_config(config)?;
        let params = param_buffer(k, args)?;
        self.enqueue(module, index, config, params);
        Ok(())
    }

    fn synchronize(&mut self, deadline: Duration) -> Result<()> {
        self.flush(deadline)
    }

    fn last_kernel_stats(&self) -> KernelStats {
        self.stats
    }

    fn reseed(&mut self, seed: u64) {
        self.config.seed = seed;
        self.rng = ChaCha8Rng::seed_from_u64(seed);
    }

    fn record_races(&mut self, on: bool) -> bool {
        self.record_races = on && self.config.model == MemoryModel::Ptx;
        self.races.clear();
        self.record_races
    }

    fn take_races(&mut self) -> Option<RaceLog> {
        if !self.record_races {
            return None;
        }
        let mut log = RaceLog::default();
        let mut tables: HashMap<usize, HashMap<u32, RaceSite>> = HashMap::new();
        for (module, launch) in std::mem::take(&mut self.races) {
            let sites = tables
                .entry(module)
                .or_insert_with(|| races::site_table(&self.modules[module].text));
            log.add(launch, sites);
        }
        Some(log)
    }

    fn end_next_launch_with_app(&mut self, first_stressing_block: u32) {
        self.stress_from = Some(first_stressing_block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sim_model_reads_back_from_the_name_the_journals_spell_it() {
        for model in SimModel::ALL {
            assert_eq!(model.name().parse::<SimModel>(), Ok(model));
            let json = serde_json::to_string(&model).unwrap();
            assert_eq!(json, format!("\"{}\"", model.name()));
        }
        assert!("tso".parse::<SimModel>().is_err());
    }

    const PAIR: &str = r#"
.version 8.8
.target sm_70
.address_size 64
.visible .entry put(.param .u32 put_value, .param .u64 put_address)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u32 %r1, [put_value];
    ld.param.u64 %rd1, [put_address];
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;

    fn one_thread() -> LaunchConfig {
        LaunchConfig {
            grid: (1, 1, 1),
            block: (1, 1, 1),
            shared_bytes: 0,
        }
    }

    #[test]
    fn raw_launches_place_each_parameter_at_its_offset() {
        let mut sim = SimBackend::new(SimConfig::default());
        let module = sim.load_module(PAIR).unwrap();
        // The u64 after a u32 is 8-aligned, as a driver lays it out.
        assert_eq!(sim.kernel_params(module, "put"), Some(vec![(0, 4), (8, 8)]));
        assert_eq!(sim.kernel_params(module, "absent"), None);
        let out = sim.alloc(4).unwrap();
        let value = 7u32.to_le_bytes();
        let address = out.address.to_le_bytes();
        sim.launch_raw(module, "put", &one_thread(), &[&value, &address])
            .unwrap();
        let mut read = [0u8; 4];
        sim.copy_out(out, 0, &mut read).unwrap();
        assert_eq!(u32::from_le_bytes(read), 7);
        // A parameter of the wrong size, or a missing one, is refused before anything runs.
        assert!(matches!(
            sim.launch_raw(module, "put", &one_thread(), &[&address, &address]),
            Err(BackendError::BadLaunch(_))
        ));
        assert!(matches!(
            sim.launch_raw(module, "put", &one_thread(), &[&value]),
            Err(BackendError::BadLaunch(_))
        ));
    }
}
