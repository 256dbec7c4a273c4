//! What a tuning run found, as the stress profile `check` reads and as a Markdown summary in the
//! shape of the paper's tables 2 and 3 (pure: outcome in, text out).

use super::{Budgets, ChoiceStage, Decision, Source, TuneOutcome};
use crate::litmus::LitmusShape;
use crate::profile::{Provenance, StressProfile};
use crate::ptx::passes::stress::{sequence_to_string, StressOp};
use std::fmt::Write;

/// The profile for `chip`; the provenance note says which values fell back to defaults.
pub fn profile(outcome: &TuneOutcome, chip: &str, provenance: Provenance) -> StressProfile {
    let fallbacks: Vec<String> = [
        ("patch size", &outcome.patch_words.source),
        ("access sequence", &outcome.sequence.source),
        ("spread", &outcome.spread.source),
    ]
    .into_iter()
    .filter_map(|(what, source)| match source {
        Source::Fallback(why) => Some(format!("{what} is the default ({why})")),
        _ => None,
    })
    .collect();
    let note = match (fallbacks.is_empty(), provenance.note) {
        (true, note) => note,
        (false, None) => Some(fallbacks.join("; ")),
        (false, Some(note)) => Some(format!("{note}; {}", fallbacks.join("; "))),
    };
    StressProfile {
        chip: chip.to_string(),
        patch_words: outcome.patch_words.value,
        sequence: sequence_to_string(&outcome.sequence.value),
        spread: outcome.spread.value,
        provenance: Provenance {
            source: "tune".into(),
            note,
            ..provenance
        },
    }
}

/// How many best and worst candidates the sequence table shows per test (the paper's table 3
/// shows three of each).
const TOP: usize = 3;

/// The summary: the three values and how each was found, ε-patch counts per test, the best and
/// worst access sequences per test, and the spread scores.
pub fn markdown(outcome: &TuneOutcome, budgets: &Budgets, provenance: &str) -> String {
    let mut md = String::from("# Stress tuning\n\n");
    let _ = writeln!(md, "{provenance}\n");
    let _ = writeln!(md, "{}\n", budgets_line(outcome, budgets));
    md.push_str("| parameter | value | how |\n| --- | --- | --- |\n");
    row(
        &mut md,
        "critical patch size (words)",
        &outcome.patch_words,
        |p| p.to_string(),
    );
    row(&mut md, "access sequence σ", &outcome.sequence, |s| {
        sequence_to_string(s)
    });
    row(&mut md, "spread", &outcome.spread, |m| m.to_string());
    if let Some(stage) = &outcome.patch_stage {
        md.push_str(
            "\n## Stage 1: does the stressed location matter?\n\n\
             | test | χ² over locations (by distance) | p | ε-patches (size × count) |\n\
             | --- | --- | --- | --- |\n",
        );
        for (test, chi) in &stage.location_effect {
            let patches = match stage.counts.iter().find(|(t, _)| t == test) {
                None => "not counted (no location effect)".to_string(),
                Some((_, c)) if c.is_empty() => "none".to_string(),
                Some((_, c)) => {
                    let sizes: Vec<String> = c.iter().map(|(s, n)| format!("{s} × {n}")).collect();
                    sizes.join(", ")
                }
            };
            let _ = writeln!(
                md,
                "| {test} | {:.1} (df {}) | {} | {patches} |",
                chi.statistic,
                chi.df,
                p_text(chi.p_value())
            );
        }
    }
    if let Some(stage) = &outcome.sequence_stage {
        md.push_str("\n## Stage 2: access sequences\n\n");
        md.push_str(&effects(&stage.effect, &budgets.tests));
        md.push_str(&ranking(stage, &budgets.tests, |s| sequence_to_string(s)));
    }
    if let Some(stage) = &outcome.spread_stage {
        md.push_str("\n## Stage 3: spread scores\n\n");
        md.push_str(&effects(&stage.effect, &budgets.tests));
        let _ = writeln!(
            md,
            "| spread | {} |",
            names(&budgets.tests).replace(", ", " | ")
        );
        let _ = writeln!(md, "| --- |{}", " --- |".repeat(budgets.tests.len()));
        for (spread, scores) in stage.candidates.iter().zip(&stage.scores) {
            let cells: Vec<String> = scores.iter().map(u64::to_string).collect();
            let _ = writeln!(md, "| {spread} | {} |", cells.join(" | "));
        }
    }
    md
}

