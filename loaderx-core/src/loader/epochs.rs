//! Epochs over the step-based loader: what a training framework's data
//! loader trait needs (one pass per call, resume mid-pass, per-device copies,
//! slices at whole batches, progress), framework-neutral.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::recorder::Recorded;
use super::{BoxError, BufferPool, DataLoader, DataLoaderBuilder, LoaderStats, Staging};
use crate::error::Error;
use crate::loader::Batch;
use crate::sampler::Sampler;

type MapFn<T, C, B> = Arc<dyn Fn(Batch<B>, &C) -> Result<T, BoxError> + Send + Sync>;

#[derive(Debug, Default)]
struct Counters {
    batches: AtomicU64,
    items: AtomicU64,
    wait_ns: AtomicU64,
    pipelines: AtomicU64,
}

/// What an [`EpochLoader`] (and every loader derived from it by
/// [`with_context`](EpochLoader::with_context) or
/// [`slice`](EpochLoader::slice)) delivered so far; where the time went
/// per stage is [`EpochLoader::loader_stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct EpochStats {
    /// Batches delivered.
    pub batches: u64,
    /// Records delivered.
    pub items: u64,
    /// Time consumers spent blocked waiting for a batch: in the pipeline,
    /// and starting one when a batch is asked for elsewhere (a seek stops
    /// the old pipeline's workers and starts new ones). At least the
    /// [`input_wait`](super::LoaderStats::input_wait) of
    /// [`loader_stats`](EpochLoader::loader_stats), which counts the
    /// pipelines' waits only (or, with no workers, their batches).
    pub waited: Duration,
    /// Loader pipelines started: one per loader at its first batch, plus
    /// one per seek (a slice's next epoch, an iterator dropped early, an error).
    pub pipelines: u64,
}

struct Shared<T, C, S: Staging> {
    /// The configuration every pipeline is a clone of, with the resolved
    /// sampler (at step 0) in place of the sampling settings.
    builder: DataLoaderBuilder<S>,
    /// The sampler the pipelines draw with (at step 0): passes and batch lengths.
    sampler: Sampler,
    /// The builder's [`epochs`](DataLoaderBuilder::epochs): epochs from this
    /// one on are empty.
    end_epoch: Option<u64>,
    map: MapFn<T, C, S::Buffer>,
    counters: Counters,
    /// Every loader's pipeline slot, and what the slots of loaders already
    /// dropped recorded ([`EpochLoader::loader_stats`]). Locked before a
    /// slot, never while holding one.
    recorded: Mutex<Registry<T>>,
}

/// The pipeline slots of the live loaders sharing a [`Shared`], and what
/// those of dropped ones recorded.
struct Registry<T> {
    slots: Vec<Arc<Mutex<Slot<T>>>>,
    dropped: Recorded,
}

/// One loader's pipeline, and what the pipelines it replaced recorded.
struct Slot<T> {
    pipeline: Option<DataLoader<T>>,
    retired: Recorded,
}

impl<T> Slot<T> {
    /// Stops the pipeline, if any (joining its workers), adding what it
    /// recorded to the slot's.
    fn retire(&mut self) {
        if let Some(pipeline) = self.pipeline.take() {
            self.retired.merge(&pipeline.retire());
        }
    }
}

