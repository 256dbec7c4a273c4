//! The shape of `app.toml` as serde reads it, before any meaning is checked.
//!
//! The structs below say which keys each table may hold (`deny_unknown_fields`, so a misspelt
//! key is an error, never silently ignored) and which parts are tables, arrays or strings.
//! Every key is optional here: whether a key is required, and what it must hold, is for
//! `validate` to say, because the expected form differs from key to key (a launch needs a grid,
//! a check does not). Values that may take several forms (an expression is an integer or a
//! string, a dimension also an array) stay `toml::Value` for `validate` to read.
//!
//! A serde error is turned back into the manifest's own [`Problem`], at the field path that
//! `serde_path_to_error` tracked, so the messages read the same as those `validate` writes.

use super::error::{FieldErrors, ManifestError, Problem};
use serde::Deserialize;
use serde_path_to_error::Segment;
use toml::{Table, Value};

/// The whole manifest.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawManifest {
    pub name: Option<String>,
    pub description: Option<String>,
    pub postcondition: Option<String>,
    pub source: Option<RawSource>,
    pub sizes: Option<RawSizes>,
    pub buffers: Option<Vec<RawBuffer>>,
    pub launches: Option<Vec<RawLaunch>>,
    pub check: Option<RawCheck>,
}

/// `[source]`: the files the app is compiled from, and how.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSource {
    pub files: Option<Vec<String>>,
    pub check_files: Option<Vec<String>>,
    pub include: Option<Vec<String>>,
    /// A table of define names to expressions; `Value`, not a map, so that a date is seen as
    /// a date.
    pub defines: Option<Value>,
}

/// `[sizes]`: the named parameters of each size.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSizes {
    /// Tables of named integers; `Value`, not a map, so that a date is seen as a date.
    pub sim: Option<Value>,
    pub gpu: Option<Value>,
}

/// One `[[buffers]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBuffer {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub elem: Option<String>,
    pub length: Option<Value>,
    pub init: Option<Value>,
}

/// One `[[launches]]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLaunch {
    pub kernel: Option<String>,
    pub repeat: Option<Value>,
    pub grid: Option<Value>,
    pub block: Option<Value>,
    pub shared_bytes: Option<Value>,
    pub cooperative: Option<bool>,
    pub args: Option<Vec<Value>>,
}

/// The `[check]` table: a launch, plus where and how it reports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheck {
    pub kernel: Option<String>,
    pub grid: Option<Value>,
    pub block: Option<Value>,
    pub shared_bytes: Option<Value>,
    pub args: Option<Vec<Value>>,
    pub result: Option<String>,
    /// A table of failure codes; `Value`, not a map, so that a date is seen as a date.
    pub codes: Option<Value>,
}

impl RawCheck {
    /// The launch part of the check, and the rest.
    pub fn split(self) -> (RawLaunch, Option<String>, Option<Value>) {
        let launch = RawLaunch {
            kernel: self.kernel,
            repeat: None,
            grid: self.grid,
            block: self.block,
            shared_bytes: self.shared_bytes,
            cooperative: None,
            args: self.args,
        };
        (launch, self.result, self.codes)
    }
}

/// Reads manifest `text` into the raw structs; an error names the field it is about, and the
/// value found there is read back from `table`, the same text parsed as plain TOML.
pub(super) fn read(
    text: &str,
    table: &Table,
    errors: &FieldErrors,
) -> Result<RawManifest, ManifestError> {
    // From the text, not from `table`: a `toml::Value` hands a date to serde as a string, so a
    // date where a string belongs would pass unnoticed.
    serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
        let path: Vec<&Segment> = e.path().iter().collect();
        translate(&path, e.inner().message(), table, errors)
    })
}

/// Turns serde's message at `path` into the manifest's [`Problem`]: an unknown key lists the
/// keys allowed in its table; a wrong type names the value found there.
fn translate(
    path: &[&Segment],
    message: &str,
    table: &Table,
    errors: &FieldErrors,
) -> ManifestError {
    let top = Value::Table(table.clone());
    if message.starts_with("unknown field `") {
        let allowed = &backquoted(message)[1..];
        let parent = &path[..path.len().saturating_sub(1)];
        let key = value_along(&top, parent)
            .and_then(Value::as_table)
            .and_then(|t| t.keys().find(|k| !allowed.contains(&k.as_str())));
        let field = match key {
            Some(key) => join_field(&field_path(parent), key),
            None => field_path(path),
        };
        return errors.err(
            field,
            Problem::UnknownKey {
                allowed: allowed.join(", "),
            },
        );
    }
    let field = field_path(path);
    match (
        message.strip_prefix("invalid type: "),
        value_along(&top, path),
    ) {
        (Some(rest), Some(found)) => {
            let serde_expected = rest.rsplit_once(", expected ").map_or("", |(_, e)| e);
            errors.wrong_type(&field, expected_form(&field, serde_expected), found)
        }
        _ => errors.bad_value(field, message),
    }
}

/// The path as the manifest's errors write it: `launches[0].args[1]`, empty for the top level.
fn field_path(path: &[&Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                out = join_field(&out, key);
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

fn join_field(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The value the path leads to in `top`, if there is one.
fn value_along<'v>(top: &'v Value, path: &[&Segment]) -> Option<&'v Value> {
    path.iter().try_fold(top, |value, segment| match segment {
        Segment::Seq { index } => value.get(*index),
        Segment::Map { key } | Segment::Enum { variant: key } => value.get(key.as_str()),
        Segment::Unknown => None,
    })
}

/// The words between backquotes in serde's message, in order (the unknown key first).
fn backquoted(message: &str) -> Vec<&str> {
    message.split('`').skip(1).step_by(2).collect()
}

/// What a field must hold, in the manifest's words, from serde's description of the Rust type.
fn expected_form(field: &str, serde_expected: &str) -> &'static str {
    match serde_expected {
        "a string" => "a string",
        "a boolean" => "a boolean",
        "a sequence" if field == "buffers" => "an array of [[buffers]] tables",
        "a sequence" if field == "launches" => "an array of [[launches]] tables",
        "a sequence" if field.starts_with("source.") => "an array of paths",
        "a sequence" => "an array of arguments",
        _ => "a table",
    }
}
