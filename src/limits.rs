//! The ranges numeric options may take, in one place.
//!
//! A number from the command line decides how much memory, how many launches and how long a
//! command takes, so each has a range that is checked when it is read, before anything is
//! allocated: a value outside it is bad input (exit 2, the message names the range), never an
//! abort on a huge allocation or a run of 0 checks that passes. The command-line help states
//! each range; tests read them from here.

use std::ops::RangeInclusive;

/// Runs of a check, a campaign cell, a cost measurement or a stability check.
pub const RUNS: RangeInclusive<u64> = 1..=1_000_000_000;
/// Runs per check in harden's first round (I), and launches of `litmus`.
pub const ITERATIONS: RangeInclusive<u64> = 1..=1_000_000_000;
/// Harden's rounds.
pub const ROUNDS: RangeInclusive<i64> = 1..=64;
/// Executions of a litmus test or of a tuning configuration.
pub const EXECUTIONS: RangeInclusive<u64> = 1..=1_000_000_000;
/// Where a litmus test's `y` lies after `x`, in 32-bit words (1: adjacent; 256 KiB). Tuning
/// counts the words between them instead (its distance d is a litmus distance of d + 1).
pub const DISTANCE: RangeInclusive<i64> = 1..=65_536;
/// Distances, locations, patch words and resident threads of a tuning.
pub const TUNE_COUNT: RangeInclusive<i64> = 1..=65_536;
/// Tuning's N: access sequences of 1 to N loads and stores (2^(N+1) − 2 of them).
pub const MAX_SEQUENCE: RangeInclusive<i64> = 1..=10;
/// Tuning's M: spreads 1 to M.
pub const MAX_SPREAD: RangeInclusive<i64> = 1..=1024;
/// Test instances per launch, each in its own blocks and memory (with [`DISTANCE`], at most
/// 1 GiB of test memory).
pub const INSTANCES: RangeInclusive<i64> = 1..=4096;
/// Threads per block (CUDA's limit).
pub const BLOCK_THREADS: RangeInclusive<i64> = 1..=1024;
/// Stress iterations of every stressing thread.
pub const STRESS_ITERATIONS: RangeInclusive<i64> = 0..=1_000_000_000;
/// Stress lasts this many times the app's kernel.
pub const STRESS_FACTOR: RangeInclusive<f64> = 0.01..=1000.0;
/// Simulator thread-instructions per launch before a timeout.
pub const SIM_BUDGET: RangeInclusive<u64> = 1..=1_000_000_000_000;
/// Candidate executions the axiomatic model tries per litmus test before refusing it.
pub const CANDIDATES: RangeInclusive<u64> = 1..=1_000_000_000_000;
/// Worker processes.
pub const JOBS: RangeInclusive<usize> = 1..=256;
/// Uncounted warm-up runs of `cost`.
pub const WARMUP: RangeInclusive<u64> = 0..=1_000_000;
/// Energy windows per variant of `cost`.
pub const WINDOWS: RangeInclusive<i64> = 1..=1000;

/// Reads a decimal number within `range` (not NaN, not infinite).
pub fn parse_f64_in(text: &str, range: &RangeInclusive<f64>) -> Result<f64, String> {
    parse_in(text, range, "a number", " (and not NaN)")
}

/// Reads `--stress-factor`: within [`STRESS_FACTOR`].
pub fn parse_stress_factor(text: &str) -> Result<f64, String> {
    parse_f64_in(text, &STRESS_FACTOR)
}

/// Reads `--jobs`: within [`JOBS`].
pub fn parse_jobs(text: &str) -> Result<usize, String> {
    parse_in(text, &JOBS, "a whole number", "")
}

/// Reads `text` as `what` within `range`; a value out of it is refused with `note` after the
/// range.
fn parse_in<T>(text: &str, range: &RangeInclusive<T>, what: &str, note: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let value: T = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not {what}"))?;
    if !range.contains(&value) {
        return Err(format!(
            "{text} is not in {}..={}{note}",
            range.start(),
            range.end()
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_infinity_and_out_of_range_factors_are_refused() {
        for bad in ["nan", "NaN", "inf", "-1", "0", "1e9", "x"] {
            assert!(parse_stress_factor(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_stress_factor("10"), Ok(10.0));
        assert!(parse_stress_factor("nan")
            .unwrap_err()
            .contains("0.01..=1000"));
    }

    #[test]
    fn jobs_are_counted_from_1() {
        assert!(parse_jobs("0").is_err());
        assert!(parse_jobs("257").is_err());
        assert_eq!(parse_jobs("2"), Ok(2));
    }

    #[test]
    fn the_largest_litmus_memory_is_at_most_1_gib() {
        let words_per_instance = (*DISTANCE.end() as u64 + 1).div_ceil(32) * 32;
        assert!(words_per_instance * 4 * *INSTANCES.end() as u64 <= (1 << 30) + (1 << 20));
    }
}
