//! Figures as SVG text, for results people would rather look at than read.
//!
//! Two charts: error rates with their 95% Wilson intervals, one row per result (a campaign's
//! apps × environments), and the running error rate of one check over its runs with the interval
//! as a band (has the rate settled, or would more runs change the verdict?). Both mark the
//! paper's 5% effectiveness threshold and carry a note saying what produced the data, so a
//! simulator figure is labelled as one wherever it travels.
//!
//! Pure: data in, SVG text out; writing files is the caller's business.

use crate::stats::{Rate, EFFECTIVE_THRESHOLD};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use thiserror::Error;

/// Width of every chart, in SVG pixels.
const WIDTH: u32 = 900;
/// Most points a running-rate chart draws; longer checks are sampled evenly.
pub const MAX_POINTS: usize = 400;

/// A chart that could not be drawn (plotters reports layout problems this way).
#[derive(Debug, Error)]
#[error("cannot draw the chart: {0}")]
pub struct PlotError(String);

pub(crate) fn plot_error(e: impl std::fmt::Display) -> PlotError {
    PlotError(e.to_string())
}

/// A white `width` × `height` SVG, drawn by `draw` on its whole area.
pub(crate) fn svg_figure(
    width: u32,
    height: u32,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), PlotError>,
) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        draw(&root)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// One row of a rate chart: a labelled rate, coloured by `series` (e.g. the environment).
#[derive(Debug, Clone, PartialEq)]
pub struct RateRow {
    pub label: String,
    pub series: usize,
    pub rate: Rate,
}

/// Rows of rates (in percent on the x axis) with their intervals, top to bottom in the order
/// given, a dashed line at the effectiveness threshold, and `note` under the chart.
pub fn rate_chart(title: &str, note: &str, rows: &[RateRow]) -> Result<String, PlotError> {
    let height = 120 + 24 * rows.len().max(2) as u32;
    let label_width = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0);
    let x_max = axis_max(rows.iter().map(|r| r.rate.high));
    svg_figure(WIDTH, height, |root| {
        let (chart_area, note_area) = root.split_vertically(height - 24);
        // Row slots, top to bottom; at least two, since a segmented axis of one is degenerate.
        let n = rows.len().max(2) as i32;
        let mut chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(16 + 7 * label_width as u32)
            .build_cartesian_2d(0f64..x_max, (0..n - 1).into_segmented())
            .map_err(plot_error)?;
        let row_label = |y: &SegmentValue<i32>| match y {
            SegmentValue::CenterOf(i) => rows
                .get((n - 1 - i) as usize)
                .map(|r| r.label.clone())
                .unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .disable_y_mesh()
            .y_labels(rows.len().max(1))
            .y_label_formatter(&row_label)
            .x_desc("error rate (%), 95% Wilson interval")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(plot_error)?;
        draw_threshold_vertical(&mut chart)?;
        for (i, row) in rows.iter().enumerate() {
            let y = SegmentValue::CenterOf(n - 1 - i as i32);
            let colour = Palette99::pick(row.series).to_rgba();
            let (low, mid, high) = percent(&row.rate);
            chart
                .draw_series([ErrorBar::new_horizontal(
                    y,
                    low,
                    mid,
                    high,
                    colour.filled(),
                    8,
                )])
                .map_err(plot_error)?;
        }
        draw_note(&note_area, note)
    })
}

/// The running error rate after each of a check's runs, with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatePoint {
    /// Runs counted so far.
    pub runs: u64,
    pub rate: Rate,
}

/// The running rate of `errors` (one flag per run, in run order) at no more than `max_points`
/// evenly spaced run counts, always including the last.
pub fn running_rate(errors: &[bool], max_points: usize) -> Vec<RatePoint> {
    let total = errors.len();
    if total == 0 || max_points == 0 {
        return Vec::new();
    }
    let step = total.div_ceil(max_points);
    let mut points = Vec::new();
    let mut count = 0u64;
    for (i, &error) in errors.iter().enumerate() {
        count += u64::from(error);
        let runs = i + 1;
        if runs % step == 0 || runs == total {
            points.push(RatePoint {
                runs: runs as u64,
                rate: Rate::new(count, runs as u64),
            });
        }
    }
    points
}

