//! Running a litmus file on a backend: translate once, launch until the executions are done,
//! and count the final states, herd-style.
//!
//! A launch that does not finish (the simulator's [`BackendError::Hang`], a GPU's
//! [`BackendError::Timeout`]) counts its instances as not finished and the run goes on; only
//! executions in which every thread finished have a final state. A test whose first launches all
//! hang gives up early: after 8 when the barrier analysis proves it cannot end (a barrier test
//! that deadlocks under rendezvous semantics, say), after 100 otherwise; running it further
//! would only burn the instruction budget. After a GPU
//! timeout the backend is unusable (see [`crate::backend::cuda`]), so the run stops and says so;
//! and a test the analysis proves cannot end is not launched on a GPU at all, since each hang
//! costs the deadline and a new context and could show nothing the proof does not (the
//! simulator still runs it, which checks the proof: an execution that ends is reported as a
//! bug).
//!
//! A rare allowed behaviour is hunted longer: a test whose state (the one its condition rules
//! on) no execution has reached when its executions are done runs on, up to
//! [`FileSettings::max_executions`], when the PTX model ([`crate::litmus::model`]) allows that
//! state. A state the model forbids is never hunted, so a forbidden test costs no more.

use super::ast::{Condition, LitmusFile, Observed, Quantifier};
use super::deadlock::{finishing, Finishing};
use super::expect::{Expected, Finding};
use super::kernel::{refuse, translate, Kernel, Refusal, KERNEL};
use crate::backend::words::read_buffer;
use crate::backend::{Backend, BackendError, BackendKind, Buffer, KernelArg, LaunchConfig};
use crate::check::spec::run_seed;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;
use thiserror::Error;

/// Launches that all hang, from the first, before a test the barrier analysis proves cannot
/// end ([`Finishing::Never`]) stops.
pub const HANG_PROBE: u64 = 8;
/// The same for a test it does not prove so: one that ends only when its threads read some
/// values (a barrier id read from memory, say) may hang many times in a row.
pub const HANG_PROBE_UNPROVED: u64 = 100;

/// Why a test the barrier analysis proves cannot end is not launched on a GPU.
pub const NOT_LAUNCHED: &str = "not launched on the GPU: the barrier analysis proves no \
    execution can end, and each hung launch would cost the deadline and the GPU context";

/// Instances per launch on a GPU unless the user says otherwise.
const GPU_INSTANCES: u32 = 256;
/// Simulator instruction budget per instance of a launch, unless the user says otherwise.
const SIM_BUDGET_PER_INSTANCE: u64 = 100_000;

/// Executions of each test by default. The simulator runs one instance a launch, cheaply, and
/// the rarest weak state of the shared suite it reaches (`Manual/SL-future-minus`) comes in
/// about 2 of 1,000 executions: 10,000 make missing such a state unlikely (about e^-22) for a
/// tenth of a second a test. On a GPU 1,000 (four launches of 256 instances).
pub fn default_executions(backend: crate::backend::BackendKind) -> u64 {
    match backend {
        crate::backend::BackendKind::Sim => 10_000,
        crate::backend::BackendKind::Cuda => 1_000,
    }
}

/// How far a rare allowed state is hunted by default ([`FileSettings::max_executions`]): to ten
/// times the executions on the simulator (the rarest weak state of Dat3M's PTX tests it
/// reaches, in `SB+RMW-a`, comes in about 6 of 100,000 executions, and 100,000 take a few
/// seconds), not at all on a GPU.
pub fn default_max_executions(backend: crate::backend::BackendKind, executions: u64) -> u64 {
    match backend {
        crate::backend::BackendKind::Sim => executions.saturating_mul(10),
        crate::backend::BackendKind::Cuda => executions,
    }
}

/// Instances per launch by default: one on the simulator (the paper's one test per launch), many
/// side by side on a GPU.
pub fn default_instances(backend: crate::backend::BackendKind) -> u32 {
    match backend {
        crate::backend::BackendKind::Sim => 1,
        crate::backend::BackendKind::Cuda => GPU_INSTANCES,
    }
}

/// The simulator's instruction budget of a launch of `instances` by default.
pub fn default_sim_budget(instances: u32) -> u64 {
    SIM_BUDGET_PER_INSTANCE * instances as u64
}

/// How much to run, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FileSettings {
    /// Executions (test instances) in all.
    pub executions: u64,
    /// The most executions in all of a test whose state the PTX model allows and no execution
    /// has reached yet (at most `executions`: no hunting).
    pub max_executions: u64,
    /// Instances per launch.
    pub instances: u32,
    /// Words between two locations of an instance.
    pub distance: u32,
    /// Deadline of each launch.
    pub deadline: Duration,
}

