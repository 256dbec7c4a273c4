//! What the raw manifest means: required keys, names, types, expressions and initialisers.
//!
//! `raw` has already checked the shape (which keys each table may hold, which parts are tables,
//! arrays or strings); this file checks the meaning and builds the specs the rest of the crate
//! uses ([`BufferSpec`], [`LaunchSpec`], [`CheckSpec`]). Every expression is evaluated for both
//! sizes here or in `plan`, so a manifest that loads cannot fail later because of itself.

use super::data::{file_image, list_image, Format};
use super::error::{join_keys, FieldErrors, ManifestError, Problem};
use super::plan::{eval, plan};
use super::raw::{RawBuffer, RawCheck, RawLaunch, RawManifest, RawSizes, RawSource};
use super::{
    ArgSpec, BufferSpec, CheckSpec, Define, Init, LaunchSpec, Manifest, SourceSpec,
    MAX_BUFFER_BYTES, STEP, UNWRITTEN_RESULT,
};
use crate::apps::expr::{is_identifier, Expr};
use crate::apps::words::ElemType;
use crate::apps::Size;
use std::collections::BTreeMap;
use std::path::PathBuf;
use toml::Value;

type R<T> = Result<T, ManifestError>;

/// The named integers of one size.
pub(super) type Params = BTreeMap<String, i64>;

const DIMS: &str = "an integer, expression or [x, y, z]";

/// Checks `raw` field by field, in the order the keys are documented, then plans it for both
/// sizes.
pub(super) fn validate(raw: RawManifest, errors: &FieldErrors) -> R<Manifest> {
    let name = required(raw.name, "name", "a string", errors)?;
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(errors.bad_value("name", "an app name must be non-empty, without spaces"));
    }
    let description = required(raw.description, "description", "a string", errors)?;
    let postcondition = required(raw.postcondition, "postcondition", "a string", errors)?;
    let sizes: RawSizes = required(raw.sizes, "sizes", "a table with `sim` and `gpu`", errors)?;
    let sim_params = params(sizes.sim, "sim", errors)?;
    let gpu_params = params(sizes.gpu, "gpu", errors)?;
    let scope = Scope {
        buffers: &[],
        params: [(Size::Sim, &sim_params), (Size::Gpu, &gpu_params)],
        errors,
        step: false,
    };
    let source = match raw.source {
        None => SourceSpec::default(),
        Some(raw) => source(raw, &scope)?,
    };
    let raw_buffers = required(
        raw.buffers,
        "buffers",
        "an array of [[buffers]] tables",
        errors,
    )?;
    let buffers = buffers(raw_buffers, &scope)?;
    let scope = Scope {
        buffers: &buffers,
        ..scope
    };
    let raw_launches = required(
        raw.launches,
        "launches",
        "an array of [[launches]] tables",
        errors,
    )?;
    if raw_launches.is_empty() {
        return Err(errors.bad_value("launches", "at least one launch is needed"));
    }
    let launches = raw_launches
        .into_iter()
        .enumerate()
        .map(|(i, l)| launch(l, &format!("launches[{i}]"), &scope, false))
        .collect::<R<Vec<_>>>()?;
    let raw_check: RawCheck = required(raw.check, "check", "a [check] table", errors)?;
    let check = check(raw_check, &scope)?;
    let plan_for = |size, params| plan(size, params, &buffers, &launches, &check, &source, errors);
    let sim = plan_for(Size::Sim, &sim_params)?;
    let gpu = plan_for(Size::Gpu, &gpu_params)?;
    Ok(Manifest {
        file: errors.file.clone(),
        text: String::new(),
        name,
        description,
        postcondition,
        source,
        sim_params,
        gpu_params,
        buffers,
        launches,
        check,
        sim,
        gpu,
    })
}

/// The value of a required key, or a [`Problem::Missing`] naming what it should hold.
fn required<T>(value: Option<T>, field: &str, expected: &str, errors: &FieldErrors) -> R<T> {
    value.ok_or_else(|| errors.missing(field, expected))
}

