//! What a cost measurement came to: per app and variant, medians with 95% intervals and the
//! overheads of the fenced variants over `no`; one [`CostSummary`] (serialised as
//! `summary.json`) and its Markdown form (`summary.md`, the numbers behind figure 5).
//!
//! Runtime overheads pair runs by repetition (same input, neighbouring in time); energy overheads
//! pair windows by number (interleaved, so neighbouring in time too). Runs that failed the
//! post-condition are left out of every figure and counted.

use super::driver::CONFIDENCE;
use super::journal::{CostMeta, CostRow, Phase};
use super::measure::{EnergyMethod, TimeMethod};
use super::Variant;
use crate::stats::{median_interval, paired_ratio_interval, MedianInterval};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The whole measurement.
#[derive(Debug, Clone, Serialize)]
pub struct CostSummary {
    pub provenance: String,
    pub seed: u64,
    pub time_method: TimeMethod,
    pub time_unit: &'static str,
    pub energy_method: EnergyMethod,
    pub apps: Vec<AppSummary>,
}

/// One app.
#[derive(Debug, Clone, Serialize)]
pub struct AppSummary {
    pub app: String,
    /// Fences of each variant (`emp`: from which harden result).
    pub fences: BTreeMap<Variant, String>,
    pub variants: Vec<VariantSummary>,
    /// What the figures cannot show, in words: a variant none of whose runs passed (the
    /// baseline's, which leaves no overhead to measure, with what to do).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One variant of one app.
#[derive(Debug, Clone, Serialize)]
pub struct VariantSummary {
    pub variant: Variant,
    /// Timing runs that passed (counted) and that did not (discarded).
    pub runs: u64,
    pub discarded: u64,
    pub time: Option<MedianInterval>,
    /// Over `no`, paired by repetition (absent for `no`).
    pub time_overhead: Option<MedianInterval>,
    /// Energy windows measured.
    pub windows: u64,
    /// Energy per run, millijoules, median over windows (gross, and net of idle power).
    pub energy_mj: Option<MedianInterval>,
    pub net_energy_mj: Option<MedianInterval>,
    pub idle_mw: Option<f64>,
    /// Over `no`, paired by window (gross energy).
    pub energy_overhead: Option<MedianInterval>,
}

/// The time overhead of each fenced variant among `variants`, from timing rows.
pub fn time_overheads<'a>(
    variants: &[Variant],
    rows: impl Iterator<Item = &'a CostRow>,
) -> Vec<(Variant, Option<MedianInterval>)> {
    let by_rep = passing_by_repetition(rows);
    variants
        .iter()
        .filter(|&&v| v != Variant::No)
        .map(|&v| (v, paired_ratio_interval(&pairs(&by_rep, v), CONFIDENCE)))
        .collect()
}

/// Passing timing runs' durations, by repetition and variant.
fn passing_by_repetition<'a>(
    rows: impl Iterator<Item = &'a CostRow>,
) -> BTreeMap<u64, BTreeMap<Variant, f64>> {
    let mut by_rep: BTreeMap<u64, BTreeMap<Variant, f64>> = BTreeMap::new();
    for row in rows.filter(|r| r.phase == Phase::Time && r.passed) {
        by_rep
            .entry(row.repetition)
            .or_default()
            .insert(row.variant, row.duration);
    }
    by_rep
}

/// `(no, variant)` pairs of the keys where both exist.
fn pairs<K: Ord>(
    by_key: &BTreeMap<K, BTreeMap<Variant, f64>>,
    variant: Variant,
) -> Vec<(f64, f64)> {
    by_key
        .values()
        .filter_map(|by| Some((*by.get(&Variant::No)?, *by.get(&variant)?)))
        .collect()
}

/// One energy window: its gross and net energy per run, and the idle power before it.
#[derive(Debug, Clone, Copy)]
struct Window {
    gross_mj: f64,
    net_mj: f64,
    idle_mw: f64,
}

/// Energy windows by window number and variant. Every row of a window carries the window's
/// figures; the count of its rows is its run count.
fn windows<'a>(
    rows: impl Iterator<Item = &'a CostRow>,
) -> BTreeMap<u32, BTreeMap<Variant, Window>> {
    let mut seen: BTreeMap<(u32, Variant), (u64, &CostRow)> = BTreeMap::new();
    for row in rows.filter(|r| r.phase == Phase::Energy && r.window.is_some()) {
        let w = row.window.expect("filtered above");
        seen.entry((w, row.variant)).or_insert((0, row)).0 += 1;
    }
    let mut found: BTreeMap<u32, BTreeMap<Variant, Window>> = BTreeMap::new();
    for ((w, variant), (runs, row)) in seen {
        let (Some(gross_mj), Some(idle_mw), Some(seconds)) =
            (row.energy_mj, row.idle_mw, row.window_s)
        else {
            continue;
        };
        // Idle power over the window's length, shared by its runs: mW × s = mJ.
        let idle_share_mj = idle_mw * seconds / runs as f64;
        found.entry(w).or_default().insert(
            variant,
            Window {
                gross_mj,
                net_mj: gross_mj - idle_share_mj,
                idle_mw,
            },
        );
    }
    found
}

