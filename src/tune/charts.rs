//! Tuning results as SVG charts: stage 1 as one heat map per test (distance × stressed location,
//! where patches show as bands, like the paper's figure 3), stages 2 and 3 as score lines per
//! test over the candidates (figure 4), the chosen candidate marked. Pure: data in, SVG out.

use super::PatchStage;
use crate::litmus::LitmusShape;
use crate::plot::{plot_error, svg_figure, PlotError};
use plotters::prelude::*;

const WIDTH: u32 = 900;
const PANEL_HEIGHT: u32 = 220;

/// Stage 1: for each test a panel, x the stressed location, y the distance, darker for more
/// weak behaviours (scaled per panel; the panel title gives its maximum).
pub fn patch_heatmap(title: &str, note: &str, stage: &PatchStage) -> Result<String, PlotError> {
    let mut tests: Vec<LitmusShape> = Vec::new();
    for ((test, _), _) in &stage.weak {
        if !tests.contains(test) {
            tests.push(*test);
        }
    }
    let height = 60 + PANEL_HEIGHT * tests.len().max(1) as u32;
    svg_figure(WIDTH, height, |root| {
        let (top, rest) = root.split_vertically(30);
        top.titled(title, ("sans-serif", 18)).map_err(plot_error)?;
        let (panels_area, note_area) = rest.split_vertically(height - 60);
        let panels = panels_area.split_evenly((tests.len().max(1), 1));
        for (test, area) in tests.iter().zip(&panels) {
            let rows: Vec<(u32, &Vec<u64>)> = stage
                .weak
                .iter()
                .filter(|((t, _), _)| t == test)
                .map(|((_, d), row)| (*d, row))
                .collect();
            draw_panel(area, *test, &rows)?;
        }
        note_area
            .draw(&Text::new(note, (12, 4), ("sans-serif", 12)))
            .map_err(plot_error)?;
        Ok(())
    })
}

fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    test: LitmusShape,
    rows: &[(u32, &Vec<u64>)],
) -> Result<(), PlotError> {
    let locations = rows.iter().map(|(_, r)| r.len()).max().unwrap_or(1).max(1) as u32;
    let max = rows
        .iter()
        .flat_map(|(_, r)| r.iter())
        .copied()
        .max()
        .unwrap_or(0);
    let step = match rows {
        [(a, _), (b, _), ..] => b - a,
        _ => 1,
    };
    let top = rows.last().map_or(1, |(d, _)| d + step);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{test}: weak behaviours (darkest = {max})"),
            ("sans-serif", 14),
        )
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(48)
        .build_cartesian_2d(0u32..locations, 0u32..top)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .label_style(("sans-serif", 11))
        .axis_desc_style(("sans-serif", 11))
        .x_desc("stressed scratchpad word")
        .y_desc("distance")
        .draw()
        .map_err(plot_error)?;
    let cells = rows.iter().flat_map(|(d, row)| {
        row.iter().enumerate().map(move |(l, &weak)| {
            let shade = if max == 0 {
                0.0
            } else {
                weak as f64 / max as f64
            };
            Rectangle::new(
                [(l as u32, *d), (l as u32 + 1, d + step)],
                shade_of(shade).filled(),
            )
        })
    });
    chart.draw_series(cells).map_err(plot_error)?;
    Ok(())
}

/// White for 0, dark blue for 1.
fn shade_of(fraction: f64) -> RGBColor {
    let f = fraction.clamp(0.0, 1.0);
    RGBColor(
        (255.0 - 235.0 * f) as u8,
        (255.0 - 215.0 * f) as u8,
        (255.0 - 95.0 * f) as u8,
    )
}

