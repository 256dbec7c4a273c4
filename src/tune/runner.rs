//! Running one tuning cell: `C` executions of a litmus test while stressing blocks repeat an
//! access sequence σ at chosen scratchpad locations (the paper's `⟨T_d, σ@L⟩`).
//!
//! Tuning talks to a [`LitmusRunner`], so its stages can be tested against a made-up chip;
//! [`BackendRunner`] is the real one, on any [`Backend`]. The litmus kernel reads its distance
//! from a parameter and the harness pass adds the stress, so one module per (test, σ) serves
//! every distance and location of a stage.

use crate::backend::words::read_buffer;
use crate::backend::{Backend, BackendError, Buffer, KernelArg, LaunchConfig, ModuleId};
use crate::litmus::{Histogram, LitmusShape, LitmusTest, KERNEL};
use crate::ptx::passes::harness::{harness, HarnessOptions};
use crate::ptx::passes::stress::{StressOp, StressStrategy};
use crate::ptx::{parse, print};
use crate::stressed::{AppLaunch, StressSettings, StressedLauncher};
use rand::seq::index;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::time::Duration;

/// Where the stressing threads of a cell stress.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StressTarget {
    /// Every stressing thread at one scratchpad word (stages 1 and 2).
    Location(u32),
    /// `spread` distinct regions of `patch_words` words, drawn anew for every launch from the
    /// first `regions` regions of the scratchpad; threads split evenly over their first words
    /// (stage 3).
    Spread {
        spread: u32,
        patch_words: u32,
        regions: u32,
    },
}

/// One configuration of a tuning stage.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cell {
    pub test: LitmusShape,
    /// Words between `x` and `y` (the paper's `d`: 0 means adjacent).
    pub distance: u32,
    pub sequence: Vec<StressOp>,
    pub target: StressTarget,
}

/// What a cell's executions gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CellResult {
    pub executions: u64,
    pub weak: u64,
}

/// Runs tuning cells somewhere.
pub trait LitmusRunner {
    /// Runs at least `executions` executions of `cell` (a whole number of launches), every
    /// random choice drawn from `seed`.
    fn run(&mut self, cell: &Cell, executions: u64, seed: u64) -> Result<CellResult, BackendError>;
}

/// How a [`BackendRunner`] launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerSettings {
    /// Threads of every block, test and stressing alike (only thread 0 of a test block takes
    /// part in the test).
    pub block_threads: u32,
    /// The device's resident threads: every launch has a random 50–100% of them.
    pub max_threads: u32,
    /// Iterations of σ by every stressing thread.
    pub stress_iterations: u32,
    /// Test instances per launch: 1 is the paper's one test per launch; more run side by side,
    /// each in its own pair of blocks and memory.
    pub instances: u32,
    /// The largest distance any cell uses (sizes each instance's memory).
    pub max_distance: u32,
    /// Scratchpad words: more than any location or region any cell stresses.
    pub scratch_words: u32,
    pub deadline: Duration,
}

/// A [`LitmusRunner`] on a backend.
pub struct BackendRunner<'b> {
    backend: &'b mut dyn Backend,
    settings: RunnerSettings,
    modules: HashMap<(LitmusShape, Vec<StressOp>), ModuleId>,
    launcher: Option<StressedLauncher>,
    mem: Buffer,
    out: Buffer,
}

impl<'b> BackendRunner<'b> {
    /// Allocates the test memory and the scratchpad.
    pub fn new(
        backend: &'b mut dyn Backend,
        settings: RunnerSettings,
    ) -> Result<BackendRunner<'b>, BackendError> {
        let stride = template(LitmusShape::Mp, settings.max_distance).stride_words();
        let mem = backend.alloc((stride * settings.instances) as usize * 4)?;
        let out = backend.alloc(settings.instances as usize * 8)?;
        let launcher = StressedLauncher::new(backend, settings.scratch_words)?;
        Ok(BackendRunner {
            backend,
            settings,
            modules: HashMap::new(),
            launcher: Some(launcher),
            mem,
            out,
        })
    }

    /// Frees what [`Self::new`] allocated.
    pub fn release(mut self) -> Result<(), BackendError> {
        if let Some(launcher) = self.launcher.take() {
            launcher.release(self.backend)?;
        }
        self.backend.free(self.mem)?;
        self.backend.free(self.out)
    }

    /// The harnessed litmus module for `test` stressed with `sequence`, loaded once.
    fn module(
        &mut self,
        test: LitmusShape,
        sequence: &[StressOp],
    ) -> Result<ModuleId, BackendError> {
        let key = (test, sequence.to_vec());
        if let Some(&id) = self.modules.get(&key) {
            return Ok(id);
        }
        let ptx = template(test, self.settings.max_distance).ptx();
        let options = HarnessOptions {
            stress: StressStrategy::Sys {
                sequence: sequence.to_vec(),
            },
        };
        let internal = |e: String| BackendError::BadModule(format!("litmus harness: {e}"));
        let module = parse(&ptx).map_err(|e| internal(e.to_string()))?;
        let harnessed = harness(&module, KERNEL, &options).map_err(|e| internal(e.to_string()))?;
        let id = self.backend.load_module(&print(&harnessed))?;
        self.modules.insert(key, id);
        Ok(id)
    }

    /// One launch: `instances` executions; returns the weak count.
    fn launch(
        &mut self,
        module: ModuleId,
        cell: &Cell,
        rng: &mut ChaCha8Rng,
    ) -> Result<u64, BackendError> {
        let s = self.settings;
        let locations = locations(&cell.target, rng);
        let app = LaunchConfig::new((2 * s.instances, 1, 1), (s.block_threads, 1, 1));
        let stress = StressSettings {
            stress_blocks: stress_blocks(&s, locations.len() as u32, rng),
            stress_iterations: s.stress_iterations,
            randomise: false,
            spread: 0,
            patch_words: 0,
            seed: rng.random(),
        };
        let args = [
            KernelArg::ptr(self.mem),
            KernelArg::ptr(self.out),
            KernelArg::U32(cell.distance + 1),
        ];
        self.backend.memset(self.mem, 0)?;
        self.backend.memset(self.out, 0)?;
        self.backend.reseed(stress.seed);
        let launcher = self.launcher.as_mut().expect("released only at the end");
        let launch = AppLaunch {
            module,
            kernel: KERNEL,
            config: &app,
            args: &args,
        };
        launcher.launch_at(self.backend, launch, &stress, &locations)?;
        self.backend.synchronize(s.deadline)?;
        let mut histogram = Histogram::default();
        histogram.add(&read_buffer(self.backend, self.out)?);
        Ok(histogram.weak(cell.test))
    }
}

