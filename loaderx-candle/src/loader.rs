//! A loaderx DataLoader whose batches are candle tensors, converted on the
//! loader's worker threads.

use candle_core::{Device, Tensor};
use loaderx_core::StoreKind;
use loaderx_core::loader::{Batch, DataLoader, DataLoaderBuilder};

use crate::column::{Padded, into_dense_tensor, ragged_padded, ragged_tensors};
use crate::error::{Error, Result};
use crate::host::CandleStaging;

/// How Ragged streams become tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RaggedMode {
    /// Zero-padded to the batch maximum, with lengths ([`Padded`]).
    #[default]
    Padded,
    /// One tensor per record.
    PerRecord,
}

/// One stream of a [`TensorBatch`].
#[derive(Debug, Clone)]
pub enum TensorColumn {
    /// A Dense stream: `(B, *item_shape)`.
    Dense(Tensor),
    /// A Ragged stream, padded.
    Padded(Padded),
    /// A Ragged stream, one tensor per record.
    Records(Vec<Tensor>),
}

/// A loader step as candle tensors, streams in the loader's order.
#[derive(Debug, Clone)]
pub struct TensorBatch {
    /// The sampler step.
    pub step: u64,
    /// The record indices.
    pub indices: Vec<u64>,
    /// `(name, column)` per stream.
    pub columns: Vec<(String, TensorColumn)>,
}

impl TensorBatch {
    /// Converts a loaderx batch: Dense columns move into their tensors
    /// without a copy when staged by [`CandleStaging`] on the CPU.
    pub fn from_batch(batch: Batch, device: &Device, ragged: RaggedMode) -> Result<TensorBatch> {
        let step = batch.step();
        let indices = batch.indices().to_vec();
        let columns = batch
            .into_columns()
            .into_iter()
            .map(|(name, column)| {
                let tensor = match (column.kind(), ragged) {
                    (StoreKind::Dense, _) => {
                        TensorColumn::Dense(into_dense_tensor(column, device)?)
                    }
                    (_, RaggedMode::Padded) => {
                        TensorColumn::Padded(ragged_padded(&column, device)?)
                    }
                    (_, RaggedMode::PerRecord) => {
                        TensorColumn::Records(ragged_tensors(&column, device)?)
                    }
                };
                Ok((name, tensor))
            })
            .collect::<Result<_>>()?;
        Ok(TensorBatch {
            step,
            indices,
            columns,
        })
    }

    fn get(&self, name: &str) -> Result<&TensorColumn> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
            .ok_or_else(|| Error::MissingStream(name.to_owned()))
    }

    /// Dense stream `name`.
    pub fn dense(&self, name: &str) -> Result<&Tensor> {
        match self.get(name)? {
            TensorColumn::Dense(t) => Ok(t),
            _ => Err(Error::Kind {
                expected: StoreKind::Dense,
                found: StoreKind::Ragged,
            }),
        }
    }

    /// Padded Ragged stream `name`.
    pub fn padded(&self, name: &str) -> Result<&Padded> {
        match self.get(name)? {
            TensorColumn::Padded(p) => Ok(p),
            _ => Err(Error::Kind {
                expected: StoreKind::Ragged,
                found: StoreKind::Dense,
            }),
        }
    }

    /// Per-record Ragged stream `name`.
    pub fn records(&self, name: &str) -> Result<&[Tensor]> {
        match self.get(name)? {
            TensorColumn::Records(r) => Ok(r),
            _ => Err(Error::Kind {
                expected: StoreKind::Ragged,
                found: StoreKind::Dense,
            }),
        }
    }
}

/// Builds loaders that yield candle tensors.
///
/// ```
/// use candle_core::Device;
/// use loaderx_candle::CandleLoaderExt;
/// use loaderx_core::{Codec, DataLoader, Dense, DenseWriter};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[2], Codec::Raw)?;
/// w.append_slice(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 3)?;
/// w.close()?;
/// let mut loader = DataLoader::builder()
///     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
///     .batch_size(2)
///     .build_candle(&Device::Cpu)?;
/// let batch = loader.next().unwrap()?;
/// assert_eq!(batch.dense("x")?.dims(), &[2, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait CandleLoaderExt {
    /// A loader of [`TensorBatch`]es on `device` (Ragged streams padded).
    fn build_candle(self, device: &Device) -> loaderx_core::Result<DataLoader<TensorBatch>>;

    /// A loader of [`TensorBatch`]es on `device` with Ragged streams as `ragged` says.
    fn build_candle_ragged(
        self,
        device: &Device,
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<TensorBatch>>;

    /// A loader that converts each batch to tensors and then applies `map`
    /// (e.g. to build the model's input struct), all on the workers.
    fn build_candle_with<T, F>(
        self,
        device: &Device,
        map: F,
    ) -> loaderx_core::Result<DataLoader<T>>
    where
        T: Send + 'static,
        F: Fn(TensorBatch) -> Result<T> + Send + Sync + 'static;
}

impl CandleLoaderExt for DataLoaderBuilder {
    fn build_candle(self, device: &Device) -> loaderx_core::Result<DataLoader<TensorBatch>> {
        start(self, device, RaggedMode::Padded, Ok)
    }

    fn build_candle_ragged(
        self,
        device: &Device,
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<TensorBatch>> {
        start(self, device, ragged, Ok)
    }

    fn build_candle_with<T, F>(self, device: &Device, map: F) -> loaderx_core::Result<DataLoader<T>>
    where
        T: Send + 'static,
        F: Fn(TensorBatch) -> Result<T> + Send + Sync + 'static,
    {
        start(self, device, RaggedMode::Padded, map)
    }
}

fn start<T, F>(
    builder: DataLoaderBuilder,
    device: &Device,
    ragged: RaggedMode,
    map: F,
) -> loaderx_core::Result<DataLoader<T>>
where
    T: Send + 'static,
    F: Fn(TensorBatch) -> Result<T> + Send + Sync + 'static,
{
    let device = device.clone();
    builder
        .staging(CandleStaging::for_device(&device))
        .build_with(move |batch| map(TensorBatch::from_batch(batch, &device, ragged)?))
}
