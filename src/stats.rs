//! Statistics for campaign results, as pure functions.
//!
//! A testing environment is judged by how often it exposes an application's weak-memory bug: a
//! count of erroneous runs out of a number of runs. A bare rate hides how much it can be trusted,
//! so every rate here carries a 95% confidence interval (the Wilson score interval, which behaves
//! well at rates near 0 and 1 and at small run counts, where the normal approximation does not).
//! The paper calls an environment *effective* for an application when it exposes the bug in more
//! than 5% of runs; [`Rate::is_effective`] applies that threshold.
//!
//! A check or a stability check that sees no error at all says nothing by its rate (0%), but its
//! run count does: [`ZeroErrorBound`] states the per-run error rate the runs rule out, by the rule
//! of three and by the exact (Clopper–Pearson) one-sided bound.

use serde::{Deserialize, Serialize};
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

/// The confidence level of [`ZeroErrorBound`]: one-sided 95%.
pub const ZERO_ERROR_ALPHA: f64 = 0.05;

/// The exact (Clopper–Pearson) one-sided upper confidence bound on the per-trial rate of an
/// event that did not happen in `trials` independent trials: the rate `p` at which `trials`
/// trials without it have probability `alpha`, `1 − alpha^(1/trials)`. It is 1 (nothing is ruled
/// out) without trials.
pub fn zero_event_upper_bound(trials: u64, alpha: f64) -> f64 {
    if trials == 0 {
        return 1.0;
    }
    // 1 − exp(ln(alpha) / n), without the cancellation of `1 - alpha.powf(1 / n)` at large n.
    -(alpha.ln() / trials as f64).exp_m1()
}

/// The rule of three: `3 / trials`, the usual approximation of the 95% bound above (−ln 0.05 ≈
/// 3), capped at 1.
pub fn rule_of_three(trials: u64) -> f64 {
    if trials == 0 {
        return 1.0;
    }
    (3.0 / trials as f64).min(1.0)
}

/// What a series of runs without an error supports: at 95% confidence, the error rate per run
/// is below `rule_of_three` (3/N) and below `upper_95` (1 − 0.05^(1/N)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ZeroErrorBound {
    pub runs: u64,
    /// Always 0: the bounds are for runs without an error.
    pub errors: u64,
    /// The exact one-sided 95% upper bound, `1 − 0.05^(1/runs)`.
    pub upper_95: f64,
    /// `3 / runs`.
    pub rule_of_three: f64,
}

impl ZeroErrorBound {
    /// The bounds after `errors` errors in `runs` runs: `None` unless there were runs and none
    /// of them erred.
    pub fn of(runs: u64, errors: u64) -> Option<ZeroErrorBound> {
        (runs > 0 && errors == 0).then(|| ZeroErrorBound {
            runs,
            errors,
            upper_95: zero_event_upper_bound(runs, ZERO_ERROR_ALPHA),
            rule_of_three: rule_of_three(runs),
        })
    }
}

/// `0 errors in 10000 runs: error rate < 3.000e-4 at 95% confidence (rule of three, 3/N; exact
/// one-sided bound 1 - 0.05^(1/N) = 2.995e-4)`.
impl fmt::Display for ZeroErrorBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "0 errors in {} runs: error rate < {:.3e} at 95% confidence (rule of three, 3/N; \
             exact one-sided bound 1 - 0.05^(1/N) = {:.3e})",
            self.runs, self.rule_of_three, self.upper_95
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

/// A chi-square statistic and its degrees of freedom; independent ones add up.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ChiSquare {
    pub statistic: f64,
    pub df: u64,
}

impl ChiSquare {
    /// The sum of two independent statistics.
    pub fn plus(self, other: ChiSquare) -> ChiSquare {
        ChiSquare {
            statistic: self.statistic + other.statistic,
            df: self.df + other.df,
        }
    }

    /// The probability of a statistic at least this large if the null hypothesis holds; 1 with
    /// no degrees of freedom (nothing was tested).
    pub fn p_value(&self) -> f64 {
        chi_square_survival(self.statistic, self.df)
    }
}

/// Pearson's chi-square test that groups of trials share one success rate: `groups` are
/// `(successes, trials)`. Groups without trials are left out; when no group or every group
/// succeeded never (or always), nothing can differ and the statistic has no degrees of freedom.
pub fn homogeneity(groups: &[(u64, u64)]) -> ChiSquare {
    let used: Vec<(f64, f64)> = groups
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|&(k, n)| (k.min(n) as f64, n as f64))
        .collect();
    let (k, n) = used
        .iter()
        .fold((0.0, 0.0), |(a, b), (k, n)| (a + k, b + n));
    if used.len() < 2 || k == 0.0 || k == n {
        return ChiSquare::default();
    }
    let p = k / n;
    let statistic = used
        .iter()
        .map(|(k, n)| {
            let expected = n * p;
            (k - expected).powi(2) / (expected * (1.0 - p))
        })
        .sum();
    ChiSquare {
        statistic,
        df: used.len() as u64 - 1,
    }
}

