//! [`Recorder`]: the loader's flight recorder. Each worker times its
//! batches by stage ([`super::lap`]) and adds them to its own accumulator
//! ([`Accum`], behind a lock only it and a snapshot take); the consumer
//! times its waits in its own. From the same records come the loader's
//! [`LoaderStats`], the `tracing` spans (a batch span with rank, step and
//! worker, stage spans inside it, a slow batch's record ids) and the trace
//! file ([`TraceFile`]).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::histogram::Histogram;
use super::lap::{self, Lapped, TARGET, Token, nanos};
use super::stage::{STAGES, Stage};
use super::stats::{LoaderStats, StageStats, StageTimes, WorkerStats};
use super::trace_file::TraceFile;
use crate::error::Error;

/// A batch this many times slower than its worker's recent average (after
/// [`SLOW_AFTER`] batches) is slow: its `tracing` span gets `slow = true`
/// and a `slow batch` event with its record ids, and its trace file event
/// the ids.
const SLOW_FACTOR: u64 = 3;

/// Batches a worker makes before any is called slow.
const SLOW_AFTER: u64 = 8;

/// Times and counts of one lane (a worker, or the consumer) since the
/// loader started.
#[derive(Debug, Clone, Default)]
pub(crate) struct Accum {
    /// Nanoseconds per stage.
    ns: [u64; STAGES],
    /// Per batch (or wait) nanoseconds per stage.
    hist: [Histogram; STAGES],
    /// Batch wall times.
    batch: Histogram,
    batch_ns: u64,
    bytes_read: u64,
    bytes_delivered: u64,
    /// The consumer's: batches ready when it took one, summed, and takes.
    depth_sum: u64,
    takes: u64,
    /// A moving average of batch wall times (slow batches).
    recent_ns: u64,
}

impl Accum {
    fn add(&mut self, stage: Stage, ns: u64) {
        self.ns[stage.index()] = self.ns[stage.index()].saturating_add(ns);
        self.hist[stage.index()].record(ns);
    }

    /// Counts a batch; whether it was slow.
    fn add_batch(&mut self, lapped: &Lapped) -> bool {
        for (i, &ns) in lapped.ns.iter().enumerate() {
            if ns > 0 {
                self.ns[i] = self.ns[i].saturating_add(ns);
                self.hist[i].record(ns);
            }
        }
        let wall: u64 = lapped.ns.iter().fold(0, |a, &b| a.saturating_add(b));
        self.batch.record(wall);
        self.batch_ns = self.batch_ns.saturating_add(wall);
        self.bytes_read = self.bytes_read.saturating_add(lapped.read_bytes);
        self.bytes_delivered = self.bytes_delivered.saturating_add(lapped.delivered);
        let seen = self.batch.count();
        let slow = seen > SLOW_AFTER && wall > self.recent_ns.saturating_mul(SLOW_FACTOR);
        self.recent_ns = if seen == 1 {
            wall
        } else {
            self.recent_ns - self.recent_ns / 16 + wall / 16
        };
        slow
    }

    /// The counts since `earlier`, an earlier state of this accumulator.
    fn since(&self, earlier: &Accum) -> Accum {
        let mut out = self.clone();
        for i in 0..STAGES {
            out.ns[i] = self.ns[i].saturating_sub(earlier.ns[i]);
            out.hist[i] = self.hist[i].since(&earlier.hist[i]);
        }
        out.batch = self.batch.since(&earlier.batch);
        out.batch_ns = self.batch_ns.saturating_sub(earlier.batch_ns);
        out.bytes_read = self.bytes_read.saturating_sub(earlier.bytes_read);
        out.bytes_delivered = self.bytes_delivered.saturating_sub(earlier.bytes_delivered);
        out.depth_sum = self.depth_sum.saturating_sub(earlier.depth_sum);
        out.takes = self.takes.saturating_sub(earlier.takes);
        out
    }

