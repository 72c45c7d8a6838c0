//! burn's [`DataLoader`] trait implemented directly on the loaderx DataLoader,
//! built from core's builder ([`BurnLoaderExt`]), burn's epochs mapped onto
//! core's passes.

use std::ops::Range;
use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::DatasetError;
use burn::tensor::{Device, TensorData};
use loaderx_core::adapter::{
    ColumnConverter, EpochIter, EpochLoader, EpochStats, RaggedMode, Staging, VecBuffer, VecStaging,
};
use loaderx_core::{Batch, DataLoaderBuilder, LoaderStats, Sampler};

use crate::converter::BurnConverter;
use crate::dataset::{MappedDataset, ZrecordDataset};
use crate::error::{BoxError, Error, Result};
use crate::host::HostBatch;

/// A loader step as burn host data, streams in the loader's order: core's
/// [`TensorBatch`](loaderx_core::adapter::TensorBatch) with burn's
/// [`TensorData`], what [`BurnLoaderExt::build_burn_tensors`] delivers.
/// Turn a stream into a tensor of the kind you need with
/// [`BurnConverter::tensor`].
pub type TensorBatch = loaderx_core::adapter::TensorBatch<TensorData>;

/// One stream of a [`TensorBatch`]: Dense, padded, per-record or packed
/// burn host data.
pub type TensorColumn = loaderx_core::adapter::TensorColumn<TensorData>;

/// burn's loaders built from core's
/// [`DataLoaderBuilder`](loaderx_core::DataLoaderBuilder), the same shape as
/// candle's `build_candle` and tch's `build_tch`: every core option
/// (`pack`, `lengths`, `mode(TokenBudget)`, `sampler`, `packed`, `epochs`,
/// `drop_last`, `shard`, `start_step`...) applies to burn's loader as it
/// is, with no forwarding. Batches are gathered by [`BurnConverter`]'s
/// staging (core's [`VecStaging`]: vectors that become burn's host data).
/// burn's own options are set on the built loader:
/// [`BurnDataLoader::start_epoch`] and [`BurnDataLoader::split_batches`].
pub trait BurnLoaderExt: Sized {
    /// Adds every stream of `dataset`.
    #[must_use]
    fn dataset(self, dataset: &ZrecordDataset) -> Self;

    /// A loader whose batches `map` builds from each [`HostBatch`] on the
    /// loader's worker threads (and on the device burn asks for through
    /// `to_device`). `map`'s errors reach burn as [`DatasetError`]s.
    ///
    /// # Errors
    ///
    /// [`Error::Core`] for a configuration core's
    /// [`build_epochs`](loaderx_core::DataLoaderBuilder::build_epochs)
    /// refuses (no stream, streams of different lengths, no worker, fewer
    /// records than one full batch, `drop_last(false)` with `Iid`, a start
    /// step past `u64::MAX`...).
    fn build_burn<O, E, F>(self, device: &Device, map: F) -> Result<BurnDataLoader<O>>
    where
        O: Send + 'static,
        E: Into<BoxError>,
        F: Fn(HostBatch) -> Result<O, E> + Send + Sync + 'static;

    /// A loader of [`TensorBatch`]es: core's batch of burn host data, Dense
    /// streams moved from the gather without a copy, Ragged ones as
    /// `ragged` says, converted on the workers by [`BurnConverter`]; a
    /// stream becomes a tensor with [`BurnConverter::tensor`].
    ///
    /// ```
    /// use burn::data::dataloader::DataLoader;
    /// use burn::tensor::{Device, Float};
    /// use loaderx_burn::{BurnConverter, BurnDataLoader, BurnLoaderExt};
    /// use loaderx_core::adapter::RaggedMode;
    /// use loaderx_core::{Codec, DType, Dense, DenseWriter};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[2], Codec::Raw)?;
    /// w.append_slice(&(0..16).map(|v| v as f32).collect::<Vec<_>>(), 8)?;
    /// w.close()?;
    /// let device = Device::flex();
    /// let loader = BurnDataLoader::builder()
    ///     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
    ///     .batch_size(4)
    ///     .build_burn_tensors(&device, RaggedMode::Padded)?;
    /// let batch = loader.iter().next().unwrap()?;
    /// let x = batch.dense("x")?.clone();                    // burn's TensorData, f32
    /// let x = BurnConverter::new(&device).tensor::<2, Float>("x", DType::F32, x)?;
    /// assert_eq!(x.dims(), [4, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`build_burn`](Self::build_burn).
    fn build_burn_tensors(
        self,
        device: &Device,
        ragged: RaggedMode,
    ) -> Result<BurnDataLoader<TensorBatch>>;