fn params(value: Option<Value>, size: &str, errors: &FieldErrors) -> R<Params> {
    let field = format!("sizes.{size}");
    let table = table(
        required(value, &field, "a table of named integers", errors)?,
        &field,
        errors,
    )?;
    let mut params = BTreeMap::new();
    for (key, value) in table {
        let field = format!("{field}.{key}");
        if !is_identifier(&key) {
            return Err(errors.bad_value(field, format!("'{key}' is not a valid parameter name")));
        }
        match value {
            Value::Integer(i) => {
                params.insert(key, i);
            }
            other => return Err(errors.wrong_type(&field, "an integer", &other)),
        }
    }
    Ok(params)
}

fn table(value: Value, field: &str, errors: &FieldErrors) -> R<toml::Table> {
    match value {
        Value::Table(t) => Ok(t),
        other => Err(errors.wrong_type(field, "a table", &other)),
    }
}

/// What names an argument or a length may refer to.
#[derive(Clone, Copy)]
struct Scope<'a> {
    buffers: &'a [BufferSpec],
    params: [(Size, &'a Params); 2],
    errors: &'a FieldErrors,
    /// Inside a repeated launch, where [`STEP`] is defined.
    step: bool,
}

/// The text of a define written `{ text = "..." }`: one line, not empty.
fn define_text(table: toml::Table, field: &str, errors: &FieldErrors) -> R<String> {
    let mut text = None;
    for (key, value) in table {
        match (key.as_str(), value) {
            ("text", Value::String(s)) => text = Some(s),
            ("text", other) => {
                return Err(errors.wrong_type(&format!("{field}.text"), "a string", &other))
            }
            (other, _) => {
                return Err(errors.err(
                    format!("{field}.{other}"),
                    Problem::UnknownKey {
                        allowed: "text".to_string(),
                    },
                ))
            }
        }
    }
    let text = text.ok_or_else(|| errors.bad_value(field, "expected { text = \"...\" }"))?;
    if text.trim().is_empty() || text.contains(['\n', '\r']) {
        return Err(errors.bad_value(
            format!("{field}.text"),
            "a define's text is one line, not empty",
        ));
    }
    Ok(text)
}

/// An unknown parameter in a define's value, with the forms for values that are not sizes.
fn hint_of(problem: &Problem, name: &str) -> String {
    format!(
        "{problem}; a define's string is a size expression: for a text value write \
         `{name} = {{ text = \"...\" }}` (-D{name}=...), for a flag `{name} = true` (-D{name})"
    )
}

/// `[source]`: paths kept relative (the app's folder is the base), defines checked for both sizes.
fn source(raw: RawSource, scope: &Scope) -> R<SourceSpec> {
    let errors = scope.errors;
    let paths = |list: Option<Vec<String>>, key: &str| -> R<Vec<PathBuf>> {
        let list = list.unwrap_or_default();
        for (i, path) in list.iter().enumerate() {
            if path.trim().is_empty() {
                return Err(errors.bad_value(format!("source.{key}[{i}]"), "an empty path"));
            }
        }
        Ok(list.into_iter().map(PathBuf::from).collect())
    };
    let files = match raw.files {
        None => SourceSpec::default().files,
        Some(files) if files.is_empty() => {
            return Err(errors.bad_value("source.files", "at least one source file is needed"))
        }
        some => paths(some, "files")?,
    };
    let mut defines = Vec::new();
    if let Some(value) = raw.defines {
        for (name, value) in table(value, "source.defines", errors)? {
            let field = format!("source.defines.{name}");
            if !is_identifier(&name) {
                return Err(errors.bad_value(field, format!("'{name}' is not a macro name")));
            }
            let define = match value {
                Value::Boolean(true) => Define::Flag,
                Value::Boolean(false) => continue,
                Value::Table(text) => Define::Text(define_text(text, &field, errors)?),
                value => {
                    let value = expr(&value, &field, errors)?;
                    for (size, params) in scope.params {
                        eval(&value, &field, size, params, errors).map_err(|e| match e {
                            ManifestError::Field { ref problem, .. }
                                if matches!(**problem, Problem::UnknownParameter { .. }) =>
                            {
                                errors.bad_value(&field, hint_of(problem, &name))
                            }
                            other => other,
                        })?;
                    }
                    Define::Size(value)
                }
            };
            defines.push((name, define));
        }
    }
    Ok(SourceSpec {
        files,
        check_files: paths(raw.check_files, "check_files")?,
        include: paths(raw.include, "include")?,
        defines,
        declared: true,
    })
}

fn buffers(raw: Vec<RawBuffer>, scope: &Scope) -> R<Vec<BufferSpec>> {
    let mut buffers: Vec<BufferSpec> = Vec::new();
    for (i, b) in raw.into_iter().enumerate() {
        let spec = buffer(b, &format!("buffers[{i}]"), &buffers, scope)?;
        buffers.push(spec);
    }
    Ok(buffers)
}

fn buffer(raw: RawBuffer, field: &str, earlier: &[BufferSpec], scope: &Scope) -> R<BufferSpec> {
    let errors = scope.errors;
    let name_field = format!("{field}.name");
    let name = required(raw.name, &name_field, "a string", errors)?;
    if !is_identifier(&name) {
        return Err(errors.bad_value(
            name_field,
            format!("'{name}' is not a valid buffer name (letters, digits, _)"),
        ));
    }
    if earlier.iter().any(|b| b.name == name) {
        return Err(errors.err(name_field, Problem::Duplicate { name }));
    }
    if scope.params.iter().any(|(_, p)| p.contains_key(&name)) {
        return Err(errors.bad_value(
            name_field,
            format!("'{name}' is also a size parameter; rename one of them"),
        ));
    }
    let type_field = format!("{field}.type");
    let ty = required(raw.elem, &type_field, "a string", errors)?;
    let elem: ElemType = ty
        .parse()
        .map_err(|_| errors.err(type_field, Problem::BadElementType { found: ty }))?;
    let length_field = format!("{field}.length");
    let length = required(
        raw.length,
        &length_field,
        "an integer or an expression",
        errors,
    )?;
    let length = expr(&length, &length_field, errors)?;
    for (size, params) in scope.params {
        let n = eval(&length, &length_field, size, params, errors)?;
        if n < 1 || n.saturating_mul(elem.bytes() as i64) > MAX_BUFFER_BYTES {
            return Err(errors.bad_value(
                &length_field,
                format!(
                    "length {n} at size {size} is out of range (1 to {} elements of {elem})",
                    MAX_BUFFER_BYTES / elem.bytes() as i64
                ),
            ));
        }
    }
    let init_field = format!("{field}.init");
    let raw_init = raw.init;
    let init = match &raw_init {
        None => Init::Zero,
        Some(Value::Table(t)) if t.len() == 1 && t.contains_key("copy") => {
            let source_field = format!("{init_field}.copy");
            copy_of(&t["copy"], &source_field, elem, &length, earlier, scope)?
        }
        Some(v) => init(v, &init_field, elem, errors)?,
    };
    let file = match &raw_init {
        Some(Value::Table(t)) => t.get("file").and_then(Value::as_str).map(PathBuf::from),
        _ => None,
    };
    if let Init::Data(image) = &init {
        long_enough(
            image.len() / elem.bytes(),
            &init_field,
            &length,
            "elements given",
            scope,
        )?;
    }
    Ok(BufferSpec {
        name,
        elem,
        length,
        init,
        file,
    })
}

/// An initialiser other than a copy (which [`copy_of`] reads, knowing the earlier buffers).
fn init(value: &Value, field: &str, elem: ElemType, errors: &FieldErrors) -> R<Init> {
    const EXPECTED: &str = "\"zero\", \"iota\", { constant = N }, { random = [LO, HI] }, \
                            { random_float = [LO, HI] }, { values = [...] }, { file = \"...\" } or \
                            { copy = \"buffer\" }";
    match value {
        Value::String(s) if s == "zero" => Ok(Init::Zero),
        Value::String(s) if s == "iota" => Ok(Init::Iota),
        Value::Table(t) if t.contains_key("file") => file_init(t, field, elem, errors),
        Value::Table(t) if t.len() == 1 => {
            let (key, v) = t.iter().next().expect("one entry");
            let field = format!("{field}.{key}");
            match key.as_str() {
                "constant" => constant_init(v, &field, elem, errors),
                "random" => random_int_init(v, &field, elem, errors),
                "random_float" => random_float_init(v, &field, elem, errors),
                "values" => match v {
                    Value::Array(items) => Ok(Init::Data(list_image(items, elem, &field, errors)?)),
                    other => Err(errors.wrong_type(&field, "an array of numbers", other)),
                },
                _ => Err(errors.err(
                    &field,
                    Problem::UnknownKey {
                        allowed: INIT_KEYS.to_string(),
                    },
                )),
            }
        }
        other => Err(errors.wrong_type(field, EXPECTED, other)),
    }
}

const INIT_KEYS: &str = "constant, random, random_float, values, file, copy";

/// `{ file = "name", format = "..." }`: the file's contents, read now.
fn file_init(t: &toml::Table, field: &str, elem: ElemType, errors: &FieldErrors) -> R<Init> {
    if let Some(key) = t.keys().find(|k| !["file", "format"].contains(&k.as_str())) {
        return Err(errors.err(
            format!("{field}.{key}"),
            Problem::UnknownKey {
                allowed: "file, format".to_string(),
            },
        ));
    }
    let file_field = format!("{field}.file");
    let name = match &t["file"] {
        Value::String(name) if !name.trim().is_empty() => name,
        other => return Err(errors.wrong_type(&file_field, "a file name", other)),
    };
    let format = match t.get("format") {
        None => Format::of_file(name),
        Some(Value::String(f)) => Format::parse(f).ok_or_else(|| {
            errors.bad_value(
                format!("{field}.format"),
                format!("unknown format '{f}' (expected {})", Format::NAMES),
            )
        })?,
        Some(other) => {
            return Err(errors.wrong_type(&format!("{field}.format"), Format::NAMES, other))
        }
    };
    let dir = errors.file.parent().unwrap_or(std::path::Path::new("."));
    Ok(Init::Data(file_image(
        dir,
        name,
        format,
        elem,
        &file_field,
        errors,
    )?))
}

/// Checks that `count` elements (data given, or the buffer copied) cover `length` at each size.
fn long_enough(count: usize, field: &str, length: &Expr, what: &str, scope: &Scope) -> R<()> {
    for (size, params) in scope.params {
        let n = eval(length, field, size, params, scope.errors)?;
        if (count as i64) < n {
            return Err(scope.errors.bad_value(
                field,
                format!("{count} {what}, but the buffer has {n} elements at size {size}"),
            ));
        }
    }
    Ok(())
}

/// `{ copy = "name" }`: an earlier buffer of the same type, at least as long at each size.
fn copy_of(
    value: &Value,
    field: &str,
    elem: ElemType,
    length: &Expr,
    earlier: &[BufferSpec],
    scope: &Scope,
) -> R<Init> {
    let errors = scope.errors;
    let Value::String(name) = value else {
        return Err(errors.wrong_type(field, "the name of an earlier buffer", value));
    };
    let Some(index) = earlier.iter().position(|b| &b.name == name) else {
        return Err(errors.err(
            field,
            Problem::UnknownBuffer {
                name: name.clone(),
                known: format!(
                    "{} (a copy names a buffer declared before it)",
                    join_keys(earlier.iter().map(|b| &b.name))
                ),
            },
        ));
    };
    let source = &earlier[index];
    if source.elem != elem {
        return Err(errors.bad_value(
            field,
            format!("'{name}' is {}, this buffer {elem}", source.elem),
        ));
    }
    for (size, params) in scope.params {
        let have = eval(&source.length, field, size, params, errors)?;
        let need = eval(length, field, size, params, errors)?;
        if have < need {
            return Err(errors.bad_value(
                field,
                format!("'{name}' has {have} elements at size {size}, this buffer {need}"),
            ));
        }
    }
    Ok(Init::Copy(index))
}

/// `v` if the element type holds it exactly, else an error calling it `what`.
fn exact_int(v: i64, what: &str, field: &str, elem: ElemType, errors: &FieldErrors) -> R<i64> {
    let (lo, hi) = elem.exact_integer_range();
    if (v as i128) < lo || (v as i128) > hi {
        Err(errors.bad_value(
            field,
            format!("{what} {v} does not fit {elem} exactly (range {lo} to {hi})"),
        ))
    } else {
        Ok(v)
    }
}

fn constant_init(v: &Value, field: &str, elem: ElemType, errors: &FieldErrors) -> R<Init> {
    match v {
        Value::Integer(i) => Ok(Init::Constant(exact_int(
            *i, "constant", field, elem, errors,
        )?)),
        Value::Float(x) if elem == ElemType::F32 && x.is_finite() => Ok(Init::ConstantFloat(*x)),
        other => {
            let expected = if elem == ElemType::F32 {
                "a finite number"
            } else {
                "an integer"
            };
            Err(errors.wrong_type(field, expected, other))
        }
    }
}

fn random_int_init(v: &Value, field: &str, elem: ElemType, errors: &FieldErrors) -> R<Init> {
    let (lo, hi) = pair(v, field, errors)?;
    let (Value::Integer(lo), Value::Integer(hi)) = (lo, hi) else {
        return Err(errors.wrong_type(field, "two integers [LO, HI]", v));
    };
    let lo = exact_int(*lo, "bound", field, elem, errors)?;
    let hi = exact_int(*hi, "bound", field, elem, errors)?;
    if lo > hi {
        return Err(errors.bad_value(field, format!("empty range [{lo}, {hi}]")));
    }
    Ok(Init::RandomInt { lo, hi })
}

fn random_float_init(v: &Value, field: &str, elem: ElemType, errors: &FieldErrors) -> R<Init> {
    if elem != ElemType::F32 {
        return Err(errors.bad_value(
            field,
            format!("random_float needs an f32 buffer, this one is {elem}"),
        ));
    }
    let (lo, hi) = pair(v, field, errors)?;
    let number = |x: &Value| match x {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) if f.is_finite() => Some(*f),
        _ => None,
    };
    let (Some(lo), Some(hi)) = (number(lo), number(hi)) else {
        return Err(errors.wrong_type(field, "two finite numbers [LO, HI]", v));
    };
    if lo >= hi {
        return Err(errors.bad_value(field, format!("empty range [{lo}, {hi})")));
    }
    Ok(Init::RandomFloat { lo, hi })
}

