//! Process isolation: requests answered by a child process, so that a kernel fault or a hung
//! kernel ends the child and never the caller.
//!
//! Why a process and not a new CUDA context: on an H100 (driver 580, 2026-11-27) one kernel's
//! illegal address left every context of the process failing, new ones included; CUDA recovers
//! from such a fault only in a new process. A hung kernel keeps its context busy for good, too.
//!
//! The protocol is JSON lines: the caller writes one request a line on the child's standard
//! input; the child writes each answer after [`ANSWER_MARK`] on its standard output. Standard
//! output is not the child's alone: on a GPU the driver writes the kernels' device-side `printf`
//! there at a synchronisation, not always ending in a newline, so the caller takes what follows
//! the mark on a line and passes over everything else.
//!
//! `check` and `harden` ([`crate::check::Supervisor`]) and `litmus run` on a GPU
//! ([`crate::litmus::file::suite`]) talk to their workers through this module.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// What starts an answer on the worker's standard output (a control character, which JSON
/// text never holds unescaped).
pub const ANSWER_MARK: &str = "\u{1e}gpuwmm-answer ";

/// The answer a line of the worker's standard output holds, if any: the text after
/// [`ANSWER_MARK`], whatever came before it on the line (device output without a newline).
pub fn answer_in(line: &str) -> Option<&str> {
    line.find(ANSWER_MARK)
        .map(|at| &line[at + ANSWER_MARK.len()..])
}

/// Writes `answer` as the worker's next answer line and flushes it.
pub fn write_answer(output: &mut impl Write, answer: &impl Serialize) -> std::io::Result<()> {
    let json = serde_json::to_string(answer).map_err(std::io::Error::other)?;
    writeln!(output, "{ANSWER_MARK}{json}")?;
    output.flush()
}

/// How to start a worker: a program and its arguments (the `gpuwmm` binary and one of its
/// hidden worker modes), and extra environment variables.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// A running worker. Dropping it kills the process.
pub struct WorkerProcess {
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<String>,
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What came back from a worker.
#[derive(Debug)]
pub enum Received<A> {
    Answer(A),
    Silent(Duration),
    Died(String),
    Garbled(String),
}

impl<A: std::fmt::Debug> std::fmt::Display for Received<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Received::Answer(a) => write!(f, "unexpected answer {a:?}"),
            Received::Silent(t) => write!(f, "worker did not answer within {t:?}"),
            Received::Died(status) => write!(f, "worker died ({status})"),
            Received::Garbled(line) => write!(f, "unreadable answer from the worker: {line}"),
        }
    }
}

impl WorkerProcess {
    /// Starts `command` with piped standard input and output (its standard error is ours).
    pub fn spawn(command: &WorkerCommand) -> Result<WorkerProcess, String> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", command.program.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (send, answers) = mpsc::channel();
        std::thread::spawn(move || {
            // Lines without an answer are the kernels' device output, in any bytes.
            for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
                let line = String::from_utf8_lossy(&line);
                let Some(answer) = answer_in(&line) else {
                    continue;
                };
                if send.send(answer.to_string()).is_err() {
                    break;
                }
            }
        });
        Ok(WorkerProcess {
            child,
            stdin,
            answers,
        })
    }

    /// Writes `request` as one line.
    pub fn send(&mut self, request: &impl Serialize) -> Result<(), String> {
        let line = serde_json::to_string(request).map_err(|e| e.to_string())?;
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("cannot write to the worker: {e}"))
    }

    /// The next answer, waiting at most `limit`.
    pub fn receive<A: DeserializeOwned>(&mut self, limit: Duration) -> Received<A> {
        let start = Instant::now();
        match self.answers.recv_timeout(limit) {
            Ok(line) => match serde_json::from_str(&line) {
                Ok(answer) => Received::Answer(answer),
                Err(_) => Received::Garbled(line),
            },
            Err(RecvTimeoutError::Timeout) => Received::Silent(start.elapsed()),
            Err(RecvTimeoutError::Disconnected) => Received::Died(self.exit_status()),
        }
    }

    /// Sends `request` and waits at most `limit` for its answer; a worker that cannot be
    /// written to has died.
    pub fn ask<A: DeserializeOwned>(
        &mut self,
        request: &impl Serialize,
        limit: Duration,
    ) -> Received<A> {
        match self.send(request) {
            Ok(()) => self.receive(limit),
            Err(_) => Received::Died(self.exit_status()),
        }
    }

    /// How the worker ended, waiting briefly for it to do so.
    fn exit_status(&mut self) -> String {
        for _ in 0..100 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.to_string();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        "still running".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_found_after_device_output_that_did_not_end_its_line() {
        let json = r#"{"error":"x"}"#;
        let line = format!("thread 3 says hi{ANSWER_MARK}{json}");
        assert_eq!(answer_in(&line), Some(json));
        assert_eq!(answer_in(&format!("{ANSWER_MARK}{json}")), Some(json));
        assert_eq!(answer_in("thread 3 says hi"), None);
        assert_eq!(
            answer_in(json),
            None,
            "a bare JSON line is device output too"
        );
    }

    #[test]
    fn an_answer_written_is_an_answer_read_and_its_json_never_holds_the_mark() {
        let mut out = Vec::new();
        write_answer(&mut out, &ANSWER_MARK.to_string()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let json = answer_in(text.trim_end()).expect("a marked answer");
        assert_eq!(answer_in(json), None, "{json}");
        assert_eq!(serde_json::from_str::<String>(json).unwrap(), ANSWER_MARK);
    }

    #[test]
    fn a_worker_that_exits_without_answering_has_died() {
        let command = WorkerCommand {
            program: "sh".into(),
            args: vec!["-c".into(), "read line; exit 3".into()],
            env: Vec::new(),
        };
        let mut worker = WorkerProcess::spawn(&command).unwrap();
        let received: Received<String> = worker.ask(&"hello", Duration::from_secs(20));
        match received {
            Received::Died(status) => assert!(status.contains('3'), "{status}"),
            other => panic!("expected a death, got {other}"),
        }
    }
}
