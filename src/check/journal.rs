//! Journals: one CSV row per run, appended and flushed as the run ends, with a JSON sidecar that
//! records what the rows are runs of.
//!
//! A check or a hardening killed at any moment (SIGKILL included) leaves every finished run in
//! its journal: each row is written with one `write` and flushed, and a row cut short by the kill
//! is the only thing lost — [`Journal::resume`] drops it and the run is simply done again.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A journal that cannot be written or read back.
#[derive(Debug, Error)]
pub enum JournalError {
    #[error("journal {}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "journal {} already exists: pass --resume to continue it, or --journal to write another",
        .0.display()
    )]
    Exists(PathBuf),
    #[error("{}: line {line}: {message}", .path.display())]
    BadRow {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("{}: {message}", .path.display())]
    BadMeta { path: PathBuf, message: String },
    #[error("cannot resume {}: {message}", .path.display())]
    Mismatch { path: PathBuf, message: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The sidecar holding what a journal is about: `x.csv` → `x.json`.
pub fn meta_path(journal: &Path) -> PathBuf {
    journal.with_extension("json")
}

/// An open journal of rows of type `R`.
pub struct Journal<R> {
    path: PathBuf,
    file: File,
    rows: PhantomData<R>,
}

impl<R: Serialize + DeserializeOwned> Journal<R> {
    /// Starts a new journal at `path` (refusing to overwrite one) with `meta` in its sidecar.
    pub fn create(path: &Path, meta: &impl Serialize) -> Result<Journal<R>, JournalError> {
        if path.exists() {
            return Err(JournalError::Exists(path.to_path_buf()));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let meta_file = meta_path(path);
        let text = serde_json::to_string_pretty(meta).expect("meta serialises");
        std::fs::write(&meta_file, text + "\n").map_err(io(&meta_file))?;
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(io(path))?;
        let mut journal = Journal {
            path: path.to_path_buf(),
            file,
            rows: PhantomData,
        };
        journal.write(&header::<R>())?;
        Ok(journal)
    }

    /// Reopens a journal to append to: returns it, its metadata and the rows recorded so far. A
    /// last row cut short by a kill is removed.
    pub fn resume<M: DeserializeOwned>(
        path: &Path,
    ) -> Result<(Journal<R>, M, Vec<R>), JournalError> {
        let meta = read_meta(path)?;
        truncate_partial_row(path)?;
        let rows = read_rows(path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io(path))?;
        let journal = Journal {
            path: path.to_path_buf(),
            file,
            rows: PhantomData,
        };
        Ok((journal, meta, rows))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one row and flushes it.
    pub fn append(&mut self, row: &R) -> Result<(), JournalError> {
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        writer.serialize(row).map_err(|e| JournalError::BadRow {
            path: self.path.clone(),
            line: 0,
            message: e.to_string(),
        })?;
        let bytes = writer.into_inner().expect("writing to memory cannot fail");
        self.write(&bytes)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), JournalError> {
        // One write per row: a kill leaves whole rows and at most one partial last row.
        self.file
            .write_all(bytes)
            .and_then(|()| self.file.flush())
            .map_err(io(&self.path))
    }
}

/// The CSV header line of rows of type `R`. `csv` writes a header only together with a first
/// row, and a new journal wants it at once, so it is made from the field names serde expects.
fn header<R: Serialize + DeserializeOwned>() -> Vec<u8> {
    let names = field_names::<R>();
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(&names).expect("writing to memory");
    writer.into_inner().expect("writing to memory")
}

/// The field names of a struct as serde deserialises it.
fn field_names<R: DeserializeOwned>() -> Vec<&'static str> {
    struct Names(Vec<&'static str>);
    impl<'de> serde::Deserializer<'de> for &mut Names {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("names only"))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.extend(fields);
            Err(serde::de::Error::custom("names only"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut names = Names(Vec::new());
    let _ = R::deserialize(&mut names);
    names.0
}

/// Reads a journal's sidecar.
pub fn read_meta<M: DeserializeOwned>(journal: &Path) -> Result<M, JournalError> {
    let path = meta_path(journal);
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    serde_json::from_str(&text).map_err(|e| JournalError::BadMeta {
        path,
        message: e.to_string(),
    })
}

/// Reads every complete row of a journal.
pub fn read_rows<R: DeserializeOwned>(path: &Path) -> Result<Vec<R>, JournalError> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| JournalError::BadRow {
        path: path.to_path_buf(),
        line: 0,
        message: e.to_string(),
    })?;
    let mut rows = Vec::new();
    for (i, row) in reader.deserialize().enumerate() {
        rows.push(row.map_err(|e: csv::Error| JournalError::BadRow {
            path: path.to_path_buf(),
            line: i as u64 + 2,
            message: e.to_string(),
        })?);
    }
    Ok(rows)
}

/// Cuts a last line that has no newline (a row whose write a kill interrupted).
fn truncate_partial_row(path: &Path) -> Result<(), JournalError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io(path))?;
    file.set_len(keep as u64).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Row {
        run: u64,
        outcome: String,
        reason: String,
    }

    fn row(run: u64) -> Row {
        Row {
            run,
            outcome: "fail".into(),
            reason: format!("result {run}, expected 4, \"quoted\""),
        }
    }

    /// A new journal in a temporary folder holding `row(0)`; keep the folder while using it.
    fn journal_of_one_row() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        Journal::<Row>::create(&path, &1)
            .unwrap()
            .append(&row(0))
            .unwrap();
        (dir, path)
    }

    #[test]
    fn rows_survive_a_reopen_with_header_and_quoting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/j.csv");
        let mut journal = Journal::<Row>::create(&path, &"meta").unwrap();
        journal.append(&row(0)).unwrap();
        journal.append(&row(1)).unwrap();
        drop(journal);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("run,outcome,reason\n"), "{text}");
        let (mut journal, meta, rows) = Journal::<Row>::resume::<String>(&path).unwrap();
        assert_eq!(meta, "meta");
        assert_eq!(rows, [row(0), row(1)]);
        journal.append(&row(2)).unwrap();
        assert_eq!(read_rows::<Row>(&path).unwrap().len(), 3);
    }

    #[test]
    fn an_existing_journal_is_never_overwritten() {
        let (_dir, path) = journal_of_one_row();
        let error = Journal::<Row>::create(&path, &1).err().unwrap();
        assert!(error.to_string().contains("--resume"), "{error}");
        assert_eq!(read_rows::<Row>(&path).unwrap(), [row(0)]);
    }

    #[test]
    fn a_row_cut_short_by_a_kill_is_dropped_on_resume() {
        let (_dir, path) = journal_of_one_row();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"1,fa").unwrap();
        let (_, _, rows) = Journal::<Row>::resume::<u32>(&path).unwrap();
        assert_eq!(rows, [row(0)]);
        assert!(std::fs::read_to_string(&path).unwrap().ends_with('\n'));
    }

    #[test]
    fn a_corrupt_row_names_its_line() {
        let (_dir, path) = journal_of_one_row();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"x,pass,\n").unwrap();
        let error = Journal::<Row>::resume::<u32>(&path)
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("line 3"), "{error}");
    }
}