fn pair<'v>(value: &'v Value, field: &str, errors: &FieldErrors) -> R<(&'v Value, &'v Value)> {
    match value {
        Value::Array(a) if a.len() == 2 => Ok((&a[0], &a[1])),
        other => Err(errors.wrong_type(field, "an array [LO, HI]", other)),
    }
}

fn expr(value: &Value, field: &str, errors: &FieldErrors) -> R<Expr> {
    match value {
        Value::Integer(i) => Ok(Expr::Number(*i)),
        Value::String(s) => {
            Expr::parse(s).map_err(|message| errors.err(field, Problem::BadExpression { message }))
        }
        other => Err(errors.wrong_type(field, "an integer or an expression string", other)),
    }
}

/// A dimension: an integer, an expression, or an array of 1 to 3 of them (absent: 1).
fn dims(value: Option<&Value>, field: &str, errors: &FieldErrors) -> R<[Expr; 3]> {
    let one = || Expr::Number(1);
    match value {
        None => Ok([one(), one(), one()]),
        Some(Value::Array(items)) if (1..=3).contains(&items.len()) => {
            let mut dims = [one(), one(), one()];
            for (i, item) in items.iter().enumerate() {
                dims[i] = expr(item, &format!("{field}[{i}]"), errors)?;
            }
            Ok(dims)
        }
        Some(Value::Array(_)) => Err(errors.bad_value(field, "expected 1 to 3 dimensions")),
        Some(v) => Ok([expr(v, field, errors)?, one(), one()]),
    }
}

