//! The measurement of one app: warm-up, interleaved timing runs, then energy windows.
//!
//! Timing: repetition `i` runs every variant once, in order (no, emp, cons), with the same input
//! seed, so drift, heat and input affect them alike and each fenced run pairs with its baseline.
//! It stops at `--runs`/`--duration`, or earlier when `--target-ci` is met. Energy (where the
//! measurement has a meter): windows of back-to-back repetitions of one variant, at least
//! [`WindowPlan::min_seconds`] and [`WindowPlan::min_repetitions`] long, each after a random idle
//! gap over which idle power is measured, variants interleaved window by window.
//!
//! Every run is handed to the caller's journal as it ends; given the rows of an earlier,
//! interrupted measurement, the driver continues where it stopped.

use super::journal::{CostRow, Phase, WindowPlan};
use super::measure::{EnergyMethod, Measurement, RunSample};
use super::summary::time_overheads;
use super::{CostError, Variant};
use crate::check::spec::run_seed;
use crate::check::Stop;
use crate::stats::MedianInterval;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Confidence of every interval `cost` reports.
pub const CONFIDENCE: f64 = 0.95;
/// `--target-ci` is judged only after this many complete repetitions.
pub const MIN_REPETITIONS_FOR_TARGET: u64 = 10;

/// What to measure of one app.
#[derive(Debug, Clone, PartialEq)]
pub struct CostPlan {
    pub app: String,
    pub variants: Vec<Variant>,
    pub seed: u64,
    /// Uncounted runs of each variant before measuring.
    pub warmup: u64,
    /// When timing stops: repetitions, or seconds of this app's timing phase.
    pub stop: Stop,
    /// Stop timing early once every overhead's interval is at most this half-width (in ratio
    /// units: 0.01 is ±1 percentage point of overhead).
    pub target_ci: Option<f64>,
    pub windows: WindowPlan,
}

/// Where a measurement stands, for a progress bar.
#[derive(Debug, Clone, PartialEq)]
pub struct CostProgress {
    pub app: String,
    pub phase: Phase,
    /// Complete repetitions of the timing phase.
    pub repetitions: u64,
    /// Seconds of the timing phase so far.
    pub elapsed_s: f64,
    /// Energy windows measured, of all planned.
    pub windows: (u32, u32),
    /// The current estimate of each fenced variant's time overhead (ratio over `no`).
    pub overheads: Vec<(Variant, Option<MedianInterval>)>,
    /// Runs discarded so far (post-condition failed, hang, crash).
    pub discarded: u64,
}

/// Why timing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingEnd {
    /// `--runs` or `--duration` reached.
    Stop,
    /// Every overhead's interval met `--target-ci`.
    TargetReached,
}

impl std::fmt::Display for TimingEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimingEnd::Stop => "the repetitions or the duration were reached",
            TimingEnd::TargetReached => "every overhead's interval met --target-ci",
        })
    }
}

/// Measures `plan.app` through `measurement`, continuing after the rows in `done` (this app's
/// rows of an earlier run); every new row goes to `record` as it is made.
pub fn measure_app(
    measurement: &mut dyn Measurement,
    plan: &CostPlan,
    done: &[CostRow],
    record: &mut dyn FnMut(&CostRow) -> Result<(), CostError>,
    progress: &mut dyn FnMut(&CostProgress),
) -> Result<TimingEnd, CostError> {
    warm_up(measurement, plan)?;
    let mut phases = Phases {
        state: State::from_rows(plan, done),
        measurement,
        plan,
        record,
        progress,
    };
    let end = phases.time()?;
    if phases.measurement.energy_method().is_available() {
        phases.energy()?;
    }
    Ok(end)
}

/// The timing and energy phases of one app's measurement, and where their rows go.
struct Phases<'a> {
    measurement: &'a mut dyn Measurement,
    plan: &'a CostPlan,
    state: State,
    record: &'a mut dyn FnMut(&CostRow) -> Result<(), CostError>,
    progress: &'a mut dyn FnMut(&CostProgress),
}

