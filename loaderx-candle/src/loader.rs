//! A loaderx DataLoader whose batches are candle tensors, converted on the
//! loader's worker threads.

use candle_core::{Device, Tensor};
use loaderx_core::adapter::{ColumnConverter, RaggedMode};
use loaderx_core::{Column, DType, DataLoader, DataLoaderBuilder};

use crate::error::{Error, Result};
use crate::host::{
    CandleBuffer, CandleStaging, storage_from_buffer, storage_from_bytes, tensor_on,
};

/// A padded Ragged stream as candle tensors: `values` `(B, max_0, ..)` in
/// the [mapped type](crate::DTYPE_TABLE), `lengths` `(B, ndim)` `I64`, `mask` of
/// `values`' shape, `U8` (1 inside a record, 0 in padding).
pub type Padded = loaderx_core::adapter::Padded<Tensor>;

/// A packed Ragged stream as candle tensors: `values` 1-D in the [mapped
/// type](crate::DTYPE_TABLE), `cu_seqlens` `I32` (records + 1 offsets, in
/// elements) and `shapes` `(B, ndim)` `U32`.
pub type PackedRagged = loaderx_core::adapter::PackedRagged<Tensor>;

/// One stream of a [`TensorBatch`]: Dense, padded, per-record or packed.
pub type TensorColumn = loaderx_core::adapter::TensorColumn<Tensor>;

/// A loader step as candle tensors, streams in the loader's order (core's
/// [`TensorBatch`](loaderx_core::adapter::TensorBatch) with candle's types).
pub type TensorBatch = loaderx_core::adapter::TensorBatch<Tensor>;

/// candle's [`ColumnConverter`]: loader columns to tensors on one device,
/// gathered by [`CandleStaging`]. Dense columns move into their tensors
/// without a copy on the CPU. Single columns convert with the trait's
/// methods: [`dense`](ColumnConverter::dense) (or
/// [`copy_dense`](ColumnConverter::copy_dense) from a borrowed column),
/// [`padded`](ColumnConverter::padded) (with lengths and a mask) and
/// [`records`](ColumnConverter::records) (one tensor per record).
///
/// # Errors
///
/// Every conversion fails with [`Error::Core`] for a column of the other
/// record contract ([`ColumnKind`](loaderx_core::ErrorKind::ColumnKind)), a
/// value the [mapped type](crate::DTYPE_TABLE) cannot hold (a `u64` above
/// `i64::MAX`, a `bool` byte other than 0 or 1) or a type without a lossless
/// mapping, and with [`Error::Candle`] when candle refuses the tensor (its
/// device, its memory).
#[derive(Debug, Clone)]
pub struct CandleConverter {
    device: Device,
}

impl CandleConverter {
    /// A converter to tensors on `device`.
    pub fn new(device: &Device) -> CandleConverter {
        CandleConverter {
            device: device.clone(),
        }
    }
}

impl ColumnConverter for CandleConverter {
    type Tensor = Tensor;
    type Error = Error;
    type Staging = CandleStaging;

    fn tensor_from_bytes(&self, dtype: DType, bytes: &[u8], shape: &[usize]) -> Result<Tensor> {
        tensor_on(storage_from_bytes(dtype, bytes)?, shape, &self.device)
    }

    /// Moves the gathered memory into the tensor when the column was staged
    /// by [`CandleStaging`] (no copy on the CPU; with the `cuda` feature, an
    /// asynchronous upload from pinned memory); copies otherwise. Dense
    /// columns and packed Ragged values come this way.
    fn buffer_tensor(&self, column: Column<CandleBuffer>, shape: &[usize]) -> Result<Tensor> {
        let (dtype, len) = (column.dtype(), column.array_len(shape)?);
        #[cfg(feature = "cuda")]
        let buffer =
            match crate::cuda::upload_dense(dtype, column.into_buffer(), shape, &self.device) {
                Ok(tensor) => return tensor,
                Err(buffer) => buffer,
            };
        #[cfg(not(feature = "cuda"))]
        let buffer = column.into_buffer();
        tensor_on(
            storage_from_buffer(dtype, buffer, len)?,
            shape,
            &self.device,
        )
    }

    fn staging(&self) -> CandleStaging {
        CandleStaging::for_device(&self.device)
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

    /// A loader whose steps are placement views of one global batch, one
    /// per device in `devices`: the sampler draws the step's batch, it is
    /// split into `devices.len()` contiguous equal parts
    /// ([`view_range`](loaderx_core::view_range)), and part `v` is gathered
    /// by a [`CandleStaging`] for `devices[v]` (pinned for CUDA, with the
    /// `cuda` feature) and converted to tensors on it, Ragged streams as
    /// `ragged` says. The batch size must divide by the number of devices;
    /// resuming ([`start_step`](DataLoaderBuilder::start_step)) and host
    /// sharding ([`shard`](DataLoaderBuilder::shard)) compose with it.
    ///
    /// ```
    /// use candle_core::Device;
    /// use loaderx_candle::CandleLoaderExt;
    /// use loaderx_core::adapter::RaggedMode;
    /// use loaderx_core::{Codec, DataLoader, Dense, DenseWriter};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[2], Codec::Raw)?;
    /// w.append_slice(&(0..16).map(|v| v as f32).collect::<Vec<_>>(), 8)?;
    /// w.close()?;
    /// let mut loader = DataLoader::builder()
    ///     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
    ///     .batch_size(4)
    ///     .build_candle_devices(&[Device::Cpu, Device::Cpu], RaggedMode::Packed)?;
    /// let shards = loader.next().unwrap()?;
    /// assert_eq!(shards.len(), 2);
    /// assert_eq!(shards[1].dense("x")?.dims(), &[2, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn build_candle_devices(
        self,
        devices: &[Device],
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<Vec<TensorBatch>>>;
}

impl<S: loaderx_core::adapter::Staging> CandleLoaderExt for DataLoaderBuilder<S> {
    fn build_candle(self, device: &Device) -> loaderx_core::Result<DataLoader<TensorBatch>> {
        self.build_candle_ragged(device, RaggedMode::Padded)
    }

    fn build_candle_ragged(
        self,
        device: &Device,
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<TensorBatch>> {
        self.build_tensors(CandleConverter::new(device), ragged, Ok)
    }

    fn build_candle_with<T, F>(self, device: &Device, map: F) -> loaderx_core::Result<DataLoader<T>>
    where
        T: Send + 'static,
        F: Fn(TensorBatch) -> Result<T> + Send + Sync + 'static,
    {
        self.build_tensors(CandleConverter::new(device), RaggedMode::Padded, map)
    }

    fn build_candle_devices(
        self,
        devices: &[Device],
        ragged: RaggedMode,
    ) -> loaderx_core::Result<DataLoader<Vec<TensorBatch>>> {
        let converters = devices.iter().map(CandleConverter::new).collect();
        self.build_tensor_views(converters, ragged, Ok)
    }
}
