//! A suite of litmus files run one after another, as `litmus run` runs them: each parsed, run,
//! reported and judged, on a backend that a fault or a hung kernel may take away.
//!
//! Why two runners: the simulator never loses itself, so [`InProcess`] runs every file in this
//! process and opens a new backend when a test ended the old one. On a GPU a kernel fault ends
//! CUDA for the whole process (seen on an H100: every context failed afterwards, new ones too),
//! so [`Isolated`] runs the files in a worker process ([`crate::isolation`]) and starts a new
//! worker after a test that lost its backend; the suite goes on either way.

use super::expect::Finding;
use super::parse::parse_file;
use super::run::{run_litmus_file, FileRunError, FileSettings};
use super::LitmusFileError;
use crate::backend::Backend;
use crate::isolation::{write_answer, Received, WorkerCommand, WorkerProcess};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What one file gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileResult {
    /// What to show: the herd-style report, or why the test did not run.
    pub report: String,
    pub finding: Finding,
    /// The file is not in the litmus dialect (the report names file and line).
    pub malformed: bool,
    /// The backend cannot be used after this test (a fault, or a kernel that never ended).
    pub backend_lost: bool,
    /// The test did not run because the backend failed (not a result of the test: a journal
    /// keeps no such result, see [`crate::job::litmus`]).
    #[serde(default)]
    pub backend_error: bool,
}

impl FileResult {
    fn malformed(e: &LitmusFileError) -> FileResult {
        FileResult {
            report: format!("error: {e}\n"),
            finding: Finding::NotRun(format!("malformed: {e}")),
            malformed: true,
            backend_lost: false,
            backend_error: false,
        }
    }

    /// Refused: the test uses what the backend cannot run.
    fn refused(report: String, reason: String) -> FileResult {
        FileResult {
            report,
            finding: Finding::NotRun(reason),
            malformed: false,
            backend_lost: false,
            backend_error: false,
        }
    }

    /// The backend failed (`backend_lost`: and cannot be used again).
    fn backend_failed(report: String, reason: String, backend_lost: bool) -> FileResult {
        FileResult {
            report,
            finding: Finding::NotRun(reason),
            malformed: false,
            backend_lost,
            backend_error: true,
        }
    }
}

/// Runs `file` on `backend`. Only a file that cannot be read is an error; a malformed one, a
/// refused one and a backend error are results.
pub fn run_file(
    backend: &mut dyn Backend,
    file: &Path,
    settings: &FileSettings,
    seed: u64,
    progress: impl FnMut(u64),
) -> Result<FileResult, LitmusFileError> {
    let test = match parse_file(file) {
        Err(e @ LitmusFileError::Syntax { .. }) => return Ok(FileResult::malformed(&e)),
        Err(e) => return Err(e),
        Ok(test) => test,
    };
    Ok(
        match run_litmus_file(backend, &test, settings, seed, progress) {
            Ok(outcome) => FileResult {
                report: outcome.report(),
                finding: outcome.finding(&test),
                malformed: false,
                backend_lost: outcome.backend_lost,
                backend_error: false,
            },
            Err(FileRunError::Refused(r)) => FileResult::refused(
                format!("Test {} refused: {r}\n", test.name),
                format!("refused (line {}): `{}`: {}", r.line, r.construct, r.reason),
            ),
            Err(FileRunError::Backend(e)) => FileResult::backend_failed(
                format!("Test {} failed on the backend: {e}\n", test.name),
                format!("backend: {}", first_line(&e.to_string())),
                e.loses_context(),
            ),
        },
    )
}

/// The first line of a message, tabs as spaces (PTX text in backend errors has tabs).
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or(text).replace('\t', " ")
}

/// Runs the files of a suite, one at a time.
pub trait SuiteRunner {
    /// Runs `file`, calling `progress` with executions done where the runner can tell.
    fn run(&mut self, file: &Path, progress: &mut dyn FnMut(u64))
        -> Result<FileResult, SuiteError>;
}

/// Why a suite cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error(transparent)]
    File(#[from] LitmusFileError),
    #[error("cannot open the backend again: {0}")]
    Reopen(String),
    #[error("litmus worker: {0}")]
    Worker(String),
}

/// Opens a backend (again).
pub type OpenBackend = Box<dyn FnMut() -> Result<Box<dyn Backend>, String>>;