/// The running error rate (percent) over runs with its interval as a band, the effectiveness
/// threshold, and `note` under the chart.
pub fn running_rate_chart(
    title: &str,
    note: &str,
    points: &[RatePoint],
) -> Result<String, PlotError> {
    let height = 420;
    let runs = points.last().map_or(1, |p| p.runs.max(1)) as f64;
    let y_max = axis_max(points.iter().map(|p| p.rate.high));
    svg_figure(WIDTH, height, |root| {
        let (chart_area, note_area) = root.split_vertically(height - 24);
        let mut chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..runs, 0f64..y_max)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .x_desc("runs")
            .y_desc("error rate (%)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(plot_error)?;
        let band: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.runs as f64, 100.0 * p.rate.high))
            .chain(
                points
                    .iter()
                    .rev()
                    .map(|p| (p.runs as f64, 100.0 * p.rate.low)),
            )
            .collect();
        chart
            .draw_series([Polygon::new(band, BLUE.mix(0.2).filled())])
            .map_err(plot_error)?;
        let line = points.iter().map(|p| (p.runs as f64, 100.0 * p.rate.rate));
        chart
            .draw_series(LineSeries::new(line, BLUE.stroke_width(2)))
            .map_err(plot_error)?;
        let threshold = 100.0 * EFFECTIVE_THRESHOLD;
        if threshold <= y_max {
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, threshold), (runs, threshold)],
                    6,
                    4,
                    RED.stroke_width(1),
                ))
                .map_err(plot_error)?;
        }
        draw_note(&note_area, note)
    })
}

/// The top of a percent axis showing every value in `highs` (fractions) and the threshold:
/// the next multiple of 10 above them, at most 100.
fn axis_max(highs: impl Iterator<Item = f64>) -> f64 {
    let top = highs.fold(EFFECTIVE_THRESHOLD, f64::max) * 100.0;
    ((top / 10.0).floor() * 10.0 + 10.0).min(100.0)
}

fn percent(rate: &Rate) -> (f64, f64, f64) {
    (100.0 * rate.low, 100.0 * rate.rate, 100.0 * rate.high)
}

type RowChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordi32>,
    >,
>;

fn draw_threshold_vertical(chart: &mut RowChart<'_, '_>) -> Result<(), PlotError> {
    let x = 100.0 * EFFECTIVE_THRESHOLD;
    let ends = [(x, SegmentValue::Exact(0)), (x, SegmentValue::Last)];
    chart
        .draw_series(DashedLineSeries::new(ends, 6, 4, RED.stroke_width(1)))
        .map_err(plot_error)?;
    Ok(())
}

fn draw_note(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    note: &str,
) -> Result<(), PlotError> {
    let text = format!(
        "{note} · dashed red line: effective above {:.0}%",
        100.0 * EFFECTIVE_THRESHOLD
    );
    area.draw(&Text::new(
        text,
        (12, 4),
        ("sans-serif", 12).into_font().color(&BLACK),
    ))
    .map_err(plot_error)
}

/// Tick values for a logarithmic axis over `lo..hi` (both above 0), at least `min` of them where
/// the range allows: powers of ten, then 1-2-5 steps, then 1–9 steps of each decade, then, for a
/// range narrower than one such step, evenly spaced round values.
pub fn log_ticks(lo: f64, hi: f64, min: usize) -> Vec<f64> {
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    if !(lo > 0.0 && hi.is_finite()) {
        return Vec::new();
    }
    for mantissas in [
        &[1.0][..],
        &[1.0, 2.0, 5.0],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ] {
        let ticks = decade_ticks(lo, hi, mantissas);
        if ticks.len() >= min {
            return ticks;
        }
    }
    linear_ticks(lo, hi, min)
}

/// `m × 10^k` for every mantissa `m` and decade `k` with the value in `lo..=hi`.
fn decade_ticks(lo: f64, hi: f64, mantissas: &[f64]) -> Vec<f64> {
    let mut ticks = Vec::new();
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    for k in first..=last {
        for m in mantissas {
            let v = round_to_digits(m * 10f64.powi(k), 6);
            if (lo..=hi).contains(&v) {
                ticks.push(v);
            }
        }
    }
    ticks
}

/// Round values `lo..=hi` in steps of 1, 2 or 5 × a power of ten: the largest step that gives
/// at least `count` of them.
fn linear_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let raw = (hi - lo) / count.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s <= raw)
        .unwrap_or(power);
    let mut v = (lo / step).ceil() * step;
    let mut ticks = Vec::new();
    while v <= hi && ticks.len() < 4 * count.max(1) {
        ticks.push(round_to_digits(v, 9));
        v += step;
    }
    ticks
}