/// The budgets of the stages that ran: a value given on the command line skips its stage, and
/// that stage's budgets measured nothing.
fn budgets_line(outcome: &TuneOutcome, budgets: &Budgets) -> String {
    let ran = |source: &Source| !matches!(source, Source::Given);
    let mut parts = Vec::new();
    if ran(&outcome.patch_words.source) {
        parts.push(format!(
            "D = {} (every {}), L = {}",
            budgets.distances, budgets.distance_step, budgets.locations
        ));
    }
    parts.push(format!("C = {}", budgets.executions));
    if ran(&outcome.sequence.source) {
        parts.push(format!("N = {}", budgets.max_sequence));
    }
    if ran(&outcome.spread.source) {
        parts.push(format!("M = {}", budgets.max_spread));
    }
    if ran(&outcome.patch_words.source) {
        parts.push(format!("ε = {}", budgets.epsilon));
    }
    format!(
        "Budgets: {}; tests {}.",
        parts.join(", "),
        names(&budgets.tests)
    )
}

fn row<T>(md: &mut String, what: &str, decision: &Decision<T>, show: impl Fn(&T) -> String) {
    let how = match &decision.source {
        Source::Measured(how) => format!("measured: {how}"),
        Source::Given => "given on the command line".to_string(),
        Source::Fallback(why) => format!("**default** ({why})"),
    };
    let _ = writeln!(md, "| {what} | {} | {how} |", show(&decision.value));
}

