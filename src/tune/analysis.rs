//! The decisions of tuning, as pure functions over weak counts: which patch size a chip has,
//! which access sequence and which spread stress it best (section 3 of the core paper).
//!
//! The driver measures; this module only reads numbers, so every rule here is unit-tested on
//! made-up data, including data with no structure at all (the simulator's: it has no caches, so
//! where stress lands makes no difference there).

use crate::litmus::LitmusShape;
use crate::ptx::passes::stress::StressOp;
use crate::stats::{homogeneity, ChiSquare};
use std::collections::BTreeMap;

/// A difference in weak rates counts as real (not noise) below this chi-square p-value. The paper
/// read its rankings by eye; with budgets far below its billions of executions, or on a chip (or
/// a simulator) where stress location makes no difference, a winner picked from noise would be
/// written into the profile as if it had been measured.
pub const SIGNIFICANCE: f64 = 0.01;

/// Whether `groups` of `(weak, executions)` differ in rate, stratum by stratum: the chi-square
/// statistics of each stratum's groups, summed (strata are independent).
pub fn stratified_homogeneity<'a>(strata: impl IntoIterator<Item = &'a [(u64, u64)]>) -> ChiSquare {
    strata
        .into_iter()
        .map(homogeneity)
        .fold(ChiSquare::default(), ChiSquare::plus)
}

/// Every access sequence σ in `(ld|st)+` of length 1 to `max_len`, shortest first, each length
/// in the order of its binary spelling with `ld` as 0 (`ld`, `st`, `ld ld`, `ld st`, …): the
/// paper's N = 5 gives 62 sequences.
pub fn all_sequences(max_len: u32) -> Vec<Vec<StressOp>> {
    let mut sequences = Vec::new();
    for len in 1..=max_len {
        for bits in 0u64..(1 << len) {
            let sequence = (0..len)
                .rev()
                .map(|i| match (bits >> i) & 1 {
                    0 => StressOp::Load,
                    _ => StressOp::Store,
                })
                .collect();
            sequences.push(sequence);
        }
    }
    sequences
}

/// The ε-patches of one test at one distance: maximal runs of consecutive stressed locations
/// that each gave more than `epsilon` weak behaviours, as `(first location index, length)`.
pub fn epsilon_patches(weak_by_location: &[u64], epsilon: u64) -> Vec<(usize, usize)> {
    let mut patches = Vec::new();
    let mut start = None;
    for (i, &weak) in weak_by_location.iter().enumerate() {
        match (weak > epsilon, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                patches.push((s, i - s));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        patches.push((s, weak_by_location.len() - s));
    }
    patches
}

/// How many ε-patches of each size one test showed, over all distances.
pub type PatchSizeCounts = BTreeMap<u32, u64>;

/// Adds the ε-patches of one `(test, distance)` row of weak counts to `counts`.
pub fn count_patches(counts: &mut PatchSizeCounts, weak_by_location: &[u64], epsilon: u64) {
    for (_, len) in epsilon_patches(weak_by_location, epsilon) {
        *counts.entry(len as u32).or_default() += 1;
    }
}

/// The patch size a test shows most often: the size with the most ε-patches; on a tie, the
/// smaller size (stressing one location per smaller patch misses nothing a larger one covers).
pub fn most_common_size(counts: &PatchSizeCounts) -> Option<u32> {
    counts
        .iter()
        .max_by(|(sa, ca), (sb, cb)| ca.cmp(cb).then(sb.cmp(sa)))
        .map(|(&size, _)| size)
}

/// What stage 1 concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchVerdict {
    /// Every test that showed ε-patches shows this size most often: the critical patch size.
    Agreed(u32),
    /// The tests disagree; `size` has the most ε-patches over all tests together.
    Disagreed { size: u32 },
    /// Weak behaviour above ε at every location tested, at every distance where it appears at
    /// all: where stress lands makes no difference, so no patch size can be read off.
    Uniform,
    /// No location gave more than ε weak behaviours in any test.
    NoPatches,
    /// No test's weak rate differed between stressed locations beyond chance
    /// (p ≥ [`SIGNIFICANCE`]): there is no patch structure to read.
    NoLocationEffect,
}

impl PatchVerdict {
    /// The patch size to use, if the data gave one.
    pub fn size(&self) -> Option<u32> {
        match self {
            PatchVerdict::Agreed(size) | PatchVerdict::Disagreed { size } => Some(*size),
            PatchVerdict::Uniform | PatchVerdict::NoPatches | PatchVerdict::NoLocationEffect => {
                None
            }
        }
    }
}

