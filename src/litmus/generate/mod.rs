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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Written {
    pub tests: usize,
    pub families: usize,
    pub allowed: usize,
    /// Allowed tests whose state only a weak behaviour reaches.
    pub weak_only: usize,
    pub forbidden: usize,
    /// What an earlier generation had left in the folder.
    pub stale: Stale,
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tests in {} families: {} allowed ({} only through a weak behaviour), {} forbidden (PTX model)",
            self.tests, self.families, self.allowed, self.weak_only, self.forbidden
        )?;
        if self.stale.removed > 0 {
            write!(
                f,
                "; removed {} test(s) of an earlier generation that this one does not write",
                self.stale.removed
            )?;
        }
        Ok(())
    }
}

/// The tests of an earlier generation in the output folder that this one does not write: those
/// its [`MANIFEST`] lists are removed (a run of the folder would run them, with no verdict),
/// other litmus files are left alone and named.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stale {
    /// Files the earlier [`MANIFEST`] listed, removed.
    pub removed: usize,
    /// Litmus files under the folder that no generation wrote (kept; `litmus run` of the folder
    /// runs them too, without a verdict from its `expected.csv`).
    pub foreign: Vec<PathBuf>,
}

/// Removes from `out` the tests its earlier [`MANIFEST`] lists that are not in `kept`
/// (paths relative to `out`), and empty family folders left behind; names the other litmus
/// files under `out` that are not in `kept`.
pub fn remove_stale(out: &Path, kept: &HashSet<String>) -> Result<Stale, GenerateError> {
    let listed = earlier_tests(out)?;
    let mut stale = Stale::default();
    for test in listed.iter().filter(|t| !kept.contains(*t)) {
        let path = out.join(test);
        match std::fs::remove_file(&path) {
            Ok(()) => stale.removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(GenerateError::Io { path, source }),
        }
        if let Some(dir) = path.parent().filter(|d| *d != out) {
            let _ = std::fs::remove_dir(dir); // only when empty
        }
    }
    let found = crate::litmus::file::collect_files(&[out.to_path_buf()]).unwrap_or_default();
    stale.foreign = found
        .into_iter()
        .filter(|path| {
            let relative = path.strip_prefix(out).unwrap_or(path);
            !kept.contains(&relative.to_string_lossy().replace('\\', "/"))
        })
        .collect();
    Ok(stale)
}

/// The file in the output folder listing the tests a generation wrote (paths relative to the
/// folder, one a line), so that the next generation there removes only what it wrote itself.
pub const MANIFEST: &str = "generated-tests.txt";

/// The tests the earlier generation in `out` wrote, as its [`MANIFEST`] lists them (none
/// without one: then nothing is removed).
fn earlier_tests(out: &Path) -> Result<Vec<String>, GenerateError> {
    let path = out.join(MANIFEST);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(str::to_string)
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(GenerateError::Io { path, source }),
    }
}

/// Writes the [`MANIFEST`] of `tests` to `out`.
fn write_manifest(out: &Path, tests: &[Generated]) -> Result<(), GenerateError> {
    let mut text = String::from(
        "# The tests `gpuwmm litmus generate` wrote here; the next generation into this folder\n\
         # removes those it does not write again.\n",
    );
    for t in tests {
        text.push_str(&t.path());
        text.push('\n');
    }
    let path = out.join(MANIFEST);
    std::fs::write(&path, text).map_err(|source| GenerateError::Io { path, source })
}

/// Writes every test (threads spread as `spread` says) under `out` and `out/expected.csv` with
/// the model's verdicts and the [`MANIFEST`] of the tests, removing the tests of an earlier
/// generation there ([`remove_stale`]).
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
    let kept: HashSet<String> = tests.iter().map(Generated::path).collect();
    written.stale = remove_stale(out, &kept)?;
    write_manifest(out, &tests)?;
    let csv = out.join("expected.csv");
    write_csv(&csv, &rows).map_err(|source| GenerateError::Csv { path: csv, source })?;
    Ok(written)
}

#[cfg(test)]
mod tests;