/// A p-value for a table: small ones in scientific notation.
fn p_text(p: f64) -> String {
    if p < 1e-3 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// Whether the candidates differ, per test; only tests where they do decide the winner.
fn effects(effect: &[crate::stats::ChiSquare], tests: &[LitmusShape]) -> String {
    let parts: Vec<String> = tests
        .iter()
        .zip(effect)
        .map(|(t, chi)| format!("{t} p = {}", p_text(chi.p_value())))
        .collect();
    format!(
        "Do the candidates differ (χ² over candidates)? {}. Only tests with p < {} decide.\n\n",
        parts.join(", "),
        super::analysis::SIGNIFICANCE
    )
}

fn names(tests: &[LitmusShape]) -> String {
    let names: Vec<&str> = tests.iter().map(|t| t.name()).collect();
    names.join(", ")
}

/// The paper's table 3: per test, the best and worst candidates by score, with the chosen one's
/// rank.
fn ranking<T>(
    stage: &ChoiceStage<T>,
    tests: &[LitmusShape],
    show: impl Fn(&T) -> String,
) -> String {
    let mut md = String::new();
    for (t, test) in tests.iter().enumerate() {
        let mut order: Vec<usize> = (0..stage.candidates.len()).collect();
        order.sort_by_key(|&c| std::cmp::Reverse(stage.scores[c][t]));
        let _ = writeln!(
            md,
            "**{test}**\n\n| rank | σ | score |\n| --- | --- | --- |"
        );
        let chosen = stage.best.map(|(c, _)| c);
        for (rank, &c) in order.iter().enumerate() {
            let shown = rank < TOP || rank + TOP >= order.len() || Some(c) == chosen;
            if shown {
                let mark = if Some(c) == chosen { " (chosen)" } else { "" };
                let _ = writeln!(
                    md,
                    "| {} | {}{mark} | {} |",
                    rank + 1,
                    show(&stage.candidates[c]),
                    stage.scores[c][t]
                );
            }
        }
        md.push('\n');
    }
    md
}

/// The spelling of each access-sequence candidate, for chart labels.
pub fn sequence_labels(candidates: &[Vec<StressOp>]) -> Vec<String> {
    candidates.iter().map(|s| sequence_to_string(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::passes::stress::parse_sequence;

    fn outcome() -> TuneOutcome {
        TuneOutcome {
            patch_words: Decision {
                value: 32,
                source: Source::Measured("every test agrees".into()),
            },
            sequence: Decision {
                value: parse_sequence("ld st2 ld").unwrap(),
                source: Source::Given,
            },
            spread: Decision {
                value: 2,
                source: Source::Fallback("no weak behaviour with any candidate".into()),
            },
            patch_stage: None,
            sequence_stage: None,
            spread_stage: Some(ChoiceStage {
                candidates: vec![1, 2],
                scores: vec![vec![0, 0, 0], vec![0, 0, 0]],
                executions: vec![vec![10, 10, 10], vec![10, 10, 10]],
                effect: vec![Default::default(); 3],
                best: None,
            }),
        }
    }

    #[test]
    fn the_profile_says_which_values_are_defaults() {
        let p = profile(&outcome(), "nvidia-h100", Provenance::default());
        assert_eq!(
            (p.patch_words, p.sequence.as_str(), p.spread),
            (32, "ld st st ld", 2)
        );
        assert!(p.is_tuned());
        let note = p.provenance.note.unwrap();
        assert!(note.contains("spread is the default"), "{note}");
        assert!(!note.contains("patch"), "{note}");
        // It round-trips through the file format check reads.
        let text = toml::to_string(&profile(&outcome(), "x", Provenance::default())).unwrap();
        assert!(StressProfile::parse(&text, std::path::Path::new("x.toml")).is_ok());
    }

    #[test]
    fn the_summary_gives_each_value_and_how_it_was_found() {
        let md = markdown(&outcome(), &Budgets::paper(), "simulator");
        assert!(md.contains("| critical patch size (words) | 32 | measured: every test agrees |"));
        assert!(md.contains("| access sequence σ | ld st st ld | given on the command line |"));
        assert!(
            md.contains("| spread | 2 | **default** (no weak behaviour"),
            "{md}"
        );
        assert!(md.contains("| spread | mp | lb | sb |"), "{md}");
    }

    /// QA: summary.md listed the budgets of stages a given value had skipped (N for a given
    /// sequence), as if they had been spent.
    #[test]
    fn the_budgets_line_leaves_out_the_stages_a_given_value_skipped() {
        let md = markdown(&outcome(), &Budgets::paper(), "simulator");
        let line = md.lines().find(|l| l.starts_with("Budgets:")).unwrap();
        assert!(line.contains("M = ") && line.contains("C = "), "{line}");
        assert!(!line.contains("N = "), "the sequence was given: {line}");
    }

    #[test]
    fn stage_1_reports_the_location_test_and_which_tests_counted_patches() {
        use crate::stats::ChiSquare;
        use crate::tune::analysis::PatchVerdict;
        let mut outcome = outcome();
        let effect = |statistic: f64| ChiSquare { statistic, df: 10 };
        outcome.patch_stage = Some(crate::tune::PatchStage {
            weak: vec![],
            location_effect: vec![
                (LitmusShape::Mp, effect(80.0)),
                (LitmusShape::Lb, effect(9.0)),
            ],
            counts: vec![(LitmusShape::Mp, [(32, 4)].into())],
            verdict: PatchVerdict::Agreed(32),
        });
        let md = markdown(&outcome, &Budgets::paper(), "sim");
        assert!(
            md.contains("| mp | 80.0 (df 10) | 5.0e-13 | 32 × 4 |"),
            "{md}"
        );
        assert!(
            md.contains("| lb | 9.0 (df 10) | 0.532 | not counted (no location effect) |"),
            "{md}"
        );
    }

    #[test]
    fn the_ranking_shows_top_bottom_and_chosen() {
        let stage = ChoiceStage {
            candidates: (0..10).collect::<Vec<u32>>(),
            scores: (0..10).map(|c| vec![c as u64 * 10]).collect(),
            executions: vec![vec![1000]; 10],
            effect: vec![Default::default()],
            best: Some((4, crate::tune::analysis::Choice::Unique)),
        };
        let md = ranking(&stage, &[LitmusShape::Mp], |c| c.to_string());
        assert!(md.contains("| 1 | 9 | 90 |"));
        assert!(md.contains("| 6 | 4 (chosen) | 40 |"));
        assert!(md.contains("| 10 | 0 | 0 |"));
        assert!(!md.contains("| 5 | 5 |"), "{md}");
    }
}
