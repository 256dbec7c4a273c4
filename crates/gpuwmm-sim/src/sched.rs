//! One kernel launch: the per-launch machine state and the seeded random scheduler.
//!
//! Every block is resident; a launch starts them all at once or, with the config's stagger
//! probability, one after another in block order (`dispatch.rs`). The scheduler keeps a list of
//! runnable threads; each step it picks one uniformly at random (so every runnable thread keeps
//! being picked and spin loops make progress) and runs it for a random quantum of
//! `1..=max_quantum` instructions. The unit of scheduling is the *thread*, not the warp: threads
//! of one warp interleave freely, which exposes more interleavings than a GPU would (a superset
//! of warp-lockstep behaviour for race-free-per-warp code). Warp-synchronous instructions
//! (`shfl.sync`, `vote.sync`) are a rendezvous: a thread waits until every live thread of its
//! member mask has arrived. Barriers (`bar.sync`, `bar.red`, `bar.arrive`, ids 0 to 15) count
//! warps, as the PTX ISA says: a thread at a barrier waits until every live (not exited) thread
//! of its warp is at the same barrier, and then the warp's arrival counts for the warp size (32
//! threads). A barrier with a thread count completes once that many threads' worth of warps
//! have arrived; one without, once every warp with a live thread has. `bar.sync`/`bar.red` then
//! wait for the completion, `bar.arrive` goes on as soon as its warp has arrived; a completed
//! barrier starts a new phase.
//!
//! Under the weak model, each step also may drain one pending store of the picked thread, and a
//! thread that has exited stays schedulable until its store buffer is empty.

use super::decode::Kernel;
use super::dispatch;
use super::isa::*;
use super::memory::GlobalMemory;
use super::printf::DeviceOutput;
use super::ptx_model::{Gpus, PtxMemory};
use super::races::{LaunchRaces, RaceTracker};
use super::spin::{state_hash, Seen, SpinWatch, SPIN_WINDOW};
use super::weak::{StaleCache, StoreBuffer};
use super::{MemoryModel, SimConfig};
use crate::device::{BackendError, LaunchConfig};
use rand::distr::Bernoulli;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a thread is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Running,
    /// At a barrier (`bar.sync`, `bar.red`, `bar.arrive`): waiting for the rest of its warp, or
    /// (`bar.sync`, `bar.red`) for the barrier to complete.
    Barrier,
    /// Waiting at a warp rendezvous (`shfl.sync`, `vote.sync`).
    Warp,
    /// Finished; may still hold pending stores.
    Exited,
}

/// Loads a thread may have deferred at once (PTX model).
pub const MAX_DEFERRED: u8 = 2;

/// Instructions that use deferred loads' values a thread may hold back at once (PTX model):
/// performed, in program order, right after the loads.
pub const MAX_HELD: u8 = 4;

/// An instruction held back until the thread's deferred loads are performed, because it uses
/// a value one of them reads (PTX model, `exec/held.rs`).
#[derive(Debug, Clone, Copy)]
pub enum Held {
    /// Arithmetic, with its guard already taken.
    Arith(Inst),
    Store(HeldStore),
}

/// A global store held back (PTX model): where it goes was known when it was issued, and so
/// were some of its values.
#[derive(Debug, Clone, Copy)]
pub struct HeldStore {
    pub line: u32,
    pub mem: MemRef,
    /// The global address of its first element.
    pub at: u64,
    /// Each element's source, read when the store is performed where `known` has no value.
    pub s: [Src; 4],
    pub known: [Option<u64>; 4],
    /// While races are recorded: the access number of its first element, taken when it was
    /// issued (the others follow it), so that it is recorded in program order (0: none).
    pub race_pos: u32,
}

/// A load issued but not yet performed (PTX model): where its value goes and where it reads.
#[derive(Debug, Clone, Copy)]
pub struct Deferred {
    pub d: Reg,
    pub addr: u64,
    pub ty: Ty,
    pub line: u32,
    pub order: Order,
    /// Overtaken by a fence or a release (or, for an acquire load, by anything): it may only
    /// read what makes no synchronisation and is not caused by what overtook it
    /// ([`PtxMemory::restricted_load`](super::ptx_model::PtxMemory::restricted_load)), or else
    /// `fallback`.
    pub restricted: Option<Restriction>,
    /// A deferred read-modify-write (performed whole, atomically, when its turn comes): its
    /// operation, memory reference and operand values. `None` for a load.
    pub rmw: Option<(AtomOp, MemRef, u64, u64)>,
    /// A deferred read-modify-write that a fence or release overtook (or an acq_rel one, from
    /// the start): what it may read and its reserved write (see `ptx_model/overtaken.rs`).
    pub reserved: Option<Reserved>,
    /// While races are recorded: the access number the recorder gave the load when it was
    /// issued, so that it is recorded in program order though performed later (0: none).
    pub race_pos: u32,
    /// A later store or RMW of its thread to the same bytes took effect first (see
    /// `exec/one_location.rs`); with `restricted`, it bounds that restricted read too.
    pub before_own: Option<BeforeOwn>,
}

