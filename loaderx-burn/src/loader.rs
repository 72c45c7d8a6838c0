//! burn's [`DataLoader`] trait implemented directly on the loaderx DataLoader.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::DatasetError;
use burn::tensor::Device;
use loaderx_core::loader::{Batch, Stream};
use loaderx_core::sampler::{Sampler, SamplerMode};

use crate::dataset::{ZrecordDataset, check_streams};
use crate::error::{BoxError, Error, Result};
use crate::host::HostBatch;
use crate::tensors::TensorBatch;

type MapFn<O> = Arc<dyn Fn(HostBatch) -> Result<O, BoxError> + Send + Sync>;

/// The loaderx pipeline of one loader: endless, in step order; `None` for
/// steps outside a sliced loader's items.
type Pipeline<O> = loaderx_core::DataLoader<Option<O>>;

#[derive(Debug, Default)]
struct Counters {
    batches: AtomicU64,
    items: AtomicU64,
    wait_ns: AtomicU64,
    pipelines: AtomicU64,
}

/// What a [`BurnDataLoader`] (and every loader derived from it by
/// `to_device` or `slice`) delivered so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LoaderStats {
    /// Batches delivered.
    pub batches: u64,
    /// Records delivered.
    pub items: u64,
    /// Time consumers spent blocked waiting for a batch.
    pub waited: Duration,
    /// loaderx pipelines started: one per loader at its first batch, plus
    /// one per seek (a slice's next epoch, an iterator dropped early, an error).
    pub pipelines: u64,
}

struct Config {
    streams: Vec<(String, Stream)>,
    batch_size: usize,
    mode: SamplerMode,
    seed: u64,
    workers: usize,
    prefetch: usize,
    shard: Option<(usize, usize)>,
    steps_per_epoch: u64,
}

struct Shared<O> {
    config: Config,
    map: MapFn<O>,
    counters: Counters,
}

/// Configures a [`BurnDataLoader`]; see its docs.
pub struct BurnDataLoaderBuilder {
    streams: Vec<(String, Stream)>,
    batch_size: usize,
    mode: SamplerMode,
    seed: u64,
    workers: usize,
    prefetch: usize,
    shard: Option<(usize, usize)>,
    start_epoch: u64,
    start_step: u64,
}

impl Default for BurnDataLoaderBuilder {
    fn default() -> Self {
        BurnDataLoaderBuilder {
            streams: Vec::new(),
            batch_size: 256,
            mode: SamplerMode::Cyclic,
            seed: 42,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get().min(4)),
            prefetch: 2,
            shard: None,
            start_epoch: 0,
            start_step: 0,
        }
    }
}

impl BurnDataLoaderBuilder {
    /// Adds a named stream; every stream must hold the same number of records.
    pub fn stream(mut self, name: impl Into<String>, stream: impl Into<Stream>) -> Self {
        self.streams.push((name.into(), stream.into()));
        self
    }

    /// Adds every stream of `dataset`.
    pub fn dataset(mut self, dataset: &ZrecordDataset) -> Self {
        for (name, stream) in dataset.streams() {
            self.streams.push((name.to_owned(), stream.clone()));
        }
        self
    }