impl CostSummary {
    /// The summary of `rows` measured as `meta` says.
    pub fn new(meta: &CostMeta, rows: &[CostRow]) -> CostSummary {
        let apps = meta
            .apps
            .iter()
            .map(|plan| {
                let app_rows: Vec<&CostRow> =
                    rows.iter().filter(|r| r.app == plan.target.app).collect();
                AppSummary::new(
                    &plan.target.app,
                    &meta.variants,
                    &app_rows,
                    fence_labels(plan),
                )
            })
            .collect();
        CostSummary {
            provenance: meta.provenance.clone(),
            seed: meta.seed,
            time_method: meta.time_method,
            time_unit: meta.time_method.unit(),
            energy_method: meta.energy_method.clone(),
            apps,
        }
    }
}

/// What each variant's fences are, in words.
fn fence_labels(plan: &super::journal::AppPlan) -> BTreeMap<Variant, String> {
    let mut labels = BTreeMap::new();
    labels.insert(
        Variant::No,
        "none (the app's own fences stripped)".to_string(),
    );
    if let Some(emp) = &plan.emp {
        let fences: Vec<String> = emp
            .fences
            .iter()
            .map(|(id, k)| format!("{id}@{k}"))
            .collect();
        labels.insert(
            Variant::Emp,
            format!(
                "{} fence(s) at {} sites {} (from {})",
                emp.fences.len(),
                emp.granularity.name(),
                fences.join(" "),
                emp.source
            ),
        );
    }
    labels.insert(
        Variant::Cons,
        format!(
            "{} × {} (after every memory access)",
            plan.cons_fences, plan.fence_kind
        ),
    );
    labels
}

impl AppSummary {
    fn new(
        app: &str,
        variants: &[Variant],
        rows: &[&CostRow],
        fences: BTreeMap<Variant, String>,
    ) -> AppSummary {
        let by_rep = passing_by_repetition(rows.iter().copied());
        let windows = windows(rows.iter().copied());
        AppSummary {
            app: app.to_string(),
            fences: fences
                .into_iter()
                .filter(|(v, _)| variants.contains(v))
                .collect(),
            variants: variants
                .iter()
                .map(|&v| variant_summary(v, rows, &by_rep, &windows))
                .collect(),
            notes: variants
                .iter()
                .filter_map(|&v| never_passed(v, rows))
                .collect(),
        }
    }
}

/// A note on `variant` when it was timed and every timing run of it was discarded: for the
/// baseline, that no overhead can be measured and what to do; for a fenced variant, that it has
/// no figures.
fn never_passed(variant: Variant, rows: &[&CostRow]) -> Option<String> {
    let timing: Vec<&&CostRow> = rows
        .iter()
        .filter(|r| r.phase == Phase::Time && r.variant == variant)
        .collect();
    let first = timing.first()?;
    if timing.iter().any(|r| r.passed) {
        return None;
    }
    let runs = timing.len();
    let discarded = format!(
        "all {runs} of its timing runs were discarded, failing the post-condition, hanging or \
         faulting (the first: {})",
        first.reason.trim()
    );
    Some(match variant {
        Variant::No => format!(
            "the baseline `no` never passed: {discarded}, so no overhead can be measured against \
             it. Without fences the app is wrong on this backend: harden it first (`gpuwmm \
             harden`) to see which fences it needs; on the simulator, `--sim-model sc` measures \
             it without weak-memory effects"
        ),
        fenced => format!("`{fenced}` never passed: {discarded}; it has no figures"),
    })
}

