//! Calibrating stress: how many stress-loop iterations make stress last about `factor` times
//! as long as the application's kernel (the paper's set-up uses 10×).
//!
//! The search is a pure function over a measurement, so it is tested without a backend: measure
//! the kernel with stressing blocks that do nothing, then double the iterations until the kernel
//! lasts `factor` times as long (stress then dominates, and duration grows linearly with the
//! iterations), and scale the last count to the target.
//!
//! Scaling assumes that linear growth, and a GPU does not always show it: on an H100, ct-octree
//! lasted about 2.1 ms at 1, 2 and 4 iterations and 3.5 s at 8, so scaling 8 down to the 27.8 ms
//! target gave 1 iteration, a count already measured to fall far short. The scaled count is
//! therefore used only when it lies above the last count measured below the target; otherwise
//! the search bisects, in whole iterations, between that count and the first count that reached
//! the target, and returns the smallest count measured to reach it.
//!
//! A count's duration is the median of three runs, but two runs on the same side of the target
//! already decide whether the count reaches it ([`count_duration`]): on a cliff, a third run of
//! seconds is saved at each count.

use serde::{Deserialize, Serialize};

/// The most iterations calibration will try.
pub const MAX_ITERATIONS: u32 = 1 << 24;

/// The result of a calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub iterations: u32,
    /// The kernel's duration with idle stressing blocks (backend units: seconds on a GPU,
    /// instructions of the busiest thread on the simulator).
    pub base: f64,
    /// The measurements made, in the order made: (iterations, duration).
    pub measured: Vec<(u32, f64)>,
}

/// Finds the iteration count at which `measure(iterations, target)` reaches `factor` times
/// `measure(0, None)`, doubling from 1 up to `max`, then scaling the first count that reaches it
/// down to the target, or bisecting when the scaled count would not lie above the last count
/// measured below it (see the module doc). Every count after the first is measured knowing the
/// target, which [`count_duration`] uses to make fewer runs.
pub fn calibrate<E>(
    factor: f64,
    max: u32,
    mut measure: impl FnMut(u32, Option<f64>) -> Result<f64, E>,
) -> Result<Calibration, E> {
    let base = measure(0, None)?;
    let target = factor * base;
    let mut measure = |k| measure(k, Some(target));
    let mut measured = vec![(0, base)];
    // The last count measured below the target (the doubling stops at the first that reaches it).
    let mut below = 0u32;
    let mut k = 1u32;
    loop {
        let duration = measure(k)?;
        measured.push((k, duration));
        if duration >= target || k >= max {
            let iterations = if duration >= target && duration > 0.0 {
                let estimate = ((f64::from(k) * target / duration).ceil() as u32).clamp(1, max);
                if estimate > below {
                    estimate
                } else {
                    bisect(below, k, target, &mut measure, &mut measured)?
                }
            } else {
                max
            };
            return Ok(Calibration {
                iterations: iterations.clamp(1, max),
                base,
                measured,
            });
        }
        below = k;
        k = k.saturating_mul(2).min(max);
    }
}

/// A count's duration from up to three runs (`run(i)` for run `i`): their median, except that
/// two runs on the same side of `target` decide it, and the one nearer the target stands for it
/// (a third could not move the median across the target; on a GPU, a run past a cliff lasted
/// 3.5 s). Without a target (the idle-stress count that sets it) all three run.
pub fn count_duration<E>(
    target: Option<f64>,
    mut run: impl FnMut(u64) -> Result<f64, E>,
) -> Result<f64, E> {
    let (a, b) = (run(0)?, run(1)?);
    if let Some(target) = target {
        if a >= target && b >= target {
            return Ok(a.min(b));
        }
        if a < target && b < target {
            return Ok(a.max(b));
        }
    }
    let mut three = [a, b, run(2)?];
    three.sort_by(f64::total_cmp);
    Ok(three[1])
}

