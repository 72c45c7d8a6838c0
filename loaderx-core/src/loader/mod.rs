mod batch;
mod epochs;
mod histogram;
pub(crate) mod lap;
mod mixture;
mod pinned;
mod pipeline;
mod recorder;
mod stage;
mod staging;
mod stats;
mod trace_file;
mod views;

use std::sync::Arc;

pub use batch::{Batch, Column, ColumnLayout};
pub use epochs::{EpochIter, EpochLoader, EpochStats};
pub use mixture::{MixtureSource, MixtureStreams};
pub use pinned::{
    PinnedAlloc, PinnedBlock, PinnedBuffer, PinnedPool, PinnedPoolConfig, PinnedPoolStats,
};
pub use pipeline::DataLoader;
pub use stage::Stage;
pub use staging::{
    BufferPool, ColumnBuffer, PooledBuffer, StageRequest, StagedBuffer, Staging, StagingCounter,
    StagingStats,
};
pub use stats::{Bottleneck, INPUT_BOUND_SHARE, LoaderStats, StageStats, StageTimes, WorkerStats};
pub use views::view_range;

use crate::adapter::AlignedBuf;
use crate::dense::{Dense, DynDense};
use crate::dtype::Element;
use crate::engine::cold::ReadMode;
use crate::error::Error;
use crate::ragged::{DynRagged, Ragged};
use crate::sampler::{Sampler, SamplerBuilder, SamplerMode};
use crate::sequence::{LengthIndex, PackOptions};
use crate::store::Store;

/// A store a loader reads, shared between its workers: an open [`Store`]
/// (either contract) behind an `Arc`, so cloning it is cheap. It
/// dereferences to the [`Store`], whose accessors (`len`, `kind`, `dtype`,
/// `as_dense`, `as_ragged`...) it has.
#[derive(Clone)]
pub struct Stream(Arc<Store>);

impl Stream {
    /// The store.
    pub fn store(&self) -> &Store {
        &self.0
    }

    /// Gathers the records at `indices`, in that order, into one new
    /// aligned buffer, outside any loader: a Dense stream's `(B, *item_shape)`
    /// block, or a Ragged stream's records, each 8-byte aligned. What an
    /// adapter decodes single records from (e.g. a dataset's items).
    ///
    /// # Errors
    ///
    /// The gather's errors ([`ErrorKind::IndexOutOfRange`](crate::ErrorKind::IndexOutOfRange),
    /// [`ErrorKind::CorruptRecord`](crate::ErrorKind::CorruptRecord));
    /// [`ErrorKind::Buffer`](crate::ErrorKind::Buffer) when the buffer cannot be
    /// had or its size overflows.
    pub fn gather(&self, indices: &[u64]) -> Result<Column, Error> {
        let (dtype, layout, buffer) = match self.store() {
            Store::Dense(s) => {
                let len = indices.len().checked_mul(s.record_bytes()).ok_or_else(|| {
                    crate::ErrorKind::Buffer {
                        detail: format!(
                            "{} records of {} bytes do not fit in memory",
                            indices.len(),
                            s.record_bytes()
                        ),
                    }
                })?;
                let mut buffer = AlignedBuf::zeroed(len)?;
                s.gather_into(indices, buffer.as_bytes_mut())?;
                let mut shape = Vec::with_capacity(1 + s.item_shape().len());
                shape.push(indices.len());
                shape.extend_from_slice(s.item_shape());
                (s.dtype(), ColumnLayout::Dense { shape }, buffer)
            }
            Store::Ragged(s) => {
                let mut buffer = AlignedBuf::zeroed(s.gather_len(indices)?)?;
                let layout = s.gather_into(indices, buffer.as_bytes_mut())?;
                (s.dtype(), ColumnLayout::Ragged(layout), buffer)
            }
        };
        Ok(Column {
            dtype,
            layout,
            len: buffer.len(),
            buffer: ColumnBuffer::Host(buffer),
        })
    }

    /// Checks named streams that are read together (a loader's, or an
    /// adapter's dataset): at least one stream, every name used once, every
    /// stream of the same length, which is returned.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// naming the offending stream(s).
    pub fn check_named(streams: &[(String, Stream)]) -> Result<u64, Error> {
        let Some((_, first)) = streams.first() else {
            return Err(Error::invalid("at least one stream is needed"));
        };
        let len = first.len();
        if streams.iter().any(|(_, s)| s.len() != len) {
            let lengths: Vec<String> = streams
                .iter()
                .map(|(n, s)| format!("{n}: {}", s.len()))
                .collect();
            return Err(Error::invalid(format!(
                "all streams must hold the same number of records, got {}",
                lengths.join(", ")
            )));
        }
        for (i, (name, _)) in streams.iter().enumerate() {
            if streams[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::invalid(format!("stream name {name:?} used twice")));
            }
        }
        Ok(len)
    }
}

