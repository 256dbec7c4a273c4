//! The `app.toml` manifest of a bring-your-own application.
//!
//! A user brings an app as a folder holding `kernel.cu` and `app.toml`. The manifest says what the
//! host side of the app does (no Rust needed): named size parameters, buffers and how to
//! initialise them, the launches in order, and a CUDA check kernel (in the same `kernel.cu`) that
//! runs after the app on the same buffers and writes 0 (pass) or a failure code into a result
//! word. See `apps/README.md` for the format with an example.
//!
//! The manifest is read in three steps, one file each: `raw` (serde reads the TOML into structs
//! that say which keys each table may hold), `validate` (what the keys mean: names, types,
//! expressions) and `plan` (every expression evaluated for one size). It is read eagerly: every
//! expression is evaluated for both sizes when the manifest is read, so a bad manifest fails at
//! load time with an error that names the file and the field (`launches[0].args[2]: unknown
//! buffer or parameter 'ouput'`), and a run can no longer fail because of the manifest.
//! [`Manifest::check_module`] adds the
//! checks that need the compiled kernels (kernel names, parameter counts and sizes).

mod data;
mod error;
mod plan;
mod raw;
mod unused;
mod validate;

pub use error::{ManifestError, Problem};

use super::expr::Expr;
use super::words::ElemType;
use super::Size;
use crate::backend::{KernelArg, LaunchConfig};
use crate::ptx::{FunctionKind, Module};
use error::FieldErrors;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The largest buffer a manifest may declare, in bytes (its host-side image is built in memory).
pub const MAX_BUFFER_BYTES: i64 = 1 << 31;

/// What word 0 of the result buffer holds when the check kernel starts: a value no check
/// writes (refused as a failure code), so a check kernel that never writes its result cannot
/// pass by leaving the zero of the allocation there.
pub const UNWRITTEN_RESULT: u32 = 0xDEAD_BEEF;

/// How a buffer is filled before each run.
#[derive(Debug, Clone, PartialEq)]
pub enum Init {
    Zero,
    /// Every element the same integer.
    Constant(i64),
    /// Every element the same float (`f32` buffers only).
    ConstantFloat(f64),
    /// 0, 1, 2, ...
    Iota,
    /// Uniform integers in `lo..=hi` (integer-valued floats for `f32`), from the run's input seed.
    RandomInt {
        lo: i64,
        hi: i64,
    },
    /// Uniform floats in `lo..hi` (`f32` buffers only), from the run's input seed.
    RandomFloat {
        lo: f64,
        hi: f64,
    },
    /// Given elements (a literal list, or a file's contents), as the buffer's little-endian
    /// image; a buffer takes the first `length` of them (there are at least as many at each size).
    Data(Vec<u8>),
    /// The initial contents of buffer number `.0` (declared earlier, of the same type and at
    /// least as long at each size), its first `length` elements.
    Copy(usize),
}

/// A declared buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferSpec {
    pub name: String,
    pub elem: ElemType,
    pub length: Expr,
    pub init: Init,
    /// The data file `init` was read from (`{ file = "..." }`), as the manifest names it
    /// (relative to its folder).
    pub file: Option<PathBuf>,
}

/// A launch argument as written.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgSpec {
    /// The device address of buffer number `.0`.
    Buffer(usize),
    /// An integer scalar of the given type (a bare name or expression is a 32-bit integer).
    Int { ty: ElemType, value: Expr },
    /// An `f32` scalar.
    Float(f64),
}

/// A launch as written.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    /// Where it was declared (`launches[0]`, `check`), for error messages.
    pub field: String,
    /// The kernel's C++ name as written: a name, or a template instance (`reduce<128, true>`).
    pub kernel: String,
    /// How many times the launch is made in a row (`repeat`); its expressions may use
    /// [`STEP`], 0 for the first. `None`: once, and `step` is not defined.
    pub repeat: Option<Expr>,
    pub grid: [Expr; 3],
    pub block: [Expr; 3],
    pub shared_bytes: Expr,
    /// A cooperative launch (`cudaLaunchCooperativeKernel`), for a kernel that synchronises
    /// its whole grid with `cooperative_groups::this_grid().sync()`.
    pub cooperative: bool,
    pub args: Vec<ArgSpec>,
}

