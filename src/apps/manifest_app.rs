//! Running an application described by an `app.toml` manifest.
//!
//! [`ManifestApp`] is the generic host side that a manifest stands in for: it allocates and fills
//! the declared buffers, makes the declared launches through the driver's launcher, then runs the
//! check kernel (from the untransformed module, never through the launcher) and turns the result
//! word into a [`Verdict`]. Built-in case studies written this way (sdk-red, cub-scan) and user
//! apps loaded with `--app-dir` share this code.

use super::app_program::{AppProgram, Unit};
use super::manifest::{Init, Manifest, PlannedArg, PlannedLaunch, UNWRITTEN_RESULT};
use super::words::ElemType;
use super::{replaced_texts, App, AppError, KernelSource, RunContext, Size};
use super::{PatchedFile, Unpatchable, Verdict, DEFAULT_ARCH};
use crate::backend::{Buffer, KernelArg};
use crate::ptx::{FunctionKind, Item, Module};
use rand::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// An app defined by a manifest and its CUDA sources.
#[derive(Debug, Clone)]
pub struct ManifestApp {
    manifest: Manifest,
    source: KernelSource,
    program: AppProgram,
    /// The PTX name of each kernel name of the manifest, per size, once compiled.
    lowered: Arc<Mutex<BTreeMap<Size, BTreeMap<String, String>>>>,
}

/// How many words of the result buffer (after the code) are shown in a failure reason.
const DETAIL_WORDS: usize = 4;

impl ManifestApp {
    /// An app from a parsed manifest and its one kernel source (a built-in app).
    pub fn new(manifest: Manifest, source: KernelSource) -> ManifestApp {
        ManifestApp {
            program: AppProgram::of_text(&source),
            manifest,
            source,
            lowered: Arc::default(),
        }
    }

    /// Reads `dir/app.toml` and the sources it names (`kernel.cu` when it names none).
    pub fn load_dir(dir: &Path) -> Result<ManifestApp, AppError> {
        let manifest = Manifest::load(&dir.join("app.toml"))?;
        let (program, source) = AppProgram::new(&manifest, dir)?;
        Ok(ManifestApp {
            manifest,
            source,
            program,
            lowered: Arc::default(),
        })
    }

    /// For an app compiled from its files on disk: its program with `files` (each one of the
    /// app's files, with a new text) compiled from those texts.
    fn replaced_program(&self, files: &[PatchedFile]) -> AppProgram {
        let replaced = (files.iter())
            .map(|f| {
                let canonical = std::fs::canonicalize(&f.path).unwrap_or_else(|_| f.path.clone());
                (canonical, f.text.clone())
            })
            .collect();
        self.program.with_replaced(replaced)
    }

    /// The kernel names a unit is asked to lower: the check unit all, the app unit those it
    /// holds (the check kernel too when it is among the app's files).
    fn unit_kernels(&self, unit: Unit) -> Vec<String> {
        match (unit, self.program.has_check_files()) {
            (Unit::App, true) => self.manifest.app_kernels(),
            _ => self.manifest.all_kernels(),
        }
    }

    /// Compiles `unit` at `size`, records the lowered names, and parses the PTX.
    fn compile(&self, unit: Unit, size: Size, arch: &str) -> Result<Module, AppError> {
        let kernels = self.unit_kernels(unit);
        let compiled =
            self.program
                .compile(&self.manifest, &self.source, unit, size, arch, &kernels)?;
        self.lowered
            .lock()
            .expect("no panic while holding the lock")
            .entry(size)
            .or_default()
            .extend(compiled.lowered);
        crate::ptx::parse(&compiled.ptx).map_err(|e| AppError::Compile {
            path: self.source.path.clone(),
            message: format!("PTX line {}: {}", e.line, e.message),
        })
    }

    /// The check unit at `size`, validated against the manifest.
    fn checked(&self, size: Size, arch: &str) -> Result<Module, AppError> {
        let module = self.compile(Unit::Check, size, arch)?;
        let lowered = self.lowered_names(size);
        let lower = |name: &str| lowered.get(name).cloned().unwrap_or(name.to_string());
        self.manifest.check_module(&module, &lower)?;
        Ok(module)
    }

    /// The lowered names known at `size` (compiling the check unit first if none are).
    fn lowered_names(&self, size: Size) -> BTreeMap<String, String> {
        let known = |app: &Self| {
            let map = app.lowered.lock().expect("no panic while holding the lock");
            map.get(&size).cloned()
        };
        if let Some(names) = known(self) {
            return names;
        }
        // Only reached before any compilation at this size; a failure here shows up again
        // (with its message) when the driver asks for the module.
        let _ = self.compile(Unit::Check, size, DEFAULT_ARCH);
        known(self).unwrap_or_default()
    }

    /// The PTX name of kernel `name` at `size`.
    fn lowered(&self, names: &BTreeMap<String, String>, name: &str) -> String {
        names.get(name).cloned().unwrap_or_else(|| name.to_string())
    }

