//! The model over many files: each parsed and modelled on its own (a malformed or refused file
//! is one row, and the others still run), with the agreement table and the model's own
//! `expected.csv` rows.

use super::compare::{CsvRow, ModelRow, ModelTable};
use super::{model_within, ModelOutcome};
use crate::litmus::file::expect::{relative, test_name, Expectations};
use crate::litmus::file::parse::parse_file;
use crate::litmus::file::LitmusFileError;
use std::path::{Path, PathBuf};

/// What happened to one file.
pub enum FileResult<'a> {
    Modelled(&'a ModelOutcome),
    /// The test's name (as `litmus run` names it too) and why it was refused.
    Refused {
        test: String,
        why: String,
    },
    Malformed(String),
}

impl FileResult<'_> {
    /// What `gpuwmm litmus model` shows for a file: the herd-style report of a modelled test
    /// (nothing when `quiet`), or why it was refused or is malformed.
    pub fn text(&self, quiet: bool) -> Option<String> {
        match self {
            FileResult::Modelled(o) => (!quiet).then(|| o.report()),
            FileResult::Refused { test, why } => Some(format!("Test {test} refused: {why}\n")),
            FileResult::Malformed(why) => Some(format!("error: {why}\n")),
        }
    }
}

/// The model over a list of files.
#[derive(Debug, Default)]
pub struct SuiteRun {
    pub table: ModelTable,
    /// The model's verdicts, paths relative to `csv_dir`.
    pub csv_rows: Vec<CsvRow>,
    pub malformed: usize,
}

/// Models every file, each within `budget` candidate executions; `report` sees each result as
/// it comes. Paths in the CSV rows are relative to the folder of `csv`, the `expected.csv` they
/// are for (the working folder without one), where they can be.
pub fn model_files(
    files: &[PathBuf],
    expectations: Option<&Expectations>,
    csv: Option<&Path>,
    budget: u64,
    mut report: impl FnMut(&Path, FileResult),
) -> Result<SuiteRun, LitmusFileError> {
    let csv_dir = csv.and_then(Path::parent).unwrap_or(Path::new("."));
    let mut run = SuiteRun::default();
    for file in files {
        let expectation = expectations.and_then(|e| e.find(file));
        let name = test_name(expectations, file);
        let test = match parse_file(file) {
            Ok(t) => t,
            Err(e @ LitmusFileError::Syntax { .. }) => {
                run.malformed += 1;
                let why = format!("malformed: {e}");
                report(file, FileResult::Malformed(e.to_string()));
                run.table
                    .rows
                    .push(ModelRow::new(&name, expectation, Err(why)));
                continue;
            }
            Err(e) => return Err(e),
        };
        match model_within(&test, budget) {
            Ok(outcome) => {
                report(file, FileResult::Modelled(&outcome));
                run.table
                    .rows
                    .push(ModelRow::new(&name, expectation, Ok(&outcome)));
                let rel = relative(file, csv_dir);
                let family = file
                    .parent()
                    .and_then(|p| p.file_name())
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default();
                run.csv_rows
                    .push(CsvRow::new(&rel, &family, &test, &outcome, ""));
            }
            Err(r) => {
                let why = format!("refused (line {}): `{}`: {}", r.line, r.construct, r.reason);
                let refused = FileResult::Refused {
                    test: test.name.clone(),
                    why: r.to_string(),
                };
                report(file, refused);
                run.table
                    .rows
                    .push(ModelRow::new(&name, expectation, Err(why)));
            }
        }
    }
    Ok(run)
}
