//! A verdict on an input pipeline: [`profile`] runs a loader alone for a
//! few seconds, with the flight recorder on, and says how fast it went,
//! which stage limits it, and what other settings would give.
//!
//! The [`Profile`] it returns holds the measured rate (records per
//! second), the loader's [`LoaderStats`] over the measured period (the
//! per-stage table and the [`Bottleneck`](crate::Bottleneck)), a timeline
//! (the rate and each stage's share, interval by interval), and
//! [`Prediction`]s: the rate with other worker counts, with the stores
//! warm in the page cache or cold on the drive, and with crop-first JPEG
//! decoding on or off (feature `vision`, where the loader augments a
//! stream). Its `Display` is the verdict; with feature `plot`,
//! [`Profile::write_svg`] draws the timeline. `loaderx profile` is this
//! function on the command line.
//!
//! ```
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter};
//! use loaderx_core::profile::{ProfileOptions, Scenario, profile};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[64], Codec::Zstd)?;
//! w.append_slice(&vec![0.5f32; 64 * 4000], 4000)?;
//! w.close()?;
//! let builder = DataLoader::builder()
//!     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
//!     .batch_size(64)
//!     .workers(1);
//! let p = profile(builder, &ProfileOptions::new().seconds(0.3))?;
//! assert!(p.records_per_s > 0.0);
//! assert!(p.predictions.iter().any(|q| q.scenario == Scenario::Workers(2)));
//! println!("{p}"); // the rate, the bottleneck, the stage table, the predictions
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How the predictions are made
//!
//! From the measured period: a worker's wall time per batch (less the time
//! it sat runnable waiting for a core, from the kernel's schedstat) and
//! the process's CPU time per batch; with the stores' page-cache residency
//! (`mincore`), a probe of the drive with direct reads (small and 1 MiB
//! reads, many in flight, as the cold path reads), memory's copy speed, and
//! a single-thread timing of a sample of the augmented images decoded both
//! ways. The model (each bound in its own words in the verdict) is:
//! workers make `workers / wall` batches a second, the cores
//! `cores / cpu`, a cold drive `1 / Σ (latency + bytes / bandwidth)`
//! records over each stream's read, the least of them; the model's rate
//! at the measured setting against the measured rate calibrates the rest.
//! The bench (`loaderx-bench`, section `profile`) checks the predictions
//! against measurements on this machine.

mod model;
#[cfg(feature = "plot")]
mod plot;
mod probe;

use std::time::{Duration, Instant};

pub use model::Bound;
pub use probe::DriveProbe;

use crate::engine::io;
use crate::error::Error;
use crate::loader::{DataLoaderBuilder, LoaderStats, Stage, Staging};
use model::{Costs, rate};

/// How [`profile`] runs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProfileOptions {
    /// Seconds measured (default 10).
    pub seconds: f64,
    /// Seconds run first and left out (default: a fifth of `seconds`, at
    /// most 2): the workers start, the look-ahead fills.
    pub warmup: Option<f64>,
    /// Worker counts to predict the rate for (default 1, 2, 4, 8).
    pub workers: Vec<usize>,
    /// Probe the drive under the stores to predict cold reads (default
    /// true; about a second of direct reads after the measurement).
    pub probe_drive: bool,
    /// Points of the timeline (default 40).
    pub intervals: usize,
}

impl Default for ProfileOptions {
    fn default() -> ProfileOptions {
        ProfileOptions {
            seconds: 10.0,
            warmup: None,
            workers: vec![1, 2, 4, 8],
            probe_drive: true,
            intervals: 40,
        }
    }
}

impl ProfileOptions {
    /// The defaults.
    pub fn new() -> ProfileOptions {
        ProfileOptions::default()
    }

    /// Seconds measured.
    pub fn seconds(mut self, seconds: f64) -> ProfileOptions {
        self.seconds = seconds;
        self
    }

    /// Seconds run first and left out.
    pub fn warmup(mut self, seconds: f64) -> ProfileOptions {
        self.warmup = Some(seconds);
        self
    }