impl std::ops::Deref for Stream {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.0
    }
}

impl From<Store> for Stream {
    fn from(s: Store) -> Stream {
        Stream(Arc::new(s))
    }
}

impl From<Arc<Store>> for Stream {
    fn from(s: Arc<Store>) -> Stream {
        Stream(s)
    }
}

impl From<DynDense> for Stream {
    fn from(s: DynDense) -> Stream {
        Store::Dense(s).into()
    }
}

impl<T: Element> From<Dense<T>> for Stream {
    fn from(s: Dense<T>) -> Stream {
        Store::from(s).into()
    }
}

impl From<DynRagged> for Stream {
    fn from(s: DynRagged) -> Stream {
        Store::Ragged(s).into()
    }
}

impl<T: Element> From<Ragged<T>> for Stream {
    fn from(s: Ragged<T>) -> Stream {
        Store::from(s).into()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The default of [`DataLoaderBuilder::prefetch_bytes`]: 64 MiB of stored
/// bytes read ahead (about 16 000 records of 4 KiB, or a second of a fast
/// drive's random reads of them).
pub const DEFAULT_PREFETCH_BYTES: u64 = 64 << 20;

/// The default of [`DataLoaderBuilder::prefetch_bytes`] in the
/// [`Windowed`](crate::SamplerMode::Windowed) order: 256 MiB, four windows
/// of 16 blocks of 4 MiB (with one window ahead, the drive waits for each
/// next window's first step: 0.77× of its sequential bandwidth with 4 KiB
/// records, 0.91× with four).
pub const DEFAULT_WINDOWED_PREFETCH_BYTES: u64 = 256 << 20;

/// Most steps the look-ahead runs past the consumer
/// ([`DataLoaderBuilder::prefetch_bytes`]), whatever their size.
pub const MAX_LOOKAHEAD_STEPS: u64 = 256;
/// What the workers run on a step's batches (buffers of type `B`): one per
/// view the loader delivers (one, unless built with
/// [`build_views`](DataLoaderBuilder::build_views)).
pub(crate) type Transform<T, B> = Arc<dyn Fn(Vec<Batch<B>>) -> Result<T, BoxError> + Send + Sync>;

/// Configures a [`DataLoader`]. Cloning it is
/// cheap (streams and staging are shared), so one configuration can start
/// several loaders, e.g. at different [`start_step`](Self::start_step)s.
///
/// The endless, step-based, multi-threaded DataLoader.
///
/// A loader gathers named streams (Dense and Ragged, mixed) at the indices a
/// [`Sampler`] gives for each step, on worker threads, runs an optional
/// transform there, and hands results to the consumer **in step order**,
/// whatever the number of workers: batch `k` is always the sampler's step
/// `k`, so a run is reproducible and [`DataLoaderBuilder::start_step`]
/// resumes it exactly.
///
/// - Workers claim steps in order and run ahead of the consumer by at most
///   `workers + prefetch` batches in flight (claimed and not yet delivered);
///   that bounds memory and the reorder window. With
///   [`workers(0)`](DataLoaderBuilder::workers) the loader is synchronous:
///   no thread, each step made in the consumer's `next`, the same batches.
/// - Each stream's batch is gathered straight into a buffer its [`Staging`]
///   hook provides; the default [`BufferPool`] recycles buffers when batches
///   are dropped, so steady state allocates nothing.
/// - A gather error, a transform error or a panic reaches the consumer as
///   `Err` at its step, after which the iterator ends. Dropping the loader
///   stops and joins every worker.
///
/// ```
/// use loaderx_core::DataLoader;
/// use loaderx_core::SamplerMode;
/// use loaderx_core::{Codec, Dense, DenseWriter, RaggedWriter, Ragged};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[4], Codec::Raw)?;
/// w.append_slice(&(0..400).map(|v| v as f32).collect::<Vec<_>>(), 100)?;
/// w.close()?;
/// let mut w = RaggedWriter::<u32>::create(dir.path().join("tok"), 1, Codec::Zstd)?;
/// w.append((0..100u32).map(|i| vec![i; 1 + i as usize % 5]))?;
/// w.close()?;
///
/// let loader = DataLoader::builder()
///     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
///     .stream("tok", Ragged::<u32>::open(dir.path().join("tok"))?)
///     .batch_size(16)
///     .mode(SamplerMode::Cyclic)
///     .seed(7)
///     .workers(2)
///     .build()?;
/// for batch in loader.take(10) {
///     let batch = batch?;
///     let x = batch.dense::<f32>("x")?;          // (16, 4)
///     let tok = batch.ragged::<u32>("tok")?;     // 16 views
///     assert_eq!(x[[0, 0]] as u32 / 4, tok[0][0]); // streams line up
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DataLoaderBuilder<S = BufferPool> {
    streams: Vec<(String, Stream)>,
    /// Batch size, mode, seed, shard, `drop_last` and lengths, with the
    /// sampler's own defaults; the record count comes from the streams
    /// when the loader is built.
    sampling: SamplerBuilder,
    /// Settings the caller made, which a caller-built sampler must agree
    /// with (`drop_last`) or which apply to it (`shard`).
    explicit_drop_last: bool,
    explicit_shard: bool,
    sampler: Option<Sampler>,
    workers: usize,
    prefetch: usize,
    /// Stored bytes the look-ahead reads ahead of the workers; `None`:
    /// the default of the sampler's order.
    prefetch_bytes: Option<u64>,
    /// Set on every stream's store when a loader starts.
    read_mode: Option<ReadMode>,
    start_step: Option<u64>,
    epochs: Option<u64>,
    /// Where batches are gathered; shared by the loaders this builder starts.
    staging: Arc<S>,
    pack: Option<(String, PackOptions)>,
    packed: bool,
    /// How each global batch is split, and which views are delivered.
    placement: views::Placement<S>,
    /// Streams decoded and augmented on the workers.
    #[cfg(feature = "vision")]
    augment: Vec<(String, crate::vision::Pipeline)>,
    /// Stages are recorded (the default).
    record: bool,
    /// The trace file to write; `None`: `LOADERX_TRACE`'s, if set.
    trace: Option<std::path::PathBuf>,
}

impl<S> Clone for DataLoaderBuilder<S> {
    fn clone(&self) -> Self {
        DataLoaderBuilder {
            streams: self.streams.clone(),
            sampling: self.sampling.clone(),
            explicit_drop_last: self.explicit_drop_last,
            explicit_shard: self.explicit_shard,
            sampler: self.sampler.clone(),
            workers: self.workers,
            prefetch: self.prefetch,
            prefetch_bytes: self.prefetch_bytes,
            read_mode: self.read_mode,
            start_step: self.start_step,
            epochs: self.epochs,
            staging: Arc::clone(&self.staging),
            pack: self.pack.clone(),
            packed: self.packed,
            placement: self.placement.clone(),
            #[cfg(feature = "vision")]
            augment: self.augment.clone(),
            record: self.record,
            trace: self.trace.clone(),
        }
    }
}

impl Default for DataLoaderBuilder {
    fn default() -> Self {
        DataLoaderBuilder {
            streams: Vec::new(),
            sampling: Sampler::builder(0, 256),
            explicit_drop_last: false,
            explicit_shard: false,
            sampler: None,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get().min(4)),
            prefetch: 2,
            prefetch_bytes: None,
            read_mode: None,
            start_step: None,
            epochs: None,
            staging: Arc::new(BufferPool::new(0)),
            pack: None,
            packed: false,
            placement: views::Placement::whole(),
            #[cfg(feature = "vision")]
            augment: Vec::new(),
            record: true,
            trace: None,
        }
    }
}

impl DataLoader<Batch> {
    /// A builder with the defaults: batch 256, `Cyclic` sampling with seed
    /// 42, up to 4 workers, prefetch 2, starting at step 0.
    pub fn builder() -> DataLoaderBuilder {
        DataLoaderBuilder::default()
    }
}

impl<S: Staging> DataLoaderBuilder<S> {
    /// The streams added so far (for [`profile`](crate::profile)).
    pub(crate) fn configured_streams(&self) -> &[(String, Stream)] {
        &self.streams
    }

