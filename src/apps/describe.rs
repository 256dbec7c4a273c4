//! What `gpuwmm apps NAME` and `gpuwmm apps --app-dir DIR` show: an app as a check reads it.
//!
//! [`describe`] compiles the app at both sizes and resolves its launches against the kernels
//! compiled, as a check does before its first run, so a wrong kernel name, a wrong argument count
//! or a source NVRTC refuses is the error a check would give (naming the manifest's file and
//! line). What it returns is what was read: sizes, buffers, launches and the check.

use super::manifest::{Init, PlannedArg, PlannedLaunch};
use super::{App, AppError, Size, DEFAULT_ARCH};
use crate::backend::{KernelArg, LaunchConfig};
use std::fmt::{self, Display, Formatter};
use std::path::PathBuf;

/// An app as a check reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppDescription {
    pub name: String,
    pub description: String,
    pub postcondition: String,
    /// The app's source files (the first one first).
    pub sources: Vec<PathBuf>,
    /// The manifest, for an app described by one.
    pub manifest: Option<PathBuf>,
    /// Per input size, `sim` then `gpu`.
    pub sizes: Vec<SizeDescription>,
    /// What looks wrong but compiles: a define no file of the app mentions.
    pub warnings: Vec<String>,
}

/// What the app is at one input size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeDescription {
    pub size: Size,
    pub parameters: Vec<(String, i64)>,
    /// The kernels the app launches, as compiled (their PTX names), in launch order.
    pub kernels: Vec<String>,
    /// `None` for an app written in Rust, whose host code is in the binary.
    pub host: Option<HostDescription>,
}

/// What a manifest's host side does at one size.
#[derive(Debug, Clone, PartialEq)]
pub struct HostDescription {
    pub buffers: Vec<BufferDescription>,
    pub launches: Vec<LaunchDescription>,
    pub check: LaunchDescription,
    /// The buffer whose first word is the check's verdict.
    pub result: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BufferDescription {
    pub name: String,
    pub elem: &'static str,
    pub length: usize,
    /// How it is filled before each run, as the manifest says it.
    pub init: String,
}

/// A launch entry of the manifest at one size (all its repetitions).
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchDescription {
    /// Where it is declared: `launches[0]`, `check`.
    pub field: String,
    /// The kernel as the manifest names it.
    pub kernel: String,
    /// The kernel it resolved to in the compiled module (its PTX name).
    pub resolved: String,
    /// Grid, block and shared bytes of its first repetition.
    pub config: LaunchConfig,
    /// The arguments of each repetition that differs from the one before (step, arguments).
    pub args: Vec<(usize, Vec<String>)>,
    /// How many times it is launched in a row.
    pub repeat: usize,
}

/// `app` compiled at both sizes with its launches resolved against the kernels compiled: the
/// errors a check would give before its first run, or what was read.
pub fn describe(app: &dyn App) -> Result<AppDescription, AppError> {
    let mut sizes = Vec::new();
    for size in [Size::Sim, Size::Gpu] {
        app.module(DEFAULT_ARCH, size)?;
        app.check_module(DEFAULT_ARCH, size)?;
        sizes.push(SizeDescription {
            size,
            parameters: app.parameters(size),
            kernels: app.kernels(size),
            host: host(app, size),
        });
    }
    Ok(AppDescription {
        name: app.name().to_string(),
        description: app.description().to_string(),
        postcondition: app.postcondition().to_string(),
        sources: app.source().files().map(|(p, _)| p.to_path_buf()).collect(),
        manifest: app.manifest().map(|m| m.file.clone()),
        sizes,
        warnings: app
            .manifest()
            .map(|m| m.unused_defines())
            .unwrap_or_default(),
    })
}

/// The manifest's host side at `size`, its kernels resolved.
fn host(app: &dyn App, size: Size) -> Option<HostDescription> {
    let manifest = app.manifest()?;
    let plan = manifest.plan(size);
    let buffers: Vec<BufferDescription> = (manifest.buffers.iter().zip(&plan.lengths))
        .map(|(spec, &length)| BufferDescription {
            name: spec.name.clone(),
            elem: spec.elem.name(),
            length,
            init: init_text(&spec.init, spec.file.as_ref(), &manifest.buffers),
        })
        .collect();
    let names: Vec<String> = buffers.iter().map(|b| b.name.clone()).collect();
    let mut launches: Vec<LaunchDescription> = Vec::new();
    for planned in &plan.launches {
        let args = args_text(planned, &names);
        match launches.last_mut() {
            Some(last) if last.field == planned.field => {
                if last.args.last().is_some_and(|(_, a)| *a != args) {
                    last.args.push((last.repeat, args));
                }
                last.repeat += 1;
            }
            _ => launches.push(launch(app, size, planned, args)),
        }
    }
    let check = launch(app, size, &plan.check, args_text(&plan.check, &names));
    Some(HostDescription {
        buffers,
        launches,
        check,
        result: names[manifest.check.result].clone(),
    })
}

fn launch(
    app: &dyn App,
    size: Size,
    planned: &PlannedLaunch,
    args: Vec<String>,
) -> LaunchDescription {
    LaunchDescription {
        field: planned.field.clone(),
        kernel: planned.kernel.clone(),
        resolved: app.resolved_kernel(size, &planned.kernel),
        config: planned.config,
        args: vec![(0, args)],
        repeat: 1,
    }
}

fn args_text(planned: &PlannedLaunch, buffers: &[String]) -> Vec<String> {
    (planned.args.iter())
        .map(|arg| match arg {
            PlannedArg::Buffer(i) => buffers[*i].clone(),
            PlannedArg::Scalar(s) => scalar_text(s),
        })
        .collect()
}

fn scalar_text(arg: &KernelArg) -> String {
    match arg {
        KernelArg::U32(v) => format!("{v}u32"),
        KernelArg::I32(v) => format!("{v}"),
        KernelArg::U64(v) => format!("{v}u64"),
        KernelArg::F32(v) => format!("{v}f32"),
        KernelArg::F64(v) => format!("{v}f64"),
        KernelArg::Pointer(..) => "pointer".to_string(),
    }
}

fn init_text(
    init: &Init,
    file: Option<&PathBuf>,
    buffers: &[super::manifest::BufferSpec],
) -> String {
    match init {
        Init::Zero => "zero".to_string(),
        Init::Constant(v) => format!("constant {v}"),
        Init::ConstantFloat(x) => format!("constant {x}"),
        Init::Iota => "iota".to_string(),
        Init::RandomInt { lo, hi } => format!("random in [{lo}, {hi}]"),
        Init::RandomFloat { lo, hi } => format!("random float in [{lo}, {hi})"),
        Init::Data(_) => match file {
            Some(file) => format!("from file {}", file.display()),
            None => "values given".to_string(),
        },
        Init::Copy(source) => format!("copy of {}", buffers[*source].name),
    }
}

/// How many steps of a repeated launch whose arguments change are shown before the last.
const SHOWN_STEPS: usize = 3;

fn dims(d: (u32, u32, u32)) -> String {
    match d {
        (x, 1, 1) => x.to_string(),
        (x, y, 1) => format!("({x}, {y})"),
        (x, y, z) => format!("({x}, {y}, {z})"),
    }
}

impl Display for AppDescription {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let one_line = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        writeln!(f, "{}", self.name)?;
        writeln!(f, "    idiom:          {}", one_line(&self.description))?;
        writeln!(f, "    post-condition: {}", one_line(&self.postcondition))?;
        if let Some(manifest) = &self.manifest {
            writeln!(f, "    manifest:       {}", manifest.display())?;
        }
        for (i, source) in self.sources.iter().enumerate() {
            let label = if i == 0 { "source:" } else { "" };
            writeln!(f, "    {label:<16}{}", source.display())?;
        }
        for size in &self.sizes {
            write!(f, "{size}")?;
        }
        for warning in &self.warnings {
            writeln!(f, "{warning}")?;
        }
        writeln!(
            f,
            "compiled and resolved at both sizes, as a check reads it"
        )
    }
}