    /// Worker counts to predict the rate for.
    pub fn predict_workers(mut self, workers: &[usize]) -> ProfileOptions {
        self.workers = workers.to_vec();
        self
    }

    /// Whether to probe the drive (for the cold prediction).
    pub fn probe_drive(mut self, yes: bool) -> ProfileOptions {
        self.probe_drive = yes;
        self
    }

    fn warmup_seconds(&self) -> f64 {
        self.warmup.unwrap_or((self.seconds / 5.0).min(2.0))
    }
}

/// Where the stores' bytes were when the profile ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheState {
    /// At least 90 % of their pages in the page cache.
    Warm,
    /// At most 10 %.
    Cold,
    /// In between.
    Partial,
}

impl std::fmt::Display for CacheState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheState::Warm => "warm",
            CacheState::Cold => "cold",
            CacheState::Partial => "partly cached",
        })
    }
}

/// A setting the profile predicts the rate for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scenario {
    /// This many workers, everything else as measured.
    Workers(usize),
    /// The stores warm or cold (as measured otherwise).
    PageCache(CacheState),
    /// JPEGs decoded crop-first (`true`) or in full.
    CropFirst(bool),
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scenario::Workers(n) => write!(f, "{n} worker{}", if *n == 1 { "" } else { "s" }),
            Scenario::PageCache(s) => write!(f, "page cache {s}"),
            Scenario::CropFirst(true) => f.write_str("crop-first decoding on"),
            Scenario::CropFirst(false) => f.write_str("crop-first decoding off"),
        }
    }
}

/// A predicted rate.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Prediction {
    /// The setting.
    pub scenario: Scenario,
    /// Records per second predicted.
    pub records_per_s: f64,
    /// What would bound it.
    pub bound: Bound,
    /// Whether this is the measured setting (the prediction is then the
    /// measurement).
    pub measured: bool,
}

/// One interval of the measured period.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TimelinePoint {
    /// Seconds from the start of the measured period to the interval's end.
    pub at: f64,
    /// Records delivered per second in the interval.
    pub records_per_s: f64,
    /// The workers' seconds in each batch stage in the interval
    /// ([`Stage::ALL`] order; the waits are zero).
    pub stage_seconds: Vec<f64>,
}

/// What [`profile`] measured and predicts; its `Display` is the verdict.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Profile {
    /// Records delivered per second over the measured period.
    pub records_per_s: f64,
    /// Records delivered in it.
    pub records: u64,
    /// Its length.
    pub wall: Duration,
    /// The loader's workers (0: synchronous).
    pub workers: usize,
    /// Records per full batch.
    pub batch_size: usize,
    /// The cores the process may use.
    pub cores: usize,
    /// The process's CPU time over the period.
    pub cpu: Duration,
    /// Where the stores' bytes were, and the share in the page cache
    /// (`None`: not local stores, or not known).
    pub cache: Option<(CacheState, f64)>,
    /// The drive probe (`None`: not run or not possible).
    pub drive: Option<DriveProbe>,
    /// Seconds per augmented image on one thread, crop-first and in full.
    pub decode: Option<(f64, f64)>,
    /// The measured setting's model rate against the measured rate: the
    /// factor every prediction is scaled by.
    pub calibration: f64,
    /// The loader's stats over the measured period.
    pub stats: LoaderStats,
    /// The predictions.
    pub predictions: Vec<Prediction>,
    /// The measured period, interval by interval.
    pub timeline: Vec<TimelinePoint>,
}

impl Profile {
    /// The prediction for `scenario`, if made.
    pub fn prediction(&self, scenario: Scenario) -> Option<&Prediction> {
        self.predictions.iter().find(|p| p.scenario == scenario)
    }