/// The post-condition: a check kernel and the word it reports in.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSpec {
    pub launch: LaunchSpec,
    /// The buffer whose first element is the result (0 = pass).
    pub result: usize,
    /// Meanings of failure codes, for the failure reason.
    pub codes: BTreeMap<u32, String>,
}

/// A launch argument resolved for one size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PlannedArg {
    Buffer(usize),
    /// A scalar (never [`KernelArg::Pointer`]).
    Scalar(KernelArg),
}

/// A launch resolved for one size (one step of a repeated launch).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedLaunch {
    /// The launch entry it comes from (`launches[1]`, `check`).
    pub field: String,
    /// The kernel's C++ name as written in the manifest.
    pub kernel: String,
    pub config: LaunchConfig,
    pub args: Vec<PlannedArg>,
}

/// Everything the manifest says, evaluated for one size.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Element count of each buffer, in declaration order.
    pub lengths: Vec<usize>,
    /// The preprocessor defines of `[source]`, evaluated: `-DNAME=value` (a flag's value is
    /// `1`, which `-DNAME` means); a define set to `false` is not among them.
    pub defines: Vec<(String, String)>,
    pub launches: Vec<PlannedLaunch>,
    pub check: PlannedLaunch,
}

/// The name a repeated launch's expressions use for its step: 0, 1, ..., `repeat - 1`.
pub const STEP: &str = "step";

/// The source files the app is compiled from (`[source]`), relative to the manifest's folder.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSpec {
    /// Compiled together, in order, as one translation unit.
    pub files: Vec<PathBuf>,
    /// Compiled after `files` into the check module only (the check kernel's own files).
    pub check_files: Vec<PathBuf>,
    /// Folders searched by `#include`, after the app's folder.
    pub include: Vec<PathBuf>,
    /// `-D NAME=value`, in order (a define set to `false` is left out).
    pub defines: Vec<(String, Define)>,
    /// Whether the manifest has a `[source]` table (without one: `kernel.cu`, compiled alone).
    pub declared: bool,
}

/// The value of a define of `[source]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Define {
    /// `NAME = 4`, `NAME = "blocks*2"`: an expression over the size's parameters.
    Size(Expr),
    /// `NAME = true`: `-DNAME`.
    Flag,
    /// `NAME = { text = "float" }`: `-DNAME=float`, the text as it is.
    Text(String),
}

impl Default for SourceSpec {
    fn default() -> SourceSpec {
        SourceSpec {
            files: vec![PathBuf::from("kernel.cu")],
            check_files: Vec::new(),
            include: Vec::new(),
            defines: Vec::new(),
            declared: false,
        }
    }
}

/// A parsed, validated `app.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The manifest file, as given.
    pub file: PathBuf,
    /// Its text (errors found later name the line of their field in it).
    pub text: String,
    pub name: String,
    pub description: String,
    pub postcondition: String,
    pub source: SourceSpec,
    pub sim_params: BTreeMap<String, i64>,
    pub gpu_params: BTreeMap<String, i64>,
    pub buffers: Vec<BufferSpec>,
    pub launches: Vec<LaunchSpec>,
    pub check: CheckSpec,
    pub sim: Plan,
    pub gpu: Plan,
}

impl Manifest {
    /// Reads and validates `file`.
    pub fn load(file: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(file).map_err(|source| ManifestError::Io {
            file: file.to_path_buf(),
            source,
        })?;
        Manifest::parse(file, &text)
    }