    /// The initial image of buffer `index` (`None`: zeros), given the images before it.
    fn image(
        &self,
        size: Size,
        rng: &mut impl Rng,
        index: usize,
        earlier: &[Option<Vec<u8>>],
    ) -> Option<Vec<u8>> {
        let spec = &self.manifest.buffers[index];
        let len = self.manifest.plan(size).lengths[index];
        let bytes = len * spec.elem.bytes();
        let mut image = Vec::with_capacity(bytes);
        match &spec.init {
            Init::Zero => return None, // allocations are zeroed
            Init::Constant(v) => {
                for _ in 0..len {
                    spec.elem.int_bytes(*v as i128, &mut image);
                }
            }
            Init::ConstantFloat(x) => {
                for _ in 0..len {
                    image.extend_from_slice(&(*x as f32).to_le_bytes());
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
                        .int_bytes(rng.random_range(*lo..=*hi) as i128, &mut image);
                }
            }
            Init::RandomFloat { lo, hi } => {
                for _ in 0..len {
                    let x = rng.random_range(*lo..*hi) as f32;
                    image.extend_from_slice(&x.to_le_bytes());
                }
            }
            // The manifest checked that there is enough data, and that a copy's source is an
            // earlier buffer of the same type at least as long.
            Init::Data(data) => image.extend_from_slice(&data[..bytes]),
            Init::Copy(source) => return earlier[*source].as_ref().map(|s| s[..bytes].to_vec()),
        }
        Some(image)
    }

    /// Allocates and fills every buffer.
    fn fill(&self, ctx: &mut RunContext<'_>) -> Result<Vec<Buffer>, AppError> {
        let mut rng = ctx.rng();
        let mut images: Vec<Option<Vec<u8>>> = Vec::new();
        let mut buffers = Vec::new();
        for (index, spec) in self.manifest.buffers.iter().enumerate() {
            let len = self.manifest.plan(ctx.size()).lengths[index];
            let buffer = ctx.alloc(&spec.name, len * spec.elem.bytes())?;
            let image = self.image(ctx.size(), &mut rng, index, &images);
            if let Some(image) = &image {
                ctx.write(&spec.name, buffer, image)?;
            }
            images.push(image);
            buffers.push(buffer);
        }
        Ok(buffers)
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

    fn patched(&self, files: &[PatchedFile]) -> Result<Arc<dyn App>, Unpatchable> {
        let source = replaced_texts(&self.source, files)?;
        let program = match self.program.compiles_from_disk() {
            false => self.program.clone(),
            true => self.replaced_program(files),
        };
        Ok(Arc::new(ManifestApp {
            manifest: self.manifest.clone(),
            source,
            program,
            lowered: Arc::default(),
        }))
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

    fn manifest(&self) -> Option<&Manifest> {
        Some(&self.manifest)
    }

    fn resolved_kernel(&self, size: Size, kernel: &str) -> String {
        self.lowered(&self.lowered_names(size), kernel)
    }

    fn kernels(&self, size: Size) -> Vec<String> {
        let names = self.lowered_names(size);
        let kernels = self.manifest.app_kernels();
        kernels.iter().map(|k| self.lowered(&names, k)).collect()
    }

    fn parameters(&self, size: Size) -> Vec<(String, i64)> {
        self.manifest
            .params(size)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// The compiled app files without the check kernel (unless the app launches it too), so
    /// that fence sites and the stress harness only ever see app code.
    fn module(&self, arch: &str, size: Size) -> Result<Module, AppError> {
        let checked = self.checked(size, arch)?;
        let mut module = match self.program.has_check_files() {
            true => self.compile(Unit::App, size, arch)?,
            false => checked,
        };
        let check = &self.manifest.check.launch.kernel;
        if !self.manifest.launches.iter().any(|l| &l.kernel == check) {
            let check = self.lowered(&self.lowered_names(size), check);
            module.items.retain(|item| {
                !matches!(item, Item::Function(f) if f.kind == FunctionKind::Entry && f.name == check)
            });
        }
        Ok(module)
    }

    fn check_module(&self, arch: &str, size: Size) -> Result<Option<Module>, AppError> {
        self.checked(size, arch).map(Some)
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Verdict, AppError> {
        let buffers = self.fill(ctx)?;
        let plan = self.manifest.plan(ctx.size());
        let names = self.lowered_names(ctx.size());
        for launch in &plan.launches {
            let kernel = self.lowered(&names, &launch.kernel);
            ctx.launch(&kernel, launch.config, args(launch, &buffers))?;
        }
        let check = &plan.check;
        let result = self.manifest.check.result;
        let spec = &self.manifest.buffers[result];
        ctx.write(&spec.name, buffers[result], &[UNWRITTEN_RESULT])?;
        let check_kernel = self.lowered(&names, &check.kernel);
        ctx.launch_check(&check_kernel, check.config, &args(check, &buffers))?;

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
