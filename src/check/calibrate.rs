//! Calibrating stress: how many stress-loop iterations make stress last about `factor` times
//! as long as the application's kernel (the paper's set-up uses 10×).
//!
//! The search is a pure function over a measurement, so it is tested without a backend: measure
//! the kernel with stressing blocks that do nothing, then double the iterations until the kernel
//! lasts `factor` times as long (stress then dominates, and duration grows linearly with the
//! iterations), and scale the last count to the target.

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
    /// The measurements made: (iterations, duration).
    pub measured: Vec<(u32, f64)>,
}

/// Finds the iteration count at which `measure(iterations)` reaches `factor` times
/// `measure(0)`, doubling from 1 up to `max`.
pub fn calibrate<E>(
    factor: f64,
    max: u32,
    mut measure: impl FnMut(u32) -> Result<f64, E>,
) -> Result<Calibration, E> {
    let base = measure(0)?;
    let target = factor * base;
    let mut measured = vec![(0, base)];
    let mut k = 1u32;
    loop {
        let duration = measure(k)?;
        measured.push((k, duration));
        if duration >= target || k >= max {
            let iterations = if duration >= target && duration > 0.0 {
                (f64::from(k) * target / duration).ceil() as u32
            } else {
                max
            };
            return Ok(Calibration {
                iterations: iterations.clamp(1, max),
                base,
                measured,
            });
        }
        k = k.saturating_mul(2).min(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel lasting `app` alone, with stress costing `per_iteration` per iteration, the two
    /// running at once.
    fn parallel(app: f64, per_iteration: f64) -> impl FnMut(u32) -> Result<f64, ()> {
        move |k| Ok(app.max(1.0 + per_iteration * f64::from(k)))
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
        let c = calibrate(10.0, 64, |_| Ok::<f64, ()>(5.0)).unwrap();
        assert_eq!(c.iterations, 64);
        assert_eq!(c.measured.last().unwrap().0, 64);
    }

    #[test]
    fn a_failed_measurement_ends_calibration() {
        let mut calls = 0;
        let result = calibrate(10.0, 64, |k| {
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
}
