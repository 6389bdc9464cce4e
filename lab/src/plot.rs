//! Latency plots of a simulation report: a CDF of beacon and commit latencies
//! and a per-round timeline (plotters; SVG or PNG by file extension).
//!
//! Text is set in a font compiled into the binary (a subset of DejaVu Sans,
//! `lab/assets/`, drawn by plotters' `ab_glyph` backend), so that plots render
//! on hosts without fontconfig or any font installed, containers included.

use anyhow::{bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use sim::report::RoundStats;
use sim::Report;
use std::path::Path;

/// The embedded font: printable ASCII and a few symbols of DejaVu Sans.
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");

/// Registers [`FONT`] as the `sans-serif` family (once per process).
fn register_font() -> Result<()> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if !ok {
        bail!("the embedded font does not load");
    }
    Ok(())
}

/// Draws the report's latency figures into `path` (.svg or .png).
pub(crate) fn draw(report: &Report, path: &Path) -> Result<()> {
    draw_rounds(&report.scenario, &report.per_round, path)
}

/// The per-round median beacon latencies (ms) of rounds that have one.
pub(crate) fn beacon_medians(per_round: &[RoundStats]) -> Vec<f64> {
    per_round
        .iter()
        .map(|r| r.beacon_ms.p50)
        .filter(|v| *v > 0.0)
        .collect()
}

/// Draws CDFs of per-round median beacon latencies, one line per named series
/// (`compare --plot`: the simulator's and the emulated real network's), into
/// `path` (.svg or .png).
pub(crate) fn draw_cdfs(title: &str, series: &[(&str, Vec<f64>)], path: &Path) -> Result<()> {
    register_font()?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => {
            let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
            overlay(title, series, &root)
        }
        Some("png") => {
            let root = BitMapBackend::new(path, (800, 500)).into_drawing_area();
            overlay(title, series, &root)
        }
        _ => bail!("--plot needs a .svg or .png file name"),
    }
}

fn overlay<DB: DrawingBackend>(
    title: &str,
    series: &[(&str, Vec<f64>)],
    root: &DrawingArea<DB, Shift>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("{e}");
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(0.0..max, 0.0..1.0)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("beacon latency, per-round median over the nodes (ms)")
        .y_desc("fraction of rounds")
        .draw()
        .map_err(|e| err(&e))?;
    let colors = [BLUE, RED, GREEN, MAGENTA];
    for (i, (name, values)) in series.iter().enumerate() {
        let color = colors[i % colors.len()];
        let mut v = values.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len().max(1) as f64;
        chart
            .draw_series(LineSeries::new(
                v.iter().enumerate().map(|(i, x)| (*x, (i + 1) as f64 / n)),
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Draws the figures of `rounds` under the title `scenario` into `path`.
fn draw_rounds(scenario: &str, rounds: &[RoundStats], path: &Path) -> Result<()> {
    register_font()?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => {
            let root = SVGBackend::new(path, (1200, 500)).into_drawing_area();
            panels(scenario, rounds, &root)
        }
        Some("png") => {
            let root = BitMapBackend::new(path, (1200, 500)).into_drawing_area();
            panels(scenario, rounds, &root)
        }
        _ => bail!("--plot needs a .svg or .png file name"),
    }
}

fn panels<DB: DrawingBackend>(
    scenario: &str,
    per_round: &[RoundStats],
    root: &DrawingArea<DB, Shift>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (left, right) = root.split_horizontally(600);
    let beacon = beacon_medians(per_round);
    let commit: Vec<f64> = per_round
        .iter()
        .map(|r| r.commit_ms.p50)
        .filter(|v| *v > 0.0)
        .collect();
    let max = beacon.iter().chain(&commit).copied().fold(1.0, f64::max) * 1.1;

    // CDF of per-round median latencies.
    let mut cdf = ChartBuilder::on(&left)
        .caption(
            format!("{scenario}: latency CDF (per-round medians)"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(0.0..max, 0.0..1.0)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    cdf.configure_mesh()
        .x_desc("ms")
        .y_desc("fraction of rounds")
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (values, color, name) in [(&beacon, &BLUE, "beacon"), (&commit, &RED, "commit")] {
        let mut v = values.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len().max(1) as f64;
        cdf.draw_series(LineSeries::new(
            v.iter().enumerate().map(|(i, x)| (*x, (i + 1) as f64 / n)),
            color,
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    cdf.configure_series_labels()
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;

    // Timeline: per-round p50 and p99 beacon latency.
    let rounds = per_round.len().max(1) as u64;
    let top = per_round
        .iter()
        .map(|r| r.beacon_ms.p99.max(r.commit_ms.p50))
        .fold(1.0, f64::max)
        * 1.1;
    let mut line = ChartBuilder::on(&right)
        .caption("per-round latency", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(1u64..rounds + 1, 0.0..top)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    line.configure_mesh()
        .x_desc("round")
        .y_desc("ms")
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let series = [
        (
            per_round
                .iter()
                .map(|r| (r.round, r.beacon_ms.p50))
                .collect::<Vec<_>>(),
            BLUE,
            "beacon p50",
        ),
        (
            per_round
                .iter()
                .map(|r| (r.round, r.beacon_ms.p99))
                .collect::<Vec<_>>(),
            CYAN,
            "beacon p99",
        ),
        (
            per_round
                .iter()
                .map(|r| (r.round, r.commit_ms.p50))
                .collect::<Vec<_>>(),
            RED,
            "commit p50",
        ),
    ];
    for (points, color, name) in series {
        line.draw_series(LineSeries::new(points, color))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    line.configure_series_labels()
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five rounds of made-up latencies.
    fn rounds() -> Vec<RoundStats> {
        (1..=5u64)
            .map(|r| {
                let ms = sim::report::percentiles(&[10.0 * r as f64, 15.0 * r as f64]);
                RoundStats {
                    round: r,
                    beacon_ms: ms,
                    commit_ms: ms,
                    path: Some("fast".into()),
                    view_changes: 0,
                }
            })
            .collect()
    }

    #[test]
    fn png_and_svg_render_with_the_embedded_font() {
        let dir = tempfile::tempdir().unwrap();
        let rounds = rounds();
        let series = [("sim", vec![10.0, 12.0, 11.0]), ("real", vec![11.0, 13.5])];
        let svg = dir.path().join("cdf.svg");
        draw_cdfs("compare", &series, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("sim") && text.contains("real"), "legend");
        draw_cdfs("compare", &series, &dir.path().join("cdf.png")).unwrap();
        assert!(draw_cdfs("compare", &series, &dir.path().join("cdf.txt")).is_err());
        let png = dir.path().join("plot.png");
        draw_rounds("plot-test", &rounds, &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
        let svg = dir.path().join("plot.svg");
        draw_rounds("plot-test", &rounds, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("latency CDF"), "the captions are in the SVG");
        assert!(draw_rounds("plot-test", &rounds, &dir.path().join("plot.pdf")).is_err());
    }
}
