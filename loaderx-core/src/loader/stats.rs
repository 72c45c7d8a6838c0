//! [`LoaderStats`]: what a loader did and where its time went, per stage
//! and per worker ([`StageStats`], [`StageTimes`], [`WorkerStats`]), and
//! the [`Bottleneck`] that follows; its `Display` is the per-stage table.

use std::time::Duration;

use super::stage::{STAGES, Stage};

/// The consumer waiting for batches less than this share of the wall time
/// is not held back by the input pipeline ([`Bottleneck::Consumer`]).
pub const INPUT_BOUND_SHARE: f64 = 0.05;

/// The time spent in one stage over a period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StageStats {
    /// All the time spent in the stage.
    pub total: Duration,
    /// Batches that spent time in it (for the waits: the waits, the
    /// consumer's including those that found their batch ready).
    pub count: u64,
    /// The median time a batch (or a wait) spent in it, within about 10 %
    /// (a logarithmic histogram's bucket).
    pub p50: Duration,
    /// The 95th percentile, likewise.
    pub p95: Duration,
    /// The 99th percentile, likewise.
    pub p99: Duration,
}

/// One [`StageStats`] per [`Stage`]; indexed by stage.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StageTimes(pub(crate) [StageStats; STAGES]);

impl StageTimes {
    /// The time spent in `stage`.
    pub fn get(&self, stage: Stage) -> &StageStats {
        &self.0[stage.index()]
    }

    /// Every stage and its time, in pipeline order (stages never entered
    /// included, at zero).
    pub fn iter(&self) -> impl Iterator<Item = (Stage, &StageStats)> {
        Stage::ALL.into_iter().zip(self.0.iter())
    }

    /// The time spent making batches: every stage but the two waits.
    pub fn busy(&self) -> Duration {
        self.iter()
            .filter(|(s, _)| !s.is_wait())
            .map(|(_, t)| t.total)
            .sum()
    }

    /// The batch stage with the most time (the waits left out); `None`
    /// when no batch was made.
    pub fn slowest(&self) -> Option<Stage> {
        self.iter()
            .filter(|(s, t)| !s.is_wait() && !t.total.is_zero())
            .max_by_key(|(_, t)| t.total)
            .map(|(s, _)| s)
    }
}

impl std::ops::Index<Stage> for StageTimes {
    type Output = StageStats;

    fn index(&self, stage: Stage) -> &StageStats {
        self.get(stage)
    }
}

/// What one worker did over a period. A synchronous loader
/// ([`workers(0)`](super::DataLoaderBuilder::workers)) has one, the
/// consumer's thread, which makes every batch in `next`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WorkerStats {
    /// The worker's number (0 for a synchronous loader's consumer thread).
    pub worker: usize,
    /// Batches it made.
    pub batches: u64,
    /// Stored bytes its batches read (compressed bytes for compressed
    /// records; gathers a store splits over rayon's threads count only
    /// what the worker's own thread read).
    pub bytes_read: u64,
    /// Bytes its gathers delivered into batches (before augmentation and
    /// the transform).
    pub bytes_delivered: u64,
    /// Its time per stage ([`Stage::WaitBatch`] is the consumer's, always
    /// zero here).
    pub stages: StageTimes,
    /// A batch's wall time, from the claim of its step to its hand-over
    /// (the sum of its stages).
    pub batch: StageStats,
}

/// The part of the pipeline that limits the loader's rate, by the rule of
/// tf.data's profiler: a consumer that waits for its batches is held back
/// by the input pipeline, whose slowest stage is the bottleneck; one that
/// does not is the bottleneck itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bottleneck {
    /// The consumer waited for batches (or, synchronous, spent in `next`)
    /// at least [`INPUT_BOUND_SHARE`] of the wall time, and the workers
    /// spent the most time in this stage.
    Stage(Stage),
    /// The consumer: it waited for batches less than
    /// [`INPUT_BOUND_SHARE`] of the wall time; more workers or a faster
    /// stage would not make it faster.
    Consumer,
}

impl std::fmt::Display for Bottleneck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bottleneck::Stage(s) => write!(f, "{s}"),
            Bottleneck::Consumer => f.write_str("the consumer"),
        }
    }
}