    /// Records per batch (default 256).
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sampling mode (default `Cyclic`: every epoch a fresh permutation, no
    /// record twice; `Sequential` reads in store order, for evaluation).
    pub fn mode(mut self, mode: SamplerMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sampler seed (default 42).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Worker threads gathering and mapping batches (default: up to 4).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Extra finished batches allowed to wait for the consumer (default 2).
    pub fn prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Reads only rank `rank`'s share of every step (multi-host training).
    pub fn shard(mut self, rank: usize, world_size: usize) -> Self {
        self.shard = Some((rank, world_size));
        self
    }

    /// The epoch (0-based) the first `iter()` delivers: to resume after `k`
    /// finished epochs, e.g. with burn's `SupervisedTraining::checkpoint(k)`,
    /// pass `k`. Adds to [`start_step`](Self::start_step).
    pub fn start_epoch(mut self, epoch: u64) -> Self {
        self.start_epoch = epoch;
        self
    }

    /// The first step (counted from the start of training) the first
    /// `iter()` delivers; that iterator ends with its epoch, so a run resumed
    /// mid-epoch delivers exactly the batches the interrupted one had left.
    pub fn start_step(mut self, step: u64) -> Self {
        self.start_step = step;
        self
    }

    /// A loader whose batches `map` builds from each [`HostBatch`] on the
    /// loader's worker threads (and on the device burn asks for through
    /// `to_device`). `map`'s errors reach burn as [`DatasetError`]s.
    pub fn build<O, E, F>(self, device: &Device, map: F) -> Result<BurnDataLoader<O>>
    where
        O: Send + 'static,
        E: Into<BoxError>,
        F: Fn(HostBatch) -> Result<O, E> + Send + Sync + 'static,
    {
        let len = check_streams(&self.streams)?;
        if self.workers == 0 {
            return Err(Error::Invalid("a loader needs at least one worker".into()));
        }
        let mut sampler = Sampler::new(len, self.batch_size, self.mode, self.seed)?;
        if let Some((rank, world)) = self.shard {
            sampler = sampler.shard(rank, world)?;
        }
        let steps_per_epoch = sampler.steps_per_epoch();
        let start = self
            .start_epoch
            .checked_mul(steps_per_epoch)
            .and_then(|s| s.checked_add(self.start_step))
            .ok_or_else(|| Error::Invalid("start step overflows u64".into()))?;
        let items = steps_per_epoch * self.batch_size as u64;
        Ok(BurnDataLoader {
            shared: Arc::new(Shared {
                config: Config {
                    streams: self.streams,
                    batch_size: self.batch_size,
                    mode: self.mode,
                    seed: self.seed,
                    workers: self.workers,
                    prefetch: self.prefetch,
                    shard: self.shard,
                    steps_per_epoch,
                },
                map: Arc::new(move |b| map(b).map_err(Into::into)),
                counters: Counters::default(),
            }),
            device: device.clone(),
            items: 0..items,
            next_epoch: AtomicU64::new(start / steps_per_epoch),
            resume_offset: AtomicU64::new(start % steps_per_epoch),
            pipeline: Mutex::new(None),
        })
    }

    /// A loader of [`TensorBatch`]es: every stream as tensors of its natural kind.
    pub fn build_tensors(self, device: &Device) -> Result<BurnDataLoader<TensorBatch>> {
        self.build(device, |b: HostBatch| Ok::<_, Error>(b.to_tensors()))
    }
}

/// burn's [`DataLoader`] backed by the loaderx DataLoader: batches are
/// gathered natively (one parallel gather per stream and step, into recycled
/// buffers, no per-record allocation), mapped to the model's batch type on
/// the loader's worker threads, and delivered in step order.
///
/// - **Epochs.** An epoch is [`steps_per_epoch`](Self::steps_per_epoch)
///   steps of the sampler (`len / batch_size` for one rank; the remainder
///   is dropped, and for `Cyclic` sampling changes every epoch), so every
///   batch is full. Each `iter()` call delivers the next epoch: the `k`-th
///   call (from 0) yields steps `k * steps_per_epoch ..`, exactly what an
///   uninterrupted run yields, so a run is reproducible whatever the worker
///   count and resumes exactly ([`BurnDataLoaderBuilder::start_epoch`],
///   [`BurnDataLoaderBuilder::start_step`]).
/// - **burn's contract.** [`num_items`](DataLoader::num_items) is the records
///   of one epoch and the iterator's `progress()` counts them;
///   [`to_device`](DataLoader::to_device) gives the same loader (same next
///   epoch) producing tensors on another device; [`slice`](DataLoader::slice)
///   keeps the items at positions `start..end` of every epoch, in the same
///   order and batches (clipped at the ends), so the slices burn's
///   multi-device training makes are disjoint and cover the epoch.
/// - **Threads.** A loader starts its loaderx workers at its first batch
///   and keeps them between epochs (the next epoch is prefetched while the
///   model validates); errors end the epoch as a `DatasetError` and the next
///   `iter()` starts afresh. Dropping the loader joins its workers.
///
/// ```
/// use burn::data::dataloader::DataLoader;
/// use burn::tensor::{Device, Int, Tensor};
/// use loaderx_burn::BurnDataLoader;
/// use loaderx_core::{Codec, Dense, DenseWriter};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<u8>::create(dir.path().join("image"), &[2, 2], Codec::Zstd)?;
/// w.append_slice(&(0..40).collect::<Vec<u8>>(), 10)?;
/// w.close()?;
/// let mut w = DenseWriter::<u8>::create(dir.path().join("label"), &[], Codec::Raw)?;
/// w.append_slice(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 10)?;
/// w.close()?;
///
/// #[derive(Debug, Clone)]
/// struct Example { x: Tensor<3>, y: Tensor<1, Int> }
///
/// let loader = BurnDataLoader::builder()
///     .stream("image", Dense::<u8>::open(dir.path().join("image"))?)
///     .stream("label", Dense::<u8>::open(dir.path().join("label"))?)
///     .batch_size(4)
///     .seed(7)
///     .build(&Device::flex(), |b| {
///         Ok::<_, loaderx_burn::Error>(Example {
///             x: b.float::<3>("image")? / 255.0,
///             y: b.int::<1>("label")?,
///         })
///     })?;
/// assert_eq!(loader.num_items(), 8);                     // 2 steps of 4
/// let batches: Vec<Example> = loader.iter().collect::<Result<_, _>>()?;
/// assert_eq!(batches.len(), 2);
/// assert_eq!(batches[0].x.dims(), [4, 2, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BurnDataLoader<O> {
    shared: Arc<Shared<O>>,
    device: Device,
    /// Positions within an epoch this loader delivers.
    items: Range<u64>,
    next_epoch: AtomicU64,
    /// Steps into `next_epoch` the next `iter()` starts at (mid-epoch resume).
    resume_offset: AtomicU64,
    pipeline: Mutex<Option<Pipeline<O>>>,
}

impl BurnDataLoader<()> {
    /// A builder with the defaults: batch 256, `Cyclic` sampling with seed
    /// 42, up to 4 workers, prefetch 2, starting at epoch 0.
    pub fn builder() -> BurnDataLoaderBuilder {
        BurnDataLoaderBuilder::default()
    }
}

impl<O: Send + 'static> BurnDataLoader<O> {
    /// Sampler steps per epoch.
    pub fn steps_per_epoch(&self) -> u64 {
        self.shared.config.steps_per_epoch
    }

