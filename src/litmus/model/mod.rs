//! An axiomatic PTX memory model: every final state of a litmus file that the PTX memory
//! model (PTX ISA 7.5 and later, "Memory Consistency Model"; formalised by Lustig et al.,
//! ASPLOS 2019) allows, found by enumerating candidate executions.
//!
//! The simulator shows what one operational model does in the runs it happens to make; this
//! gives the exact set of allowed states, so a test's verdict (and whether only a weak
//! behaviour reaches it) needs no published table, and the simulator can be checked on tests
//! nobody has run before.
//!
//! - [`program`]: each thread's traces (its events for each choice of values read);
//! - [`execution`]: one trace per thread as events with program order, morally strong pairs,
//!   dependencies and release/acquire pattern ends;
//! - [`barriers`]: which barrier events synchronise;
//! - [`axioms`]: observation, synchronisation, causality and the axioms (Coherence, Fence-SC,
//!   Atomicity, No-Thin-Air, SC-per-location, Causality);
//! - [`explore`]: the enumeration; [`sc`]: what sequential consistency reaches;
//! - [`compare`]: verdicts against an `expected.csv`, and such a file written from the model.
//!
//! Where the specification leaves a choice, the model follows the formalisation the published
//! verdicts come from: coherence order is total per location, No-Thin-Air forbids cycles of
//! reads-from and dependencies, barriers follow [`barriers`]. Loops run at most
//! [`program::LOOP_BOUND`] times backwards per thread.

pub mod axioms;
pub mod barriers;
pub mod compare;
pub mod execution;
pub mod explore;
pub mod program;
pub mod relation;
pub mod sc;
pub mod suite;

use crate::litmus::file::ast::{state_text, Condition, LitmusFile, Observed};
use crate::litmus::file::expect::{Expected, ScReachable};
use crate::litmus::file::kernel::Refusal;
use std::collections::BTreeSet;
use std::fmt::Write;

/// What the model says of one test.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOutcome {
    pub name: String,
    pub condition: Condition,
    pub observed: Vec<Observed>,
    /// Every final state the PTX model allows.
    pub allowed: BTreeSet<Vec<u32>>,
    /// The final states sequential consistency reaches.
    pub sc: BTreeSet<Vec<u32>>,
    pub candidates: u64,
    pub consistent: u64,
    /// Whether a thread waits at a barrier (what a deadlock is blamed on when SC ends nothing).
    pub barriers: bool,
}

/// Runs the model on `test`, or refuses it (proxies, unknown instructions, more events than an
/// execution may have, more than [`explore::MAX_CANDIDATES`] candidate executions).
pub fn model(test: &LitmusFile) -> Result<ModelOutcome, Refusal> {
    model_within(test, explore::MAX_CANDIDATES)
}

/// [`model`], giving up after `budget` candidate executions.
pub fn model_within(test: &LitmusFile, budget: u64) -> Result<ModelOutcome, Refusal> {
    let program = program::build(test)?;
    let observed = test.observed();
    let found =
        explore::allowed_within(&program, &observed, budget).map_err(|too_big| Refusal {
            file: test.path.clone(),
            line: test.header_line,
            construct: test.name.clone(),
            reason: match too_big {
                explore::TooBig::Events => format!(
                    "an execution with more than {} events",
                    relation::MAX_EVENTS
                ),
                explore::TooBig::Candidates => format!(
                "more than {budget} candidate executions (raise --max-candidates, or use fewer \
                 threads or loop iterations)"
            ),
            },
        })?;
    let sc = sc::sc_states(&program, &observed);
    Ok(ModelOutcome {
        name: test.name.clone(),
        condition: test.condition.clone(),
        observed,
        allowed: found.states,
        sc,
        candidates: found.candidates,
        consistent: found.consistent,
        barriers: test.has_barriers(),
    })
}

impl ModelOutcome {
    fn satisfies(&self, state: &[u32]) -> bool {
        self.condition.holds(&self.observed, state)
    }

    /// Whether the model allows the state `expected.csv` rules on (satisfying the proposition
    /// for `exists`/`~exists`, violating it for `forall`).
    pub fn expected(&self) -> Expected {
        match self.any_targeted(&self.allowed) {
            true => Expected::Allowed,
            false => Expected::Forbidden,
        }
    }

    /// Whether sequential consistency reaches that state; no final state when it reaches none
    /// (rendezvous barriers deadlock, or every execution spins past the loop bound) or when the
    /// model allows none (barriers without phases let no execution end: a verdict on final
    /// states then holds vacuously).
    pub fn sc_reachable(&self) -> ScReachable {
        if self.allowed.is_empty() && !self.sc.is_empty() {
            return ScReachable::NoFinalState(
                "no-final-state(none under barriers without phases)".into(),
            );
        }
        if self.sc.is_empty() {
            let why = match self.barriers {
                true => "deadlock under rendezvous barrier",
                false => "no execution ends within the loop bound",
            };
            return ScReachable::NoFinalState(format!("no-final-state({why})"));
        }
        match self.any_targeted(&self.sc) {
            true => ScReachable::Yes,
            false => ScReachable::No,
        }
    }

    /// Whether one of `states` is the state `expected.csv` rules on.
    fn any_targeted<'a>(&self, states: impl IntoIterator<Item = &'a Vec<u32>>) -> bool {
        let mut states = states.into_iter();
        states.any(|s| self.condition.targets(self.satisfies(s)))
    }

    /// Allowed states that need a weak behaviour (SC does not reach them).
    pub fn weak_states(&self) -> impl Iterator<Item = &Vec<u32>> {
        self.allowed.iter().filter(|s| !self.sc.contains(*s))
    }

    /// herd-style: the allowed states (`*>` satisfies the proposition, `weak` marks states SC
    /// does not reach), `Ok`/`No`, witnesses, condition, observation.
    pub fn report(&self) -> String {
        let kind = self.condition.quantifier.herd_kind();
        let mut t = format!("Test {} {kind}\nStates {}\n", self.name, self.allowed.len());
        let mut positive = 0;
        for state in &self.allowed {
            let holds = self.satisfies(state);
            positive += u64::from(holds);
            let mark = if holds { "*>" } else { ":>" };
            let weak = if self.sc.contains(state) {
                ""
            } else {
                "  (weak)"
            };
            let _ = writeln!(t, "{mark}{}{weak}", state_text(&self.observed, state));
        }
        let negative = self.allowed.len() as u64 - positive;
        let ok = self.condition.validated(positive, negative) && !self.allowed.is_empty();
        let observation = match (positive, negative) {
            (0, _) => "Never",
            (_, 0) => "Always",
            _ => "Sometimes",
        };
        let _ = writeln!(
            t,
            "{}\nWitnesses\nPositive: {positive} Negative: {negative}\nCondition {}\nObservation {} {observation} {positive} {negative}",
            if ok { "Ok" } else { "No" },
            self.condition,
            self.name,
        );
        let _ = writeln!(
            t,
            "Candidates {}, consistent {} (PTX model); expected {}, sc_reachable {}",
            self.candidates,
            self.consistent,
            self.expected().name(),
            self.sc_reachable()
        );
        t
    }
}

#[cfg(test)]
mod tests;