/// What a loader did so far (or since the last
/// [`stats_since_last`](super::DataLoader::stats_since_last)), for
/// monitoring and tests: counters, and where its time went per stage and
/// per worker, recorded on every batch (see [`Stage`]).
///
/// Its `Display` is a table of the stages (total, share, p50/p95/p99 per
/// batch) naming the [`bottleneck`](Self::bottleneck):
///
/// ```
/// use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, Stage};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[4], Codec::Zstd)?;
/// w.append_slice(&(0..4000).map(|v| v as f32).collect::<Vec<_>>(), 1000)?;
/// w.close()?;
/// let mut loader = DataLoader::builder()
///     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
///     .batch_size(50)
///     .workers(2)
///     .build()?;
/// for batch in loader.by_ref().take(20) {
///     batch?;
/// }
/// let stats = loader.stats();
/// assert_eq!(stats.stages[Stage::WaitBatch].count, 20);
/// assert!(stats.batches >= 20);
/// println!("{stats}"); // stage, total, share, p50, p95, p99; the bottleneck
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LoaderStats {
    /// Most batches that were ever in flight at once (claimed by a worker and
    /// not yet handed to the consumer); never more than `workers + prefetch`,
    /// and always 0 for a synchronous loader (`workers(0)`), which makes
    /// each batch only when it is asked for. Since the start, always.
    pub max_in_flight: usize,
    /// Buffers the staging allocated or grew
    /// ([`Staging::allocations`](super::Staging::allocations): the default
    /// pool counts them, other stagings may not). Since the start, always.
    pub pool_allocations: u64,
    /// Stored bytes the look-ahead asked the stores to read ahead
    /// ([`prefetch_bytes`](super::DataLoaderBuilder::prefetch_bytes)): 0
    /// while every store is warm (or [`Mapped`](crate::ReadMode::Mapped)).
    /// Since the start, always.
    pub prefetched_bytes: u64,
    /// What the loader's streams on object storage fetched and found in
    /// their block caches (memory and cache directory hits, misses),
    /// added up; `None` when no stream is remote. Since each store was
    /// opened, always.
    pub remote: Option<crate::RemoteStats>,
    /// What the cache of the loader's lazily converted streams
    /// ([`Dataset::lazy`](crate::Dataset::lazy)) holds and did: row groups
    /// converted, found converted, evicted; `None` when no stream is lazy.
    /// Since the dataset was opened, always.
    pub lazy: Option<crate::lazy::LazyStats>,
    /// The wall time the period covers.
    pub wall: Duration,
    /// Batches the workers finished in the period (some may not be
    /// delivered yet).
    pub batches: u64,
    /// Stored bytes the batches read ([`WorkerStats::bytes_read`]).
    pub bytes_read: u64,
    /// Bytes the gathers delivered into batches.
    pub bytes_delivered: u64,
    /// Finished batches waiting in the window when the consumer took one
    /// (that one included), on average; 0 for a synchronous loader.
    pub queue_depth: f64,
    /// Every worker's stages added up, and the consumer's wait
    /// ([`Stage::WaitBatch`]); the percentiles are over all the batches.
    pub stages: StageTimes,
    /// A batch's wall time over all the workers ([`WorkerStats::batch`]).
    pub batch: StageStats,
    /// Each worker's own.
    pub per_worker: Vec<WorkerStats>,
    /// No worker threads: the consumer made each batch in `next`.
    pub synchronous: bool,
    /// Stage recording was on ([`record_stages`](super::DataLoaderBuilder::record_stages)).
    pub recorded: bool,
}

impl Default for LoaderStats {
    /// Stats of a loader that has made nothing yet.
    fn default() -> LoaderStats {
        LoaderStats::empty()
    }
}

impl LoaderStats {
    /// Stats of nothing recorded yet.
    pub(crate) fn empty() -> LoaderStats {
        LoaderStats {
            max_in_flight: 0,
            pool_allocations: 0,
            prefetched_bytes: 0,
            remote: None,
            lazy: None,
            wall: Duration::ZERO,
            batches: 0,
            bytes_read: 0,
            bytes_delivered: 0,
            queue_depth: 0.0,
            stages: StageTimes::default(),
            batch: StageStats::default(),
            per_worker: Vec::new(),
            synchronous: false,
            recorded: false,
        }
    }

    /// The share of its lanes' wall time spent in `stage`: for
    /// [`Stage::WaitBatch`], of the consumer's (the wall time); for the
    /// others, of the workers' (wall time × workers).
    pub fn share(&self, stage: Stage) -> f64 {
        let wall = self.wall.as_secs_f64();
        let lanes = if stage == Stage::WaitBatch {
            1.0
        } else {
            self.per_worker.len().max(1) as f64
        };
        if wall <= 0.0 {
            return 0.0;
        }
        self.stages[stage].total.as_secs_f64() / (wall * lanes)
    }

    /// The share of the wall time the consumer spent waiting on the input
    /// pipeline: waiting for batches, or (synchronous) making them in
    /// `next`.
    pub fn input_share(&self) -> f64 {
        let wall = self.wall.as_secs_f64();
        if wall <= 0.0 {
            return 0.0;
        }
        self.input_wait().as_secs_f64() / wall
    }

    /// The time the consumer spent waiting on the input pipeline: waiting
    /// for batches, or (synchronous) making them in `next`.
    pub fn input_wait(&self) -> Duration {
        if self.synchronous {
            self.stages.busy()
        } else {
            self.stages[Stage::WaitBatch].total
        }
    }

