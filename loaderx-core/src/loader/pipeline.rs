//! Worker threads, the in-order delivery window, the look-ahead and
//! shutdown; with no workers, synchronous delivery in the consumer's thread.
//!
//! Workers claim steps in order, at most `capacity` (`workers + prefetch`)
//! claimed and not yet delivered, and the consumer takes them in step
//! order. Beside them, a look-ahead thread (unless
//! [`prefetch_bytes`](super::DataLoaderBuilder::prefetch_bytes) is 0) walks
//! the steps after the last one claimed: the sampler gives each step's
//! indices as a pure function of the step, so it knows them before any
//! worker does, and asks every stream's store to start reading them
//! ([`Engine::prefetch`](crate::engine::Engine::prefetch): a cold local
//! store into the loader's memory with `O_DIRECT`, on this thread's ring,
//! or into the page cache where it cannot; a remote one into its block
//! cache). Its reads in flight complete before it sleeps or ends (the
//! gathers wait for them), and a worker that claims the step it is asking
//! for waits until it has, then takes what it read. It stays
//! at most `prefetch_bytes` of stored bytes (and
//! [`MAX_LOOKAHEAD_STEPS`](super::MAX_LOOKAHEAD_STEPS) steps) ahead of the
//! consumer, and waits for the consumer to take steps before it asks for
//! more, so a slow consumer never makes it outrun what it read; it never
//! asks for a step a worker claimed (that worker reads it), nor for one
//! twice. In the windowed order it asks for the whole blocks a step draws
//! from, once each ([`BlockMemo`]), not record by record (unless records
//! average [`LARGE_RECORD_BYTES`] or more). It changes when
//! bytes are read, never which batches are made:
//! step order, resume, shard, epochs and every other setting behave as
//! without it.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use super::batch::{Batch, Column, ColumnLayout};
use super::lap;
use super::recorder::{Accum, Recorded, Recorder};
use super::stage::Stage;
use super::staging::{ColumnBuffer, StageRequest, StagedBuffer, Staging};
use super::stats::LoaderStats;
use super::views::{Placement, ViewSlot, view_range};
use super::{Stream, Transform};
use crate::codec::Sink;
use crate::dense::DynDense;
use crate::error::{Error, ErrorKind, StoreKind};
use crate::ragged::{DynRagged, RaggedGatherPlan, RaggedLayout};
use crate::sampler::{Sampler, SamplerMode};
use crate::store::Store;

/// Mean stored bytes per record from which the windowed order's look-ahead
/// reads records one by one (`O_DIRECT`, into memory, as in any order)
/// rather than whole blocks through the page cache: a read this long runs
/// at the drive's sequential speed already (`fio`: 1 MiB random reads at
/// depth 1 gave 0.9× of its best), and it skips the page cache's cost in a
/// memory-limited container.
const LARGE_RECORD_BYTES: u64 = 512 << 10;

pub(super) struct Config<T, S: Staging> {
    pub(super) streams: Vec<(String, Stream)>,
    pub(super) sampler: Sampler,
    pub(super) workers: usize,
    pub(super) capacity: usize,
    /// Stored bytes the look-ahead may ask for past the consumer (0: none).
    pub(super) prefetch_bytes: u64,
    pub(super) start_step: u64,
    /// One past the last step, for a finite loader.
    pub(super) end_step: Option<u64>,
    /// Where batches are gathered (views may have their own).
    pub(super) staging: Arc<S>,
    /// Ragged streams gathered packed.
    pub(super) packed: bool,
    /// How each global batch is split into views, and which are delivered.
    pub(super) placement: Placement<S>,
    pub(super) transform: Transform<T, S::Buffer>,
    /// Stages are recorded ([`Recorder`]).
    pub(super) record: bool,
    /// The trace file to write, if any.
    pub(super) trace: Option<std::path::PathBuf>,
}

struct Producer<T, S: Staging> {
    names: Arc<[String]>,
    streams: Vec<Stream>,
    sampler: Sampler,
    /// Where batches are gathered (views may have their own).
    staging: Arc<S>,
    /// Ragged streams gathered packed.
    packed: bool,
    /// How each global batch is split into views, and which are delivered.
    placement: Placement<S>,
    transform: Transform<T, S::Buffer>,
}

/// The blocks of a windowed order the look-ahead asked for, so that it
/// asks for each whole block once ([`Producer::prefetch`]): the drive
/// reads a block (about 4 MiB) sequentially, where the records one by one
/// would be as many small reads in the order the batches draw them.
struct BlockMemo {
    /// Records per block.
    block: u64,
    /// Steps after which a block asked for again is new (a later pass).
    horizon: u64,
    /// Block → the step that asked for it.
    asked: std::collections::HashMap<u64, u64>,
}

impl BlockMemo {
    /// The record ranges of the blocks of `indices` not asked for in the
    /// last `horizon` steps (now marked asked for at `step`), in order,
    /// adjacent blocks merged.
    fn fresh(&mut self, step: u64, indices: &[u64]) -> Vec<std::ops::Range<u64>> {
        let horizon = self.horizon;
        if self.asked.len() > 4096 {
            self.asked.retain(|_, at| step.wrapping_sub(*at) <= horizon);
        }
        let mut new: Vec<u64> = Vec::new();
        for &i in indices {
            let b = i / self.block;
            let fresh = match self.asked.get(&b) {
                Some(&at) => step.wrapping_sub(at) > horizon,
                None => true,
            };
            if fresh {
                self.asked.insert(b, step);
                new.push(b);
            }
        }
        new.sort_unstable();
        let mut ranges: Vec<std::ops::Range<u64>> = Vec::with_capacity(new.len());
        for b in new {
            let start = b * self.block;
            let end = start.saturating_add(self.block);
            match ranges.last_mut() {
                Some(r) if r.end == start => r.end = end,
                _ => ranges.push(start..end),
            }
        }
        ranges
    }
}

/// A producer whatever its staging: what the loader keeps for synchronous
/// delivery.
trait Produce<T>: Send + Sync {
    fn produce_caught(&self, step: u64) -> Result<T, Error>;
}

impl<T, S: Staging> Produce<T> for Producer<T, S> {
    fn produce_caught(&self, step: u64) -> Result<T, Error> {
        Producer::produce_caught(self, step)
    }
}