    /// Writes the timeline as an SVG: records per second over the
    /// measured period, stacked by the stages' shares of the workers'
    /// time.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Io`](crate::ErrorKind::Io) when the file cannot be
    /// written.
    #[cfg(feature = "plot")]
    pub fn write_svg(&self, path: impl AsRef<std::path::Path>) -> Result<(), Error> {
        plot::write_svg(self, path.as_ref())
    }
}

/// What the stage table's per-stage seconds were at one moment.
fn stage_seconds(stats: &LoaderStats) -> Vec<f64> {
    stats
        .stages
        .iter()
        .map(|(s, t)| {
            if s.is_wait() {
                0.0
            } else {
                t.total.as_secs_f64()
            }
        })
        .collect()
}

/// Runs a loader built from `builder` (its streams, batch size, workers,
/// augmentation, read mode: everything as configured, with stage
/// recording on) alone for `options.seconds` after a warm-up, its consumer
/// taking batches as fast as they come, and returns the verdict: see the
/// [module docs](self).
///
/// # Errors
///
/// As [`DataLoaderBuilder::build`]; the first batch error the loader
/// delivers; [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
/// for a non-positive or non-finite `seconds`.
pub fn profile<S: Staging>(
    builder: DataLoaderBuilder<S>,
    options: &ProfileOptions,
) -> Result<Profile, Error> {
    if !(options.seconds.is_finite() && options.seconds > 0.0) {
        return Err(Error::invalid(format!(
            "profile: seconds must be positive, not {}",
            options.seconds
        )));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let batch_size = builder.configured_batch_size();
    let configured_workers = builder.configured_workers();
    let dirs: Vec<std::path::PathBuf> = builder
        .configured_streams()
        .iter()
        .map(|(_, s)| s.store().path().to_path_buf())
        .filter(|p| p.is_dir())
        .collect();
    let files = probe::files_under(&dirs, 100_000);
    let resident = probe::resident_share(&files);

    let mut loader = builder.clone().record_stages(true).build()?;
    let warmup = Duration::from_secs_f64(options.warmup_seconds().max(0.0));
    let started = Instant::now();
    while started.elapsed() < warmup {
        match loader.next() {
            Some(b) => drop(b?),
            None => break,
        }
    }
    let _ = loader.stats_since_last();
    let cpu0 = io::process_cpu();
    let threads0 = probe::threads();
    let t0 = Instant::now();
    let period = Duration::from_secs_f64(options.seconds);
    let step = period / u32::try_from(options.intervals.max(1)).unwrap_or(u32::MAX);
    let (mut records, mut batches) = (0u64, 0u64);
    let mut timeline = Vec::new();
    let (mut last_at, mut last_records) = (Duration::ZERO, 0u64);
    let mut last_stages = stage_seconds(&loader.stats());
    loop {
        let now = t0.elapsed();
        if now >= last_at + step || now >= period {
            let stages = stage_seconds(&loader.stats());
            let secs = (now - last_at).as_secs_f64();
            timeline.push(TimelinePoint {
                at: now.as_secs_f64(),
                records_per_s: (records - last_records) as f64 / secs.max(1e-9),
                stage_seconds: stages
                    .iter()
                    .zip(&last_stages)
                    .map(|(a, b)| (a - b).max(0.0))
                    .collect(),
            });
            (last_at, last_records, last_stages) = (now, records, stages);
        }
        if now >= period {
            break;
        }
        match loader.next() {
            Some(b) => {
                records += b?.len() as u64;
                batches += 1;
            }
            None => break,
        }
    }
    let wall = t0.elapsed();
    let stats = loader.stats_since_last();
    let cpu = match (cpu0, io::process_cpu()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => Duration::ZERO,
    };
    let threads1 = probe::threads();
    drop(loader);
    let (worker_cpu, worker_queued, worker_threads) =
        probe::threads_delta(&threads0, &threads1, "loaderx-worker");
    // The look-ahead's thread (`loaderx-lookahead`, cut to 15 bytes).
    let (lookahead_cpu, _, _) = probe::threads_delta(&threads0, &threads1, "loaderx-lookahe");

    let drive = if options.probe_drive {
        files
            .iter()
            .max_by_key(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
            .and_then(|f| probe::drive(f, 0.4))
    } else {
        None
    };
    let cache = resident.map(|(share, _)| {
        let state = if share >= 0.9 {
            CacheState::Warm
        } else if share <= 0.1 {
            CacheState::Cold
        } else {
            CacheState::Partial
        };
        (state, share)
    });

    #[cfg(feature = "vision")]
    let (decode, crop_first_measured) = {
        let augmented = builder.configured_augment().first().and_then(|(name, p)| {
            let (_, stream) = builder
                .configured_streams()
                .iter()
                .find(|(n, _)| n == name)?;
            Some((
                probe::crop_first_costs(stream, p, 48, 0.5)?,
                p.is_reduced_decode(),
            ))
        });
        (augmented.map(|a| a.0), augmented.map(|a| a.1))
    };
    #[cfg(not(feature = "vision"))]
    let (decode, crop_first_measured): (Option<(f64, f64)>, Option<bool>) = (None, None);

    // What a warm read costs: the stores' own mapped gathers of batches
    // whose records are in the page cache, on as many threads as the
    // workers. Only needed to predict a warm store.
    let warm_read = if matches!(
        cache.map(|c| c.0),
        Some(CacheState::Cold | CacheState::Partial)
    ) {
        let streams: Vec<crate::loader::Stream> = builder
            .configured_streams()
            .iter()
            .map(|(_, s)| s.clone())
            .collect();
        let rpb = (records as f64 / batches.max(1) as f64).round().max(1.0) as usize;
        probe::warm_gather_seconds(&streams, rpb, configured_workers.clamp(1, cores), 0.3)
    } else {
        None
    };
    let measured = Measured {
        records,
        batches: batches.max(1),
        wall: wall.as_secs_f64(),
        cpu: cpu.as_secs_f64(),
        worker_queued: if worker_threads > 0 {
            worker_queued.as_secs_f64()
        } else {
            0.0
        },
        other_cpu: if worker_threads > 0 {
            (cpu.saturating_sub(worker_cpu).saturating_sub(lookahead_cpu)).as_secs_f64()
        } else {
            0.0
        },
        workers: configured_workers,
        cores,
        stats: &stats,
        cache: cache.map(|c| c.0),
        drive,
        stream_bytes: builder
            .configured_streams()
            .iter()
            .map(|(_, s)| {
                let st = s.store();
                st.payload_bytes() as f64 / st.len().max(1) as f64
            })
            .collect(),
        decode,
        crop_first_measured,
        warm_read,
    };
    let (predictions, calibration) = measured.predict(&options.workers);
    Ok(Profile {
        records_per_s: records as f64 / wall.as_secs_f64().max(1e-9),
        records,
        wall,
        workers: configured_workers,
        batch_size,
        cores,
        cpu,
        cache,
        drive,
        decode,
        calibration,
        stats,
        predictions,
        timeline,
    })
}

/// The measurements the predictions are made from.
struct Measured<'a> {
    records: u64,
    batches: u64,
    wall: f64,
    cpu: f64,
    worker_queued: f64,
    /// The process's CPU time outside the workers and the look-ahead
    /// (the consumer, rayon's threads): what a batch costs besides its
    /// worker's own work and the look-ahead's reads.
    other_cpu: f64,
    workers: usize,
    cores: usize,
    stats: &'a LoaderStats,
    cache: Option<CacheState>,
    drive: Option<DriveProbe>,
    /// Each stream's stored bytes per record.
    stream_bytes: Vec<f64>,
    decode: Option<(f64, f64)>,
    crop_first_measured: Option<bool>,
    /// Seconds a worker's warm read of a batch takes (mapped gathers from
    /// the page cache, as many threads at once as the workers).
    warm_read: Option<f64>,
}

impl Measured<'_> {
    /// The costs of one batch as measured.
    fn costs(&self) -> Costs {
        let made = self.stats.batches.max(1) as f64;
        let worker_wall = self.stats.batch.total.as_secs_f64() / made;
        Costs {
            wall: (worker_wall - self.worker_queued / made).max(worker_wall * 0.05),
            cpu: self.cpu / made,
        }
    }

    /// The drive's rate in batches per second for records like these.
    fn drive_batches(&self) -> Option<f64> {
        let d = self.drive?;
        let reads: Vec<f64> = self
            .stream_bytes
            .iter()
            .map(|&b| model::widened(b, d.align as f64))
            .collect();
        Some(d.cost().records_per_s(&reads) / self.records_per_batch())
    }

    fn records_per_batch(&self) -> f64 {
        (self.records as f64 / self.batches as f64).max(1.0)
    }

    /// The costs with the stores warm: the read stage's measured time
    /// replaced by a warm read's (measured by the probe, else the
    /// delivered bytes copied at memory's speed); a worker then works on
    /// the CPU for its whole batch, and the CPU a batch costs is that plus
    /// what the consumer and rayon's threads spent (the look-ahead reads
    /// nothing for a warm store).
    fn warm_costs(&self) -> Costs {
        let made = self.stats.batches.max(1) as f64;
        let batch = self.stats.batch.total.as_secs_f64() / made;
        let read = self.stats.stages[Stage::Read].total.as_secs_f64() / made;
        let warm_read = self.warm_read.unwrap_or_else(|| {
            self.stats.bytes_delivered as f64
                / made
                / probe::copy_bandwidth(self.workers.clamp(1, self.cores))
        });
        // The rest of the batch as measured (a cold read's wake-up waits
        // for a core are part of its read), then the warm read.
        let wall = ((batch - read).max(0.0) + warm_read).max(1e-9);
        Costs {
            wall,
            cpu: wall + self.other_cpu / made,
        }
    }

    /// Every prediction, and the calibration.
    fn predict(&self, workers: &[usize]) -> (Vec<Prediction>, f64) {
        let cores = self.cores as f64;
        let lanes = self.workers.max(1);
        let measured = self.records as f64 / self.wall.max(1e-9);
        let rpb = self.records_per_batch();
        let cold = matches!(self.cache, Some(CacheState::Cold));
        let drive_now = if cold { self.drive_batches() } else { None };
        let costs = self.costs();
        let (model_now, bound_now) = rate(costs, lanes, cores, drive_now);
        let k = if model_now > 0.0 && measured > 0.0 {
            measured / (model_now * rpb)
        } else {
            1.0
        };
        let scaled = |(r, b): (f64, Bound)| (r * rpb * k, b);
        let mut out = Vec::new();
        let mut counts: Vec<usize> = workers.to_vec();
        if !counts.contains(&lanes) {
            counts.push(lanes);
        }
        counts.sort_unstable();
        counts.dedup();
        for m in counts.into_iter().filter(|&m| m > 0) {
            let (r, b) = scaled(rate(costs, m, cores, drive_now));
            let is_now = m == lanes;
            out.push(Prediction {
                scenario: Scenario::Workers(m),
                records_per_s: if is_now { measured } else { r },
                bound: if is_now { bound_now } else { b },
                measured: is_now,
            });
        }
        // Cold, from a warm or partly resident store: each batch's reads
        // from the drive on top of the warm costs. Warm, from a cold or
        // partly resident one: the warm read in place of the measured one.
        let warm = matches!(self.cache, Some(CacheState::Cold | CacheState::Partial))
            .then(|| self.warm_costs());
        let drive_then = match self.cache {
            Some(CacheState::Warm | CacheState::Partial) => self.drive_batches(),
            _ => None,
        };
        let to_cold = drive_then.map(|d| rate(warm.unwrap_or(costs), lanes, cores, Some(d)));
        let to_warm = warm.map(|w| rate(w, lanes, cores, None));
        for (state, predicted) in [(CacheState::Cold, to_cold), (CacheState::Warm, to_warm)] {
            if let Some(p) = predicted {
                let (r, b) = scaled(p);
                out.push(Prediction {
                    scenario: Scenario::PageCache(state),
                    records_per_s: r,
                    bound: b,
                    measured: false,
                });
            }
        }
        if let (Some((on, off)), Some(now_on)) = (self.decode, self.crop_first_measured) {
            let delta = (off - on) * rpb;
            let other = costs.plus(if now_on { delta } else { -delta });
            let (r, b) = scaled(rate(other, lanes, cores, drive_now));
            out.push(Prediction {
                scenario: Scenario::CropFirst(!now_on),
                records_per_s: r,
                bound: b,
                measured: false,
            });
        }
        (out, k)
    }
}

