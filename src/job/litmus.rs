//! A litmus suite run as a job: with `--journal`, each test's result is appended to a CSV
//! journal as the test ends, so that an interrupted run of a long suite (thousands of generated
//! tests, a conformance run at 100,000 executions) loses only the test under way, and `--resume`
//! runs only the tests the journal does not hold, printing the others from it.
//!
//! A test is journaled by its path and a SHA-256 of its text: a file edited since runs again.
//! A resume must run with the journal's settings (every option a result depends on, named or
//! not), since a conformance table of tests run under two settings would say nothing of
//! either. A test the backend failed on (a fault, a worker lost) is not journaled: that is no
//! result of the test, and a resume runs it again.

use super::settings::{all_differences, Settings};
use super::sidecar::{create_journal, now, resume_journal, JobKind};
use super::JobError;
use crate::apps::hash::bytes_sha256;
use crate::backend::sim::SimModel;
use crate::backend::BackendKind;
use crate::check::journal::Journal;
use crate::litmus::file::expect::Finding;
use crate::litmus::file::run::FileSettings;
use crate::litmus::file::suite::FileResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The sidecar of a litmus journal (beside its `kind`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LitmusMeta {
    pub tool_version: String,
    pub started: String,
    /// Every option a test's result depends on, as the command line spells it.
    pub settings: BTreeMap<String, String>,
}

/// One journaled test: a row of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LitmusRecord {
    /// The file, as the suite named it.
    pub file: String,
    /// SHA-256 of the file's text ([`bytes_sha256`]).
    pub sha256: String,
    /// `ran`, `deadlocked` or `not-run`.
    pub outcome: String,
    pub executions: u64,
    pub not_finished: u64,
    /// Executions that reached the state the condition is about (`ran` only).
    pub reached: u64,
    /// Why the test did not run (`not-run` only).
    pub reason: String,
    /// The file is not in the litmus dialect.
    pub malformed: bool,
    /// The herd-style report, each line break written as `\n` and each backslash as `\\`, so
    /// that a row is one line and a row cut short by a kill is found and dropped.
    pub report: String,
}

impl LitmusRecord {
    fn of(file: &Path, sha256: String, result: &FileResult) -> LitmusRecord {
        let (outcome, executions, not_finished, reached, reason) = match &result.finding {
            Finding::Ran {
                executions,
                not_finished,
                reached,
            } => ("ran", *executions, *not_finished, *reached, String::new()),
            Finding::Deadlocked { not_finished } => {
                ("deadlocked", 0, *not_finished, 0, String::new())
            }
            Finding::NotRun(reason) => ("not-run", 0, 0, 0, reason.clone()),
        };
        LitmusRecord {
            file: file.display().to_string(),
            sha256,
            outcome: outcome.to_string(),
            executions,
            not_finished,
            reached,
            reason,
            malformed: result.malformed,
            report: one_line(&result.report),
        }
    }

    /// The result the row records, or why it cannot be read back.
    fn result(&self) -> Result<FileResult, String> {
        let finding = match self.outcome.as_str() {
            "ran" => Finding::Ran {
                executions: self.executions,
                not_finished: self.not_finished,
                reached: self.reached,
            },
            "deadlocked" => Finding::Deadlocked {
                not_finished: self.not_finished,
            },
            "not-run" => Finding::NotRun(self.reason.clone()),
            other => return Err(format!("unknown outcome `{other}`")),
        };
        Ok(FileResult {
            report: from_one_line(&self.report),
            finding,
            malformed: self.malformed,
            backend_lost: false,
            backend_error: false,
        })
    }
}

/// `text` on one line: `\` as `\\`, a line break as `\n`.
fn one_line(text: &str) -> String {
    text.replace('\\', r"\\").replace('\n', r"\n")
}

/// The text [`one_line`] wrote.
fn from_one_line(line: &str) -> String {
    let mut text = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => text.push('\n'),
                Some(other) => text.push(other),
                None => text.push('\\'),
            },
            (c, false) => text.push(c),
        }
    }
    text
}

