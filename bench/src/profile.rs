//! The `profile` section: are `loaderx profile`'s predictions right?
//!
//! Each check profiles a loader in one setting, takes the profile's
//! prediction for another, then profiles the other setting and compares
//! (both ways where the setting can be turned both ways):
//!
//! - **workers**: 1 → 2 and 2 → 1 workers, ImageNet training augmentation
//!   of the `vision` corpus's JPEGs;
//! - **crop-first**: on → off and off → on, the same with 2 workers;
//! - **page cache**: warm → cold and cold → warm, a store of raw 16 KiB
//!   records read at random by 2 workers, the page cache dropped (root)
//!   before the cold run.
//!
//! The goal is each prediction within ±15 % of the measurement: the
//! target's number is `1 - |predicted / measured - 1|`, wanted ≥ 0.85.

use std::path::{Path, PathBuf};

use loaderx_core::profile::{CacheState, Profile, ProfileOptions, Scenario, profile};
use loaderx_core::vision::Pipeline;
use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, Ragged, SamplerMode, Store};

use crate::report::{Table, Target, num};
use crate::stores::Result;

/// Bytes of a record of the page-cache check's store.
const RECORD: usize = 16 << 10;

/// How close a prediction came: `1 - |predicted / measured - 1|`.
fn closeness(predicted: f64, measured: f64) -> f64 {
    if measured <= 0.0 {
        return 0.0;
    }
    1.0 - (predicted / measured - 1.0).abs()
}

/// One comparison of the table.
struct Check {
    what: String,
    predicted: Option<f64>,
    measured: f64,
}

fn predicted(p: &Profile, s: Scenario) -> Option<f64> {
    p.prediction(s).map(|q| q.records_per_s)
}

/// The page-cache check's store: `bytes` of raw records, at `dir`.
fn cache_store(dir: &Path, bytes: u64) -> Result<PathBuf> {
    let path = dir.join("profile-cache");
    if Store::is_store_dir(&path) {
        return Ok(path);
    }
    let n = (bytes / RECORD as u64).max(64);
    let mut w = DenseWriter::<u8>::create(&path, &[RECORD], Codec::Raw)?;
    let mut chunk = vec![0u8; RECORD * 64];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut written = 0;
    while written < n {
        let k = (n - written).min(64);
        for b in chunk.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        w.append_slice(&chunk[..k as usize * RECORD], k as usize)?;
        written += k;
    }
    w.close()?;
    Ok(path)
}

fn drop_caches() -> Result<()> {
    std::process::Command::new("sync").status()?;
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        format!("cannot drop the page cache (the profile section's cold check needs root): {e}")
            .into()
    })
}

fn warm(dir: &Path) -> Result<()> {
    let mut buf = vec![0u8; 8 << 20];
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_file() {
            let mut r = std::fs::File::open(&p)?;
            while std::io::Read::read(&mut r, &mut buf)? > 0 {}
        }
    }
    Ok(())
}