/// The paper's critical patch size from each test's ε-patch counts; `locations` is how many
/// locations were stressed (a patch that long means no structure at all).
pub fn critical_patch_size(
    per_test: &[(LitmusShape, PatchSizeCounts)],
    locations: u32,
) -> PatchVerdict {
    let showing: Vec<&PatchSizeCounts> = per_test
        .iter()
        .map(|(_, c)| c)
        .filter(|c| !c.is_empty())
        .collect();
    if showing.is_empty() {
        return PatchVerdict::NoPatches;
    }
    let all_uniform = showing.iter().all(|c| c.keys().all(|&s| s == locations));
    if all_uniform {
        return PatchVerdict::Uniform;
    }
    let modes: Vec<Option<u32>> = showing.iter().map(|c| most_common_size(c)).collect();
    if modes.windows(2).all(|w| w[0] == w[1]) {
        if let Some(size) = modes[0] {
            return PatchVerdict::Agreed(size);
        }
    }
    let mut together = PatchSizeCounts::new();
    for counts in showing {
        for (&size, &n) in counts {
            *together.entry(size).or_default() += n;
        }
    }
    PatchVerdict::Disagreed {
        size: most_common_size(&together).expect("some test showed patches"),
    }
}

/// The indices of the candidates no other candidate beats in every test (the Pareto front).
/// `scores[c][t]` is candidate `c`'s score (weak behaviours) in test `t`.
pub fn pareto_front(scores: &[Vec<u64>]) -> Vec<usize> {
    (0..scores.len())
        .filter(|&c| !scores.iter().any(|other| dominates(other, &scores[c])))
        .collect()
}

/// `a` beats `b` in every test.
fn dominates(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x > y)
}

/// How the winner among the Pareto-optimal candidates was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// It was the only Pareto-optimal candidate.
    Unique,
    /// It beat every other Pareto-optimal candidate in the majority of tests (the paper's
    /// "most effective for two out of the three"); `front` candidates were optimal.
    Majority { front: usize },
    /// No candidate won every majority comparison; the one winning the most comparisons, then
    /// with the highest total score, then the earliest, was taken.
    MostWins { front: usize },
}

/// The most effective candidate: the Pareto front, ties broken by majority of tests. `None` for
/// no candidates. Scores of all zero tie everywhere: the earliest candidate wins.
pub fn most_effective(scores: &[Vec<u64>]) -> Option<(usize, Choice)> {
    let front = pareto_front(scores);
    match front.as_slice() {
        [] => None,
        [only] => Some((*only, Choice::Unique)),
        _ => {
            let wins = |c: usize| {
                front
                    .iter()
                    .filter(|&&o| o != c && beats_in_majority(&scores[c], &scores[o]))
                    .count()
            };
            let total = |c: usize| scores[c].iter().sum::<u64>();
            let best = *front
                .iter()
                .max_by(|&&a, &&b| {
                    wins(a)
                        .cmp(&wins(b))
                        .then(total(a).cmp(&total(b)))
                        .then(b.cmp(&a))
                })
                .expect("front is not empty");
            let choice = if wins(best) == front.len() - 1 {
                Choice::Majority { front: front.len() }
            } else {
                Choice::MostWins { front: front.len() }
            };
            Some((best, choice))
        }
    }
}

