//! Launching a harnessed kernel: build the control block, upload it, launch the flattened grid of
//! application blocks plus stressing blocks, with the control block as the extra argument.
//!
//! The harness pass changes the kernel; this module is its host-side counterpart. Drivers call
//! [`StressedLauncher::launch`] wherever they would launch the application's kernel.

use crate::backend::BackendError;
use crate::backend::{Backend, Buffer, KernelArg, KernelLaunch, LaunchConfig, Result};
use crate::control::{ControlBlock, ControlError, ControlParams};

/// The run-time stress parameters of one launch (the access sequence is compiled into the PTX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StressSettings {
    pub stress_blocks: u32,
    pub stress_iterations: u32,
    /// Thread randomisation: permute blocks, and whole warps inside blocks.
    pub randomise: bool,
    pub spread: u32,
    pub patch_words: u32,
    /// Seed of the permutations and of the stressed locations.
    pub seed: u64,
}

/// The application's launch that a harnessed kernel stands in for: the harnessed module's
/// kernel, the grid and block the application asked for, and its arguments.
pub type AppLaunch<'a> = KernelLaunch<'a>;

/// Owns the scratchpad and the control-block buffer for the harnessed launches of one run.
pub struct StressedLauncher {
    scratch: Buffer,
    control: Option<Buffer>,
    scratch_words: u32,
}

impl StressedLauncher {
    /// Allocates a scratchpad of `scratch_words` 32-bit words.
    pub fn new(backend: &mut dyn Backend, scratch_words: u32) -> Result<StressedLauncher> {
        let scratch = backend.alloc(scratch_words.max(1) as usize * 4)?;
        Ok(StressedLauncher {
            scratch,
            control: None,
            scratch_words,
        })
    }

    /// The scratchpad the stressing blocks hammer.
    pub fn scratch(&self) -> Buffer {
        self.scratch
    }

    /// Launches the harnessed kernel of `app` as if it were the application's launch.
    pub fn launch(
        &mut self,
        backend: &mut dyn Backend,
        app: AppLaunch<'_>,
        settings: &StressSettings,
    ) -> Result<ControlBlock> {
        let control = ControlBlock::new(&self.params(app.config, settings)).map_err(bad_launch)?;
        self.launch_control(backend, app, control)
    }

    /// [`Self::launch`] with `sys` stress at exactly `locations` (scratchpad word indices), as
    /// tuning needs; `settings.spread` and `settings.patch_words` are not used.
    pub fn launch_at(
        &mut self,
        backend: &mut dyn Backend,
        app: AppLaunch<'_>,
        settings: &StressSettings,
        locations: &[u32],
    ) -> Result<ControlBlock> {
        let params = ControlParams {
            spread: 0,
            ..self.params(app.config, settings)
        };
        let control = ControlBlock::new(&params)
            .and_then(|c| c.at_locations(locations.to_vec()))
            .map_err(bad_launch)?;
        self.launch_control(backend, app, control)
    }

    fn launch_control(
        &mut self,
        backend: &mut dyn Backend,
        app: AppLaunch<'_>,
        control: ControlBlock,
    ) -> Result<ControlBlock> {
        let bytes = control.to_bytes();
        let buffer = self.control_buffer(backend, bytes.len())?;
        backend.copy_in(buffer, 0, &bytes)?;
        let (grid, block) = control.launch_grid();
        let mut full_args = app.args.to_vec();
        full_args.push(KernelArg::ptr(buffer));
        let config = LaunchConfig {
            grid,
            block,
            shared_bytes: app.config.shared_bytes,
            cooperative: app.config.cooperative,
        };
        backend.launch(app.module, app.kernel, &config, &full_args)?;
        Ok(control)
    }

    fn params(&self, app: &LaunchConfig, s: &StressSettings) -> ControlParams {
        ControlParams {
            app_grid: app.grid,
            app_block: app.block,
            stress_blocks: s.stress_blocks,
            randomise: s.randomise,
            seed: s.seed,
            stress_iterations: s.stress_iterations,
            scratch_words: self.scratch_words,
            spread: s.spread,
            patch_words: s.patch_words,
            scratch_address: self.scratch.address,
        }
    }

    /// The control-block buffer, reallocated when a launch needs a bigger one.
    fn control_buffer(&mut self, backend: &mut dyn Backend, bytes: usize) -> Result<Buffer> {
        match self.control {
            Some(b) if b.bytes >= bytes => Ok(b),
            old => {
                if let Some(b) = old {
                    backend.free(b)?;
                }
                let b = backend.alloc(bytes)?;
                self.control = Some(b);
                Ok(b)
            }
        }
    }

    /// Frees the scratchpad and the control block.
    pub fn release(self, backend: &mut dyn Backend) -> Result<()> {
        backend.free(self.scratch)?;
        if let Some(b) = self.control {
            backend.free(b)?;
        }
        Ok(())
    }
}

fn bad_launch(e: ControlError) -> BackendError {
    BackendError::BadLaunch(e.to_string())
}