    fn merge(&mut self, other: &Accum) {
        for i in 0..STAGES {
            self.ns[i] = self.ns[i].saturating_add(other.ns[i]);
            self.hist[i].merge(&other.hist[i]);
        }
        self.batch.merge(&other.batch);
        self.batch_ns = self.batch_ns.saturating_add(other.batch_ns);
        self.bytes_read = self.bytes_read.saturating_add(other.bytes_read);
        self.bytes_delivered = self.bytes_delivered.saturating_add(other.bytes_delivered);
        self.depth_sum = self.depth_sum.saturating_add(other.depth_sum);
        self.takes = self.takes.saturating_add(other.takes);
    }

    fn stage_stats(ns: u64, hist: &Histogram) -> StageStats {
        StageStats {
            total: Duration::from_nanos(ns),
            count: hist.count(),
            p50: Duration::from_nanos(hist.quantile(0.50)),
            p95: Duration::from_nanos(hist.quantile(0.95)),
            p99: Duration::from_nanos(hist.quantile(0.99)),
        }
    }

    fn stages(&self) -> StageTimes {
        let mut t = StageTimes::default();
        for (i, s) in t.0.iter_mut().enumerate() {
            *s = Self::stage_stats(self.ns[i], &self.hist[i]);
        }
        t
    }

    fn worker(&self, worker: usize) -> WorkerStats {
        WorkerStats {
            worker,
            batches: self.batch.count(),
            bytes_read: self.bytes_read,
            bytes_delivered: self.bytes_delivered,
            stages: self.stages(),
            batch: Self::stage_stats(self.batch_ns, &self.batch),
        }
    }
}

/// Every lane's accumulator at one moment.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    at: Instant,
    workers: Vec<Accum>,
    consumer: Accum,
}

/// A batch being timed on a worker ([`Recorder::begin_batch`]).
pub(crate) struct BatchScope {
    token: Token,
    worker: usize,
    step: u64,
    /// The batch's `tracing` span, entered, when a subscriber wants it.
    span: Option<tracing::span::EnteredSpan>,
}

/// The flight recorder of one loader (see the module doc).
pub(crate) struct Recorder {
    enabled: bool,
    start: Instant,
    rank: usize,
    synchronous: bool,
    workers: Vec<Mutex<Accum>>,
    trace: Option<Mutex<TraceFile>>,
    /// The snapshot [`Recorder::stats_since_last`] last took.
    last: Mutex<Option<Snapshot>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("enabled", &self.enabled)
            .field("workers", &self.workers.len())
            .field("trace", &self.trace.is_some())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Recorder {
    /// A recorder for `workers` workers (0: synchronous, the consumer's
    /// thread makes the batches) of rank `rank`; off unless `enabled`;
    /// writing the trace file `trace`, if any.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Io`](crate::ErrorKind::Io) when the trace file cannot
    /// be created.
    pub(crate) fn new(
        enabled: bool,
        workers: usize,
        rank: usize,
        trace: Option<PathBuf>,
    ) -> Result<Recorder, Error> {
        let synchronous = workers == 0;
        let trace = match trace {
            Some(path) if enabled => {
                let mut lanes = vec![(0u32, "consumer".to_owned())];
                for w in 0..workers {
                    lanes.push((
                        u32::try_from(w + 1).unwrap_or(u32::MAX),
                        format!("worker {w}"),
                    ));
                }
                Some(Mutex::new(TraceFile::create(&path, &lanes)?))
            }
            _ => None,
        };
        Ok(Recorder {
            enabled,
            start: Instant::now(),
            rank,
            synchronous,
            workers: (0..workers.max(1)).map(|_| Mutex::default()).collect(),
            trace,
            last: Mutex::new(None),
        })
    }

    /// Whether stages are recorded.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The trace lane of `worker`.
    fn tid(&self, worker: usize) -> u32 {
        if self.synchronous {
            0
        } else {
            u32::try_from(worker + 1).unwrap_or(u32::MAX)
        }
    }

    /// Microseconds since the start, for the trace file.
    fn us(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.start).as_secs_f64() * 1e6
    }