/// A launch; `dims_optional` for the check, whose grid and block default to 1.
fn launch(raw: RawLaunch, field: &str, scope: &Scope, dims_optional: bool) -> R<LaunchSpec> {
    let errors = scope.errors;
    let kernel = required(raw.kernel, &format!("{field}.kernel"), "a string", errors)?;
    if kernel.trim().is_empty() {
        return Err(errors.bad_value(format!("{field}.kernel"), "an empty kernel name"));
    }
    let repeat = match raw.repeat {
        None => None,
        Some(v) => Some(repeat(&v, &format!("{field}.repeat"), scope)?),
    };
    let scope = &Scope {
        step: repeat.is_some(),
        ..*scope
    };
    let dim = |value: Option<Value>, key: &str| {
        let key_field = format!("{field}.{key}");
        let value = match (value, dims_optional) {
            (None, false) => return Err(errors.missing(&key_field, DIMS)),
            (value, _) => value,
        };
        dims(value.as_ref(), &key_field, errors)
    };
    let grid = dim(raw.grid, "grid")?;
    let block = dim(raw.block, "block")?;
    let shared_bytes = match raw.shared_bytes {
        None => Expr::Number(0),
        Some(v) => expr(&v, &format!("{field}.shared_bytes"), errors)?,
    };
    let args_field = format!("{field}.args");
    let args = required(raw.args, &args_field, "an array of arguments", errors)?
        .iter()
        .enumerate()
        .map(|(i, v)| arg(v, &format!("{args_field}[{i}]"), scope))
        .collect::<R<Vec<_>>>()?;
    Ok(LaunchSpec {
        field: field.to_string(),
        kernel,
        repeat,
        grid,
        block,
        shared_bytes,
        cooperative: raw.cooperative.unwrap_or(false),
        args,
    })
}