    /// A loader that feeds your existing burn [`Batcher`]: each batch is
    /// gathered natively from `items`' streams, its records decoded into
    /// items by `items`' mapping ([`ZrecordDataset::map`]) and batched by
    /// `batcher`, all on the loader's worker threads, on the device burn
    /// asks for. Code that built burn's own loader over the same items
    /// switches by changing that one statement:
    ///
    /// ```
    /// # use burn::data::dataloader::{DataLoader, DataLoaderBuilder, batcher::Batcher};
    /// # use burn::tensor::{Device, Int, Tensor, TensorData};
    /// # use loaderx_burn::{BurnDataLoader, BurnLoaderExt, ZrecordDataset};
    /// # use loaderx_core::{Codec, DenseWriter};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DenseWriter::<u8>::create(dir.path().join("label"), &[], Codec::Raw)?;
    /// # w.append_slice(&(0..10).collect::<Vec<u8>>(), 10)?;
    /// # w.close()?;
    /// #[derive(Clone)]
    /// struct Labels;
    /// impl Batcher<u8, Tensor<1, Int>> for Labels {
    ///     fn batch(&self, items: Vec<u8>, device: &Device) -> Tensor<1, Int> {
    ///         let n = items.len();
    ///         Tensor::from_data(TensorData::new(items, [n]), device)
    ///     }
    /// }
    /// let items = ZrecordDataset::open_dir(dir.path())?.map(|r| r.scalar::<u8>("label"));
    ///
    /// // burn's loader:
    /// let before = DataLoaderBuilder::new(Labels).batch_size(4).build(items.clone());
    /// // loaderx's, every record once per epoch, the last batch partial:
    /// let after = BurnDataLoader::builder()
    ///     .batch_size(4)
    ///     .mode(loaderx_core::SamplerMode::Sequential)
    ///     .drop_last(false)
    ///     .build_burn_batcher(&Device::flex(), &items, Labels)?;
    /// assert_eq!(after.num_items(), before.num_items());
    /// let sizes: Vec<usize> = after.iter().map(|b| b.map(|t| t.dims()[0])).collect::<Result<_, _>>()?;
    /// assert_eq!(sizes, [4, 4, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The streams are `items`' own: add none with `stream` or
    /// [`dataset`](Self::dataset). burn's `Batcher::batch` cannot fail; a
    /// decoding error reaches burn as a [`DatasetError`] ([`Error::Map`]).
    /// The path costs what burn's own does: each batch is split into
    /// per-record items and stacked again by the batcher; a
    /// [`build_burn`](Self::build_burn) map over the [`HostBatch`] skips
    /// both.
    ///
    /// # Errors
    ///
    /// As [`build_burn`](Self::build_burn).
    fn build_burn_batcher<I, O, B>(
        self,
        device: &Device,
        items: &MappedDataset<I>,
        batcher: B,
    ) -> Result<BurnDataLoader<O>>
    where
        I: 'static,
        O: Send + 'static,
        B: Batcher<I, O> + 'static,
    {
        let decode = items.decoder();
        self.dataset(items.records())
            .build_burn(device, move |b: HostBatch| -> Result<O> {
                let items = b
                    .to_records()?
                    .into_iter()
                    .map(|r| decode(r).map_err(Error::Map))
                    .collect::<Result<Vec<I>>>()?;
                Ok(batcher.batch(items, b.device()))
            })
    }
}