fn lock<M>(m: &Mutex<M>) -> MutexGuard<'_, M> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A loader that delivers one pass of the sampler (an epoch) per
/// [`iter`](Self::iter) call, in step order, with each batch mapped by a
/// function of the batch and a context value (e.g. the device tensors are
/// built on): the framework-neutral half of an adapter's data loader trait.
/// Built by [`DataLoaderBuilder::build_epochs`].
///
/// - **Epochs.** Epoch `e` is steps `e * steps_per_epoch ..
///   (e + 1) * steps_per_epoch` of the sampler, exactly what the endless
///   [`DataLoader`] delivers at those steps, whatever the worker count; each
///   `iter()` call delivers the next epoch. With
///   [`drop_last(false)`](DataLoaderBuilder::drop_last) every record is read
///   once per epoch and the last batch may be partial. A builder's
///   [`epochs(n)`](DataLoaderBuilder::epochs) makes every epoch from `n` on
///   empty.
/// - **Resume.** The first `iter()` starts at the builder's
///   [`start_step`](DataLoaderBuilder::start_step) plus `start_epoch` epochs;
///   a start inside an epoch delivers exactly the batches that epoch had
///   left, and the next `iter()` the following epoch in full.
/// - **Copies and slices.** [`with_context`](Self::with_context) and
///   [`slice`](Self::slice) derive loaders that share the map, the
///   [`stats`](Self::stats) counters and the stage times of
///   [`loader_stats`](Self::loader_stats), and start at the same next
///   epoch; each has its own pipeline. A slice keeps whole batches of each epoch.
/// - **Threads.** A loader starts its workers at its first batch and keeps
///   them between epochs, so the next epoch is prefetched; a batch asked
///   for elsewhere (a slice's next epoch, after an iterator dropped early or
///   an error) restarts them at that step. An error ends its epoch; the next
///   `iter()` starts afresh. Dropping the loader joins its workers.
///
/// ```
/// use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, SamplerMode};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<u32>::create(dir.path().join("x"), &[], Codec::Raw)?;
/// w.append_slice(&(0..10).collect::<Vec<u32>>(), 10)?;
/// w.close()?;
///
/// // The context (here a scale) is handed to the map with every batch.
/// let loader = DataLoader::builder()
///     .stream("x", Dense::<u32>::open(dir.path().join("x"))?)
///     .batch_size(4)
///     .mode(SamplerMode::Sequential)
///     .drop_last(false)
///     .build_epochs(0, 10u32, |b, scale: &u32| {
///         Ok::<_, loaderx_core::Error>(b.dense::<u32>("x")?.iter().map(|v| v * scale).collect::<Vec<u32>>())
///     })?;
/// assert_eq!((loader.steps_per_epoch(), loader.num_items()), (3, 10));
/// for _ in 0..2 {
///     let epoch: Vec<Vec<u32>> = loader.iter().collect::<Result<_, _>>()?;
///     assert_eq!(epoch, [vec![0, 10, 20, 30], vec![40, 50, 60, 70], vec![80, 90]]);
/// }
/// // A slice at record positions 3..10 keeps the batches that start there.
/// let tail = loader.slice(3, 10);
/// assert_eq!((tail.steps(), tail.num_items()), (1..3, 6));
/// assert_eq!(loader.stats().batches, 6);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct EpochLoader<T, C = (), S: Staging = BufferPool> {
    shared: Arc<Shared<T, C, S>>,
    context: C,
    /// Steps within an epoch this loader delivers (all of them, or a slice's).
    steps: Range<u64>,
    /// The placement view of every batch this loader delivers, `(index,
    /// count)`; `(0, 1)`: whole batches.
    view: (usize, usize),
    next_epoch: AtomicU64,
    /// Steps into `next_epoch` the next `iter()` starts at (mid-epoch resume).
    resume_offset: AtomicU64,
    /// Its pipeline, registered in the shared [`Registry`].
    slot: Arc<Mutex<Slot<T>>>,
}

impl<S: Staging> DataLoaderBuilder<S> {
    /// An [`EpochLoader`] over this configuration whose batches `map`
    /// builds from each [`Batch`] and `context`, on the workers. Its first
    /// [`iter`](EpochLoader::iter) starts `start_epoch` epochs after
    /// [`start_step`](Self::start_step) (so `start_epoch(k)` alone resumes
    /// after `k` finished epochs, and a `start_step` past the first epoch
    /// counts from the start of training). Starts no thread yet.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build) for the configuration, and
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when the start step overflows `u64`.
    pub fn build_epochs<T, C, E, F>(
        mut self,
        start_epoch: u64,
        context: C,
        map: F,
    ) -> Result<EpochLoader<T, C, S>, Error>
    where
        T: Send + 'static,
        C: Clone + Send + Sync + 'static,
        E: Into<BoxError>,
        F: Fn(Batch<S::Buffer>, &C) -> Result<T, E> + Send + Sync + 'static,
    {
        let mut sampler = self.resolved_sampler()?;
        if let Some(p) = sampler.resumed_from() {
            return Err(Error::invalid(format!(
                "an EpochLoader's epochs are whole passes: it cannot resume at {p}; \
                 resume at a record position with the step-based DataLoader"
            )));
        }
        let (start, _) = self.bounds(&sampler, start_epoch)?;
        sampler.seek(0);
        let steps_per_epoch = sampler.steps_per_epoch();
        // Its pipelines may start at any epoch: every batch of the run.
        self.placement.check(&sampler, (0, None))?;
        let view = self.placement.single().ok_or_else(|| {
            Error::invalid("an EpochLoader delivers one view: use view(index, count)")
        })?;
        self.placement = super::views::Placement::whole();
        // Every pipeline draws with this sampler, started at its own step.
        self.sampler = Some(sampler.clone());
        self.explicit_shard = false;
        self.explicit_drop_last = false;
        self.start_step = None;
        let empty = Recorded::new(self.workers, self.record);
        let slot = Arc::new(Mutex::new(Slot {
            pipeline: None,
            retired: empty.clone(),
        }));
        Ok(EpochLoader {
            shared: Arc::new(Shared {
                end_epoch: self.epochs,
                builder: self,
                sampler,
                map: Arc::new(move |b, c| map(b, c).map_err(Into::into)),
                counters: Counters::default(),
                recorded: Mutex::new(Registry {
                    slots: vec![Arc::clone(&slot)],
                    dropped: empty,
                }),
            }),
            context,
            steps: 0..steps_per_epoch,
            view,
            next_epoch: AtomicU64::new(start / steps_per_epoch),
            resume_offset: AtomicU64::new(start % steps_per_epoch),
            slot,
        })
    }
}

