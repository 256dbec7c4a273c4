//! From the stages' measurements to the three values of a profile: each stage's answer, or,
//! where a stage has none (or was skipped), the default profile's value or the one given, and
//! always where the value came from, so a profile never passes a default off as measured.

use super::analysis::{self, PatchVerdict};
use super::{ChoiceStage, PatchStage, Progress, TuneError, Tuner};
use crate::profile::StressProfile;
use crate::ptx::passes::stress::{parse_sequence, StressOp};

/// How a tuned value was arrived at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Measured by its stage; the text says how the winner was chosen.
    Measured(String),
    /// Given on the command line: the stage did not run.
    Given,
    /// The stage ran but gave no answer (the text says why): the fallback profile's value.
    Fallback(String),
}

/// A tuned value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision<T> {
    pub value: T,
    pub source: Source,
}

/// Values that skip their stage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given {
    pub patch_words: Option<u32>,
    pub sequence: Option<Vec<StressOp>>,
}

/// Everything a tuning run found.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneOutcome {
    pub patch_words: Decision<u32>,
    pub sequence: Decision<Vec<StressOp>>,
    pub spread: Decision<u32>,
    pub patch_stage: Option<PatchStage>,
    pub sequence_stage: Option<ChoiceStage<Vec<StressOp>>>,
    pub spread_stage: Option<ChoiceStage<u32>>,
}

/// The three stages in order, each feeding the next; a stage without an answer falls back to
/// `fallback`'s value (a default profile) and says so.
pub fn tune(
    tuner: &mut Tuner<'_>,
    given: &Given,
    fallback: &StressProfile,
    progress: &mut dyn FnMut(Progress),
) -> Result<TuneOutcome, TuneError> {
    let fallback_sequence = parse_sequence(&fallback.sequence).unwrap_or_default();
    let (patch_words, patch_stage) = match given.patch_words {
        Some(p) => (given_value(p), None),
        None => {
            let stage = tuner.patch_stage(progress)?;
            (
                patch_decision(&stage.verdict, fallback.patch_words),
                Some(stage),
            )
        }
    };
    let p = patch_words.value;
    let (sequence, sequence_stage) = match &given.sequence {
        Some(s) => (given_value(s.clone()), None),
        None => {
            let stage = tuner.sequence_stage(p, progress)?;
            (decide(&stage, fallback_sequence), Some(stage))
        }
    };
    let spread_stage = tuner.spread_stage(p, &sequence.value, progress)?;
    let spread = decide(&spread_stage, fallback.spread);
    Ok(TuneOutcome {
        patch_words,
        sequence,
        spread,
        patch_stage,
        sequence_stage,
        spread_stage: Some(spread_stage),
    })
}

fn given_value<T>(value: T) -> Decision<T> {
    Decision {
        value,
        source: Source::Given,
    }
}

fn patch_decision(verdict: &PatchVerdict, fallback: u32) -> Decision<u32> {
    let (value, source) = match verdict {
        PatchVerdict::Agreed(p) => (*p, Source::Measured("every test agrees".into())),
        PatchVerdict::Disagreed { size } => (
            *size,
            Source::Measured("the tests disagree: most ε-patches over all tests".into()),
        ),
        PatchVerdict::Uniform => (
            fallback,
            Source::Fallback(
                "more than ε weak behaviours at every stressed location: no patch boundary to \
                 measure"
                    .into(),
            ),
        ),
        PatchVerdict::NoPatches => (
            fallback,
            Source::Fallback("no location gave more than ε weak behaviours".into()),
        ),
        PatchVerdict::NoLocationEffect => (
            fallback,
            Source::Fallback(format!(
                "no test's weak rate depends on the stressed location (chi-square p ≥ {})",
                analysis::SIGNIFICANCE
            )),
        ),
    };
    Decision { value, source }
}

fn decide<T: Clone>(stage: &ChoiceStage<T>, fallback: T) -> Decision<T> {
    match stage.best {
        Some((i, choice)) => Decision {
            value: stage.candidates[i].clone(),
            source: Source::Measured(match choice {
                analysis::Choice::Unique => "the only Pareto-optimal candidate".to_string(),
                analysis::Choice::Majority { front } => {
                    format!("{front} Pareto-optimal; it beats each other in most tests")
                }
                analysis::Choice::MostWins { front } => {
                    format!("{front} Pareto-optimal, no majority winner: most wins, then total")
                }
            }),
        },
        None => Decision {
            value: fallback,
            source: Source::Fallback(stage.no_choice().unwrap_or_default()),
        },
    }
}