/// `1 234 567` for a person.
fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lanes = if self.workers == 0 {
            "synchronous".to_owned()
        } else {
            format!("{} workers", self.workers)
        };
        writeln!(
            f,
            "profile: {lanes}, batches of {}, {:.1} s measured on {} cores{}",
            self.batch_size,
            self.wall.as_secs_f64(),
            self.cores,
            match self.cache {
                Some((state, share)) => format!(
                    "; stores {state} ({:.0} % in the page cache)",
                    100.0 * share
                ),
                None => String::new(),
            }
        )?;
        writeln!(
            f,
            "rate: {} records/s; CPU {:.2} cores busy",
            thousands(self.records_per_s),
            self.cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9),
        )?;
        match self.stats.bottleneck() {
            Some(crate::Bottleneck::Stage(s)) => writeln!(
                f,
                "bottleneck: {s} ({:.0} % of the workers' time)",
                100.0 * self.stats.share(s)
            )?,
            Some(b) => writeln!(f, "bottleneck: {b}")?,
            None => {}
        }
        write!(f, "{}", self.stats)?;
        writeln!(
            f,
            "predicted records/s (model calibrated x{:.2} to the measurement):",
            self.calibration
        )?;
        for p in &self.predictions {
            writeln!(
                f,
                "  {:<26} {:>12}  {}",
                p.scenario.to_string(),
                thousands(p.records_per_s),
                if p.measured {
                    "(measured)".to_owned()
                } else {
                    format!("bound by the {}", p.bound)
                }
            )?;
        }
        if let Some(d) = self.drive {
            writeln!(
                f,
                "drive: {} reads/s of {} bytes, {:.0} MB/s in 1 MiB reads",
                thousands(d.small_reads_per_s),
                d.align.max(512),
                d.bandwidth / 1e6
            )?;
        }
        if let Some((on, off)) = self.decode {
            writeln!(
                f,
                "an image on one thread: {:.2} ms crop-first, {:.2} ms in full",
                on * 1e3,
                off * 1e3
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, DataLoader, Dense, DenseWriter};

    fn store(dir: &std::path::Path) -> Dense<f32> {
        let mut w = DenseWriter::<f32>::create(dir.join("x"), &[256], Codec::Zstd).unwrap();
        w.append_slice(&vec![0.25f32; 256 * 2000], 2000).unwrap();
        w.close().unwrap();
        Dense::<f32>::open(dir.join("x")).unwrap()
    }

    #[test]
    fn a_profile_measures_and_predicts_every_worker_count() {
        let dir = tempfile::tempdir().unwrap();
        let builder = DataLoader::builder()
            .stream("x", store(dir.path()))
            .batch_size(32)
            .workers(1);
        let p = profile(
            builder,
            &ProfileOptions::new()
                .seconds(0.4)
                .predict_workers(&[1, 2, 3]),
        )
        .unwrap();
        assert!(p.records > 0 && p.records_per_s > 0.0);
        assert_eq!(p.records % 32, 0);
        for m in [1, 2, 3] {
            assert!(p.prediction(Scenario::Workers(m)).is_some(), "{m}");
        }
        let one = p.prediction(Scenario::Workers(1)).unwrap();
        assert!(one.measured);
        assert_eq!(one.records_per_s, p.records_per_s);
        // More workers never predict less.
        let two = p.prediction(Scenario::Workers(2)).unwrap().records_per_s;
        assert!(
            two >= p.records_per_s * 0.999,
            "{two} < {}",
            p.records_per_s
        );
        assert!(!p.timeline.is_empty());
        assert!(p.stats.batches > 0);
        // Just written: warm.
        assert_eq!(p.cache.map(|c| c.0), Some(CacheState::Warm));
        let text = p.to_string();
        assert!(text.contains("predicted records/s"), "{text}");
    }

    #[test]
    fn seconds_must_be_positive() {
        let dir = tempfile::tempdir().unwrap();
        let builder = DataLoader::builder().stream("x", store(dir.path()));
        assert!(profile(builder.clone(), &ProfileOptions::new().seconds(0.0)).is_err());
        assert!(profile(builder, &ProfileOptions::new().seconds(f64::NAN)).is_err());
    }

    fn measured(stats: &LoaderStats, cache: Option<CacheState>) -> Measured<'_> {
        Measured {
            records: 1000 * 10,
            batches: 1000,
            wall: 10.0,
            cpu: 10.0,
            worker_queued: 0.0,
            other_cpu: 0.0,
            workers: 1,
            cores: 4,
            stats,
            cache,
            drive: None,
            stream_bytes: vec![4096.0],
            decode: None,
            crop_first_measured: None,
            warm_read: None,
        }
    }

    #[test]
    fn a_cpu_bound_worker_predicts_linear_scaling_to_the_cores() {
        // One worker, 10 ms per batch, all of it CPU, on 4 cores.
        let mut stats = LoaderStats::empty();
        stats.batches = 1000;
        stats.batch.total = Duration::from_secs(10);
        let m = measured(&stats, None);
        let (p, k) = m.predict(&[1, 2, 4, 8]);
        assert!((k - 1.0).abs() < 1e-9, "{k}");
        let at = |n| {
            p.iter()
                .find(|q| q.scenario == Scenario::Workers(n))
                .unwrap()
                .records_per_s
        };
        assert!((at(1) - 1000.0).abs() < 1e-6);
        assert!((at(2) - 2000.0).abs() < 1e-6);
        assert!((at(4) - 4000.0).abs() < 1e-6);
        assert!((at(8) - 4000.0).abs() < 1e-6, "the cores bound it");
    }

    #[test]
    fn a_warm_store_predicts_the_drive_bound_cold() {
        let mut stats = LoaderStats::empty();
        stats.batches = 1000;
        stats.batch.total = Duration::from_secs(10);
        let mut m = measured(&stats, Some(CacheState::Warm));
        // 2 ms a read: 500 records/s at most, half the CPU's rate.
        m.drive = Some(DriveProbe {
            align: 4096,
            small_reads_per_s: 500.0,
            bandwidth: 1e12,
            latency: 2e-3,
        });
        let (p, _) = m.predict(&[1]);
        let cold = p
            .iter()
            .find(|q| q.scenario == Scenario::PageCache(CacheState::Cold))
            .unwrap();
        assert_eq!(cold.bound, Bound::Drive);
        assert!(
            (cold.records_per_s - 500.0).abs() < 1.0,
            "{}",
            cold.records_per_s
        );
    }

    #[test]
    fn crop_first_off_adds_the_decode_difference() {
        let mut stats = LoaderStats::empty();
        stats.batches = 1000;
        stats.batch.total = Duration::from_secs(10);
        let mut m = measured(&stats, None);
        // 1 ms an image crop-first, 2 ms in full: 10 more ms a batch.
        m.decode = Some((1e-3, 2e-3));
        m.crop_first_measured = Some(true);
        let (p, _) = m.predict(&[1]);
        let off = p
            .iter()
            .find(|q| q.scenario == Scenario::CropFirst(false))
            .unwrap();
        assert!(
            (off.records_per_s - 500.0).abs() < 1e-6,
            "{}",
            off.records_per_s
        );
    }
}
