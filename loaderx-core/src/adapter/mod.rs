//! The adapter author's namespace: everything a framework adapter (burn,
//! candle and tch here; a fourth one in one file) builds on, and nothing a
//! store, sampler or loader user needs.
//!
//! An adapter is three pieces, each a trait of this module or the root's
//! builder:
//!
//! 1. A [`Staging`]: where each stream's batch is gathered — the
//!    framework's own CPU tensor storage, pinned host memory for a device,
//!    or core's [`BufferPool`]. Its [`Buffer`](Staging::Buffer) type is what
//!    the loader's [`Batch`](crate::Batch)es and
//!    [`Column`](crate::Column)s hold, so the adapter gets its own buffers
//!    back by a `match` on [`ColumnBuffer`], never a cast.
//! 2. A [`ColumnConverter`]: a column's bytes to the framework's tensor
//!    ([`tensor_from_bytes`](ColumnConverter::tensor_from_bytes), copying,
//!    through the adapter's [`DTypeTable`]) and its own staged buffer to a
//!    tensor without a copy
//!    ([`buffer_tensor`](ColumnConverter::buffer_tensor)). Dense, padded,
//!    packed and per-record conversion and the [`TensorBatch`] around them
//!    are built on those two methods here.
//! 3. An extension trait on [`DataLoaderBuilder`](crate::DataLoaderBuilder)
//!    (`build_candle`, `build_tch`, `build_burn`) that ends a core
//!    configuration with the converter:
//!    [`build_tensors`](crate::DataLoaderBuilder::build_tensors), or
//!    [`build_tensor_views`](crate::DataLoaderBuilder::build_tensor_views)
//!    for one converter per device, or
//!    [`build_epochs`](crate::DataLoaderBuilder::build_epochs) for a
//!    framework's epoch-based loader trait ([`EpochLoader`]). Every core
//!    option then applies with no forwarding code.
//!
//! A complete adapter for a toy framework whose tensors are `(shape,
//! Vec<f32>)`: `f32` batches taken without a copy, every other element type
//! refused by name:
//!
//! ```
//! use loaderx_core::adapter::{
//!     ColumnBuffer, ColumnConverter, DTypeTable, RaggedMode, StagedBuffer, TensorBatch, TypedVec,
//!     VecBuffer, VecStaging,
//! };
//! use loaderx_core::{Column, DType, DataLoader, DataLoaderBuilder, Error};
//! use loaderx_core::adapter::Staging;
//!
//! /// The toy framework's tensor.
//! #[derive(Debug)]
//! struct Toy { shape: Vec<usize>, data: Vec<f32> }
//!
//! /// It holds `f32` only: no other type widens into it, so they are refused.
//! const TOY_TYPES: DTypeTable = DTypeTable::new(&[DType::F32]);
//!
//! struct ToyConverter;
//!
//! impl ColumnConverter for ToyConverter {
//!     type Tensor = Toy;
//!     type Error = Error;
//!     // Batches gathered into typed vectors: an f32 batch is the tensor's Vec.
//!     type Staging = VecStaging;
//!     fn staging(&self) -> VecStaging {
//!         VecStaging
//!     }
//!     fn tensor_from_bytes(&self, dtype: DType, bytes: &[u8], shape: &[usize]) -> Result<Toy, Error> {
//!         let wide = TOY_TYPES.widen(dtype, bytes)?;
//!         let data = match wide.dtype() {
//!             DType::F32 => wide.as_slice::<f32>()?.to_vec(),
//!             other => {
//!                 let message = format!("the toy framework has no {other}");
//!                 return Err(loaderx_core::ErrorKind::InvalidArgument { message }.into());
//!             }
//!         };
//!         Ok(Toy { shape: shape.to_vec(), data })
//!     }
//!     fn buffer_tensor(&self, column: Column<VecBuffer>, shape: &[usize]) -> Result<Toy, Error> {
//!         let (dtype, len) = (column.dtype(), column.array_len(shape)?);
//!         match column.into_buffer() {
//!             // Our own buffer, exactly the batch: moved, not copied.
//!             ColumnBuffer::Staged(b) if b.len() == len => match b.into_vec() {
//!                 Ok(TypedVec::F32(data)) => Ok(Toy { shape: shape.to_vec(), data }),
//!                 Ok(other) => self.tensor_from_bytes(dtype, other.as_bytes(), shape),
//!                 Err(b) => self.tensor_from_bytes(dtype, &b.as_bytes()[..len], shape),
//!             },
//!             other => self.tensor_from_bytes(dtype, &other.as_bytes()[..len], shape),
//!         }
//!     }
//! }
//!
//! /// The adapter's entry point: any core configuration, ended with it.
//! trait ToyLoaderExt {
//!     fn build_toy(self) -> loaderx_core::Result<DataLoader<TensorBatch<Toy>>>;
//! }
//!
//! impl<S: Staging> ToyLoaderExt for DataLoaderBuilder<S> {
//!     fn build_toy(self) -> loaderx_core::Result<DataLoader<TensorBatch<Toy>>> {
//!         // Ragged streams one tensor per record (padding would need the
//!         // toy to hold i64 lengths and a bool mask too).
//!         self.build_tensors(ToyConverter, RaggedMode::PerRecord, Ok)
//!     }
//! }
//!
//! // Using it: a Dense f32 stream and a Ragged one.
//! use loaderx_core::{Codec, Dense, DenseWriter, Ragged, RaggedWriter, SamplerMode};
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[2], Codec::Raw)?;
//! w.append_slice(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 3)?;
//! w.close()?;
//! let mut w = RaggedWriter::<f32>::create(dir.path().join("t"), 1, Codec::Zstd)?;
//! w.append([vec![7.0f32], vec![8.0, 9.0], vec![10.0, 11.0, 12.0]])?;
//! w.close()?;
//! let mut loader = DataLoader::builder()
//!     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
//!     .stream("t", Ragged::<f32>::open(dir.path().join("t"))?)
//!     .batch_size(2)
//!     .mode(SamplerMode::Sequential)
//!     .build_toy()?;
//! let batch = loader.next().unwrap()?;
//! let x = batch.dense("x")?;
//! assert_eq!((x.shape.as_slice(), x.data.as_slice()), (&[2, 2][..], &[0.0, 1.0, 2.0, 3.0][..]));
//! let t = batch.records("t")?;
//! assert_eq!((t[1].shape.as_slice(), t[1].data.as_slice()), (&[2][..], &[8.0, 9.0][..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Beside those traits, this module holds what every adapter shares:
//!
//! - Staging: [`Staging`], [`StagedBuffer`], [`StageRequest`],
//!   [`ColumnBuffer`], core's [`BufferPool`] / [`PooledBuffer`], pinned host
//!   memory ([`PinnedPool`] over a framework's [`PinnedAlloc`]) and the
//!   counters behind an adapter's `staging_stats()` ([`StagingCounter`],
//!   [`StagingStats`]).
//! - Epochs for frameworks whose loader trait is epoch-based:
//!   [`EpochLoader`], [`EpochIter`], [`EpochStats`].
//!
//! - [`AlignedBuf`]: 8-byte-aligned host bytes (the default staging's
//!   buffer), and [`HostArray`]: a typed, shaped array in one.
//! - [`VecStaging`]: batches gathered straight into a [`TypedVec`], for
//!   frameworks whose CPU tensors own a `Vec<T>` (candle), so the gathered
//!   memory becomes the tensor's without a copy.
//! - [`pad_records`] / [`Column::padded`](crate::loader::Column::padded):
//!   the one padding definition, for records of any rank —
//!   [`Padded`]`{ values, lengths, mask }` with `i64` lengths per record and
//!   axis, a `bool` mask of the values' shape, and a configurable
//!   [`PadValue`].
//! - [`PackedRagged`]`{ values, cu_seqlens, shapes }`: a Ragged batch
//!   with its records' elements end to end (Python loaderx 2.8.19's
//!   `RaggedBatch`), from [`Column::packed`](crate::loader::Column::packed);
//!   a loader built with [`packed`](crate::DataLoaderBuilder::packed)
//!   gathers Ragged streams that way, so `values` is the staged buffer.
//! - [`DTypeTable`] and [`widen`]: the one widening table. An adapter names
//!   the element types its framework has; a type it lacks becomes the
//!   narrowest one that holds every value (`u64` to `i64` range-checked),
//!   never truncated, reading bytes of any alignment.
//! - [`RaggedMode`], [`ColumnConverter`] and [`TensorBatch`]: a loader
//!   batch as framework tensors. The adapter implements
//!   [`ColumnConverter::tensor_from_bytes`] (and a zero-copy
//!   [`dense`](ColumnConverter::dense) for its own staged buffers); Dense,
//!   padded and per-record conversion, the batch structure, its accessors,
//!   the column-contract checks ([`Column::dense_shape`](crate::loader::Column::dense_shape),
//!   [`Column::ragged_layout`](crate::loader::Column::ragged_layout)) and the loader glue
//!   ([`DataLoaderBuilder::build_tensors`](crate::DataLoaderBuilder::build_tensors))
//!   are shared.
//! - [`PairsBuilder`] / [`Pairs`]: one pass over two streams as `(xs, ys)`
//!   tensors, shuffled or not, the last batch kept or not — what tch's
//!   `Iter2` and candle's `Batcher` iterators are built on.
//!
//! ```
//! use loaderx_core::adapter::{PadValue, RaggedMode};
//! use loaderx_core::{Codec, DataLoader, Ragged, RaggedWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = RaggedWriter::<u16>::create(dir.path().join("tok"), 1, Codec::Raw)?;
//! w.append([vec![1u16, 2, 3], vec![4], vec![5, 6]])?;
//! w.close()?;
//! let mut loader = DataLoader::builder()
//!     .stream("tok", Ragged::<u16>::open(dir.path().join("tok"))?)
//!     .batch_size(3)
//!     .mode(loaderx_core::SamplerMode::Sequential)
//!     .build()?;
//! let batch = loader.next().unwrap()?;
//! let padded = batch.column("tok").unwrap().padded(PadValue::ZERO)?;
//! assert_eq!(padded.values.shape(), &[3, 3]);
//! assert_eq!(padded.values.as_slice::<u16>()?, &[1, 2, 3, 4, 0, 0, 5, 6, 0]);
//! assert_eq!(padded.lengths.as_slice::<i64>()?, &[3, 1, 2]);
//! # let _ = RaggedMode::Padded;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod buffer;
mod packed;
mod pad;
mod pairs;
mod tensors;
mod typed_vec;
mod widen;

pub(crate) use buffer::spare_bytes;
pub use buffer::{AlignedBuf, HostArray};
pub use packed::PackedRagged;
pub use pad::{PadValue, Padded, pad_records};
pub use pairs::{Pairs, PairsBuilder};
pub use tensors::{BufferOf, ColumnConverter, RaggedMode, TensorBatch, TensorColumn};
pub use typed_vec::{TypedVec, VecBuffer, VecStaging};
pub use widen::{DTypeTable, Widened, check_values, widen};

pub use crate::loader::{
    BufferPool, ColumnBuffer, EpochIter, EpochLoader, EpochStats, PinnedAlloc, PinnedBlock,
    PinnedBuffer, PinnedPool, PinnedPoolConfig, PinnedPoolStats, PooledBuffer, StageRequest,
    StagedBuffer, Staging, StagingCounter, StagingStats,
};
