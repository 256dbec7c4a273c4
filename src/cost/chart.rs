//! Figure 5 of the paper as SVG: each app's fenced cost against its cost without fences, on
//! log–log axes, `emp` and `cons` marked differently, with the diagonal (no overhead) drawn, and
//! each point's 95% interval as error bars. Pure: summary in, SVG text out.

use super::summary::CostSummary;
use super::Variant;
use crate::plot::{log_ticks, plot_error, tick_label, PlotError};
use crate::stats::MedianInterval;
use plotters::coord::combinators::{LogCoord, WithKeyPoints};
use plotters::prelude::*;

/// Which figure: kernel time or energy per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Time,
    Energy,
}

/// One app's point: its `no` median on x, a fenced variant's median (and interval) on y.
struct Point {
    app: String,
    variant: Variant,
    x: f64,
    y: MedianInterval,
}

fn points(summary: &CostSummary, quantity: Quantity) -> Vec<Point> {
    let pick = |v: &super::summary::VariantSummary| match quantity {
        Quantity::Time => v.time,
        Quantity::Energy => v.energy_mj,
    };
    let mut points = Vec::new();
    for app in &summary.apps {
        let Some(x) = app
            .variants
            .iter()
            .find(|v| v.variant == Variant::No)
            .and_then(pick)
        else {
            continue;
        };
        for v in app.variants.iter().filter(|v| v.variant != Variant::No) {
            if let Some(y) = pick(v) {
                points.push(Point {
                    app: app.app.clone(),
                    variant: v.variant,
                    x: x.median,
                    y,
                });
            }
        }
    }
    points
}

/// The chart, or `None` when there is nothing to draw (e.g. no energy figures).
pub fn cost_chart(
    summary: &CostSummary,
    quantity: Quantity,
    note: &str,
) -> Result<Option<String>, PlotError> {
    let points = points(summary, quantity);
    if points.is_empty() {
        return Ok(None);
    }
    let unit = match quantity {
        Quantity::Time => format!("kernel time ({})", summary.time_unit),
        Quantity::Energy => "energy per run (mJ)".to_string(),
    };
    let values = points
        .iter()
        .flat_map(|p| [p.x, p.y.low, p.y.high])
        .filter(|v| *v > 0.0);
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = (lo / 1.5, hi * 1.5);
    // Ticks of our own: plotters' logarithmic axis marks only powers of ten, which a range
    // narrower than a decade (one app, or apps of similar cost) has none of.
    let ticks = log_ticks(lo, hi, AXIS_TICKS);
    let axis = || (lo..hi).log_scale().with_key_points(ticks.clone());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 640)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (area, note_area) = root.split_vertically(616);
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("Fence cost: {unit}"), ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(axis(), axis())
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(format!("no fences: {unit}"))
            .y_desc(format!("fenced: {unit}"))
            .x_labels(4 * AXIS_TICKS)
            .y_labels(4 * AXIS_TICKS)
            .x_label_formatter(&|v| tick_label(*v))
            .y_label_formatter(&|v| tick_label(*v))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(plot_error)?;
        chart
            .draw_series(LineSeries::new([(lo, lo), (hi, hi)], BLACK.mix(0.4)))
            .map_err(plot_error)?
            .label("no overhead (y = x)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.4)));
        draw_variant(&mut chart, &points, Variant::Emp, BLUE)?;
        draw_variant(&mut chart, &points, Variant::Cons, RED)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(plot_error)?;
        note_area
            .draw(&Text::new(
                note.to_string(),
                (12, 4),
                ("sans-serif", 12).into_font().color(&BLACK),
            ))
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(Some(svg))
}

/// Ticks each axis has at least, where its range allows.
const AXIS_TICKS: usize = 4;

type LogAxis = WithKeyPoints<LogCoord<f64>>;
type LogChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogAxis, LogAxis>>;

