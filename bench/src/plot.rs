//! SVG figures of the report (plotters, SVG backend): lines of a rate
//! against a count (workers), and grouped bars of rates per workload.
//! A section that has a figure writes it when the run was given a plot
//! directory ([`crate::Args::plots`]).

use std::path::Path;

use plotters::prelude::*;

use crate::stores::Result;

/// The series' colours, in order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

fn err(path: &Path, e: impl std::fmt::Display) -> crate::stores::Error {
    format!("{}: {e}", path.display()).into()
}

/// How the report links a figure: relative to `bench/` when it is under
/// it (the report is bench/README.md), else the path as given.
pub fn shown(path: &Path) -> String {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR"));
    path.strip_prefix(bench)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Lines of `series` (name, points `(x, y)`) against x, each point marked.
pub fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(format!("{}: nothing to plot", path.display()).into());
    }
    let pad = ((x1 - x0) * 0.05).max(0.1);
    let root = SVGBackend::new(path, (800, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..(y1 * 1.15).max(1.0))
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(path, e))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
            .map_err(|e| err(path, e))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2)));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(|e| err(path, e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))?;
    Ok(())
}

/// Grouped bars: for each of `categories`, one bar per series (name,
/// one value per category; `None` leaves a gap).
pub fn bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    categories: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<()> {
    let n = categories.len();
    if n == 0 || series.is_empty() {
        return Err(format!("{}: nothing to plot", path.display()).into());
    }
    let y1 = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    let digits = if y1 < 10.0 { 2 } else { 0 };
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    // One slot per (category, series), and an empty one after each
    // category; a category's name under its middle slot.
    let per = series.len() + 1;
    let slots = u32::try_from(n * per).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((0..slots).into_segmented(), 0f64..(y1 * 1.2).max(1.0))
        .map_err(|e| err(path, e))?;
    let middle = (series.len() - 1) / 2;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * per)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(k) if *k as usize % per == middle => categories
                .get(*k as usize / per)
                .cloned()
                .unwrap_or_default(),
            _ => String::new(),
        })
        .y_label_formatter(&|v| format!("{v:.digits$}"))
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(path, e))?;
    for (j, (name, values)) in series.iter().enumerate() {
        let c = COLOURS[j % COLOURS.len()];
        let rects = values.iter().enumerate().filter_map(|(i, v)| {
            let v = (*v)?;
            let k = u32::try_from(i * per + j).ok()?;
            Some(Rectangle::new(
                [
                    (SegmentValue::Exact(k), 0.0),
                    (SegmentValue::Exact(k + 1), v),
                ],
                c.filled(),
            ))
        });
        chart
            .draw_series(rects)
            .map_err(|e| err(path, e))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_svgs_naming_their_series() {
        let dir = tempfile::tempdir().unwrap();
        let l = dir.path().join("l.svg");
        lines(
            &l,
            "t",
            "workers",
            "records/s",
            &[("measured".into(), vec![(1.0, 10.0), (2.0, 19.0)])],
        )
        .unwrap();
        let text = std::fs::read_to_string(&l).unwrap();
        assert!(text.starts_with("<svg") && text.contains("measured"));
        let b = dir.path().join("b.svg");
        bars(
            &b,
            "t",
            "MiB/s",
            &["4k".into(), "64k".into()],
            &[
                ("fio".into(), vec![Some(100.0), Some(800.0)]),
                ("loaderx".into(), vec![Some(90.0), None]),
            ],
        )
        .unwrap();
        let text = std::fs::read_to_string(&b).unwrap();
        assert!(text.contains("64k") && text.contains("loaderx"));
        assert!(bars(&b, "t", "y", &[], &[]).is_err());
    }
}