impl<S: Staging> BurnLoaderExt for DataLoaderBuilder<S> {
    fn dataset(mut self, dataset: &ZrecordDataset) -> Self {
        for (name, stream) in dataset.streams() {
            self = self.stream(name, stream.clone());
        }
        self
    }

    fn build_burn<O, E, F>(self, device: &Device, map: F) -> Result<BurnDataLoader<O>>
    where
        O: Send + 'static,
        E: Into<BoxError>,
        F: Fn(HostBatch) -> Result<O, E> + Send + Sync + 'static,
    {
        epochs(self, device, move |b, d| map(HostBatch::from_batch(b, d)))
    }

    fn build_burn_tensors(
        self,
        device: &Device,
        ragged: RaggedMode,
    ) -> Result<BurnDataLoader<TensorBatch>> {
        epochs(self, device, move |b, d| {
            TensorBatch::convert(b, &BurnConverter::new(d), ragged)
        })
    }
}

/// burn's epoch loader over `builder`, gathering with [`BurnConverter`]'s
/// staging, each batch built by `map` for the device on the workers.
fn epochs<S, O, E, F>(
    builder: DataLoaderBuilder<S>,
    device: &Device,
    map: F,
) -> Result<BurnDataLoader<O>>
where
    S: Staging,
    O: Send + 'static,
    E: Into<BoxError>,
    F: Fn(Batch<VecBuffer>, &Device) -> Result<O, E> + Send + Sync + 'static,
{
    let inner = builder
        .staging(BurnConverter::new(device).staging())
        .build_epochs(0, device.clone(), move |b, d| map(b, d).map_err(Into::into))?;
    Ok(BurnDataLoader { inner, devices: 0 })
}

/// burn's [`DataLoader`] backed by the loaderx DataLoader: batches are
/// gathered natively (one parallel gather per stream and step, into recycled
/// buffers, no per-record allocation), mapped to the model's batch type on
/// the loader's worker threads, and delivered in step order.
///
/// - **Epochs.** burn's epoch is an epoch of core's [`EpochLoader`]: one
///   pass of the sampler, [`steps_per_epoch`](Self::steps_per_epoch) steps.
///   With `drop_last(true)` (the default) every batch is full and the
///   `len % batch_size` records left over are not read in that epoch (for
///   `Cyclic` sampling, which ones changes every epoch); with
///   [`drop_last(false)`](loaderx_core::DataLoaderBuilder::drop_last) every record is
///   read exactly once per epoch and the last batch may be partial. Each
///   `iter()` call delivers the next epoch: the `k`-th call (from 0) yields
///   steps `k * steps_per_epoch ..`, exactly what an uninterrupted run
///   yields, so a run is reproducible whatever the worker count and resumes
///   exactly ([`BurnDataLoader::start_epoch`],
///   [`start_step`](loaderx_core::DataLoaderBuilder::start_step)).
/// - **burn's contract.** [`num_items`](DataLoader::num_items) is the records
///   of the next epoch (the same for every epoch unless batch lengths vary)
///   and the iterator's `progress()` counts those of its own;
///   [`to_device`](DataLoader::to_device) gives the same loader (same next
///   epoch, same [`stats`](Self::stats)) producing tensors on another device.
/// - **Slices are whole batches.** [`slice(start, end)`](DataLoader::slice)
///   keeps the batches whose *first* record lies at positions `start..end`
///   of the next epoch, unchanged, in order ([`EpochLoader::slice`]; with
///   `TokenBudget` the batches vary in length). The slices burn's
///   multi-device training makes (`split_dataloader`: consecutive ranges
///   covering `0..num_items`) are therefore disjoint, cover the epoch, and
///   each device gets whole batches, never one cut in two; a slice's
///   `num_items` counts the records of its batches, so it may differ from
///   `end - start` by less than a batch (a slice may even be empty, when
///   there are more slices than batches). With
///   [`split_batches(n)`](BurnDataLoader::split_batches) burn's
///   split gives each of the `n` devices its placement view of every batch
///   instead: every device has every step, `batch_size / n` records each.
/// - **Threads.** As core's: a loader starts its loaderx workers at its
///   first batch and keeps them between epochs (the next epoch is
///   prefetched while the model validates); errors end the epoch as a
///   `DatasetError` and the next `iter()` starts afresh. Dropping the
///   loader joins its workers.
///
/// ```
/// use burn::data::dataloader::DataLoader;
/// use burn::tensor::{Device, Int, Tensor};
/// use loaderx_burn::{BurnDataLoader, BurnLoaderExt};
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
///     .build_burn(&Device::flex(), |b| {
///         Ok::<_, loaderx_burn::Error>(Example {
///             x: b.float::<3>("image")? / 255.0,
///             y: b.int::<1>("label")?,
///         })
///     })?;
/// assert_eq!(loader.num_items(), 8);                     // 2 steps of 4
/// let batches: Vec<Example> = loader.iter().collect::<Result<_, _>>()?;
/// assert_eq!(batches.len(), 2);
/// assert_eq!(batches[0].x.dims(), [4, 2, 2]);
/// // Where the time went, per stage (print it for the table).
/// let stats = loader.loader_stats();
/// assert_eq!(stats.stages[loaderx_core::Stage::WaitBatch].count, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BurnDataLoader<O> {
    inner: EpochLoader<O, Device, VecStaging>,
    /// [`BurnDataLoader::split_batches`]'s devices (0: whole batches).
    devices: usize,
}