/// `a` scored higher than `b` in more than half of the tests.
fn beats_in_majority(a: &[u64], b: &[u64]) -> bool {
    let higher = a.iter().zip(b).filter(|(x, y)| x > y).count();
    2 * higher > a.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::passes::stress::sequence_to_string;

    #[test]
    fn n_5_gives_the_papers_62_sequences_shortest_first() {
        let all = all_sequences(5);
        assert_eq!(all.len(), 2 + 4 + 8 + 16 + 32);
        let names: Vec<String> = all.iter().map(|s| sequence_to_string(s)).collect();
        assert_eq!(
            &names[..6],
            ["ld", "st", "ld ld", "ld st", "st ld", "st st"]
        );
        assert!(names.contains(&"ld st st ld".to_string()));
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
    }

    #[test]
    fn epsilon_patches_are_maximal_runs_above_epsilon() {
        let weak = [0, 5, 9, 4, 3, 0, 7, 7];
        assert_eq!(epsilon_patches(&weak, 3), vec![(1, 3), (6, 2)]);
        assert_eq!(epsilon_patches(&weak, 100), vec![]);
        assert_eq!(epsilon_patches(&[4, 4], 3), vec![(0, 2)]);
    }

    /// A made-up chip with patches of `patch` words: every other patch is effective.
    fn patchy_row(patch: usize, locations: usize) -> Vec<u64> {
        (0..locations)
            .map(|l| if (l / patch) % 2 == 1 { 20 } else { 0 })
            .collect()
    }

    #[test]
    fn a_chip_with_32_word_patches_has_critical_patch_size_32() {
        let mut mp = PatchSizeCounts::new();
        let mut lb = PatchSizeCounts::new();
        for _distance in 0..4 {
            count_patches(&mut mp, &patchy_row(32, 256), 3);
            count_patches(&mut lb, &patchy_row(32, 256), 3);
        }
        // Noise: a single location above ε now and then must not outvote the patches.
        count_patches(&mut lb, &[0, 9, 0, 0], 3);
        let verdict = critical_patch_size(
            &[
                (LitmusShape::Mp, mp),
                (LitmusShape::Lb, lb),
                (LitmusShape::Sb, PatchSizeCounts::new()),
            ],
            256,
        );
        assert_eq!(verdict, PatchVerdict::Agreed(32));
    }

    #[test]
    fn disagreeing_tests_take_the_size_with_most_patches_overall() {
        let mut mp = PatchSizeCounts::new();
        let mut lb = PatchSizeCounts::new();
        count_patches(&mut mp, &patchy_row(32, 256), 3); // 4 patches of 32
        count_patches(&mut lb, &patchy_row(64, 256), 3); // 2 of 64
        count_patches(&mut lb, &patchy_row(64, 256), 3);
        count_patches(&mut lb, &patchy_row(64, 256), 3); // 6 of 64
        let verdict = critical_patch_size(&[(LitmusShape::Mp, mp), (LitmusShape::Lb, lb)], 256);
        assert_eq!(verdict, PatchVerdict::Disagreed { size: 64 });
        assert_eq!(verdict.size(), Some(64));
    }

    #[test]
    fn weak_behaviour_everywhere_gives_no_patch_size() {
        let mut mp = PatchSizeCounts::new();
        count_patches(&mut mp, &[9; 64], 3);
        assert_eq!(
            critical_patch_size(&[(LitmusShape::Mp, mp)], 64),
            PatchVerdict::Uniform
        );
        assert_eq!(
            critical_patch_size(&[(LitmusShape::Mp, PatchSizeCounts::new())], 64),
            PatchVerdict::NoPatches
        );
        assert_eq!(PatchVerdict::Uniform.size(), None);
    }

    #[test]
    fn the_most_common_size_prefers_the_smaller_on_a_tie() {
        let counts = PatchSizeCounts::from([(32, 3), (64, 3), (1, 2)]);
        assert_eq!(most_common_size(&counts), Some(32));
    }

    #[test]
    fn strata_add_up() {
        let a: &[(u64, u64)] = &[(10, 50), (0, 50)];
        let b: &[(u64, u64)] = &[(0, 50), (0, 50)];
        let sum = stratified_homogeneity([a, b, a]);
        assert_eq!(sum.df, 2);
        assert!((sum.statistic - 2.0 * 50.0 / 4.5).abs() < 1e-9);
    }

    #[test]
    fn the_pareto_front_drops_candidates_beaten_in_every_test() {
        let scores = vec![
            vec![10, 10, 10],
            vec![5, 5, 5],
            vec![20, 1, 1],
            vec![10, 10, 9],
        ];
        // [1] is beaten by [0] everywhere; [3] ties [0] in two tests, so it stays.
        assert_eq!(pareto_front(&scores), vec![0, 2, 3]);
    }

    #[test]
    fn ties_on_the_front_go_to_the_majority_winner() {
        // The paper's Titan: the chosen sequence is best in no single test.
        let scores = vec![vec![153, 60, 90], vec![100, 98, 90], vec![104, 64, 93]];
        let (best, choice) = most_effective(&scores).unwrap();
        assert_eq!(best, 2, "beats 0 in LB and SB, and 1 in MP and SB");
        assert_eq!(choice, Choice::Majority { front: 3 });
        assert_eq!(most_effective(&[vec![1, 2, 3]]), Some((0, Choice::Unique)));
        assert_eq!(most_effective(&[]), None);
    }

    #[test]
    fn a_majority_cycle_falls_back_to_most_wins_then_total() {
        // Rock-paper-scissors: each beats one other in two tests of three.
        let scores = vec![vec![3, 2, 1], vec![1, 3, 2], vec![2, 1, 4]];
        let (best, choice) = most_effective(&scores).unwrap();
        assert_eq!(best, 2, "equal wins, highest total");
        assert_eq!(choice, Choice::MostWins { front: 3 });
    }

    #[test]
    fn all_zero_scores_pick_the_first_candidate() {
        let scores = vec![vec![0, 0, 0]; 4];
        assert_eq!(most_effective(&scores).unwrap().0, 0);
    }
}