/// Stages 2 and 3: each test's score over the candidates (x labelled with `labels`), the
/// chosen candidate marked with a dashed line.
pub fn score_chart(
    title: &str,
    note: &str,
    x_desc: &str,
    labels: &[String],
    tests: &[LitmusShape],
    scores: &[Vec<u64>],
    chosen: Option<usize>,
) -> Result<String, PlotError> {
    let height = 440;
    let n = labels.len().max(1);
    let y_max = scores.iter().flatten().copied().max().unwrap_or(0).max(1) as f64 * 1.1;
    svg_figure(WIDTH, height, |root| {
        let (chart_area, note_area) = root.split_vertically(height - 24);
        let longest = labels.iter().map(|l| l.len()).max().unwrap_or(1) as u32;
        let mut chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(20 + 6 * longest.min(20))
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..y_max)
            .map_err(plot_error)?;
        let label = |x: &f64| {
            let i = x.round();
            match (i - x).abs() < 1e-6 && i >= 0.0 {
                true => labels.get(i as usize).cloned().unwrap_or_default(),
                false => String::new(),
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .label_style(("sans-serif", 12))
            .x_labels(n.min(64))
            .x_label_formatter(&label)
            // After label_style, which would reset it: candidates' names read upwards.
            .x_label_style(
                ("sans-serif", 10)
                    .into_font()
                    .transform(FontTransform::Rotate270),
            )
            .axis_desc_style(("sans-serif", 13))
            .x_desc(x_desc)
            .y_desc("score (weak behaviours)")
            .draw()
            .map_err(plot_error)?;
        for (t, test) in tests.iter().enumerate() {
            let colour = Palette99::pick(t).to_rgba();
            let points: Vec<(f64, f64)> = scores
                .iter()
                .enumerate()
                .map(|(c, s)| (c as f64, s.get(t).copied().unwrap_or(0) as f64))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
                .map_err(plot_error)?
                .label(test.name())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, colour.filled())),
                )
                .map_err(plot_error)?;
        }
        if let Some(c) = chosen {
            chart
                .draw_series(DashedLineSeries::new(
                    [(c as f64, 0.0), (c as f64, y_max)],
                    6,
                    4,
                    BLACK.stroke_width(1),
                ))
                .map_err(plot_error)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        let legend = match chosen {
            Some(_) => format!("{note} · dashed line: chosen"),
            None => format!("{note} · none chosen: the default is kept"),
        };
        note_area
            .draw(&Text::new(legend, (12, 4), ("sans-serif", 12)))
            .map_err(plot_error)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::analysis::PatchVerdict;

    #[test]
    fn the_heat_map_has_a_panel_per_test_and_a_cell_per_location_and_distance() {
        let stage = PatchStage {
            weak: vec![
                ((LitmusShape::Mp, 0), vec![0, 5, 9, 0]),
                ((LitmusShape::Mp, 8), vec![1, 0, 0, 2]),
                ((LitmusShape::Sb, 0), vec![0; 4]),
                ((LitmusShape::Sb, 8), vec![0; 4]),
            ],
            location_effect: vec![],
            // No test had a location effect: the panels are drawn all the same.
            counts: vec![],
            verdict: PatchVerdict::NoPatches,
        };
        let svg = patch_heatmap("stage 1", "simulator", &stage).unwrap();
        assert!(svg.contains("mp: weak behaviours (darkest = 9)"));
        assert!(svg.contains("sb: weak behaviours (darkest = 0)"));
        assert!(svg.contains("simulator"));
        assert!(svg.matches("<rect").count() >= 16, "a rectangle per cell");
    }

    #[test]
    fn the_score_chart_names_candidates_and_tests() {
        let labels: Vec<String> = ["ld", "st", "ld st"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let scores = vec![vec![1, 2], vec![5, 0], vec![3, 3]];
        let svg = score_chart(
            "stage 2",
            "simulator",
            "σ",
            &labels,
            &[LitmusShape::Mp, LitmusShape::Lb],
            &scores,
            Some(2),
        )
        .unwrap();
        for text in ["ld st", "mp", "lb", "dashed line: chosen", "simulator"] {
            assert!(svg.contains(text), "{text}");
        }
        // QA: with no choice (the default kept) the legend still promised a dashed line.
        let tests = [LitmusShape::Mp, LitmusShape::Lb];
        let svg = score_chart("stage 2", "simulator", "σ", &labels, &tests, &scores, None);
        let svg = svg.unwrap();
        assert!(!svg.contains("dashed line") && svg.contains("none chosen"));
    }
}