    /// Parses and validates manifest `text`; errors name `file`.
    pub fn parse(file: &Path, text: &str) -> Result<Manifest, ManifestError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ManifestError::Syntax {
                    file: file.to_path_buf(),
                    message: e.to_string().trim_end().to_string(),
                })?;
        let errors = FieldErrors {
            file: file.to_path_buf(),
        };
        let read = raw::read(text, &table, &errors).map_err(|e| e.located(text))?;
        let mut manifest = validate::validate(read, &errors).map_err(|e| e.located(text))?;
        manifest.text = text.to_string();
        Ok(manifest)
    }

    pub fn params(&self, size: Size) -> &BTreeMap<String, i64> {
        match size {
            Size::Sim => &self.sim_params,
            Size::Gpu => &self.gpu_params,
        }
    }

    pub fn plan(&self, size: Size) -> &Plan {
        match size {
            Size::Sim => &self.sim,
            Size::Gpu => &self.gpu,
        }
    }

    /// The folder the manifest is in, which its relative paths start from.
    pub fn dir(&self) -> &Path {
        self.file.parent().unwrap_or(Path::new("."))
    }

    /// An error about `field` of this manifest, with its line.
    pub fn field_error(&self, field: String, problem: Problem) -> ManifestError {
        ManifestError::Field {
            file: self.file.clone(),
            line: None,
            field,
            problem: Box::new(problem),
        }
        .located(&self.text)
    }

    /// The app's source files as the manifest names them, for messages.
    pub fn source_names(&self) -> String {
        let names: Vec<String> = (self.source.files.iter().chain(&self.source.check_files))
            .map(|f| f.display().to_string())
            .collect();
        names.join(", ")
    }

    /// Every kernel name the manifest uses (launches, then the check), without duplicates.
    pub fn all_kernels(&self) -> Vec<String> {
        let mut names = self.app_kernels();
        if !names.contains(&self.check.launch.kernel) {
            names.push(self.check.launch.kernel.clone());
        }
        names
    }

    /// The kernels the app launches, in order, without duplicates.
    pub fn app_kernels(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        self.launches
            .iter()
            .filter(|l| seen.insert(l.kernel.clone()))
            .map(|l| l.kernel.clone())
            .collect()
    }

    /// Checks the launches against the compiled kernels: every kernel exists, and the arguments
    /// match its parameters in number and size. `lowered` gives the PTX name of a kernel name
    /// as written (the name itself where it has none).
    pub fn check_module(
        &self,
        module: &Module,
        lowered: &dyn Fn(&str) -> String,
    ) -> Result<(), ManifestError> {
        let kernels: Vec<String> = module
            .functions()
            .filter(|f| f.kind == FunctionKind::Entry)
            .map(|f| crate::ptx::demangle::call_name(&f.name))
            .collect();
        let launches = self.sim.launches.iter().chain([&self.sim.check]);
        for planned in launches {
            let error = |field: String, problem| self.field_error(field, problem);
            let spec = planned;
            let Some(function) = module.function(&lowered(&spec.kernel)) else {
                return Err(error(
                    format!("{}.kernel", spec.field),
                    Problem::NoSuchKernel {
                        name: spec.kernel.clone(),
                        detail: String::new(),
                        kernels: kernels.join(", "),
                        source: self.source_names(),
                    },
                ));
            };
            if function.params.len() != planned.args.len() {
                return Err(error(
                    format!("{}.args", spec.field),
                    Problem::ParameterCount {
                        kernel: spec.kernel.clone(),
                        expected: function.params.len(),
                        found: planned.args.len(),
                    },
                ));
            }
            for (i, (param, arg)) in function.params.iter().zip(&planned.args).enumerate() {
                let found = match arg {
                    PlannedArg::Buffer(_) => 8,
                    PlannedArg::Scalar(s) => s.bytes().len(),
                };
                if let Some(expected) = param_bytes(&param.decl) {
                    if expected != found {
                        return Err(error(
                            format!("{}.args[{i}]", spec.field),
                            Problem::ParameterSize {
                                kernel: spec.kernel.clone(),
                                expected_bytes: expected,
                                found_bytes: found,
                            },
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The size of a scalar `.param` from its declaration, if it is a plain scalar.
fn param_bytes(decl: &str) -> Option<usize> {
    if decl.contains('[') {
        return None;
    }
    decl.split_whitespace().find_map(|word| match word {
        ".u64" | ".s64" | ".b64" | ".f64" => Some(8),
        ".u32" | ".s32" | ".b32" | ".f32" => Some(4),
        ".u16" | ".s16" | ".b16" | ".f16" => Some(2),
        ".u8" | ".s8" | ".b8" => Some(1),
        _ => None,
    })
}
