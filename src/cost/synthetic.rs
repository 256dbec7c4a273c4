//! A made-up measurement with known costs, for testing the driver and its statistics.
//!
//! Each variant costs a known multiple of the baseline; each repetition's input scales every
//! variant alike (that is what pairing removes), and each run adds its own multiplicative noise.
//! Time is virtual, so five-second energy windows take no time in a test; the energy counter
//! integrates a busy and an idle power and, like NVML's, only advances every 100 ms.

use super::measure::{EnergyMethod, Measurement, RunSample, TimeMethod};
use super::{CostError, Variant};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How often the made-up energy counter advances, in seconds (NVML's does about every 100 ms).
const COUNTER_PERIOD: f64 = 0.1;

/// Made-up costs and a virtual clock.
#[derive(Debug, Clone)]
pub struct Synthetic {
    /// The baseline's kernel time, seconds.
    pub base_seconds: f64,
    /// Each variant's true cost over the baseline (`no` is 1).
    pub factor: fn(Variant) -> f64,
    /// Standard deviation of each run's log-normal noise.
    pub noise: f64,
    /// Probability that a run of each variant fails its post-condition.
    pub fail_rate: fn(Variant) -> f64,
    /// Board power while idle and while running, watts.
    pub idle_watts: f64,
    pub busy_watts: f64,
    rng: ChaCha8Rng,
    clock: f64,
    energy_mj: f64,
    counter_mj: f64,
}

impl Synthetic {
    /// `emp` costs 1.01×, `cons` 2.0×, with 5% noise, nothing failing.
    pub fn new(seed: u64) -> Synthetic {
        Synthetic {
            base_seconds: 0.02,
            factor: |v| match v {
                Variant::No => 1.0,
                Variant::Emp => 1.01,
                Variant::Cons => 2.0,
            },
            noise: 0.05,
            fail_rate: |_| 0.0,
            idle_watts: 60.0,
            busy_watts: 300.0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            clock: 0.0,
            energy_mj: 0.0,
            counter_mj: 0.0,
        }
    }

    /// Lets `seconds` pass at `watts`, ticking the counter on every period boundary it crosses.
    fn advance(&mut self, mut seconds: f64, watts: f64) {
        while seconds > 0.0 {
            let mut next_tick = ((self.clock / COUNTER_PERIOD).floor() + 1.0) * COUNTER_PERIOD;
            if next_tick <= self.clock {
                // Rounding put the boundary at (or before) the clock: take the one after.
                next_tick += COUNTER_PERIOD;
            }
            let step = (next_tick - self.clock).min(seconds);
            self.clock += step;
            self.energy_mj += watts * step * 1e3;
            seconds -= step;
            if self.clock >= next_tick - 1e-12 {
                self.counter_mj = self.energy_mj;
            }
        }
    }

    fn gaussian(&mut self) -> f64 {
        // Box–Muller.
        let u: f64 = 1.0 - self.rng.random::<f64>();
        let v: f64 = self.rng.random();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

impl Measurement for Synthetic {
    fn time_method(&self) -> TimeMethod {
        TimeMethod::Synthetic
    }

    fn energy_method(&self) -> EnergyMethod {
        EnergyMethod::Counter
    }

    fn run(&mut self, variant: Variant, seed: u64) -> Result<RunSample, CostError> {
        // The input's own size: the same for every variant of a repetition.
        let input = 0.8 + 0.4 * ChaCha8Rng::seed_from_u64(seed).random::<f64>();
        let noise = (self.noise * self.gaussian()).exp();
        let duration = self.base_seconds * (self.factor)(variant) * input * noise;
        let passed = self.rng.random::<f64>() >= (self.fail_rate)(variant);
        self.advance(duration, self.busy_watts);
        Ok(RunSample {
            passed,
            reason: if passed {
                String::new()
            } else {
                "made-up failure".into()
            },
            duration,
        })
    }

    fn energy_mj(&mut self) -> Result<f64, CostError> {
        Ok(self.counter_mj)
    }

    fn power_mw(&mut self) -> Result<f64, CostError> {
        Ok(self.busy_watts * 1e3)
    }

    fn now(&self) -> f64 {
        self.clock
    }

    fn idle(&mut self, seconds: f64) {
        self.advance(seconds, self.idle_watts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_advances_only_every_100_ms() {
        let mut s = Synthetic::new(1);
        s.idle(0.05);
        assert_eq!(s.energy_mj().unwrap(), 0.0);
        s.idle(0.06);
        // 0.1 s at 60 W = 6 J, read at the tick.
        assert!((s.energy_mj().unwrap() - 6000.0).abs() < 1e-6);
        s.idle(0.95);
        assert!((s.energy_mj().unwrap() - 60_000.0).abs() < 1e-6);
    }
}
