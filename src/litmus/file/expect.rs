//! Known verdicts (`expected.csv`) and how a run compares with them: the conformance table.
//!
//! `expected` says whether the PTX memory model allows the state a test's condition is about
//! (for `exists`/`~exists` a state satisfying it, for `forall` one violating it), and
//! `sc_reachable` whether sequential consistency alone reaches it. A run that reaches a forbidden
//! state is unsound; one that never reaches an allowed state that only a weak behaviour gives is
//! incomplete on that test ("not seen"); a test that did not run to a final state cannot be
//! compared at all, and says why, unless no execution of it can end ([`Finding::Deadlocked`],
//! proved by [`super::deadlock`]) and its row says so too (`sc_reachable` `no-final-state`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why `expected.csv` could not be used.
#[derive(Debug, Error)]
pub enum ExpectError {
    #[error("cannot read {}: {source}", path.display())]
    Csv {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Bad {
        path: PathBuf,
        line: u64,
        message: String,
    },
}

/// What the memory model says of the state the condition is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    Allowed,
    Forbidden,
}

impl Expected {
    pub fn name(self) -> &'static str {
        match self {
            Expected::Allowed => "allowed",
            Expected::Forbidden => "forbidden",
        }
    }
}

/// Whether sequential consistency reaches that state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScReachable {
    Yes,
    No,
    /// `no-final-state(...)`: under rendezvous barriers no execution ends (the note says why).
    NoFinalState(String),
}

impl ScReachable {
    fn parse(text: &str) -> Option<ScReachable> {
        match text {
            "yes" => Some(ScReachable::Yes),
            "no" => Some(ScReachable::No),
            t if t.starts_with("no-final-state") => Some(ScReachable::NoFinalState(t.to_string())),
            _ => None,
        }
    }
}

impl fmt::Display for ScReachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScReachable::Yes => f.write_str("yes"),
            ScReachable::No => f.write_str("no"),
            ScReachable::NoFinalState(t) => f.write_str(t),
        }
    }
}

/// One row of `expected.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// The test's path relative to the CSV's folder.
    pub test: String,
    pub family: String,
    /// `A-ld/st/fence`, `B-atom/red`, `C-branches`, `D-bar`.
    pub tier: String,
    pub expected: Expected,
    pub sc_reachable: ScReachable,
}

impl Expectation {
    /// The tier's letter (`A` to `D`).
    pub fn tier_letter(&self) -> char {
        self.tier.chars().next().unwrap_or('?')
    }

    /// An allowed state only a weak behaviour reaches.
    pub fn weak_only_allowed(&self) -> bool {
        self.expected == Expected::Allowed && self.sc_reachable != ScReachable::Yes
    }
}

#[derive(Debug, Deserialize)]
struct RawRow {
    test: String,
    #[serde(default)]
    family: String,
    expected: String,
    sc_reachable: String,
    #[serde(default)]
    tier: String,
}

/// The rows of an `expected.csv`, and the folder their paths are relative to.
#[derive(Debug, Clone)]
pub struct Expectations {
    pub dir: PathBuf,
    pub rows: Vec<Expectation>,
    /// Row index by the canonical path of its test (a suite of thousands of tests is looked up
    /// once per test).
    by_path: std::collections::HashMap<PathBuf, usize>,
}

impl Expectations {
    /// The known verdicts at `path`, when one is given.
    pub fn load_if(path: Option<&Path>) -> Result<Option<Expectations>, ExpectError> {
        path.map(Expectations::load).transpose()
    }