/// The most launches one `repeat` may stand for.
const MAX_REPEAT: i64 = 1_000_000;

/// `repeat`: an expression of 1 to [`MAX_REPEAT`] at each size; no size parameter may be called
/// [`STEP`], since the step would hide it.
fn repeat(value: &Value, field: &str, scope: &Scope) -> R<Expr> {
    let errors = scope.errors;
    let count = expr(value, field, errors)?;
    for (size, params) in scope.params {
        if params.contains_key(STEP) {
            return Err(errors.bad_value(
                field,
                format!("size {size} has a parameter '{STEP}', which a repeated launch's step would hide; rename it"),
            ));
        }
        let n = eval(&count, field, size, params, errors)?;
        if !(1..=MAX_REPEAT).contains(&n) {
            return Err(errors.bad_value(
                field,
                format!("repeat is {n} at size {size} (must be 1 to {MAX_REPEAT})"),
            ));
        }
    }
    Ok(count)
}

fn arg(value: &Value, field: &str, scope: &Scope) -> R<ArgSpec> {
    const EXPECTED: &str = "a buffer name, a parameter expression, or a typed scalar \
                            ({ u32 = ... }, { i32 = ... }, { u64 = ... }, { f32 = ... })";
    let errors = scope.errors;
    match value {
        Value::String(s) => {
            if let Some(i) = scope.buffers.iter().position(|b| &b.name == s) {
                return Ok(ArgSpec::Buffer(i));
            }
            let expr = Expr::parse(s)
                .map_err(|message| errors.err(field, Problem::BadExpression { message }))?;
            check_names(&expr, field, scope)?;
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
            typed_arg(key, v, &format!("{field}.{key}"), scope)
        }
        other => Err(errors.wrong_type(field, EXPECTED, other)),
    }
}

