//! A loaderx DataLoader whose batches are tch tensors, converted on the
//! loader's worker threads.

use std::sync::Arc;

use loaderx_core::host::{ColumnConverter, RaggedMode};
use loaderx_core::{Column, DataLoader, DataLoaderBuilder, Staging};
use tch::{Device, Tensor};

use crate::column::{Padded, into_tensor, ragged_padded, ragged_tensors};
use crate::error::{Error, Result};
use crate::staging::TchStaging;

/// One stream of a [`TensorBatch`]: Dense, padded or per-record.
pub type TchColumn = loaderx_core::host::TensorColumn<Tensor, Padded>;

/// A loader step as tch tensors, streams in the loader's order (core's
/// [`TensorBatch`](loaderx_core::host::TensorBatch) with tch's types).
pub type TensorBatch = loaderx_core::host::TensorBatch<Tensor, Padded>;

/// tch's [`ColumnConverter`]: loader columns to tensors on one device,
/// gathered by [`TchStaging`]. Dense columns are handed over without a copy
/// on the CPU, and copied from pinned memory without blocking for CUDA.
#[derive(Debug, Clone, Copy)]
pub struct TchConverter {
    device: Device,
}

impl TchConverter {
    /// A converter to tensors on `device`.
    pub fn new(device: Device) -> TchConverter {
        TchConverter { device }
    }
}

impl ColumnConverter for TchConverter {
    type Tensor = Tensor;
    type Padded = Padded;
    type Error = Error;

    fn dense(&self, column: Column) -> Result<Tensor> {
        into_tensor(column, self.device)
    }

    fn padded(&self, column: &Column) -> Result<Padded> {
        ragged_padded(column, self.device)
    }

    fn records(&self, column: &Column) -> Result<Vec<Tensor>> {
        ragged_tensors(column, self.device)
    }

    fn staging(&self) -> Option<Arc<dyn Staging>> {
        Some(Arc::new(TchStaging::new(self.device)))
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
        self.build_tch_ragged(device, RaggedMode::Padded)
    }

    fn build_tch_ragged(
        self,
        device: Device,
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<TensorBatch>> {
        self.build_tensors(TchConverter::new(device), ragged, Ok)
    }

    fn build_tch_with<T, F>(self, device: Device, map: F) -> loaderx_core::Result<DataLoader<T>>
    where
        T: Send + 'static,
        F: Fn(TensorBatch) -> Result<T> + Send + Sync + 'static,
    {
        self.build_tensors(TchConverter::new(device), RaggedMode::Padded, map)
    }
}