    /// Starts timing step `step`'s batch on this thread (worker `worker`),
    /// in `stage`; `None` when recording is off (or this thread is making
    /// a batch already).
    pub(crate) fn begin_batch(&self, worker: usize, step: u64, stage: Stage) -> Option<BatchScope> {
        if !self.enabled {
            return None;
        }
        let span = tracing::enabled!(target: TARGET, tracing::Level::DEBUG).then(|| {
            tracing::debug_span!(
                target: TARGET,
                "batch",
                rank = self.rank,
                step,
                worker,
                slow = tracing::field::Empty
            )
            .entered()
        });
        let stage_spans =
            span.is_some() && tracing::enabled!(target: TARGET, tracing::Level::TRACE);
        let keep = span.is_some() || self.trace.is_some();
        let token = lap::begin(stage, stage_spans, keep)?;
        Some(BatchScope {
            token,
            worker,
            step,
            span,
        })
    }

    /// Ends the batch `scope` began: adds it to its worker's times, and to
    /// the spans and the trace file.
    pub(crate) fn end_batch(&self, scope: BatchScope) {
        let lapped = lap::end(scope.token);
        let slow = match self.workers.get(scope.worker) {
            Some(accum) => lock(accum).add_batch(&lapped),
            None => false,
        };
        if let Some(span) = &scope.span
            && slow
        {
            span.record("slow", true);
            let wall_us = nanos(lapped.end - lapped.start) / 1000;
            tracing::debug!(
                target: TARGET,
                step = scope.step,
                worker = scope.worker,
                wall_us,
                records = ?lapped.indices,
                "slow batch"
            );
        }
        drop(scope.span);
        if let Some(trace) = &self.trace {
            self.trace_batch(trace, scope.worker, scope.step, &lapped, slow);
        }
    }

    /// The batch's events: `batch`, and its stages one after another in
    /// pipeline order, each as long as its total in the batch (stages that
    /// alternate, as reads and decompression stream by stream, are drawn
    /// summed).
    fn trace_batch(
        &self,
        trace: &Mutex<TraceFile>,
        worker: usize,
        step: u64,
        lapped: &Lapped,
        slow: bool,
    ) {
        let tid = self.tid(worker);
        let start = self.us(lapped.start);
        let wall = lapped
            .end
            .saturating_duration_since(lapped.start)
            .as_secs_f64()
            * 1e6;
        let mut args = format!(
            r#"{{"step":{step},"worker":{worker},"rank":{},"bytes_read":{},"bytes_delivered":{}"#,
            self.rank, lapped.read_bytes, lapped.delivered
        );
        if slow {
            args.push_str(r#","slow":true,"records":"#);
            args.push_str(&serde_json::to_string(&lapped.indices).unwrap_or_default());
        }
        args.push('}');
        let mut t = lock(trace);
        t.complete(tid, "batch", start, wall, &args);
        let mut at = start;
        for (stage, &ns) in Stage::ALL.iter().zip(&lapped.ns) {
            if ns > 0 {
                let dur = ns as f64 / 1e3;
                t.complete(tid, stage.name(), at, dur, "");
                at += dur;
            }
        }
    }

    /// Counts worker `worker`'s wait for room in the window, from `from`
    /// to `to`.
    pub(crate) fn waited_for_consumer(&self, worker: usize, from: Instant, to: Instant) {
        let ns = nanos(to.saturating_duration_since(from));
        if let Some(accum) = self.workers.get(worker) {
            lock(accum).add(Stage::WaitConsumer, ns);
        }
        if let Some(trace) = &self.trace {
            lock(trace).complete(
                self.tid(worker),
                Stage::WaitConsumer.name(),
                self.us(from),
                ns as f64 / 1e3,
                "",
            );
        }
    }

    /// Counts the consumer's taking of step `step` into its accumulator
    /// `consumer`: it waited from `waited.0` to `waited.1` (if it waited),
    /// and `ready` batches were waiting in the window.
    pub(crate) fn took(
        &self,
        consumer: &mut Accum,
        step: u64,
        waited: Option<(Instant, Instant)>,
        ready: usize,
    ) {
        let ns = waited.map_or(0, |(a, b)| nanos(b.saturating_duration_since(a)));
        consumer.add(Stage::WaitBatch, ns);
        consumer.depth_sum = consumer.depth_sum.saturating_add(ready as u64);
        consumer.takes += 1;
        if let (Some(trace), Some((from, _))) = (&self.trace, waited) {
            lock(trace).complete(
                0,
                Stage::WaitBatch.name(),
                self.us(from),
                ns as f64 / 1e3,
                &format!(r#"{{"step":{step}}}"#),
            );
        }
    }

    /// Every lane's accumulator now (`consumer` being the consumer's).
    fn snapshot(&self, consumer: &Accum) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            workers: self.workers.iter().map(|a| lock(a).clone()).collect(),
            consumer: consumer.clone(),
        }
    }