impl<T: Send + 'static, C: Clone + Send + Sync + 'static, S: Staging> EpochLoader<T, C, S> {
    /// The next epoch: its batches from the resume point (the first call
    /// after a mid-epoch start) or the start of this loader's
    /// [`steps`](Self::steps), to their end; `None` after the last, or after
    /// an error.
    pub fn iter(&self) -> EpochIter<'_, T, C, S> {
        let epoch = self.next_epoch.fetch_add(1, Ordering::SeqCst);
        let offset = self.resume_offset.swap(0, Ordering::SeqCst);
        let steps = self.steps_of(epoch);
        let next = steps.start.max(offset);
        EpochIter {
            loader: self,
            epoch,
            end: steps.end.max(next),
            steps,
            next,
            failed: false,
        }
    }

    /// A loader sharing this one's configuration, map and counters, at the
    /// same next epoch and steps, whose map gets `context` (e.g. another
    /// device); it starts its own pipeline.
    #[must_use]
    pub fn with_context(&self, context: C) -> Self {
        self.derive(context, self.steps.clone())
    }

    /// The batches of this loader's epochs whose *first* record lies at
    /// positions `start..end` of its next epoch (its records counted from
    /// 0, as [`num_items`](Self::num_items) counts them): whole batches,
    /// unchanged and in order. Consecutive ranges covering
    /// `0..num_items()` give disjoint slices that together deliver the
    /// epoch; a slice may be empty (more slices than batches). Shares the
    /// context, map and counters, with a pipeline of its own.
    #[must_use]
    pub fn slice(&self, start: u64, end: u64) -> Self {
        let (s, steps) = (&self.shared.sampler, &self.steps);
        let base = s
            .step_at(self.next_epoch(), steps.start)
            .unwrap_or(steps.start);
        // Positions are clamped to the epoch's records first: past them the
        // slice ends with the epoch, and the lookup never walks further.
        let len = steps.end - steps.start;
        let total = s.records_in(base..base.saturating_add(len));
        let at = |p: u64| {
            if p >= total {
                return steps.end;
            }
            let k = s.step_at_record(base, p).saturating_sub(base);
            steps.start + k.min(len)
        };
        // Positions count this loader's records: a view holds 1/count of each batch.
        let count = self.view.1 as u64;
        let lo = at(start.saturating_mul(count));
        let hi = at(end.saturating_mul(count)).max(lo);
        self.derive(self.context.clone(), lo..hi)
    }

    /// A loader that delivers view `index` of `count` of every batch this
    /// one delivers (its contiguous part
    /// [`view_range`](crate::view_range)`(B, count, index)`, the rule of
    /// [`DataLoaderBuilder::view`]): the same steps, so `count` such
    /// loaders, one per device, step in lockstep and together deliver each
    /// batch once. Shares the context, map and counters, with a pipeline of
    /// its own. A view of a view splits the part again.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when the batches do not split into `count` (see
    /// [`DataLoaderBuilder::view`]) or `index` is not below `count`.
    pub fn view(&self, index: usize, count: usize) -> Result<Self, Error> {
        let (outer, outer_count) = self.view;
        if index >= count {
            // Refused before `outer * count + index` could overflow.
            return Err(Error::invalid(format!(
                "view {index} of {count}: views are numbered 0..{count}"
            )));
        }
        let total = outer_count
            .checked_mul(count)
            .ok_or_else(|| Error::invalid(format!("{outer_count} views of {count} views each")))?;
        let view = (outer * count + index, total);
        super::views::Placement::<S>::one(view.0, view.1).check(&self.shared.sampler, (0, None))?;
        let mut derived = self.derive(self.context.clone(), self.steps.clone());
        derived.view = view;
        Ok(derived)
    }

    /// This loader starting `epochs` epochs later: its next `iter()`
    /// delivers what it would have delivered `epochs` calls later (a
    /// mid-epoch resume point is kept), as if built with `start_epoch`
    /// larger by `epochs` ([`DataLoaderBuilder::build_epochs`]).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when that epoch lies past step `u64::MAX`.
    pub fn skip_epochs(self, epochs: u64) -> Result<Self, Error> {
        let next = self.next_epoch().checked_add(epochs);
        let spe = self.steps_per_epoch();
        match next.and_then(|n| n.checked_mul(spe)) {
            Some(_) => {}
            None => {
                return Err(Error::invalid(format!(
                    "epoch {} + {epochs} of {spe} steps each is past step 2^64",
                    self.next_epoch()
                )));
            }
        }
        self.next_epoch.store(next.unwrap_or(0), Ordering::SeqCst);
        Ok(self)
    }

    /// The placement view of every batch this loader delivers, `(index,
    /// count)`: `(0, 1)` unless made by [`view`](Self::view).
    pub fn view_of(&self) -> (usize, usize) {
        self.view
    }

    /// Records the next `iter()` delivers in full (the same every epoch
    /// unless batch lengths vary, as with `TokenBudget`; 0 past the
    /// builder's `epochs`).
    pub fn num_items(&self) -> u64 {
        let epoch = self.next_epoch();
        self.items_in(epoch, self.steps_of(epoch))
    }

    /// Sampler steps per epoch (of the whole loader; a slice delivers
    /// [`steps`](Self::steps) of them).
    pub fn steps_per_epoch(&self) -> u64 {
        self.shared.sampler.steps_per_epoch()
    }

    /// The steps of every epoch this loader delivers, counted within the
    /// epoch: `0..steps_per_epoch`, or a slice's part.
    pub fn steps(&self) -> Range<u64> {
        self.steps.clone()
    }

    /// Records per full batch.
    pub fn batch_size(&self) -> usize {
        self.shared.sampler.batch_size()
    }

    /// The sampler drawing the batches (at step 0), e.g. for its
    /// [`batch_len`](Sampler::batch_len) or [`epoch_of`](Sampler::epoch_of).
    pub fn sampler(&self) -> &Sampler {
        &self.shared.sampler
    }

    /// The epoch the next `iter()` call delivers (0-based).
    pub fn next_epoch(&self) -> u64 {
        self.next_epoch.load(Ordering::SeqCst)
    }

    /// The context the map gets with every batch.
    pub fn context(&self) -> &C {
        &self.context
    }

    /// What this loader and every loader derived from it delivered so far.
    pub fn stats(&self) -> EpochStats {
        let c = &self.shared.counters;
        EpochStats {
            batches: c.batches.load(Ordering::Relaxed),
            items: c.items.load(Ordering::Relaxed),
            waited: Duration::from_nanos(c.wait_ns.load(Ordering::Relaxed)),
            pipelines: c.pipelines.load(Ordering::Relaxed),
        }
    }

    /// Where the time of this loader and of every loader derived from it
    /// went, per stage and per worker: the [`LoaderStats`] of every
    /// pipeline they ran (each loader's, and those a seek replaced, an
    /// error ended or a dropped loader left) added up, the live ones as
    /// they are now. Print it for the per-stage table and the bottleneck
    /// ([`DataLoader::stats`] for one pipeline).
    ///
    /// The pipelines' accumulations are added, not their finished stats:
    /// the p50/p95/p99 are over every batch of every pipeline, and
    /// [`per_worker`](LoaderStats::per_worker) adds up the workers of the
    /// same number. [`wall`](LoaderStats::wall) is the *sum* of the
    /// pipelines' wall times (each from its start to its end, or now), so
    /// a [`share`](LoaderStats::share) is of the time the pipelines ran,
    /// lane by lane: loaders run side by side (one per device) count
    /// their time once each, and the batches per second of the table's
    /// first line are one pipeline's on average, not the loaders' together.
    /// [`max_in_flight`](LoaderStats::max_in_flight) is the largest of the
    /// pipelines', [`prefetched_bytes`](LoaderStats::prefetched_bytes)
    /// their sum, [`pool_allocations`](LoaderStats::pool_allocations) the
    /// shared staging's count.
    ///
    /// The consumers' wait for batches is the pipelines' own
    /// ([`Stage::WaitBatch`](super::Stage::WaitBatch), from inside
    /// [`DataLoader`]'s `next`): [`EpochStats::waited`] also counts the
    /// time a seek spends stopping a pipeline and starting the next, so it
    /// is at least the [`input_wait`](LoaderStats::input_wait). Like [`stats`](Self::stats), counted since the loader was
    /// built.
    ///
    /// It waits for a loader that is waiting for its batch; call it
    /// between batches or from another thread, never from the map.
    ///
    /// ```
    /// use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, SamplerMode, Stage};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = DenseWriter::<u32>::create(dir.path().join("x"), &[], Codec::Raw)?;
    /// w.append_slice(&(0..100).collect::<Vec<u32>>(), 100)?;
    /// w.close()?;
    /// let loader = DataLoader::builder()
    ///     .stream("x", Dense::<u32>::open(dir.path().join("x"))?)
    ///     .batch_size(10)
    ///     .mode(SamplerMode::Sequential)
    ///     .workers(2)
    ///     .build_epochs(0, (), |b, _: &()| Ok::<_, loaderx_core::Error>(b.len()))?;
    /// assert_eq!(loader.iter().count(), 10);
    /// // A copy (its own pipeline) delivers the next epoch; then it is dropped.
    /// let copy = loader.with_context(());
    /// assert_eq!(copy.iter().count(), 10);
    /// drop(copy);
    /// let stats = loader.loader_stats();
    /// assert_eq!(stats.stages[Stage::WaitBatch].count, 20); // both pipelines' batches
    /// assert!(stats.batches >= 20);
    /// println!("{stats}"); // stage, total, share, p50, p95, p99; the bottleneck
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn loader_stats(&self) -> LoaderStats {
        let registry = lock(&self.shared.recorded);
        let mut all = registry.dropped.clone();
        for slot in &registry.slots {
            let slot = lock(slot);
            all.merge(&slot.retired);
            if let Some(pipeline) = &slot.pipeline {
                all.merge(&pipeline.recorded());
            }
        }
        drop(registry);
        // The staging is shared: its count now covers every pipeline's.
        all.pool_allocations = all
            .pool_allocations
            .max(self.shared.builder.staging.allocations());
        all.stats()
    }

    /// This loader's steps of epoch `epoch`: none past the builder's `epochs`.
    fn steps_of(&self, epoch: u64) -> Range<u64> {
        match self.shared.end_epoch {
            Some(end) if epoch >= end => self.steps.start..self.steps.start,
            _ => self.steps.clone(),
        }
    }

    /// Records in steps `steps` of epoch `epoch` ([`Sampler::records_in`]:
    /// batch lengths vary with `TokenBudget`).
    fn items_in(&self, epoch: u64, steps: Range<u64>) -> u64 {
        let s = &self.shared.sampler;
        let base = s.step_at(epoch, 0).unwrap_or(0);
        let records =
            s.records_in(base.saturating_add(steps.start)..base.saturating_add(steps.end));
        // Every batch splits evenly (checked when the view was made).
        records / self.view.1 as u64
    }

    fn derive(&self, context: C, steps: Range<u64>) -> Self {
        let b = &self.shared.builder;
        let slot = Arc::new(Mutex::new(Slot {
            pipeline: None,
            retired: Recorded::new(b.workers, b.record),
        }));
        lock(&self.shared.recorded).slots.push(Arc::clone(&slot));
        EpochLoader {
            shared: Arc::clone(&self.shared),
            context,
            steps,
            view: self.view,
            next_epoch: AtomicU64::new(self.next_epoch.load(Ordering::SeqCst)),
            resume_offset: AtomicU64::new(self.resume_offset.load(Ordering::SeqCst)),
            slot,
        }
    }

    fn start_pipeline(&self, step: u64) -> Result<DataLoader<T>, Error> {
        let map = Arc::clone(&self.shared.map);
        let context = self.context.clone();
        let (index, count) = self.view;
        let pipeline = self
            .shared
            .builder
            .clone()
            .view(index, count)
            .start_step(step)
            .build_with(move |batch| map(batch, &context))?;
        let pipelines = &self.shared.counters.pipelines;
        pipelines.fetch_add(1, Ordering::Relaxed);
        Ok(pipeline)
    }

    /// The batch of `step`, seeking (restarting the pipeline) when the
    /// pipeline is elsewhere.
    fn fetch(&self, step: u64) -> Result<T, Error> {
        let mut slot = lock(&self.slot);
        if slot.pipeline.as_ref().is_none_or(|p| p.step() != step) {
            // Join the old workers before starting new ones; what they
            // recorded stays counted.
            slot.retire();
            slot.pipeline = Some(self.start_pipeline(step)?);
        }
        let result = slot.pipeline.as_mut().and_then(Iterator::next);
        if !matches!(result, Some(Ok(_))) {
            slot.retire();
        }
        result.unwrap_or_else(|| {
            Err(Error::invalid(format!(
                "the loader stopped before step {step}"
            )))
        })
    }
}

