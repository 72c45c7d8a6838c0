//! The framework-neutral host-batch layer every adapter builds on.
//!
//! A batch's path ends in an adapter, but everything before the last step —
//! turning host bytes into a framework's tensor — is the same for every
//! framework and lives here, once:
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
//! use loaderx_core::host::{PadValue, RaggedMode};
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
pub use tensors::{ColumnConverter, RaggedMode, TensorBatch, TensorColumn};
pub use typed_vec::{TypedVec, VecBuffer, VecStaging};
pub use widen::{DTypeTable, Widened, check_values, widen};