/// Runs the section: `split` is the vision corpus's JPEG split (its
/// `image` and `label` streams), `dir` where the page-cache store goes.
pub fn section(
    split: Option<&Path>,
    dir: &Path,
    cache_bytes: u64,
    seconds: f64,
    targets: &mut Vec<Target>,
    progress: &dyn Fn(String),
    plots: Option<&Path>,
) -> Result<String> {
    let opts = ProfileOptions::new()
        .seconds(seconds)
        .probe_drive(false)
        .predict_workers(&[1, 2, 3, 4]);
    let mut checks: Vec<Check> = Vec::new();
    let mut link = String::new();
    if let Some(split) = split {
        let run = |workers: usize, crop_first: bool| -> Result<Profile> {
            progress(format!(
                "profile: imagenet_train, {workers} workers, crop-first {crop_first}"
            ));
            let builder = DataLoader::builder()
                .stream("image", Ragged::<u8>::open(split.join("image"))?)
                .batch_size(64)
                .mode(SamplerMode::Iid)
                .workers(workers)
                .augment(
                    "image",
                    Pipeline::imagenet_train(224).reduced_decode(crop_first),
                );
            Ok(profile(builder, &opts)?)
        };
        let one = run(1, true)?;
        let two = run(2, true)?;
        let two_off = run(2, false)?;
        checks.push(Check {
            what: "1 → 2 workers (imagenet_train, JPEG)".into(),
            predicted: predicted(&one, Scenario::Workers(2)),
            measured: two.records_per_s,
        });
        checks.push(Check {
            what: "2 → 1 workers (imagenet_train, JPEG)".into(),
            predicted: predicted(&two, Scenario::Workers(1)),
            measured: one.records_per_s,
        });
        checks.push(Check {
            what: "crop-first on → off (2 workers)".into(),
            predicted: predicted(&two, Scenario::CropFirst(false)),
            measured: two_off.records_per_s,
        });
        checks.push(Check {
            what: "crop-first off → on (2 workers)".into(),
            predicted: predicted(&two_off, Scenario::CropFirst(true)),
            measured: two.records_per_s,
        });
        if let Some(dir) = plots {
            // Throughput against workers: measured at 1 to 4, and what the
            // profiles at 1 and at 2 workers predicted for each.
            let mut measured = vec![(1.0, one.records_per_s), (2.0, two.records_per_s)];
            for w in [3, 4] {
                measured.push((w as f64, run(w, true)?.records_per_s));
            }
            let from = |p: &Profile| -> Vec<(f64, f64)> {
                (1..=4)
                    .filter_map(|w| predicted(p, Scenario::Workers(w)).map(|r| (w as f64, r)))
                    .collect()
            };
            let path = dir.join("profile-workers.svg");
            crate::plot::lines(
                &path,
                "imagenet_train on JPEGs: records/s against workers",
                "workers",
                "records/s",
                &[
                    ("measured".into(), measured),
                    ("predicted by the profile at 1 worker".into(), from(&one)),
                    ("predicted by the profile at 2 workers".into(), from(&two)),
                ],
            )?;
            link = format!(
                "\n![records/s against workers, measured and predicted]({})\n",
                crate::plot::shown(&path)
            );
        }
    }
    progress("profile: writing the page-cache store".into());
    let store = cache_store(dir, cache_bytes)?;
    let cache_run = |what: &str| -> Result<Profile> {
        progress(format!("profile: {what}, 2 workers"));
        let builder = DataLoader::builder()
            .stream("x", Dense::<u8>::open(&store)?)
            .batch_size(64)
            .mode(SamplerMode::Iid)
            .workers(2);
        Ok(profile(builder, &opts.clone().probe_drive(true))?)
    };
    warm(&store)?;
    let warm_p = cache_run("warm")?;
    let mut note = String::new();
    let cold_p = match drop_caches() {
        Ok(()) => Some(cache_run("cold")?),
        Err(e) => {
            note = format!("\nThe page-cache check's cold half was not run: {e}.\n");
            None
        }
    };
    let state = |p: &Profile| {
        p.cache.map_or("?".to_owned(), |(s, share)| {
            format!("{s} ({:.0} %)", share * 100.0)
        })
    };
    if let Some(cold_p) = &cold_p {
        checks.push(Check {
            what: format!(
                "page cache warm → cold (16 KiB records; measured {})",
                state(cold_p)
            ),
            predicted: predicted(&warm_p, Scenario::PageCache(CacheState::Cold)),
            measured: cold_p.records_per_s,
        });
        checks.push(Check {
            what: format!("page cache cold → warm (measured {})", state(&warm_p)),
            predicted: predicted(cold_p, Scenario::PageCache(CacheState::Warm)),
            measured: warm_p.records_per_s,
        });
    }
    let _ = std::fs::remove_dir_all(&store);

    let mut t = Table::new(&[
        "prediction",
        "predicted records/s>",
        "measured records/s>",
        "predicted / measured>",
        "within ±15 %",
    ]);
    for c in &checks {
        let ratio = c.predicted.map(|p| p / c.measured.max(1e-9));
        t.row(vec![
            c.what.clone(),
            num(c.predicted, 0),
            num(Some(c.measured), 0),
            ratio.map_or("-".into(), |r| format!("{r:.2}")),
            match c.predicted {
                Some(p) if closeness(p, c.measured) >= 0.85 => "yes".into(),
                Some(_) => "**no**".into(),
                None => "not predicted".into(),
            },
        ]);
        targets.push(Target {
            what: format!("profile: {}, 1 − |predicted/measured − 1|", c.what),
            wanted: 0.85,
            measured: c.predicted.map(|p| closeness(p, c.measured)),
        });
    }
    let mut out = format!(
        "#### Profile: predictions against measurements ({seconds:.0} s per profile)\n\n{}",
        t.render()
    );
    out.push_str(&note);
    let drive = warm_p.drive.or(cold_p.and_then(|p| p.drive));
    if let Some(d) = drive {
        out.push_str(&format!(
            "\nThe drive probe: {:.0} reads/s of {} bytes, {:.0} MB/s in 1 MiB reads.\n",
            d.small_reads_per_s,
            d.align.max(512),
            d.bandwidth / 1e6
        ));
    }
    out.push_str(&link);
    out.push_str(&format!(
        "\nThe warm profile of the page-cache check:\n\n```text\n{warm_p}```\n"
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::closeness;

    #[test]
    fn closeness_is_one_minus_the_relative_error() {
        assert_eq!(closeness(100.0, 100.0), 1.0);
        assert!((closeness(115.0, 100.0) - 0.85).abs() < 1e-12);
        assert!((closeness(85.0, 100.0) - 0.85).abs() < 1e-12);
        assert_eq!(closeness(1.0, 0.0), 0.0);
    }
}