struct State<T> {
    /// Next step a worker will claim.
    next_claim: u64,
    /// No step at or past this one is claimed (finite loaders).
    end_step: Option<u64>,
    /// Claimed and not yet delivered.
    in_flight: usize,
    max_in_flight: usize,
    done: BTreeMap<u64, Result<T, Error>>,
    stop: bool,
    /// The step the consumer is blocked on, if it is: a worker wakes it
    /// only with that step, never with one it would put back to sleep.
    awaited: Option<u64>,
    /// Workers blocked on a full window: the consumer signals `room` only
    /// when one is (a condvar signal is a system call even with no waiter).
    waiting_workers: usize,
    /// The next step the consumer takes.
    consumed: u64,
    /// The next step the look-ahead asks for (unless a worker claimed it).
    ahead_next: u64,
    /// Steps the look-ahead asked for and the consumer has not taken, with
    /// the stored bytes asked for each; and their sum.
    ahead: VecDeque<(u64, u64)>,
    ahead_bytes: u64,
    /// Stored bytes the look-ahead asked for since the start.
    prefetched: u64,
    /// The look-ahead waits for the consumer.
    lookahead_waits: bool,
    /// The step the look-ahead is asking the stores for: a worker that
    /// claims it waits until it has (then takes what it read, instead of
    /// reading the step itself while the look-ahead reads it too).
    ahead_busy: Option<u64>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Workers wait here for room in the window.
    room: Condvar,
    /// The consumer waits here for its next step.
    ready: Condvar,
    /// The look-ahead waits here for the consumer to take steps.
    ahead_room: Condvar,
    /// Workers wait here for the look-ahead to finish asking for their step.
    ahead_done: Condvar,
    capacity: usize,
    prefetch_bytes: u64,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An endless loader; an `Iterator` of `Result<T, Error>` in step order.
/// See [`DataLoaderBuilder`](super::DataLoaderBuilder) for the options and their semantics.
pub struct DataLoader<T> {
    shared: Arc<Shared<T>>,
    threads: Vec<JoinHandle<()>>,
    /// The producer, for a synchronous loader (no workers): `next` makes
    /// each batch itself. `None` when workers do.
    inline: Option<Arc<dyn Produce<T>>>,
    next_step: u64,
    end_step: Option<u64>,
    failed: bool,
    /// The staging's allocation count.
    allocations: Box<dyn Fn() -> u64 + Send + Sync>,
    sampler: Sampler,
    /// The flight recorder, shared with the workers.
    recorder: Arc<Recorder>,
    /// The consumer's own times (its waits for batches).
    consumer: Accum,
    /// The streams, for their object-storage counters.
    streams: Vec<Stream>,
}

#[cfg(test)]
thread_local! {
    /// Test hook: make spawning worker `n` and later fail, as it does when
    /// the process or its cgroup has no threads left (`ulimit -u`, `pids.max`).
    static FAIL_SPAWN_FROM: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

fn spawn_worker(i: usize, body: impl FnOnce() + Send + 'static) -> std::io::Result<JoinHandle<()>> {
    #[cfg(test)]
    if FAIL_SPAWN_FROM.with(|f| f.get()).is_some_and(|n| i >= n) {
        return Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
    }
    std::thread::Builder::new()
        .name(format!("loaderx-worker-{i}"))
        .spawn(body)
}

/// Starts the workers. A worker that cannot be spawned is an error: the
/// threads already started are stopped and joined before it is returned, so
/// a loader never waits on workers that do not exist. With no workers, no
/// thread is started: the consumer's `next` makes each batch.
pub(super) fn start<T: Send + 'static, S: Staging>(
    config: Config<T, S>,
) -> Result<DataLoader<T>, Error> {
    let (names, streams): (Vec<String>, Vec<Stream>) = config.streams.into_iter().unzip();
    let recorder = Arc::new(Recorder::new(
        config.record,
        config.workers,
        config.sampler.rank().0,
        config.trace,
    )?);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            next_claim: config.start_step,
            end_step: config.end_step,
            in_flight: 0,
            max_in_flight: 0,
            done: BTreeMap::new(),
            stop: false,
            awaited: None,
            waiting_workers: 0,
            consumed: config.start_step,
            ahead_next: config.start_step,
            ahead: VecDeque::new(),
            ahead_bytes: 0,
            prefetched: 0,
            lookahead_waits: false,
            ahead_busy: None,
        }),
        room: Condvar::new(),
        ready: Condvar::new(),
        ahead_room: Condvar::new(),
        ahead_done: Condvar::new(),
        capacity: config.capacity,
        prefetch_bytes: config.prefetch_bytes,
    });
    let remote_streams: Vec<Stream> = streams
        .iter()
        .filter(|s| s.store().remote_stats().is_some() || s.store().lazy_stats().is_some())
        .cloned()
        .collect();
    let producer = Arc::new(Producer {
        names: names.into(),
        streams,
        sampler: config.sampler.clone(),
        staging: Arc::clone(&config.staging),
        packed: config.packed,
        placement: config.placement,
        transform: config.transform,
    });
    let staging = config.staging;
    let mut loader = DataLoader {
        shared,
        threads: Vec::with_capacity(config.workers),
        inline: (config.workers == 0).then(|| Arc::clone(&producer) as Arc<dyn Produce<T>>),
        next_step: config.start_step,
        end_step: config.end_step,
        failed: false,
        allocations: Box::new(move || staging.allocations()),
        sampler: config.sampler,
        recorder,
        consumer: Accum::default(),
        streams: remote_streams,
    };
    for i in 0..config.workers {
        let shared = Arc::clone(&loader.shared);
        let producer = Arc::clone(&producer);
        let recorder = Arc::clone(&loader.recorder);
        match spawn_worker(i, move || work(&shared, &producer, &recorder, i)) {
            Ok(handle) => loader.threads.push(handle),
            // Dropping the loader stops and joins the workers started so far.
            Err(error) => return Err(ErrorKind::WorkerSpawn { worker: i, error }.into()),
        }
    }
    if config.workers > 0 && config.prefetch_bytes > 0 {
        let shared = Arc::clone(&loader.shared);
        let producer = Arc::clone(&producer);
        // An optimisation only: a loader without it makes the same batches.
        if let Ok(handle) = std::thread::Builder::new()
            .name("loaderx-lookahead".into())
            .spawn(move || look_ahead(&shared, &producer))
        {
            loader.threads.push(handle);
        }
    }
    Ok(loader)
}

