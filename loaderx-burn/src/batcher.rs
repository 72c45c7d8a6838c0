//! burn [`Batcher`]s for [`Record`]s.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::tensor::Device;

use crate::dataset::Record;
use crate::host::HostBatch;

/// Stacks records into a [`HostBatch`] for the batcher's device, whose
/// streams become tensors of the kind the caller asks for on access.
///
/// burn's `Batcher::batch` cannot fail, so a stream whose records cannot be
/// stacked keeps its error inside the batch and returns it when accessed
/// ([`Error::Stack`](crate::Error::Stack)).
///
/// ```
/// use burn::data::dataloader::DataLoaderBuilder;
/// use loaderx_burn::{HostBatcher, ZrecordDataset};
/// # use loaderx_core::{Codec, DenseWriter};
/// # let dir = tempfile::tempdir()?;
/// # let mut w = DenseWriter::<u8>::create(dir.path().join("image"), &[2, 2], Codec::Zstd)?;
/// # w.append_slice(&(0..40).collect::<Vec<u8>>(), 10)?;
/// # w.close()?;
///
/// let ds = ZrecordDataset::open_dir(dir.path())?;
/// let loader = DataLoaderBuilder::new(HostBatcher)
///     .batch_size(4)
///     .shuffle(7)
///     .set_device(burn::tensor::Device::flex())
///     .build(ds);
/// let batch = loader.iter().next().unwrap()?;
/// let image = batch.float::<3>("image")?;        // u8 → the device's float type
/// assert_eq!(image.dims(), [4, 2, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct HostBatcher;

impl Batcher<Record, HostBatch> for HostBatcher {
    fn batch(&self, items: Vec<Record>, device: &Device) -> HostBatch {
        HostBatch::from_records(&items, device)
    }
}

type MapFn<O> = Arc<dyn Fn(HostBatch) -> O + Send + Sync>;

/// A [`Batcher`] that stacks records into a [`HostBatch`] and hands it to a
/// closure that builds the model's batch type.
///
/// The closure runs where burn's loader batches (on its worker threads) and
/// decides what to do with conversion errors, since burn's batchers cannot
/// return one. The loader of this crate ([`BurnDataLoader`](crate::BurnDataLoader))
/// takes a fallible closure instead and skips the per-record step entirely.
pub struct RecordBatcher<O> {
    map: MapFn<O>,
}

impl<O> RecordBatcher<O> {
    /// A batcher applying `map` to each stacked batch.
    pub fn new(map: impl Fn(HostBatch) -> O + Send + Sync + 'static) -> RecordBatcher<O> {
        RecordBatcher { map: Arc::new(map) }
    }
}

impl<O> Clone for RecordBatcher<O> {
    fn clone(&self) -> Self {
        RecordBatcher {
            map: Arc::clone(&self.map),
        }
    }
}

impl<O> std::fmt::Debug for RecordBatcher<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatcher").finish_non_exhaustive()
    }
}

impl<O> Batcher<Record, O> for RecordBatcher<O> {
    fn batch(&self, items: Vec<Record>, device: &Device) -> O {
        (self.map)(HostBatch::from_records(&items, device))
    }
}