    /// What limits the loader's rate (see [`Bottleneck`]); `None` before
    /// any batch was made, or with recording off.
    pub fn bottleneck(&self) -> Option<Bottleneck> {
        let slowest = self.stages.slowest()?;
        if self.input_share() < INPUT_BOUND_SHARE {
            return Some(Bottleneck::Consumer);
        }
        Some(Bottleneck::Stage(slowest))
    }
}

/// `d` for a person: `812 ns`, `3.4 µs`, `12.1 ms`, `2.35 s`.
pub(crate) fn human(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.2} s", ns as f64 / 1e9)
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

impl std::fmt::Display for LoaderStats {
    /// The per-stage table: each stage that ran, its total, its share of
    /// its lanes' time ([`share`](Self::share)) and the p50/p95/p99 of a
    /// batch's time in it; then the bottleneck.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.wall.as_secs_f64();
        let rate = if secs > 0.0 {
            self.batches as f64 / secs
        } else {
            0.0
        };
        let lanes = if self.synchronous {
            "synchronous".to_owned()
        } else {
            format!("{} workers", self.per_worker.len())
        };
        writeln!(
            f,
            "loader: {} batches in {} ({rate:.1} batches/s), {lanes}; read {}, delivered {}; \
             {:.1} batches ready on average",
            self.batches,
            human(self.wall),
            mib(self.bytes_read),
            mib(self.bytes_delivered),
            self.queue_depth,
        )?;
        if let Some(l) = self.lazy {
            writeln!(
                f,
                "lazy parts: {} of {} cached ({}), {} converted, {} found converted, {} evicted",
                l.ready,
                l.parts,
                mib(l.cached_bytes),
                l.converted,
                l.reopened,
                l.evicted
            )?;
        }
        if let Some(r) = self.remote {
            let blocks = r.memory_hits + r.disk_hits + r.misses;
            writeln!(
                f,
                "object storage: {} requests, {} fetched; block cache: {} memory hits, \
                 {} cache-directory hits, {} misses ({:.1} % hits)",
                r.requests,
                mib(r.bytes_fetched),
                r.memory_hits,
                r.disk_hits,
                r.misses,
                if blocks == 0 {
                    0.0
                } else {
                    100.0 * (r.memory_hits + r.disk_hits) as f64 / blocks as f64
                }
            )?;
        }
        if !self.recorded {
            return writeln!(f, "stage recording was off");
        }
        writeln!(
            f,
            "{:<14} {:>10} {:>7} {:>10} {:>10} {:>10}",
            "stage", "total", "share", "p50", "p95", "p99"
        )?;
        for (stage, t) in self.stages.iter().filter(|(_, t)| t.count > 0) {
            writeln!(
                f,
                "{:<14} {:>10} {:>6.1}% {:>10} {:>10} {:>10}",
                stage.name(),
                human(t.total),
                100.0 * self.share(stage),
                human(t.p50),
                human(t.p95),
                human(t.p99),
            )?;
        }
        if !self.synchronous && self.batches > 0 {
            // The workers' time in neither a batch nor a wait: claiming
            // steps, handing batches over, waking up.
            let lanes = self.wall.as_secs_f64() * self.per_worker.len().max(1) as f64;
            let other = (lanes
                - self.stages.busy().as_secs_f64()
                - self.stages[Stage::WaitConsumer].total.as_secs_f64())
            .max(0.0);
            if lanes > 0.0 {
                writeln!(
                    f,
                    "{:<14} {:>10} {:>6.1}%   (the workers between batches: hand-over, wake-ups)",
                    "(other)",
                    human(Duration::from_secs_f64(other)),
                    100.0 * other / lanes,
                )?;
            }
        }
        let b = &self.batch;
        if b.count > 0 {
            writeln!(
                f,
                "{:<14} {:>10} {:>7} {:>10} {:>10} {:>10}",
                "(batch)",
                human(b.total),
                "",
                human(b.p50),
                human(b.p95),
                human(b.p99),
            )?;
        }
        let waited = if self.synchronous {
            "spent making batches in next"
        } else {
            "waited for batches"
        };
        match self.bottleneck() {
            None => writeln!(f, "bottleneck: none yet (no batch made)"),
            Some(Bottleneck::Stage(s)) => writeln!(
                f,
                "bottleneck: {s} ({:.1} % of the workers' time); the consumer {waited} {:.1} % \
                 of the wall time",
                100.0 * self.share(s),
                100.0 * self.input_share()
            ),
            Some(Bottleneck::Consumer) => writeln!(
                f,
                "bottleneck: the consumer (it {waited} only {:.1} % of the wall time; the \
                 input pipeline keeps up)",
                100.0 * self.input_share()
            ),
        }
    }
}
