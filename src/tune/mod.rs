//! Tuning memory stress for a chip: the three micro-benchmark stages of section 3 of the core
//! paper (`seeds/004_…`), journaled so a run of hours can be interrupted and resumed.
//!
//! 1. **Patch size**: MP, LB and SB at every distance `d < D`, each with every stressing thread
//!    storing to and loading from one scratchpad word `l < L`, `C` executions per `(T, d, l)`;
//!    maximal runs of locations with more than ε weak behaviours are ε-patches, and the size most
//!    of them share is the critical patch size `P`.
//! 2. **Access sequence**: every σ in `(ld|st)+` up to length `N`, stressing the first word of
//!    each `P`-word region below `L`; a σ's score in a test is its weak count over all distances
//!    and locations; the winner is Pareto-optimal over the tests, ties broken by majority.
//! 3. **Spread**: σ at `m` random distinct regions among `M` (`1 ≤ m ≤ M`), scored the same way.
//!
//! A stage decides only from tests whose weak rates differ between its candidates beyond chance
//! (chi-square, [`analysis::SIGNIFICANCE`]); where none do, it chooses nothing and the default
//! profile's value is kept, labelled as such ([`Source::Fallback`]).
//!
//! The stages talk to a [`runner::LitmusRunner`]; the decisions are pure functions in
//! [`analysis`]; every cell's result is one row of a CSV journal ([`TuneRow`]).

pub mod analysis;
pub mod charts;
mod outcome;
pub mod report;
pub mod runner;

pub use outcome::{tune, Decision, Given, Source, TuneOutcome};

use crate::check::journal::{Journal, JournalError};
use crate::litmus::LitmusShape;
use crate::ptx::passes::stress::{parse_sequence, sequence_to_string, StressOp};
use crate::stats::ChiSquare;
use analysis::{PatchSizeCounts, PatchVerdict};
use runner::{Cell, CellResult, LitmusRunner, StressTarget};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use thiserror::Error;

/// The budgets of a tuning run; [`Budgets::paper`] are the paper's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budgets {
    /// Distances `0 ≤ d < D` (words between `x` and `y`), every `distance_step`-th.
    pub distances: u32,
    pub distance_step: u32,
    /// Scratchpad words `0 ≤ l < L` of stage 1 (stage 2 takes every `P`-th).
    pub locations: u32,
    /// Executions per cell.
    pub executions: u64,
    /// Longest access sequence of stage 2.
    pub max_sequence: u32,
    /// Largest spread of stage 3.
    pub max_spread: u32,
    /// Noise threshold: a location is in an ε-patch when it gave more than this many weak
    /// behaviours.
    pub epsilon: u64,
    /// The tests every stage runs.
    pub tests: Vec<LitmusShape>,
}

/// `D=256 step 1 L=256 C=1000 N=5 M=64 eps=3 tests mp,lb,sb`: the budgets as the options name
/// them.
impl std::fmt::Display for Budgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tests: Vec<&str> = self.tests.iter().map(|t| t.name()).collect();
        write!(
            f,
            "D={} step {} L={} C={} N={} M={} eps={} tests {}",
            self.distances,
            self.distance_step,
            self.locations,
            self.executions,
            self.max_sequence,
            self.max_spread,
            self.epsilon,
            tests.join(",")
        )
    }
}

impl Budgets {
    /// D = 256, L = 256, C = 1000, N = 5, M = 64, ε = 3 over MP, LB and SB (section 3).
    pub fn paper() -> Budgets {
        Budgets {
            distances: 256,
            distance_step: 1,
            locations: 256,
            executions: 1000,
            max_sequence: 5,
            max_spread: 64,
            epsilon: 3,
            tests: vec![LitmusShape::Mp, LitmusShape::Lb, LitmusShape::Sb],
        }
    }

    /// The distances every stage sweeps.
    pub fn distance_list(&self) -> Vec<u32> {
        (0..self.distances)
            .step_by(self.distance_step.max(1) as usize)
            .collect()
    }
}

/// What a tuning run cannot go on from.
#[derive(Debug, Error)]
pub enum TuneError {
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("bad budgets: {0}")]
    BadBudgets(String),
}

/// One row of the journal: one cell, `executions` runs of `test` at `distance` with stress
/// `sequence` at `location` (stages 1, 2) or at `spread` regions of `patch_words` (stage 3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneRow {
    pub stage: u8,
    pub test: LitmusShape,
    pub distance: u32,
    pub sequence: String,
    pub location: Option<u32>,
    pub spread: u32,
    pub patch_words: u32,
    pub executions: u64,
    pub weak: u64,
    pub seed: u64,
}