/// The settings a litmus journal records: every option a test's result depends on. The
/// simulator's own options are `not used` on a GPU.
pub fn litmus_settings(
    file: &FileSettings,
    (backend, seed): (BackendKind, u64),
    (sim_model, sim_budget): (SimModel, u64),
) -> Settings {
    let sim_only = |value: String| match backend {
        BackendKind::Sim => value,
        BackendKind::Cuda => "not used (GPU)".to_string(),
    };
    Settings::from([
        ("--backend", backend.name().to_string()),
        ("--sim-model", sim_only(sim_model.name().to_string())),
        ("--sim-budget", sim_only(sim_budget.to_string())),
        ("--seed", seed.to_string()),
        ("--executions", file.executions.to_string()),
        ("--max-executions", file.max_executions.to_string()),
        ("--instances", file.instances.to_string()),
        ("--distance", file.distance.to_string()),
        ("--deadline", format!("{} ms", file.deadline.as_millis())),
    ])
}

/// Where a suite's results go: nowhere but the screen, or a journal.
pub struct SuiteJournal {
    journal: Option<Journal<LitmusRecord>>,
    /// The journaled results, by file and text hash.
    recorded: BTreeMap<(String, String), LitmusRecord>,
}

impl SuiteJournal {
    /// No journal: every test runs.
    pub fn none() -> SuiteJournal {
        SuiteJournal {
            journal: None,
            recorded: BTreeMap::new(),
        }
    }

    /// A new journal at `path`, or with `resume` the one there, which must record `settings`.
    pub fn open(path: &Path, resume: bool, settings: &Settings) -> Result<SuiteJournal, JobError> {
        super::interrupt::resumes("--journal", path, path);
        let settings: BTreeMap<String, String> = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        if !resume {
            let meta = LitmusMeta {
                tool_version: env!("CARGO_PKG_VERSION").to_string(),
                started: now(),
                settings,
            };
            let journal =
                create_journal(path, JobKind::Litmus, &meta).map_err(super::bad_journal)?;
            return Ok(SuiteJournal {
                journal: Some(journal),
                recorded: BTreeMap::new(),
            });
        }
        let (journal, meta, rows): (_, LitmusMeta, Vec<LitmusRecord>) = resume_journal(path)?;
        refuse_other_settings(path, &meta.settings, &settings)?;
        let recorded = rows
            .into_iter()
            .map(|row| ((row.file.clone(), row.sha256.clone()), row))
            .collect();
        Ok(SuiteJournal {
            journal: Some(journal),
            recorded,
        })
    }

    /// Tests the journal held when it was opened.
    pub fn journaled(&self) -> usize {
        self.recorded.len()
    }

    /// The result of `file`: the journal's when it holds the file as it is now (`true`), else
    /// what `run` gives, journaled unless the backend failed (`false`).
    pub fn result_of<E: From<JobError>>(
        &mut self,
        file: &Path,
        run: impl FnOnce() -> Result<FileResult, E>,
    ) -> Result<(FileResult, bool), E> {
        if self.journal.is_none() {
            return Ok((run()?, false));
        }
        // A file that cannot be read is not journaled: running it says why.
        let Ok(text) = std::fs::read(file) else {
            return Ok((run()?, false));
        };
        let sha256 = bytes_sha256(&text);
        let key = (file.display().to_string(), sha256);
        if let Some(row) = self.recorded.get(&key) {
            let result = row.result().map_err(|e| {
                JobError::refused(format!(
                    "the journal's row of {} cannot be read back: {e}",
                    file.display()
                ))
            })?;
            return Ok((result, true));
        }
        let result = run()?;
        if !result.backend_error {
            let row = LitmusRecord::of(file, key.1, &result);
            let journal = self.journal.as_mut().expect("checked above");
            journal.append(&row).map_err(JobError::from)?;
        }
        Ok((result, false))
    }
}