/// The look-ahead thread (see the module doc): asks the stores to read
/// the steps after the last claimed, within the byte and step bounds.
fn look_ahead<T, S: Staging>(shared: &Shared<T>, producer: &Producer<T, S>) {
    let mut blocks = producer.block_memo();
    loop {
        let step = {
            let mut st = shared.lock();
            loop {
                if st.stop {
                    drop(st);
                    // What it read and no gather took goes with the loader.
                    crate::engine::finish_look_ahead();
                    producer.forget_ahead();
                    return;
                }
                // Never a step a worker claimed: it is being read.
                let from = if st.next_claim.wrapping_sub(st.ahead_next) < u64::MAX / 2 {
                    st.next_claim
                } else {
                    st.ahead_next
                };
                if st.end_step.is_some_and(|end| from >= end) {
                    drop(st);
                    crate::engine::finish_look_ahead();
                    return;
                }
                let distance = from.wrapping_sub(st.consumed);
                if st.ahead_bytes < shared.prefetch_bytes && distance < super::MAX_LOOKAHEAD_STEPS {
                    st.ahead_busy = Some(from);
                    break from;
                }
                // Its reads still in flight complete before it sleeps: the
                // gathers wait for them, and only this thread takes them.
                if crate::engine::look_ahead_in_flight() {
                    drop(st);
                    crate::engine::finish_look_ahead();
                    st = shared.lock();
                    continue;
                }
                st.lookahead_waits = true;
                st = shared
                    .ahead_room
                    .wait(st)
                    .unwrap_or_else(|p| p.into_inner());
                st.lookahead_waits = false;
            }
        };
        let bytes =
            catch_unwind(AssertUnwindSafe(|| producer.prefetch(step, &mut blocks))).unwrap_or(0);
        // What completed meanwhile is handed to the gathers.
        crate::engine::poll_look_ahead();
        let mut st = shared.lock();
        st.ahead_busy = None;
        st.ahead_next = step.wrapping_add(1);
        // Taken already (a fast consumer): nothing of it is pending.
        if step.wrapping_sub(st.consumed) < u64::MAX / 2 {
            st.ahead.push_back((step, bytes));
            st.ahead_bytes += bytes;
        }
        st.prefetched += bytes;
        // A worker may wait for this step only once it claimed it.
        let claimed = st.next_claim.wrapping_sub(step).wrapping_sub(1) < u64::MAX / 2;
        drop(st);
        if claimed {
            shared.ahead_done.notify_all();
        }
    }
}

fn work<T, S: Staging>(
    shared: &Shared<T>,
    producer: &Producer<T, S>,
    recorder: &Recorder,
    worker: usize,
) {
    loop {
        let mut waited = None;
        let (step, scope) = {
            let mut st = shared.lock();
            if !st.stop && st.in_flight >= shared.capacity {
                // The window is full: the consumer has not taken the
                // batches made ahead (timed only when it happens).
                let from = recorder.enabled().then(Instant::now);
                while !st.stop && st.in_flight >= shared.capacity {
                    st.waiting_workers += 1;
                    st = shared.room.wait(st).unwrap_or_else(|p| p.into_inner());
                    st.waiting_workers -= 1;
                }
                waited = from.map(|f| (f, Instant::now()));
            }
            if st.stop || st.end_step.is_some_and(|end| st.next_claim >= end) {
                drop(st);
                if let Some((from, to)) = waited {
                    recorder.waited_for_consumer(worker, from, to);
                }
                return;
            }
            let step = st.next_claim;
            // Steps wrap at u64::MAX like the sampler's (a start step may be anything).
            st.next_claim = st.next_claim.wrapping_add(1);
            st.in_flight += 1;
            st.max_in_flight = st.max_in_flight.max(st.in_flight);
            // The look-ahead is asking for this step: its reads are taken
            // once it has (they would otherwise be made twice), a wait
            // counted as the batch's reading.
            let ahead = st.ahead_busy == Some(step);
            let scope = if ahead {
                recorder.begin_batch(worker, step, Stage::Read)
            } else {
                None
            };
            while st.ahead_busy == Some(step) && !st.stop {
                st = shared
                    .ahead_done
                    .wait(st)
                    .unwrap_or_else(|p| p.into_inner());
            }
            if ahead {
                lap::switch(Stage::Sample);
            }
            (step, scope)
        };
        if let Some((from, to)) = waited {
            recorder.waited_for_consumer(worker, from, to);
        }
        let scope = scope.or_else(|| recorder.begin_batch(worker, step, Stage::Sample));
        let result = producer.produce_caught(step);
        if let Some(scope) = scope {
            recorder.end_batch(scope);
        }
        let mut st = shared.lock();
        st.done.insert(step, result);
        let wake = st.awaited == Some(step);
        drop(st);
        if wake {
            shared.ready.notify_one();
        }
    }
}

impl<T, S: Staging> Producer<T, S> {
    /// Asks every stream's store to start reading the records that step
    /// `step` gathers (the look-ahead's); the stored bytes asked for. A
    /// step whose indices cannot be drawn is skipped: its worker reports.
    fn prefetch(&self, step: u64, blocks: &mut Option<BlockMemo>) -> u64 {
        // Warm or mapped stores: not even the indices are drawn.
        if !self.streams.iter().any(|s| s.engine().wants_prefetch()) {
            return 0;
        }
        let want = self.sampler.batch_len(step);
        let mut indices = Vec::new();
        if indices.try_reserve_exact(want).is_err() {
            return 0;
        }
        indices.resize(want, 0u64);
        if self.sampler.fill(step, &mut indices).is_err() {
            return 0;
        }
        let placement = &self.placement;
        if !(placement.slots.len() == 1 && placement.count == 1) {
            let mut gathered = Vec::with_capacity(indices.len());
            for slot in &placement.slots {
                match view_range(indices.len(), placement.count, slot.index) {
                    Ok(range) => gathered.extend_from_slice(&indices[range]),
                    Err(_) => return 0,
                }
            }
            indices = gathered;
        }
        if let Some(memo) = blocks {
            let ranges = memo.fresh(step, &indices);
            if ranges.is_empty() {
                return 0;
            }
            return self
                .streams
                .iter()
                .map(|s| s.engine())
                .map(|e| e.prefetch_ranges(&ranges))
                .sum();
        }
        self.streams
            .iter()
            .map(|s| s.engine())
            .filter(|e| e.check_indices(&indices).is_ok())
            .map(|e| e.prefetch(&indices))
            .sum()
    }

