//! `litmus generate`: families of litmus tests in the Dat3M dialect, with their verdicts from
//! the PTX model ([`crate::litmus::model`]), so the simulator (or a GPU) can be checked on
//! thousands of tests no one has published verdicts for.
//!
//! Each shape of [`families`] (a cycle of relations) is crossed with [`variants`]: the order
//! of its accesses, the fences between them, the scopes and the placement of its threads.
//! Variants that print the same test (weak accesses ignore scopes, say) are written once. The
//! output depends on nothing but this code.

pub mod families;
pub mod variants;

use crate::litmus::file::expect::write_csv;
use crate::litmus::file::kernel::Refusal;
use crate::litmus::file::parse::parse;
use crate::litmus::file::LitmusFileError;
use crate::litmus::model::compare::CsvRow;
use crate::litmus::model::model;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// One generated test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub family: String,
    pub name: String,
    pub text: String,
}

impl Generated {
    /// Its path under the output folder: `<family>/<name>.litmus`.
    pub fn path(&self) -> String {
        format!("{}/{}.litmus", self.family, self.name)
    }
}

/// Where the threads of the generated tests run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spread {
    /// On one GPU: in one CTA, a CTA each, or thread 0 apart ([`variants::PLACEMENTS`]).
    #[default]
    OneGpu,
    /// On two GPUs: alternating, or thread 0 apart ([`variants::PLACEMENTS_ACROSS_GPUS`]).
    AcrossGpus,
}

impl Spread {
    fn placements(self) -> &'static [variants::Placement] {
        match self {
            Spread::OneGpu => &variants::PLACEMENTS,
            Spread::AcrossGpus => &variants::PLACEMENTS_ACROSS_GPUS,
        }
    }
}

/// Every test of every family with threads spread as `spread` says, in a fixed order, without
/// duplicates.
pub fn generate(spread: Spread) -> Vec<Generated> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for shape in families::SHAPES {
        for v in variants::all(shape, spread.placements()) {
            let test = variants::render(shape, &v);
            if seen.insert(test.body.clone()) {
                out.push(Generated {
                    family: shape.family.to_string(),
                    name: v.name(shape),
                    text: format!("PTX {}\n{}{}", v.name(shape), test.comment, test.body),
                });
            }
        }
    }
    out
}

/// Why the tests could not be written.
#[derive(Debug, Error)]
pub enum GenerateError {
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Csv {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    #[error("generated test does not parse (a generator bug): {0}")]
    Parse(#[from] LitmusFileError),
    #[error("the model refuses a generated test (a generator bug): {0}")]
    Refused(#[from] Refusal),
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    pub tests: usize,
    pub families: usize,
    pub allowed: usize,
    /// Allowed tests whose state only a weak behaviour reaches.
    pub weak_only: usize,
    pub forbidden: usize,
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tests in {} families: {} allowed ({} only through a weak behaviour), {} forbidden (PTX model)",
            self.tests, self.families, self.allowed, self.weak_only, self.forbidden
        )
    }
}

/// Writes every test (threads spread as `spread` says) under `out` and `out/expected.csv` with
/// the model's verdicts.
pub fn write_families(out: &Path, spread: Spread) -> Result<Written, GenerateError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GenerateError::Io { path, source }
    };
    let tests = generate(spread);
    let mut rows = Vec::with_capacity(tests.len());
    let mut written = Written::default();
    let mut families = HashSet::new();
    for t in &tests {
        let path = out.join(t.path());
        let dir = path.parent().unwrap_or(out);
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::fs::write(&path, &t.text).map_err(io(&path))?;
        let file = parse(&path, &t.text)?;
        let outcome = model(&file)?;
        let row = CsvRow::new(&t.path(), &t.family, &file, &outcome, "");
        written.tests += 1;
        families.insert(t.family.clone());
        if row.expected == "allowed" {
            written.allowed += 1;
            written.weak_only += usize::from(row.sc_reachable != "yes");
        } else {
            written.forbidden += 1;
        }
        rows.push(row);
    }
    written.families = families.len();
    let csv = out.join("expected.csv");
    write_csv(&csv, &rows).map_err(|source| GenerateError::Csv { path: csv, source })?;
    Ok(written)
}

#[cfg(test)]
mod tests;
