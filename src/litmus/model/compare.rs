//! The model's verdicts against an `expected.csv` (the table `litmus model --expect` prints),
//! and the model's verdicts written as such a file (`litmus model --csv`, `litmus generate`).

use super::ModelOutcome;
use crate::litmus::file::ast::{Instr, LitmusFile};
use crate::litmus::file::expect::{aligned, short_sc, Expectation};
use serde::Serialize;
use std::fmt;

/// How the model's verdict on one test compares with the published one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agreement {
    /// Same `expected`; whether `sc_reachable` matches too (`None` when the row's value is
    /// `no-final-state(...)` on one side only, which depends on barrier semantics).
    Agrees {
        sc_matches: Option<bool>,
    },
    Disagrees,
    /// Not modelled (refused or malformed), with the reason.
    NotModelled(String),
    NoExpectation,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRow {
    pub test: String,
    pub expected: String,
    pub model: String,
    pub sc_expected: String,
    pub sc_model: String,
    pub agreement: Agreement,
}

impl ModelRow {
    pub fn new(
        name: &str,
        expectation: Option<&Expectation>,
        outcome: Result<&ModelOutcome, String>,
    ) -> ModelRow {
        let test = expectation.map_or_else(|| name.to_string(), |e| e.test.clone());
        let expected = expectation.map_or_else(|| "-".into(), |e| e.expected.name().to_string());
        let sc_expected = expectation.map_or_else(|| "-".into(), |e| e.sc_reachable.to_string());
        let outcome = match outcome {
            Ok(o) => o,
            Err(why) => {
                return ModelRow {
                    test,
                    expected,
                    model: "-".into(),
                    sc_expected,
                    sc_model: "-".into(),
                    agreement: Agreement::NotModelled(why),
                }
            }
        };
        let model = outcome.expected();
        let sc_model = outcome.sc_reachable();
        let agreement = match expectation {
            None => Agreement::NoExpectation,
            Some(e) if e.expected != model => Agreement::Disagrees,
            Some(e) => Agreement::Agrees {
                sc_matches: match (e.sc_reachable.to_string(), sc_model.to_string()) {
                    (a, b) if a.starts_with("no-final") != b.starts_with("no-final") => None,
                    (a, b) => Some(a == b),
                },
            },
        };
        ModelRow {
            test,
            expected,
            model: model.name().to_string(),
            sc_expected,
            sc_model: sc_model.to_string(),
            agreement,
        }
    }

    fn word(&self) -> String {
        match &self.agreement {
            Agreement::Agrees {
                sc_matches: Some(false),
            } => "agrees (sc_reachable differs)".into(),
            Agreement::Agrees { .. } => "agrees".into(),
            Agreement::Disagrees => "DISAGREES".into(),
            Agreement::NotModelled(why) => format!("not modelled: {why}"),
            Agreement::NoExpectation => "no expectation".into(),
        }
    }
}

/// The rows of a run of the model over many tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelTable {
    pub rows: Vec<ModelRow>,
}

/// Counts of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSummary {
    pub tests: usize,
    pub agree: usize,
    pub disagree: usize,
    pub not_modelled: usize,
    pub no_expectation: usize,
    /// Agreeing tests whose `sc_reachable` differs from the row's.
    pub sc_differs: usize,
}

impl ModelTable {
    pub fn summary(&self) -> ModelSummary {
        let count =
            |f: &dyn Fn(&Agreement) -> bool| self.rows.iter().filter(|r| f(&r.agreement)).count();
        ModelSummary {
            tests: self.rows.len(),
            agree: count(&|a| matches!(a, Agreement::Agrees { .. })),
            disagree: count(&|a| *a == Agreement::Disagrees),
            not_modelled: count(&|a| matches!(a, Agreement::NotModelled(_))),
            no_expectation: count(&|a| *a == Agreement::NoExpectation),
            sc_differs: count(&|a| {
                *a == Agreement::Agrees {
                    sc_matches: Some(false),
                }
            }),
        }
    }

