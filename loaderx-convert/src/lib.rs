//! # loaderx-convert
//!
//! Converters from your data to Zrecord stores ([`loaderx_core`]). A table
//! held in memory converts without files:
//!
//! ```
//! # #[cfg(feature = "arrow")] {
//! use std::sync::Arc;
//! use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch, RecordBatchIterator};
//! use arrow_array::types::Int32Type;
//! use loaderx_convert::table::{TableOptions, convert_record_batches};
//!
//! let tokens = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
//!     Some(vec![Some(1), Some(2)]),
//!     Some(vec![Some(3)]),
//! ]);
//! let batch = RecordBatch::try_from_iter([
//!     ("tokens", Arc::new(tokens) as ArrayRef),
//!     ("label", Arc::new(Int64Array::from(vec![0, 1])) as ArrayRef),
//! ])?;
//! let schema = batch.schema();
//! let out = std::env::temp_dir().join(format!("loaderx-convert-doc-{}", std::process::id()));
//! let reader = RecordBatchIterator::new([Ok(batch)], schema);
//! let summary = convert_record_batches(vec![("train", reader)], &out, &TableOptions::new())?;
//! println!("{summary}"); // train: 2 records [tokens: ragged i32 (rank 1), label: dense i64 []]
//! let tokens = loaderx_core::Store::open(out.join("train/tokens"))?;
//! assert_eq!(tokens.len(), 2);
//! # std::fs::remove_dir_all(&out)?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The sources, each a module (and a `loaderx convert` command):
//!
//! - [`local`] (feature `arrow`): local Parquet files, Arrow IPC files and
//!   streams, `datasets` `save_to_disk` directories;
//! - [`table::convert_record_batches`] (feature `arrow`): any arrow-rs
//!   `RecordBatchReader` (polars, DataFusion, Lance, your own batches);
//! - [`hf`] (feature `hf`): Hugging Face Hub datasets (parquet: numbers,
//!   lists, images, text, audio; configs from the dataset card);
//! - [`jsonl`] (feature `arrow`): JSON Lines files, one object a row;
//! - [`csv`] (feature `csv`): CSV and TSV files, plain or gzipped;
//! - [`encoded`] (feature `arrow`): encoded PNG/JPEG image stores from
//!   your own files;
//! - [`folder`] (feature `arrow`): image folders (`ROOT/<class>/<file>.png`);
//! - [`webdataset`] (feature `webdataset`): WebDataset tar shards;
//! - [`npy`] (feature `npy`): NumPy `.npy` files and `.npz` archives;
//! - [`idx`] (feature `idx`): the IDX files of MNIST and Fashion-MNIST.
//!
//! The Arrow-backed sources hand their tables to one layer, [`table`],
//! which decides each column's store (numbers, lists, 2.8.19's
//! `struct{values, shape}`, images, audio, strings) and writes it, whole
//! or as one part of a multi-part dataset.
//!
//! Every converter writes a root of aligned split/stream stores,
//! `OUT/<split>/<stream>/`, built in a hidden temporary sibling of `OUT`
//! that is renamed into place only when every store closed and all record
//! counts of a split agree ([`output::StagedRoot`]). A failed conversion
//! leaves nothing behind.
//!
//! The `loaderx` command-line tool (crate `loaderx-cli`) is a thin layer
//! over these functions.

pub mod codec;
#[cfg(feature = "csv")]
pub mod csv;
#[cfg(feature = "arrow")]
pub mod encoded;
mod error;
#[cfg(feature = "arrow")]
pub mod folder;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
#[cfg(feature = "hf")]
pub mod hf;
#[cfg(feature = "arrow")]
mod hub;
#[cfg(feature = "idx")]
pub mod idx;
#[cfg(feature = "arrow")]
mod ipc;
#[cfg(feature = "arrow")]
pub mod jsonl;
#[cfg(feature = "lazy")]
pub mod lazy;
#[cfg(feature = "arrow")]
pub mod local;
#[cfg(feature = "npy")]
pub mod npy;
#[cfg(any(feature = "npy", feature = "webdataset"))]
mod npy_header;
pub mod output;
#[cfg(feature = "arrow")]
mod parquet_file;
#[cfg(feature = "arrow")]
pub mod table;
#[cfg(feature = "webdataset")]
pub mod webdataset;

pub use codec::{CodecChoice, CodecDecision};
pub use error::{Error, Result};