impl Phases<'_> {
    fn time(&mut self) -> Result<TimingEnd, CostError> {
        let resumed_at = self.state.elapsed_s;
        let start = self.measurement.now();
        loop {
            let p = self.state.progress(self.plan, Phase::Time);
            (self.progress)(&p);
            if target_met(self.plan, &p) {
                return Ok(TimingEnd::TargetReached);
            }
            let stopped = match self.plan.stop {
                Stop::Runs(n) => p.repetitions >= n,
                Stop::Seconds(s) => p.elapsed_s >= s,
            };
            if stopped {
                return Ok(TimingEnd::Stop);
            }
            let repetition = self.state.next_repetition(self.plan);
            let seed = repetition_seed(self.plan, Phase::Time, None, repetition);
            for &variant in &self.plan.variants {
                let have = self.state.timing.get(&repetition);
                if have.is_some_and(|by| by.contains_key(&variant)) {
                    continue;
                }
                let sample = self.measurement.run(variant, seed)?;
                let elapsed = resumed_at + (self.measurement.now() - start);
                let elapsed_s = (elapsed * 1e6).round() / 1e6;
                self.keep(timing_row(
                    self.plan, variant, repetition, seed, sample, elapsed_s,
                ))?;
            }
        }
    }

    fn energy(&mut self) -> Result<(), CostError> {
        let n = self.plan.variants.len();
        for window in 0..self.plan.windows.windows {
            // Rotate the order window by window, so no variant always follows the same one.
            for k in 0..n {
                let variant = self.plan.variants[(k + window as usize) % n];
                if self.state.windows.contains(&(variant, window)) {
                    continue;
                }
                (self.progress)(&self.state.progress(self.plan, Phase::Energy));
                for row in measure_window(self.measurement, self.plan, variant, window)? {
                    self.keep(row)?;
                }
            }
        }
        (self.progress)(&self.state.progress(self.plan, Phase::Energy));
        Ok(())
    }

    /// Records a new row and counts it in the state.
    fn keep(&mut self, row: CostRow) -> Result<(), CostError> {
        (self.record)(&row)?;
        self.state.note(&row);
        Ok(())
    }
}

/// What is known of an app's measurement so far.
struct State {
    /// Timing rows by repetition and variant.
    timing: BTreeMap<u64, BTreeMap<Variant, CostRow>>,
    /// Energy windows measured, by variant and window.
    windows: BTreeSet<(Variant, u32)>,
    elapsed_s: f64,
    discarded: u64,
}

impl State {
    fn from_rows(plan: &CostPlan, rows: &[CostRow]) -> State {
        let mut state = State {
            timing: BTreeMap::new(),
            windows: BTreeSet::new(),
            elapsed_s: 0.0,
            discarded: 0,
        };
        for row in rows.iter().filter(|r| r.app == plan.app) {
            state.note(row);
        }
        state
    }

    fn note(&mut self, row: &CostRow) {
        self.discarded += u64::from(!row.passed);
        match row.phase {
            Phase::Time => {
                self.elapsed_s = self.elapsed_s.max(row.elapsed_s);
                self.timing
                    .entry(row.repetition)
                    .or_default()
                    .insert(row.variant, row.clone());
            }
            Phase::Energy => {
                if let Some(w) = row.window {
                    self.windows.insert((row.variant, w));
                }
            }
        }
    }

    /// Repetitions every variant of `plan` has run.
    fn complete(&self, plan: &CostPlan) -> u64 {
        self.timing
            .values()
            .filter(|by| plan.variants.iter().all(|v| by.contains_key(v)))
            .count() as u64
    }

    /// The first repetition some variant has not run.
    fn next_repetition(&self, plan: &CostPlan) -> u64 {
        (0..)
            .find(|i| {
                self.timing
                    .get(i)
                    .is_none_or(|by| !plan.variants.iter().all(|v| by.contains_key(v)))
            })
            .expect("an unbounded range has a first gap")
    }

    fn timing_rows(&self) -> impl Iterator<Item = &CostRow> {
        self.timing.values().flat_map(|by| by.values())
    }

    fn progress(&self, plan: &CostPlan, phase: Phase) -> CostProgress {
        let rows: Vec<&CostRow> = self.timing_rows().collect();
        CostProgress {
            app: plan.app.clone(),
            phase,
            repetitions: self.complete(plan),
            elapsed_s: self.elapsed_s,
            windows: (
                self.windows.len() as u32,
                plan.windows.windows * plan.variants.len() as u32,
            ),
            overheads: time_overheads(&plan.variants, rows.into_iter()),
            discarded: self.discarded,
        }
    }
}

/// The seed of a run: every variant of a repetition (or of a window's n-th run) shares it.
fn repetition_seed(plan: &CostPlan, phase: Phase, window: Option<u32>, index: u64) -> u64 {
    let app = plan.app.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let lane = match (phase, window) {
        (Phase::Time, _) => 0,
        (Phase::Energy, w) => 1 + u64::from(w.unwrap_or(0)),
    };
    run_seed(
        plan.seed ^ app ^ lane.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        index,
    )
}