impl<T, C: fmt::Debug, S: Staging> fmt::Debug for EpochLoader<T, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared.sampler;
        f.debug_struct("EpochLoader")
            .field("batch_size", &s.batch_size())
            .field("mode", &s.mode())
            .field("drop_last", &s.drop_last())
            .field("steps_per_epoch", &s.steps_per_epoch())
            .field("steps", &self.steps)
            .field("next_epoch", &self.next_epoch.load(Ordering::SeqCst))
            .field("context", &self.context)
            .finish()
    }
}

impl<T, C, S: Staging> Drop for EpochLoader<T, C, S> {
    /// Joins the loader's workers and keeps what its pipelines recorded
    /// for [`loader_stats`](EpochLoader::loader_stats) of the loaders it
    /// shares them with.
    fn drop(&mut self) {
        let mut registry = lock(&self.shared.recorded);
        registry.slots.retain(|s| !Arc::ptr_eq(s, &self.slot));
        let mut slot = lock(&self.slot);
        slot.retire();
        registry.dropped.merge(&slot.retired);
    }
}

/// One epoch of an [`EpochLoader`] ([`EpochLoader::iter`]): the mapped
/// batches in step order, and how far through the epoch it is.
pub struct EpochIter<'a, T, C, S: Staging = BufferPool> {
    loader: &'a EpochLoader<T, C, S>,
    epoch: u64,
    /// The loader's steps of this epoch.
    steps: Range<u64>,
    /// Next step within the epoch, and the end of this iterator's steps.
    next: u64,
    end: u64,
    failed: bool,
}