fn variant_summary(
    variant: Variant,
    rows: &[&CostRow],
    by_rep: &BTreeMap<u64, BTreeMap<Variant, f64>>,
    windows: &BTreeMap<u32, BTreeMap<Variant, Window>>,
) -> VariantSummary {
    let timing = rows
        .iter()
        .filter(|r| r.phase == Phase::Time && r.variant == variant);
    let (passed, failed): (Vec<&&CostRow>, Vec<&&CostRow>) = timing.partition(|r| r.passed);
    let durations: Vec<f64> = passed.iter().map(|r| r.duration).collect();
    let mine: Vec<Window> = windows
        .values()
        .filter_map(|by| by.get(&variant).copied())
        .collect();
    let gross: Vec<f64> = mine.iter().map(|w| w.gross_mj).collect();
    let net: Vec<f64> = mine.iter().map(|w| w.net_mj).collect();
    let idle: Vec<f64> = mine.iter().map(|w| w.idle_mw).collect();
    let fenced = variant != Variant::No;
    let energy_pairs: BTreeMap<u32, BTreeMap<Variant, f64>> = windows
        .iter()
        .map(|(w, by)| (*w, by.iter().map(|(v, x)| (*v, x.gross_mj)).collect()))
        .collect();
    VariantSummary {
        variant,
        runs: passed.len() as u64,
        discarded: failed.len() as u64,
        time: median_interval(&durations, CONFIDENCE),
        time_overhead: fenced
            .then(|| paired_ratio_interval(&pairs(by_rep, variant), CONFIDENCE))
            .flatten(),
        windows: mine.len() as u64,
        energy_mj: median_interval(&gross, CONFIDENCE),
        net_energy_mj: median_interval(&net, CONFIDENCE),
        idle_mw: median_interval(&idle, CONFIDENCE).map(|m| m.median),
        energy_overhead: fenced
            .then(|| paired_ratio_interval(&pairs(&energy_pairs, variant), CONFIDENCE))
            .flatten(),
    }
}

/// A median with its interval, e.g. `1.234e-3 [1.200e-3, 1.260e-3]`.
fn with_interval(m: &MedianInterval) -> String {
    let note = if m.coverage < CONFIDENCE {
        format!(" ({:.0}% only: {} values)", m.coverage * 100.0, m.n)
    } else {
        String::new()
    };
    format!(
        "{} [{}, {}]{note}",
        number(m.median),
        number(m.low),
        number(m.high)
    )
}

/// An overhead ratio in percent, e.g. `+1.2% [+0.8%, +1.6%]`.
pub fn overhead_text(m: &MedianInterval) -> String {
    let pct = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    let note = if m.coverage < CONFIDENCE {
        format!(" ({:.0}% only)", m.coverage * 100.0)
    } else {
        String::new()
    };
    format!("{} [{}, {}]{note}", pct(m.median), pct(m.low), pct(m.high))
}

fn number(x: f64) -> String {
    if x != 0.0 && (x.abs() >= 1e5 || x.abs() < 1e-2) {
        format!("{x:.4e}")
    } else if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.4}")
    }
}

fn or_dash(x: Option<String>) -> String {
    x.unwrap_or_else(|| "—".to_string())
}

impl CostSummary {
    /// `summary.md`: per app, a table of the variants, then how everything was measured.
    pub fn markdown(&self) -> String {
        let mut md = String::from("# Fence cost\n\n");
        let _ = writeln!(
            md,
            "Measured on: {}. Seed {}.\n",
            self.provenance, self.seed
        );
        for app in &self.apps {
            let _ = writeln!(md, "## {}\n", app.app);
            md.push_str(&app.markdown_table(self.time_unit));
            md.push('\n');
            for note in &app.notes {
                let _ = writeln!(md, "**Note:** {note}.\n");
            }
            for (variant, fences) in &app.fences {
                let _ = writeln!(md, "- `{variant}`: {fences}");
            }
            md.push('\n');
        }
        let _ = writeln!(md, "## Method\n");
        let _ = writeln!(
            md,
            "- Runtime: {}. Runs are native (no stress, no thread randomisation), after warm-up \
             runs; variants interleaved run by run with the same input per repetition.",
            self.time_method.describe()
        );
        let _ = writeln!(md, "- Energy: {}.", self.energy_method);
        let _ = writeln!(
            md,
            "- Medians with 95% distribution-free intervals (order statistics); overheads are \
             medians of paired ratios over `no` (by repetition for time, by window for energy) \
             with sign-test intervals. Runs failing the post-condition are discarded and counted."
        );
        md
    }
}

impl AppSummary {
    fn markdown_table(&self, unit: &str) -> String {
        let mut md = format!(
            "| variant | runs | discarded | kernel time ({unit}) | time overhead | energy/run (mJ) | \
             net of idle (mJ) | energy overhead |\n|---|---:|---:|---|---|---|---|---|\n"
        );
        for v in &self.variants {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                v.variant,
                v.runs,
                v.discarded,
                or_dash(v.time.as_ref().map(with_interval)),
                or_dash(v.time_overhead.as_ref().map(overhead_text)),
                or_dash(v.energy_mj.as_ref().map(with_interval)),
                or_dash(v.net_energy_mj.as_ref().map(with_interval)),
                or_dash(v.energy_overhead.as_ref().map(overhead_text)),
            );
        }
        md
    }
}
