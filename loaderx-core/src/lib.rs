//! # loaderx-core
//!
//! Zrecord: immutable, typed, ordered on-disk record stores with per-record
//! zstd compression and parallel random gather straight into caller memory,
//! byte-compatible with every Python loaderx format generation (2.4.6 to
//! 2.8.19).
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
//! Every item has one path. The store, codec, sampler and loader types live
//! at the crate root (their modules are private). Two layers on top keep
//! their own namespace: [`adapter`], everything a framework adapter builds
//! on (staging, converters, the host-batch layer, epochs), and
//! [`sequence`]; [`guide`] holds documentation only. In source order:
//!
//! - `dtype`: element types ([`DType`], [`Element`]) and their NumPy names.
//! - `format` (hidden, not covered by semver): the on-disk format, field by
//!   field; public only for the fuzz targets and the format's tests.
//! - `codec`: [`Codec`] (`raw`, `zstd`, `zstd_dict`) and dictionary training
//!   ([`train_dict`]).
//! - `engine` (private): the untyped parallel store engine.
//! - `dense` and `ragged`: the two typed record contracts ([`Dense`],
//!   [`Ragged`], their writers and batches).
//! - `store`: [`Store`], opening a store of either contract; `digest`: the
//!   canonical [`digest`]; `dataset`: [`Dataset`], parts written by many
//!   writers joined by a manifest into one sequence of records;
//!   `classes`: [`ClassNames`], the class names converters write beside a
//!   split's stores ([`classes`]).
//! - `remote` (feature `remote`): stores on object storage (S3, GCS, Azure,
//!   HTTP) behind the same `open` calls, with a block cache, and `push`.
//! - `sampler`: [`Sampler`], batch indices as a pure function of `(seed, step)`.
//! - [`sequence`]: record lengths, length-bucketed sampling, packing into
//!   fixed-length rows.
//! - `loader`: the ordered, multi-threaded [`DataLoader`] (endless, or finite
//!   passes) and its [`Batch`]es.
//! - `vision` (feature `vision`): decoding and augmenting encoded JPEG/PNG/WebP
//!   records on the loader's workers (`DataLoaderBuilder::augment`).
//! - [`adapter`]: the adapter author's guide and everything it needs:
//!   staging, converters, aligned buffers, padding, the widening table,
//!   tensor batches, epochs.
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

pub mod adapter;
mod classes;
mod codec;
mod dataset;
mod dense;
mod digest;
mod dtype;
mod engine;
mod error;
mod float8;
#[doc(hidden)]
pub mod format;
pub mod guide;
pub mod lazy;
mod loader;
mod migrate;
mod options;
mod part_index;
pub mod profile;
mod ragged;
#[cfg(feature = "remote")]
mod remote;
mod remote_url;
mod sampler;
pub mod sequence;
mod store;
#[cfg(feature = "vision")]
pub mod vision;

pub use classes::{CLASSES_FILE, ClassNames, DEFAULT_LABEL_STREAM, classes};
pub use codec::{
    AsRecordBytes, Codec, DICT_MAX_BYTES, DICT_SAMPLE_BYTES, MAX_DICT_LEN, ZSTD_LEVEL, train_dict,
    train_dict_from_array,
};
pub use dataset::{Dataset, MANIFEST_FILE, STREAM_NAME_RULE};
pub use dense::{Dense, DenseWriter, DynDense, DynDenseWriter};
pub use digest::{DigestBuilder, StoreDigest, digest};
pub use dtype::{
    Complex32, Complex64, DType, Element, F8E4M3Fn, F8E4M3Fnuz, F8E5M2, F8E5M2Fnuz, F8E8M0Fnu,
};
pub use engine::cold::ReadMode;
pub use engine::source::RemoteStats;
pub use error::{Error, ErrorKind, Result, StoreKind};
pub use format::generation::Generation;

/// Largest logical record (2 GiB), as in Python loaderx: a longer record is
/// refused by the writers and by the readers' checks.
pub const MAX_RECORD_LEN: u64 = 1 << 31;
pub use loader::{
    Batch, Bottleneck, Column, ColumnLayout, DEFAULT_PREFETCH_BYTES,
    DEFAULT_WINDOWED_PREFETCH_BYTES, DataLoader, DataLoaderBuilder, INPUT_BOUND_SHARE, LoaderStats,
    MAX_LOOKAHEAD_STEPS, MixtureSource, MixtureStreams, Stage, StageStats, StageTimes, Stream,
    WorkerStats, view_range,
};
pub use migrate::migrate;
pub use options::CreateOptions;
pub use part_index::PartIndex;
pub use ragged::{
    DynRagged, DynRaggedBatch, DynRaggedWriter, Ragged, RaggedBatch, RaggedGatherPlan,
    RaggedLayout, RaggedRecord, RaggedWriter,
};
#[cfg(feature = "remote")]
pub use remote::{
    CACHE_SUBDIR, PushReport, RemoteObject, RemoteOptions, STORE_ID_FILE, push, push_stores,
    push_stores_with_files,
};
pub use remote_url::{is_url, redact_url};
pub use sampler::{
    FeistelPermutation, Mixture, MixtureStop, OrderStats, RecordPosition, Sampler, SamplerBuilder,
    SamplerMode,
};
pub use store::Store;

#[doc(no_inline)]
pub use half::{bf16, f16};
#[doc(no_inline)]
pub use ndarray;
