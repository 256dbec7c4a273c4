//! The patch check's journal: each run of the app built from harden's patch, one flushed line
//! at a time, so that a hardening killed during its patch check resumes there instead of
//! running the patched app from its first run again.
//!
//! The file (`<harden journal>.patch-check.jsonl`) opens with a line naming the patch (a hash of
//! the patched files) and the plan its runs follow (environment, seed, stress). A journal whose
//! first line names another patch or plan (a resume with another `--fence-style`, or a rerun of
//! the search that kept other fences) holds runs of another app: it is started anew. A last line
//! that a kill cut short is skipped.

use crate::apps::hash::patch_sha256;
use crate::apps::PatchedFile;
use crate::check::journal::hold_writes;
use crate::check::outcome::Outcome;
use crate::env::Environment;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a patch check's runs belong to: its journal's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchJournalHead {
    pub patch_sha256: String,
    pub env: Environment,
    pub seed: u64,
    pub stress_iterations: u32,
}

impl PatchJournalHead {
    pub fn new(patched: &[PatchedFile], env: Environment, seed: u64, stress: u32) -> Self {
        PatchJournalHead {
            patch_sha256: patch_sha256(patched),
            env,
            seed,
            stress_iterations: stress,
        }
    }
}

/// One run of the patched app, as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchRunRecord {
    pub run: u64,
    pub seed: u64,
    pub outcome: Outcome,
    pub reason: String,
    /// The races it recorded, as the patch check lists them (empty where none are recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub races: Vec<String>,
}

/// The journal of a hardening's patch check, open for appending.
pub struct PatchJournal {
    path: PathBuf,
    file: std::fs::File,
}

impl PatchJournal {
    /// The journal beside the hardening journaled at `journal`.
    pub fn path_for(journal: &Path) -> PathBuf {
        let mut name = journal.as_os_str().to_owned();
        name.push(".patch-check.jsonl");
        PathBuf::from(name)
    }

    /// Opens the journal at `path` for the runs `head` describes: the runs it already holds in
    /// order (run 0, 1, … with no gap), or none when it is new or names another patch or plan
    /// (then it is started anew).
    pub fn open(
        path: &Path,
        head: &PatchJournalHead,
    ) -> std::io::Result<(PatchJournal, Vec<PatchRunRecord>)> {
        let (file, done) = match read_runs(path, head)? {
            Some((done, kept)) => {
                // What follows the last whole run (a line a kill cut short) goes, so that the
                // next run's line does not run into it.
                let file = std::fs::OpenOptions::new().append(true).open(path)?;
                file.set_len(kept)?;
                (file, done)
            }
            None => {
                let mut file = std::fs::File::create(path)?;
                write_line(&mut file, head)?;
                (file, Vec::new())
            }
        };
        let path = path.to_path_buf();
        Ok((PatchJournal { path, file }, done))
    }

    /// Appends one run (a flushed line, which SIGINT or SIGTERM never cuts: see
    /// [`hold_writes`]).
    pub fn append(&mut self, run: &PatchRunRecord) -> std::io::Result<()> {
        let _writing = hold_writes();
        write_line(&mut self.file, run)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn write_line<T: Serialize>(file: &mut std::fs::File, value: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_string(value).map_err(std::io::Error::other)?;
    line.push('\n');
    file.write_all(line.as_bytes())?;
    file.flush()
}

/// The runs journaled at `path` for `head`, in order and without a gap, with the length in
/// bytes of the lines that hold them and the first line; a line a kill cut short, or one that
/// does not read, ends them. `None` when there is no journal there or it belongs to another
/// patch or plan.
fn read_runs(
    path: &Path,
    head: &PatchJournalHead,
) -> std::io::Result<Option<(Vec<PatchRunRecord>, u64)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut lines = text.split_inclusive('\n').filter(|l| l.ends_with('\n'));
    let first = lines.next();
    let same = first.and_then(|l| serde_json::from_str::<PatchJournalHead>(l).ok());
    let Some(first) = first.filter(|_| same.as_ref() == Some(head)) else {
        return Ok(None);
    };
    let mut kept = first.len();
    let mut runs = Vec::new();
    for line in lines {
        match serde_json::from_str::<PatchRunRecord>(line) {
            Ok(run) if run.run == runs.len() as u64 => runs.push(run),
            _ => break,
        }
        kept += line.len();
    }
    Ok(Some((runs, kept as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(patch: &str) -> PatchJournalHead {
        let file = PatchedFile::new("kernel.cu".into(), patch.into());
        PatchJournalHead::new(&[file], "sys-str+".parse().unwrap(), 1, 4)
    }

    fn pass(run: u64) -> PatchRunRecord {
        PatchRunRecord {
            run,
            seed: 100 + run,
            outcome: Outcome::Pass,
            reason: String::new(),
            races: Vec::new(),
        }
    }

    #[test]
    fn runs_journaled_for_a_patch_come_back_for_it_and_not_for_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = PatchJournal::path_for(&dir.path().join("h.csv"));
        assert!(path.to_str().unwrap().ends_with("h.csv.patch-check.jsonl"));
        let (mut journal, done) = PatchJournal::open(&path, &head("a")).unwrap();
        assert!(done.is_empty());
        journal.append(&pass(0)).unwrap();
        journal.append(&pass(1)).unwrap();
        drop(journal);
        let (mut journal, done) = PatchJournal::open(&path, &head("a")).unwrap();
        assert_eq!(done, vec![pass(0), pass(1)]);
        journal.append(&pass(2)).unwrap();
        drop(journal);
        assert_eq!(PatchJournal::open(&path, &head("a")).unwrap().1.len(), 3);
        // Another patch: its runs start anew, and the journal is now that patch's.
        assert!(PatchJournal::open(&path, &head("b")).unwrap().1.is_empty());
        assert!(PatchJournal::open(&path, &head("a")).unwrap().1.is_empty());
    }

    #[test]
    fn a_line_a_kill_cut_short_ends_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.patch-check.jsonl");
        let (mut journal, _) = PatchJournal::open(&path, &head("a")).unwrap();
        journal.append(&pass(0)).unwrap();
        drop(journal);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"{\"run\":1,\"seed\":1").unwrap();
        drop(file);
        let (mut journal, done) = PatchJournal::open(&path, &head("a")).unwrap();
        assert_eq!(done, vec![pass(0)]);
        // The cut line is gone: the next run's line reads.
        journal.append(&pass(1)).unwrap();
        drop(journal);
        let (_, done) = PatchJournal::open(&path, &head("a")).unwrap();
        assert_eq!(done, vec![pass(0), pass(1)]);
    }
}
