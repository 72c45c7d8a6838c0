//! # loaderx-tch
//!
//! loaderx batches as [`tch::Tensor`]s: a multi-threaded, ordered,
//! resumable loader for tch training loops, reading Zrecord stores.
//!
//! ```
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter};
//! use loaderx_tch::TchLoaderExt;
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[3], Codec::Zstd)?;
//! w.append_slice(&(0..30).map(|v| v as f32).collect::<Vec<_>>(), 10)?;
//! w.close()?;
//!
//! let device = tch::Device::cuda_if_available();
//! let mut loader = DataLoader::builder()
//!     .stream("x", Dense::<f32>::open(dir.path().join("x"))?)
//!     .batch_size(4)
//!     .build_tch(device)?;
//! let batch = loader.next().unwrap()?;
//! assert_eq!(batch.dense("x")?.size(), [4, 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! On the CPU, Dense batches are gathered straight into the storage of the
//! tensor you receive. With CUDA they are gathered into pinned host memory
//! and copied to the device without blocking, so the copy overlaps the next
//! gather. Single columns convert with [`TchConverter`]'s [`ColumnConverter`]
//! methods. See [`DTYPE_TABLE`] for the element type table. [`Iter2`] gives one
//! pass of `(xs, ys)` pairs in the style of `tch::data::Iter2`
//! (`shuffle`, `to_device`, `return_smaller_last_batch`).
//!
//! ## Building
//!
//! tch needs libtorch 2.9.0. `scripts/libtorch` in this repository extracts a
//! CPU libtorch from the PyPI wheels and prints its path: build with
//! `LIBTORCH=$(scripts/libtorch)`; `scripts/libtorch --cuda` adds the CUDA
//! libraries of the same (CUDA 12.8) wheel, for building with CUDA (or
//! install `torch==2.9.0` in a venv and build with `LIBTORCH_USE_PYTORCH=1`).
//!
//! A binary linked against libtorch needs libtorch's directory as its rpath
//! (or on `LD_LIBRARY_PATH`) and, with CUDA, `libtorch_cuda` linked even
//! though no symbol of it is referenced (linkers with `--as-needed` drop it,
//! and CUDA then silently disappears). Link arguments of a library do not
//! reach the binaries of the crates that use it, so this crate publishes
//! them to their build scripts; your binary crate's `build.rs` is two lines:
//!
//! ```ignore
//! // build.rs of a binary crate that depends on loaderx-tch
//! fn main() {
//!     let args = std::env::var("DEP_LOADERX_TCH_LINK_ARGS").unwrap_or_default();
//!     args.split('\x1f').filter(|a| !a.is_empty()).for_each(|a| println!("cargo:rustc-link-arg={a}"));
//! }
//! ```
//!
//! The `tch-mnist` example builds with exactly this script.

mod dtype;
mod error;
mod iter;
mod loader;
mod staging;

pub use dtype::{DTYPE_TABLE, tch_kind};
pub use error::{Error, Result};
pub use iter::Iter2;
pub use loader::{PackedRagged, Padded, TchConverter, TchLoaderExt, TensorBatch, TensorColumn};
#[doc(no_inline)]
pub use loaderx_core::adapter::{ColumnConverter, PadValue, RaggedMode};
pub use staging::{StagingStats, TchBuffer, TchStaging, TensorBuffer, staging_stats};