/// What a deferred load that its thread's later store or RMW to the same bytes overtook may
/// read.
#[derive(Debug, Clone, Copy)]
pub struct BeforeOwn {
    /// Its thread's coherence position at those bytes before the write: it reads nothing
    /// older, and no write of its own thread newer.
    pub floor: u64,
    /// A value it could read, with no effect, before the write (a restricted load's own
    /// fallback): read when nothing else qualifies any more.
    pub fallback: u64,
}

/// What a restricted deferred load may still read.
#[derive(Debug, Clone, Copy)]
pub struct Restriction {
    /// A value it could read, with no effect, when it became restricted.
    pub fallback: u64,
    /// The thread's first release that overtook it, if any.
    pub mark: Option<super::ptx_model::Mark>,
    /// No fence overtook it, so it forms no acquire pattern with what overtook it and may
    /// observe a morally strong write on the terms of
    /// [`PtxMemory::restricted_load`](super::ptx_model::PtxMemory::restricted_load).
    pub may_observe: bool,
}

/// An overtaken read-modify-write's floor (the coherence key of the oldest message it may
/// read) and its write's reserved number among its block's writes.
#[derive(Debug, Clone, Copy)]
pub struct Reserved {
    pub floor: u64,
    pub seq: u32,
}

impl Default for Deferred {
    fn default() -> Self {
        Deferred {
            d: 0,
            addr: 0,
            ty: Ty::PRED,
            line: 0,
            order: Order::default(),
            restricted: None,
            rmw: None,
            reserved: None,
            race_pos: 0,
            before_own: None,
        }
    }
}

/// Per-thread state besides registers and local memory.
#[derive(Debug, Clone)]
pub struct Thread {
    pub pc: u32,
    pub state: State,
    pub block: u32,
    /// Linear index within the block.
    pub lin: u32,
    pub tid: [u32; 3],
    pub buffer: StoreBuffer,
    /// PTX model: deferred loads, oldest first (`deferred` of them are in use).
    pub pending: [Deferred; MAX_DEFERRED as usize],
    pub deferred: u8,
    /// PTX model: instructions that use a deferred load's value, held back until the loads
    /// are performed, oldest first (`n_held` of them are in use).
    pub held: [Held; MAX_HELD as usize],
    pub n_held: u8,
    /// Operands a thread brings to a warp rendezvous: value, lane/offset, clamp, member mask; at
    /// a barrier: predicate, barrier id, thread count (0: the whole CTA), [`BAR_ARRIVE_ONLY`] and
    /// [`BAR_COUNTED`] bits.
    pub warp_args: [u64; 4],
    /// Device-function calls in progress: (return pc, call site).
    pub stack: Vec<(u32, u32)>,
    /// Instructions this thread has executed (the simulated duration of a launch is the most
    /// any thread executed: on a GPU all threads run at once).
    pub executed: u64,
}

/// Barriers per CTA (`bar.sync` ids 0 to 15).
pub const BARRIERS: usize = 16;

/// Threads a warp's arrival at a barrier counts for.
pub const WARP_SIZE: u32 = 32;

/// `warp_args[3]` of a thread at `bar.arrive`: it goes on once its warp has arrived.
pub const BAR_ARRIVE_ONLY: u64 = 1;
/// `warp_args[3]` of a thread at a barrier whose warp's arrival is counted: it waits for the
/// barrier to complete.
pub const BAR_COUNTED: u64 = 2;

/// One of a CTA's barriers in its current phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct Barrier {
    /// Warps that arrived in this phase (waiting or not).
    pub arrived: u32,
    /// Threads that complete it, as the last arrival gave (a warp counts for [`WARP_SIZE`]);
    /// 0 for the whole CTA (its warps with a live thread).
    pub expected: u32,
}

/// Per-block state.
#[derive(Debug, Clone)]
pub struct Block {
    pub ctaid: [u32; 3],
    /// Threads not yet exited.
    pub live: u32,
    /// Warps with a thread not yet exited.
    pub live_warps: u32,
    pub barriers: [Barrier; BARRIERS],
    pub cache: StaleCache,
}

/// Why a quantum ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantumEnd {
    Quantum,
    Exit,
    Barrier,
    Warp,
}