    /// Drops what the look-ahead read into memory for every stream and no
    /// gather took.
    fn forget_ahead(&self) {
        for s in &self.streams {
            s.engine().forget_ahead();
        }
    }

    /// The look-ahead's memo of blocks asked for, when it asks for whole
    /// blocks: a [`Windowed`](crate::SamplerMode::Windowed) order without
    /// a mixture, where this loader delivers at least a quarter of every
    /// global batch (ranks and views that read less of a block ask for
    /// their own records only, not for bytes other hosts read), over
    /// streams not all of [`LARGE_RECORD_BYTES`] or more a record.
    fn block_memo(&self) -> Option<BlockMemo> {
        let SamplerMode::Windowed { block, window } = self.sampler.mode() else {
            return None;
        };
        if self.sampler.mixture().is_some() || block == 0 {
            return None;
        }
        // Records of half a megabyte or more are each a long read: the
        // look-ahead reads them one by one, as in any order (`O_DIRECT`,
        // into memory), not their blocks through the page cache.
        let large = |e: &crate::engine::Engine| {
            e.len() > 0 && e.stored_bytes() / e.len() >= LARGE_RECORD_BYTES
        };
        if self.streams.iter().all(|s| large(s.engine())) {
            return None;
        }
        let (_, world) = self.sampler.rank();
        let placement = &self.placement;
        let delivered = placement.slots.len() as u128;
        if delivered * 4 < placement.count.max(1) as u128 * world.max(1) as u128 {
            return None;
        }
        // A window's records are drawn in consecutive steps: a block is
        // read within this many steps of its first record.
        let global = (self.sampler.batch_size() as u128 * world.max(1) as u128).max(1);
        let span = (u128::from(window) * u128::from(block)).div_ceil(global) + 1;
        Some(BlockMemo {
            block: u64::from(block),
            horizon: u64::try_from(span).unwrap_or(u64::MAX),
            asked: std::collections::HashMap::new(),
        })
    }

    /// [`produce`](Self::produce), with a panic (in a gather, or in the
    /// caller's transform) turned into the step's error.
    fn produce_caught(&self, step: u64) -> Result<T, Error> {
        catch_unwind(AssertUnwindSafe(|| self.produce(step))).unwrap_or_else(|panic| {
            let message = crate::error::panic_message(panic.as_ref())
                .unwrap_or_else(|| "non-string panic payload".into());
            Err(ErrorKind::WorkerPanicked { step, message }.into())
        })
    }

    fn produce(&self, step: u64) -> Result<T, Error> {
        // The batch size comes from options (and `Iid` takes any): room for
        // its indices is reserved fallibly, like the batch's bytes.
        let want = self.sampler.batch_len(step);
        let mut indices = Vec::new();
        indices
            .try_reserve_exact(want)
            .map_err(|_| ErrorKind::Buffer {
                detail: format!("cannot allocate the {want} indices of step {step}"),
            })?;
        indices.resize(want, 0u64);
        self.sampler.fill(step, &mut indices)?;
        lap::note_indices(&indices);
        let (epoch, step_in_epoch) = self.sampler.epoch_of(step);
        lap::switch(Stage::Read);
        let placement = &self.placement;
        let batches = if let [slot] = &placement.slots[..]
            && placement.count == 1
        {
            vec![self.gather_view(step, epoch, step_in_epoch, indices, slot)?]
        } else {
            placement
                .slots
                .iter()
                .map(|slot| {
                    let range = view_range(indices.len(), placement.count, slot.index)
                        .map_err(|e| Error::invalid(format!("step {step}: {e}")))?;
                    let view = indices[range].to_vec();
                    self.gather_view(step, epoch, step_in_epoch, view, slot)
                })
                .collect::<Result<Vec<_>, Error>>()?
        };
        lap::switch(Stage::Collate);
        (self.transform)(batches).map_err(|error| ErrorKind::Transform { step, error }.into())
    }

    /// Gathers every stream at `indices` (one view of the step's batch)
    /// into the view's staging.
    fn gather_view(
        &self,
        step: u64,
        epoch: u64,
        step_in_epoch: u64,
        indices: Vec<u64>,
        slot: &ViewSlot<S>,
    ) -> Result<Batch<S::Buffer>, Error> {
        let mut columns = Vec::with_capacity(self.streams.len());
        for (k, (name, stream)) in self.names.iter().zip(&self.streams).enumerate() {
            let gather_err = |error: Error| -> Error {
                ErrorKind::Gather {
                    step,
                    stream: name.clone(),
                    error,
                }
                .into()
            };
            let column = match stream.store() {
                Store::Dense(s) => {
                    let mut shape = Vec::with_capacity(1 + s.item_shape().len());
                    shape.push(indices.len());
                    shape.extend_from_slice(s.item_shape());
                    let len = indices.len().checked_mul(s.record_bytes()).ok_or_else(|| {
                        ErrorKind::Buffer {
                            detail: format!(
                                "{} records of {} bytes do not fit in memory",
                                indices.len(),
                                s.record_bytes()
                            ),
                        }
                    })?;
                    let request = StageRequest {
                        step,
                        stream: name,
                        stream_index: k,
                        view: slot.index,
                        kind: StoreKind::Dense,
                        dtype: s.dtype(),
                        bytes: len,
                        shape: Some(&shape),
                    };
                    let fill = DenseFill {
                        store: s,
                        indices: &indices,
                    };
                    let (buffer, ()) = self.gather(slot, &request, fill, gather_err)?;
                    Column {
                        dtype: s.dtype(),
                        layout: ColumnLayout::Dense { shape },
                        len,
                        buffer,
                    }
                }
                Store::Ragged(s) => {
                    // Planned once: the plan sizes the buffer and the gather
                    // reads it, without locating the records again.
                    lap::switch(Stage::Locate);
                    let plan = s.plan_gather(&indices).map_err(gather_err)?;
                    lap::switch(Stage::Read);
                    let (len, values) = if self.packed {
                        let len = plan.packed_len();
                        (len, [len / s.dtype().size()])
                    } else {
                        (plan.len(), [0])
                    };
                    let request = StageRequest {
                        step,
                        stream: name,
                        stream_index: k,
                        view: slot.index,
                        kind: StoreKind::Ragged,
                        dtype: s.dtype(),
                        bytes: len,
                        shape: self.packed.then_some(&values[..]),
                    };
                    let fill = RaggedFill {
                        store: s,
                        plan,
                        packed: self.packed,
                    };
                    let (buffer, layout) = self.gather(slot, &request, fill, gather_err)?;
                    Column {
                        dtype: s.dtype(),
                        layout: ColumnLayout::Ragged(layout),
                        len,
                        buffer,
                    }
                }
            };
            if stream.engine().codec() == crate::Codec::Raw {
                // A compressed store's reads count their stored bytes.
                lap::add_read(column.len as u64);
            }
            lap::add_delivered(column.len as u64);
            columns.push(column);
        }
        let sources = self.sampler.mixture().map(|m| {
            indices
                .iter()
                .map(|&i| m.source_of(i).unwrap_or(0) as u32)
                .collect()
        });
        Ok(Batch {
            step,
            epoch,
            step_in_epoch,
            indices,
            sources,
            names: Arc::clone(&self.names),
            columns,
        })
    }
}