    /// Fills the recorded fields of `stats` with everything since the
    /// start.
    pub(crate) fn stats(&self, consumer: &Accum, stats: &mut LoaderStats) {
        let now = self.snapshot(consumer);
        self.fill(stats, &now, None);
    }

    /// Fills the recorded fields of `stats` with what happened since the
    /// last call (or the start), and makes now the next call's start.
    pub(crate) fn stats_since_last(&self, consumer: &Accum, stats: &mut LoaderStats) {
        let mut last = lock(&self.last);
        let now = self.snapshot(consumer);
        self.fill(stats, &now, last.as_ref());
        *last = Some(now);
    }

    fn fill(&self, stats: &mut LoaderStats, now: &Snapshot, earlier: Option<&Snapshot>) {
        let (workers, consumer, from) = match earlier {
            Some(e) => (
                now.workers
                    .iter()
                    .zip(&e.workers)
                    .map(|(a, b)| a.since(b))
                    .collect::<Vec<_>>(),
                now.consumer.since(&e.consumer),
                e.at,
            ),
            None => (now.workers.clone(), now.consumer.clone(), self.start),
        };
        let wall = now.at.saturating_duration_since(from);
        fill_lanes(stats, wall, &workers, &consumer);
        stats.synchronous = self.synchronous;
        stats.recorded = self.enabled;
    }

    /// Everything recorded since the start, as raw accumulations
    /// (`consumer` being the consumer's), for adding up with other
    /// loaders' ([`Recorded::merge`]); its counters are left at zero.
    pub(crate) fn recorded(&self, consumer: &Accum) -> Recorded {
        let now = self.snapshot(consumer);
        Recorded {
            wall: now.at.saturating_duration_since(self.start),
            workers: now.workers,
            consumer: now.consumer,
            synchronous: self.synchronous,
            enabled: self.enabled,
            max_in_flight: 0,
            pool_allocations: 0,
            prefetched_bytes: 0,
            remote: None,
            lazy: None,
        }
    }

    /// Closes the trace file (the loader is stopped: nothing more comes).
    pub(crate) fn finish(&self) {
        if let Some(trace) = &self.trace {
            lock(trace).finish();
        }
    }
}

/// Fills the recorded times and counts of `stats` from worker lanes
/// `workers` (by worker number) and the consumer's `consumer`, over `wall`.
fn fill_lanes(stats: &mut LoaderStats, wall: Duration, workers: &[Accum], consumer: &Accum) {
    let mut all = consumer.clone();
    for w in workers {
        all.merge(w);
    }
    stats.wall = wall;
    stats.batches = all.batch.count();
    stats.bytes_read = all.bytes_read;
    stats.bytes_delivered = all.bytes_delivered;
    stats.queue_depth = if all.takes > 0 {
        all.depth_sum as f64 / all.takes as f64
    } else {
        0.0
    };
    stats.stages = all.stages();
    stats.batch = Accum::stage_stats(all.batch_ns, &all.batch);
    stats.per_worker = workers
        .iter()
        .enumerate()
        .map(|(i, w)| w.worker(i))
        .collect();
}

