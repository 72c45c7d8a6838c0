//! A loaderx DataLoader whose batches are tch tensors, converted on the
//! loader's worker threads.

use loaderx_core::StoreKind;
use loaderx_core::loader::{Batch, DataLoader, DataLoaderBuilder};
use tch::{Device, Tensor};

use crate::column::{Padded, into_tensor, ragged_padded, ragged_tensors};
use crate::error::{Error, Result};
use crate::staging::TchStaging;

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
#[derive(Debug)]
pub enum TchColumn {
    /// A Dense stream: `(B, *item_shape)`.
    Dense(Tensor),
    /// A Ragged stream, padded.
    Padded(Padded),
    /// A Ragged stream, one tensor per record.
    Records(Vec<Tensor>),
}

/// A loader step as tch tensors, streams in the loader's order.
#[derive(Debug)]
pub struct TensorBatch {
    /// The sampler step.
    pub step: u64,
    /// The record indices.
    pub indices: Vec<u64>,
    /// `(name, column)` per stream.
    pub columns: Vec<(String, TchColumn)>,
}

impl TensorBatch {
    /// Converts a loaderx batch; Dense columns staged by [`TchStaging`] are
    /// handed over without a copy on the CPU.
    pub fn from_batch(batch: Batch, device: Device, ragged: RaggedMode) -> Result<TensorBatch> {
        let step = batch.step();
        let indices = batch.indices().to_vec();
        let columns = batch
            .into_columns()
            .into_iter()
            .map(|(name, column)| {
                let c = match (column.kind(), ragged) {
                    (StoreKind::Dense, _) => TchColumn::Dense(into_tensor(column, device)?),
                    (_, RaggedMode::Padded) => TchColumn::Padded(ragged_padded(&column, device)?),
                    (_, RaggedMode::PerRecord) => {
                        TchColumn::Records(ragged_tensors(&column, device)?)
                    }
                };
                Ok((name, c))
            })
            .collect::<Result<_>>()?;
        Ok(TensorBatch {
            step,
            indices,
            columns,
        })
    }

    fn get(&self, name: &str) -> Result<&TchColumn> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
            .ok_or_else(|| Error::MissingStream(name.to_owned()))
    }

    /// Dense stream `name`.
    pub fn dense(&self, name: &str) -> Result<&Tensor> {
        match self.get(name)? {
            TchColumn::Dense(t) => Ok(t),
            _ => Err(Error::Kind {
                expected: StoreKind::Dense,
                found: StoreKind::Ragged,
            }),
        }
    }

    /// Padded Ragged stream `name`.
    pub fn padded(&self, name: &str) -> Result<&Padded> {
        match self.get(name)? {
            TchColumn::Padded(p) => Ok(p),
            _ => Err(Error::Kind {
                expected: StoreKind::Ragged,
                found: StoreKind::Dense,
            }),
        }
    }

    /// Per-record Ragged stream `name`.
    pub fn records(&self, name: &str) -> Result<&[Tensor]> {
        match self.get(name)? {
            TchColumn::Records(r) => Ok(r),
            _ => Err(Error::Kind {
                expected: StoreKind::Ragged,
                found: StoreKind::Dense,
            }),
        }
    }
}

/// Builds loaders that yield tch tensors.
pub trait TchLoaderExt {
    /// A loader of [`TensorBatch`]es on `device` (Ragged streams padded).
    fn build_tch(self, device: Device) -> loaderx_core::Result<DataLoader<TensorBatch>>;

    /// A loader of [`TensorBatch`]es with Ragged streams as `ragged` says.
    fn build_tch_ragged(
        self,
        device: Device,
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<TensorBatch>>;

    /// A loader that converts each batch and applies `map`, on the workers.
    fn build_tch_with<T, F>(self, device: Device, map: F) -> loaderx_core::Result<DataLoader<T>>
    where
        T: Send + 'static,
        F: Fn(TensorBatch) -> Result<T> + Send + Sync + 'static;
}

impl TchLoaderExt for DataLoaderBuilder {
    fn build_tch(self, device: Device) -> loaderx_core::Result<DataLoader<TensorBatch>> {
        start(self, device, RaggedMode::Padded, Ok)
    }

    fn build_tch_ragged(
        self,
        device: Device,
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<TensorBatch>> {
        start(self, device, ragged, Ok)
    }

    fn build_tch_with<T, F>(self, device: Device, map: F) -> loaderx_core::Result<DataLoader<T>>
    where
        T: Send + 'static,
        F: Fn(TensorBatch) -> Result<T> + Send + Sync + 'static,
    {
        start(self, device, RaggedMode::Padded, map)
    }
}

fn start<T, F>(
    builder: DataLoaderBuilder,
    device: Device,
    ragged: RaggedMode,
    map: F,
) -> loaderx_core::Result<DataLoader<T>>
where
    T: Send + 'static,
    F: Fn(TensorBatch) -> Result<T> + Send + Sync + 'static,
{
    builder
        .staging(TchStaging::new(device))
        .build_with(move |batch| map(TensorBatch::from_batch(batch, device, ragged)?))
}