/// A resume with other settings than the journal's is refused, naming each.
fn refuse_other_settings(
    path: &Path,
    recorded: &BTreeMap<String, String>,
    asked: &BTreeMap<String, String>,
) -> Result<(), JobError> {
    let differences = all_differences(recorded, asked);
    if differences.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = differences.iter().map(|d| d.to_string()).collect();
    Err(JobError::refused(format!(
        "cannot resume {}: its tests ran with other settings ({}); give the journal's, or \
         another --journal",
        path.display(),
        listed.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(report: &str, finding: Finding) -> FileResult {
        FileResult {
            report: report.to_string(),
            finding,
            malformed: false,
            backend_lost: false,
            backend_error: false,
        }
    }

    #[test]
    fn a_report_survives_its_one_line_form() {
        for text in ["a\nb\n", r"a\nb", "back\\slash\n\\", "", "\\\n\n"] {
            let line = one_line(text);
            assert!(!line.contains('\n'), "{line:?}");
            assert_eq!(from_one_line(&line), text, "{line:?}");
        }
    }

    #[test]
    fn each_finding_reads_back_as_it_was_journaled() {
        let findings = [
            Finding::Ran {
                executions: 10,
                not_finished: 2,
                reached: 3,
            },
            Finding::Deadlocked { not_finished: 7 },
            Finding::NotRun("refused (line 3): `foo`".into()),
        ];
        for finding in findings {
            let before = result("Test x\nOk\n", finding);
            let row = LitmusRecord::of(Path::new("x.litmus"), "ab".into(), &before);
            assert_eq!(row.result().unwrap(), before);
        }
    }

    fn settings(executions: u64) -> Settings {
        let file = FileSettings {
            executions,
            ..FileSettings::default()
        };
        litmus_settings(&file, (BackendKind::Sim, 1), (SimModel::Ptx, 100_000))
    }

    #[test]
    fn a_journaled_test_is_not_run_again_unless_its_file_changed() {
        let dir = tempfile::tempdir().unwrap();
        let (test, path) = (dir.path().join("t.litmus"), dir.path().join("j.csv"));
        std::fs::write(&test, "one").unwrap();
        let ran = || Ok::<_, JobError>(result("r\n", Finding::NotRun("n".into())));
        let mut journal = SuiteJournal::open(&path, false, &settings(5)).unwrap();
        assert!(!journal.result_of(&test, ran).unwrap().1);
        drop(journal);
        let mut resumed = SuiteJournal::open(&path, true, &settings(5)).unwrap();
        let never = || -> Result<FileResult, JobError> { panic!("journaled: not run again") };
        let (again, journaled) = resumed.result_of(&test, never).unwrap();
        assert!(journaled);
        assert_eq!(again, ran().unwrap());
        std::fs::write(&test, "two").unwrap();
        assert!(!resumed.result_of(&test, ran).unwrap().1);
    }

    #[test]
    fn a_resume_with_other_settings_is_refused_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        SuiteJournal::open(&path, false, &settings(5)).unwrap();
        let Err(e) = SuiteJournal::open(&path, true, &settings(6)) else {
            panic!("a resume with other settings went on");
        };
        assert!(e.is_bad_input());
        assert!(
            e.to_string().contains("--executions recorded 5, given 6"),
            "{e}"
        );
    }

    #[test]
    fn a_result_the_backend_failed_on_is_not_journaled() {
        let dir = tempfile::tempdir().unwrap();
        let (test, path) = (dir.path().join("t.litmus"), dir.path().join("j.csv"));
        std::fs::write(&test, "one").unwrap();
        let mut journal = SuiteJournal::open(&path, false, &settings(5)).unwrap();
        let failed = || {
            let mut r = result("lost\n", Finding::NotRun("backend: gone".into()));
            r.backend_error = true;
            Ok::<_, JobError>(r)
        };
        journal.result_of(&test, failed).unwrap();
        drop(journal);
        let resumed = SuiteJournal::open(&path, true, &settings(5)).unwrap();
        assert_eq!(resumed.journaled(), 0);
    }
}
