//! The errors a manifest can give, and the one helper that builds them.
//!
//! Every error names the manifest file and the field it is about (`launches[0].args[2]`), so
//! the reader of `apps/README.md` sees exactly these messages; the raw reader, the validation and
//! the launch plan all build their errors through [`FieldErrors`] so the wording lives here once.

use crate::apps::Size;
use std::fmt;
use std::path::PathBuf;
use thiserror::Error;
use toml::Value;

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
    #[error("{}{}: {field}: {problem}", .file.display(), line_suffix(*.line))]
    Field {
        file: PathBuf,
        /// The line of the manifest the field is on (or, for a missing key, the line of its
        /// table), when it can be found.
        line: Option<u32>,
        /// The offending field, e.g. `buffers[1].length` or `launches[0].args[2]`.
        field: String,
        /// Boxed: it is the largest part, and errors travel in `Result`s.
        problem: Box<Problem>,
    },
}

fn line_suffix(line: Option<u32>) -> String {
    line.map_or_else(String::new, |l| format!(":{l}"))
}

impl ManifestError {
    /// The field a [`ManifestError::Field`] is about.
    pub fn field(&self) -> Option<&str> {
        match self {
            ManifestError::Field { field, .. } => Some(field),
            _ => None,
        }
    }

    /// The manifest line a [`ManifestError::Field`] names, if any.
    pub fn line(&self) -> Option<usize> {
        match self {
            ManifestError::Field { line, .. } => line.map(|l| l as usize),
            _ => None,
        }
    }

    /// The error with the line of its field in `text` (the manifest's text).
    pub fn located(self, text: &str) -> ManifestError {
        match self {
            ManifestError::Field {
                file,
                line: None,
                field,
                problem,
            } => ManifestError::Field {
                file,
                line: locate(text, &field).and_then(|l| u32::try_from(l).ok()),
                field,
                problem,
            },
            other => other,
        }
    }

    pub fn problem(&self) -> Option<&Problem> {
        match self {
            ManifestError::Field { problem, .. } => Some(problem.as_ref()),
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
        /// Why, where known (`'x' is a template kernel ...`, NVRTC's reason), else empty.
        detail: String,
        /// The kernels the source has, by their C++ names.
        kernels: String,
        /// The app's source files, as the manifest names them.
        source: String,
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
            Problem::NoSuchKernel {
                name,
                detail,
                kernels,
                source,
            } => {
                write!(f, "no kernel '{name}' in {source}")?;
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                write!(f, " (kernels: {kernels})")
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

/// Builds [`ManifestError::Field`] errors for one manifest file.
pub(super) struct FieldErrors {
    pub file: PathBuf,
}

impl FieldErrors {
    pub fn err(&self, field: impl Into<String>, problem: Problem) -> ManifestError {
        ManifestError::Field {
            file: self.file.clone(),
            line: None,
            field: field.into(),
            problem: Box::new(problem),
        }
    }

    pub fn bad_value(&self, field: impl Into<String>, message: impl Into<String>) -> ManifestError {
        self.err(
            field,
            Problem::BadValue {
                message: message.into(),
            },
        )
    }

    pub fn wrong_type(&self, field: &str, expected: &str, found: &Value) -> ManifestError {
        self.err(
            field,
            Problem::WrongType {
                expected: expected.to_string(),
                found: type_name(found),
            },
        )
    }

    pub fn missing(&self, field: &str, expected: &str) -> ManifestError {
        self.err(
            field,
            Problem::Missing {
                expected: expected.to_string(),
            },
        )
    }
}

/// The 1-based line of `text` (a manifest) that `field` (`launches[1].args[0]`,
/// `source.defines.N`, `name`) is written on: the line of its key in its table, else the line
/// of the table itself (a missing key), else none. Keys in inline tables and arrays are found
/// as the line of the key that holds them.
pub fn locate(text: &str, field: &str) -> Option<usize> {
    let mut parts = field.split('.');
    let first = parts.next()?;
    let (table, index) = match first.split_once('[') {
        Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
        None => (first, None),
    };
    let key = parts.next().map(|k| k.split('[').next().unwrap_or(k));
    let lines: Vec<&str> = text.lines().collect();
    let header = |l: &str| l.trim_start().starts_with('[');
    let is_key = |l: &str, k: &str| {
        let l = l.trim_start();
        l.strip_prefix(k)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    };
    // The table's header: the `index`-th `[[table]]`, or `[table]`.
    let array_header = format!("[[{table}]]");
    let plain_header = format!("[{table}]");
    let start = match index {
        Some(i) => lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.trim() == array_header)
            .nth(i)
            .map(|(n, _)| n),
        None => lines.iter().position(|l| l.trim() == plain_header),
    };
    let Some(start) = start else {
        // A top-level key (or a table written inline at the top).
        let end = lines.iter().position(|l| header(l)).unwrap_or(lines.len());
        return lines[..end]
            .iter()
            .position(|l| is_key(l, table))
            .map(|n| n + 1);
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| header(l))
        .map_or(lines.len(), |n| start + 1 + n);
    let found = key.and_then(|k| {
        lines[start + 1..end]
            .iter()
            .position(|l| is_key(l, k))
            .map(|n| start + 1 + n)
    });
    Some(found.unwrap_or(start) + 1)
}

/// How an error message names a TOML value of the wrong type.
pub(super) fn type_name(value: &Value) -> String {
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

/// Names for a list in an error message: comma-separated, or `none`.
pub(super) fn join_keys<'a>(keys: impl IntoIterator<Item = &'a String>) -> String {
    let v: Vec<&str> = keys.into_iter().map(String::as_str).collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::locate;

    const TEXT: &str = "name = \"x\"\n\n[source]\nfiles = [\"a.cu\"]\ndefines = { N = \"n\" }\n\
                        \n[[launches]]\nkernel = \"k\"\n\n[[launches]]\nkernel = \"k\"\nrepeat = 0\n\
                        args = [1]\n\n[check]\nkernel = \"c\"\n";

    #[test]
    fn fields_are_found_on_their_lines() {
        assert_eq!(locate(TEXT, "name"), Some(1));
        assert_eq!(locate(TEXT, "source.files[0]"), Some(4));
        assert_eq!(locate(TEXT, "source.defines.N"), Some(5));
        assert_eq!(locate(TEXT, "launches[1].repeat"), Some(12));
        assert_eq!(locate(TEXT, "launches[1].args[0]"), Some(13));
        assert_eq!(locate(TEXT, "launches[0].kernel"), Some(8));
        // A missing key: its table's header.
        assert_eq!(locate(TEXT, "check.result"), Some(15));
        assert_eq!(locate(TEXT, "description"), None);
    }
}
