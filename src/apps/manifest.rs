//! The `app.toml` manifest of a bring-your-own application.
//!
//! A user brings an app as a folder holding `kernel.cu` and `app.toml`. The manifest says what the
//! host side of the app does (no Rust needed): named size parameters, buffers and how to
//! initialise them, the launches in order, and a CUDA check kernel (in the same `kernel.cu`) that
//! runs after the app on the same buffers and writes 0 (pass) or a failure code into a result
//! word. See `apps/README.md` for the format with an example.
//!
//! This file parses and validates the manifest eagerly: every expression is evaluated for both
//! sizes when the manifest is read, so a bad manifest fails at load time with an error that
//! names the file and the field (`launches[0].args[2]: unknown buffer or parameter 'ouput'`),
//! and a run can no longer fail because of the manifest. [`Manifest::check_module`] adds the
//! checks that need the compiled kernels (kernel names, parameter counts and sizes).

use super::expr::{is_identifier, EvalError, Expr};
use super::words::ElemType;
use super::Size;
use crate::backend::{KernelArg, LaunchConfig};
use crate::ptx::{FunctionKind, Module};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;
use toml::{Table, Value};

/// The largest buffer a manifest may declare, in bytes (its host-side image is built in memory).
pub const MAX_BUFFER_BYTES: i64 = 1 << 31;

/// A manifest that could not be read, with the file it came from.
#[derive(Debug, Error)]
pub enum ManifestError {
    #[error("cannot read {}", .file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: invalid TOML: {message}", .file.display())]
    Syntax { file: PathBuf, message: String },
    #[error("{}: {field}: {problem}", .file.display())]
    Field {
        file: PathBuf,
        /// The offending field, e.g. `buffers[1].length` or `launches[0].args[2]`.
        field: String,
        problem: Problem,
    },
}

impl ManifestError {
    /// The field a [`ManifestError::Field`] is about.
    pub fn field(&self) -> Option<&str> {
        match self {
            ManifestError::Field { field, .. } => Some(field),
            _ => None,
        }
    }

    pub fn problem(&self) -> Option<&Problem> {
        match self {
            ManifestError::Field { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    Missing {
        expected: String,
    },
    UnknownKey {
        allowed: String,
    },
    WrongType {
        expected: String,
        found: String,
    },
    BadElementType {
        found: String,
    },
    UnknownBuffer {
        name: String,
        known: String,
    },
    UnknownParameter {
        name: String,
        size: Size,
        known: String,
    },
    UnknownBufferOrParameter {
        name: String,
        buffers: String,
        parameters: String,
    },
    BadExpression {
        message: String,
    },
    Duplicate {
        name: String,
    },
    BadValue {
        message: String,
    },
    NoSuchKernel {
        name: String,
        kernels: String,
    },
    ParameterCount {
        kernel: String,
        expected: usize,
        found: usize,
    },
    ParameterSize {
        kernel: String,
        expected_bytes: usize,
        found_bytes: usize,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Missing { expected } => write!(f, "missing (expected {expected})"),
            Problem::UnknownKey { allowed } => write!(f, "unknown key (allowed here: {allowed})"),
            Problem::WrongType { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            Problem::BadElementType { found } => write!(
                f,
                "unknown element type '{found}' (expected u32, i32, f32 or u64)"
            ),
            Problem::UnknownBuffer { name, known } => {
                write!(f, "unknown buffer '{name}' (buffers: {known})")
            }
            Problem::UnknownParameter { name, size, known } => write!(
                f,
                "unknown parameter '{name}' (parameters of size {size}: {known})"
            ),
            Problem::UnknownBufferOrParameter {
                name,
                buffers,
                parameters,
            } => write!(
                f,
                "unknown buffer or parameter '{name}' (buffers: {buffers}; parameters: {parameters})"
            ),
            Problem::BadExpression { message } => write!(f, "bad expression: {message}"),
            Problem::Duplicate { name } => write!(f, "'{name}' is declared twice"),
            Problem::BadValue { message } => f.write_str(message),
            Problem::NoSuchKernel { name, kernels } => {
                write!(f, "no kernel '{name}' in kernel.cu (kernels: {kernels})")
            }
            Problem::ParameterCount {
                kernel,
                expected,
                found,
            } => write!(
                f,
                "kernel '{kernel}' takes {expected} parameters, but {found} arguments are given"
            ),
            Problem::ParameterSize {
                kernel,
                expected_bytes,
                found_bytes,
            } => write!(
                f,
                "kernel '{kernel}' takes a {expected_bytes}-byte parameter here, but the argument \
                 is {found_bytes} bytes (buffers are 8-byte pointers; a bare parameter name or \
                 expression is a 32-bit integer; write {{ u64 = \"...\" }} for 64 bits)"
            ),
        }
    }
}

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
}

/// A declared buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferSpec {
    pub name: String,
    pub elem: ElemType,
    pub length: Expr,
    pub init: Init,
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
    pub kernel: String,
    pub grid: [Expr; 3],
    pub block: [Expr; 3],
    pub shared_bytes: Expr,
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

/// A launch resolved for one size.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedLaunch {
    pub kernel: String,
    pub config: LaunchConfig,
    pub args: Vec<PlannedArg>,
}

/// Everything the manifest says, evaluated for one size.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Element count of each buffer, in declaration order.
    pub lengths: Vec<usize>,
    pub launches: Vec<PlannedLaunch>,
    pub check: PlannedLaunch,
}