/// `P(X ≥ x)` for a chi-square variable with `df` degrees of freedom: the regularised upper
/// incomplete gamma function `Q(df / 2, x / 2)`.
pub fn chi_square_survival(x: f64, df: u64) -> f64 {
    if df == 0 {
        return 1.0;
    }
    if x <= 0.0 {
        return 1.0;
    }
    upper_gamma_regularised(df as f64 / 2.0, x / 2.0)
}

/// `Q(a, x)`: a power series below `x = a + 1`, a continued fraction (modified Lentz) above.
fn upper_gamma_regularised(a: f64, x: f64) -> f64 {
    const EPS: f64 = 1e-14;
    const MAX_TERMS: usize = 10_000;
    let log_prefactor = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        let (mut term, mut sum, mut denom) = (1.0 / a, 1.0 / a, a);
        for _ in 0..MAX_TERMS {
            denom += 1.0;
            term *= x / denom;
            sum += term;
            if term.abs() < sum.abs() * EPS {
                break;
            }
        }
        return (1.0 - sum * log_prefactor.exp()).clamp(0.0, 1.0);
    }
    let tiny = 1e-300;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / tiny;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..MAX_TERMS {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < tiny {
            d = tiny;
        }
        c = b + an / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < EPS {
            break;
        }
    }
    (h * log_prefactor.exp()).clamp(0.0, 1.0)
}

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, nine coefficients; about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    // The published coefficients, digits as given.
    #[allow(clippy::excessive_precision)]
    const C: [f64; 9] = [
        0.999_999_999_999_809_93,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_13,
        -176.615_029_162_140_59,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_571_6e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + G + 0.5;
    let series = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |acc, (i, c)| acc + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + series.ln()
}

/// A median with a distribution-free confidence interval from order statistics.
///
/// For `n` values the interval is `[x(k), x(n+1-k)]` (sorted, 1-based) with the largest `k`
/// whose two-sided binomial(n, ½) tail stays within `1 - confidence`: it covers the median of any
/// continuous distribution with probability `coverage >= confidence`, whatever its shape. With
/// fewer than 6 values no such `k` exists at 95%; the interval is then `[min, max]` and
/// `coverage` says how much less it holds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MedianInterval {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// Values counted.
    pub n: usize,
    /// The interval's exact coverage (normal approximation above 1,000 values).
    pub coverage: f64,
}

impl MedianInterval {
    /// Half the interval's width.
    pub fn half_width(&self) -> f64 {
        (self.high - self.low) / 2.0
    }
}

/// The median of `values` with its order-statistic interval at `confidence` (e.g. 0.95), or
/// `None` when there are no values. NaNs are ignored.
pub fn median_interval(values: &[f64], confidence: f64) -> Option<MedianInterval> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    let median = median(&mut sorted)?;
    let n = sorted.len();
    let (k, coverage) = order_statistic_rank(n, confidence);
    Some(MedianInterval {
        median,
        low: sorted[k - 1],
        high: sorted[n - k],
        n,
        coverage,
    })
}

/// The 1-based rank `k` of the lower bound of the median's interval for `n >= 1` values, and the
/// interval's coverage `1 - 2 P(B <= k - 1)` with `B ~ binomial(n, ½)`.
fn order_statistic_rank(n: usize, confidence: f64) -> (usize, f64) {
    let alpha_half = (1.0 - confidence) / 2.0;
    if n > 1000 {
        // Normal approximation of the binomial: k = n/2 - z sqrt(n)/2, rounded down.
        let z = normal_quantile(1.0 - alpha_half);
        let k = ((n as f64 / 2.0 - z * (n as f64).sqrt() / 2.0).floor() as usize).max(1);
        return (k, confidence);
    }
    // P(B <= j) for j = 0, 1, …, accumulated in log space (2^-n underflows for large n).
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, j)
    let mut cdf = 0.0;
    let mut k = 1;
    for j in 0..n {
        cdf += (ln_choose + ln_half_n).exp();
        // `cdf` is P(B <= j): rank j + 1 leaves that much out at each end.
        if cdf > alpha_half {
            break;
        }
        k = j + 1;
        ln_choose += ((n - j) as f64).ln() - ((j + 1) as f64).ln();
    }
    let k = k.min(n.div_ceil(2));
    (k, (1.0 - 2.0 * binomial_half_cdf(n, k - 1)).max(0.0))
}