    pub fn load(path: &Path) -> Result<Expectations, ExpectError> {
        let csv_error = |source| ExpectError::Csv {
            path: path.to_path_buf(),
            source,
        };
        let mut reader = csv::Reader::from_path(path).map_err(csv_error)?;
        let mut rows = Vec::new();
        for record in reader.deserialize::<RawRow>() {
            let raw = record.map_err(csv_error)?;
            let line = rows.len() as u64 + 2;
            let bad = |message: String| ExpectError::Bad {
                path: path.to_path_buf(),
                line,
                message,
            };
            let expected = match raw.expected.as_str() {
                "allowed" => Expected::Allowed,
                "forbidden" => Expected::Forbidden,
                other => {
                    return Err(bad(format!(
                        "expected is `{other}`, not allowed or forbidden"
                    )))
                }
            };
            let sc_reachable = ScReachable::parse(&raw.sc_reachable).ok_or_else(|| {
                bad(format!(
                    "sc_reachable is `{}`, not yes, no or no-final-state(...)",
                    raw.sc_reachable
                ))
            })?;
            rows.push(Expectation {
                test: raw.test,
                family: raw.family,
                tier: raw.tier,
                expected,
                sc_reachable,
            });
        }
        if rows.is_empty() {
            // Nothing to compare with: every test would come out "no expectation", exit 0.
            return Err(ExpectError::Bad {
                path: path.to_path_buf(),
                line: 1,
                message: "no expectations: the file has no header and rows (test, tier, \
                          expected, sc_reachable columns)"
                    .to_string(),
            });
        }
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut by_path = std::collections::HashMap::new();
        for (i, r) in rows.iter().enumerate() {
            by_path.entry(canonical(&dir.join(&r.test))).or_insert(i);
        }
        Ok(Expectations { dir, rows, by_path })
    }

    /// The row of a test: the one whose path, relative to the CSV's folder, is this file; else,
    /// for a file outside that folder (a copy of a suite's test), the only one with this file
    /// name. A file inside the folder has its own path there, so a row of the same name at
    /// another path is another test.
    pub fn find(&self, file: &Path) -> Option<&Expectation> {
        let file = canonical(file);
        if let Some(&i) = self.by_path.get(&file) {
            return Some(&self.rows[i]);
        }
        if file.starts_with(canonical(&self.dir)) {
            return None;
        }
        let name = file.file_name()?;
        let mut same_name = self
            .rows
            .iter()
            .filter(|r| Path::new(&r.test).file_name() == Some(name));
        match (same_name.next(), same_name.next()) {
            (Some(row), None) => Some(row),
            _ => None,
        }
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// `file` relative to `dir` when it is inside it, else as given.
pub fn relative(file: &Path, dir: &Path) -> String {
    canonical(file)
        .strip_prefix(canonical(dir))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| file.display().to_string())
}

/// How a results table names `file`: relative to the folder of the `expected.csv` when there is
/// one, as its rows are, whether or not a row is about this file; else as given.
pub fn test_name(expectations: Option<&Expectations>, file: &Path) -> String {
    expectations.map_or_else(|| file.display().to_string(), |e| relative(file, &e.dir))
}

/// What running a test gave, as far as the verdict is concerned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Finding {
    /// It ran: executions with a final state, executions that did not finish, and executions
    /// that reached the state the condition is about.
    Ran {
        executions: u64,
        not_finished: u64,
        reached: u64,
    },
    /// No execution ended, and none can: every order of the threads' barrier steps deadlocks
    /// ([`super::deadlock`]); the executions that ran.
    Deadlocked { not_finished: u64 },
    /// It did not run to any final state; why.
    NotRun(String),
}

/// How a test compares with its expectation.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Forbidden and never reached, or allowed (weak-only) and reached.
    Ok,
    /// Allowed, and sequential consistency reaches it too; whether this run reached it.
    OkSc { reached: bool },
    /// No final state, as the row says (`no-final-state`): every execution deadlocks (proved).
    OkNoFinalState,
    /// Forbidden, and reached.
    Unsound,
    /// Allowed only through a weak behaviour, and never reached.
    NotSeen,
    /// No final state to compare (cannot finish, refused, malformed, backend error).
    NotComparable(String),
    /// The CSV has no row for the test.
    NoExpectation,
}