fn warm_up(measurement: &mut dyn Measurement, plan: &CostPlan) -> Result<(), CostError> {
    for i in 0..plan.warmup {
        for &variant in &plan.variants {
            measurement.run(
                variant,
                repetition_seed(plan, Phase::Time, None, u64::MAX - i),
            )?;
        }
    }
    Ok(())
}

fn timing_row(
    plan: &CostPlan,
    variant: Variant,
    repetition: u64,
    seed: u64,
    sample: RunSample,
    elapsed_s: f64,
) -> CostRow {
    CostRow {
        elapsed_s,
        ..sample_row(plan, variant, Phase::Time, repetition, seed, sample)
    }
}

/// The row of `sample`, a run of `variant` with `seed`, the `repetition` of `phase`: what every
/// row holds, with no window, energy or elapsed time.
fn sample_row(
    plan: &CostPlan,
    variant: Variant,
    phase: Phase,
    repetition: u64,
    seed: u64,
    sample: RunSample,
) -> CostRow {
    CostRow {
        app: plan.app.clone(),
        variant,
        phase,
        repetition,
        window: None,
        seed,
        passed: sample.passed,
        reason: sample.reason,
        duration: sample.duration,
        elapsed_s: 0.0,
        energy_mj: None,
        idle_mw: None,
        window_s: None,
    }
}

/// Whether `--target-ci` is met: every fenced variant's overhead known to the target half-width,
/// at full confidence, after enough repetitions.
fn target_met(plan: &CostPlan, p: &CostProgress) -> bool {
    let Some(target) = plan.target_ci else {
        return false;
    };
    p.repetitions >= MIN_REPETITIONS_FOR_TARGET
        && !p.overheads.is_empty()
        && p.overheads.iter().all(|(_, interval)| {
            interval.is_some_and(|i| i.coverage >= CONFIDENCE && i.half_width() <= target)
        })
}

fn measure_window(
    measurement: &mut dyn Measurement,
    plan: &CostPlan,
    variant: Variant,
    window: u32,
) -> Result<Vec<CostRow>, CostError> {
    let method = measurement.energy_method();
    let gap_seed = repetition_seed(plan, Phase::Energy, Some(window), u64::from(variant as u8));
    let (low, high) = plan.windows.gap_seconds;
    let gap = ChaCha8Rng::seed_from_u64(gap_seed).random_range(low..=high.max(low));
    let idle_mw = idle_power(measurement, &method, gap)?;

    let (t0, e0) = window_start(measurement, &method)?;
    let mut samples = Vec::new();
    let mut power_samples = Vec::new();
    while (samples.len() as u64) < plan.windows.min_repetitions
        || measurement.now() - t0 < plan.windows.min_seconds
    {
        let seed = repetition_seed(plan, Phase::Energy, Some(window), samples.len() as u64);
        samples.push((seed, measurement.run(variant, seed)?));
        if method == EnergyMethod::SampledPower {
            power_samples.push(measurement.power_mw()?);
        }
    }
    let t_end = measurement.now();
    let seconds = t_end - t0;
    let energy_mj = match method {
        EnergyMethod::Counter => {
            // The counter's next step includes the idle time after the last run: take it out.
            let (t1, e1) = next_counter_step(measurement)?;
            (e1 - e0) - idle_mw * (t1 - t_end)
        }
        _ => mean(&power_samples) * seconds,
    };
    let per_run = energy_mj / samples.len() as f64;
    let rows = samples
        .into_iter()
        .enumerate()
        .map(|(i, (seed, sample))| CostRow {
            window: Some(window),
            energy_mj: Some(per_run),
            idle_mw: Some(idle_mw),
            window_s: Some(seconds),
            ..sample_row(plan, variant, Phase::Energy, i as u64, seed, sample)
        });
    Ok(rows.collect())
}

/// How long to wait for the energy counter to move before calling it stuck, seconds (NVML's
/// advances about every 100 ms).
const COUNTER_TIMEOUT: f64 = 2.0;
/// How often to read the counter while waiting for it to move, seconds.
const COUNTER_POLL: f64 = 0.001;