impl LitmusRunner for BackendRunner<'_> {
    fn run(&mut self, cell: &Cell, executions: u64, seed: u64) -> Result<CellResult, BackendError> {
        if cell.distance + 1 > self.settings.max_distance {
            return Err(BackendError::BadLaunch(format!(
                "distance {} is beyond the runner's maximum {}",
                cell.distance,
                self.settings.max_distance - 1
            )));
        }
        let module = self.module(cell.test, &cell.sequence)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let launches = executions.div_ceil(self.settings.instances as u64).max(1);
        let mut result = CellResult::default();
        for _ in 0..launches {
            result.weak += self.launch(module, cell, &mut rng)?;
            result.executions += self.settings.instances as u64;
        }
        Ok(result)
    }
}

/// The litmus test every cell of `test` runs: volatile accesses, no fences, the distance read
/// from a parameter; `max_offset` words between `x` and the farthest `y`.
fn template(test: LitmusShape, max_offset: u32) -> LitmusTest {
    let mut litmus = LitmusTest::new(test, max_offset);
    litmus.distance_from_param = true;
    litmus
}

/// The scratchpad words stressed in one launch.
fn locations(target: &StressTarget, rng: &mut ChaCha8Rng) -> Vec<u32> {
    match *target {
        StressTarget::Location(l) => vec![l],
        StressTarget::Spread {
            spread,
            patch_words,
            regions,
        } => index::sample(rng, regions as usize, spread.min(regions) as usize)
            .into_iter()
            .map(|region| region as u32 * patch_words)
            .collect(),
    }
}

/// Stressing blocks of one launch: all blocks together hold a random 50–100% of the device's
/// resident threads, with at least one stressing thread per stressed location.
fn stress_blocks(s: &RunnerSettings, locations: u32, rng: &mut ChaCha8Rng) -> u32 {
    let threads = rng.random_range(s.max_threads / 2..=s.max_threads.max(1));
    let blocks = (threads / s.block_threads).saturating_sub(2 * s.instances);
    blocks.max(locations.div_ceil(s.block_threads)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RunnerSettings {
        RunnerSettings {
            block_threads: 32,
            max_threads: 1024,
            stress_iterations: 4,
            instances: 2,
            max_distance: 65,
            scratch_words: 4096,
            deadline: Duration::from_secs(10),
        }
    }

    #[test]
    fn launches_fill_half_to_all_of_the_device() {
        let s = settings();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..200 {
            let blocks = stress_blocks(&s, 1, &mut rng) + 2 * s.instances;
            let threads = blocks * s.block_threads;
            assert!((512 - 32..=1024).contains(&threads), "{threads}");
        }
        // Never fewer stressing threads than locations.
        let few = RunnerSettings {
            max_threads: 8,
            ..s
        };
        assert_eq!(stress_blocks(&few, 100, &mut rng), 4);
    }

    #[test]
    fn a_spread_stresses_the_first_words_of_distinct_regions() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let target = StressTarget::Spread {
            spread: 3,
            patch_words: 32,
            regions: 8,
        };
        for _ in 0..50 {
            let mut chosen = locations(&target, &mut rng);
            assert_eq!(chosen.len(), 3);
            assert!(chosen.iter().all(|l| l % 32 == 0 && *l < 256));
            chosen.sort();
            chosen.dedup();
            assert_eq!(chosen.len(), 3);
        }
        assert_eq!(locations(&StressTarget::Location(7), &mut rng), [7]);
    }
}