/// What one or more loaders recorded since they started, as raw
/// accumulations: pipelines that ran one after another or side by side
/// (an [`EpochLoader`](super::EpochLoader)'s) add up with
/// [`merge`](Self::merge) with their percentiles exact, histograms being
/// added, not finished stats.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    /// Their wall times, summed.
    wall: Duration,
    /// Each worker number's lanes, added up.
    workers: Vec<Accum>,
    /// The consumers', added up.
    consumer: Accum,
    synchronous: bool,
    enabled: bool,
    /// The largest of the loaders'.
    pub(crate) max_in_flight: usize,
    /// The largest of the loaders' (their staging is shared: its count
    /// grows).
    pub(crate) pool_allocations: u64,
    /// Summed.
    pub(crate) prefetched_bytes: u64,
    /// The latest loader's (the stores are shared: their counters grow).
    pub(crate) remote: Option<crate::RemoteStats>,
    pub(crate) lazy: Option<crate::lazy::LazyStats>,
}

impl Recorded {
    /// Nothing recorded yet by loaders of `workers` workers (0:
    /// synchronous), recording if `enabled`.
    pub(crate) fn new(workers: usize, enabled: bool) -> Recorded {
        Recorded {
            wall: Duration::ZERO,
            workers: vec![Accum::default(); workers.max(1)],
            consumer: Accum::default(),
            synchronous: workers == 0,
            enabled,
            max_in_flight: 0,
            pool_allocations: 0,
            prefetched_bytes: 0,
            remote: None,
            lazy: None,
        }
    }

    /// Adds `other`'s: wall times summed, lanes merged by worker number,
    /// the consumers' merged.
    pub(crate) fn merge(&mut self, other: &Recorded) {
        self.wall = self.wall.saturating_add(other.wall);
        if self.workers.len() < other.workers.len() {
            self.workers
                .resize_with(other.workers.len(), Accum::default);
        }
        for (mine, theirs) in self.workers.iter_mut().zip(&other.workers) {
            mine.merge(theirs);
        }
        self.consumer.merge(&other.consumer);
        self.max_in_flight = self.max_in_flight.max(other.max_in_flight);
        self.pool_allocations = self.pool_allocations.max(other.pool_allocations);
        self.prefetched_bytes = self.prefetched_bytes.saturating_add(other.prefetched_bytes);
        self.lazy = match (self.lazy, other.lazy) {
            (Some(a), Some(b)) if a.converted + a.reopened >= b.converted + b.reopened => Some(a),
            (a, b) => b.or(a),
        };
        self.remote = match (self.remote, other.remote) {
            (Some(a), Some(b)) if a.requests + a.misses >= b.requests + b.misses => Some(a),
            (a, b) => b.or(a),
        };
    }