impl Default for FileSettings {
    fn default() -> FileSettings {
        FileSettings {
            executions: 1000,
            max_executions: 0,
            instances: 1,
            distance: 64,
            deadline: Duration::from_secs(10),
        }
    }
}

/// Why a test did not run.
#[derive(Debug, Error)]
pub enum FileRunError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// The final states of a test and how they relate to its condition.
#[derive(Debug, Clone, PartialEq)]
pub struct FileOutcome {
    pub name: String,
    pub condition: Condition,
    /// What each state holds, in order.
    pub observed: Vec<Observed>,
    /// Final state -> executions that ended in it.
    pub states: BTreeMap<Vec<u32>, u64>,
    /// Executions whose state satisfies the condition's proposition.
    pub positive: u64,
    /// Executions whose state does not.
    pub negative: u64,
    /// Executions of launches that did not finish.
    pub not_finished: u64,
    pub launches: u64,
    pub hung_launches: u64,
    pub seed: u64,
    /// Set when the run stopped before all executions ran, with the reason.
    pub stopped: Option<String>,
    /// The backend cannot be used any more (a GPU kernel that never finished).
    pub backend_lost: bool,
    /// Executions ran on past those asked for, hunting a state the PTX model allows.
    pub hunted: bool,
}

/// Whether `test` has barriers and the PTX model, with the suite's barrier semantics, lets no
/// execution end (XF-Barrier-style tests whose barrier ids repeat in one thread): a verdict on
/// its final states is then empty, and runs that end under rendezvous barriers cannot be
/// compared with it. `false` when the model refuses the test.
fn no_state_under_suite_barriers(test: &LitmusFile) -> bool {
    test.has_barriers() && crate::litmus::model::model(test).is_ok_and(|m| m.allowed.is_empty())
}

impl FileOutcome {
    /// The outcome of `test` before its first launch.
    fn empty(test: &LitmusFile, seed: u64) -> FileOutcome {
        FileOutcome {
            name: test.name.clone(),
            condition: test.condition.clone(),
            observed: test.observed(),
            states: BTreeMap::new(),
            positive: 0,
            negative: 0,
            not_finished: 0,
            launches: 0,
            hung_launches: 0,
            seed,
            stopped: None,
            backend_lost: false,
            hunted: false,
        }
    }

    /// A test that was not launched, and why.
    fn not_launched(test: &LitmusFile, seed: u64, why: &str) -> FileOutcome {
        FileOutcome {
            stopped: Some(why.to_string()),
            ..FileOutcome::empty(test, seed)
        }
    }

    /// Executions with a final state.
    pub fn finished(&self) -> u64 {
        self.positive + self.negative
    }

    /// Executions ending in the state `expected.csv` rules on: satisfying the proposition for
    /// `exists`/`~exists`, violating it for `forall`.
    pub fn reached(&self) -> u64 {
        match self.condition.quantifier {
            Quantifier::Exists | Quantifier::NotExists => self.positive,
            Quantifier::Forall => self.negative,
        }
    }

    /// No execution finished although some were run.
    pub fn cannot_finish(&self) -> bool {
        self.finished() == 0 && self.not_finished > 0
    }

    /// What this run of `test` gives the conformance table: a test none of whose executions
    /// ended is [`Finding::Deadlocked`] only when [`finishing`] proves none can; one that the
    /// proof says cannot end but did is a bug, named as such.
    pub fn finding(&self, test: &LitmusFile) -> Finding {
        let proof = finishing(test);
        let none_ended = self.cannot_finish() || self.launches == 0;
        if none_ended && proof == Finishing::Never {
            return Finding::Deadlocked {
                not_finished: self.not_finished,
            };
        }
        if self.finished() > 0 && proof == Finishing::Never {
            return Finding::NotRun(format!(
                "{} executions ended although the barrier analysis proves none can: a bug in \
                 the simulator or the analysis",
                self.finished()
            ));
        }
        if self.finished() > 0 && no_state_under_suite_barriers(test) {
            return Finding::NotRun(format!(
                "the suite's verdicts follow Dat3M's barriers (no phases), under which no \
                 execution of this test ends (the PTX model here finds none), so its verdict \
                 holds vacuously; {} ended here under rendezvous barriers",
                self.finished()
            ));
        }
        Finding::Ran {
            executions: self.finished(),
            not_finished: self.not_finished,
            reached: self.reached(),
        }
    }