impl Display for SizeDescription {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let params: Vec<String> = (self.parameters.iter())
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        writeln!(f, "size {}: {}", self.size.name(), params.join(", "))?;
        let Some(host) = &self.host else {
            writeln!(
                f,
                "    kernels: {} (host code in Rust)",
                self.kernels.join(", ")
            )?;
            return Ok(());
        };
        writeln!(f, "    buffers:")?;
        for b in &host.buffers {
            writeln!(
                f,
                "      {:<12} {} x {:<8} {}",
                b.name, b.elem, b.length, b.init
            )?;
        }
        writeln!(f, "    launches:")?;
        for launch in &host.launches {
            write!(f, "{launch}")?;
        }
        writeln!(f, "    check (verdict in {}[0], 0 = pass):", host.result)?;
        write!(f, "{}", host.check)
    }
}

impl Display for LaunchDescription {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let resolved = match self.resolved == self.kernel {
            true => String::new(),
            false => format!(" -> {}", self.resolved),
        };
        let repeat = match self.repeat {
            1 => String::new(),
            n => format!(", repeat {n}"),
        };
        let shared = match self.config.shared_bytes {
            0 => String::new(),
            n => format!(", shared {n} bytes"),
        };
        let cooperative = match self.config.cooperative {
            true => ", cooperative",
            false => "",
        };
        writeln!(
            f,
            "      {}: {}{resolved}, grid {}, block {}{shared}{cooperative}{repeat}",
            self.field,
            self.kernel,
            dims(self.config.grid),
            dims(self.config.block),
        )?;
        // The first steps and the last, when the arguments change at every step.
        let shown = self.args.len() <= SHOWN_STEPS + 1;
        for (i, (step, args)) in self.args.iter().enumerate() {
            if !shown && i == SHOWN_STEPS {
                writeln!(f, "        …")?;
            }
            if !shown && i >= SHOWN_STEPS && i + 1 < self.args.len() {
                continue;
            }
            let when = match self.repeat {
                1 => String::new(),
                _ => format!(" (step {step})"),
            };
            writeln!(f, "        args{when}: {}", args.join(", "))?;
        }
        Ok(())
    }
}
