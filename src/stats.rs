//! Statistics for campaign results, as pure functions.
//!
//! A testing environment is judged by how often it exposes an application's weak-memory bug: a
//! count of erroneous runs out of a number of runs. A bare rate hides how much it can be trusted,
//! so every rate here carries a 95% confidence interval (the Wilson score interval, which behaves
//! well at rates near 0 and 1 and at small run counts, where the normal approximation does not).
//! The paper calls an environment *effective* for an application when it exposes the bug in more
//! than 5% of runs; [`Rate::is_effective`] applies that threshold.

use serde::Serialize;
use std::fmt;

/// The two-sided standard normal quantile for 95% confidence.
pub const Z95: f64 = 1.959963984540054;

/// The rate of erroneous runs above which an environment is effective for an application.
pub const EFFECTIVE_THRESHOLD: f64 = 0.05;

/// The Wilson score interval for `successes` out of `trials` at normal quantile `z`.
///
/// Returns `(0.0, 1.0)` (nothing is known) when `trials` is 0. Bounds are clamped to `[0, 1]`
/// and are exact at the extremes: the low bound is 0 when there are no successes and the high
/// bound is 1 when every trial succeeded. `successes` above `trials` is counted as `trials`.
pub fn wilson_interval(successes: u64, trials: u64, z: f64) -> (f64, f64) {
    if trials == 0 {
        return (0.0, 1.0);
    }
    let successes = successes.min(trials);
    let n = trials as f64;
    let p = successes as f64 / n;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = z / denominator * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let low = if successes == 0 { 0.0 } else { centre - half };
    let high = if successes == trials {
        1.0
    } else {
        centre + half
    };
    (low.clamp(0.0, 1.0), high.clamp(0.0, 1.0))
}

/// A count out of a number of trials, with its rate and 95% Wilson interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    /// Trials in which the event happened (e.g. runs with an error).
    pub count: u64,
    /// Trials made.
    pub trials: u64,
    /// `count / trials`, or 0 when there were no trials.
    pub rate: f64,
    /// The low bound of the 95% interval.
    pub low: f64,
    /// The high bound of the 95% interval.
    pub high: f64,
}

impl Rate {
    /// The rate of `count` out of `trials`, with its 95% Wilson interval.
    pub fn new(count: u64, trials: u64) -> Rate {
        let rate = if trials == 0 {
            0.0
        } else {
            count as f64 / trials as f64
        };
        let (low, high) = wilson_interval(count, trials, Z95);
        Rate {
            count,
            trials,
            rate,
            low,
            high,
        }
    }

    /// Whether the rate is strictly above [`EFFECTIVE_THRESHOLD`].
    pub fn is_effective(&self) -> bool {
        self.rate > EFFECTIVE_THRESHOLD
    }
}

/// Percentages with two decimals: `3.20% [2.28%, 4.48%]`.
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.2}% [{:.2}%, {:.2}%]",
            self.rate * 100.0,
            self.low * 100.0,
            self.high * 100.0
        )
    }
}

/// The median of `values` (the mean of the middle two for an even count), or `None` if empty.
///
/// Sorts `values` in place, by [`f64::total_cmp`], so NaNs sort to the ends rather than panic.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        Some(values[mid])
    } else {
        Some((values[mid - 1] + values[mid]) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(actual: (f64, f64), expected: (f64, f64)) {
        let ok = (actual.0 - expected.0).abs() < 1e-4 && (actual.1 - expected.1).abs() < 1e-4;
        assert!(ok, "{actual:?} is not within 1e-4 of {expected:?}");
    }

    #[test]
    fn wilson_known_values() {
        assert_close(wilson_interval(0, 10, Z95), (0.0, 0.27753));
        assert_close(wilson_interval(5, 10, Z95), (0.23659, 0.76341));
        assert_close(wilson_interval(10, 10, Z95), (0.72247, 1.0));
        assert_close(wilson_interval(1, 1000, Z95), (0.000177, 0.005643));
        assert_close(wilson_interval(1, 1, Z95), (0.20655, 1.0));
    }

    #[test]
    fn wilson_extremes_are_exact() {
        assert_eq!(wilson_interval(0, 10, Z95).0, 0.0);
        assert_eq!(wilson_interval(10, 10, Z95).1, 1.0);
        assert_eq!(wilson_interval(0, 0, Z95), (0.0, 1.0));
        assert_eq!(wilson_interval(7, 0, Z95), (0.0, 1.0));
    }

    #[test]
    fn wilson_counts_excess_successes_as_all() {
        assert_eq!(wilson_interval(12, 10, Z95), wilson_interval(10, 10, Z95));
    }

    #[test]
    fn wilson_zero_z_is_the_point_estimate() {
        assert_close(wilson_interval(3, 10, 0.0), (0.3, 0.3));
    }

    #[test]
    fn wilson_contains_the_rate_and_narrows_with_trials() {
        let (low_small, high_small) = wilson_interval(5, 100, Z95);
        let (low_big, high_big) = wilson_interval(500, 10_000, Z95);
        assert!(low_small < 0.05 && 0.05 < high_small);
        assert!(low_big < 0.05 && 0.05 < high_big);
        assert!(high_big - low_big < high_small - low_small);
    }

    #[test]
    fn rate_new() {
        let rate = Rate::new(32, 1000);
        assert_eq!((rate.count, rate.trials), (32, 1000));
        assert!((rate.rate - 0.032).abs() < 1e-12);
        assert_close((rate.low, rate.high), (0.022757, 0.044825));
    }

    #[test]
    fn rate_without_trials() {
        let rate = Rate::new(0, 0);
        assert_eq!((rate.rate, rate.low, rate.high), (0.0, 0.0, 1.0));
        assert!(!rate.is_effective());
    }

    #[test]
    fn rate_display() {
        assert_eq!(Rate::new(32, 1000).to_string(), "3.20% [2.28%, 4.48%]");
        assert_eq!(Rate::new(0, 10).to_string(), "0.00% [0.00%, 27.75%]");
        assert_eq!(Rate::new(10, 10).to_string(), "100.00% [72.25%, 100.00%]");
        assert_eq!(Rate::new(0, 0).to_string(), "0.00% [0.00%, 100.00%]");
    }

    #[test]
    fn effective_is_strictly_above_five_percent() {
        assert!(!Rate::new(5, 100).is_effective());
        assert!(Rate::new(6, 100).is_effective());
        assert!(!Rate::new(4, 100).is_effective());
        assert!(Rate::new(1, 1).is_effective());
    }

    #[test]
    fn rate_serialises_its_fields() {
        let json = serde_json::to_value(Rate::new(1, 2)).unwrap();
        assert_eq!(json["count"], 1);
        assert_eq!(json["trials"], 2);
        assert_eq!(json["rate"], 0.5);
        assert!(json["low"].is_f64() && json["high"].is_f64());
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [4.0]), Some(4.0));
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn median_sorts_in_place_and_tolerates_nan() {
        let mut values = [2.0, f64::NAN, 1.0];
        assert_eq!(median(&mut values), Some(2.0));
        assert_eq!(values[0], 1.0);
        assert!(values[2].is_nan());
    }
}