    /// herd's verdict word on the observation: `Never`, `Sometimes` or `Always` (of executions
    /// satisfying the proposition).
    pub fn observation(&self) -> &'static str {
        match (self.positive, self.negative) {
            (0, _) => "Never",
            (_, 0) => "Always",
            _ => "Sometimes",
        }
    }

    /// One state as `P1:r0=1; x=2;` (values as signed 32-bit integers).
    pub fn state_text(&self, state: &[u32]) -> String {
        super::ast::state_text(&self.observed, state)
    }

    /// The herd-style report: test, states with counts (`*>` marks states satisfying the
    /// proposition), `Ok`/`No`, witnesses, condition, observation; then executions, and the
    /// executions that did not finish when there are any.
    pub fn report(&self) -> String {
        let kind = self.condition.quantifier.herd_kind();
        let mut t = format!("Test {} {kind}\nStates {}\n", self.name, self.states.len());
        for (state, n) in &self.states {
            let mark = if self.condition.holds(&self.observed, state) {
                "*>"
            } else {
                ":>"
            };
            let _ = writeln!(t, "{n:<10}{mark}{}", self.state_text(state));
        }
        let ok = self.condition.validated(self.positive, self.negative) && self.finished() > 0;
        let _ = writeln!(
            t,
            "{}\nWitnesses\nPositive: {} Negative: {}\nCondition {}\nObservation {} {} {} {}",
            if ok { "Ok" } else { "No" },
            self.positive,
            self.negative,
            self.condition,
            self.name,
            self.observation(),
            self.positive,
            self.negative
        );
        let _ = write!(
            t,
            "Executions {} in {} launches, seed {}",
            self.finished(),
            self.launches,
            self.seed
        );
        if self.not_finished > 0 {
            let _ = write!(
                t,
                "; not finished {} ({} of {} launches hung)",
                self.not_finished, self.hung_launches, self.launches
            );
        }
        t.push('\n');
        if self.hunted {
            let _ = writeln!(
                t,
                "Hunted: ran on past the executions asked for, since the PTX model allows the \
                 state the condition rules on and no execution had reached it"
            );
        }
        if let Some(why) = &self.stopped {
            let _ = writeln!(t, "Stopped early: {why}");
        }
        t
    }
}

/// Runs `settings.executions` executions of `test`, `settings.instances` per launch; launch `n`
/// reseeds the backend with a SplitMix64 step of `seed` and `n`. `progress` gets the executions
/// of each launch as it ends.
pub fn run_litmus_file(
    backend: &mut dyn Backend,
    test: &LitmusFile,
    settings: &FileSettings,
    seed: u64,
    mut progress: impl FnMut(u64),
) -> Result<FileOutcome, FileRunError> {
    let kernel = translate(test, settings.distance)?;
    if !backend.place_on_gpus(&kernel.layout.gpus) {
        return Err(across_gpus(test).into());
    }
    if backend.info().backend == BackendKind::Cuda && finishing(test) == Finishing::Never {
        return Ok(FileOutcome::not_launched(test, seed, NOT_LAUNCHED));
    }
    let instances = settings.instances.max(1) as usize;
    let mut buffers = Buffers::alloc(backend, &kernel, instances)?;
    let result = launches(
        backend,
        test,
        &kernel,
        &buffers,
        settings,
        seed,
        &mut progress,
    );
    let lost = match &result {
        Ok(outcome) => outcome.backend_lost,
        Err(FileRunError::Backend(e)) => e.loses_context(),
        Err(_) => false,
    };
    if !lost {
        let freed = buffers.free(backend);
        if result.is_ok() {
            freed?;
        }
    }
    result
}

/// Why a backend of one GPU does not run `test`, whose threads run on several.
fn across_gpus(test: &LitmusFile) -> Refusal {
    let first = test.threads.first().map(|t| t.gpu);
    let t = test.threads.iter().find(|t| Some(t.gpu) != first);
    let construct = t.map_or_else(String::new, |t| format!("P{}@gpu {}", t.id, t.gpu));
    let reason = "threads on more than one GPU (a GPU backend is one device; the simulator \
        runs them, `--backend sim`)";
    refuse(test, test.header_line, construct, reason)
}