impl Verdict {
    /// The verdict of `finding` against `expectation`.
    pub fn of(expectation: Option<&Expectation>, finding: &Finding) -> Verdict {
        let no_final_state =
            |e: &Expectation| matches!(e.sc_reachable, ScReachable::NoFinalState(_));
        let reached = match finding {
            Finding::NotRun(why) => return Verdict::NotComparable(why.clone()),
            Finding::Deadlocked { .. } => {
                return match expectation {
                    None => Verdict::NoExpectation,
                    Some(e) if no_final_state(e) => Verdict::OkNoFinalState,
                    Some(_) => Verdict::NotComparable(
                        "no final state: every execution deadlocks at a barrier (proved), but \
                         the verdict is about executions that end"
                            .into(),
                    ),
                }
            }
            Finding::Ran {
                executions: 0,
                not_finished,
                ..
            } => {
                return Verdict::NotComparable(match not_finished {
                    0 => "no executions".to_string(),
                    n => format!("cannot finish: none of {n} executions ended"),
                })
            }
            Finding::Ran { reached, .. } => *reached > 0,
        };
        let Some(e) = expectation else {
            return Verdict::NoExpectation;
        };
        if let (Finding::Ran { executions, .. }, true, Expected::Allowed, false) =
            (finding, no_final_state(e), e.expected, reached)
        {
            // Dat3M's barriers (no phases) let executions end that rendezvous barriers cannot:
            // the allowed state may come only from those.
            return Verdict::NotComparable(format!(
                "the verdict follows Dat3M's barriers and says no execution ends under \
                 rendezvous barriers, but {executions} ended here (none in its state)"
            ));
        }
        match (e.expected, &e.sc_reachable, reached) {
            (Expected::Forbidden, _, true) => Verdict::Unsound,
            (Expected::Forbidden, _, false) => Verdict::Ok,
            (Expected::Allowed, ScReachable::Yes, reached) => Verdict::OkSc { reached },
            (Expected::Allowed, _, true) => Verdict::Ok,
            (Expected::Allowed, _, false) => Verdict::NotSeen,
        }
    }

    /// The short word of the table (`not comparable` without its reason).
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::OkSc { reached: true } => "ok (sc, reached)",
            Verdict::OkSc { reached: false } => "ok (sc, not reached)",
            Verdict::OkNoFinalState => "ok (no final state)",
            Verdict::Unsound => "UNSOUND",
            Verdict::NotSeen => "not seen",
            Verdict::NotComparable(_) => "not comparable",
            Verdict::NoExpectation => "no expectation",
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Verdict::NotComparable(why) => Some(why),
            _ => None,
        }
    }
}

/// One row of the conformance table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub test: String,
    pub tier: String,
    pub expected: String,
    pub sc_reachable: String,
    pub executions: u64,
    pub not_finished: u64,
    /// Executions that reached the state the condition is about (empty when not run).
    pub reached: Option<u64>,
    pub verdict: String,
    pub reason: String,
    #[serde(skip)]
    pub weak_only_allowed_abc: bool,
    #[serde(skip)]
    pub kind: VerdictKind,
}

/// The verdict's class, for the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VerdictKind {
    #[default]
    Ok,
    Unsound,
    NotSeen,
    NotComparable,
    NoExpectation,
}

impl Row {
    /// The row of test `name` (its path as the table shows it).
    pub fn new(name: &str, expectation: Option<&Expectation>, finding: &Finding) -> Row {
        let verdict = Verdict::of(expectation, finding);
        let (executions, not_finished, reached) = match finding {
            Finding::Ran {
                executions,
                not_finished,
                reached,
            } => (*executions, *not_finished, Some(*reached)),
            Finding::Deadlocked { not_finished } => (0, *not_finished, None),
            Finding::NotRun(_) => (0, 0, None),
        };
        let kind = match verdict {
            Verdict::Ok | Verdict::OkSc { .. } | Verdict::OkNoFinalState => VerdictKind::Ok,
            Verdict::Unsound => VerdictKind::Unsound,
            Verdict::NotSeen => VerdictKind::NotSeen,
            Verdict::NotComparable(_) => VerdictKind::NotComparable,
            Verdict::NoExpectation => VerdictKind::NoExpectation,
        };
        Row {
            test: expectation.map_or_else(|| name.to_string(), |e| e.test.clone()),
            tier: expectation.map_or_else(|| "-".into(), |e| e.tier.clone()),
            expected: expectation.map_or_else(|| "-".into(), |e| e.expected.name().into()),
            sc_reachable: expectation.map_or_else(|| "-".into(), |e| e.sc_reachable.to_string()),
            executions,
            not_finished,
            reached: reached.filter(|_| kind != VerdictKind::NotComparable),
            verdict: verdict.word().to_string(),
            reason: verdict.reason().unwrap_or_default().to_string(),
            weak_only_allowed_abc: expectation.is_some_and(|e| {
                e.weak_only_allowed() && matches!(e.tier_letter(), 'A' | 'B' | 'C')
            }),
            kind,
        }
    }
}

/// The conformance table of a run over many tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub rows: Vec<Row>,
}