    /// Records per batch.
    pub fn batch_size(&self) -> usize {
        self.shared.config.batch_size
    }

    /// The epoch the next `iter()` call delivers (0-based).
    pub fn next_epoch(&self) -> u64 {
        self.next_epoch.load(Ordering::SeqCst)
    }

    /// The device batches are built for.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// What this loader and every loader derived from it delivered so far.
    pub fn stats(&self) -> LoaderStats {
        let c = &self.shared.counters;
        LoaderStats {
            batches: c.batches.load(Ordering::Relaxed),
            items: c.items.load(Ordering::Relaxed),
            waited: Duration::from_nanos(c.wait_ns.load(Ordering::Relaxed)),
            pipelines: c.pipelines.load(Ordering::Relaxed),
        }
    }

    fn derive(&self, device: Device, items: Range<u64>) -> BurnDataLoader<O> {
        BurnDataLoader {
            shared: Arc::clone(&self.shared),
            device,
            items,
            next_epoch: AtomicU64::new(self.next_epoch.load(Ordering::SeqCst)),
            resume_offset: AtomicU64::new(self.resume_offset.load(Ordering::SeqCst)),
            pipeline: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Pipeline<O>>> {
        self.pipeline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn start_pipeline(&self, step: u64) -> Result<Pipeline<O>> {
        let c = &self.shared.config;
        let mut builder = loaderx_core::DataLoader::builder();
        for (name, stream) in &c.streams {
            builder = builder.stream(name.clone(), stream.clone());
        }
        builder = builder
            .batch_size(c.batch_size)
            .mode(c.mode)
            .seed(c.seed)
            .workers(c.workers)
            .prefetch(c.prefetch)
            .start_step(step);
        if let Some((rank, world)) = c.shard {
            builder = builder.shard(rank, world);
        }
        let map = Arc::clone(&self.shared.map);
        let device = self.device.clone();
        let items = self.items.clone();
        let (spe, b) = (c.steps_per_epoch, c.batch_size as u64);
        let pipeline = builder.build_with(move |batch: Batch| {
            let lo = (batch.step() % spe) * b;
            let first = items.start.max(lo) - lo;
            let end = items.end.clamp(lo, lo + b) - lo;
            if first >= end {
                return Ok::<_, BoxError>(None);
            }
            let host = HostBatch::from_loader(batch, first as usize..end as usize, device.clone());
            map(host).map(Some)
        })?;
        self.shared
            .counters
            .pipelines
            .fetch_add(1, Ordering::Relaxed);
        Ok(pipeline)
    }

    /// The batch of `step`, seeking (restarting the pipeline) when the
    /// pipeline is elsewhere.
    fn fetch(&self, step: u64) -> Result<Option<O>> {
        let mut guard = self.lock();
        if guard.as_ref().is_none_or(|p| p.step() != step) {
            // Join the old workers before starting new ones.
            *guard = None;
            *guard = Some(self.start_pipeline(step)?);
        }
        let result = guard.as_mut().and_then(Iterator::next);
        match result {
            Some(Ok(batch)) => Ok(batch),
            Some(Err(e)) => {
                *guard = None;
                Err(e.into())
            }
            None => {
                *guard = None;
                Err(Error::Invalid("the loaderx pipeline stopped".into()))
            }
        }
    }
}

impl<O> std::fmt::Debug for BurnDataLoader<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.shared.config;
        f.debug_struct("BurnDataLoader")
            .field(
                "streams",
                &c.streams.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("batch_size", &c.batch_size)
            .field("mode", &c.mode)
            .field("steps_per_epoch", &c.steps_per_epoch)
            .field("items", &self.items)
            .field("next_epoch", &self.next_epoch.load(Ordering::SeqCst))
            .field("device", &self.device)
            .finish()
    }
}

struct EpochIter<'a, O> {
    loader: &'a BurnDataLoader<O>,
    epoch: u64,
    /// Next step within the epoch, and the end of this iterator's steps.
    next: u64,
    end: u64,
    failed: bool,
}

impl<O: Send + 'static> Iterator for EpochIter<'_, O> {
    type Item = Result<O, DatasetError>;

