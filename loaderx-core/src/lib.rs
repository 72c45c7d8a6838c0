//! # loaderx-core
//!
//! Zrecord: immutable, typed, ordered on-disk record stores with per-record
//! zstd compression and parallel random gather straight into caller memory,
//! byte-compatible with the Python loaderx 2.4.6 format.
//!
//! ```
//! use loaderx_core::{Codec, CreateOptions, Dense, DenseWriter, Ragged, RaggedWriter};
//! use ndarray::Array2;
//!
//! let dir = tempfile::tempdir()?;
//!
//! // Dense: every record has the same shape.
//! let rows = Array2::<f32>::from_shape_fn((100, 8), |(i, j)| (i * 8 + j) as f32);
//! let mut w = DenseWriter::<f32>::create_with(
//!     dir.path().join("x"),
//!     &[8],
//!     &CreateOptions::new(Codec::Zstd).data_shards(2),
//! )?;
//! w.append(&rows)?;
//! w.close()?; // publishes; a writer dropped without close leaves nothing that opens
//!
//! let x = Dense::<f32>::open(dir.path().join("x"))?;
//! let batch = x.gather(&[7, 0, 99])?; // shape (3, 8), in the order asked
//! assert_eq!(batch[[0, 0]], 56.0);
//!
//! // Ragged: every record keeps its own shape.
//! let mut w = RaggedWriter::<u16>::create(dir.path().join("tok"), 1, Codec::Raw)?;
//! w.append([vec![1u16, 2, 3], vec![4], vec![5, 6]])?;
//! w.close()?;
//! let tok = Ragged::<u16>::open(dir.path().join("tok"))?;
//! let b = tok.gather(&[2, 0])?;
//! assert_eq!(b.data(0), &[5, 6]);
//! assert_eq!(b.view(1).shape(), &[3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Layout of the crate
//!
//! - [`dtype`]: element types and their NumPy names.
//! - [`format`]: the on-disk format, field by field.
//! - [`codec`]: `raw`, `zstd`, `zstd_dict` and dictionary training.
//! - `engine` (private): the untyped parallel store engine.
//! - [`dense`] and [`ragged`]: the two typed record contracts.
//! - [`store`]: opening a store of either contract; [`digest`]: the canonical digest.
//! - [`sampler`]: batch indices as a pure function of `(seed, step)`.
//! - [`loader`]: the ordered, multi-threaded DataLoader (endless, or finite passes).
//! - [`host`]: the host-batch layer adapters build on: aligned buffers,
//!   padding, the widening table, tensor batches.
//!
//! ## Concurrency and safety
//!
//! Readers are `Send + Sync`; gathers fan out over rayon's global pool, as do
//! appends. A writer holds an exclusive `flock` on `meta.zr` and readers hold
//! shared ones, exactly as Python loaderx does, so a store is never written
//! while read. Payloads are memory-mapped: a store must not be modified by
//! other software while open (loaderx itself never modifies a published store).

// The format is little-endian and records are read and written as native
// bytes (bytemuck casts): refuse to build where the two differ, rather than
// silently write stores no other implementation reads.
#[cfg(target_endian = "big")]
compile_error!("loaderx-core supports little-endian targets only (Zrecord is little-endian)");

pub mod codec;
pub mod dense;
pub mod digest;
pub mod dtype;
mod engine;
mod error;
pub mod format;
pub mod host;
pub mod loader;
mod options;
pub mod ragged;
#[cfg(feature = "remote")]
pub mod remote;
mod remote_url;
pub mod sampler;
pub mod store;

pub use codec::{
    AsRecordBytes, Codec, DICT_MAX_BYTES, DICT_SAMPLE_BYTES, MAX_DICT_LEN, train_dict,
    train_dict_from_array,
};
pub use dense::{Dense, DenseWriter, DynDense, DynDenseWriter};
pub use digest::{DigestBuilder, StoreDigest, digest};
pub use dtype::{DType, Element};
pub use error::{Error, ErrorKind, Result, StoreKind};
pub use loader::{Batch, DataLoader, DataLoaderBuilder};
pub use options::CreateOptions;
pub use ragged::{
    DynRagged, DynRaggedBatch, DynRaggedWriter, Ragged, RaggedBatch, RaggedLayout, RaggedRecord,
    RaggedWriter,
};
#[cfg(feature = "remote")]
pub use remote::{PushReport, RemoteOptions, RemoteStats, push};
pub use remote_url::is_url;
pub use sampler::{Sampler, SamplerMode};
pub use store::Store;

#[doc(no_inline)]
pub use half::f16;
#[doc(no_inline)]
pub use ndarray;