impl<T, S: Staging> Producer<T, S> {
    /// Stages `request.bytes` bytes for one stream's batch (the view's
    /// staging, or the loader's) and lets `fill` gather into them: into
    /// uninitialised room when the buffer offers it (the default pool's,
    /// grown without zeroing), else into its bytes.
    fn gather<F: Fill>(
        &self,
        slot: &ViewSlot<S>,
        request: &StageRequest<'_>,
        fill: F,
        gather_err: impl Fn(Error) -> Error,
    ) -> Result<(ColumnBuffer<S::Buffer>, F::Out), Error> {
        let len = request.bytes;
        let staging = slot.staging.as_ref().unwrap_or(&self.staging);
        let mut buffer = staging.stage(request)?;
        if let Some(room) = buffer.uninit_mut(len) {
            let out = fill.fill(room?).map_err(gather_err)?;
            // SAFETY: `uninit_mut(len)` was the buffer's last call and gave
            // room, and `fill` returned `Ok`, so it wrote every byte of it
            // (`Fill`'s contract). After an error the buffer is dropped
            // unread.
            unsafe { buffer.assume_init(len) };
            return Ok((ColumnBuffer::Staged(buffer), out));
        }
        let got = buffer.as_bytes().len();
        let dst = buffer.as_bytes_mut().get_mut(..len).ok_or_else(|| {
            gather_err(Error::invalid(format!(
                "the staging returned {got} bytes for a {len}-byte batch"
            )))
        })?;
        let out = fill.fill(dst).map_err(gather_err)?;
        Ok((ColumnBuffer::Staged(buffer), out))
    }
}

/// One stream's gather, into initialised bytes or uninitialised memory.
///
/// # Safety
///
/// When [`fill`](Fill::fill) returns `Ok`, it has written every byte of
/// `dst` (so that uninitialised memory is then initialised).
unsafe trait Fill {
    /// What the gather returns besides the bytes.
    type Out;
    /// Gathers into `dst`, exactly the bytes the batch needs.
    fn fill<D: Sink>(self, dst: &mut [D]) -> Result<Self::Out, Error>;
}

/// A Dense stream's batch.
struct DenseFill<'a> {
    store: &'a DynDense,
    indices: &'a [u64],
}

// SAFETY: `DynDense::gather_into_to` writes every byte of `dst` on `Ok`
// (one whole record per index, `dst` being exactly their bytes).
unsafe impl Fill for DenseFill<'_> {
    type Out = ();
    fn fill<D: Sink>(self, dst: &mut [D]) -> Result<(), Error> {
        self.store.gather_into_to(self.indices, dst)
    }
}

/// A Ragged stream's planned batch, in segments or packed.
struct RaggedFill<'a> {
    store: &'a DynRagged,
    plan: RaggedGatherPlan<'a>,
    packed: bool,
}

// SAFETY: `DynRagged::gather_planned_to` writes the first `plan.len()`
// bytes of `dst`, and `DynRagged::gather_packed_to` the first
// `plan.packed_len()`, all of them (`dst` is exactly that long), on `Ok`.
unsafe impl Fill for RaggedFill<'_> {
    type Out = RaggedLayout;
    fn fill<D: Sink>(self, dst: &mut [D]) -> Result<RaggedLayout, Error> {
        let want = if self.packed {
            self.plan.packed_len()
        } else {
            self.plan.len()
        };
        if dst.len() != want {
            return Err(Error::invalid(format!(
                "a {}-byte destination for a {want}-byte ragged batch",
                dst.len(),
            )));
        }
        if self.packed {
            self.store.gather_packed_to(&self.plan, dst)
        } else {
            self.store.gather_planned_to(&self.plan, dst)
        }
    }
}

impl<T> DataLoader<T> {
    /// The step the next call to `next` delivers.
    pub fn step(&self) -> u64 {
        self.next_step
    }

    /// Records per full batch.
    pub fn batch_size(&self) -> usize {
        self.sampler.batch_size()
    }

    /// Steps in one pass over the data (this rank's, when sharded).
    pub fn steps_per_epoch(&self) -> u64 {
        self.sampler.steps_per_epoch()
    }

    /// One past the last step of a loader built with
    /// [`epochs`](super::DataLoaderBuilder::epochs); `None` when endless.
    pub fn end_step(&self) -> Option<u64> {
        self.end_step
    }

    /// Steps left to deliver (`None` when endless). An error ends the
    /// loader early.
    pub fn remaining_steps(&self) -> Option<u64> {
        if self.failed {
            return Some(0);
        }
        self.end_step.map(|end| end.saturating_sub(self.next_step))
    }

