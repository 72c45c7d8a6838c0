//! A loaderx DataLoader whose batches are tch tensors, converted on the
//! loader's worker threads.

use std::sync::Arc;

use loaderx_core::downcast_staged;
use loaderx_core::host::{ColumnConverter, RaggedMode};
use loaderx_core::{Column, DType, DataLoader, DataLoaderBuilder, StagedBuffer, Staging};
use tch::{Device, Tensor};

use crate::dtype::{DTYPE_TABLE, tch_kind};
use crate::error::{Error, Result};
use crate::staging::{TchStaging, TensorBuffer};

/// A padded Ragged stream as tch tensors: `values` `(B, max_0, ..)` of the
/// [mapped kind](crate::DTYPE_TABLE), `lengths` `(B, ndim)` `Int64`, `mask` of
/// `values`' shape, `Bool` (true inside a record).
pub type Padded = loaderx_core::host::Padded<Tensor>;

/// A packed Ragged stream as tch tensors: `values` 1-D of the [mapped
/// kind](crate::DTYPE_TABLE), `cu_seqlens` `Int` (records + 1 offsets, in
/// elements) and `shapes` `(B, ndim)` `Int64` (libtorch has no `u32`).
pub type PackedRagged = loaderx_core::host::PackedRagged<Tensor>;

/// One stream of a [`TensorBatch`]: Dense, padded, per-record or packed.
pub type TchColumn = loaderx_core::host::TensorColumn<Tensor>;

/// A loader step as tch tensors, streams in the loader's order (core's
/// [`TensorBatch`](loaderx_core::host::TensorBatch) with tch's types).
pub type TensorBatch = loaderx_core::host::TensorBatch<Tensor>;

/// tch's [`ColumnConverter`]: loader columns to tensors on one device,
/// gathered by [`TchStaging`]. Dense columns are handed over without a copy
/// on the CPU, and copied from pinned memory without blocking for CUDA.
/// Single columns convert with the trait's methods:
/// [`dense`](ColumnConverter::dense) (or
/// [`copy_dense`](ColumnConverter::copy_dense) from a borrowed column),
/// [`padded`](ColumnConverter::padded) (with lengths and a mask),
/// [`records`](ColumnConverter::records) (one tensor per record) and
/// [`tensor_from_bytes`](ColumnConverter::tensor_from_bytes) (element bytes of any alignment).
///
/// # Errors
///
/// Every conversion fails with [`Error::Core`] for a column of the other
/// record contract ([`ColumnKind`](loaderx_core::ErrorKind::ColumnKind)), a
/// value the [mapped kind](crate::DTYPE_TABLE) cannot hold (a `u64` above
/// `i64::MAX`, a `bool` byte other than 0 or 1) or a type without a lossless
/// mapping, and with [`Error::Tch`] when libtorch refuses the tensor (its
/// device, its memory).
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
    type Error = Error;

    fn tensor_from_bytes(&self, dtype: DType, bytes: &[u8], shape: &[usize]) -> Result<Tensor> {
        let size: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let wide = DTYPE_TABLE.widen(dtype, bytes)?;
        let n = (wide.as_bytes().len() / wide.dtype().size().max(1)) as i64;
        let cpu = Tensor::f_from_data_size(wide.as_bytes(), &[n], tch_kind(wide.dtype())?)?
            .f_reshape(size.as_slice())?;
        Ok(match self.device {
            Device::Cpu => cpu,
            device => cpu.f_to_device(device)?,
        })
    }

    /// Hands the gathered tensor itself over when the column was staged by
    /// [`TchStaging`]: no copy on the CPU, a non-blocking copy from pinned
    /// memory to CUDA; copies otherwise. Dense columns and packed Ragged
    /// values come this way.
    fn buffer_tensor(&self, column: Column, shape: &[usize]) -> Result<Tensor> {
        let (dtype, len) = (column.dtype(), column.array_len(shape)?);
        let buffer = match downcast_staged::<TensorBuffer>(column.into_buffer())? {
            Ok(buffer) if buffer.as_bytes().len() == len => buffer,
            Ok(buffer) => return self.tensor_from_bytes(dtype, &buffer.as_bytes()[..len], shape),
            Err(other) => return self.tensor_from_bytes(dtype, &other.as_bytes()[..len], shape),
        };
        // Range-checks the values a kind holds as the same bytes but not every
        // bit pattern of (`u64` above `i64::MAX`, `bool` bytes above 1).
        DTYPE_TABLE.check(dtype, &buffer.as_bytes()[..len])?;
        let size: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let tensor = buffer.into_tensor().f_reshape(size.as_slice())?;
        Ok(match self.device {
            Device::Cpu => tensor,
            device => tensor.f_to_device_(device, tensor.kind(), true, false)?,
        })
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
