// The crate's documentation is the book's simulator page: one text, kept next to the code.
#![doc = include_str!("../README.md")]
#![deny(unsafe_code)]

#[macro_use]
extern crate gpuwmm_ptx;

mod alu;
#[cfg(test)]
mod barrier_tests;
mod decode;
pub mod device;
mod dispatch;
mod exec;
mod half;
#[cfg(test)]
mod held_tests;
mod isa;
mod memory;
mod printf;
mod ptx_model;
mod races;
mod rounding;
mod sched;
mod spin;
mod vars;
mod weak;

use self::decode::Kernel;
/// A comparison operator of `setp`; the litmus runner's branches use it too.
pub use self::isa::Cmp;
use self::memory::GlobalMemory;
use self::printf::DeviceOutput;
use self::ptx_model::Gpus;
use self::races::LaunchRaces;
pub use self::races::{
    AccessKind as RaceAccessKind, Communication, Conflict, Forwarded, PairFacts, RaceAccess,
    RaceLog, RaceSite, SourceLine, Strength,
};
use self::vars::VarSpace;
pub use crate::device::Device;
use crate::device::{
    BackendError, BackendKind, Buffer, DeviceInfo, KernelArg, KernelLaunch, KernelStats,
    LaunchConfig, ModuleId, Result,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Generic addresses in `[SHARED_WINDOW, SHARED_WINDOW + WINDOW_SIZE)` are shared memory.
pub const SHARED_WINDOW: u64 = 0x1000_0000_0000;
/// Generic addresses in `[LOCAL_WINDOW, LOCAL_WINDOW + WINDOW_SIZE)` are local memory.
pub const LOCAL_WINDOW: u64 = 0x2000_0000_0000;
pub const WINDOW_SIZE: u64 = 1 << 32;
/// SMs the simulator reports (`%smid` is the block index modulo this).
pub const SM_COUNT: u32 = 16;

/// Bytes of a cooperative launch's grid workspace (`cooperative_groups`' `grid_workspace`: its
/// size, then the grid barrier's word).
const GRID_WORKSPACE_BYTES: usize = 8;

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
    /// The module-scope `.global` and `.const` variables, by name ([`Device::module_global`]).
    variables: HashMap<String, Buffer>,
    /// The PTX text, to resolve the lines the race recorder names.
    text: String,
    /// The PTX lines of its wait loads, for the race recorder.
    wait_lines: Arc<HashSet<u32>>,
}

/// The PTX lines of `module`'s wait loads, for the race recorder.
fn wait_lines(module: &gpuwmm_ptx::Module) -> HashSet<u32> {
    (gpuwmm_ptx::loops::wait_loads(module).into_iter())
        .map(|line| line as u32)
        .collect()
}

struct QueuedLaunch {
    module: usize,
    kernel: usize,
    config: LaunchConfig,
    params: Vec<u8>,
    /// Blocks from this linear id on are stressing blocks the launch need not finish.
    stress_from: Option<u32>,
    /// The GPU each block runs on.
    gpus: Gpus,
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
    /// [`Device::place_on_gpus`]: the GPUs of the blocks of the launches that follow.
    gpus: Gpus,
    /// Whether launches record races ([`Device::record_races`]).
    record_races: bool,
    /// What they recorded since the last [`Device::take_races`], by module.
    races: Vec<(usize, LaunchRaces)>,
    /// The allocations that hold module variables (never freed by [`Device::free`]).
    variable_ids: HashSet<u64>,
    /// What kernels printed since the last [`Device::take_device_output`].
    output: DeviceOutput,
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
            gpus: Gpus::default(),
            record_races: false,
            races: Vec::new(),
            variable_ids: HashSet::new(),
            output: DeviceOutput::default(),
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
            self.output.begin_launch();
            // A cooperative launch's grid workspace: its size, then the barrier word that
            // `cooperative_groups` grid syncs count arrivals in.
            let workspace = launch.config.cooperative.then(|| {
                let (id, address) = self.memory.alloc(GRID_WORKSPACE_BYTES);
                if let Some(bytes) = self.memory.bytes_mut(id) {
                    bytes[..4].copy_from_slice(&(GRID_WORKSPACE_BYTES as u32).to_le_bytes());
                }
                (id, address)
            });
            let machine = sched::Machine::new(
                kernel,
                &mut self.memory,
                &self.config,
                &mut self.rng,
                &launch.config,
                launch.params,
                &mut self.output,
            )
            .ending_with_app(launch.stress_from)
            .on_gpus(&launch.gpus)
            .with_grid_workspace(workspace.map_or(0, |(_, address)| address))
            .recording_races(self.record_races, &self.modules[launch.module].wait_lines);
            let ran = machine.run(deadline);
            if let Some((id, _)) = workspace {
                self.memory.free(id);
            }
            // What a launch printed before it failed is kept: it is what one debugs with.
            self.output.end_launch();
            let (executed, longest, races) = ran?;
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
        let mut variables = HashMap::new();
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
            let bytes = v.bytes() as usize;
            variables.insert(v.name.clone(), Buffer { id, address, bytes });
            self.variable_ids.insert(id);
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
            variables,
            text: ptx_text.to_string(),
            wait_lines: Arc::new(wait_lines(&module)),
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
            gpus: self.gpus.clone(),
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

/// A module-scope `.global` variable (a `__device__` variable in CUDA) as loading its module
/// lays it out: its name and the bytes it holds before any kernel ran (its initialiser, zeros
/// where it has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleVariable {
    pub name: String,
    pub initial: Vec<u8>,
}