#[allow(clippy::too_many_arguments)]
fn launches(
    backend: &mut dyn Backend,
    test: &LitmusFile,
    kernel: &Kernel,
    buffers: &Buffers,
    settings: &FileSettings,
    seed: u64,
    progress: &mut impl FnMut(u64),
) -> Result<FileOutcome, FileRunError> {
    let module = backend.load_module(&kernel.ptx)?;
    let layout = &kernel.layout;
    let per_launch = settings.instances.max(1) as u64;
    let mut outcome = FileOutcome::empty(test, seed);
    let probe = match finishing(test) {
        Finishing::Never => HANG_PROBE,
        _ => HANG_PROBE_UNPROVED,
    };
    let mut done = 0;
    let mut allowed = None;
    while done < settings.executions || hunts_on(test, settings, done, &outcome, &mut allowed) {
        outcome.hunted |= done >= settings.executions;
        let until = match done < settings.executions {
            true => settings.executions,
            false => settings.max_executions,
        };
        let n = per_launch.min(until - done);
        let memory = layout.initial_memory(n as usize);
        backend.copy_in(buffers.mem, 0, &bytes_of(&memory))?;
        backend.memset(buffers.out, 0)?;
        backend.reseed(run_seed(seed, outcome.launches));
        let config =
            LaunchConfig::new((n as u32 * layout.ctas, 1, 1), (layout.block_threads, 1, 1));
        let args = [
            KernelArg::ptr(buffers.mem),
            KernelArg::ptr(buffers.out),
            KernelArg::U32(n as u32),
        ];
        backend.launch(module, KERNEL, &config, &args)?;
        outcome.launches += 1;
        done += n;
        match backend.synchronize(settings.deadline) {
            Ok(()) => tally(backend, kernel, buffers, n as usize, &mut outcome)?,
            Err(e) if e.is_timeout() => {
                outcome.not_finished += n;
                outcome.hung_launches += 1;
                if matches!(e, BackendError::Timeout(_)) {
                    outcome.backend_lost = true;
                    outcome.stopped = Some(format!("{e}; the GPU context cannot be used after it"));
                    progress(n);
                    break;
                }
                if outcome.finished() == 0 && outcome.hung_launches >= probe {
                    outcome.stopped = Some(format!("the first {probe} launches all hung ({e})"));
                    progress(n);
                    break;
                }
            }
            Err(e) => return Err(e.into()),
        }
        progress(n);
    }
    Ok(outcome)
}

/// Whether a test whose executions are done runs on: below `settings.max_executions`, while
/// no execution reached the state its condition rules on and the PTX model allows that state
/// (asked of the model once, kept in `allowed`).
fn hunts_on(
    test: &LitmusFile,
    settings: &FileSettings,
    done: u64,
    outcome: &FileOutcome,
    allowed: &mut Option<bool>,
) -> bool {
    if done >= settings.max_executions || outcome.reached() > 0 || outcome.stopped.is_some() {
        return false;
    }
    *allowed.get_or_insert_with(|| {
        crate::litmus::model::model(test).is_ok_and(|m| m.expected() == Expected::Allowed)
    })
}

/// Reads the output words and the locations of `n` instances and counts their final states.
fn tally(
    backend: &mut dyn Backend,
    kernel: &Kernel,
    buffers: &Buffers,
    n: usize,
    outcome: &mut FileOutcome,
) -> Result<(), BackendError> {
    let layout = &kernel.layout;
    let out: Vec<u32> = read_buffer(backend, buffers.out)?;
    let mem: Vec<u32> = read_buffer(backend, buffers.mem)?;
    for k in 0..n {
        let state: Vec<u32> = outcome
            .observed
            .iter()
            .map(|o| match o {
                Observed::Reg { thread, reg } => {
                    let slot = layout
                        .out_regs
                        .iter()
                        .position(|(t, r)| t == thread && r == reg)
                        .unwrap_or_default();
                    out[k * layout.out_words() + slot]
                }
                Observed::Loc(l) => {
                    let j = layout
                        .locations
                        .iter()
                        .position(|x| x == l)
                        .unwrap_or_default();
                    mem[layout.location_word(k, j)]
                }
            })
            .collect();
        if outcome.condition.holds(&outcome.observed, &state) {
            outcome.positive += 1;
        } else {
            outcome.negative += 1;
        }
        *outcome.states.entry(state).or_default() += 1;
    }
    Ok(())
}

/// The location and output buffers of a test, sized for a full launch.
struct Buffers {
    mem: Buffer,
    out: Buffer,
}

impl Buffers {
    fn alloc(
        backend: &mut dyn Backend,
        kernel: &Kernel,
        instances: usize,
    ) -> Result<Buffers, BackendError> {
        let words = |w: usize| (instances * w).max(1) * 4;
        let mem = backend.alloc(words(kernel.layout.instance_words()))?;
        let out = backend.alloc(words(kernel.layout.out_words()))?;
        Ok(Buffers { mem, out })
    }

    fn free(&mut self, backend: &mut dyn Backend) -> Result<(), BackendError> {
        backend.free(self.mem)?;
        backend.free(self.out)
    }
}

fn bytes_of(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}
