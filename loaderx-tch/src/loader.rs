//! A loaderx DataLoader whose batches are tch tensors, converted on the
//! loader's worker threads.

use loaderx_core::adapter::{ColumnBuffer, StagedBuffer};
use loaderx_core::adapter::{ColumnConverter, RaggedMode};
use loaderx_core::{Column, DType, DataLoader, DataLoaderBuilder, Stage};
use tch::{Device, Tensor};

use crate::dtype::{DTYPE_TABLE, tch_kind};
use crate::error::{Error, Result};
use crate::staging::{TchBuffer, TchStaging, record_copy};

/// A padded Ragged stream as tch tensors: `values` `(B, max_0, ..)` of the
/// [mapped kind](crate::DTYPE_TABLE), `lengths` `(B, ndim)` `Int64`, `mask` of
/// `values`' shape, `Bool` (true inside a record).
pub type Padded = loaderx_core::adapter::Padded<Tensor>;

/// A packed Ragged stream as tch tensors: `values` 1-D of the [mapped
/// kind](crate::DTYPE_TABLE), `cu_seqlens` `Int` (records + 1 offsets, in
/// elements) and `shapes` `(B, ndim)` `Int64` (libtorch has no `u32`).
pub type PackedRagged = loaderx_core::adapter::PackedRagged<Tensor>;

/// One stream of a [`TensorBatch`]: Dense, padded, per-record or packed.
pub type TensorColumn = loaderx_core::adapter::TensorColumn<Tensor>;

/// A loader step as tch tensors, streams in the loader's order (core's
/// [`TensorBatch`](loaderx_core::adapter::TensorBatch) with tch's types).
pub type TensorBatch = loaderx_core::adapter::TensorBatch<Tensor>;

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
    type Staging = TchStaging;

    fn tensor_from_bytes(&self, dtype: DType, bytes: &[u8], shape: &[usize]) -> Result<Tensor> {
        let size: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let wide = DTYPE_TABLE.widen(dtype, bytes)?;
        let n = (wide.as_bytes().len() / wide.dtype().size().max(1)) as i64;
        let cpu = Tensor::f_from_data_size(wide.as_bytes(), &[n], tch_kind(wide.dtype())?)?
            .f_reshape(size.as_slice())?;
        Ok(match self.device {
            Device::Cpu => cpu,
            device => Stage::Transfer.time(|| cpu.f_to_device(device))?,
        })
    }

    /// Hands the gathered tensor itself over when the column was staged by
    /// [`TchStaging`]: no copy on the CPU, a non-blocking copy from pinned
    /// memory to CUDA; copies otherwise (counted in
    /// [`staging_stats`](crate::staging_stats)). Dense columns and packed
    /// Ragged values come this way.
    fn buffer_tensor(&self, column: Column<TchBuffer>, shape: &[usize]) -> Result<Tensor> {
        let (dtype, len) = (column.dtype(), column.array_len(shape)?);
        let buffer = match column.into_buffer() {
            ColumnBuffer::Staged(TchBuffer::Tensor(b)) if b.as_bytes().len() == len => b,
            other => {
                record_copy();
                return self.tensor_from_bytes(dtype, &other.as_bytes()[..len], shape);
            }
        };
        // Range-checks the values a kind holds as the same bytes but not every
        // bit pattern of (`u64` above `i64::MAX`, `bool` bytes above 1).
        DTYPE_TABLE.check(dtype, &buffer.as_bytes()[..len])?;
        let size: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let tensor = buffer.into_tensor().f_reshape(size.as_slice())?;
        Ok(match self.device {
            Device::Cpu => tensor,
            device => {
                Stage::Transfer.time(|| tensor.f_to_device_(device, tensor.kind(), true, false))?
            }
        })
    }

    fn staging(&self) -> TchStaging {
        TchStaging::new(self.device)
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

    /// A loader whose steps are placement views of one global batch, one
    /// per device in `devices`: the sampler draws the step's batch, it is
    /// split into `devices.len()` contiguous equal parts
    /// ([`view_range`](loaderx_core::view_range)), and part `v` is gathered
    /// by a [`TchStaging`] for `devices[v]` (pinned for CUDA) and converted
    /// to tensors on it, Ragged streams as `ragged` says. The batch size
    /// must divide by the number of devices; resuming
    /// ([`start_step`](DataLoaderBuilder::start_step)) and host sharding
    /// ([`shard`](DataLoaderBuilder::shard)) compose with it.
    ///
    /// ```
    /// use loaderx_core::adapter::RaggedMode;
    /// use loaderx_core::{Codec, DataLoader, Dense, DenseWriter};
    /// use loaderx_tch::TchLoaderExt;
    /// use tch::Device;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[2], Codec::Raw)?;
    /// w.append_slice(&(0..16).map(|v| v as f32).collect::<Vec<_>>(), 8)?;
    /// w.close()?;
    /// let mut loader = DataLoader::builder()
    ///     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
    ///     .batch_size(4)
    ///     .build_tch_devices(&[Device::Cpu, Device::Cpu], RaggedMode::Packed)?;
    /// let shards = loader.next().unwrap()?;
    /// assert_eq!(shards.len(), 2);
    /// assert_eq!(shards[1].dense("x")?.size(), [2, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn build_tch_devices(
        self,
        devices: &[Device],
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<Vec<TensorBatch>>>;
}

impl<S: loaderx_core::adapter::Staging> TchLoaderExt for DataLoaderBuilder<S> {
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

    fn build_tch_devices(
        self,
        devices: &[Device],
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<Vec<TensorBatch>>> {
        let converters = devices.iter().map(|&d| TchConverter::new(d)).collect();
        self.build_tensor_views(converters, ragged, Ok)
    }
}