    /// Aligned text, one line per test.
    pub fn render(&self) -> String {
        let header = [
            "test",
            "expected",
            "model",
            "sc_reachable",
            "model sc",
            "verdict",
        ]
        .map(String::from);
        let cells: Vec<[String; 6]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.test.clone(),
                    r.expected.clone(),
                    r.model.clone(),
                    short_sc(&r.sc_expected),
                    short_sc(&r.sc_model),
                    r.word(),
                ]
            })
            .collect();
        aligned(&header, &cells)
    }
}

impl fmt::Display for ModelSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tests: agree {}, DISAGREE {}, not modelled {}",
            self.tests, self.agree, self.disagree, self.not_modelled
        )?;
        if self.no_expectation > 0 {
            write!(f, ", no expectation {}", self.no_expectation)?;
        }
        if self.sc_differs > 0 {
            write!(
                f,
                "; sc_reachable differs on {} agreeing test(s)",
                self.sc_differs
            )?;
        }
        Ok(())
    }
}

/// A row of an `expected.csv`, as the model fills it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CsvRow {
    pub test: String,
    pub family: String,
    pub threads: usize,
    pub placement: String,
    pub quantifier: String,
    pub condition: String,
    pub expected: String,
    pub sc_reachable: String,
    pub tier: String,
    pub features: String,
    pub notes: String,
}

impl CsvRow {
    /// The row of `test` (written as `path` in the CSV) with the model's verdicts.
    pub fn new(
        path: &str,
        family: &str,
        test: &LitmusFile,
        outcome: &ModelOutcome,
        notes: &str,
    ) -> CsvRow {
        CsvRow {
            test: path.to_string(),
            family: family.to_string(),
            threads: test.threads.len(),
            placement: placement(test).to_string(),
            quantifier: test.condition.quantifier.keyword().to_string(),
            condition: format!("({})", test.condition.expr),
            expected: outcome.expected().name().to_string(),
            sc_reachable: outcome.sc_reachable().to_string(),
            tier: tier(test).to_string(),
            features: features(test),
            notes: notes.to_string(),
        }
    }
}

/// `same-cta`, `multi-cta/same-gpu` or `multi-gpu`.
pub fn placement(test: &LitmusFile) -> &'static str {
    let first = test.threads.first();
    if test
        .threads
        .iter()
        .any(|t| Some(t.gpu) != first.map(|f| f.gpu))
    {
        "multi-gpu"
    } else if test
        .threads
        .iter()
        .any(|t| t.cta != first.and_then(|f| f.cta))
    {
        "multi-cta/same-gpu"
    } else {
        "same-cta"
    }
}

/// What a runner must support: `A` loads, stores, fences; `B` atomics; `C` branches; `D`
/// barriers.
pub fn tier(test: &LitmusFile) -> &'static str {
    let any = |f: &dyn Fn(&Instr) -> bool| {
        test.threads
            .iter()
            .flat_map(|t| &t.code)
            .any(|s| f(&s.instr))
    };
    if any(&|i| matches!(i, Instr::Barrier { .. })) {
        "D-bar"
    } else if any(&|i| matches!(i, Instr::Branch { .. } | Instr::Goto(_))) {
        "C-branches"
    } else if any(&|i| matches!(i, Instr::Atom { .. } | Instr::Red { .. })) {
        "B-atom/red"
    } else {
        "A-ld/st/fence"
    }
}

/// The opcodes the test uses, sorted, without scopes (`fence.sc ld.acquire st.weak`).
pub fn features(test: &LitmusFile) -> String {
    let mut words: Vec<String> = test
        .threads
        .iter()
        .flat_map(|t| &t.code)
        .filter(|s| !matches!(s.instr, Instr::Label(_)))
        .filter_map(|s| s.text.split_whitespace().next())
        .map(|op| {
            op.split('.')
                .filter(|p| !matches!(*p, "cta" | "gpu" | "sys" | "gl"))
                .collect::<Vec<_>>()
                .join(".")
        })
        .collect();
    words.sort();
    words.dedup();
    words.join(" ")
}
