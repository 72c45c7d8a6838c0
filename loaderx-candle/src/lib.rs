//! # loaderx-candle
//!
//! loaderx batches as [`candle_core::Tensor`]s on any [`Device`](candle_core::Device):
//! a multi-threaded, ordered, resumable loader for candle training loops,
//! reading Zrecord stores.
//!
//! ```
//! use candle_core::Device;
//! use loaderx_candle::CandleLoaderExt;
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, Ragged, RaggedWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<u8>::create(dir.path().join("image"), &[2, 2], Codec::Zstd)?;
//! w.append_slice(&(0..40).collect::<Vec<u8>>(), 10)?;
//! w.close()?;
//! let mut w = RaggedWriter::<i8>::create(dir.path().join("tok"), 1, Codec::Raw)?;
//! w.append((0..10i8).map(|i| vec![i; 1 + i as usize % 3]))?;
//! w.close()?;
//!
//! let mut loader = DataLoader::builder()
//!     .stream("image", Dense::<u8>::open(dir.path().join("image"))?)
//!     .stream("tok", Ragged::<i8>::open(dir.path().join("tok"))?)
//!     .batch_size(4)
//!     .build_candle(&Device::Cpu)?;
//! let batch = loader.next().unwrap()?;
//! let image = batch.dense("image")?;               // U8 (4, 2, 2), no copy after the gather
//! let tok = batch.padded("tok")?;                   // I16 (4, max_len), widened from i8
//! assert_eq!(image.dims(), &[4, 2, 2]);
//! assert_eq!(tok.values.dtype(), candle_core::DType::I16);
//! assert_eq!(tok.lengths.dims(), &[4, 1]);             // I64 lengths
//! assert_eq!(tok.mask.dims(), tok.values.dims());      // U8 mask
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - [`CandleLoaderExt`] turns a [`loaderx_core::DataLoaderBuilder`] into a
//!   loader of [`TensorBatch`]es (or of your own type); the host → tensor
//!   conversion runs on the loader's workers, off the training thread.
//! - Single columns convert on their own with [`CandleConverter`]'s
//!   [`ColumnConverter`] methods: `dense`, `padded` (with lengths and a mask,
//!   any [`PadValue`]) or `records` (one tensor per record).
//! - [`Batcher`] gives one pass of `(xs, ys)` pairs in the style of
//!   `candle_datasets::Batcher` (`return_last_incomplete_batch` for evaluation).
//! - [`DTYPE_TABLE`] documents how loaderx element types map to candle's.
//! - With the `cuda` feature, batches for a CUDA device are staged in pinned
//!   host memory from core's bounded, size-aware `PinnedPool` and uploaded
//!   asynchronously on a dedicated transfer stream (see [`CandleStaging`]
//!   and `pinned_stats`).

mod batcher;
#[cfg(feature = "cuda")]
mod cuda;
mod dtype;
mod error;
mod host;
mod loader;

pub use batcher::Batcher;
#[cfg(feature = "cuda")]
pub use cuda::{CudaPinnedAlloc, CudaPinnedBlock, pinned_stats};
pub use dtype::{DTYPE_TABLE, candle_dtype};
pub use error::{Error, Result};
pub use host::{CandleBuffer, CandleStaging, staging_stats};
pub use loader::{
    CandleConverter, CandleLoaderExt, PackedRagged, Padded, TensorBatch, TensorColumn,
};
#[doc(no_inline)]
pub use loaderx_core::adapter::{ColumnConverter, PadValue, RaggedMode};