/// The state of one launch.
pub struct Machine<'a> {
    pub k: &'a Kernel,
    pub mem: &'a mut GlobalMemory,
    pub cfg: &'a SimConfig,
    pub rng: &'a mut ChaCha8Rng,
    pub regs: Vec<u64>,
    pub nregs: usize,
    pub threads: Vec<Thread>,
    pub blocks: Vec<Block>,
    pub shared: Vec<u8>,
    pub shared_size: usize,
    pub local: Vec<u8>,
    pub local_size: usize,
    pub params: Vec<u8>,
    pub runnable: Vec<u32>,
    pub executed: u64,
    pub block_dim: [u32; 3],
    pub grid_dim: [u32; 3],
    /// The address of a cooperative launch's grid workspace (0: not cooperative).
    pub grid_workspace: u64,
    pub weak: bool,
    pub stale: bool,
    pub ptx: bool,
    /// PTX model: the launch's write histories and the threads' views.
    pub model: PtxMemory,
    /// PTX model: chance (out of `u32::MAX`) that a load reads an older message it may read.
    pub older: u32,
    /// Threads below this index belong to the application; the others to stressing blocks that
    /// the launch ends with the application's (all threads when stress runs its course).
    pub app_threads: usize,
    /// Application threads not yet exited with an empty store buffer.
    pub app_unfinished: usize,
    /// PTX model, when races are recorded: the recorder of this launch.
    pub races: Option<Box<RaceTracker>>,
    /// The issue-time access number of the deferred load being performed now (see
    /// [`Deferred::race_pos`]), taken by the recorder's next load.
    pub deferred_race_pos: Option<u32>,
    /// PTX model: the scheduler's coins, made once (each draw is what `random_bool` with the
    /// same chance draws): a deferred load is issued deferred, a waiting thread yields, a
    /// deferred load is performed before its thread runs.
    pub defer_coin: Bernoulli,
    pub half_coin: Bernoulli,
    pub quarter_coin: Bernoulli,
    /// Where `printf` calls write, in the order they execute.
    pub output: &'a mut DeviceOutput,
    /// Exits, barrier arrivals and warp rendezvous so far: with the PTX model's clock, what
    /// tells [`SpinWatch`] that the launch moved.
    pub events: u64,
    /// PTX model: ends a launch whose threads spin for good ([`crate::spin`]).
    pub spin: SpinWatch,
}

/// A coin that comes up with chance `p` (clamped to 0..=1).
fn coin(p: f64) -> Bernoulli {
    Bernoulli::new(p.clamp(0.0, 1.0)).expect("a chance clamped to 0..=1")
}

fn dims(d: (u32, u32, u32)) -> [u32; 3] {
    [d.0, d.1, d.2]
}

/// The x, y, z coordinates of linear index `i` in a grid or block of extent `dim` (x fastest).
fn unflatten(i: u32, dim: [u32; 3]) -> [u32; 3] {
    [i % dim[0], (i / dim[0]) % dim[1], i / (dim[0] * dim[1])]
}