    /// The sampler that draws the loader's indices (at step 0; the loader
    /// keeps its own position, [`step`](Self::step)).
    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// What the loader did since it started: its counters, and where
    /// its time went per stage and per worker (see [`LoaderStats`]; print
    /// it for the per-stage table and the bottleneck).
    pub fn stats(&self) -> LoaderStats {
        let mut stats = self.counters();
        self.recorder.stats(&self.consumer, &mut stats);
        stats
    }

    /// What the loader did since the last call of this method (the first
    /// call: since it started): the recorded times, counts and
    /// percentiles are those of that period only, for a per-epoch or
    /// per-interval report (`max_in_flight`, `pool_allocations` and
    /// `prefetched_bytes` stay counted since the start).
    pub fn stats_since_last(&self) -> LoaderStats {
        let mut stats = self.counters();
        self.recorder.stats_since_last(&self.consumer, &mut stats);
        stats
    }

    /// Everything the loader recorded since it started, with its
    /// counters, as raw accumulations ([`Recorded`]) to add up with other
    /// loaders'.
    pub(crate) fn recorded(&self) -> Recorded {
        let counters = self.counters();
        let mut recorded = self.recorder.recorded(&self.consumer);
        recorded.max_in_flight = counters.max_in_flight;
        recorded.pool_allocations = counters.pool_allocations;
        recorded.prefetched_bytes = counters.prefetched_bytes;
        recorded.remote = counters.remote;
        recorded.lazy = counters.lazy;
        recorded
    }

    /// Stops the loader (joins its workers: the batches they were making
    /// are counted) and returns what it recorded ([`recorded`](Self::recorded)).
    pub(crate) fn retire(mut self) -> Recorded {
        self.stop();
        self.recorded()
    }

    fn counters(&self) -> LoaderStats {
        let st = self.shared.lock();
        let mut stats = LoaderStats::empty();
        stats.max_in_flight = st.max_in_flight;
        stats.pool_allocations = (self.allocations)();
        stats.prefetched_bytes = st.prefetched;
        drop(st);
        stats.remote = self
            .streams
            .iter()
            .filter_map(|s| s.store().remote_stats())
            .reduce(|a, b| a + b);
        // The streams of one dataset share one cache: counted once.
        stats.lazy = self.streams.iter().find_map(|s| s.store().lazy_stats());
        stats
    }

    fn stop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.room.notify_all();
        self.shared.ahead_room.notify_all();
        self.shared.ahead_done.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<T> Iterator for DataLoader<T> {
    type Item = Result<T, Error>;

    /// The next step's result; `None` after the last step of a finite
    /// loader, or after an error was delivered.
    fn next(&mut self) -> Option<Result<T, Error>> {
        if self.failed || self.end_step.is_some_and(|end| self.next_step >= end) {
            return None;
        }
        if let Some(producer) = &self.inline {
            let scope = self.recorder.begin_batch(0, self.next_step, Stage::Sample);
            let result = producer.produce_caught(self.next_step);
            if let Some(scope) = scope {
                self.recorder.end_batch(scope);
            }
            self.next_step = self.next_step.wrapping_add(1);
            self.failed = result.is_err();
            return Some(result);
        }
        let mut waited_from = None;
        let (result, worker_waits, lookahead_waits, ready) = {
            let mut st = self.shared.lock();
            loop {
                let ready = st.done.len();
                if let Some(r) = st.done.remove(&self.next_step) {
                    st.awaited = None;
                    st.in_flight -= 1;
                    // Steps the look-ahead read for are taken up to here.
                    st.consumed = self.next_step.wrapping_add(1);
                    while let Some(&(step, bytes)) = st.ahead.front()
                        && step.wrapping_sub(st.consumed) >= u64::MAX / 2
                    {
                        st.ahead.pop_front();
                        st.ahead_bytes -= bytes;
                    }
                    // The look-ahead is woken once it is well behind its
                    // bounds, not for every step taken.
                    let d = st.ahead_next.wrapping_sub(st.consumed);
                    let d = if d > u64::MAX / 2 { 0 } else { d };
                    let behind = d < super::MAX_LOOKAHEAD_STEPS / 2
                        && st.ahead_bytes <= self.shared.prefetch_bytes / 2;
                    break (
                        r,
                        st.waiting_workers > 0,
                        st.lookahead_waits && behind,
                        ready,
                    );
                }
                st.awaited = Some(self.next_step);
                if waited_from.is_none() && self.recorder.enabled() {
                    waited_from = Some(Instant::now());
                }
                st = self
                    .shared
                    .ready
                    .wait(st)
                    .unwrap_or_else(|p| p.into_inner());
            }
        };
        if worker_waits {
            self.shared.room.notify_one();
        }
        if lookahead_waits {
            self.shared.ahead_room.notify_one();
        }
        if self.recorder.enabled() {
            let waited = waited_from.map(|from| (from, Instant::now()));
            self.recorder
                .took(&mut self.consumer, self.next_step, waited, ready);
        }
        self.next_step = self.next_step.wrapping_add(1);
        if result.is_err() {
            self.failed = true;
            self.stop();
        }
        Some(result)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.remaining_steps() {
            // An error may end the loader before its last step.
            Some(n) => (0, Some(usize::try_from(n).unwrap_or(usize::MAX))),
            None => (0, None),
        }
    }
}

impl<T> std::fmt::Debug for DataLoader<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLoader")
            .field("next_step", &self.next_step)
            .field("end_step", &self.end_step)
            .field("workers", &self.threads.len())
            .field("synchronous", &self.inline.is_some())
            .field("failed", &self.failed)
            .finish()
    }
}