/// Every file in this process, a new backend after a test that lost the old one.
pub struct InProcess {
    backend: Box<dyn Backend>,
    open: OpenBackend,
    settings: FileSettings,
    seed: u64,
}

impl InProcess {
    pub fn new(
        backend: Box<dyn Backend>,
        open: OpenBackend,
        settings: FileSettings,
        seed: u64,
    ) -> InProcess {
        InProcess {
            backend,
            open,
            settings,
            seed,
        }
    }
}

impl SuiteRunner for InProcess {
    fn run(
        &mut self,
        file: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<FileResult, SuiteError> {
        let result = run_file(
            self.backend.as_mut(),
            file,
            &self.settings,
            self.seed,
            progress,
        )?;
        if result.backend_lost {
            self.backend = (self.open)().map_err(SuiteError::Reopen)?;
        }
        Ok(result)
    }
}

/// A request to a litmus worker: run this file.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    file: PathBuf,
}

/// A litmus worker's answer.
#[derive(Debug, Serialize, Deserialize)]
enum Answer {
    Ran(FileResult),
    /// The file could not be read.
    Error(String),
}

/// Every file in a worker process, a new worker after a test that lost its backend or ended
/// its worker.
pub struct Isolated {
    command: WorkerCommand,
    worker: Option<WorkerProcess>,
    settings: FileSettings,
    /// Workers started so far.
    pub starts: u64,
}

impl Isolated {
    /// `command` starts a worker that [`serve`]s with the same `settings`.
    pub fn new(command: WorkerCommand, settings: FileSettings) -> Isolated {
        Isolated {
            command,
            worker: None,
            settings,
            starts: 0,
        }
    }

    /// How long a file may take: every launch its deadline, and a minute to start the worker
    /// and build the kernel.
    fn limit(&self) -> Duration {
        let launches = self
            .settings
            .executions
            .div_ceil(self.settings.instances.max(1) as u64);
        self.settings.deadline * launches.min(u32::MAX as u64) as u32 + Duration::from_secs(60)
    }
}

impl SuiteRunner for Isolated {
    fn run(
        &mut self,
        file: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<FileResult, SuiteError> {
        // Read here first: a malformed or unreadable file needs no worker, and an unreadable
        // one stays the user's error.
        match parse_file(file) {
            Err(e @ LitmusFileError::Syntax { .. }) => return Ok(FileResult::malformed(&e)),
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        if self.worker.is_none() {
            self.worker = Some(WorkerProcess::spawn(&self.command).map_err(SuiteError::Worker)?);
            self.starts += 1;
        }
        let limit = self.limit();
        let worker = self.worker.as_mut().expect("started above");
        let request = Request {
            file: file.to_path_buf(),
        };
        let received = worker.ask(&request, limit);
        let result = match received {
            Received::Answer(Answer::Ran(result)) => result,
            Received::Answer(Answer::Error(e)) => return Err(SuiteError::Worker(e)),
            lost => FileResult::backend_failed(
                format!("Test {} ended its worker: {lost}\n", file.display()),
                format!("backend: {lost}"),
                true,
            ),
        };
        if result.backend_lost {
            self.worker = None;
        } else {
            progress(self.settings.executions);
        }
        Ok(result)
    }
}

/// The worker's side: opens the backend, then runs each file named on `input` and answers on
/// `output`, until the input ends or a test lost the backend (the caller starts a new worker).
pub fn serve(
    open: &mut OpenBackend,
    settings: &FileSettings,
    seed: u64,
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    let mut backend = None;
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let request: Request = serde_json::from_str(&line).map_err(std::io::Error::other)?;
        let opened = match &mut backend {
            Some(b) => b,
            None => match open() {
                Ok(b) => backend.insert(b),
                Err(e) => {
                    let result = FileResult::backend_failed(
                        format!("Test {} not run: {e}\n", request.file.display()),
                        format!("backend: {}", first_line(&e)),
                        true,
                    );
                    write_answer(&mut output, &Answer::Ran(result))?;
                    return Ok(());
                }
            },
        };
        let answer = match run_file(opened.as_mut(), &request.file, settings, seed, |_| {}) {
            Ok(result) => Answer::Ran(result),
            Err(e) => Answer::Error(e.to_string()),
        };
        let lost = matches!(&answer, Answer::Ran(r) if r.backend_lost);
        write_answer(&mut output, &answer)?;
        if lost {
            return Ok(());
        }
    }
    Ok(())
}