    /// The stats of everything added up: `wall` is the sum of the
    /// loaders' wall times.
    pub(crate) fn stats(&self) -> LoaderStats {
        let mut stats = LoaderStats::empty();
        stats.max_in_flight = self.max_in_flight;
        stats.pool_allocations = self.pool_allocations;
        stats.prefetched_bytes = self.prefetched_bytes;
        stats.remote = self.remote;
        stats.lazy = self.lazy;
        fill_lanes(&mut stats, self.wall, &self.workers, &self.consumer);
        stats.synchronous = self.synchronous;
        stats.recorded = self.enabled;
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lapped(ns: &[(Stage, u64)]) -> Lapped {
        let start = Instant::now();
        let mut all = [0u64; STAGES];
        for &(s, n) in ns {
            all[s.index()] = n;
        }
        let wall: u64 = all.iter().sum();
        Lapped {
            start,
            end: start + Duration::from_nanos(wall),
            ns: all,
            read_bytes: 10,
            delivered: 20,
            indices: Vec::new(),
        }
    }

    #[test]
    fn stats_since_the_last_snapshot_hold_only_the_period() {
        let r = Recorder::new(true, 2, 0, None).unwrap();
        let mut consumer = Accum::default();
        let add = |w: usize, read: u64| {
            let slow =
                lock(&r.workers[w]).add_batch(&lapped(&[(Stage::Sample, 5), (Stage::Read, read)]));
            assert!(!slow);
        };
        add(0, 100);
        add(1, 300);
        r.took(&mut consumer, 0, None, 2);
        let mut s = LoaderStats::empty();
        r.stats_since_last(&consumer, &mut s);
        assert_eq!(s.batches, 2);
        assert_eq!(s.stages[Stage::Read].total, Duration::from_nanos(400));
        assert_eq!(
            s.per_worker[1].stages[Stage::Read].total,
            Duration::from_nanos(300)
        );
        assert_eq!(s.bytes_read, 20);
        assert_eq!(s.queue_depth, 2.0);
        add(0, 1000);
        r.took(&mut consumer, 1, None, 1);
        r.stats_since_last(&consumer, &mut s);
        assert_eq!(s.batches, 1);
        assert_eq!(s.stages[Stage::Read].total, Duration::from_nanos(1000));
        assert!(s.stages[Stage::Read].p50 > Duration::from_nanos(800));
        assert_eq!(s.per_worker[1].batches, 0);
        assert_eq!(s.queue_depth, 1.0);
        // Nothing since: an empty period.
        r.stats_since_last(&consumer, &mut s);
        assert_eq!(s.batches, 0);
        assert_eq!(s.stages.busy(), Duration::ZERO);
        assert_eq!(s.bottleneck(), None);
        // Since the start: everything.
        r.stats(&consumer, &mut s);
        assert_eq!(s.batches, 3);
        assert_eq!(s.stages[Stage::Read].total, Duration::from_nanos(1400));
        assert_eq!(s.stages[Stage::WaitBatch].count, 2);
    }

    #[test]
    fn a_batch_much_slower_than_its_workers_recent_ones_is_slow() {
        let mut a = Accum::default();
        for _ in 0..20 {
            assert!(!a.add_batch(&lapped(&[(Stage::Read, 1000)])));
        }
        assert!(a.add_batch(&lapped(&[(Stage::Read, 10_000)])));
    }
    #[test]
    fn recorded_loaders_add_up_lane_by_lane_with_exact_percentiles() {
        // Two loaders (one of 1 worker, one of 2) and one that saw it all.
        let (a, b, whole) = (
            Recorder::new(true, 1, 0, None).unwrap(),
            Recorder::new(true, 2, 0, None).unwrap(),
            Recorder::new(true, 2, 0, None).unwrap(),
        );
        let (mut ca, mut cb, mut cw) = (Accum::default(), Accum::default(), Accum::default());
        let batch = |r: &Recorder, w: usize, read: u64| {
            lock(&r.workers[w]).add_batch(&lapped(&[(Stage::Read, read)]));
        };
        for read in [100, 200, 300, 400] {
            batch(&a, 0, read);
            batch(&whole, 0, read);
        }
        for read in [10_000, 20_000] {
            batch(&b, 1, read);
            batch(&whole, 1, read);
        }
        batch(&b, 0, 50);
        batch(&whole, 0, 50);
        r_took(&a, &mut ca, 3);
        r_took(&whole, &mut cw, 3);
        r_took(&b, &mut cb, 1);
        r_took(&whole, &mut cw, 1);
        std::thread::sleep(Duration::from_millis(2));
        let mut sum = Recorded::new(1, true);
        let (ra, rb) = (a.recorded(&ca), b.recorded(&cb));
        sum.merge(&ra);
        sum.merge(&rb);
        let got = sum.stats();
        let mut want = LoaderStats::empty();
        whole.stats(&cw, &mut want);
        assert_eq!(got.stages, want.stages, "exact: histograms added");
        assert_eq!(got.batch, want.batch);
        assert_eq!(got.per_worker, want.per_worker, "by worker number");
        assert_eq!((got.batches, got.bytes_read), (7, 70));
        assert_eq!(got.queue_depth, 2.0);
        assert_eq!(got.wall, ra.wall + rb.wall);
        assert!(got.wall >= Duration::from_millis(4));
        // Not the median of the medians: 5 of the 7 batches read ≤ 400 ns.
        assert!(got.stages[Stage::Read].p50 < Duration::from_nanos(500));
    }

    fn r_took(r: &Recorder, consumer: &mut Accum, ready: usize) {
        let t = Instant::now();
        r.took(
            consumer,
            0,
            Some((t, t + Duration::from_nanos(1000))),
            ready,
        );
    }
}
