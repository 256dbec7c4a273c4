//! The stages against a made-up chip whose answers are known: patches of 32 words, one
//! favourite access sequence, and a best spread of 2.

use super::analysis::Choice;
use super::*;
use crate::backend::BackendError;
use std::path::Path;

/// A chip model: at distance `d`, stressing a word in region `r` (32 words) works when
/// `r + d / 32` is odd, and only from `d ≥ 8` on (like the paper's Titan, where near locations
/// showed nothing). σ and the spread scale the effect.
struct PatchyChip {
    calls: u64,
    /// Fail with a backend error after this many calls (a kill, for resume tests).
    fail_after: Option<u64>,
}

const FAVOURITE: &str = "ld st st ld";

impl PatchyChip {
    fn new() -> PatchyChip {
        PatchyChip {
            calls: 0,
            fail_after: None,
        }
    }

    fn weak(cell: &Cell, executions: u64) -> u64 {
        let effective = |l: u32| cell.distance >= 8 && (l / 32 + cell.distance / 32) % 2 == 1;
        let sequence = sequence_to_string(&cell.sequence);
        let sigma = if sequence == FAVOURITE {
            10
        } else {
            2 + sequence.len() as u64 % 3
        };
        let base = match cell.target {
            StressTarget::Location(l) => effective(l) as u64 * sigma,
            // Two regions stress best; more dilute the stressing threads.
            StressTarget::Spread { spread, .. } => match spread {
                2 => 30,
                1 | 3 => 20,
                _ => 10,
            },
        };
        // The test matters too, so the scores differ per test.
        let test = match cell.test {
            LitmusShape::Mp => 3,
            LitmusShape::Lb => 2,
            _ => 1,
        };
        (base * test).min(executions)
    }
}

impl LitmusRunner for PatchyChip {
    fn run(&mut self, cell: &Cell, executions: u64, _: u64) -> Result<CellResult, BackendError> {
        if self.fail_after == Some(self.calls) {
            return Err(BackendError::Fault("killed".into()));
        }
        self.calls += 1;
        Ok(CellResult {
            executions,
            weak: PatchyChip::weak(cell, executions),
        })
    }
}

fn budgets() -> Budgets {
    Budgets {
        distances: 96,
        distance_step: 8,
        locations: 128,
        executions: 100,
        max_sequence: 4,
        max_spread: 6,
        ..Budgets::paper()
    }
}

fn journal(dir: &Path) -> Journal<TuneRow> {
    Journal::create(&dir.join("tune.csv"), &"meta").unwrap()
}

fn ignore(_: Progress) {}

#[test]
fn the_stages_find_the_patch_size_sequence_and_spread_of_a_made_up_chip() {
    let dir = tempfile::tempdir().unwrap();
    let mut chip = PatchyChip::new();
    let mut tuner = Tuner::new(&mut chip, budgets(), 1, journal(dir.path()), vec![]).unwrap();
    let patches = tuner.patch_stage(&mut ignore).unwrap();
    assert_eq!(patches.verdict, PatchVerdict::Agreed(32));
    let sequences = tuner.sequence_stage(32, &mut ignore).unwrap();
    let (best, _) = sequences.best.unwrap();
    assert_eq!(sequence_to_string(&sequences.candidates[best]), FAVOURITE);
    let spreads = tuner
        .spread_stage(32, &sequences.candidates[best], &mut ignore)
        .unwrap();
    let (best, choice) = spreads.best.unwrap();
    assert_eq!((spreads.candidates[best], choice), (2, Choice::Unique));
    // Every cell is one row: 3 tests x 12 distances x (128 locations + 30 sequences x 4
    // regions + 6 spreads).
    let rows: Vec<TuneRow> =
        crate::check::journal::read_rows(&dir.path().join("tune.csv")).unwrap();
    assert_eq!(rows.len(), 3 * 12 * (128 + 30 * 4 + 6));
    assert_eq!(chip.calls, rows.len() as u64);
}

#[test]
fn a_killed_tuning_resumes_without_rerunning_a_recorded_cell() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.csv");
    let mut chip = PatchyChip {
        calls: 0,
        fail_after: Some(700),
    };
    let mut tuner = Tuner::new(&mut chip, budgets(), 5, journal(dir.path()), vec![]).unwrap();
    assert!(tuner.patch_stage(&mut ignore).is_err());
    drop(tuner);

    let (resumed_journal, _meta, rows): (_, String, _) = Journal::resume(&path).unwrap();
    assert_eq!(rows.len(), 700);
    let mut chip = PatchyChip::new();
    let mut tuner = Tuner::new(&mut chip, budgets(), 5, resumed_journal, rows).unwrap();
    let mut last = None;
    let verdict = tuner.patch_stage(&mut |p| last = Some(p)).unwrap().verdict;
    assert_eq!(verdict, PatchVerdict::Agreed(32));
    assert_eq!(chip.calls, 3 * 12 * 128 - 700, "only the missing cells ran");
    let last = last.unwrap();
    assert_eq!((last.done, last.cells), (3 * 12 * 128, 3 * 12 * 128));
    // The resumed journal is the same as an uninterrupted one, seeds included.
    let resumed: Vec<TuneRow> = crate::check::journal::read_rows(&path).unwrap();
    let other = tempfile::tempdir().unwrap();
    let mut chip = PatchyChip::new();
    let mut tuner = Tuner::new(&mut chip, budgets(), 5, journal(other.path()), vec![]).unwrap();
    tuner.patch_stage(&mut ignore).unwrap();
    let mut straight: Vec<TuneRow> =
        crate::check::journal::read_rows(&other.path().join("tune.csv")).unwrap();
    let mut resumed = resumed;
    let key = |r: &TuneRow| (r.test.name(), r.distance, r.location);
    resumed.sort_by_key(key);
    straight.sort_by_key(key);
    assert_eq!(resumed, straight);
}

