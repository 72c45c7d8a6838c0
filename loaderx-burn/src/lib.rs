//! # loaderx-burn
//!
//! burn-native data loading from Zrecord stores: burn's own data traits,
//! implemented over loaderx, yielding burn tensors on the device burn asks for.
//!
//! - [`BurnDataLoader`] implements burn's `DataLoader` directly on the
//!   loaderx DataLoader: each batch is gathered natively (one parallel
//!   gather per stream, into recycled buffers, no per-record `Vec`), turned
//!   into the model's batch type by your closure on the loader's worker
//!   threads, and delivered in a deterministic order that resumes exactly.
//!   Hand it to `SupervisedTraining::new(dir, train, valid)` like any burn
//!   loader.
//! - [`ZrecordDataset`] implements burn's `Dataset` over one or more stores
//!   (items are [`Record`]s, or your own type through
//!   [`map`](ZrecordDataset::map)), so burn's `DataLoaderBuilder`,
//!   `ShuffledDataset`, `PartialDataset` and friends work on Zrecord data.
//! - [`HostBatcher`] and [`RecordBatcher`] are burn `Batcher`s for those
//!   records.
//! - [`HostBatch`] is what mapping closures receive: a batch in host memory
//!   with typed views and `float` / `int` / `bool` / [`padded`](HostBatch::padded)
//!   / [`packed`](HostBatch::packed) tensor constructors.
//! - [`BurnConverter`] is burn's side of core's adapter contract
//!   ([`ColumnConverter`](loaderx_core::adapter::ColumnConverter), the same
//!   trait candle's and tch's converters implement): columns to burn's host
//!   data ([`TensorData`](burn::tensor::TensorData)) through its
//!   [`DTYPE_TABLE`], and host data to a tensor of the kind asked for
//!   ([`BurnConverter::tensor`]). [`burn_dtype`] documents how element types
//!   map to burn's kinds and what is refused ([`Error`]).
//!
//! ```
//! use burn::data::dataloader::DataLoader;
//! use burn::tensor::{Device, Int, Tensor};
//! use loaderx_burn::{BurnDataLoader, BurnLoaderExt, ZrecordDataset};
//! use loaderx_core::{Codec, DenseWriter, RaggedWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<u8>::create(dir.path().join("image"), &[2, 2], Codec::Zstd)?;
//! w.append_slice(&(0..40).collect::<Vec<u8>>(), 10)?;
//! w.close()?;
//! let mut w = RaggedWriter::<i32>::create(dir.path().join("tokens"), 1, Codec::Raw)?;
//! w.append((0..10).map(|i| vec![i; 1 + i as usize % 3]))?;
//! w.close()?;
//!
//! #[derive(Debug, Clone)]
//! struct Example { image: Tensor<3>, tokens: Tensor<2, Int>, mask: Tensor<2, burn::tensor::Bool> }
//!
//! let train = BurnDataLoader::builder()
//!     .dataset(&ZrecordDataset::open_dir(dir.path())?)
//!     .batch_size(4)
//!     .build_burn(&Device::flex(), |b| {
//!         let tokens = b.padded::<2, Int>("tokens")?;     // (4, max_len), lengths, mask
//!         Ok::<_, loaderx_burn::Error>(Example {
//!             image: b.float::<3>("image")? / 255.0,
//!             tokens: tokens.values,
//!             mask: tokens.mask,
//!         })
//!     })?;
//! for batch in train.iter() {                             // one epoch: 10 / 4 = 2 steps
//!     let batch = batch?;
//!     assert_eq!(batch.image.dims(), [4, 2, 2]);
//!     assert_eq!(batch.tokens.dims()[0], 4);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every upload to a CUDA device is staged in pinned host memory: on burn's
//! CUDA backend (feature `cuda`) through burn's own device staging, on its
//! LibTorch backend (feature `tch`, `Device::libtorch_cuda`) by a pinned CPU
//! tensor and a non-blocking copy, as loaderx-tch does. [`staging_stats`]
//! counts how many tensors were created from pinned memory, read back from
//! the memory itself.
//!
//! The crate depends on burn with `default-features = false, features =
//! ["std", "dataset"]` only: the application's own burn dependency picks the
//! backends (`flex`, `cuda`, ...) and `Device` selects one at run time.

mod batcher;
mod converter;
mod dataset;
mod error;
mod host;
mod loader;
mod staging;

pub use batcher::{HostBatcher, RecordBatcher};
pub use converter::{BurnConverter, DTYPE_TABLE, burn_dtype, holds, natural_kind};
pub use dataset::{Field, MappedDataset, Record, ZrecordDataset, ZrecordDatasetBuilder};
pub use error::{BoxError, Error, Result};
pub use host::{HostBatch, PackedRagged, Padded};
pub use loader::{BurnDataLoader, BurnLoaderExt, TensorBatch, TensorColumn};
pub use loaderx_core::LoaderStats;
pub use loaderx_core::adapter::EpochStats;
pub use staging::{StagingStats, staging_stats};
