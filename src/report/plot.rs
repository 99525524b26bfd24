//! `s3rdma report --plot out.svg`: fetch throughput vs concurrency, one line per
//! (backend, size); GB/s over time instead when the records carry
//! `fetch --series`; for `ckpt --train-load` records, the seconds a save
//! blocked training against the checkpoint's size, one line per (backend,
//! method, run); the other benchmarks as bars per row with min–max error
//! bars. SVG through `plotters` (its SVG backend needs no font files; PNG
//! would need a font rasteriser, so it is refused with the conversion to use).

use std::path::Path;

use plotters::prelude::*;

use super::Row;
use crate::error::{Error, Result};
use crate::flag::{PLOT, SERIES};

fn err(e: impl std::fmt::Display) -> Error {
    Error::Runtime(format!("{PLOT}: {e}"))
}

/// Draw `rows` into `path` (.svg).
///
/// Errors: a path not ending in .svg (usage), or a drawing/write failure.
pub(super) fn draw(rows: &[Row], path: &Path) -> Result<()> {
    if path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() != Some("svg") {
        return Err(Error::Usage(format!(
            "{PLOT} {}: give a file name ending in .svg (PNG and PDF are not written: they need fonts this build does not carry; convert with `rsvg-convert out.svg > out.png`)",
            path.display()
        )));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        return Err(Error::Usage(format!("{PLOT} {}: the directory {} does not exist: create it first", path.display(), dir.display())));
    }
    let tmp = path.with_extension("svg.tmp");
    let fetch: Vec<&Row> = rows.iter().filter(|r| r.benchmark == "fetch" && r.dims.contains_key("concurrency")).collect();
    let timed: Vec<&Row> = fetch.iter().copied().filter(|r| r.series.as_ref().is_some_and(|s| !s.is_empty())).collect();
    let blocked: Vec<&Row> = rows.iter().filter(|r| r.blocked.is_some()).collect();
    let drawn = if !timed.is_empty() {
        series(&timed, &tmp)
    } else if fetch.is_empty() && !blocked.is_empty() {
        blocked_by_size(&blocked, &tmp)
    } else if fetch.is_empty() {
        let mut metrics: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
        metrics.sort();
        metrics.dedup();
        if metrics.len() > 1 {
            return Err(Error::Usage(format!("{PLOT}: the rows measure different things ({}): plot one benchmark's records at a time", metrics.join(", "))));
        }
        bars(rows, &tmp)
    } else {
        lines(&fetch, &tmp)
    };
    if let Err(e) = drawn {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Runtime(format!("{PLOT} {}: {e}", path.display())));
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::Runtime(format!("{PLOT}: cannot write {}: {e}", path.display())))?;
    Ok(())
}

fn lines(rows: &[&Row], path: &Path) -> Result<()> {
    // One series per (backend, size[, procs], file tag), points by concurrency.
    let mut series: std::collections::BTreeMap<String, Vec<Point>> = Default::default();
    for r in rows {
        let c: f64 = r.dims["concurrency"].parse().unwrap_or(0.0);
        // One line per run and (backend, size, procs): two files never share a line.
        let run = r.tag.clone().unwrap_or_else(|| r.file.trim_end_matches(".json").to_string());
        // Unproven rdma points get their own, labelled line: never joined to verified ones.
        let name = format!(
            "{} {}{}{} [{run}]{}",
            r.backend,
            r.dims.get("size").cloned().unwrap_or_default(),
            r.dims.get("dest").map_or(String::new(), |d| format!(" {d}")),
            r.dims.get("procs").map_or(String::new(), |p| format!(" x{p} procs")),
            if r.unproven_rdma() { " NOT RDMA-VERIFIED" } else { "" }
        );
        series.entry(name).or_default().push((c, r.value.median, r.value.min, r.value.max));
    }
    let xmax = rows.iter().filter_map(|r| r.dims["concurrency"].parse::<f64>().ok()).fold(1.0, f64::max) * 1.05;
    draw_lines(path, ["fetch: throughput vs concurrency", "concurrent streams", "GB/s (1e9 B/s)"], xmax, series, false)
}

/// One point of a line: x, and the median, min and max of y.
type Point = (f64, f64, f64, f64);

