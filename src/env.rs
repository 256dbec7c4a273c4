//! Testing environments: what stresses an application while it is checked.
//!
//! The paper's eight environments are a stress strategy (`no`, `sys`, `rand`, `cache`) and a
//! thread-randomisation switch (`+` on, `-` off), spelled `sys-str+`, `no-str-`, … . Checks,
//! campaigns and hardening all name their environment this way, and journals record it so.

use crate::ptx::passes::stress::{parse_sequence, StressError, StressStrategy};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// What the stressing blocks do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StressKind {
    /// No stressing blocks.
    No,
    /// The tuned access sequence at `spread` patch-aligned scratchpad locations.
    Sys,
    /// Random loads and stores to random scratchpad words.
    Rand,
    /// Every stressing block loads and stores every word of an L2-sized scratchpad.
    Cache,
}

impl StressKind {
    pub const ALL: [StressKind; 4] = [
        StressKind::No,
        StressKind::Sys,
        StressKind::Rand,
        StressKind::Cache,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StressKind::No => "no",
            StressKind::Sys => "sys",
            StressKind::Rand => "rand",
            StressKind::Cache => "cache",
        }
    }

    /// The stress code the harness compiles in; `sequence` is the `sys` access sequence.
    pub fn strategy(self, sequence: &str) -> Result<StressStrategy, StressError> {
        Ok(match self {
            StressKind::No => StressStrategy::None,
            StressKind::Sys => StressStrategy::Sys {
                sequence: parse_sequence(sequence)?,
            },
            StressKind::Rand => StressStrategy::Rand,
            StressKind::Cache => StressStrategy::Cache,
        })
    }
}

display_by_name!(StressKind, name);

/// A testing environment, e.g. `sys-str+`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Environment {
    pub stress: StressKind,
    /// Thread randomisation: blocks, and whole warps inside blocks, get random virtual ids.
    pub randomise: bool,
}

impl Environment {
    /// All eight, in the order of the paper's table 5.
    pub fn all() -> Vec<Environment> {
        StressKind::ALL
            .into_iter()
            .flat_map(|stress| [false, true].map(|randomise| Environment { stress, randomise }))
            .collect()
    }

    /// Whether runs get stressing blocks.
    pub fn stresses(self) -> bool {
        self.stress != StressKind::No
    }

    /// Whether runs go through the harness at all (`no-str-` runs the application natively).
    pub fn harnessed(self) -> bool {
        self.stresses() || self.randomise
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.randomise { '+' } else { '-' };
        write!(f, "{}-str{sign}", self.stress.name())
    }
}

impl FromStr for Environment {
    type Err = String;

    fn from_str(s: &str) -> Result<Environment, String> {
        let bad = || {
            format!(
                "unknown environment '{s}' (expected no-str, sys-str, rand-str or cache-str, each \
                 followed by + for thread randomisation or - without, e.g. sys-str+)"
            )
        };
        let (body, randomise) = match s.trim().strip_suffix('+') {
            Some(body) => (body, true),
            None => (s.trim().strip_suffix('-').ok_or_else(bad)?, false),
        };
        let stress = StressKind::ALL
            .into_iter()
            .find(|k| body == format!("{}-str", k.name()))
            .ok_or_else(bad)?;
        Ok(Environment { stress, randomise })
    }
}

impl Serialize for Environment {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Environment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Environment, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_environment_round_trips_through_its_name() {
        let names: Vec<String> = Environment::all().iter().map(|e| e.to_string()).collect();
        assert_eq!(
            names,
            [
                "no-str-",
                "no-str+",
                "sys-str-",
                "sys-str+",
                "rand-str-",
                "rand-str+",
                "cache-str-",
                "cache-str+"
            ]
        );
        for env in Environment::all() {
            assert_eq!(env.to_string().parse::<Environment>(), Ok(env));
        }
    }

    #[test]
    fn a_name_without_a_sign_or_with_an_unknown_strategy_is_refused() {
        for bad in ["sys-str", "sys+", "foo-str+", "", "+", "sys-str*"] {
            let error = bad.parse::<Environment>().unwrap_err();
            assert!(error.contains("sys-str+"), "{bad}: {error}");
        }
    }

    #[test]
    fn only_no_str_minus_runs_natively() {
        let native: Vec<_> = Environment::all()
            .into_iter()
            .filter(|e| !e.harnessed())
            .collect();
        assert_eq!(native, ["no-str-".parse().unwrap()]);
    }

    #[test]
    fn serialises_as_its_name() {
        let env: Environment = "cache-str+".parse().unwrap();
        assert_eq!(serde_json::to_string(&env).unwrap(), "\"cache-str+\"");
        assert_eq!(
            serde_json::from_str::<Environment>("\"cache-str+\"").unwrap(),
            env
        );
    }
}