impl BurnDataLoader<()> {
    /// Core's builder with its defaults (batch 256, `Cyclic` sampling with
    /// seed 42, up to 4 workers, prefetch 2, every batch full), which
    /// [`BurnLoaderExt`] builds burn loaders from.
    pub fn builder() -> loaderx_core::DataLoaderBuilder {
        loaderx_core::DataLoaderBuilder::default()
    }
}

impl<O: Send + 'static> BurnDataLoader<O> {
    /// Starts at epoch `epoch` (0-based) of training instead of the first:
    /// to resume after `k` finished epochs, e.g. with burn's
    /// `SupervisedTraining::checkpoint(k)`, pass `k`. Adds to the builder's
    /// [`start_step`](loaderx_core::DataLoaderBuilder::start_step), whose
    /// first `iter()` ends with its epoch, so a run resumed mid-epoch
    /// delivers exactly the batches the interrupted one had left.
    ///
    /// # Errors
    ///
    /// [`Error::Core`] when the epoch lies past step `u64::MAX`.
    pub fn start_epoch(self, epoch: u64) -> Result<Self> {
        Ok(BurnDataLoader {
            inner: self.inner.skip_epochs(epoch)?,
            devices: self.devices,
        })
    }

    /// Splits every batch over the `devices` devices of burn's multi-device
    /// training (the `devices` given to burn's learner): when burn splits
    /// the loader (`split_dataloader`, one [`slice`](DataLoader::slice)
    /// of `num_items / devices` records per device), device `v`'s loader
    /// delivers view `v` of every batch, its contiguous `batch_size /
    /// devices` records ([`EpochLoader::view`], the placement rule candle's
    /// and tch's `build_*_devices` follow), instead of whole batches. Every
    /// device then has every step, so data-parallel devices stay in
    /// lockstep and each step trains on one global batch, whatever the
    /// record count; resume and `shard` compose with it. Without it burn's
    /// split hands each device whole batches of one range of the epoch.
    ///
    /// # Errors
    ///
    /// [`Error::Core`] when the batch size (or with `drop_last(false)` the
    /// last batch of a pass) does not divide by `devices`.
    pub fn split_batches(self, devices: usize) -> Result<Self> {
        if devices > 1 {
            // Refused now rather than when burn splits the loader.
            self.inner.view(0, devices)?;
        }
        Ok(BurnDataLoader {
            inner: self.inner,
            devices,
        })
    }

    /// Sampler steps per epoch (of the whole loader; a slice delivers
    /// [`steps`](Self::steps) of them).
    pub fn steps_per_epoch(&self) -> u64 {
        self.inner.steps_per_epoch()
    }

    /// The steps of every epoch this loader delivers, counted within the
    /// epoch: `0..steps_per_epoch`, or a slice's part.
    pub fn steps(&self) -> Range<u64> {
        self.inner.steps()
    }

    /// Records per full batch.
    pub fn batch_size(&self) -> usize {
        self.inner.batch_size()
    }

    /// The sampler drawing the batches (at step 0), e.g. for its
    /// [`batch_len`](Sampler::batch_len) or [`epoch_of`](Sampler::epoch_of).
    pub fn sampler(&self) -> &Sampler {
        self.inner.sampler()
    }

    /// The epoch the next `iter()` call delivers (0-based).
    pub fn next_epoch(&self) -> u64 {
        self.inner.next_epoch()
    }

    /// The device batches are built for.
    pub fn device(&self) -> &Device {
        self.inner.context()
    }

    /// What this loader and every loader derived from it delivered so far.
    pub fn stats(&self) -> EpochStats {
        self.inner.stats()
    }

    /// Where the time of this loader and of every loader derived from it
    /// ([`to_device`](DataLoader::to_device), [`slice`](DataLoader::slice),
    /// the copies burn's `Learner` makes) went, per stage: every pipeline
    /// they ran added up ([`EpochLoader::loader_stats`]; its `wall` is the
    /// sum of the pipelines' wall times). Print it for the per-stage table
    /// and the bottleneck.
    pub fn loader_stats(&self) -> LoaderStats {
        self.inner.loader_stats()
    }
}