impl<T: Send + 'static, C: Clone + Send + Sync + 'static, S: Staging> EpochIter<'_, T, C, S> {
    /// The epoch delivered (0-based).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Records of this epoch's steps before the next batch, counting those
    /// a mid-epoch start skipped (they were delivered before the resume).
    pub fn items_done(&self) -> u64 {
        let steps = &self.steps;
        let next = self.next.clamp(steps.start, steps.end);
        self.loader.items_in(self.epoch, steps.start..next)
    }

    /// Records of the whole epoch (of this loader's steps).
    pub fn items_total(&self) -> u64 {
        self.loader.items_in(self.epoch, self.steps.clone())
    }
}

impl<T: Send + 'static, C: Clone + Send + Sync + 'static, S: Staging> Iterator
    for EpochIter<'_, T, C, S>
{
    type Item = Result<T, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next >= self.end {
            return None;
        }
        let sampler = &self.loader.shared.sampler;
        let Some(step) = sampler.step_at(self.epoch, self.next) else {
            self.failed = true;
            let e = Error::invalid(format!("epoch {} is past step 2^64", self.epoch));
            return Some(Err(e));
        };
        self.next += 1;
        let started = Instant::now();
        let result = self.loader.fetch(step);
        let c = &self.loader.shared.counters;
        let waited = super::lap::nanos(started.elapsed());
        c.wait_ns.fetch_add(waited, Ordering::Relaxed);
        if result.is_ok() {
            c.batches.fetch_add(1, Ordering::Relaxed);
            let items = sampler.batch_len(step) / self.loader.view.1;
            c.items.fetch_add(items as u64, Ordering::Relaxed);
        } else {
            self.failed = true;
        }
        Some(result)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.failed { 0 } else { self.end - self.next };
        // An error may end the epoch early.
        (0, Some(usize::try_from(left).unwrap_or(usize::MAX)))
    }
}

