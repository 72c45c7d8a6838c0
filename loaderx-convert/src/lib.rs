//! # loaderx-convert
//!
//! Converters from other dataset formats to Zrecord stores
//! ([`loaderx_core`]):
//!
//! - [`hf`] (feature `hf`): Hugging Face Hub datasets (parquet: numbers,
//!   lists, images, text, audio; configs from the dataset card);
//! - [`idx`] (feature `idx`): the IDX files of MNIST and Fashion-MNIST;
//! - [`folder`] (feature `arrow`): image folders (`ROOT/<class>/<file>.png`);
//! - [`webdataset`] (feature `webdataset`): WebDataset tar shards.
//!
//! Every converter writes a root of aligned split/column stores,
//! `OUT/<split>/<column>/`, built in a hidden temporary sibling of `OUT`
//! that is renamed into place only when every store closed and all record
//! counts of a split agree ([`output::StagedRoot`]). A failed conversion
//! leaves nothing behind.
//!
//! The `loaderx` command-line tool (crate `loaderx-cli`) is a thin layer
//! over these functions.

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
pub mod local;
pub mod output;
#[cfg(feature = "arrow")]
mod parquet_file;
#[cfg(feature = "arrow")]
pub mod table;
#[cfg(feature = "webdataset")]
pub mod webdataset;

pub use error::{Error, Result};
