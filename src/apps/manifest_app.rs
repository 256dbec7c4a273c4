//! Running an application described by an `app.toml` manifest.
//!
//! [`ManifestApp`] is the generic host side that a manifest stands in for: it allocates and fills
//! the declared buffers, makes the declared launches through the driver's launcher, then runs the
//! check kernel (from the untransformed module, never through the launcher) and turns the result
//! word into a [`Verdict`]. Built-in case studies written this way (sdk-red, cub-scan) and user
//! apps loaded with `--app-dir` share this code.

use super::manifest::{Init, Manifest, PlannedArg, PlannedLaunch, UNWRITTEN_RESULT};
use super::words::ElemType;
use super::{compile_source, App, AppError, KernelSource, RunContext, Size, Verdict};
use crate::backend::{Buffer, KernelArg};
use crate::ptx::{FunctionKind, Item, Module};
use rand::Rng;
use std::path::Path;

/// An app defined by a manifest and a `kernel.cu`.
#[derive(Debug, Clone)]
pub struct ManifestApp {
    manifest: Manifest,
    source: KernelSource,
}

/// How many words of the result buffer (after the code) are shown in a failure reason.
const DETAIL_WORDS: usize = 4;

impl ManifestApp {
    /// An app from a parsed manifest and its kernel source.
    pub fn new(manifest: Manifest, source: KernelSource) -> ManifestApp {
        ManifestApp { manifest, source }
    }

    /// Reads `dir/app.toml` and `dir/kernel.cu`.
    pub fn load_dir(dir: &Path) -> Result<ManifestApp, AppError> {
        let manifest = Manifest::load(&dir.join("app.toml"))?;
        let path = dir.join("kernel.cu");
        let text = std::fs::read_to_string(&path).map_err(|e| AppError::Compile {
            path: path.clone(),
            message: format!("cannot read the app's kernel source: {e}"),
        })?;
        Ok(ManifestApp::new(manifest, KernelSource { path, text }))
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The full compiled module, validated against the manifest.
    fn compiled(&self, arch: &str) -> Result<Module, AppError> {
        let module = compile_source(&self.source, arch)?;
        self.manifest.check_module(&module)?;
        Ok(module)
    }

    fn fill(
        &self,
        ctx: &mut RunContext<'_>,
        rng: &mut impl Rng,
        index: usize,
    ) -> Result<Buffer, AppError> {
        let spec = &self.manifest.buffers[index];
        let len = self.manifest.plan(ctx.size()).lengths[index];
        let bytes = len * spec.elem.bytes();
        let buffer = ctx.alloc(&spec.name, bytes)?;
        let mut image = Vec::with_capacity(bytes);
        match spec.init {
            Init::Zero => return Ok(buffer), // allocations are zeroed
            Init::Constant(v) => {
                for _ in 0..len {
                    spec.elem.int_bytes(v as i128, &mut image);
                }
            }
            Init::ConstantFloat(x) => {
                for _ in 0..len {
                    image.extend_from_slice(&(x as f32).to_le_bytes());
                }
            }
            Init::Iota => {
                for i in 0..len {
                    spec.elem.int_bytes(i as i128, &mut image);
                }
            }
            Init::RandomInt { lo, hi } => {
                for _ in 0..len {
                    spec.elem
                        .int_bytes(rng.random_range(lo..=hi) as i128, &mut image);
                }
            }
            Init::RandomFloat { lo, hi } => {
                for _ in 0..len {
                    let x = rng.random_range(lo..hi) as f32;
                    image.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
        ctx.write(&spec.name, buffer, &image)?;
        Ok(buffer)
    }
}

fn args(launch: &PlannedLaunch, buffers: &[Buffer]) -> Vec<KernelArg> {
    launch
        .args
        .iter()
        .map(|a| match *a {
            PlannedArg::Buffer(i) => KernelArg::ptr(buffers[i]),
            PlannedArg::Scalar(s) => s,
        })
        .collect()
}

impl App for ManifestApp {
    fn name(&self) -> &str {
        &self.manifest.name
    }

    fn description(&self) -> &str {
        &self.manifest.description
    }

    fn postcondition(&self) -> &str {
        &self.manifest.postcondition
    }

    fn source(&self) -> &KernelSource {
        &self.source
    }

    fn kernels(&self) -> Vec<String> {
        self.manifest.app_kernels()
    }

    fn parameters(&self, size: Size) -> Vec<(String, i64)> {
        self.manifest
            .params(size)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// The compiled module without the check kernel (unless the app launches it too), so that
    /// fence sites and the stress harness only ever see app code.
    fn module(&self, arch: &str) -> Result<Module, AppError> {
        let mut module = self.compiled(arch)?;
        let check = &self.manifest.check.launch.kernel;
        if !self.manifest.launches.iter().any(|l| &l.kernel == check) {
            module.items.retain(|item| {
                !matches!(item, Item::Function(f) if f.kind == FunctionKind::Entry && &f.name == check)
            });
        }
        Ok(module)
    }

    fn check_module(&self, arch: &str) -> Result<Option<Module>, AppError> {
        self.compiled(arch).map(Some)
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Verdict, AppError> {
        let mut rng = ctx.rng();
        let buffers = (0..self.manifest.buffers.len())
            .map(|i| self.fill(ctx, &mut rng, i))
            .collect::<Result<Vec<_>, _>>()?;
        let plan = self.manifest.plan(ctx.size());
        for launch in &plan.launches {
            ctx.launch(&launch.kernel, launch.config, args(launch, &buffers))?;
        }
        let check = &plan.check;
        let result = self.manifest.check.result;
        let spec = &self.manifest.buffers[result];
        ctx.write(&spec.name, buffers[result], &[UNWRITTEN_RESULT])?;
        ctx.launch_check(&check.kernel, check.config, &args(check, &buffers))?;

        let len = plan.lengths[result].min(1 + DETAIL_WORDS);
        let words: Vec<u32> = ctx.download(&spec.name, buffers[result], len)?;
        let code = words.first().copied().unwrap_or(0);
        if code == UNWRITTEN_RESULT {
            return Err(AppError::ResultNotWritten {
                app: self.manifest.name.clone(),
                kernel: check.kernel.clone(),
                buffer: spec.name.clone(),
            });
        }
        if code == 0 {
            return Ok(Verdict::Pass);
        }
        let shown = |w: u32| match spec.elem {
            ElemType::I32 => (w as i32).to_string(),
            _ => w.to_string(),
        };
        let mut reason = format!(
            "check kernel {} reported code {}",
            check.kernel,
            shown(code)
        );
        if let Some(meaning) = self.manifest.check.codes.get(&code) {
            reason.push_str(&format!(" ({meaning})"));
        }
        if words.len() > 1 {
            let detail: Vec<String> = words[1..].iter().map(|w| shown(*w)).collect();
            reason.push_str(&format!("; {}[1..]: {}", spec.name, detail.join(", ")));
        }
        Ok(Verdict::fail(reason))
    }
}