impl<O> std::fmt::Debug for BurnDataLoader<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("BurnDataLoader").field(&self.inner).finish()
    }
}

impl<O: Send + 'static> BurnDataLoader<O> {
    /// With `split_batches(n)`, the view for the device whose range of
    /// burn's split starts at or holds position `start`.
    fn device_view(&self, start: usize) -> Option<EpochLoader<O, Device, VecStaging>> {
        let n = self.devices;
        let share = to_usize(self.inner.num_items()) / n.max(1);
        if n < 2 || share == 0 {
            return None;
        }
        // Checked when built: every batch splits into `n` views.
        self.inner.view((start / share).min(n - 1), n).ok()
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// burn's view of one core epoch: errors as [`DatasetError`]s, progress in items.
struct Epoch<'a, O>(EpochIter<'a, O, Device, VecStaging>);

impl<O: Send + 'static> Iterator for Epoch<'_, O> {
    type Item = Result<O, DatasetError>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = self.0.next()?;
        Some(batch.map_err(|e| DatasetError::new(Error::Core(e))))
    }
}

impl<O: Send + 'static> DataLoaderIterator<O> for Epoch<'_, O> {
    fn progress(&self) -> Progress {
        let (done, total) = (self.0.items_done(), self.0.items_total());
        Progress::new(to_usize(done), to_usize(total), Some("items".to_string()))
    }
}

impl<O: Send + 'static> DataLoader<O> for BurnDataLoader<O> {
    /// The next epoch (see the [type docs](BurnDataLoader)).
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<O> + 'a> {
        Box::new(Epoch(self.inner.iter()))
    }

    /// The records of the epoch the next `iter()` delivers.
    fn num_items(&self) -> usize {
        to_usize(self.inner.num_items())
    }

    fn to_device(&self, device: &Device) -> Arc<dyn DataLoader<O>> {
        let inner = self.inner.with_context(device.clone());
        Arc::new(BurnDataLoader {
            inner,
            devices: self.devices,
        })
    }

    /// The batches whose first record lies at positions `start..end` of this
    /// loader's epoch (whole batches; see the [type docs](BurnDataLoader));
    /// with [`split_batches(n)`](BurnDataLoader::split_batches), the
    /// view of every batch for the device whose share of `0..num_items` in
    /// `n` equal ranges (burn's split) `start` lies in.
    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<O>> {
        if let Some(inner) = self.device_view(start) {
            return Arc::new(BurnDataLoader { inner, devices: 0 });
        }
        let inner = self.inner.slice(start as u64, end as u64);
        Arc::new(BurnDataLoader {
            inner,
            devices: self.devices,
        })
    }
}