fn draw_variant<'a, 'b: 'a>(
    chart: &mut LogChart<'a, 'b>,
    points: &[Point],
    variant: Variant,
    colour: RGBColor,
) -> Result<(), PlotError> {
    let mine: Vec<&Point> = points.iter().filter(|p| p.variant == variant).collect();
    if mine.is_empty() {
        return Ok(());
    }
    let label = match variant {
        Variant::Emp => "emp: fences harden kept (circle)",
        _ => "cons: a fence after every access (triangle)",
    };
    chart
        .draw_series(mine.iter().map(|p| {
            ErrorBar::new_vertical(p.x, p.y.low, p.y.median, p.y.high, colour.filled(), 6)
        }))
        .map_err(plot_error)?;
    let (emp, cons) = (variant == Variant::Emp, variant == Variant::Cons);
    chart
        .draw_series(mine.iter().map(|p| {
            // Each app is named once, beside its highest point (cons, or emp alone).
            let named = cons
                || !points
                    .iter()
                    .any(|q| q.app == p.app && q.variant == Variant::Cons);
            EmptyElement::at((p.x, p.y.median))
                + Circle::new((0, 0), if emp { 5 } else { 0 }, colour.filled())
                + TriangleMarker::new((0, 0), if cons { 7 } else { 0 }, colour.filled())
                + Text::new(
                    if named { p.app.clone() } else { String::new() },
                    (9, -14),
                    ("sans-serif", 12),
                )
        }))
        .map_err(plot_error)?
        .label(label)
        .legend(move |(x, y)| {
            EmptyElement::at((x + 8, y))
                + Circle::new((0, 0), if emp { 4 } else { 0 }, colour.filled())
                + TriangleMarker::new((0, 0), if cons { 5 } else { 0 }, colour.filled())
        });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::measure::{EnergyMethod, TimeMethod};
    use crate::cost::summary::{AppSummary, VariantSummary};

    fn variant(variant: Variant, median: f64) -> VariantSummary {
        VariantSummary {
            variant,
            runs: 200,
            discarded: 0,
            time: Some(MedianInterval {
                median,
                low: median * 0.98,
                high: median * 1.02,
                n: 200,
                coverage: 0.95,
            }),
            time_overhead: None,
            windows: 0,
            energy_mj: None,
            net_energy_mj: None,
            idle_mw: None,
            energy_overhead: None,
        }
    }

    /// The numbers in `<text>` elements of an SVG.
    fn numbers_in_text(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').map(|(_, rest)| rest))
            .filter_map(|t| t.split_once("</text>").map(|(label, _)| label.trim()))
            .filter(|l| !l.is_empty() && l.parse::<f64>().is_ok())
            .map(str::to_string)
            .collect()
    }

    /// Bug: the chart of one app had no axis ticks: its range (the app's costs ± 50%) held no
    /// power of ten, the only values plotters' logarithmic axis labels.
    #[test]
    fn a_one_app_cost_chart_has_tick_labels_on_both_axes() {
        let summary = CostSummary {
            provenance: "made-up".into(),
            seed: 1,
            time_method: TimeMethod::Synthetic,
            time_unit: "instructions",
            energy_method: EnergyMethod::NotAvailable("test".into()),
            apps: vec![AppSummary {
                app: "cbe-dot".into(),
                fences: Default::default(),
                variants: vec![
                    variant(Variant::No, 1520.0),
                    variant(Variant::Emp, 1610.0),
                    variant(Variant::Cons, 2210.0),
                ],
                notes: Vec::new(),
            }],
        };
        let svg = cost_chart(&summary, Quantity::Time, "note")
            .unwrap()
            .unwrap();
        let labels = numbers_in_text(&svg);
        let ticks = log_ticks(1520.0 * 0.98 / 1.5, 2210.0 * 1.02 * 1.5, AXIS_TICKS);
        assert!(ticks.len() >= AXIS_TICKS, "{ticks:?}");
        let tick_labels: Vec<String> = ticks.iter().map(|t| tick_label(*t)).collect();
        assert!(labels.iter().all(|l| tick_labels.contains(l)), "{labels:?}");
        // Each axis shows its ticks (plotters may leave out one at the very edge).
        let on_both_axes = tick_labels
            .iter()
            .filter(|t| labels.iter().filter(|l| l == t).count() == 2)
            .count();
        assert!(on_both_axes >= AXIS_TICKS, "{labels:?} of {tick_labels:?}");
    }
}