impl<T, C, S: Staging> fmt::Debug for EpochIter<'_, T, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EpochIter")
            .field("epoch", &self.epoch)
            .field("steps", &self.steps)
            .field("next", &self.next)
            .field("failed", &self.failed)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, Dense, DenseWriter, ErrorKind, SamplerMode};

    /// One delivered batch: its step, indices and the values read (`x` = index * 10).
    type Seen = (u64, Vec<u64>, Vec<u32>);

    fn builder(dir: &std::path::Path, n: u32, batch: usize) -> DataLoaderBuilder {
        let path = dir.join("x");
        if !path.exists() {
            let mut w = DenseWriter::<u32>::create(&path, &[], Codec::Raw).unwrap();
            w.append_slice(&(0..n).map(|i| i * 10).collect::<Vec<_>>(), n as usize)
                .unwrap();
            w.close().unwrap();
        }
        DataLoader::builder()
            .stream("x", Dense::<u32>::open(&path).unwrap())
            .batch_size(batch)
            .mode(SamplerMode::Cyclic)
            .seed(3)
            .workers(2)
            .drop_last(false)
    }

    fn seen(b: Batch, _: &()) -> Result<Seen, Error> {
        let x = b.dense::<u32>("x")?.iter().copied().collect();
        Ok((b.step(), b.indices().to_vec(), x))
    }

    fn epoch<C: Clone + Send + Sync + 'static>(l: &EpochLoader<Seen, C>) -> Vec<Seen> {
        let mut it = l.iter();
        let mut out: Vec<Seen> = Vec::new();
        while let Some(b) = it.next() {
            out.push(b.unwrap());
            let done: usize = out.iter().map(|s| s.1.len()).sum();
            assert_eq!(it.items_done(), done as u64);
        }
        assert_eq!(it.items_done(), it.items_total());
        out
    }

    #[test]
    fn every_epoch_is_one_pass_and_the_loader_ends_after_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let l = builder(dir.path(), 10, 3)
            .epochs(2)
            .build_epochs(0, (), seen)
            .unwrap();
        assert_eq!((l.steps_per_epoch(), l.num_items()), (4, 10));
        for e in 0..2u64 {
            assert_eq!(l.next_epoch(), e);
            let batches = epoch(&l);
            let steps: Vec<u64> = batches.iter().map(|b| b.0).collect();
            assert_eq!(steps, (4 * e..4 * e + 4).collect::<Vec<_>>());
            let mut all: Vec<u64> = batches.iter().flat_map(|b| b.1.clone()).collect();
            all.sort_unstable();
            assert_eq!(all, (0..10).collect::<Vec<_>>(), "every record once");
            for (_, indices, x) in &batches {
                let want: Vec<u32> = indices.iter().map(|&i| i as u32 * 10).collect();
                assert_eq!(x, &want);
            }
        }
        // epochs(2): the third epoch is empty.
        assert_eq!(l.num_items(), 0);
        let mut it = l.iter();
        assert!(it.next().is_none());
        assert_eq!(it.items_total(), 0);
    }

    #[test]
    fn resume_mid_epoch_is_bit_identical() {
        let dir = tempfile::tempdir().unwrap();
        let whole = builder(dir.path(), 23, 4)
            .build_epochs(0, (), seen)
            .unwrap();
        let reference: Vec<Vec<Seen>> = (0..3).map(|_| epoch(&whole)).collect();
        assert_eq!(reference[1].last().unwrap().1.len(), 3);
        for k in [0u64, 2, 5] {
            let resumed = builder(dir.path(), 23, 4)
                .start_step(k)
                .build_epochs(1, (), seen)
                .unwrap();
            assert_eq!(resumed.next_epoch(), 1);
            let mut it = resumed.iter();
            assert_eq!(it.items_done(), 4 * k);
            let rest: Vec<Seen> = it.by_ref().map(Result::unwrap).collect();
            assert_eq!(it.items_done(), 23);
            assert_eq!(rest, reference[1][k as usize..], "start_step({k})");
            assert_eq!(epoch(&resumed), reference[2]);
        }
        // start_step counts from the start of training: 6 + 2 is epoch 1, step 2.
        let by_step = builder(dir.path(), 23, 4)
            .start_step(8)
            .build_epochs(0, (), seen)
            .unwrap();
        assert_eq!(by_step.next_epoch(), 1);
        let rest: Vec<Seen> = by_step.iter().map(Result::unwrap).collect();
        assert_eq!(rest, reference[1][2..]);
        // A start past 2^64 steps is refused.
        let e = builder(dir.path(), 23, 4)
            .build_epochs(u64::MAX, (), seen)
            .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
    }

    #[test]
    fn token_budget_slices_to_the_end_of_u64_end_with_the_epoch() {
        // Record positions used to be found step by step: a slice to
        // `u64::MAX` walked about 2^64 steps of varying batch lengths.
        let dir = tempfile::tempdir().unwrap();
        let lengths: Vec<u32> = (0..200u32).map(|i| 1 + i * 7 % 23).collect();
        let l = builder(dir.path(), 200, 8)
            .mode(SamplerMode::TokenBudget {
                max_tokens: 60,
                buckets: 4,
            })
            .lengths(crate::sequence::LengthIndex::from_lengths(lengths).unwrap())
            .build_epochs(1, (), seen)
            .unwrap();
        let (n, spe) = (l.num_items(), l.steps_per_epoch());
        assert_eq!(n, 200);
        assert!((0..spe).any(|k| l.sampler().batch_len(k) < 8));
        let all = l.slice(0, u64::MAX);
        assert_eq!((all.steps(), all.num_items()), (0..spe, n));
        let tail = l.slice(n / 2, u64::MAX);
        let head = l.slice(0, n / 2);
        assert_eq!(head.steps().end, tail.steps().start);
        assert_eq!(
            (tail.steps().end, head.num_items() + tail.num_items()),
            (spe, n)
        );
        assert_eq!(l.slice(u64::MAX - 1, u64::MAX).steps(), spe..spe);
        let mut got = epoch(&head);
        got.extend(epoch(&tail));
        assert_eq!(got, epoch(&l));
    }

    #[test]
    fn slices_are_whole_batches_that_concatenate_to_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let l = builder(dir.path(), 23, 4)
            .build_epochs(0, (), seen)
            .unwrap();
        let reference = epoch(
            &builder(dir.path(), 23, 4)
                .build_epochs(0, (), seen)
                .unwrap(),
        );
        // Positions 0..23 cut at 5 and 13: record 5 is inside batch 1 (4..8),
        // record 13 inside batch 3 (12..16), so the slices start at batches 2 and 4.
        let parts = [l.slice(0, 5), l.slice(5, 13), l.slice(13, 23)];
        let steps: Vec<Range<u64>> = parts.iter().map(EpochLoader::steps).collect();
        assert_eq!(steps, [0..2, 2..4, 4..6]);
        let items: Vec<u64> = parts.iter().map(EpochLoader::num_items).collect();
        assert_eq!(items, [8, 8, 7]);
        let joined: Vec<Seen> = parts.iter().flat_map(epoch).collect();
        assert_eq!(joined, reference);
        // More slices than batches: some are empty.
        let empty = l.slice(1, 3);
        assert!(empty.steps().is_empty());
        assert_eq!(empty.num_items(), 0);
        assert!(empty.iter().next().is_none());
        // A slice's next epoch is the next one of the whole loader.
        assert_eq!(epoch(&parts[0]).first().unwrap().0, 6);
    }

    #[test]
    fn views_step_in_lockstep_and_concatenate_to_each_batch() {
        // burn's multi-device split through the placement rule: every
        // device's loader has every step, with its part of each batch.
        let dir = tempfile::tempdir().unwrap();
        let l = builder(dir.path(), 24, 6)
            .drop_last(false)
            .build_epochs(0, (), seen)
            .unwrap();
        let reference = epoch(&l);
        let views: Vec<_> = (0..3).map(|v| l.view(v, 3).unwrap()).collect();
        for v in &views {
            assert_eq!((v.steps(), v.num_items(), v.next_epoch()), (0..4, 8, 1));
        }
        let parts: Vec<Vec<Seen>> = views.iter().map(epoch).collect();
        let whole = epoch(&l);
        assert_ne!(whole, reference, "epoch 1 is another permutation");
        for (k, (step, indices, x)) in whole.iter().enumerate() {
            let (mut i, mut y) = (Vec::new(), Vec::new());
            for part in &parts {
                assert_eq!(part[k].0, *step);
                assert_eq!(part[k].1.len(), 2);
                i.extend_from_slice(&part[k].1);
                y.extend_from_slice(&part[k].2);
            }
            assert_eq!((&i, &y), (indices, x), "step {step}");
        }
        // A view of a view splits the part again; a slice of a view counts
        // its records.
        let quarter = l.view(1, 2).unwrap().view(1, 3).unwrap();
        assert_eq!(quarter.view_of(), (4, 6));
        assert_eq!(quarter.num_items(), 4);
        let tail = views[0].slice(4, 8);
        assert_eq!((tail.steps(), tail.num_items()), (2..4, 4));
        // Parts that do not split evenly are refused.
        assert!(l.view(0, 4).is_err());
        assert!(l.view(3, 3).is_err());
        // So is an index past the count, of a view of a view too (its
        // place, `outer * count + index`, overflowed).
        let e = l.view(1, 2).unwrap().view(usize::MAX, 2).unwrap_err();
        assert!(e.to_string().contains("numbered 0..2"), "{e}");
        assert!(l.view(usize::MAX, usize::MAX).is_err());
        let e = builder(dir.path(), 24, 6)
            .view(0, 4)
            .build_epochs(0, (), seen)
            .unwrap_err();
        assert!(e.to_string().contains("batch_size 6"), "{e}");
        // A builder's view becomes the loader's.
        let second = builder(dir.path(), 24, 6)
            .view(1, 3)
            .build_epochs(0, (), seen)
            .unwrap();
        assert_eq!(second.view_of(), (1, 3));
        let got = epoch(&second);
        assert_eq!(got[0].1, reference[0].1[2..4]);
    }

    #[test]
    fn derived_loaders_share_counters_and_get_their_context() {
        let dir = tempfile::tempdir().unwrap();
        let l = builder(dir.path(), 10, 3)
            .build_epochs(0, 1u32, |b: Batch, c: &u32| {
                if b.step() == 5 {
                    return Err(Error::invalid("bad step"));
                }
                Ok::<_, Error>(*c)
            })
            .unwrap();
        assert_eq!(l.stats(), EpochStats::default());
        let one: Vec<u32> = l.iter().map(Result::unwrap).collect();
        assert_eq!(one, [1; 4]);
        let s = l.stats();
        assert_eq!((s.batches, s.items, s.pipelines), (4, 10, 1));
        // Another context: same next epoch, same counters, its own pipeline.
        let other = l.with_context(2);
        assert_eq!((other.next_epoch(), *other.context()), (1, 2));
        let mut it = other.iter();
        assert_eq!(it.next().unwrap().unwrap(), 2);
        // The map's error ends the epoch; the next one starts afresh.
        let e = it.next().unwrap().unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Transform { step: 5, .. }),
            "{e}"
        );
        assert!(it.next().is_none());
        let s = l.stats();
        assert_eq!((s.batches, s.items, s.pipelines), (5, 13, 2));
        assert_eq!(other.iter().count(), 4);
        assert_eq!(l.stats().pipelines, 3);
        // The first loader continues with its own next epoch, on its pipeline.
        assert_eq!(l.next_epoch(), 1);
        assert!(l.iter().nth(1).unwrap().is_err());
        assert_eq!(l.stats().pipelines, 3);
    }
    #[test]
    fn loader_stats_add_up_every_pipeline_of_the_loader_and_its_derived_ones() {
        use crate::loader::Stage;
        let dir = tempfile::tempdir().unwrap();
        let l = builder(dir.path(), 10, 3)
            .build_epochs(0, (), seen)
            .unwrap();
        let none = l.loader_stats();
        assert_eq!((none.batches, none.per_worker.len()), (0, 2));
        assert!(none.recorded && !none.synchronous);
        assert_eq!(epoch(&l).len(), 4);
        let first = l.loader_stats();
        assert_eq!(first.stages[Stage::WaitBatch].count, 4);
        // An iterator dropped after one batch: the next epoch seeks, and
        // the replaced pipeline's batches stay counted.
        assert!(l.iter().next().unwrap().is_ok());
        assert_eq!(epoch(&l).len(), 4);
        assert_eq!(l.stats().pipelines, 2);
        // A derived loader that stays (its pipeline live) and one dropped.
        let other = l.with_context(());
        assert_eq!(epoch(&other).len(), 4);
        let gone = l.slice(0, 5);
        assert_eq!(epoch(&gone).len(), 2);
        drop(gone);
        let e = l.stats();
        assert_eq!((e.batches, e.pipelines), (15, 4));
        let all = l.loader_stats();
        // Shared, like the counters (the live pipelines may have made more
        // batches since).
        let theirs = other.loader_stats();
        assert_eq!(theirs.stages[Stage::WaitBatch].count, 15);
        assert!(theirs.batches >= all.batches);
        // Every delivered batch was waited for once, in some pipeline.
        assert_eq!(all.stages[Stage::WaitBatch].count, e.batches);
        // Workers may have finished a few batches never delivered: at most
        // a window's worth per pipeline.
        assert!(all.batches >= e.batches, "{all:?}");
        assert!(all.batches <= e.batches + 4 * (2 + 2), "{all:?}");
        assert_eq!(all.stages[Stage::Sample].count, all.batches);
        assert_eq!(all.per_worker.len(), 2);
        let per_worker: u64 = all.per_worker.iter().map(|w| w.batches).sum();
        assert_eq!(per_worker, all.batches);
        // The whole holds its first part.
        for (stage, part) in first.stages.iter() {
            assert!(all.stages[stage].total >= part.total, "{stage}");
            assert!(all.stages[stage].count >= part.count, "{stage}");
        }
        assert!(all.wall >= first.wall && all.batches >= first.batches);
        assert!(all.bytes_read > first.bytes_read);
        assert!(e.waited >= all.input_wait(), "{e:?} {all:?}");
        // Dropping the first loader keeps its pipelines for the others.
        drop(l);
        let after = other.loader_stats();
        assert_eq!(after.stages[Stage::WaitBatch].count, 15);
        assert!(after.batches >= all.batches);
    }
}
