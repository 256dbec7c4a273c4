//! Journals: one CSV row per run, appended and flushed as the run ends, with a JSON sidecar that
//! records what the rows are runs of.
//!
//! A check or a hardening killed at any moment (SIGKILL included) leaves every finished run in
//! its journal: each row is written with one `write` and flushed, and a row cut short by the kill
//! is the only thing lost — [`Journal::resume`] drops it and the run is simply done again.
//!
//! When a check or a hardening ends, what it came to is added to the sidecar as extra entries
//! ([`set_meta_entry`]); the sidecar's own struct ignores entries it does not know, so sidecars
//! with and without them read alike.

use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
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
    #[error(
        "journal {} does not exist: leave out --resume to start a new one, or name one that \
         exists",
        .0.display()
    )]
    Missing(PathBuf),
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
    #[error(
        "journal {} is being written by another gpuwmm process: let it finish, or stop it, then \
         resume",
        .0.display()
    )]
    Busy(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Which job a sidecar (or a campaign's plan) belongs to: its `kind` entry, first in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    Check,
    Harden,
    Campaign,
    Cost,
    Tune,
    Litmus,
}

impl JobKind {
    /// How messages name the job's journal: `a check`, `a hardening`, ….
    pub fn noun(self) -> &'static str {
        match self {
            JobKind::Check => "check",
            JobKind::Harden => "hardening",
            JobKind::Campaign => "campaign",
            JobKind::Cost => "cost measurement",
            JobKind::Tune => "tuning",
            JobKind::Litmus => "litmus run",
        }
    }
}

/// The sidecar holding what a journal is about: `x.csv` → `x.json`.
pub fn meta_path(journal: &Path) -> PathBuf {
    journal.with_extension("json")
}

/// Held while a journal or a sidecar is written: a signal handler that ends the process takes it
/// first (see [`crate::job::interrupt`]), so that no row or sidecar is left half-written.
static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds every journal and sidecar write of this process back until the guard is dropped (a
/// write under way finishes first).
pub fn hold_writes() -> std::sync::MutexGuard<'static, ()> {
    WRITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What [`Journal::create`] (`resume` false) or [`Journal::resume`] (`resume` true) would refuse
/// at `path` for where it stands, found before a job does any work: a new journal where one
/// exists, a resume of one that does not.
pub fn refuse_clash(path: &Path, resume: bool) -> Result<(), JournalError> {
    match (resume, path.exists()) {
        (false, true) => Err(JournalError::Exists(path.to_path_buf())),
        (true, false) => Err(JournalError::Missing(path.to_path_buf())),
        _ => Ok(()),
    }
}

/// An open journal of rows of type `R`.
pub struct Journal<R> {
    path: PathBuf,
    file: File,
    rows: PhantomData<R>,
}

impl<R: Serialize + DeserializeOwned> Journal<R> {
    /// Starts a new journal at `path` (refusing to overwrite one) with `meta` in its sidecar.
    ///
    /// The journal appears whole, its header in it: it is written under a temporary name and
    /// linked to `path`, which fails when `path` exists (so of two commands that chose the same
    /// name at once, the second stops there, before it could replace the first's sidecar). The
    /// sidecar, also written under a temporary name, is renamed into place next; a kill between
    /// the two leaves a journal without a sidecar, which `--resume` refuses.
    pub fn create(path: &Path, meta: &impl Serialize) -> Result<Journal<R>, JournalError> {
        let _writing = hold_writes();
        refuse_clash(path, false)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let meta_file = meta_path(path);
        let text = serde_json::to_string_pretty(meta).expect("meta serialises");
        let meta_temporary = temporary_name(&meta_file);
        std::fs::write(&meta_temporary, text + "\n").map_err(io(&meta_temporary))?;
        let temporary = temporary_name(path);
        let created = create_linked::<R>(&temporary, path);
        let _ = std::fs::remove_file(&temporary);
        let file = match created {
            Ok(file) => file,
            Err(e) => {
                let _ = std::fs::remove_file(&meta_temporary);
                return Err(e);
            }
        };
        std::fs::rename(&meta_temporary, &meta_file).map_err(io(&meta_file))?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            rows: PhantomData,
        })
    }

    /// Reopens a journal to append to: returns it, its metadata and the rows recorded so far. A
    /// last row cut short by a kill is removed.
    ///
    /// A journal left empty (cut to 0 bytes, or by a kill before its header was whole) gets its
    /// header again; one whose first line is not a header (rows without one) is refused, since
    /// nothing could read back what would be appended.
    pub fn resume<M: DeserializeOwned>(
        path: &Path,
    ) -> Result<(Journal<R>, M, Vec<R>), JournalError> {
        refuse_clash(path, true)?;
        let meta = read_meta(path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io(path))?;
        lock(&file, path)?;
        truncate_partial_row(path)?;
        let mut journal = Journal {
            path: path.to_path_buf(),
            file,
            rows: PhantomData,
        };
        if std::fs::metadata(path).map_err(io(path))?.len() == 0 {
            journal.write(&header::<R>())?;
        }
        refuse_headerless::<R>(path)?;
        let rows = read_rows(path)?;
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
        // One write per row: a kill leaves whole rows and at most one partial last row (none
        // for SIGINT and SIGTERM, whose handler waits for the write).
        let _writing = hold_writes();
        self.file
            .write_all(bytes)
            .and_then(|()| self.file.flush())
            .map_err(io(&self.path))
    }
}