/// A typed scalar argument `{ key = v }`.
fn typed_arg(key: &str, v: &Value, field: &str, scope: &Scope) -> R<ArgSpec> {
    let errors = scope.errors;
    let ty: ElemType = key.parse().map_err(|_| {
        errors.err(
            field,
            Problem::BadElementType {
                found: key.to_string(),
            },
        )
    })?;
    match (ty, v) {
        (ElemType::F32, Value::Float(x)) if x.is_finite() => Ok(ArgSpec::Float(*x)),
        (ElemType::F32, Value::Integer(i)) => Ok(ArgSpec::Float(*i as f64)),
        (ElemType::F32, other) => Err(errors.wrong_type(field, "a finite number", other)),
        (ty, v) => {
            let expr = expr(v, field, errors)?;
            check_names(&expr, field, scope)?;
            Ok(ArgSpec::Int { ty, value: expr })
        }
    }
}

/// Every name in an argument expression must be a parameter of both sizes; a name that is
/// neither a buffer nor a parameter gets an error listing both.
fn check_names(expr: &Expr, field: &str, scope: &Scope) -> R<()> {
    for name in expr.params() {
        if name == STEP && scope.step {
            continue;
        }
        if name == STEP && !scope.params.iter().any(|(_, p)| p.contains_key(STEP)) {
            return Err(scope.errors.bad_value(
                field,
                format!("'{STEP}' is defined only in a launch with `repeat`"),
            ));
        }
        for (size, params) in scope.params {
            if !params.contains_key(name) {
                return Err(scope.errors.err(
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

fn check(raw: RawCheck, scope: &Scope) -> R<CheckSpec> {
    let errors = scope.errors;
    let (raw_launch, result_name, codes) = raw.split();
    let launch = launch(raw_launch, "check", scope, true)?;
    let result_name = required(result_name, "check.result", "a string", errors)?;
    let buffers = scope.buffers;
    let result = buffers
        .iter()
        .position(|b| b.name == result_name)
        .ok_or_else(|| {
            errors.err(
                "check.result",
                Problem::UnknownBuffer {
                    name: result_name.clone(),
                    known: join_keys(buffers.iter().map(|b| &b.name)),
                },
            )
        })?;
    if !matches!(buffers[result].elem, ElemType::U32 | ElemType::I32) {
        return Err(errors.bad_value(
            "check.result",
            format!(
                "the result buffer '{result_name}' must be u32 or i32, not {}",
                buffers[result].elem
            ),
        ));
    }
    Ok(CheckSpec {
        launch,
        result,
        codes: match codes {
            None => BTreeMap::new(),
            Some(v) => codes_of(table(v, "check.codes", errors)?, errors)?,
        },
    })
}

fn codes_of(raw: toml::Table, errors: &FieldErrors) -> R<BTreeMap<u32, String>> {
    let mut codes = BTreeMap::new();
    for (key, value) in raw {
        let field = format!("check.codes.{key}");
        let code = key
            .parse::<u32>()
            .ok()
            .filter(|c| *c != 0 && *c != UNWRITTEN_RESULT)
            .ok_or_else(|| {
                errors.bad_value(
                    &field,
                    format!(
                        "failure codes are non-zero integers other than {UNWRITTEN_RESULT} \
                         ({UNWRITTEN_RESULT:#x}: the result word before the check kernel writes it)"
                    ),
                )
            })?;
        match value {
            Value::String(s) => {
                codes.insert(code, s);
            }
            other => return Err(errors.wrong_type(&field, "a string", &other)),
        }
    }
    Ok(codes)
}