/// `P(B <= j)` for `B ~ binomial(n, ½)`.
fn binomial_half_cdf(n: usize, j: usize) -> f64 {
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let ln_choose = |i: usize| {
        ln_gamma(n as f64 + 1.0) - ln_gamma(i as f64 + 1.0) - ln_gamma((n - i) as f64 + 1.0)
    };
    (0..=j.min(n))
        .map(|i| (ln_choose(i) + ln_half_n).exp())
        .sum::<f64>()
        .min(1.0)
}

/// The standard normal quantile (Acklam's rational approximation, relative error below
/// 1.2e-9), for `0 < p < 1`.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// The overhead of one variant over a baseline, paired by repetition: the median of the ratios
/// `fenced / baseline` with its order-statistic interval (a sign-test interval, exact and free
/// of any assumption about the noise's shape). Pairs with a non-positive baseline are skipped.
pub fn paired_ratio_interval(pairs: &[(f64, f64)], confidence: f64) -> Option<MedianInterval> {
    let ratios: Vec<f64> = pairs
        .iter()
        .filter(|(baseline, _)| *baseline > 0.0)
        .map(|(baseline, fenced)| fenced / baseline)
        .collect();
    median_interval(&ratios, confidence)
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
    fn zero_event_bound_matches_clopper_pearson_known_values() {
        // 1 − 0.05^(1/n), computed independently to 12 digits.
        for (n, bound) in [
            (1, 0.95),
            (10, 0.258_865_550_893),
            (100, 0.029_513_049_607),
            (1000, 0.002_991_249_545),
            (10_000, 0.000_299_528_359_777),
        ] {
            let got = zero_event_upper_bound(n, ZERO_ERROR_ALPHA);
            assert!((got - bound).abs() < 1e-12, "n {n}: {got}");
        }
        // Exactly: after n clean runs, a rate at the bound leaves them a 5% chance.
        let p = zero_event_upper_bound(300, 0.05);
        assert!(((1.0 - p).powi(300) - 0.05).abs() < 1e-12);
        assert_eq!(zero_event_upper_bound(0, 0.05), 1.0);
    }

    #[test]
    fn the_rule_of_three_is_a_little_above_the_exact_bound() {
        assert_eq!(rule_of_three(10_000), 3e-4);
        assert_eq!(rule_of_three(2), 1.0);
        assert_eq!(rule_of_three(0), 1.0);
        for n in [10, 100, 10_000, 1_000_000] {
            let exact = zero_event_upper_bound(n, ZERO_ERROR_ALPHA);
            assert!(exact < rule_of_three(n), "n {n}");
            assert!(rule_of_three(n) / exact < 1.2, "n {n}");
        }
    }

    #[test]
    fn a_zero_error_bound_exists_only_for_runs_without_an_error() {
        let bound = ZeroErrorBound::of(10_000, 0).unwrap();
        assert_eq!((bound.runs, bound.errors), (10_000, 0));
        assert_eq!(bound.rule_of_three, 3e-4);
        assert!((bound.upper_95 - 2.995_28e-4).abs() < 1e-9);
        assert_eq!(ZeroErrorBound::of(10_000, 1), None);
        assert_eq!(ZeroErrorBound::of(0, 0), None);
    }

    #[test]
    fn a_zero_error_bound_says_what_the_runs_support() {
        assert_eq!(
            ZeroErrorBound::of(10_000, 0).unwrap().to_string(),
            "0 errors in 10000 runs: error rate < 3.000e-4 at 95% confidence (rule of three, \
             3/N; exact one-sided bound 1 - 0.05^(1/N) = 2.995e-4)"
        );
        let json = serde_json::to_value(ZeroErrorBound::of(100, 0).unwrap()).unwrap();
        assert_eq!(json["runs"], 100);
        assert_eq!(json["errors"], 0);
        assert_eq!(json["rule_of_three"], 0.03);
        assert!((json["upper_95"].as_f64().unwrap() - 0.0295).abs() < 1e-4);
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

    #[test]
    fn ln_gamma_matches_factorials() {
        for (n, factorial) in [(1u32, 1.0f64), (2, 1.0), (5, 24.0), (11, 3_628_800.0)] {
            assert!((ln_gamma(n as f64) - factorial.ln()).abs() < 1e-10, "{n}");
        }
        let half = std::f64::consts::PI.sqrt().ln();
        assert!((ln_gamma(0.5) - half).abs() < 1e-10);
    }

    #[test]
    fn chi_square_tail_matches_tables() {
        // The 5% and 1% critical values of common tables.
        for (x, df, p) in [
            (3.841_459, 1, 0.05),
            (6.634_897, 1, 0.01),
            (18.307_038, 10, 0.05),
            (124.342_113, 100, 0.05),
        ] {
            let got = chi_square_survival(x, df);
            assert!((got - p).abs() < 1e-6, "x {x} df {df}: {got}");
        }
        // Two degrees of freedom: exactly exp(-x / 2).
        assert!((chi_square_survival(5.0, 2) - (-2.5f64).exp()).abs() < 1e-12);
        assert_eq!(chi_square_survival(0.0, 3), 1.0);
        assert_eq!(chi_square_survival(4.0, 0), 1.0);
        assert!(chi_square_survival(500.0, 3) < 1e-100);
    }

    #[test]
    fn homogeneity_tells_equal_rates_from_different_ones() {
        let same = homogeneity(&[(50, 1000), (52, 1000), (48, 1000), (50, 1000)]);
        assert_eq!(same.df, 3);
        assert!(same.p_value() > 0.5, "{same:?}");
        let different = homogeneity(&[(50, 1000), (150, 1000)]);
        assert!(different.p_value() < 1e-9, "{different:?}");
        // Hand-computed: pooled p = 0.1, (10 - 5)^2 / 4.5 + (0 - 5)^2 / 4.5.
        let hand = homogeneity(&[(10, 50), (0, 50)]);
        assert!((hand.statistic - 50.0 / 4.5).abs() < 1e-9);
        // Nothing to compare: no weak outcome anywhere, or a single group.
        assert_eq!(homogeneity(&[(0, 10), (0, 10)]).df, 0);
        assert_eq!(homogeneity(&[(3, 10)]).p_value(), 1.0);
        assert_eq!(homogeneity(&[(3, 10), (7, 0)]).df, 0);
        let sum = same.plus(different);
        assert_eq!(sum.df, 4);
    }

    #[test]
    fn median_interval_ranks_match_the_binomial_tables() {
        // n = 10: k = 2 (P(B <= 1) = 11/1024 = 0.0107 <= 0.025; P(B <= 2) = 0.0547 > 0.025).
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        let m = median_interval(&values, 0.95).unwrap();
        assert_eq!((m.median, m.low, m.high), (5.5, 2.0, 9.0));
        assert!((m.coverage - (1.0 - 2.0 * 11.0 / 1024.0)).abs() < 1e-12);
        // n = 100: k = 40 (the textbook interval x(40)..x(61)).
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let m = median_interval(&values, 0.95).unwrap();
        assert_eq!((m.low, m.high), (40.0, 61.0));
        assert!(m.coverage >= 0.95 && m.coverage < 0.97, "{}", m.coverage);
    }

    #[test]
    fn median_interval_of_few_values_is_the_range_with_its_true_coverage() {
        let m = median_interval(&[3.0, 1.0, 2.0, 5.0, 4.0], 0.95).unwrap();
        assert_eq!((m.median, m.low, m.high), (3.0, 1.0, 5.0));
        assert!((m.coverage - (1.0 - 2.0 / 32.0)).abs() < 1e-12);
        let one = median_interval(&[7.0], 0.95).unwrap();
        assert_eq!((one.low, one.high, one.coverage), (7.0, 7.0, 0.0));
        assert_eq!(median_interval(&[], 0.95), None);
    }

    #[test]
    fn median_interval_covers_the_true_median_about_as_often_as_it_says() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let trials = 2000;
        let mut covered = 0;
        for _ in 0..trials {
            // Exponential(1): skewed, median ln 2.
            let values: Vec<f64> = (0..25).map(|_| -(1.0 - rng.random::<f64>()).ln()).collect();
            let m = median_interval(&values, 0.95).unwrap();
            covered +=
                usize::from(m.low <= std::f64::consts::LN_2 && std::f64::consts::LN_2 <= m.high);
        }
        let rate = covered as f64 / trials as f64;
        // n = 25: k = 8, exact coverage 0.9567; 2000 trials put the rate within ±0.015.
        assert!((0.94..0.975).contains(&rate), "{rate}");
    }

    #[test]
    fn large_samples_use_the_normal_approximation_without_a_jump() {
        let at = |n: usize| order_statistic_rank(n, 0.95).0 as f64 / n as f64;
        assert!(
            (at(1000) - at(1001)).abs() < 0.002,
            "{} {}",
            at(1000),
            at(1001)
        );
        assert_eq!(order_statistic_rank(10_000, 0.95).0, 4902);
    }

    #[test]
    fn normal_quantile_known_values() {
        assert!((normal_quantile(0.975) - Z95).abs() < 1e-8);
        assert!(normal_quantile(0.5).abs() < 1e-12);
        assert!((normal_quantile(0.001) + 3.090232306167813).abs() < 1e-8);
    }

    #[test]
    fn paired_ratios_are_medians_of_per_pair_ratios() {
        let pairs = [(1.0, 2.0), (2.0, 4.2), (4.0, 7.6), (0.0, 3.0)];
        let m = paired_ratio_interval(&pairs, 0.95).unwrap();
        assert_eq!(m.n, 3);
        assert!((m.median - 2.0).abs() < 1e-12);
        assert_eq!((m.low, m.high), (1.9, 2.1));
    }
}