impl<T> Drop for DataLoader<T> {
    fn drop(&mut self) {
        self.stop();
        // Every worker has ended: the trace file is complete.
        self.recorder.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::SamplerMode;
    use crate::{Codec, DenseWriter};

    #[test]
    fn pooled_buffers_hold_exactly_what_the_gathers_write() {
        // Buffers come back to the pool holding an earlier batch's bytes and
        // are reused, grown, without zeroing: every byte of a batch must
        // still be the gather's, padding included.
        let dir = tempfile::tempdir().unwrap();
        let mut w =
            crate::RaggedWriter::<u16>::create(dir.path().join("r"), 1, Codec::Zstd).unwrap();
        w.append((0..200u16).map(|i| vec![i | 0x8080; 1 + (i as usize * 7) % 13]))
            .unwrap();
        w.close().unwrap();
        let mut w = DenseWriter::<u8>::create(dir.path().join("d"), &[3], Codec::Raw).unwrap();
        w.append_slice(&(0..600).map(|i| i as u8 | 1).collect::<Vec<_>>(), 200)
            .unwrap();
        w.close().unwrap();
        let ragged = Stream::from(crate::DynRagged::open(dir.path().join("r")).unwrap());
        let dense = Stream::from(crate::DynDense::open(dir.path().join("d")).unwrap());
        let loader = DataLoader::builder()
            .stream("r", ragged.clone())
            .stream("d", dense.clone())
            .batch_size(9)
            .mode(SamplerMode::Iid)
            .workers(2)
            .build()
            .unwrap();
        for batch in loader.take(60) {
            let batch = batch.unwrap();
            let r = batch.column("r").unwrap();
            let ragged = ragged.as_ragged().unwrap();
            let mut want = vec![0u8; ragged.gather_len(batch.indices()).unwrap()];
            let layout = ragged.gather_into(batch.indices(), &mut want).unwrap();
            assert_eq!(r.bytes(), &want[..], "step {}", batch.step());
            assert_eq!(r.layout(), &ColumnLayout::Ragged(layout));
            let d = batch.column("d").unwrap();
            assert_eq!(
                d.bytes(),
                &dense
                    .as_dense()
                    .unwrap()
                    .gather_bytes(batch.indices())
                    .unwrap()[..]
            );
        }
    }

    #[test]
    fn the_look_ahead_reads_ahead_and_changes_no_batch() {
        use crate::ReadMode;
        let dir = tempfile::tempdir().unwrap();
        let n = 3000u64;
        let mut w = DenseWriter::<u8>::create(dir.path().join("d"), &[256], Codec::Raw).unwrap();
        let bytes: Vec<u8> = (0..n as usize * 256)
            .map(|k| (k * 7 + k / 256) as u8)
            .collect();
        w.append_slice(&bytes, n as usize).unwrap();
        w.close().unwrap();
        let mut w =
            crate::RaggedWriter::<u16>::create(dir.path().join("r"), 1, Codec::Zstd).unwrap();
        w.append((0..n as u16).map(|i| vec![i; 1 + (i as usize * 13) % 300]))
            .unwrap();
        w.close().unwrap();
        let open = || {
            (
                Stream::from(crate::DynDense::open(dir.path().join("d")).unwrap()),
                Stream::from(crate::DynRagged::open(dir.path().join("r")).unwrap()),
            )
        };
        type Seen = Vec<(u64, Vec<u64>, Vec<u8>, Vec<u8>)>;
        let run = |mode: ReadMode, bytes: u64, workers: usize, start: u64| -> (Seen, LoaderStats) {
            let (d, r) = open();
            let mut loader = DataLoader::builder()
                .stream("d", d)
                .stream("r", r)
                .batch_size(64)
                .mode(SamplerMode::Iid)
                .workers(workers)
                .read_mode(mode)
                .prefetch_bytes(bytes)
                .start_step(start)
                .build()
                .unwrap();
            let seen = loader
                .by_ref()
                .take(30)
                .map(|b| {
                    let b = b.unwrap();
                    let col = |name: &str| b.column(name).unwrap().bytes().to_vec();
                    (b.step(), b.indices().to_vec(), col("d"), col("r"))
                })
                .collect();
            // A Direct store is read ahead: the look-ahead runs while the
            // loader lives (given time, on a loaded machine).
            if mode == ReadMode::Direct && workers > 0 && bytes > 0 {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while loader.stats().prefetched_bytes == 0 && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            (seen, loader.stats())
        };
        let (reference, stats) = run(ReadMode::Mapped, 0, 2, 0);
        assert_eq!(stats.prefetched_bytes, 0);
        for mode in [ReadMode::Direct, ReadMode::Auto, ReadMode::Mapped] {
            let (seen, stats) = run(mode, 1 << 20, 2, 0);
            assert_eq!(seen, reference, "{mode:?}");
            if mode == ReadMode::Direct {
                assert!(stats.prefetched_bytes > 0, "{stats:?}");
            }
            if mode == ReadMode::Mapped {
                assert_eq!(stats.prefetched_bytes, 0);
            }
            // Resumed, and synchronous: the same batches.
            let (resumed, _) = run(mode, 1 << 20, 2, 10);
            assert_eq!(resumed[..20], reference[10..], "{mode:?}");
            let (sync, stats) = run(mode, 1 << 20, 0, 0);
            assert_eq!(sync, reference, "{mode:?}");
            assert_eq!(stats.prefetched_bytes, 0, "no look-ahead without workers");
        }
    }

    #[test]
    fn a_windowed_look_ahead_asks_for_whole_blocks_once_and_changes_no_batch() {
        use crate::ReadMode;
        use std::sync::atomic::Ordering::Relaxed;
        let dir = tempfile::tempdir().unwrap();
        let (n, width, block, window) = (4096u64, 64u64, 128u32, 4u32);
        let opts = crate::CreateOptions::new(Codec::Raw).data_shards(4);
        let mut w =
            crate::DynDenseWriter::create(dir.path().join("d"), crate::DType::U8, &[64], &opts)
                .unwrap();
        let bytes: Vec<u8> = (0..n * width).map(|k| (k * 7 + k / 64) as u8).collect();
        w.append_bytes(&bytes, n as usize).unwrap();
        w.close().unwrap();
        let block_bytes = u64::from(block) * width;
        // (batches, bytes asked for, WILLNEED runs, shards)
        let run = |mode: ReadMode, ahead: u64| {
            let d = crate::DynDense::open(dir.path().join("d")).unwrap();
            let stream = Stream::from(d);
            let mut loader = DataLoader::builder()
                .stream("d", stream.clone())
                .batch_size(32)
                .mode(SamplerMode::Windowed { block, window })
                .seed(3)
                .workers(2)
                .read_mode(mode)
                .prefetch_bytes(ahead)
                .build()
                .unwrap();
            let seen: Vec<(Vec<u64>, Vec<u8>)> = loader
                .by_ref()
                .take(20)
                .map(|b| {
                    let b = b.unwrap();
                    (
                        b.indices().to_vec(),
                        b.column("d").unwrap().bytes().to_vec(),
                    )
                })
                .collect();
            if mode == ReadMode::Direct {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while loader.stats().prefetched_bytes == 0 && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            // Stopped first: the look-ahead asks for nothing after the count.
            loader.stop();
            let stats = loader.stats();
            drop(loader);
            let engine = stream.engine();
            let runs: u64 = engine
                .stores()
                .iter()
                .map(|r| r.cold_counters().will_need_runs.load(Relaxed))
                .sum();
            (
                seen,
                stats.prefetched_bytes,
                runs,
                engine.data_shards() as u64,
            )
        };
        let (reference, asked, _, _) = run(ReadMode::Mapped, 0);
        assert_eq!(asked, 0);
        // A window is 512 records, 16 steps; a budget of 2 windows keeps the
        // look-ahead within the first pass (128 steps).
        let (seen, asked, runs, shards) =
            run(ReadMode::Direct, 2 * u64::from(window) * block_bytes);
        assert_eq!(seen, reference, "the same batches");
        assert!(asked > 0);
        // Whole blocks, each asked for once: one advice per block and
        // shard at most (adjacent blocks merge), never a record alone.
        assert_eq!(asked % block_bytes, 0, "{asked}");
        assert!(asked <= n * width, "{asked}");
        let blocks = asked / block_bytes;
        assert!(runs <= blocks * shards, "{runs} runs for {blocks} blocks");
        // The blocks of the steps delivered were asked for: every one of
        // the first window's (the look-ahead starts at step 0).
        let first: std::collections::BTreeSet<u64> = reference[..16]
            .iter()
            .flat_map(|(idx, _)| idx.iter().map(|&i| i / u64::from(block)))
            .collect();
        assert_eq!(first.len(), window as usize);
        assert!(blocks >= window as u64, "{blocks}");
    }

    #[test]
    fn a_windowed_look_ahead_reads_large_records_into_memory_not_their_blocks() {
        use crate::ReadMode;
        use std::sync::atomic::Ordering::Relaxed;
        let dir = tempfile::tempdir().unwrap();
        // Records of 512 KiB (LARGE_RECORD_BYTES): 40 of them, blocks of 4.
        let (n, width) = (40u64, 512u64 << 10);
        assert!(width >= LARGE_RECORD_BYTES);
        let opts = crate::CreateOptions::new(Codec::Raw).data_shards(2);
        let mut w = crate::DynDenseWriter::create(
            dir.path().join("d"),
            crate::DType::U8,
            &[width as usize],
            &opts,
        )
        .unwrap();
        let bytes: Vec<u8> = (0..n * width).map(|k| (k / 4099) as u8 ^ k as u8).collect();
        w.append_bytes(&bytes, n as usize).unwrap();
        w.close().unwrap();
        let run = |mode: ReadMode| {
            let d = crate::DynDense::open(dir.path().join("d")).unwrap();
            let stream = Stream::from(d);
            let loader = DataLoader::builder()
                .stream("d", stream.clone())
                .batch_size(4)
                .mode(SamplerMode::Windowed {
                    block: 4,
                    window: 3,
                })
                .seed(5)
                .epochs(2)
                .workers(2)
                .read_mode(mode)
                .build()
                .unwrap();
            let seen: Vec<Vec<u8>> = loader
                .map(|b| b.unwrap().column("d").unwrap().bytes().to_vec())
                .collect();
            let engine = stream.engine();
            let count = |f: fn(&crate::engine::cold::ColdCounters) -> u64| -> u64 {
                engine.stores().iter().map(|r| f(r.cold_counters())).sum()
            };
            let runs = count(|c| c.will_need_runs.load(Relaxed));
            let (ahead, hits, own) = (
                count(|c| c.ahead_records.load(Relaxed)),
                count(|c| c.ahead_hits.load(Relaxed)),
                count(|c| c.own_reads.load(Relaxed)),
            );
            let direct = engine.stores().iter().all(|r| r.o_direct_usable());
            (seen, runs, ahead, hits + own, direct)
        };
        let (reference, ..) = run(ReadMode::Mapped);
        assert_eq!(reference.len(), 20);
        let (seen, runs, ahead, gathered, direct) = run(ReadMode::Direct);
        assert_eq!(seen, reference, "the same batches");
        if direct {
            // No block advised into the page cache; records read ahead
            // into memory, each gathered record read once.
            assert_eq!(runs, 0, "no WILLNEED runs");
            assert!(ahead > 0, "read ahead");
            assert_eq!(gathered, 2 * n, "every record of two epochs");
        }
    }

    #[test]
    fn a_worker_that_cannot_be_spawned_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        let mut w = DenseWriter::<u32>::create(&path, &[2], Codec::Raw).unwrap();
        w.append_slice(&(0..64).collect::<Vec<u32>>(), 32).unwrap();
        w.close().unwrap();
        let store = Stream::from(crate::Dense::<u32>::open(&path).unwrap());
        for fail_from in [0usize, 1, 3] {
            FAIL_SPAWN_FROM.with(|f| f.set(Some(fail_from)));
            let built = DataLoader::builder()
                .stream("x", store.clone())
                .batch_size(4)
                .mode(SamplerMode::Sequential)
                .workers(4)
                .build();
            FAIL_SPAWN_FROM.with(|f| f.set(None));
            let e = built
                .err()
                .unwrap_or_else(|| panic!("built with failing worker {fail_from}"));
            assert!(
                matches!(e.kind(), ErrorKind::WorkerSpawn { worker, .. } if *worker == fail_from),
                "{e}"
            );
        }
        // With every spawn succeeding, the same loader delivers.
        let mut ok = DataLoader::builder()
            .stream("x", store.clone())
            .batch_size(4)
            .mode(SamplerMode::Sequential)
            .workers(4)
            .build()
            .unwrap();
        assert_eq!(ok.next().unwrap().unwrap().indices(), &[0, 1, 2, 3]);
    }
}