/// Waits, idle, for the energy counter's next step: the time and the reading just after it.
/// Readings at steps are exact to within the polling interval, where readings at arbitrary
/// times are stale by up to a whole step.
fn next_counter_step(measurement: &mut dyn Measurement) -> Result<(f64, f64), CostError> {
    let (start, reading) = (measurement.now(), measurement.energy_mj()?);
    while measurement.now() - start < COUNTER_TIMEOUT {
        measurement.idle(COUNTER_POLL);
        let now = measurement.energy_mj()?;
        if now != reading {
            return Ok((measurement.now(), now));
        }
    }
    Err(CostError::Energy(format!(
        "the energy counter did not move in {COUNTER_TIMEOUT} s (stuck at {reading} mJ)"
    )))
}

/// Idles for about `seconds` and says how much power the idle device drew, milliwatts.
fn idle_power(
    measurement: &mut dyn Measurement,
    method: &EnergyMethod,
    seconds: f64,
) -> Result<f64, CostError> {
    match method {
        EnergyMethod::Counter => {
            let (t0, e0) = next_counter_step(measurement)?;
            measurement.idle(seconds);
            let (t1, e1) = next_counter_step(measurement)?;
            // mJ / s = mW.
            Ok((e1 - e0) / (t1 - t0))
        }
        _ => {
            measurement.idle(seconds);
            measurement.power_mw()
        }
    }
}