/// The `.global` variables `module` defines, in declaration order: what a kernel of it can
/// write that outlives the launch without being a buffer the host passed. `.const` variables
/// are left out (kernels cannot write them), as are `.extern` declarations without a definition
/// and variables whose initialiser is not a list of numbers (`generic(x)`: an address, which
/// only the loaded module knows).
pub fn module_variables(module: &gpuwmm_ptx::Module) -> Vec<ModuleVariable> {
    let declared = module.items.iter().filter_map(|item| match item {
        gpuwmm_ptx::Item::Directive(text) => vars::parse_var(text).ok().flatten(),
        _ => None,
    });
    declared
        .filter(|v| v.space == VarSpace::Global && !(v.is_extern && v.init.is_none()))
        .map(|v| {
            let mut initial = v.init.clone().unwrap_or_default();
            initial.resize(v.bytes() as usize, 0);
            ModuleVariable {
                name: v.name,
                initial,
            }
        })
        .collect()
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
        if self.variable_ids.contains(&buffer.id) {
            return Err(BackendError::Fault(format!(
                "buffer {} is a module variable, not an allocation",
                buffer.id
            )));
        }
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

    fn module_global(&mut self, module: ModuleId, name: &str) -> Result<Buffer> {
        let m = self
            .modules
            .get(module.0)
            .ok_or_else(|| BackendError::BadLaunch(format!("no module {}", module.0)))?;
        m.variables
            .get(name)
            .copied()
            .ok_or_else(|| BackendError::NoVariable(name.to_string()))
    }

    fn start(&mut self, launch: KernelLaunch<'_>) -> Result<()> {
        let (index, k) = self.find_kernel(launch.module, launch.kernel)?;
        check_config(launch.config)?;
        let params = param_buffer(k, launch.args)?;
        self.enqueue(launch.module, index, launch.config, params);
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

    fn place_on_gpus(&mut self, gpus: &[u32]) -> bool {
        self.gpus = Gpus::new(gpus);
        true
    }

    fn end_next_launch_with_app(&mut self, first_stressing_block: u32) {
        self.stress_from = Some(first_stressing_block);
    }

    fn take_device_output(&mut self) -> Vec<u8> {
        self.output.take()
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

    const PAIR: &str = include_str!("../../../tests/fixtures/ptx/small/put.ptx");

    fn one_thread() -> LaunchConfig {
        LaunchConfig::new((1, 1, 1), (1, 1, 1))
    }

    const VARIABLES: &str = include_str!("../../../tests/fixtures/ptx/small/variables.ptx");

    /// The hang message of kernel `k(mem)` (PTX body `body`, file 1 `k.cu`) run by three
    /// threads of one block over a zero word, with a budget of 10,000 instructions.
    fn hang_of_three_threads(body: &str) -> String {
        match three_threads(body, 10_000).unwrap_err() {
            BackendError::Hang(message) => message,
            err => panic!("{err}"),
        }
    }

    /// How kernel `k(mem)` (PTX body `body`, file 1 `k.cu`, `%p1` set in thread 0) run by
    /// three threads of one block over a zero word ends, with `budget` instructions.
    fn three_threads(body: &str, budget: u64) -> device::Result<()> {
        let text = format!(
            ".version 7.8\n.target sm_70\n.address_size 64\n.file 1 \"k.cu\"\n\
             .visible .entry k(.param .u64 k_mem)\n{{\n\
             \t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<2>;\n\
             \tld.param.u64 %rd1, [k_mem];\n\tmov.u32 %r1, %tid.x;\n\
             \tsetp.eq.u32 %p1, %r1, 0;\n{body}}}\n"
        );
        let mut config = SimConfig::new(MemoryModel::Ptx, 1);
        config.instruction_budget = budget;
        let mut sim = SimBackend::new(config);
        let module = sim.load_module(&text).unwrap();
        let flag = sim.alloc(4).unwrap();
        sim.memset(flag, 0).unwrap();
        let three = LaunchConfig::new((1, 1, 1), (3, 1, 1));
        sim.launch(module, "k", &three, &[KernelArg::ptr(flag)])
            .unwrap();
        sim.synchronize(Duration::from_secs(60))
    }

    /// QA (a fence-less Treiber stack, 2026-12-07): a run whose popper spun on a head nobody
    /// would write again ran the whole budget, 3.2 s, before it was a timeout. A launch that
    /// goes a million thread-instructions with nothing written and every thread round the same
    /// loop with the same registers is a hang now, long before the budget.
    #[test]
    fn a_spin_nothing_can_end_is_a_hang_long_before_the_budget() {
        let spin = "\t@%p1 bra $DONE;\n\
                    $SPIN:\n\t.loc 1 12 9\n\tld.volatile.global.u32 %r2, [%rd1];\n\
                    \tsetp.eq.u32 %p1, %r2, 0;\n\t@%p1 bra $SPIN;\n$DONE:\n\tret;\n";
        // With the budget alone it would end after 50 M instructions, with the budget's words.
        match three_threads(spin, 50_000_000).unwrap_err() {
            BackendError::Hang(message) => {
                assert!(message.contains("a spin that cannot end"), "{message}");
                assert!(
                    message.ends_with("still running: 2 at k.cu:12"),
                    "{message}"
                );
            }
            err => panic!("{err}"),
        }
    }

    /// A spin that counts (a bounded wait) changes its registers each time round: it is never
    /// steady, and ends when its count runs out, as it would with the budget alone.
    #[test]
    fn a_spin_that_counts_runs_to_its_end() {
        let bounded = "\tmov.u32 %r3, 0;\n\
                       $SPIN:\n\tld.volatile.global.u32 %r2, [%rd1];\n\
                       \tadd.u32 %r3, %r3, 1;\n\tsetp.lt.u32 %p1, %r3, 400000;\n\
                       \t@%p1 bra $SPIN;\n\tret;\n";
        three_threads(bounded, 100_000_000).unwrap();
    }

    /// Regression (a sense-reversing grid barrier whose last arrival was lost): every run ran
    /// out of budget with "a hang or a livelock" and no word of where. The message now names
    /// where the application's threads still running are, busiest line first.
    #[test]
    fn a_launch_out_of_budget_names_where_the_app_threads_spin() {
        let message = hang_of_three_threads(
            "\t@%p1 bra $DONE;\n\
             $SPIN:\n\t.loc 1 12 9\n\tld.volatile.global.u32 %r2, [%rd1];\n\
             \tsetp.eq.u32 %p1, %r2, 0;\n\t@%p1 bra $SPIN;\n$DONE:\n\tret;\n",
        );
        assert!(
            message.ends_with("; the app's threads still running: 2 at k.cu:12"),
            "{message}"
        );
    }

    /// QA: threads waiting at a `__syncthreads()` in a hang were named at the line after it.
    #[test]
    fn a_hang_names_the_line_of_the_barrier_threads_wait_at() {
        let message = hang_of_three_threads(
            "\t@%p1 bra $SPIN;\n\
             \t.loc 1 20 5\n\tbar.sync 0;\n\t.loc 1 21 5\n\tret;\n\
             $SPIN:\n\t.loc 1 12 9\n\tld.volatile.global.u32 %r2, [%rd1];\n\
             \tsetp.eq.u32 %p1, %r2, 0;\n\t@%p1 bra $SPIN;\n\tret;\n",
        );
        assert!(
            message.ends_with("; the app's threads still running: 2 at k.cu:20, 1 at k.cu:12"),
            "{message}"
        );
    }

    #[test]
    fn module_variables_are_the_defined_globals_with_their_initial_bytes() {
        let module = gpuwmm_ptx::parse(VARIABLES).unwrap();
        let vars = module_variables(&module);
        let listed: Vec<(&str, &[u8])> = vars
            .iter()
            .map(|v| (v.name.as_str(), v.initial.as_slice()))
            .collect();
        // `.const` cannot be written by a kernel; an `.extern` declaration defines nothing.
        assert_eq!(
            listed,
            [
                ("count", &[0u8; 4][..]),
                ("table", &[1, 2, 3, 0, 0, 0, 0, 0][..])
            ]
        );
    }

    #[test]
    fn a_module_variable_is_a_buffer_copies_reach_and_free_refuses() {
        let text = VARIABLES.replace(".extern .global .align 4 .u32 elsewhere;\n", "");
        let mut sim = SimBackend::new(SimConfig::default());
        let module = sim.load_module(&text).unwrap();
        let other = sim.load_module(&text).unwrap();
        let count = sim.module_global(module, "count").unwrap();
        assert_eq!(count.bytes, 4);
        sim.launch(module, "bump", &one_thread(), &[]).unwrap();
        let mut read = [0u8; 4];
        sim.copy_out(count, 0, &mut read).unwrap();
        assert_eq!(u32::from_le_bytes(read), 5);
        // Each loaded module has a copy of its own.
        let theirs = sim.module_global(other, "count").unwrap();
        sim.copy_out(theirs, 0, &mut read).unwrap();
        assert_eq!(u32::from_le_bytes(read), 0);
        sim.copy_in(count, 0, &7u32.to_le_bytes()).unwrap();
        sim.launch(module, "bump", &one_thread(), &[]).unwrap();
        sim.copy_out(count, 0, &mut read).unwrap();
        assert_eq!(u32::from_le_bytes(read), 12);
        let limit = sim.module_global(module, "limit").unwrap();
        sim.copy_out(limit, 0, &mut read).unwrap();
        assert_eq!(u32::from_le_bytes(read), 9);
        assert!(matches!(
            sim.module_global(module, "absent"),
            Err(BackendError::NoVariable(name)) if name == "absent"
        ));
        assert!(matches!(sim.free(count), Err(BackendError::Fault(_))));
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