/// Takes the journal's advisory lock for as long as `file` is open (the process's end, a kill
/// included, releases it), so that two commands never append to one journal: a second `--resume`
/// of a running check, or a requeued job whose first attempt is still being stopped, is refused.
/// Where the file system has no locks, the journal goes on without one. A lock still held after
/// [`LOCK_PATIENCE`] is another writer's: a process that has just closed the journal can hold
/// it a little longer through a child it is starting (the child shares its open files until it
/// runs its program).
fn lock(file: &File, path: &Path) -> Result<(), JournalError> {
    let start = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) | Err(std::fs::TryLockError::Error(_)) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < LOCK_PATIENCE => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(JournalError::Busy(path.to_path_buf()))
            }
        }
    }
}

/// `<path>.new-<pid>`: where a file is written before it is put in place.
fn temporary_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".new-{}", std::process::id()));
    PathBuf::from(name)
}

/// Writes a journal holding only its header at `temporary`, locks it, and links it to `path`
/// (failing when `path` exists); returns the open file, to append to.
fn create_linked<R: Serialize + DeserializeOwned>(
    temporary: &Path,
    path: &Path,
) -> Result<File, JournalError> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(temporary)
        .map_err(io(temporary))?;
    lock(&file, path)?;
    file.write_all(&header::<R>())
        .and_then(|()| file.flush())
        .map_err(io(temporary))?;
    match std::fs::hard_link(temporary, path) {
        Ok(()) => Ok(file),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(JournalError::Exists(path.to_path_buf()))
        }
        // A file system without hard links: the journal is created in place, header after.
        Err(_) => create_in_place::<R>(path),
    }
}

/// Creates the journal at `path` only if it does not exist, then writes its header.
fn create_in_place<R: Serialize + DeserializeOwned>(path: &Path) -> Result<File, JournalError> {
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => JournalError::Exists(path.to_path_buf()),
            _ => io(path)(e),
        })?;
    lock(&file, path)?;
    file.write_all(&header::<R>())
        .and_then(|()| file.flush())
        .map_err(io(path))?;
    Ok(file)
}

/// A journal's first line must be its header: its first name is the rows' first field.
fn refuse_headerless<R: DeserializeOwned>(path: &Path) -> Result<(), JournalError> {
    let mut first_line = String::new();
    let file = File::open(path).map_err(io(path))?;
    std::io::BufRead::read_line(&mut std::io::BufReader::new(file), &mut first_line)
        .map_err(io(path))?;
    let first_cell = first_line.trim_end().split(',').next();
    let expected = field_names::<R>().first().copied();
    if first_cell == expected {
        return Ok(());
    }
    Err(JournalError::Mismatch {
        path: path.to_path_buf(),
        message: format!(
            "its first line is not the journal's header (`{}…`): rows without a header cannot \
             be read back; start a new journal",
            expected.unwrap_or("")
        ),
    })
}