    /// The worker threads the loader will start.
    pub(crate) fn configured_workers(&self) -> usize {
        self.workers
    }

    /// Records per full batch: the given sampler's, else the setting.
    pub(crate) fn configured_batch_size(&self) -> usize {
        self.sampler
            .as_ref()
            .map_or(self.sampling.batch_size, Sampler::batch_size)
    }

    /// The streams decoded and augmented on the workers.
    #[cfg(feature = "vision")]
    pub(crate) fn configured_augment(&self) -> &[(String, crate::vision::Pipeline)] {
        &self.augment
    }

    /// Adds a named stream; every stream must hold the same number of records.
    pub fn stream(mut self, name: impl Into<String>, stream: impl Into<Stream>) -> Self {
        self.streams.push((name.into(), stream.into()));
        self
    }

    /// Records per batch (default 256; with [`SamplerMode::TokenBudget`]
    /// the most a batch holds); ignored when a [`sampler`](Self::sampler)
    /// is given.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.sampling.batch_size = batch_size;
        self
    }

    /// Sampling mode (default `Cyclic`).
    pub fn mode(mut self, mode: SamplerMode) -> Self {
        self.sampling = self.sampling.mode(mode);
        self
    }

    /// Sampler seed (default 42).
    pub fn seed(mut self, seed: u64) -> Self {
        self.sampling = self.sampling.seed(seed);
        self
    }