impl Table {
    /// The table as aligned text, one line per test (reasons after the verdict).
    pub fn render(&self) -> String {
        let header = [
            "test",
            "tier",
            "expected",
            "sc_reachable",
            "executions",
            "reached",
            "verdict",
        ];
        let cells: Vec<[String; 7]> = self
            .rows
            .iter()
            .map(|r| {
                let verdict = match r.reason.as_str() {
                    "" => r.verdict.clone(),
                    why => format!("{}: {why}", r.verdict),
                };
                let executions = match r.not_finished {
                    0 => r.executions.to_string(),
                    n => format!("{} (+{n} not finished)", r.executions),
                };
                [
                    r.test.clone(),
                    r.tier.clone(),
                    r.expected.clone(),
                    short_sc(&r.sc_reachable),
                    executions,
                    r.reached.map_or_else(|| "-".into(), |n| n.to_string()),
                    verdict,
                ]
            })
            .collect();
        aligned(&header.map(String::from), &cells)
    }

    pub fn summary(&self) -> Summary {
        let count = |k: VerdictKind| self.rows.iter().filter(|r| r.kind == k).count();
        let weak: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.weak_only_allowed_abc && r.kind != VerdictKind::NotComparable)
            .collect();
        Summary {
            tests: self.rows.len(),
            ok: count(VerdictKind::Ok),
            unsound: count(VerdictKind::Unsound),
            not_seen: count(VerdictKind::NotSeen),
            not_comparable: count(VerdictKind::NotComparable),
            no_final_state: self
                .rows
                .iter()
                .filter(|r| r.verdict == Verdict::OkNoFinalState.word())
                .count(),
            no_expectation: count(VerdictKind::NoExpectation),
            weak_reached: weak.iter().filter(|r| r.reached.unwrap_or(0) > 0).count(),
            weak_tests: weak.len(),
        }
    }

    /// Writes the table as CSV: test, tier, expected, sc_reachable, executions, not_finished,
    /// reached, verdict, reason.
    pub fn write_csv(&self, path: &Path) -> Result<(), csv::Error> {
        write_csv(path, &self.rows)
    }
}

/// Writes `rows` as CSV, a header from their field names first.
pub fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_path(path)?;
    for row in rows {
        w.serialize(row)?;
    }
    w.flush()?;
    Ok(())
}

/// `header` and `rows` as text in aligned columns, the last column left as it is (it holds the
/// long reasons).
pub(crate) fn aligned<const N: usize>(header: &[String; N], rows: &[[String; N]]) -> String {
    let mut widths = [0; N];
    for row in std::iter::once(header).chain(rows) {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(header).chain(rows) {
        let mut line = String::new();
        for (k, c) in row.iter().enumerate() {
            match k + 1 < N {
                true => line.push_str(&format!("{c:<w$}  ", w = widths[k])),
                false => line.push_str(c),
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `no-final-state(deadlock under ...)` is long; the table says `no-final-state`.
pub(crate) fn short_sc(text: &str) -> String {
    text.split('(').next().unwrap_or(text).to_string()
}

/// Counts of verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub tests: usize,
    pub ok: usize,
    pub unsound: usize,
    pub not_seen: usize,
    pub not_comparable: usize,
    pub no_expectation: usize,
    /// Of the ok ones: no execution can end, as the row says.
    pub no_final_state: usize,
    /// Comparable tests of tiers A–C whose allowed state only a weak behaviour reaches...
    pub weak_tests: usize,
    /// ...and how many of them this run reached.
    pub weak_reached: usize,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tests: ok {}", self.tests, self.ok)?;
        if self.no_final_state > 0 {
            write!(f, " ({} with no final state)", self.no_final_state)?;
        }
        write!(
            f,
            ", UNSOUND {}, not seen {}, not comparable {}",
            self.unsound, self.not_seen, self.not_comparable
        )?;
        if self.no_expectation > 0 {
            write!(f, ", no expectation {}", self.no_expectation)?;
        }
        write!(
            f,
            "; weak-only allowed states reached in {} of {} comparable tests of tiers A–C",
            self.weak_reached, self.weak_tests
        )
    }
}

/// Whether the conformance CSV can be written at `path`, checked before any test runs (a file
/// that did not exist is removed again).
pub fn csv_writable(path: &std::path::Path) -> std::io::Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
        })?;
    if !existed {
        std::fs::remove_file(path)?;
    }
    Ok(())
}