impl<'a> Machine<'a> {
    pub fn new(
        k: &'a Kernel,
        mem: &'a mut GlobalMemory,
        cfg: &'a SimConfig,
        rng: &'a mut ChaCha8Rng,
        launch: &LaunchConfig,
        params: Vec<u8>,
        output: &'a mut DeviceOutput,
    ) -> Machine<'a> {
        let block_dim = dims(launch.block);
        let grid_dim = dims(launch.grid);
        let per_block = block_dim.iter().product::<u32>();
        let nblocks = grid_dim.iter().product::<u32>();
        let nthreads = (per_block * nblocks) as usize;
        let mut threads = Vec::with_capacity(nthreads);
        let mut blocks = Vec::with_capacity(nblocks as usize);
        for b in 0..nblocks {
            let ctaid = unflatten(b, grid_dim);
            blocks.push(Block {
                ctaid,
                live: per_block,
                live_warps: per_block.div_ceil(WARP_SIZE),
                barriers: [Barrier::default(); BARRIERS],
                cache: StaleCache::default(),
            });
            for lin in 0..per_block {
                let tid = unflatten(lin, block_dim);
                threads.push(Thread {
                    pc: 0,
                    state: State::Running,
                    block: b,
                    lin,
                    tid,
                    buffer: StoreBuffer::default(),
                    pending: [Deferred::default(); MAX_DEFERRED as usize],
                    deferred: 0,
                    held: [Held::Arith(Inst::NOP); MAX_HELD as usize],
                    n_held: 0,
                    warp_args: [0; 4],
                    stack: Vec::new(),
                    executed: 0,
                });
            }
        }
        let nregs = k.nregs as usize;
        let shared_size = (k.dynamic_shared_offset + u64::from(launch.shared_bytes))
            .max(k.static_shared) as usize;
        let local_size = k.local_bytes as usize;
        Machine {
            k,
            mem,
            cfg,
            rng,
            regs: vec![0; nregs * nthreads],
            nregs,
            threads,
            blocks,
            shared: vec![0; shared_size * nblocks as usize],
            shared_size,
            local: vec![0; local_size * nthreads],
            local_size,
            params,
            runnable: (0..nthreads as u32).collect(),
            executed: 0,
            block_dim,
            grid_dim,
            grid_workspace: 0,
            weak: cfg.model == MemoryModel::Weak,
            stale: cfg.model == MemoryModel::Weak && cfg.stale_loads,
            ptx: cfg.model == MemoryModel::Ptx,
            model: PtxMemory::new(
                if cfg.model == MemoryModel::Ptx {
                    nthreads
                } else {
                    0
                },
                nblocks as usize,
            ),
            older: (cfg.older_value_probability.clamp(0.0, 1.0) * f64::from(u32::MAX)) as u32,
            app_threads: nthreads,
            app_unfinished: nthreads,
            races: None,
            deferred_race_pos: None,
            events: 0,
            spin: SpinWatch::default(),
            defer_coin: coin(cfg.defer_probability),
            half_coin: coin(0.5),
            quarter_coin: coin(0.25),
            output,
        }
    }

    /// Records races among the application's threads (PTX model only; call after
    /// [`Machine::ending_with_app`]); `wait_lines`: the PTX lines of the module's wait loads.
    pub fn recording_races(mut self, on: bool, wait_lines: &Arc<HashSet<u32>>) -> Self {
        if on && self.ptx {
            let per_block = self.block_dim.iter().product::<u32>() as usize;
            let tracker = RaceTracker::new(self.app_threads, per_block);
            self.races = Some(Box::new(tracker.waiting_at(Arc::clone(wait_lines))));
        }
        self
    }

    /// Ends the launch once the blocks below `stress_from` have finished: the blocks from it on
    /// are stressing blocks, whose scratchpad nothing reads back. Without it every block runs to
    /// the end. The scheduler's choices up to the application's end do not change either way.
    pub fn ending_with_app(mut self, stress_from: Option<u32>) -> Self {
        if let Some(first) = stress_from {
            let per_block = self.block_dim.iter().product::<u32>() as usize;
            self.app_threads = self.threads.len().min(first as usize * per_block);
            self.app_unfinished = self.app_threads;
        }
        self
    }

    /// Gives the launch the grid workspace at `address` (a cooperative launch).
    pub fn with_grid_workspace(mut self, address: u64) -> Self {
        self.grid_workspace = address;
        self
    }

    /// Runs the blocks on the GPUs `gpus` says (PTX model: `.gpu` then reaches only the blocks
    /// of the same GPU); without it every block runs on one GPU.
    pub fn on_gpus(mut self, gpus: &Gpus) -> Self {
        if self.ptx && !gpus.is_one() {
            let (threads, blocks) = (self.threads.len(), self.blocks.len());
            self.model = PtxMemory::on_gpus(threads, blocks, gpus.clone());
        }
        self
    }

    /// Notes that thread `t` left the runnable set for good (exited, its stores drained).
    fn finished(&mut self, t: usize) {
        if t < self.app_threads {
            self.app_unfinished -= 1;
        }
    }

    /// Runs the launch to completion; returns the executed thread-instructions, in all and of the
    /// thread that executed most, and what the race recorder recorded, if it was on.
    pub fn run(
        mut self,
        deadline: Duration,
    ) -> Result<(u64, u64, Option<LaunchRaces>), BackendError> {
        let start = Instant::now();
        let max_quantum = self.cfg.max_quantum.max(1);
        let mut steps = 0u64;
        let mut waiting = self.hold_back_staggered_blocks();
        while (!self.runnable.is_empty() || !waiting.is_empty()) && self.app_unfinished > 0 {
            steps += 1;
            self.admit_due_blocks(&mut waiting, steps);
            if self.executed > self.cfg.instruction_budget {
                return Err(BackendError::Hang(format!(
                    "{} thread-instructions executed, more than the budget of {} (a hang or a \
                     livelock){}",
                    self.executed,
                    self.cfg.instruction_budget,
                    self.still_running()
                )));
            }
            if steps.is_multiple_of(4096) {
                if start.elapsed() > deadline {
                    return Err(BackendError::Timeout(start.elapsed()));
                }
                if self.spins_for_good(waiting.is_empty()) {
                    return Err(BackendError::Hang(format!(
                        "for {SPIN_WINDOW} thread-instructions no thread wrote memory, exited or \
                         reached a barrier, and every thread left went round with the same \
                         registers (a spin that cannot end){}",
                        self.still_running()
                    )));
                }
            }
            let i = self.rng.random_range(0..self.runnable.len());
            let t = self.runnable[i] as usize;
            if self.threads[t].state == State::Exited {
                let len = self.threads[t].buffer.len();
                let pick = self.rng.random_range(0..len);
                self.drain_one(t, pick);
                self.events += 1;
                if self.threads[t].buffer.is_empty() {
                    self.runnable.swap_remove(i);
                    self.finished(t);
                }
                continue;
            }
            if self.weak {
                self.maybe_drain(t);
            }
            if self.threads[t].deferred != 0 && self.rng.sample(self.quarter_coin) {
                self.resolve_deferred(t)?;
            }
            let quantum = self.rng.random_range(1..=max_quantum);
            let end = self.run_quantum(t, quantum)?;
            if !matches!(end, QuantumEnd::Quantum) {
                self.events += 1;
            }
            match end {
                QuantumEnd::Quantum => {}
                QuantumEnd::Exit => {
                    if self.threads[t].buffer.is_empty() {
                        self.runnable.swap_remove(i);
                        self.finished(t);
                    }
                    self.exit_thread(t);
                }
                QuantumEnd::Barrier => {
                    self.runnable.swap_remove(i);
                    self.arrive_barrier(t);
                }
                QuantumEnd::Warp => {
                    self.runnable.swap_remove(i);
                    self.threads[t].state = State::Warp;
                    self.try_warp(t);
                }
            }
        }
        let app = &self.threads[..self.app_threads];
        if app.iter().any(|t| t.state != State::Exited) {
            // Threads wait at a barrier or rendezvous that can never complete: a hang.
            return Err(BackendError::Hang(
                "every thread left waits at a barrier or warp rendezvous that cannot complete"
                    .into(),
            ));
        }
        let longest = self.threads.iter().map(|t| t.executed).max().unwrap_or(0);
        let races = self.races.take().map(|r| r.finish());
        Ok((self.executed, longest, races))
    }

    /// Whether the launch has been in a steady state long enough to be a hang ([`crate::spin`]):
    /// PTX model only, every block started (`admitted`); a write a thread's deferred work makes
    /// later moves the model's clock.
    fn spins_for_good(&mut self, admitted: bool) -> bool {
        if !self.ptx || !admitted {
            self.spin.moved();
            return false;
        }
        if !self.spin.unchanged((self.model.clock(), self.events)) {
            return false;
        }
        let threads = &self.threads;
        let left = (0..threads.len()).filter(|&t| threads[t].state != State::Exited);
        let seen = left.map(|t| Seen {
            thread: t,
            pc: threads[t].pc,
            state: (threads[t].deferred == 0 && threads[t].n_held == 0).then(|| self.state_hash(t)),
        });
        let seen = seen.collect();
        self.spin.steady_for_good(self.executed, seen)
    }

    /// The hash of thread `t`'s registers and local memory.
    fn state_hash(&self, t: usize) -> u64 {
        let (nregs, local) = (self.nregs, self.local_size);
        state_hash(
            &self.regs[t * nregs..(t + 1) * nregs],
            &self.local[t * local..(t + 1) * local],
        )
    }

    /// Where the application's threads that have not finished are, for a launch that ran out of
    /// budget: `; the app's threads still running: 3 at kernel.cu:26, inlined from
    /// kernel.cu:12, …`, by source line (the PTX line without line information), the busiest
    /// first, at most three. Empty when every application thread has exited.
    #[cold]
    fn still_running(&self) -> String {
        let mut at: BTreeMap<String, usize> = BTreeMap::new();
        for thread in &self.threads[..self.app_threads] {
            if thread.state != State::Exited {
                // A thread waiting at a barrier or rendezvous has stepped past it.
                let pc = match thread.state {
                    State::Barrier | State::Warp => thread.pc.saturating_sub(1),
                    _ => thread.pc,
                };
                let line = self.k.code.get(pc as usize).map_or(0, |i| i.line);
                let place = match self.k.origins.get(&line) {
                    Some(origin) => origin.clone(),
                    None => format!("PTX line {line}"),
                };
                *at.entry(place).or_default() += 1;
            }
        }
        let mut places: Vec<(String, usize)> = at.into_iter().collect();
        places.sort_by_key(|(_, threads)| std::cmp::Reverse(*threads));
        let shown: Vec<String> = (places.iter().take(3))
            .map(|(place, threads)| format!("{threads} at {place}"))
            .collect();
        match places.len() {
            0 => String::new(),
            n if n > 3 => format!(
                "; the app's threads still running: {}, and at {} more places",
                shown.join(", "),
                n - 3
            ),
            _ => format!("; the app's threads still running: {}", shown.join(", ")),
        }
    }

    /// Takes the blocks that a staggered launch starts later out of the runnable set; returns
    /// them with their start steps, soonest last. The plan covers every block, stressing blocks
    /// included, so that ending a launch with the application changes no choice before its end.
    fn hold_back_staggered_blocks(&mut self) -> Vec<(u64, u32)> {
        let per_block = self.block_dim.iter().product::<u32>();
        let starts = dispatch::start_steps(
            self.blocks.len() as u32,
            per_block,
            self.cfg.stagger_probability,
            self.rng,
        );
        let mut waiting: Vec<(u64, u32)> = (0..self.blocks.len() as u32)
            .filter(|&b| starts[b as usize] > 0)
            .map(|b| (starts[b as usize], b))
            .collect();
        if !waiting.is_empty() {
            let threads = &self.threads;
            self.runnable
                .retain(|&t| starts[threads[t as usize].block as usize] == 0);
            waiting.reverse();
        }
        waiting
    }

    /// Starts the held-back blocks whose step has come, and the next one at once when no thread
    /// that has started can run.
    fn admit_due_blocks(&mut self, waiting: &mut Vec<(u64, u32)>, steps: u64) {
        while let Some(&(start, block)) = waiting.last() {
            if start > steps && !self.runnable.is_empty() {
                break;
            }
            waiting.pop();
            let per_block = self.block_dim.iter().product::<u32>();
            self.runnable
                .extend(block * per_block..(block + 1) * per_block);
        }
    }

    fn maybe_drain(&mut self, t: usize) {
        let len = self.threads[t].buffer.len();
        if len > 0 && self.rng.random_bool(self.cfg.drain_probability) {
            let pick = self.rng.random_range(0..len);
            self.drain_one(t, pick);
        }
    }

    /// Drains one pending store of thread `t` (the one at `pick`, or an older one it must follow).
    pub fn drain_one(&mut self, t: usize, pick: usize) {
        let th = &mut self.threads[t];
        if let Some(e) = th.buffer.drain_one(pick, self.mem) {
            if self.stale {
                self.blocks[th.block as usize].cache.evict(e.addr, e.size);
            }
        }
    }

    /// Drains all pending stores of thread `t` in program order.
    pub fn drain_all(&mut self, t: usize) {
        let th = &mut self.threads[t];
        let cache = &mut self.blocks[th.block as usize].cache;
        let stale = self.stale;
        th.buffer.drain_all(self.mem, |e| {
            if stale {
                cache.evict(e.addr, e.size);
            }
        });
    }

    fn exit_thread(&mut self, t: usize) {
        self.threads[t].state = State::Exited;
        let b = self.threads[t].block as usize;
        self.blocks[b].live -= 1;
        let warp = self.warp_of(t);
        if warp.clone().all(|u| self.threads[u].state == State::Exited) {
            self.blocks[b].live_warps -= 1;
        }
        // The rest of the warp may have been waiting for this thread at a barrier.
        let at_barrier = warp.clone().find(|&u| {
            self.threads[u].state == State::Barrier
                && self.threads[u].warp_args[3] & BAR_COUNTED == 0
        });
        if let Some(u) = at_barrier {
            self.try_warp_arrival(u);
        }
        for id in 0..BARRIERS {
            if self.blocks[b].barriers[id].arrived > 0 {
                self.check_barrier(b, id);
            }
        }
        let warp_base = (self.threads[t].lin / 32) * 32;
        let first = t - (self.threads[t].lin - warp_base) as usize;
        let waiting = (0..32).map(|l| first + l).find(|&u| {
            u < self.threads.len()
                && self.threads[u].block as usize == b
                && self.threads[u].state == State::Warp
        });
        if let Some(u) = waiting {
            self.try_warp(u);
        }
    }

    /// The threads of `t`'s warp: 32 consecutive threads of its block (fewer in a block's last
    /// partial warp).
    fn warp_of(&self, t: usize) -> std::ops::Range<usize> {
        let per_block = self.block_dim.iter().product::<u32>() as usize;
        let first = t - (self.threads[t].lin % WARP_SIZE) as usize;
        let block_end = (self.threads[t].block as usize + 1) * per_block;
        first..block_end.min(first + WARP_SIZE as usize)
    }

    /// Thread `t` is at the barrier its `warp_args` name: it waits there until its warp arrives
    /// (and, unless it only arrives, until the barrier completes).
    fn arrive_barrier(&mut self, t: usize) {
        self.threads[t].state = State::Barrier;
        self.try_warp_arrival(t);
    }

    /// Counts the arrival of `t`'s warp at `t`'s barrier once every live thread of the warp is
    /// there and not yet counted; threads that only arrive (`bar.arrive`) go on.
    fn try_warp_arrival(&mut self, t: usize) {
        let id = self.threads[t].warp_args[1];
        let warp = self.warp_of(t);
        let ready = warp.clone().all(|u| match self.threads[u].state {
            State::Exited => true,
            State::Barrier => {
                let args = self.threads[u].warp_args;
                args[1] == id && args[3] & BAR_COUNTED == 0
            }
            _ => false,
        });
        if !ready {
            return;
        }
        let b = self.threads[t].block as usize;
        let key = barrier_key(b, id as usize);
        let barrier = &mut self.blocks[b].barriers[id as usize];
        barrier.arrived += 1;
        barrier.expected = self.threads[t].warp_args[2] as u32;
        for u in warp {
            if self.threads[u].state != State::Barrier {
                continue;
            }
            if self.ptx {
                self.model.barrier_arrive(u as u32, key);
            }
            if let Some(mut races) = self.races.take() {
                races.barrier_arrive(u, key, self.waiting_line(u as u32));
                self.races = Some(races);
            }
            if self.threads[u].warp_args[3] & BAR_ARRIVE_ONLY != 0 {
                self.threads[u].state = State::Running;
                self.runnable.push(u as u32);
            } else {
                self.threads[u].warp_args[3] |= BAR_COUNTED;
            }
        }
        self.check_barrier(b, id as usize);
    }

    /// Completes barrier `id` of block `b` if enough threads have arrived: the threads waiting
    /// there run again (with the result of a `bar.red`), and the barrier starts a new phase.
    fn check_barrier(&mut self, b: usize, id: usize) {
        let block = &mut self.blocks[b];
        let barrier = &mut block.barriers[id];
        let expected_warps = match barrier.expected {
            0 => block.live_warps,
            n => n.div_ceil(WARP_SIZE),
        };
        if barrier.arrived == 0 || barrier.arrived < expected_warps {
            return;
        }
        *barrier = Barrier::default();
        let per_block = self.block_dim.iter().product::<u32>() as usize;
        let waiters: Vec<usize> = (b * per_block..(b + 1) * per_block)
            .filter(|&t| {
                let args = self.threads[t].warp_args;
                self.threads[t].state == State::Barrier
                    && args[1] as usize == id
                    && args[3] & BAR_COUNTED != 0
            })
            .collect();
        let count: u64 = waiters
            .iter()
            .map(|&t| self.threads[t].warp_args[0] & 1)
            .sum();
        let waiting = waiters.len() as u64;
        if self.ptx {
            let threads: Vec<u32> = waiters.iter().map(|&t| t as u32).collect();
            self.model.barrier_complete(barrier_key(b, id), &threads);
            if let Some(mut races) = self.races.take() {
                races.barrier_complete(barrier_key(b, id), &self.waiting_lines(&threads));
                self.races = Some(races);
            }
        }
        for t in waiters {
            let inst = self.k.code[self.threads[t].pc as usize - 1];
            if let Op::BarRed { op, d, .. } = inst.op {
                let v = match op {
                    BarRedOp::Popc => count,
                    BarRedOp::And => u64::from(count == waiting),
                    BarRedOp::Or => u64::from(count > 0),
                };
                self.regs[t * self.nregs + d as usize] = v;
            }
            if self.weak && self.cfg.cta_drains {
                self.drain_all(t);
            }
            self.threads[t].warp_args[3] = 0;
            self.threads[t].state = State::Running;
            self.runnable.push(t as u32);
        }
    }

    /// Each of `threads` with the PTX line of the barrier it waits at (the instruction before
    /// its program counter).
    fn waiting_lines(&self, threads: &[u32]) -> Vec<(u32, u32)> {
        threads.iter().map(|&t| (t, self.waiting_line(t))).collect()
    }

    /// The PTX line of the barrier thread `t` waits at.
    fn waiting_line(&self, t: u32) -> u32 {
        self.k.code[self.threads[t as usize].pc as usize - 1].line
    }

    /// Completes the warp rendezvous thread `t` waits at, if every live member has arrived.
    fn try_warp(&mut self, t: usize) {
        let lin = self.threads[t].lin;
        let first = t - (lin % 32) as usize;
        let block = self.threads[t].block;
        let mask = self.threads[t].warp_args[3] as u32;
        let lane_thread = |l: u32| {
            let u = first + l as usize;
            (u < self.threads.len() && self.threads[u].block == block).then_some(u)
        };
        let mut members = 0u32;
        for l in 0..32 {
            if mask & (1 << l) == 0 {
                continue;
            }
            let Some(u) = lane_thread(l) else { continue };
            match self.threads[u].state {
                State::Exited => {}
                State::Warp => members |= 1 << l,
                _ => return,
            }
        }
        if self.ptx
            && matches!(
                self.k.code[self.threads[t].pc as usize - 1].op,
                Op::WarpSync { .. }
            )
        {
            // bar.warp.sync orders memory among the threads it releases, as bar.sync does.
            let threads: Vec<u32> = (0..32)
                .filter(|l| members & (1 << l) != 0)
                .map(|l| (first + l as usize) as u32)
                .collect();
            self.model.barrier(&threads);
            if let Some(mut races) = self.races.take() {
                races.barrier(&self.waiting_lines(&threads));
                self.races = Some(races);
            }
        }
        let args: Vec<[u64; 4]> = (0..32)
            .map(|l| lane_thread(l).map_or([0; 4], |u| self.threads[u].warp_args))
            .collect();
        for l in 0..32 {
            if members & (1 << l) == 0 {
                continue;
            }
            let u = first + l as usize;
            let inst = self.k.code[self.threads[u].pc as usize - 1];
            self.finish_warp_op(u, l, &inst.op, members, &args);
            self.threads[u].state = State::Running;
            self.runnable.push(u as u32);
        }
    }

    fn finish_warp_op(&mut self, u: usize, lane: u32, op: &Op, members: u32, args: &[[u64; 4]]) {
        let base = u * self.nregs;
        match *op {
            Op::Shfl { mode, d, p, .. } => {
                let [a, b, c, _] = args[lane as usize];
                let (j, ok) = shfl_source(mode, lane, b as u32, c as u32);
                let ok = ok && members & (1 << j) != 0;
                let value = if ok { args[j as usize][0] } else { a };
                self.regs[base + d as usize] = value & 0xffff_ffff;
                if let Some(p) = p {
                    self.regs[base + p as usize] = u64::from(ok);
                }
            }
            Op::Vote { mode, d, .. } => {
                let mut ballot = 0u32;
                for l in 0..32 {
                    if members & (1 << l) != 0 && args[l as usize][0] != 0 {
                        ballot |= 1 << l;
                    }
                }
                let value = match mode {
                    VoteMode::All => u64::from(ballot == members),
                    VoteMode::Any => u64::from(ballot != 0),
                    VoteMode::Uni => u64::from(ballot == 0 || ballot == members),
                    VoteMode::Ballot => u64::from(ballot),
                };
                self.regs[base + d as usize] = value;
            }
            Op::Match { all, d, p, .. } => {
                let mine = args[lane as usize][0];
                let same = (0..32)
                    .filter(|&l| members & (1 << l) != 0 && args[l as usize][0] == mine)
                    .fold(0u32, |acc, l| acc | 1 << l);
                let value = match all {
                    false => same,
                    true if same == members => members,
                    true => 0,
                };
                self.regs[base + d as usize] = u64::from(value);
                if let Some(p) = p {
                    self.regs[base + p as usize] = u64::from(same == members);
                }
            }
            Op::Redux { op, d, .. } => {
                let values = (0..32)
                    .filter(|&l| members & (1 << l) != 0)
                    .map(|l| args[l as usize][0] as u32);
                self.regs[base + d as usize] = u64::from(redux(op, values));
            }
            _ => {}
        }
    }
}