/// The smallest count in `lo + 1..=hi` measured to reach `target`, by bisection, where `lo` was
/// measured below it and `hi` measured to reach it; every measurement is appended to `measured`.
fn bisect<E>(
    mut lo: u32,
    mut hi: u32,
    target: f64,
    measure: &mut impl FnMut(u32) -> Result<f64, E>,
    measured: &mut Vec<(u32, f64)>,
) -> Result<u32, E> {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let duration = measure(mid)?;
        measured.push((mid, duration));
        if duration >= target {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel lasting `app` alone, with stress costing `per_iteration` per iteration, the two
    /// running at once.
    fn parallel(app: f64, per_iteration: f64) -> impl FnMut(u32, Option<f64>) -> Result<f64, ()> {
        move |k, _| Ok(app.max(1.0 + per_iteration * f64::from(k)))
    }

    /// What [`count_duration`] decides for `target` from runs answering `durations` in turn,
    /// and how many runs it made.
    fn count_of(target: Option<f64>, durations: &[f64]) -> (Result<f64, ()>, usize) {
        let mut made = 0;
        let duration = count_duration(target, |i: u64| {
            made += 1;
            Ok(durations[i as usize])
        });
        (duration, made)
    }

    #[test]
    fn two_runs_past_the_target_decide_a_count_without_a_third() {
        assert_eq!(count_of(Some(0.0278), &[3.5, 3.6, 0.0]), (Ok(3.5), 2));
        assert_eq!(
            count_of(Some(0.0278), &[0.002, 0.0021, 9.0]),
            (Ok(0.0021), 2)
        );
    }

    #[test]
    fn runs_astride_the_target_or_without_one_take_the_median_of_three() {
        assert_eq!(count_of(Some(0.0278), &[0.01, 0.05, 0.03]), (Ok(0.03), 3));
        assert_eq!(count_of(None, &[5.0, 1.0, 3.0]), (Ok(3.0), 3));
    }

    #[test]
    fn stress_is_scaled_to_ten_times_the_kernel() {
        let c = calibrate(10.0, MAX_ITERATIONS, parallel(1000.0, 7.0)).unwrap();
        // 10,000 / 7 ≈ 1429 iterations; the scaled estimate lands within one doubling step's
        // rounding of it.
        let stress = 1.0 + 7.0 * f64::from(c.iterations);
        assert!((9_500.0..11_000.0).contains(&stress), "{c:?}");
        assert_eq!(c.base, 1000.0);
        assert_eq!(c.measured.first(), Some(&(0, 1000.0)));
    }

    #[test]
    fn expensive_stress_gets_one_iteration() {
        let c = calibrate(10.0, MAX_ITERATIONS, parallel(10.0, 1e6)).unwrap();
        assert_eq!(c.iterations, 1);
    }

    #[test]
    fn stress_that_never_reaches_the_target_stops_at_the_maximum() {
        let c = calibrate(10.0, 64, |_, _| Ok::<f64, ()>(5.0)).unwrap();
        assert_eq!(c.iterations, 64);
        assert_eq!(c.measured.last().unwrap().0, 64);
    }

    #[test]
    fn a_failed_measurement_ends_calibration() {
        let mut calls = 0;
        let result = calibrate(10.0, 64, |k, _| {
            calls += 1;
            if k == 4 {
                Err("hung")
            } else {
                Ok(1.0)
            }
        });
        assert_eq!(result, Err("hung"));
        assert_eq!(calls, 4); // 0, 1, 2, 4
    }

    /// The counts measured, in the order made.
    fn counts(c: &Calibration) -> Vec<u32> {
        c.measured.iter().map(|&(k, _)| k).collect()
    }

    #[test]
    fn a_cliff_between_doublings_is_bisected_not_scaled_below_a_short_count() {
        // ct-octree on an H100: about 2.1 ms up to 4 iterations, 3.5 s at 8; the cliff here lies
        // at 6. Scaling 8 down to the 27.8 ms target would give 1, measured far short of it.
        let base = 0.00278;
        let c = calibrate(10.0, MAX_ITERATIONS, |k, _| {
            Ok::<f64, ()>(match k {
                0 => base,
                1..=5 => 0.0021,
                _ => 3.5,
            })
        })
        .unwrap();
        assert_eq!(c.iterations, 6, "{c:?}");
        assert_eq!(counts(&c), [0, 1, 2, 4, 8, 6, 5]);
        // The count returned was measured to reach the target, and lies above every count
        // measured below it.
        let target = 10.0 * base;
        assert!(c.measured.contains(&(6, 3.5)), "{c:?}");
        for &(k, d) in &c.measured {
            if d < target {
                assert!(k < c.iterations, "{k} measured {d} < {target}: {c:?}");
            }
        }
    }

    #[test]
    fn a_cliff_at_the_doubling_point_bisects_up_to_it() {
        let c = calibrate(10.0, MAX_ITERATIONS, |k, _| {
            Ok::<f64, ()>(if k < 8 { 1.0 } else { 1000.0 })
        })
        .unwrap();
        assert_eq!(c.iterations, 8, "{c:?}");
        assert_eq!(counts(&c), [0, 1, 2, 4, 8, 6, 7]);
    }

    #[test]
    fn only_the_first_count_is_measured_without_the_target() {
        let mut targets = Vec::new();
        calibrate(10.0, 4, |k, target| {
            targets.push(target);
            Ok::<f64, ()>(if k == 0 { 2.0 } else { 1.0 })
        })
        .unwrap();
        assert_eq!(targets, [None, Some(20.0), Some(20.0), Some(20.0)]);
    }

    #[test]
    fn linear_growth_is_scaled_without_further_measurements() {
        let c = calibrate(10.0, MAX_ITERATIONS, parallel(1000.0, 7.0)).unwrap();
        // 1 + 7k first reaches 10,000 at k = 2048 (14,337); scaled: ceil(2048 × 10,000 / 14,337).
        assert_eq!(c.iterations, 1429, "{c:?}");
        let doublings: Vec<u32> = std::iter::once(0).chain((0..=11).map(|i| 1 << i)).collect();
        assert_eq!(counts(&c), doublings);
    }
}