/// `v` rounded to `digits` significant digits (so that 3 × 0.1 reads 0.3).
fn round_to_digits(v: f64, digits: i32) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// A tick value as an axis shows it: up to three significant digits in plain notation from
/// 0.001 to below a million (`0.05`, `2.5`, `1520`, `250000`), else scientific (`1.20e7`).
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.2e}");
    }
    let decimals = (2 - a.log10().floor() as i32).clamp(0, 6) as usize;
    let text = format!("{v:.decimals$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, series: usize, count: u64, trials: u64) -> RateRow {
        RateRow {
            label: label.to_string(),
            series,
            rate: Rate::new(count, trials),
        }
    }

    #[test]
    fn running_rate_counts_every_run_and_ends_at_the_last() {
        let errors = [true, false, false, true, false];
        let points = running_rate(&errors, 10);
        let runs: Vec<u64> = points.iter().map(|p| p.runs).collect();
        assert_eq!(runs, [1, 2, 3, 4, 5]);
        assert_eq!(points[0].rate.count, 1);
        assert_eq!(points[4].rate, Rate::new(2, 5));
    }

    #[test]
    fn running_rate_samples_long_checks_evenly() {
        let errors: Vec<bool> = (0..1000).map(|i| i % 10 == 0).collect();
        let points = running_rate(&errors, 100);
        assert_eq!(points.len(), 100);
        assert!(points.windows(2).all(|w| w[1].runs - w[0].runs == 10));
        assert_eq!(points.last().unwrap().rate, Rate::new(100, 1000));
        let odd = running_rate(&errors[..999], 100);
        assert_eq!(odd.last().unwrap().runs, 999);
        assert!(running_rate(&[], 100).is_empty());
    }

    #[test]
    fn axis_shows_the_highest_bound_and_the_threshold() {
        assert_eq!(axis_max([0.0].into_iter()), 10.0);
        assert_eq!(axis_max([0.372].into_iter()), 40.0);
        assert_eq!(axis_max([1.0].into_iter()), 100.0);
    }

    #[test]
    fn rate_chart_labels_every_row_and_carries_the_note() {
        let rows = [
            row("cbe-dot sys-str+", 0, 56, 100),
            row("cbe-dot no-str-", 1, 0, 100),
        ];
        let svg = rate_chart("error rates", "backend: simulator", &rows).unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "cbe-dot sys-str+",
            "cbe-dot no-str-",
            "backend: simulator",
            "error rates",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(svg.contains("effective above 5%"));
    }

    #[test]
    fn running_rate_chart_draws_a_band_and_a_line() {
        let errors: Vec<bool> = (0..200).map(|i| i % 3 == 0).collect();
        let svg = running_rate_chart("cbe-dot", "sim", &running_rate(&errors, MAX_POINTS)).unwrap();
        assert!(svg.contains("<polygon"), "no interval band");
        assert!(svg.contains("<polyline"), "no rate line");
        assert!(svg.contains("runs"));
    }

    #[test]
    fn charts_of_nothing_are_still_charts() {
        assert!(rate_chart("t", "n", &[]).unwrap().starts_with("<svg"));
        assert!(running_rate_chart("t", "n", &[])
            .unwrap()
            .starts_with("<svg"));
    }

    #[test]
    fn log_ticks_are_round_values_and_enough_of_them() {
        assert_eq!(log_ticks(0.5, 2000.0, 4), [1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_ticks(3.0, 60.0, 4), [5.0, 10.0, 20.0, 50.0]);
        assert_eq!(
            log_ticks(1000.0, 3500.0, 4),
            [1000.0, 1500.0, 2000.0, 2500.0, 3000.0, 3500.0]
        );
        assert_eq!(log_ticks(1000.0, 3500.0, 3), [1000.0, 2000.0, 3000.0]);
        let narrow = log_ticks(1500.0, 1580.0, 4);
        assert_eq!(narrow, [1500.0, 1520.0, 1540.0, 1560.0, 1580.0]);
        assert!(log_ticks(0.0, 1.0, 4).is_empty());
    }

    #[test]
    fn tick_labels_have_three_significant_digits_at_most() {
        let labels: Vec<String> = [0.05, 2.5, 1520.0, 250_000.0, 1.2e7, 0.0001, 0.3]
            .into_iter()
            .map(tick_label)
            .collect();
        assert_eq!(
            labels,
            ["0.05", "2.5", "1520", "250000", "1.20e7", "1.00e-4", "0.3"]
        );
    }
}