/// Run numbers as a journal must hold them: 0, 1, 2, … in order, none missing or repeated.
/// A journal with a row deleted or repeated (by hand, or a tool) is refused on resume rather
/// than continued with runs skipped or done twice.
pub fn refuse_misnumbered(
    path: &Path,
    runs: impl Iterator<Item = u64>,
) -> Result<(), JournalError> {
    for (expected, run) in runs.enumerate() {
        if run != expected as u64 {
            return Err(JournalError::Mismatch {
                path: path.to_path_buf(),
                message: format!(
                    "run {run} recorded where run {expected} belongs (a row was deleted or \
                     repeated); start a new journal"
                ),
            });
        }
    }
    Ok(())
}

/// How long [`lock`] waits for a journal's lock before it calls the journal busy.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

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

/// Sets the top-level entry `key` of a journal's sidecar to `value`, or removes it when `value`
/// serialises to `null`; the other entries stay as they are, in their order and with their text.
/// The sidecar is written to a temporary file and renamed over the old one, so a kill leaves one
/// or the other, whole.
pub fn set_meta_entry(
    journal: &Path,
    key: &str,
    value: &impl Serialize,
) -> Result<(), JournalError> {
    let _writing = hold_writes();
    let path = meta_path(journal);
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    let bad = |message: String| JournalError::BadMeta {
        path: path.clone(),
        message,
    };
    let mut entries: Entries = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let at = entries.0.iter().position(|(k, _)| k == key);
    let pretty = serde_json::to_string_pretty(value).expect("entry serialises");
    match (pretty.as_str(), at) {
        ("null", Some(at)) => {
            entries.0.remove(at);
        }
        ("null", None) => return Ok(()),
        (_, at) => {
            // Indented one level, as the entry sits inside the sidecar's object (a JSON text has
            // line breaks only between tokens: inside strings they are escaped).
            let raw = RawValue::from_string(pretty.replace('\n', "\n  ")).expect("valid JSON");
            match at {
                Some(at) => entries.0[at].1 = raw,
                None => entries.0.push((key.to_string(), raw)),
            }
        }
    }
    let text = serde_json::to_string_pretty(&entries).expect("meta serialises") + "\n";
    let temporary = path.with_extension("json.new");
    std::fs::write(&temporary, text).map_err(io(&temporary))?;
    std::fs::rename(&temporary, &path).map_err(io(&path))
}

/// A sidecar's top-level entries in the file's order, each value kept as its JSON text.
struct Entries(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Entries, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

impl Serialize for Entries {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// The top-level entry `key` of a journal's sidecar; `None` when it has none (or `null`).
pub fn read_meta_entry<T: DeserializeOwned>(
    journal: &Path,
    key: &str,
) -> Result<Option<T>, JournalError> {
    let mut meta: serde_json::Value = read_meta(journal)?;
    match meta.get_mut(key).map(serde_json::Value::take) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| JournalError::BadMeta {
                path: meta_path(journal),
                message: format!("{key}: {e}"),
            }),
    }
}

/// Reads every complete row of a journal.
pub fn read_rows<R: DeserializeOwned>(path: &Path) -> Result<Vec<R>, JournalError> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| JournalError::BadRow {
        path: path.to_path_buf(),
        line: 0,
        message: e.to_string(),
    })?;
    deserialize_rows(&mut reader).map_err(|(line, message)| JournalError::BadRow {
        path: path.to_path_buf(),
        line,
        message,
    })
}