/// A parsed, validated `app.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The manifest file, as given.
    pub file: PathBuf,
    pub name: String,
    pub description: String,
    pub postcondition: String,
    pub sim_params: BTreeMap<String, i64>,
    pub gpu_params: BTreeMap<String, i64>,
    pub buffers: Vec<BufferSpec>,
    pub launches: Vec<LaunchSpec>,
    pub check: CheckSpec,
    pub sim: Plan,
    pub gpu: Plan,
}

const TOP_KEYS: &str = "name, description, postcondition, sizes, buffers, launches, check";
const BUFFER_KEYS: &str = "name, type, length, init";
const LAUNCH_KEYS: &str = "kernel, grid, block, shared_bytes, args";
const CHECK_KEYS: &str = "kernel, grid, block, shared_bytes, args, result, codes";

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
        let table: Table = text
            .parse()
            .map_err(|e: toml::de::Error| ManifestError::Syntax {
                file: file.to_path_buf(),
                message: e.to_string().trim_end().to_string(),
            })?;
        Reader {
            file: file.to_path_buf(),
        }
        .manifest(&table)
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
    /// match its parameters in number and size.
    pub fn check_module(&self, module: &Module) -> Result<(), ManifestError> {
        let kernels: Vec<&str> = module
            .functions()
            .filter(|f| f.kind == FunctionKind::Entry)
            .map(|f| f.name.as_str())
            .collect();
        let launches = self
            .launches
            .iter()
            .zip(&self.sim.launches)
            .chain(std::iter::once((&self.check.launch, &self.sim.check)));
        for (spec, planned) in launches {
            let error = |field: String, problem| ManifestError::Field {
                file: self.file.clone(),
                field,
                problem,
            };
            let Some(function) = module.function(&spec.kernel) else {
                return Err(error(
                    format!("{}.kernel", spec.field),
                    Problem::NoSuchKernel {
                        name: spec.kernel.clone(),
                        kernels: kernels.join(", "),
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

fn type_name(value: &Value) -> String {
    match value {
        Value::String(s) => format!("the string \"{s}\""),
        Value::Integer(i) => format!("the integer {i}"),
        Value::Float(x) => format!("the float {x}"),
        Value::Boolean(b) => format!("the boolean {b}"),
        Value::Datetime(_) => "a date".to_string(),
        Value::Array(_) => "an array".to_string(),
        Value::Table(_) => "a table".to_string(),
    }
}

fn join_keys<'a>(keys: impl IntoIterator<Item = &'a String>) -> String {
    let v: Vec<&str> = keys.into_iter().map(String::as_str).collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// Reads the TOML table, building errors that name the file and field.
struct Reader {
    file: PathBuf,
}

type R<T> = Result<T, ManifestError>;

impl Reader {
    fn err(&self, field: impl Into<String>, problem: Problem) -> ManifestError {
        ManifestError::Field {
            file: self.file.clone(),
            field: field.into(),
            problem,
        }
    }

    fn bad_value(&self, field: impl Into<String>, message: impl Into<String>) -> ManifestError {
        self.err(
            field,
            Problem::BadValue {
                message: message.into(),
            },
        )
    }

    fn wrong_type(&self, field: &str, expected: &str, found: &Value) -> ManifestError {
        self.err(
            field,
            Problem::WrongType {
                expected: expected.to_string(),
                found: type_name(found),
            },
        )
    }

    fn only_keys(&self, table: &Table, prefix: &str, allowed: &str) -> R<()> {
        let names: Vec<&str> = allowed.split(", ").collect();
        match table.keys().find(|k| !names.contains(&k.as_str())) {
            Some(key) => Err(self.err(
                join_field(prefix, key),
                Problem::UnknownKey {
                    allowed: allowed.to_string(),
                },
            )),
            None => Ok(()),
        }
    }

    fn required<'t>(
        &self,
        table: &'t Table,
        prefix: &str,
        key: &str,
        expected: &str,
    ) -> R<&'t Value> {
        table.get(key).ok_or_else(|| {
            self.err(
                join_field(prefix, key),
                Problem::Missing {
                    expected: expected.to_string(),
                },
            )
        })
    }

    fn string(&self, table: &Table, prefix: &str, key: &str) -> R<String> {
        let field = join_field(prefix, key);
        match self.required(table, prefix, key, "a string")? {
            Value::String(s) => Ok(s.clone()),
            other => Err(self.wrong_type(&field, "a string", other)),
        }
    }

    fn table<'t>(&self, value: &'t Value, field: &str) -> R<&'t Table> {
        value
            .as_table()
            .ok_or_else(|| self.wrong_type(field, "a table", value))
    }

    fn manifest(&self, top: &Table) -> R<Manifest> {
        self.only_keys(top, "", TOP_KEYS)?;
        let name = self.string(top, "", "name")?;
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(self.bad_value("name", "an app name must be non-empty, without spaces"));
        }
        let description = self.string(top, "", "description")?;
        let postcondition = self.string(top, "", "postcondition")?;

        let sizes = self.required(top, "", "sizes", "a table with `sim` and `gpu`")?;
        let sizes = self.table(sizes, "sizes")?;
        self.only_keys(sizes, "sizes", "sim, gpu")?;
        let sim_params = self.params(sizes, "sim")?;
        let gpu_params = self.params(sizes, "gpu")?;
        let params = [(Size::Sim, &sim_params), (Size::Gpu, &gpu_params)];

        let buffers = self.buffers(top, &params)?;
        let scope = Scope {
            buffers: &buffers,
            params,
        };

        let launches =
            match self.required(top, "", "launches", "an array of [[launches]] tables")? {
                Value::Array(items) if !items.is_empty() => items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let field = format!("launches[{i}]");
                        let t = self.table(v, &field)?;
                        self.only_keys(t, &field, LAUNCH_KEYS)?;
                        self.launch(t, &field, &scope, false)
                    })
                    .collect::<R<Vec<_>>>()?,
                Value::Array(_) => {
                    return Err(self.bad_value("launches", "at least one launch is needed"))
                }
                other => {
                    return Err(self.wrong_type(
                        "launches",
                        "an array of [[launches]] tables",
                        other,
                    ))
                }
            };

        let check = self.required(top, "", "check", "a [check] table")?;
        let check = self.table(check, "check")?;
        self.only_keys(check, "check", CHECK_KEYS)?;
        let launch = self.launch(check, "check", &scope, true)?;
        let result_name = self.string(check, "check", "result")?;
        let result = buffers
            .iter()
            .position(|b| b.name == result_name)
            .ok_or_else(|| {
                self.err(
                    "check.result",
                    Problem::UnknownBuffer {
                        name: result_name.clone(),
                        known: join_keys(buffers.iter().map(|b| &b.name)),
                    },
                )
            })?;
        if !matches!(buffers[result].elem, ElemType::U32 | ElemType::I32) {
            return Err(self.bad_value(
                "check.result",
                format!(
                    "the result buffer '{result_name}' must be u32 or i32, not {}",
                    buffers[result].elem
                ),
            ));
        }
        let codes = self.codes(check)?;
        let check = CheckSpec {
            launch,
            result,
            codes,
        };

        let sim = self.plan(Size::Sim, &scope, &launches, &check)?;
        let gpu = self.plan(Size::Gpu, &scope, &launches, &check)?;
        Ok(Manifest {
            file: self.file.clone(),
            name,
            description,
            postcondition,
            sim_params: sim_params.clone(),
            gpu_params: gpu_params.clone(),
            buffers,
            launches,
            check,
            sim,
            gpu,
        })
    }

    fn params(&self, sizes: &Table, size: &str) -> R<BTreeMap<String, i64>> {
        let field = format!("sizes.{size}");
        let value = self.required(sizes, "sizes", size, "a table of named integers")?;
        let table = self.table(value, &field)?;
        let mut params = BTreeMap::new();
        for (key, value) in table {
            let field = format!("{field}.{key}");
            if !is_identifier(key) {
                return Err(self.bad_value(field, format!("'{key}' is not a valid parameter name")));
            }
            match value {
                Value::Integer(i) => {
                    params.insert(key.clone(), *i);
                }
                other => return Err(self.wrong_type(&field, "an integer", other)),
            }
        }
        Ok(params)
    }

    fn buffers(
        &self,
        top: &Table,
        params: &[(Size, &BTreeMap<String, i64>); 2],
    ) -> R<Vec<BufferSpec>> {
        let items = match self.required(top, "", "buffers", "an array of [[buffers]] tables")? {
            Value::Array(items) => items,
            other => {
                return Err(self.wrong_type("buffers", "an array of [[buffers]] tables", other))
            }
        };
        let mut buffers: Vec<BufferSpec> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let field = format!("buffers[{i}]");
            let t = self.table(item, &field)?;
            self.only_keys(t, &field, BUFFER_KEYS)?;
            let name = self.string(t, &field, "name")?;
            if !is_identifier(&name) {
                return Err(self.bad_value(
                    format!("{field}.name"),
                    format!("'{name}' is not a valid buffer name (letters, digits, _)"),
                ));
            }
            if buffers.iter().any(|b| b.name == name) {
                return Err(self.err(format!("{field}.name"), Problem::Duplicate { name }));
            }
            if params.iter().any(|(_, p)| p.contains_key(&name)) {
                return Err(self.bad_value(
                    format!("{field}.name"),
                    format!("'{name}' is also a size parameter; rename one of them"),
                ));
            }
            let ty = self.string(t, &field, "type")?;
            let elem: ElemType = ty.parse().map_err(|_| {
                self.err(
                    format!("{field}.type"),
                    Problem::BadElementType { found: ty },
                )
            })?;
            let length_field = format!("{field}.length");
            let length = self.expr(
                self.required(t, &field, "length", "an integer or an expression")?,
                &length_field,
            )?;
            for (size, p) in params {
                let n = self.eval(&length, &length_field, *size, p)?;
                if n < 1 || n.saturating_mul(elem.bytes() as i64) > MAX_BUFFER_BYTES {
                    return Err(self.bad_value(
                        &length_field,
                        format!(
                            "length {n} at size {size} is out of range (1 to {} elements of {elem})",
                            MAX_BUFFER_BYTES / elem.bytes() as i64
                        ),
                    ));
                }
            }
            let init = match t.get("init") {
                None => Init::Zero,
                Some(v) => self.init(v, &format!("{field}.init"), elem)?,
            };
            buffers.push(BufferSpec {
                name,
                elem,
                length,
                init,
            });
        }
        Ok(buffers)
    }

    fn init(&self, value: &Value, field: &str, elem: ElemType) -> R<Init> {
        const EXPECTED: &str = "\"zero\", \"iota\", { constant = N }, { random = [LO, HI] } or \
                                { random_float = [LO, HI] }";
        let (lo_exact, hi_exact) = elem.exact_integer_range();
        let int_in_range = |v: i64, what: &str, field: &str| -> R<i64> {
            if (v as i128) < lo_exact || (v as i128) > hi_exact {
                Err(self.bad_value(
                    field,
                    format!(
                        "{what} {v} does not fit {elem} exactly (range {lo_exact} to {hi_exact})"
                    ),
                ))
            } else {
                Ok(v)
            }
        };
        match value {
            Value::String(s) if s == "zero" => Ok(Init::Zero),
            Value::String(s) if s == "iota" => Ok(Init::Iota),
            Value::Table(t) if t.len() == 1 => {
                let (key, v) = t.iter().next().expect("one entry");
                let field = format!("{field}.{key}");
                match (key.as_str(), v) {
                    ("constant", Value::Integer(i)) => {
                        Ok(Init::Constant(int_in_range(*i, "constant", &field)?))
                    }
                    ("constant", Value::Float(x)) if elem == ElemType::F32 && x.is_finite() => {
                        Ok(Init::ConstantFloat(*x))
                    }
                    ("constant", other) => Err(self.wrong_type(
                        &field,
                        if elem == ElemType::F32 {
                            "a finite number"
                        } else {
                            "an integer"
                        },
                        other,
                    )),
                    ("random", v) => {
                        let (lo, hi) = self.pair(v, &field)?;
                        let (Value::Integer(lo), Value::Integer(hi)) = (lo, hi) else {
                            return Err(self.wrong_type(&field, "two integers [LO, HI]", v));
                        };
                        let lo = int_in_range(*lo, "bound", &field)?;
                        let hi = int_in_range(*hi, "bound", &field)?;
                        if lo > hi {
                            return Err(self.bad_value(&field, format!("empty range [{lo}, {hi}]")));
                        }
                        Ok(Init::RandomInt { lo, hi })
                    }
                    ("random_float", v) => {
                        if elem != ElemType::F32 {
                            return Err(self.bad_value(
                                &field,
                                format!("random_float needs an f32 buffer, this one is {elem}"),
                            ));
                        }
                        let (lo, hi) = self.pair(v, &field)?;
                        let number = |x: &Value| match x {
                            Value::Integer(i) => Some(*i as f64),
                            Value::Float(f) if f.is_finite() => Some(*f),
                            _ => None,
                        };
                        let (Some(lo), Some(hi)) = (number(lo), number(hi)) else {
                            return Err(self.wrong_type(&field, "two finite numbers [LO, HI]", v));
                        };
                        if lo >= hi {
                            return Err(self.bad_value(&field, format!("empty range [{lo}, {hi})")));
                        }
                        Ok(Init::RandomFloat { lo, hi })
                    }
                    _ => Err(self.err(
                        &field,
                        Problem::UnknownKey {
                            allowed: "constant, random, random_float".to_string(),
                        },
                    )),
                }
            }
            other => Err(self.wrong_type(field, EXPECTED, other)),
        }
    }

    fn pair<'v>(&self, value: &'v Value, field: &str) -> R<(&'v Value, &'v Value)> {
        match value {
            Value::Array(a) if a.len() == 2 => Ok((&a[0], &a[1])),
            other => Err(self.wrong_type(field, "an array [LO, HI]", other)),
        }
    }

    fn expr(&self, value: &Value, field: &str) -> R<Expr> {
        match value {
            Value::Integer(i) => Ok(Expr::Number(*i)),
            Value::String(s) => Expr::parse(s)
                .map_err(|message| self.err(field, Problem::BadExpression { message })),
            other => Err(self.wrong_type(field, "an integer or an expression string", other)),
        }
    }

    fn eval(&self, expr: &Expr, field: &str, size: Size, params: &BTreeMap<String, i64>) -> R<i64> {
        expr.eval(params).map_err(|e| match e {
            EvalError::UnknownParameter(name) => self.err(
                field,
                Problem::UnknownParameter {
                    name,
                    size,
                    known: join_keys(params.keys()),
                },
            ),
            other => self.bad_value(field, format!("{other} at size {size} in '{expr}'")),
        })
    }

    /// A dimension: an integer, an expression, or an array of 1 to 3 of them.
    fn dims(&self, value: Option<&Value>, field: &str) -> R<[Expr; 3]> {
        let one = || Expr::Number(1);
        match value {
            None => Ok([one(), one(), one()]),
            Some(Value::Array(items)) if (1..=3).contains(&items.len()) => {
                let mut dims = [one(), one(), one()];
                for (i, item) in items.iter().enumerate() {
                    dims[i] = self.expr(item, &format!("{field}[{i}]"))?;
                }
                Ok(dims)
            }
            Some(Value::Array(_)) => Err(self.bad_value(field, "expected 1 to 3 dimensions")),
            Some(v) => Ok([self.expr(v, field)?, one(), one()]),
        }
    }

    fn launch(&self, t: &Table, field: &str, scope: &Scope, is_check: bool) -> R<LaunchSpec> {
        let kernel = self.string(t, field, "kernel")?;
        let dims_field = |key| join_field(field, key);
        let (grid, block) = if is_check {
            (
                self.dims(t.get("grid"), &dims_field("grid"))?,
                self.dims(t.get("block"), &dims_field("block"))?,
            )
        } else {
            (
                self.dims(
                    Some(self.required(t, field, "grid", "an integer, expression or [x, y, z]")?),
                    &dims_field("grid"),
                )?,
                self.dims(
                    Some(self.required(
                        t,
                        field,
                        "block",
                        "an integer, expression or [x, y, z]",
                    )?),
                    &dims_field("block"),
                )?,
            )
        };
        let shared_bytes = match t.get("shared_bytes") {
            None => Expr::Number(0),
            Some(v) => self.expr(v, &dims_field("shared_bytes"))?,
        };
        let args_field = dims_field("args");
        let args = match self.required(t, field, "args", "an array of arguments")? {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| self.arg(v, &format!("{args_field}[{i}]"), scope))
                .collect::<R<Vec<_>>>()?,
            other => return Err(self.wrong_type(&args_field, "an array of arguments", other)),
        };
        Ok(LaunchSpec {
            field: field.to_string(),
            kernel,
            grid,
            block,
            shared_bytes,
            args,
        })
    }

    fn arg(&self, value: &Value, field: &str, scope: &Scope) -> R<ArgSpec> {
        const EXPECTED: &str = "a buffer name, a parameter expression, or a typed scalar \
                                ({ u32 = ... }, { i32 = ... }, { u64 = ... }, { f32 = ... })";
        match value {
            Value::String(s) => {
                if let Some(i) = scope.buffers.iter().position(|b| &b.name == s) {
                    return Ok(ArgSpec::Buffer(i));
                }
                let expr = Expr::parse(s)
                    .map_err(|message| self.err(field, Problem::BadExpression { message }))?;
                self.check_names(&expr, field, scope)?;
                Ok(ArgSpec::Int {
                    ty: ElemType::I32,
                    value: expr,
                })
            }
            Value::Integer(i) => Ok(ArgSpec::Int {
                ty: ElemType::I32,
                value: Expr::Number(*i),
            }),
            Value::Table(t) if t.len() == 1 => {
                let (key, v) = t.iter().next().expect("one entry");
                let field = format!("{field}.{key}");
                let ty: ElemType = key.parse().map_err(|_| {
                    self.err(&field, Problem::BadElementType { found: key.clone() })
                })?;
                match (ty, v) {
                    (ElemType::F32, Value::Float(x)) if x.is_finite() => Ok(ArgSpec::Float(*x)),
                    (ElemType::F32, Value::Integer(i)) => Ok(ArgSpec::Float(*i as f64)),
                    (ElemType::F32, other) => {
                        Err(self.wrong_type(&field, "a finite number", other))
                    }
                    (ty, v) => {
                        let expr = self.expr(v, &field)?;
                        self.check_names(&expr, &field, scope)?;
                        Ok(ArgSpec::Int { ty, value: expr })
                    }
                }
            }
            other => Err(self.wrong_type(field, EXPECTED, other)),
        }
    }

    /// Every name in an argument expression must be a parameter of both sizes; a name that is
    /// neither a buffer nor a parameter gets an error listing both.
    fn check_names(&self, expr: &Expr, field: &str, scope: &Scope) -> R<()> {
        for name in expr.params() {
            for (size, params) in scope.params {
                if !params.contains_key(name) {
                    return Err(self.err(
                        field,
                        Problem::UnknownBufferOrParameter {
                            name: name.to_string(),
                            buffers: join_keys(scope.buffers.iter().map(|b| &b.name)),
                            parameters: format!("{} (size {size})", join_keys(params.keys())),
                        },
                    ));
                }
            }
        }
        Ok(())
    }

    fn codes(&self, check: &Table) -> R<BTreeMap<u32, String>> {
        let mut codes = BTreeMap::new();
        let Some(value) = check.get("codes") else {
            return Ok(codes);
        };
        let table = self.table(value, "check.codes")?;
        for (key, value) in table {
            let field = format!("check.codes.{key}");
            let code = key
                .parse::<u32>()
                .ok()
                .filter(|c| *c != 0)
                .ok_or_else(|| self.bad_value(&field, "failure codes are non-zero integers"))?;
            match value {
                Value::String(s) => {
                    codes.insert(code, s.clone());
                }
                other => return Err(self.wrong_type(&field, "a string", other)),
            }
        }
        Ok(codes)
    }

    fn plan(
        &self,
        size: Size,
        scope: &Scope,
        launches: &[LaunchSpec],
        check: &CheckSpec,
    ) -> R<Plan> {
        let params = scope.params(size);
        let lengths = scope
            .buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let n = self.eval(&b.length, &format!("buffers[{i}].length"), size, params)?;
                Ok(n as usize)
            })
            .collect::<R<Vec<_>>>()?;
        let launches = launches
            .iter()
            .map(|l| self.plan_launch(l, size, params))
            .collect::<R<Vec<_>>>()?;
        let check = self.plan_launch(&check.launch, size, params)?;
        Ok(Plan {
            lengths,
            launches,
            check,
        })
    }

    fn plan_launch(
        &self,
        spec: &LaunchSpec,
        size: Size,
        params: &BTreeMap<String, i64>,
    ) -> R<PlannedLaunch> {
        let dims = |exprs: &[Expr; 3], key: &str| -> R<(u32, u32, u32)> {
            let mut out = [1u32; 3];
            for (i, e) in exprs.iter().enumerate() {
                let field = format!("{}.{key}", spec.field);
                let v = self.eval(e, &field, size, params)?;
                out[i] = u32::try_from(v).ok().filter(|v| *v >= 1).ok_or_else(|| {
                    self.bad_value(
                        &field,
                        format!(
                            "{key} dimension {i} is {v} at size {size} (must be 1 to {})",
                            u32::MAX
                        ),
                    )
                })?;
            }
            Ok((out[0], out[1], out[2]))
        };
        let grid = dims(&spec.grid, "grid")?;
        let block = dims(&spec.block, "block")?;
        let shared_field = format!("{}.shared_bytes", spec.field);
        let shared = self.eval(&spec.shared_bytes, &shared_field, size, params)?;
        let shared_bytes = u32::try_from(shared).map_err(|_| {
            self.bad_value(
                &shared_field,
                format!("{shared} bytes at size {size} is out of range"),
            )
        })?;
        let args = spec
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let field = format!("{}.args[{i}]", spec.field);
                Ok(match a {
                    ArgSpec::Buffer(b) => PlannedArg::Buffer(*b),
                    ArgSpec::Float(x) => PlannedArg::Scalar(KernelArg::F32(*x as f32)),
                    ArgSpec::Int { ty, value } => {
                        let v = self.eval(value, &field, size, params)?;
                        let out_of_range = || {
                            self.bad_value(&field, format!("{v} at size {size} does not fit {ty}"))
                        };
                        PlannedArg::Scalar(match ty {
                            // A bare integer: 32 bits, signed or unsigned.
                            ElemType::I32 if v > i32::MAX as i64 => {
                                KernelArg::U32(u32::try_from(v).map_err(|_| out_of_range())?)
                            }
                            ElemType::I32 => {
                                KernelArg::I32(i32::try_from(v).map_err(|_| out_of_range())?)
                            }
                            ElemType::U32 => {
                                KernelArg::U32(u32::try_from(v).map_err(|_| out_of_range())?)
                            }
                            ElemType::U64 => {
                                KernelArg::U64(u64::try_from(v).map_err(|_| out_of_range())?)
                            }
                            ElemType::F32 => KernelArg::F32(v as f32),
                        })
                    }
                })
            })
            .collect::<R<Vec<_>>>()?;
        Ok(PlannedLaunch {
            kernel: spec.kernel.clone(),
            config: LaunchConfig {
                grid,
                block,
                shared_bytes,
            },
            args,
        })
    }
}

/// What names an argument may refer to.
struct Scope<'a> {
    buffers: &'a [BufferSpec],
    params: [(Size, &'a BTreeMap<String, i64>); 2],
}

impl Scope<'_> {
    fn params(&self, size: Size) -> &BTreeMap<String, i64> {
        self.params
            .iter()
            .find(|(s, _)| *s == size)
            .map(|(_, p)| *p)
            .expect("both sizes are present")
    }
}

fn join_field(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}