    fn next(&mut self) -> Option<Self::Item> {
        let spe = self.loader.steps_per_epoch();
        while !self.failed && self.next < self.end {
            let step = self.epoch * spe + self.next;
            self.next += 1;
            let started = Instant::now();
            let result = self.loader.fetch(step);
            let c = &self.loader.shared.counters;
            let waited = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            c.wait_ns.fetch_add(waited, Ordering::Relaxed);
            match result {
                Ok(Some(batch)) => {
                    let b = self.loader.batch_size() as u64;
                    let (lo, hi) = ((self.next - 1) * b, self.next * b);
                    let items = &self.loader.items;
                    let n = items.end.min(hi).saturating_sub(items.start.max(lo));
                    c.batches.fetch_add(1, Ordering::Relaxed);
                    c.items.fetch_add(n, Ordering::Relaxed);
                    return Some(Ok(batch));
                }
                // A step outside this loader's items: nothing to deliver.
                Ok(None) => continue,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(DatasetError::new(e)));
                }
            }
        }
        None
    }
}

impl<O: Send + 'static> DataLoaderIterator<O> for EpochIter<'_, O> {
    fn progress(&self) -> Progress {
        let b = self.loader.batch_size() as u64;
        let items = &self.loader.items;
        let done = (self.next * b).clamp(items.start, items.end) - items.start;
        Progress::new(
            usize::try_from(done).unwrap_or(usize::MAX),
            self.loader.num_items(),
            Some("items".to_string()),
        )
    }
}

impl<O: Send + 'static> DataLoader<O> for BurnDataLoader<O> {
    /// The next epoch (see the [type docs](BurnDataLoader)).
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<O> + 'a> {
        let epoch = self.next_epoch.fetch_add(1, Ordering::SeqCst);
        let offset = self.resume_offset.swap(0, Ordering::SeqCst);
        let b = self.batch_size() as u64;
        let (start, end) = (self.items.start, self.items.end);
        let first = (start / b).max(offset);
        let last = if start < end { end.div_ceil(b) } else { first };
        Box::new(EpochIter {
            loader: self,
            epoch,
            next: first,
            end: last.max(first),
            failed: false,
        })
    }

    fn num_items(&self) -> usize {
        usize::try_from(self.items.end - self.items.start).unwrap_or(usize::MAX)
    }

    fn to_device(&self, device: &Device) -> Arc<dyn DataLoader<O>> {
        Arc::new(self.derive(device.clone(), self.items.clone()))
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<O>> {
        let n = self.items.end - self.items.start;
        let start = (start as u64).min(n);
        let end = (end as u64).clamp(start, n);
        Arc::new(self.derive(
            self.device.clone(),
            self.items.start + start..self.items.start + end,
        ))
    }
}