/// The start of a window: aligned with a counter step where there is a counter.
fn window_start(
    measurement: &mut dyn Measurement,
    method: &EnergyMethod,
) -> Result<(f64, f64), CostError> {
    match method {
        EnergyMethod::Counter => next_counter_step(measurement),
        _ => Ok((measurement.now(), 0.0)),
    }
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::summary::time_overheads;
    use crate::cost::synthetic::Synthetic;

    fn plan(stop: Stop, target_ci: Option<f64>) -> CostPlan {
        CostPlan {
            app: "made-up".into(),
            variants: Variant::ALL.to_vec(),
            seed: 3,
            warmup: 2,
            stop,
            target_ci,
            windows: WindowPlan {
                windows: 6,
                ..WindowPlan::default()
            },
        }
    }

    fn measure(
        m: &mut dyn Measurement,
        plan: &CostPlan,
        done: &[CostRow],
    ) -> (TimingEnd, Vec<CostRow>, Vec<CostProgress>) {
        let mut rows = Vec::new();
        let mut seen = Vec::new();
        let end = measure_app(
            m,
            plan,
            done,
            &mut |r| {
                rows.push(r.clone());
                Ok(())
            },
            &mut |p| seen.push(p.clone()),
        )
        .unwrap();
        (end, rows, seen)
    }

    fn summary_of(plan: &CostPlan, rows: &[CostRow]) -> crate::cost::AppSummary {
        let meta = crate::cost::journal::tests_meta(plan);
        CostSummary::new(&meta, rows).apps.remove(0)
    }

    use crate::cost::summary::CostSummary;

    #[test]
    fn the_intervals_contain_the_true_overheads_of_time_and_energy() {
        let plan = plan(Stop::Runs(300), None);
        let (end, rows, _) = measure(&mut Synthetic::new(11), &plan, &[]);
        assert_eq!(end, TimingEnd::Stop);
        let app = summary_of(&plan, &rows);
        for (v, truth) in [(Variant::Emp, 1.01), (Variant::Cons, 2.0)] {
            let s = app.variants.iter().find(|s| s.variant == v).unwrap();
            let time = s.time_overhead.unwrap();
            assert!(time.low <= truth && truth <= time.high, "{v} time {time:?}");
            assert_eq!(s.runs, 300);
            assert_eq!(s.windows, 6);
            let energy = s.energy_overhead.unwrap();
            assert!(
                energy.low <= truth && truth <= energy.high,
                "{v} energy {energy:?}"
            );
            assert!(energy.coverage >= CONFIDENCE, "{energy:?}");
        }
        // Idle power is 60 W, read between counter steps.
        let idle = app.variants[0].idle_mw.unwrap();
        assert!((59_500.0..60_500.0).contains(&idle), "{idle}");
        // Net of idle, a run at 300 W costs 240/300 of its gross energy.
        let no = &app.variants[0];
        let ratio = no.net_energy_mj.unwrap().median / no.energy_mj.unwrap().median;
        assert!((0.795..0.805).contains(&ratio), "{ratio}");
    }

    #[test]
    fn target_ci_stops_at_the_first_repetition_that_meets_it() {
        let plan = plan(Stop::Runs(100_000), Some(0.01));
        let (end, rows, _) = measure(&mut Synthetic::new(5), &plan, &[]);
        assert_eq!(end, TimingEnd::TargetReached);
        let timing: Vec<&CostRow> = rows.iter().filter(|r| r.phase == Phase::Time).collect();
        let reps = timing.len() / 3;
        assert!(
            (MIN_REPETITIONS_FOR_TARGET as usize..5000).contains(&reps),
            "{reps}"
        );
        let met = |n: usize| {
            time_overheads(&plan.variants, timing[..3 * n].iter().copied())
                .iter()
                .all(|(_, i)| i.is_some_and(|i| i.coverage >= CONFIDENCE && i.half_width() <= 0.01))
        };
        assert!(met(reps), "stopped before the target was met");
        assert!(!met(reps - 1), "went on after the target was met");
    }

    #[test]
    fn failed_runs_are_discarded_and_counted() {
        let plan = plan(Stop::Runs(400), None);
        let mut m = Synthetic::new(2);
        m.fail_rate = |v| if v == Variant::No { 0.2 } else { 0.0 };
        let (_, rows, seen) = measure(&mut m, &plan, &[]);
        let app = summary_of(&plan, &rows);
        let no = &app.variants[0];
        assert_eq!(no.runs + no.discarded, 400);
        assert!((50..110).contains(&no.discarded), "{}", no.discarded);
        let failed_timing = rows
            .iter()
            .filter(|r| r.phase == Phase::Time && !r.passed)
            .count();
        assert_eq!(failed_timing as u64, no.discarded);
        assert!(seen.last().unwrap().discarded >= no.discarded);
        let cons = app.variants[2].time_overhead.unwrap();
        assert!(cons.low <= 2.0 && 2.0 <= cons.high, "{cons:?}");
    }

    #[test]
    fn an_interrupted_measurement_resumes_without_losing_or_repeating_a_run() {
        let plan = plan(Stop::Runs(50), None);
        let (_, whole, _) = measure(&mut Synthetic::new(9), &plan, &[]);
        // Killed in the middle of repetition 12 (two of its three variants recorded) and in
        // the middle of the energy phase (a window never lands half-written: rows of a window
        // are recorded together).
        for cut in [12 * 3 + 2, 150 + 4 * 300] {
            let cut = cut.min(whole.len() - 1);
            let (_, rest, _) = measure(&mut Synthetic::new(9), &plan, &whole[..cut]);
            let key = |r: &CostRow| (r.phase as u8, r.variant, r.window, r.repetition, r.seed);
            let mut resumed: Vec<_> = whole[..cut].iter().chain(&rest).map(key).collect();
            let mut expected: Vec<_> = whole.iter().map(key).collect();
            resumed.sort();
            expected.sort();
            let timing = |keys: &[(u8, Variant, Option<u32>, u64, u64)]| {
                keys.iter()
                    .filter(|k| k.0 == Phase::Time as u8)
                    .copied()
                    .collect::<Vec<_>>()
            };
            assert_eq!(timing(&resumed), timing(&expected), "cut at {cut}");
            let windows = |keys: &[(u8, Variant, Option<u32>, u64, u64)]| {
                let mut w: Vec<_> = keys.iter().map(|k| (k.0, k.1, k.2)).collect();
                w.dedup();
                w
            };
            assert_eq!(windows(&resumed), windows(&expected), "cut at {cut}");
        }
    }

    #[test]
    fn a_counter_that_does_not_move_is_an_error_not_zero() {
        struct Frozen(Synthetic);
        impl Measurement for Frozen {
            fn time_method(&self) -> crate::cost::TimeMethod {
                self.0.time_method()
            }
            fn energy_method(&self) -> EnergyMethod {
                EnergyMethod::Counter
            }
            fn run(&mut self, v: Variant, seed: u64) -> Result<RunSample, CostError> {
                self.0.run(v, seed)
            }
            fn energy_mj(&mut self) -> Result<f64, CostError> {
                Ok(1234.0)
            }
            fn power_mw(&mut self) -> Result<f64, CostError> {
                self.0.power_mw()
            }
            fn now(&self) -> f64 {
                self.0.now()
            }
            fn idle(&mut self, s: f64) {
                self.0.idle(s)
            }
        }
        let plan = plan(Stop::Runs(5), None);
        let e = measure_app(
            &mut Frozen(Synthetic::new(1)),
            &plan,
            &[],
            &mut |_| Ok(()),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("did not move in 2 s"), "{e}");
    }
}