/// The `redux.sync` reduction of the member lanes' values.
fn redux(op: ReduxOp, values: impl Iterator<Item = u32>) -> u32 {
    let signed = |v: u32| v as i32;
    match op {
        ReduxOp::Add => values.fold(0, u32::wrapping_add),
        ReduxOp::Min { signed: false } => values.min().unwrap_or(0),
        ReduxOp::Max { signed: false } => values.max().unwrap_or(0),
        ReduxOp::Min { signed: true } => values.map(signed).min().unwrap_or(0) as u32,
        ReduxOp::Max { signed: true } => values.map(signed).max().unwrap_or(0) as u32,
        ReduxOp::And => values.fold(u32::MAX, |a, v| a & v),
        ReduxOp::Or => values.fold(0, |a, v| a | v),
        ReduxOp::Xor => values.fold(0, |a, v| a ^ v),
    }
}

/// The PTX model's name for barrier `id` of block `b`.
fn barrier_key(b: usize, id: usize) -> u32 {
    (b * BARRIERS + id) as u32
}

/// The source lane of `shfl.sync` and whether it is in range (PTX ISA semantics).
fn shfl_source(mode: ShflMode, lane: u32, b: u32, c: u32) -> (u32, bool) {
    let lane = lane as i32;
    let b = (b & 31) as i32;
    let clamp = (c & 31) as i32;
    let segmask = ((c >> 8) & 31) as i32;
    let max_lane = (lane & segmask) | (clamp & !segmask);
    let min_lane = lane & segmask;
    let (j, ok) = match mode {
        ShflMode::Up => (lane - b, lane - b >= max_lane),
        ShflMode::Down => (lane + b, lane + b <= max_lane),
        ShflMode::Bfly => (lane ^ b, (lane ^ b) <= max_lane),
        ShflMode::Idx => (
            min_lane | (b & !segmask),
            (min_lane | (b & !segmask)) <= max_lane,
        ),
    };
    if ok && (0..32).contains(&j) {
        (j as u32, true)
    } else {
        (lane as u32, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shfl_lanes() {
        assert_eq!(shfl_source(ShflMode::Down, 3, 1, 0x1f), (4, true));
        assert_eq!(shfl_source(ShflMode::Down, 31, 1, 0x1f), (31, false));
        assert_eq!(shfl_source(ShflMode::Up, 0, 1, 0), (0, false));
        assert_eq!(shfl_source(ShflMode::Up, 5, 2, 0), (3, true));
        assert_eq!(shfl_source(ShflMode::Bfly, 5, 1, 0x1f), (4, true));
        assert_eq!(shfl_source(ShflMode::Idx, 7, 2, 0x1f), (2, true));
    }
}