impl TuneRow {
    fn key(&self) -> CellKey {
        (
            self.stage,
            self.test,
            self.distance,
            self.sequence.clone(),
            self.location,
            self.spread,
        )
    }
}

type CellKey = (u8, LitmusShape, u32, String, Option<u32>, u32);

/// Progress of a stage, for progress bars: cells done of cells in the stage, weak so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub stage: u8,
    pub done: u64,
    pub cells: u64,
    pub weak: u64,
}

/// Values per stressed location of one test at one distance.
pub type DistanceRow<T> = ((LitmusShape, u32), Vec<T>);

/// Counts per candidate (outer) and test (inner).
pub type PerCandidate = Vec<Vec<u64>>;

/// Stage 1's result: weak counts by test, distance and location, and the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchStage {
    /// `(test, distance) → weak count per location 0..L`.
    pub weak: Vec<DistanceRow<u64>>,
    /// Per test: whether its weak rate depends on the stressed location (chi-square over the
    /// locations, stratified by distance).
    pub location_effect: Vec<(LitmusShape, ChiSquare)>,
    /// ε-patch sizes of the tests with a location effect.
    pub counts: Vec<(LitmusShape, PatchSizeCounts)>,
    pub verdict: PatchVerdict,
}

/// A stage 2 or 3 result: each candidate's score per test, and the winner.
#[derive(Debug, Clone, PartialEq)]
pub struct ChoiceStage<T> {
    pub candidates: Vec<T>,
    /// `scores[candidate][test]`, tests in [`Budgets::tests`] order.
    pub scores: Vec<Vec<u64>>,
    /// `executions[candidate][test]`, the executions behind each score.
    pub executions: Vec<Vec<u64>>,
    /// Per test: whether the candidates' weak rates differ (chi-square over the candidates).
    pub effect: Vec<ChiSquare>,
    /// The winner, chosen over the tests whose candidates differ significantly, and how; `None`
    /// when no test's candidates differ ([`ChoiceStage::no_choice`] says why).
    pub best: Option<(usize, analysis::Choice)>,
}

impl<T> ChoiceStage<T> {
    /// Why no candidate was chosen, if none was.
    pub fn no_choice(&self) -> Option<String> {
        if self.best.is_some() {
            return None;
        }
        if self.scores.iter().flatten().all(|&s| s == 0) {
            return Some("no weak behaviour with any candidate".into());
        }
        Some(format!(
            "no significant difference between candidates in any test (chi-square p ≥ {})",
            analysis::SIGNIFICANCE
        ))
    }
}

/// Runs the stages over a runner, skipping every cell its journal already holds.
pub struct Tuner<'r> {
    runner: &'r mut dyn LitmusRunner,
    budgets: Budgets,
    seed: u64,
    journal: Journal<TuneRow>,
    done: HashMap<CellKey, TuneRow>,
}