#[test]
fn a_chip_without_weak_behaviour_gives_no_choice() {
    struct Strong;
    impl LitmusRunner for Strong {
        fn run(&mut self, _: &Cell, n: u64, _: u64) -> Result<CellResult, BackendError> {
            Ok(CellResult {
                executions: n,
                weak: 0,
            })
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut strong = Strong;
    let mut tuner = Tuner::new(&mut strong, budgets(), 1, journal(dir.path()), vec![]).unwrap();
    assert_eq!(
        tuner.patch_stage(&mut ignore).unwrap().verdict,
        PatchVerdict::NoLocationEffect
    );
    let stage = tuner.sequence_stage(32, &mut ignore).unwrap();
    assert_eq!(stage.best, None);
    assert_eq!(
        stage.no_choice().unwrap(),
        "no weak behaviour with any candidate"
    );
}

/// Weak behaviour at one rate whatever the stress: a chip (like the simulator) where tuning
/// has nothing to find. Counts are binomial draws from the cell's seed.
struct Indifferent;

impl LitmusRunner for Indifferent {
    fn run(&mut self, _: &Cell, n: u64, seed: u64) -> Result<CellResult, BackendError> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let weak = (0..n).filter(|_| rng.random_bool(0.3)).count() as u64;
        Ok(CellResult {
            executions: n,
            weak,
        })
    }
}

#[test]
fn noise_is_not_taken_for_a_patch_size_a_sequence_or_a_spread() {
    let dir = tempfile::tempdir().unwrap();
    let mut chip = Indifferent;
    let mut tuner = Tuner::new(&mut chip, budgets(), 1, journal(dir.path()), vec![]).unwrap();
    let fallback =
        crate::profile::StressProfile::parse(crate::profile::DEFAULT_SIM, Path::new("sim.toml"))
            .unwrap();
    let outcome = tune(&mut tuner, &Given::default(), &fallback, &mut ignore).unwrap();
    let stage = outcome.patch_stage.as_ref().unwrap();
    // ε-patches alone would have found something in this noise.
    assert!(stage.weak.iter().any(|(_, row)| row.iter().any(|&w| w > 3)));
    assert_eq!(stage.verdict, PatchVerdict::NoLocationEffect);
    for (test, chi) in &stage.location_effect {
        assert!(chi.p_value() >= analysis::SIGNIFICANCE, "{test}: {chi:?}");
    }
    assert_eq!(outcome.patch_words.value, fallback.patch_words);
    assert!(matches!(outcome.patch_words.source, Source::Fallback(_)));
    let why = match &outcome.sequence.source {
        Source::Fallback(why) => why.clone(),
        other => panic!("{other:?}"),
    };
    assert!(why.contains("no significant difference"), "{why}");
    assert!(matches!(outcome.spread.source, Source::Fallback(_)));
}

#[test]
fn cell_seeds_depend_on_the_cell_and_the_run_seed_only() {
    let row = |distance, location| TuneRow {
        stage: 1,
        test: LitmusShape::Mp,
        distance,
        sequence: "st ld".into(),
        location,
        spread: 1,
        patch_words: 1,
        executions: 0,
        weak: 0,
        seed: 0,
    };
    let a = cell_seed(1, &row(3, Some(4)));
    assert_eq!(a, cell_seed(1, &row(3, Some(4))));
    assert_ne!(a, cell_seed(2, &row(3, Some(4))));
    assert_ne!(a, cell_seed(1, &row(4, Some(3))));
    assert_ne!(a, cell_seed(1, &row(3, None)));
}

#[test]
fn bad_budgets_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut chip = PatchyChip::new();
    for budgets in [
        Budgets {
            tests: vec![],
            ..budgets()
        },
        Budgets {
            executions: 0,
            ..budgets()
        },
        Budgets {
            max_sequence: 13,
            ..budgets()
        },
    ] {
        let j = Journal::create(
            &dir.path().join(format!("{}.csv", budgets.executions)),
            &"m",
        );
        let error = Tuner::new(&mut chip, budgets, 1, j.unwrap(), vec![]).err();
        assert!(matches!(error, Some(TuneError::BadBudgets(_))));
        let _ = std::fs::remove_file(dir.path().join("0.csv"));
        let _ = std::fs::remove_file(dir.path().join("100.csv"));
    }
    assert_eq!(chip.calls, 0);
}

#[test]
fn the_paper_budgets_are_the_defaults_of_section_3() {
    let b = Budgets::paper();
    assert_eq!(
        (
            b.distances,
            b.locations,
            b.executions,
            b.max_sequence,
            b.max_spread,
            b.epsilon
        ),
        (256, 256, 1000, 5, 64, 3)
    );
    assert_eq!(b.distance_list().len(), 256);
    assert_eq!(
        budgets().distance_list(),
        (0..96).step_by(8).collect::<Vec<_>>()
    );
}

#[test]
fn budgets_are_shown_as_the_options_name_them_without_rust_debug_names() {
    let shown = Budgets::paper().to_string();
    assert_eq!(
        shown,
        "D=256 step 1 L=256 C=1000 N=5 M=64 eps=3 tests mp,lb,sb"
    );
}
