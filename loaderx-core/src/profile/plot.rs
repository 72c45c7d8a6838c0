//! The profile's timeline as an SVG (feature `plot`, through plotters):
//! records per second over the measured period, the area under the
//! curve split by each batch stage's share of the workers' time in the
//! interval.

use std::path::Path;

use plotters::prelude::*;

use super::Profile;
use crate::error::Error;
use crate::loader::Stage;

/// A colour per stage, in [`Stage::ALL`] order (the waits unused).
const COLOURS: [RGBColor; 15] = [
    RGBColor(0x9e, 0x9e, 0x9e), // sample
    RGBColor(0x60, 0x7d, 0x8b), // locate
    RGBColor(0x1f, 0x77, 0xb4), // read
    RGBColor(0x17, 0xbe, 0xcf), // fetch
    RGBColor(0xff, 0x7f, 0x0e), // decompress
    RGBColor(0xd6, 0x27, 0x28), // decode
    RGBColor(0x94, 0x67, 0xbd), // crop_resize
    RGBColor(0x8c, 0x56, 0x4b), // flip
    RGBColor(0xe3, 0x77, 0xc2), // jitter
    RGBColor(0xbc, 0xbd, 0x22), // convert
    RGBColor(0x2c, 0xa0, 0x2c), // pack
    RGBColor(0x7f, 0x7f, 0x7f), // collate
    RGBColor(0x00, 0x80, 0x80), // transfer
    RGBColor(0, 0, 0),
    RGBColor(0, 0, 0),
];

fn plot_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::io(path, std::io::Error::other(e.to_string()))
}

pub(super) fn write_svg(profile: &Profile, path: &Path) -> Result<(), Error> {
    let points = &profile.timeline;
    let x_max = points.last().map_or(1.0, |p| p.at).max(1e-3);
    let y_max = points
        .iter()
        .map(|p| p.records_per_s)
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.15;
    // Each point's rate split by the stages' shares of the interval's
    // worker time, stacked in pipeline order.
    let stages: Vec<(usize, Stage)> = Stage::ALL
        .iter()
        .copied()
        .enumerate()
        .filter(|(i, s)| !s.is_wait() && points.iter().any(|p| p.stage_seconds[*i] > 0.0))
        .collect();
    let mut tops: Vec<Vec<(f64, f64)>> = vec![Vec::with_capacity(points.len()); stages.len()];
    for p in points {
        let busy: f64 = p.stage_seconds.iter().sum();
        let mut acc = 0.0;
        for (k, (i, _)) in stages.iter().enumerate() {
            let share = if busy > 0.0 {
                p.stage_seconds[*i] / busy
            } else {
                0.0
            };
            acc += share * p.records_per_s;
            tops[k].push((p.at, acc));
        }
    }
    let root = SVGBackend::new(path, (960, 520)).into_drawing_area();
    let err = |e| plot_error(path, e);
    root.fill(&WHITE).map_err(err)?;
    let caption = format!(
        "loaderx profile: {:.0} records/s, {} workers, batches of {}",
        profile.records_per_s, profile.workers, profile.batch_size
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("records/s (area: share of the workers' time per stage)")
        .draw()
        .map_err(err)?;
    // Drawn from the top of the stack down, so each area covers the ones
    // below only where it belongs.
    for (k, (i, stage)) in stages.iter().enumerate().rev() {
        let colour = COLOURS[*i];
        chart
            .draw_series(AreaSeries::new(tops[k].clone(), 0.0, colour.mix(0.85)))
            .map_err(err)?
            .label(stage.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (p.at, p.records_per_s)),
            BLACK.stroke_width(2),
        ))
        .map_err(err)?
        .label("records/s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::profile::{ProfileOptions, profile};
    use crate::{Codec, DataLoader, Dense, DenseWriter};

    #[test]
    fn the_timeline_is_an_svg_with_a_series_per_stage() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DenseWriter::<u8>::create(dir.path().join("x"), &[512], Codec::Zstd).unwrap();
        w.append_slice(&vec![3u8; 512 * 2000], 2000).unwrap();
        w.close().unwrap();
        let builder = DataLoader::builder()
            .stream("x", Dense::<u8>::open(dir.path().join("x")).unwrap())
            .batch_size(16)
            .workers(1);
        let p = profile(
            builder,
            &ProfileOptions::new().seconds(0.3).probe_drive(false),
        )
        .unwrap();
        let svg = dir.path().join("p.svg");
        p.write_svg(&svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..80.min(text.len())]);
        assert!(
            text.contains("decompress"),
            "the zstd stage is in the legend"
        );
        assert!(text.contains("records/s"));
    }
}