    /// Uses a caller-built sampler (its length must match the streams');
    /// batch size, mode, seed and sharding come from it. A sampler that was
    /// [`seek`](Sampler::seek)ed or advanced starts the loader at its step,
    /// unless [`start_step`](Self::start_step) says otherwise, in which case
    /// the two must agree (or the sampler be at step 0).
    pub fn sampler(mut self, sampler: Sampler) -> Self {
        self.sampler = Some(sampler);
        self
    }

    /// Worker threads gathering and transforming batches (default: up to 4).
    ///
    /// `0` makes the loader synchronous: no thread is started, and each
    /// call to `next` samples, gathers and transforms its step in the
    /// caller's thread. The batches are exactly those of a threaded loader
    /// (the same steps, indices and bytes); nothing is made ahead, so at
    /// most one batch is live beyond those the caller keeps, and a step
    /// costs no hand-over between threads. Use it for light transforms,
    /// strict caller-thread order or the least live memory; use workers to
    /// overlap slow gathers (remote stores, zstd) or heavy transforms with
    /// training.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Extra finished batches allowed to wait for the consumer (default 2;
    /// a synchronous loader, `workers(0)`, makes none ahead).
    pub fn prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Stored bytes the look-ahead may have asked for ahead of the batches
    /// the consumer took (default [`DEFAULT_PREFETCH_BYTES`], 64 MiB, and
    /// [`DEFAULT_WINDOWED_PREFETCH_BYTES`], 256 MiB, in the windowed order;
    /// 0 turns it off).
    ///
    /// The sampler says every future batch, so while the workers gather
    /// the next steps a look-ahead thread asks for the records of the steps
    /// after them, up to this many stored bytes (and at most
    /// [`MAX_LOOKAHEAD_STEPS`] steps) past the consumer: a local store
    /// that reads cold ([`ReadMode`]) reads them into the loader's memory
    /// with `O_DIRECT` (many reads in flight, the page cache bypassed; the
    /// page cache where the file system refuses `O_DIRECT`), a remote store
    /// fetches their blocks into its block cache. The gathers then find
    /// them there; nothing is read twice, and nothing read is dropped while
    /// the consumer is slow (the look-ahead waits). This bound is memory
    /// the loader may hold beside its batches. A warm or
    /// [`ReadMode::Mapped`] local store is not read ahead. A synchronous
    /// loader ([`workers(0)`](Self::workers)) has no look-ahead.
    ///
    /// In the [`Windowed`](crate::SamplerMode::Windowed) order the
    /// look-ahead asks for whole blocks, once each, instead of single
    /// records, into the page cache, so that the drive reads them at its
    /// sequential speed: a block's bytes count against this bound at the
    /// first step that draws from it, so the default of 256 MiB holds four
    /// windows of 16 blocks of 4 MiB (a larger window asks for all its
    /// blocks at its first step).
    /// A loader that delivers less than a quarter of each global batch
    /// (ranks of a large world, some views) asks for its own records only.
    pub fn prefetch_bytes(mut self, bytes: u64) -> Self {
        self.prefetch_bytes = Some(bytes);
        self
    }

    /// How every stream's store is read ([`ReadMode`]): set on the stores
    /// when a loader starts (so on every other handle of them too). Unset,
    /// each store keeps its own mode ([`ReadMode::Auto`] unless set).
    pub fn read_mode(mut self, mode: ReadMode) -> Self {
        self.read_mode = Some(mode);
        self
    }

    /// The first step to deliver: resuming at step `k` yields exactly what an
    /// uninterrupted run yields from step `k` on.
    pub fn start_step(mut self, step: u64) -> Self {
        self.start_step = Some(step);
        self
    }

    /// Reads the streams of a weighted mixture in place of
    /// [`stream`](Self::stream)s: every source's stores of one name as one
    /// stream, each step's records allocated among the sources by
    /// `mixture`'s [`Mixture`](crate::Mixture) (see the
    /// [`Sampler` docs](crate::Sampler#weighted-mixtures)); each
    /// [`Batch::sources`] says which source each record came from. The
    /// mode must stay `Cyclic` or `Sequential` (a source's own mode is set
    /// on its [`MixtureSource`]); sharding, resume, placement views,
    /// packing and every adapter work as for one set of streams.
    pub fn mixture(mut self, mixture: MixtureStreams) -> Self {
        self.streams = mixture.streams().to_vec();
        self.sampling.mixture = Some(Arc::new(mixture.mixture().clone()));
        self
    }