impl<'r> Tuner<'r> {
    /// A tuner writing to `journal`; `recorded` are its rows so far (after a resume).
    pub fn new(
        runner: &'r mut dyn LitmusRunner,
        budgets: Budgets,
        seed: u64,
        journal: Journal<TuneRow>,
        recorded: Vec<TuneRow>,
    ) -> Result<Tuner<'r>, TuneError> {
        check_budgets(&budgets)?;
        let done = recorded.into_iter().map(|r| (r.key(), r)).collect();
        Ok(Tuner {
            runner,
            budgets,
            seed,
            journal,
            done,
        })
    }

    /// Stage 1: the critical patch size.
    pub fn patch_stage(
        &mut self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<PatchStage, TuneError> {
        let b = self.budgets.clone();
        let sequence = parse_sequence("st ld").expect("valid");
        let mut cells = Vec::new();
        for &test in &b.tests {
            for d in b.distance_list() {
                for l in 0..b.locations {
                    cells.push(cell(test, d, &sequence, StressTarget::Location(l)));
                }
            }
        }
        let results = self.run_cells(1, &cells, progress)?;
        let rows = by_distance(&cells, &results);
        let location_effect = location_effects(&b.tests, &rows);
        let weak: Vec<DistanceRow<u64>> = rows
            .into_iter()
            .map(|(key, row)| (key, row.into_iter().map(|(w, _)| w).collect()))
            .collect();
        let counts = patch_counts(&location_effect, &weak, b.epsilon);
        let verdict = match counts.is_empty() {
            true => PatchVerdict::NoLocationEffect,
            false => analysis::critical_patch_size(&counts, b.locations),
        };
        Ok(PatchStage {
            weak,
            location_effect,
            counts,
            verdict,
        })
    }

    /// Stage 2: the most effective access sequence, stressing the first word of each
    /// `patch_words` region below L.
    pub fn sequence_stage(
        &mut self,
        patch_words: u32,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ChoiceStage<Vec<StressOp>>, TuneError> {
        let b = self.budgets.clone();
        let candidates = analysis::all_sequences(b.max_sequence);
        let locations: Vec<u32> = (0..b.locations).step_by(patch_words as usize).collect();
        let targets: Vec<StressTarget> = locations
            .iter()
            .map(|&l| StressTarget::Location(l))
            .collect();
        let (scores, executions) = self.score(2, &candidates, |_| targets.clone(), progress)?;
        Ok(choose(candidates, scores, executions))
    }

    /// Stage 3: the most effective spread, `sequence` at `m` random regions of `patch_words`
    /// among `M`.
    pub fn spread_stage(
        &mut self,
        patch_words: u32,
        sequence: &[StressOp],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ChoiceStage<u32>, TuneError> {
        let b = self.budgets.clone();
        let spreads: Vec<u32> = (1..=b.max_spread).collect();
        let sequences = vec![sequence.to_vec(); spreads.len()];
        let (scores, executions) = self.score(
            3,
            &sequences,
            |i| {
                vec![StressTarget::Spread {
                    spread: spreads[i],
                    patch_words,
                    regions: b.max_spread,
                }]
            },
            progress,
        )?;
        Ok(choose(spreads, scores, executions))
    }

    /// Scores of candidate `i` (stress `sequences[i]` at each of `targets(i)`) per test, summed
    /// over distances and targets, and the executions behind them.
    fn score(
        &mut self,
        stage: u8,
        sequences: &[Vec<StressOp>],
        targets: impl Fn(usize) -> Vec<StressTarget>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(PerCandidate, PerCandidate), TuneError> {
        let b = self.budgets.clone();
        let mut cells = Vec::new();
        let mut owner = Vec::new();
        for (i, sequence) in sequences.iter().enumerate() {
            for (t, &test) in b.tests.iter().enumerate() {
                for d in b.distance_list() {
                    for target in targets(i) {
                        cells.push(cell(test, d, sequence, target));
                        owner.push((i, t));
                    }
                }
            }
        }
        let results = self.run_cells(stage, &cells, progress)?;
        let mut scores = vec![vec![0u64; b.tests.len()]; sequences.len()];
        let mut executions = scores.clone();
        for ((i, t), result) in owner.into_iter().zip(results) {
            scores[i][t] += result.weak;
            executions[i][t] += result.executions;
        }
        Ok((scores, executions))
    }

    /// Runs every cell not yet in the journal, appending each as it ends.
    fn run_cells(
        &mut self,
        stage: u8,
        cells: &[Cell],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<CellResult>, TuneError> {
        let mut results = Vec::with_capacity(cells.len());
        let mut status = Progress {
            stage,
            done: 0,
            cells: cells.len() as u64,
            weak: 0,
        };
        progress(status);
        for cell in cells {
            let mut row = self.row(stage, cell);
            let result = match self.done.get(&row.key()) {
                Some(recorded) => CellResult {
                    executions: recorded.executions,
                    weak: recorded.weak,
                },
                None => {
                    let result = self.runner.run(cell, self.budgets.executions, row.seed)?;
                    row.executions = result.executions;
                    row.weak = result.weak;
                    self.journal.append(&row)?;
                    self.done.insert(row.key(), row);
                    result
                }
            };
            status.done += 1;
            status.weak += result.weak;
            progress(status);
            results.push(result);
        }
        Ok(results)
    }

    /// The journal row of `cell` before it runs, with its seed.
    fn row(&self, stage: u8, cell: &Cell) -> TuneRow {
        let (location, spread, patch_words) = match cell.target {
            StressTarget::Location(l) => (Some(l), 1, 1),
            StressTarget::Spread {
                spread,
                patch_words,
                ..
            } => (None, spread, patch_words),
        };
        let mut row = TuneRow {
            stage,
            test: cell.test,
            distance: cell.distance,
            sequence: sequence_to_string(&cell.sequence),
            location,
            spread,
            patch_words,
            executions: 0,
            weak: 0,
            seed: 0,
        };
        row.seed = cell_seed(self.seed, &row);
        row
    }
}

fn cell(test: LitmusShape, distance: u32, sequence: &[StressOp], target: StressTarget) -> Cell {
    Cell {
        test,
        distance,
        sequence: sequence.to_vec(),
        target,
    }
}

/// Stage 1's `(weak, executions)` per location, one row per test and distance, in cell order.
fn by_distance(cells: &[Cell], results: &[CellResult]) -> Vec<DistanceRow<(u64, u64)>> {
    let mut rows: Vec<DistanceRow<(u64, u64)>> = Vec::new();
    for (cell, result) in cells.iter().zip(results) {
        let key = (cell.test, cell.distance);
        let counts = (result.weak, result.executions);
        match rows.last_mut() {
            Some((k, row)) if *k == key => row.push(counts),
            _ => rows.push((key, vec![counts])),
        }
    }
    rows
}

/// Per test: chi-square over the locations, stratified by distance.
fn location_effects(
    tests: &[LitmusShape],
    rows: &[DistanceRow<(u64, u64)>],
) -> Vec<(LitmusShape, ChiSquare)> {
    tests
        .iter()
        .map(|&test| {
            let strata = rows
                .iter()
                .filter(|((t, _), _)| *t == test)
                .map(|(_, row)| row.as_slice());
            (test, analysis::stratified_homogeneity(strata))
        })
        .collect()
}

/// ε-patch sizes of the tests whose location effect is significant.
fn patch_counts(
    effects: &[(LitmusShape, ChiSquare)],
    weak: &[DistanceRow<u64>],
    epsilon: u64,
) -> Vec<(LitmusShape, PatchSizeCounts)> {
    effects
        .iter()
        .filter(|(_, chi)| chi.p_value() < analysis::SIGNIFICANCE)
        .map(|&(test, _)| {
            let mut counts = PatchSizeCounts::new();
            for (_, row) in weak.iter().filter(|((t, _), _)| *t == test) {
                analysis::count_patches(&mut counts, row, epsilon);
            }
            (test, counts)
        })
        .collect()
}

/// The winner over the tests whose candidates differ significantly (the others are noise).
fn choose<T>(
    candidates: Vec<T>,
    scores: Vec<Vec<u64>>,
    executions: Vec<Vec<u64>>,
) -> ChoiceStage<T> {
    let tests = scores.first().map_or(0, Vec::len);
    let effect: Vec<ChiSquare> = (0..tests)
        .map(|t| {
            let groups: Vec<(u64, u64)> = scores
                .iter()
                .zip(&executions)
                .map(|(s, e)| (s[t], e[t]))
                .collect();
            crate::stats::homogeneity(&groups)
        })
        .collect();
    let significant: Vec<usize> = (0..tests)
        .filter(|&t| effect[t].p_value() < analysis::SIGNIFICANCE)
        .collect();
    let best = match significant.is_empty() {
        true => None,
        false => {
            let kept: Vec<Vec<u64>> = scores
                .iter()
                .map(|s| significant.iter().map(|&t| s[t]).collect())
                .collect();
            analysis::most_effective(&kept)
        }
    };
    ChoiceStage {
        candidates,
        scores,
        executions,
        effect,
        best,
    }
}

/// A cell's seed: the run's seed mixed with what the cell is (FNV-1a), so the same cell gets the
/// same seed in a resumed run and in a replay, whatever ran before it.
fn cell_seed(seed: u64, row: &TuneRow) -> u64 {
    let text = format!(
        "{}/{}/{}/{}/{:?}/{}",
        row.stage, row.test, row.distance, row.sequence, row.location, row.spread
    );
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for byte in text.bytes() {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn check_budgets(b: &Budgets) -> Result<(), TuneError> {
    let bad = |what: &str| Err(TuneError::BadBudgets(what.to_string()));
    if b.tests.is_empty() {
        return bad("no litmus tests");
    }
    if b.distances == 0 || b.locations == 0 || b.executions == 0 {
        return bad("distances, locations and executions must be at least 1");
    }
    if b.max_sequence == 0 || b.max_sequence > 12 {
        return bad("the longest access sequence must be 1 to 12 accesses");
    }
    if b.max_spread == 0 {
        return bad("the largest spread must be at least 1");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