/// Every row `reader` holds, or for the first that does not parse, its line in the file (the
/// header is line 1) and what is wrong with it.
pub fn deserialize_rows<R: DeserializeOwned, Source: std::io::Read>(
    reader: &mut csv::Reader<Source>,
) -> Result<Vec<R>, (u64, String)> {
    reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.map_err(|e: csv::Error| (i as u64 + 2, e.to_string())))
        .collect()
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

    /// Bug: nothing stopped two commands from appending to one journal (a second `--resume`
    /// beside a running one, or a requeued job beside its first attempt), which interleaves
    /// their rows.
    #[test]
    fn a_journal_being_written_cannot_be_resumed_until_its_writer_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        let mut writer = Journal::<Row>::create(&path, &1).unwrap();
        writer.append(&row(0)).unwrap();
        let busy = Journal::<Row>::resume::<u32>(&path).err().unwrap();
        assert!(matches!(busy, JournalError::Busy(_)), "{busy}");
        assert!(
            busy.to_string().contains("another gpuwmm process"),
            "{busy}"
        );
        let (mut second, _, rows) = {
            drop(writer);
            Journal::<Row>::resume::<u32>(&path).unwrap()
        };
        assert_eq!(rows, [row(0)]);
        assert!(
            Journal::<Row>::resume::<u32>(&path).is_err(),
            "the resumer holds it now"
        );
        second.append(&row(1)).unwrap();
        assert_eq!(read_rows::<Row>(&path).unwrap(), [row(0), row(1)]);
    }

    #[test]
    fn an_existing_journal_is_never_overwritten() {
        let (_dir, path) = journal_of_one_row();
        let error = Journal::<Row>::create(&path, &1).err().unwrap();
        assert!(error.to_string().contains("--resume"), "{error}");
        assert_eq!(read_rows::<Row>(&path).unwrap(), [row(0)]);
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Meta {
        app: String,
    }

    #[test]
    fn entries_added_to_a_sidecar_keep_its_text_and_meta_and_can_be_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        let meta = Meta { app: "dot".into() };
        Journal::<Row>::create(&path, &meta).unwrap();
        let original = std::fs::read_to_string(meta_path(&path)).unwrap();
        assert_eq!(read_meta_entry::<u64>(&path, "confidence").unwrap(), None);
        set_meta_entry(&path, "confidence", &Some(42u64)).unwrap();
        assert_eq!(read_meta_entry(&path, "confidence").unwrap(), Some(42u64));
        set_meta_entry(&path, "result", &Meta { app: "x".into() }).unwrap();
        set_meta_entry(&path, "confidence", &7u64).unwrap();
        let text = std::fs::read_to_string(meta_path(&path)).unwrap();
        let expected = "{\n  \"app\": \"dot\",\n  \"confidence\": 7,\n  \"result\": {\n    \"app\": \"x\"\n  }\n}\n";
        assert_eq!(text, expected, "entries keep their order and indentation");
        let (_, resumed, _) = Journal::<Row>::resume::<Meta>(&path).unwrap();
        assert_eq!(resumed, meta);
        set_meta_entry(&path, "result", &None::<Meta>).unwrap();
        set_meta_entry(&path, "confidence", &None::<u64>).unwrap();
        assert_eq!(read_meta_entry::<u64>(&path, "confidence").unwrap(), None);
        assert_eq!(std::fs::read_to_string(meta_path(&path)).unwrap(), original);
        assert!(!meta_path(&path).with_extension("json.new").exists());
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

    /// Bug: a 0-byte journal (its sidecar present) was resumed as it was, and rows went after
    /// no header, which nothing could read back.
    #[test]
    fn a_zero_byte_journal_gets_its_header_back_on_resume() {
        let (_dir, path) = journal_of_one_row();
        std::fs::write(&path, "").unwrap();
        let (mut journal, _, rows) = Journal::<Row>::resume::<u32>(&path).unwrap();
        assert!(rows.is_empty());
        journal.append(&row(0)).unwrap();
        assert_eq!(read_rows::<Row>(&path).unwrap(), [row(0)]);
    }

    /// Bug: a journal whose header was lost (rows only) was appended to blindly.
    #[test]
    fn a_journal_without_its_header_is_refused_on_resume() {
        let (_dir, path) = journal_of_one_row();
        let text = std::fs::read_to_string(&path).unwrap();
        let rows_only: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, rows_only).unwrap();
        let err = Journal::<Row>::resume::<u32>(&path).err().unwrap();
        assert!(matches!(err, JournalError::Mismatch { .. }), "{err}");
        assert!(
            err.to_string().contains("not the journal's header"),
            "{err}"
        );
    }

    #[test]
    fn a_new_journal_appears_with_its_header_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.csv");
        drop(Journal::<Row>::create(&path, &1).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), header::<Row>());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(matches!(
            Journal::<Row>::create(&path, &1),
            Err(JournalError::Exists(_))
        ));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn run_numbers_with_a_gap_or_a_repeat_are_refused() {
        let path = Path::new("j.csv");
        assert!(refuse_misnumbered(path, [0, 1, 2].into_iter()).is_ok());
        let gap = refuse_misnumbered(path, [0, 1, 3].into_iter()).unwrap_err();
        assert!(
            gap.to_string()
                .contains("run 3 recorded where run 2 belongs"),
            "{gap}"
        );
        let repeat = refuse_misnumbered(path, [0, 1, 1, 2].into_iter()).unwrap_err();
        assert!(
            repeat
                .to_string()
                .contains("run 1 recorded where run 2 belongs"),
            "{repeat}"
        );
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