    /// Continues a run from the record position it stopped at (its
    /// sampler's [`position`](Sampler::position) of the step it would have
    /// drawn next), with this loader's batch size and world size, which may
    /// differ from the run's: step 0 is the first batch after `position`,
    /// every record the run had not yet drawn in its pass comes once and
    /// none it drew comes again (see the
    /// [`Sampler` docs](crate::Sampler#resuming-at-a-record-position)).
    /// `Sequential` and `Cyclic` only. [`epochs(n)`](Self::epochs) still
    /// ends before pass `n` of the run.
    pub fn resume(mut self, position: crate::RecordPosition) -> Self {
        self.sampling = self.sampling.resume(position);
        self
    }

    /// Reads only rank `rank`'s share of every step (multi-host training).
    pub fn shard(mut self, rank: usize, world_size: usize) -> Self {
        self.sampling = self.sampling.shard(rank, world_size);
        self.explicit_shard = true;
        self
    }

    /// `true` (the default): every batch is full. `false`: every record is
    /// delivered exactly once per pass and the last batch of a pass may be
    /// partial (also across [`shard`](Self::shard)ed ranks); refused with
    /// `Iid` sampling. See the [sampler docs](crate::Sampler#passes-epochs-and-the-last-batch).
    /// With a caller-built [`sampler`](Self::sampler), the sampler's own
    /// setting counts and this must agree with it.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.sampling = self.sampling.drop_last(drop_last);
        self.explicit_drop_last = true;
        self
    }

    /// Ends the loader after `epochs` passes over the data:
    /// `epochs * steps_per_epoch` steps counted from step 0 (so a loader
    /// resumed with [`start_step`](Self::start_step) ends where the
    /// uninterrupted one does; one [`resume`](Self::resume)d at a record
    /// position ends before pass `epochs` of the run it continues). Without it the loader is endless. With `Iid`
    /// sampling a pass is `ceil(len / (batch_size * world_size))` steps.
    ///
    /// A validation loop is `.mode(SamplerMode::Sequential).drop_last(false).epochs(1)`.
    pub fn epochs(mut self, epochs: u64) -> Self {
        self.epochs = Some(epochs);
        self
    }

    /// Where batches are gathered (default: a [`BufferPool`]); the batches
    /// then hold its [`Buffer`](Staging::Buffer)s. Placement views are
    /// reset to the whole batch.
    pub fn staging<S2: Staging>(self, staging: S2) -> DataLoaderBuilder<S2> {
        self.with_staging(Arc::new(staging))
    }

    /// This configuration with `staging` (shared).
    pub(crate) fn with_staging<S2: Staging>(self, staging: Arc<S2>) -> DataLoaderBuilder<S2> {
        let placement = views::Placement::one_of(&self.placement);
        DataLoaderBuilder {
            streams: self.streams,
            sampling: self.sampling,
            explicit_drop_last: self.explicit_drop_last,
            explicit_shard: self.explicit_shard,
            sampler: self.sampler,
            workers: self.workers,
            prefetch: self.prefetch,
            prefetch_bytes: self.prefetch_bytes,
            read_mode: self.read_mode,
            start_step: self.start_step,
            epochs: self.epochs,
            staging,
            pack: self.pack,
            packed: self.packed,
            placement,
            #[cfg(feature = "vision")]
            augment: self.augment,
            record: self.record,
            trace: self.trace,
        }
    }

    /// Record lengths for the length-aware sampler modes
    /// ([`SamplerMode::Bucketed`], [`SamplerMode::TokenBudget`]). Without
    /// it, a loader with one Ragged stream uses that stream's
    /// [`lengths`](DynRagged::lengths) (built once per open store).
    pub fn lengths(mut self, lengths: LengthIndex) -> Self {
        self.sampling = self.sampling.lengths(lengths);
        self
    }

    /// Gathers Ragged streams packed (default: false): each batch's
    /// records' elements end to end from the buffer's first byte, with no
    /// shape headers or alignment padding between them, so that
    /// [`Column::packed`]'s `values` (Python loaderx 2.8.19's `RaggedBatch`
    /// layout) is the staged buffer itself, which an adapter hands to its
    /// framework without a copy. The staging is asked for the values as a
    /// 1-D array ([`StageRequest::shape`] is `[elements]`). Every other
    /// use of the column (views, padding, per-record tensors, `pack`) works
    /// the same on either layout. Raw records are copied straight to their
    /// place; a compressed one goes through a worker's scratch (the default
    /// layout decodes it in place).
    pub fn packed(mut self, packed: bool) -> Self {
        self.packed = packed;
        self
    }

    /// Packs Ragged stream `stream` of every batch into rows of
    /// `options.max_len()` tokens on the workers, before any transform:
    /// the batch then has Dense streams `stream` (tokens),
    /// `stream.segment_ids`, `stream.positions` and `stream.segments`
    /// instead (see [`sequence::pack_batch`](crate::sequence::pack_batch)),
    /// which every adapter converts like any Dense stream.
    pub fn pack(mut self, stream: impl Into<String>, options: PackOptions) -> Self {
        self.pack = Some((stream.into(), options));
        self
    }

    /// Decodes and augments stream `stream` (Ragged `u8` records holding
    /// encoded JPEG, PNG or WebP files) with `pipeline` on the workers, before
    /// packing and any transform: the batch's column becomes a Dense one of
    /// `(B, *pipeline.record_shape())` in the pipeline's output type,
    /// gathered into this builder's staging. Random draws are keyed by the
    /// seed, the stream, the rank, the step and the record's position, so
    /// a resumed loader yields the same bytes (see [`vision`](crate::vision)).
    /// A record that cannot be decoded is the step's error, naming the
    /// stream and the record.
    #[cfg(feature = "vision")]
    pub fn augment(mut self, stream: impl Into<String>, pipeline: crate::vision::Pipeline) -> Self {
        self.augment.push((stream.into(), pipeline));
        self
    }

    /// Records where each batch's time goes (default: on): every worker
    /// times its batches by [`Stage`] (a few clock reads per batch and
    /// stream, well under 1 % of the fastest loader's throughput), the
    /// consumer its waits, for [`DataLoader::stats`], the `tracing` spans
    /// and the [`trace`](Self::trace) file. `false` turns all of it off
    /// (the stats then hold the counters only), e.g. to measure what the
    /// recording costs.
    pub fn record_stages(mut self, record: bool) -> Self {
        self.record = record;
        self
    }

    /// Writes a Chrome / Perfetto trace of the loader to `path` (created
    /// or truncated when the loader starts, complete when it is dropped),
    /// which opens in ui.perfetto.dev or `chrome://tracing`: a lane for
    /// the consumer (its waits for batches) and one per worker (each
    /// batch, its stages inside it, the waits for the consumer), complete
    /// events in microseconds since the loader started. A batch's stages
    /// are drawn one after another in pipeline order, each as long as its
    /// total in the batch; a slow batch's event lists its record ids.
    ///
    /// Without it, the environment variable `LOADERX_TRACE=path` does the
    /// same for every loader the process starts (the second writes
    /// `path` numbered, `trace.1.json`, and so on). Events are written
    /// through a bounded buffer as they come, so a long run holds no more
    /// memory than a short one. No trace is written with
    /// [`record_stages(false)`](Self::record_stages).
    pub fn trace(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.trace = Some(path.into());
        self
    }

    /// Starts a loader that delivers [`Batch`]es.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for
    /// a bad configuration (no stream, streams of different lengths, a name
    /// used twice, no worker, a sampler that does not fit, a `start_step`
    /// that conflicts with the given sampler's step or lies past the end of
    /// [`epochs`](Self::epochs), `drop_last(false)` with `Iid`);
    /// [`ErrorKind::WorkerSpawn`](crate::ErrorKind::WorkerSpawn) when a
    /// worker thread cannot be started (the threads already started are
    /// stopped and joined first); [`ErrorKind::Io`](crate::ErrorKind::Io)
    /// when the [`trace`](Self::trace) file cannot be created.
    pub fn build(self) -> Result<DataLoader<Batch<S::Buffer>>, Error> {
        self.start_one(Ok::<_, Error>)
    }

    /// Starts a loader that runs `transform` on every batch, on the workers.
    /// It may run concurrently on several threads; results are still
    /// delivered in step order.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    pub fn build_with<T, E, F>(self, transform: F) -> Result<DataLoader<T>, Error>
    where
        T: Send + 'static,
        E: Into<BoxError>,
        F: Fn(Batch<S::Buffer>) -> Result<T, E> + Send + Sync + 'static,
    {
        self.start_one(transform)
    }

    /// Starts a loader that converts every batch to framework tensors with
    /// `converter` (Ragged streams as `mode` says) and then applies `map`,
    /// all on the workers: the loader glue every adapter shares. The batches
    /// are gathered where the converter's
    /// [`staging`](crate::adapter::ColumnConverter::staging) says, when it has
    /// one, or else by this builder's [`staging`](Self::staging).
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    pub fn build_tensors<C, T, F>(
        self,
        converter: C,
        mode: crate::adapter::RaggedMode,
        map: F,
    ) -> Result<DataLoader<T>, Error>
    where
        C: crate::adapter::ColumnConverter,
        C::Error: std::error::Error + Sync,
        T: Send + 'static,
        F: Fn(crate::adapter::TensorBatch<C::Tensor>) -> Result<T, C::Error>
            + Send
            + Sync
            + 'static,
    {
        let mut builder = self.staging(converter.staging());
        if mode == crate::adapter::RaggedMode::Packed {
            builder.packed = true;
        }
        builder.build_with(move |batch| {
            map(crate::adapter::TensorBatch::convert(
                batch, &converter, mode,
            )?)
        })
    }

    /// The sampler [`build`](Self::build) would draw with, after the same
    /// checks of the streams and the sampling settings; starts nothing.
    /// Adapters use it to know a loader's passes
    /// ([`Sampler::steps_per_epoch`], [`Sampler::batch_len`]) before
    /// starting one.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build), except the checks of `start_step` and
    /// `epochs`.
    pub fn resolved_sampler(&self) -> Result<Sampler, Error> {
        let len = Stream::check_named(&self.streams)?;
        let (rank, world) = (self.sampling.rank, self.sampling.world_size);
        let mode = self.sampling.mode;
        let lengths = match self.sampling.lengths.clone() {
            Some(l) => Some(l),
            None if self.sampler.is_none() && mode.needs_lengths() => {
                let ragged: Vec<(&String, &DynRagged)> = self
                    .streams
                    .iter()
                    .filter_map(|(n, s)| Some((n, s.as_ragged()?)))
                    .collect();
                match ragged[..] {
                    [(_, r)] => Some(r.lengths()?.clone()),
                    _ => {
                        return Err(Error::invalid(format!(
                            "{:?} sampling needs record lengths: give them with lengths() \
                             when the loader has {} Ragged streams rather than one",
                            mode,
                            ragged.len()
                        )));
                    }
                }
            }
            None => None,
        };
        if let Some((name, _)) = &self.pack {
            match self.streams.iter().find(|(n, _)| n == name) {
                Some((_, s)) if s.as_ragged().is_some() => {}
                _ => {
                    return Err(Error::invalid(format!(
                        "pack({name:?}) needs a Ragged stream of that name"
                    )));
                }
            }
        }
        Ok(match self.sampler.clone() {
            Some(s) if s.len() != len => {
                return Err(Error::invalid(format!(
                    "sampler covers {} records but the streams hold {len}",
                    s.len()
                )));
            }
            Some(s) if self.explicit_drop_last && self.sampling.drop_last != s.drop_last() => {
                return Err(Error::invalid(format!(
                    "drop_last({}) conflicts with the given sampler's drop_last({})",
                    !s.drop_last(),
                    s.drop_last()
                )));
            }
            Some(s)
                if self
                    .sampling
                    .resume
                    .is_some_and(|p| s.resumed_from() != Some(p)) =>
            {
                return Err(Error::invalid(format!(
                    "resume({}) conflicts with the given sampler, which resumes from {}",
                    self.sampling.resume.unwrap_or_default(),
                    s.resumed_from()
                        .map_or_else(|| "the first record".to_owned(), |p| p.to_string())
                )));
            }
            Some(s) if self.explicit_shard => s.shard(rank, world)?,
            Some(s) => s,
            None => {
                let mut b = self.sampling.clone();
                b.len = len;
                b.lengths = lengths;
                // A part-windowed order's blocks: the first stream's parts
                // (a lazily converted dataset's row groups), unless given.
                if matches!(mode, crate::SamplerMode::PartWindowed { .. }) && b.parts.is_none() {
                    b.parts = self
                        .streams
                        .first()
                        .map(|(_, s)| s.store().part_starts().into());
                }
                b.build()?
            }
        })
    }

    /// The first step, `start_epoch` passes after the configured start,
    /// and the end step ([`epochs`](Self::epochs)) of a loader drawing
    /// with `sampler`.
    fn bounds(&self, sampler: &Sampler, start_epoch: u64) -> Result<(u64, Option<u64>), Error> {
        // A sampler's own position is honoured, never silently dropped.
        let start_step = match (self.start_step, sampler.step()) {
            (Some(k), s) if s != 0 && s != k => {
                return Err(Error::invalid(format!(
                    "start_step({k}) conflicts with the given sampler, which is at step {s}"
                )));
            }
            (Some(k), _) => k,
            (None, s) => s,
        };
        // Epochs counted from the pass the sampler starts in (a resumed
        // run's, or pass 0).
        let first = sampler.epoch_of(0).0;
        let start_step = first
            .checked_add(start_epoch)
            .and_then(|e| sampler.step_at(e, start_step))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "step {start_step} of epoch {start_epoch} is past step 2^64"
                ))
            })?;
        let end_step = match self.epochs {
            None => None,
            Some(n) => {
                let end = sampler.first_step_of(n).ok_or_else(|| {
                    Error::invalid(format!(
                        "epochs({n}) of {} steps each is more than 2^64 steps",
                        sampler.steps_per_epoch()
                    ))
                })?;
                if start_step > end {
                    return Err(Error::invalid(format!(
                        "start_step({start_step}) is past the end of epochs({n}), step {end}"
                    )));
                }
                Some(end)
            }
        };
        Ok((start_step, end_step))
    }

    /// Starts a loader of one view per step (the whole batch, or the
    /// [`view`](Self::view) asked for) transformed by `transform`.
    fn start_one<T, E, F>(self, transform: F) -> Result<DataLoader<T>, Error>
    where
        T: Send + 'static,
        E: Into<BoxError>,
        F: Fn(Batch<S::Buffer>) -> Result<T, E> + Send + Sync + 'static,
    {
        self.start_placed(Arc::new(move |views: Vec<Batch<S::Buffer>>| {
            let batch = views
                .into_iter()
                .next()
                .ok_or_else(|| Error::invalid("a step with no view"))?;
            transform(batch).map_err(Into::into)
        }))
    }

    /// Starts the pipeline: each step's views, packed if asked, to `transform`.
    fn start_placed<T: Send + 'static>(
        self,
        transform: Transform<T, S::Buffer>,
    ) -> Result<DataLoader<T>, Error> {
        let sampler = self.resolved_sampler()?;
        let (start_step, end_step) = self.bounds(&sampler, 0)?;
        // The batches the run draws, from where it starts (a resumed pass's
        // own last batch among them), split into the views.
        self.placement.check(&sampler, (start_step, end_step))?;
        let views = self.placement.slots.len();
        let live = (self.workers + self.prefetch + 2) * self.streams.len() * views;
        self.staging.expect_buffers(live);
        for slot in &self.placement.slots {
            if let Some(s) = &slot.staging {
                s.expect_buffers(live);
            }
        }
        if let Some(mode) = self.read_mode {
            for (_, s) in &self.streams {
                s.set_read_mode(mode);
            }
        }
        let transform: Transform<T, S::Buffer> = match self.pack {
            None => transform,
            Some((name, options)) => Arc::new(move |views: Vec<Batch<S::Buffer>>| {
                lap::switch(Stage::Pack);
                let packed = views
                    .into_iter()
                    .map(|b| crate::sequence::pack_batch(b, &name, &options))
                    .collect::<Result<Vec<_>, Error>>()?;
                lap::switch(Stage::Collate);
                transform(packed)
            }),
        };
        #[cfg(feature = "vision")]
        let transform = {
            let slots = (self.placement.slots.iter())
                .map(|s| {
                    (
                        s.index,
                        s.staging
                            .clone()
                            .unwrap_or_else(|| Arc::clone(&self.staging)),
                    )
                })
                .collect();
            crate::vision::augmenting(
                self.augment,
                &self.streams,
                &sampler,
                self.placement.count,
                slots,
                transform,
            )?
        };
        let prefetch_bytes = self.prefetch_bytes.unwrap_or(match sampler.mode() {
            crate::SamplerMode::Windowed { .. } | crate::SamplerMode::PartWindowed { .. } => {
                DEFAULT_WINDOWED_PREFETCH_BYTES
            }
            _ => DEFAULT_PREFETCH_BYTES,
        });
        pipeline::start(pipeline::Config {
            streams: self.streams,
            sampler,
            workers: self.workers,
            capacity: self.workers + self.prefetch,
            prefetch_bytes,
            start_step,
            end_step,
            staging: self.staging,
            packed: self.packed,
            placement: self.placement,
            transform,
            record: self.record,
            trace: match self.trace {
                Some(path) => Some(path),
                None if self.record => trace_file::env_trace_path(),
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, DType, DenseWriter, ErrorKind, RaggedWriter};

    #[test]
    fn a_one_off_gather_is_a_column() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DenseWriter::<u16>::create(dir.path().join("x"), &[2], Codec::Raw).unwrap();
        w.append_slice(&[0, 1, 10, 11, 20, 21], 3).unwrap();
        w.close().unwrap();
        let mut w = RaggedWriter::<u8>::create(dir.path().join("tok"), 1, Codec::Zstd).unwrap();
        w.append([vec![1u8], vec![2, 2], vec![3, 3, 3]]).unwrap();
        w.close().unwrap();

        let x = Stream::from(Dense::<u16>::open(dir.path().join("x")).unwrap());
        let column = x.gather(&[2, 0]).unwrap();
        assert_eq!(column.dtype(), DType::U16);
        assert_eq!(column.shape(), Some(&[2, 2][..]));
        assert_eq!(
            column.dense::<u16>().unwrap().as_slice().unwrap(),
            &[20, 21, 0, 1]
        );

        let tok = Stream::from(Ragged::<u8>::open(dir.path().join("tok")).unwrap());
        let column = tok.gather(&[2, 1, 2]).unwrap();
        let records: Vec<Vec<u8>> = column.records().map(|(_, b)| b.to_vec()).collect();
        assert_eq!(records, [vec![3, 3, 3], vec![2, 2], vec![3, 3, 3]]);

        let e = tok.gather(&[3]).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::IndexOutOfRange { .. }), "{e}");
    }
}