/// Named lines of points with min–max error bars (and a dot per point
/// when `dots`), over x from 0 to `xmax` and y from 0 to 1.1x the largest
/// max; `titles`: caption, x label, y label.
fn draw_lines(path: &Path, titles: [&str; 3], xmax: f64, lines: std::collections::BTreeMap<String, Vec<Point>>, dots: bool) -> Result<()> {
    let ymax = lines.values().flatten().map(|p| p.3).fold(0.0, f64::max) * 1.1 + 1e-9;
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(titles[0], ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax.max(1e-9), 0f64..ymax)
        .map_err(err)?;
    chart.configure_mesh().x_desc(titles[1]).y_desc(titles[2]).draw().map_err(err)?;
    for (i, (name, mut pts)) in lines.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.1)), color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        if dots {
            chart.draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 4, color.filled()))).map_err(err)?;
        }
        chart.draw_series(pts.iter().map(|p| ErrorBar::new_vertical(p.0, p.2, p.1, p.3, color.filled(), 6))).map_err(err)?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw().map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// `ckpt --train-load`: blocked seconds against checkpoint size (GB), one
/// line per (backend, method, dest, run), min–max error bars over repeats.
fn blocked_by_size(rows: &[&Row], path: &Path) -> Result<()> {
    let mut lines: std::collections::BTreeMap<String, Vec<Point>> = Default::default();
    for r in rows {
        let Some((bytes, b)) = r.blocked else { continue };
        let run = r.tag.clone().unwrap_or_else(|| r.file.trim_end_matches(".json").to_string());
        let dim = |k: &str| r.dims.get(k).cloned().unwrap_or_default();
        let name = format!("{} {} {} [{run}]{}", r.backend, dim("method"), dim("dest"), if r.unproven_rdma() { " NOT RDMA-VERIFIED" } else { "" });
        lines.entry(name).or_default().push((bytes as f64 / 1e9, b.median, b.min, b.max));
    }
    let xmax = rows.iter().filter_map(|r| r.blocked.map(|b| b.0 as f64 / 1e9)).fold(1e-9, f64::max) * 1.05;
    let titles =
        ["ckpt: seconds a save blocks training vs checkpoint size", "checkpoint size, GB (1e9 B), all ranks", "blocked seconds (stall + slower steps)"];
    draw_lines(path, titles, xmax, lines, true)
}

/// `fetch --series`: GB/s over time, one line per cell and run.
fn series(rows: &[&Row], path: &Path) -> Result<()> {
    let pts = |r: &Row| r.series.clone().unwrap_or_default();
    let xmax = rows.iter().flat_map(|r| pts(r)).map(|p| p[0]).fold(1e-9, f64::max);
    let ymax = rows.iter().flat_map(|r| pts(r)).map(|p| p[1]).fold(0.0, f64::max) * 1.1 + 1e-9;
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("fetch: throughput over time ({SERIES})"), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(err)?;
    chart.configure_mesh().x_desc("seconds into the timed window").y_desc("GB/s (1e9 B/s)").draw().map_err(err)?;
    for (i, r) in rows.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let run = r.tag.clone().unwrap_or_else(|| r.file.trim_end_matches(".json").to_string());
        let name =
            format!("{} {} x{} [{run}]", r.backend, r.dims.get("size").cloned().unwrap_or_default(), r.dims.get("concurrency").cloned().unwrap_or_default());
        chart
            .draw_series(LineSeries::new(pts(r).into_iter().map(|p| (p[0], p[1])), color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw().map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn bars(rows: &[Row], path: &Path) -> Result<()> {
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {} {}{}",
                r.benchmark,
                r.backend,
                r.dims.values().cloned().collect::<Vec<_>>().join(" "),
                if r.unproven_rdma() { " NOT RDMA-VERIFIED" } else { "" }
            )
        })
        .collect();
    let ymax = rows.iter().map(|r| r.value.max).fold(0.0, f64::max) * 1.1 + 1e-9;
    let metric = rows[0].metric.clone();
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let n = rows.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{metric} by run (median, min–max)"), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(120)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..ymax)
        .map_err(err)?;
    let lab = labels.clone();
    chart
        .configure_mesh()
        .y_desc(metric)
        .x_labels(rows.len())
        .x_label_formatter(&move |x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 { lab.get(i as usize).cloned().unwrap_or_default() } else { String::new() }
        })
        .draw()
        .map_err(err)?;
    for (i, r) in rows.iter().enumerate() {
        let x = i as f64;
        let color: RGBAColor = if r.unproven_rdma() { RED.to_rgba() } else { Palette99::pick(i % 8).to_rgba() };
        chart.draw_series(std::iter::once(Rectangle::new([(x - 0.35, 0.0), (x + 0.35, r.value.median)], color.filled()))).map_err(err)?;
        chart.draw_series(std::iter::once(ErrorBar::new_vertical(x, r.value.min, r.value.median, r.value.max, BLACK.filled(), 10))).map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
