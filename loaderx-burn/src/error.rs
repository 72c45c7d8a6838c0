//! The error type of `loaderx-burn`.

use std::sync::Arc;

use burn::tensor::kind::Kind;
use loaderx_core::{DType, StoreKind};

/// A boxed error a user mapping closure may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Errors turning Zrecord data into burn items and tensors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// loaderx failed (store, gather, loader).
    #[error(transparent)]
    Core(#[from] loaderx_core::Error),
    /// A loaderx element type this version cannot map to burn.
    #[error("no burn element type for loaderx {0}")]
    Unsupported(DType),
    /// The tensor kind asked for cannot hold the stream's values without
    /// loss (floats as `Int`, anything but `bool` as `Bool`).
    #[error("stream {stream:?} holds {dtype}, which a {kind:?} tensor cannot hold losslessly")]
    Kind {
        /// The stream.
        stream: String,
        /// Its element type.
        dtype: DType,
        /// The kind that was asked for.
        kind: Kind,
    },
    /// An integer does not fit the device's integer type (e.g. a `u64`
    /// above `i32::MAX` on a device whose `Int` tensors are `i32`). Values are
    /// never truncated.
    #[error(
        "stream {stream:?}: {dtype} value {value} does not fit the device's {target:?} Int tensors"
    )]
    OutOfRange {
        /// The stream.
        stream: String,
        /// Its element type.
        dtype: DType,
        /// The first offending value.
        value: String,
        /// The device's integer type.
        target: burn::tensor::DType,
    },
    /// The tensor rank asked for is not the batch's rank (`1 + record rank`).
    #[error("stream {stream:?}: its batch has rank {found}, asked for a rank-{expected} tensor")]
    Rank {
        /// The stream.
        stream: String,
        /// The rank asked for.
        expected: usize,
        /// The batch's rank.
        found: usize,
    },
    /// The stream follows the other record contract (e.g. a Ragged stream
    /// asked for as one dense tensor: pad it instead).
    #[error("stream {stream:?} is {found}, expected {expected}")]
    Layout {
        /// The stream.
        stream: String,
        /// What the call needs.
        expected: StoreKind,
        /// What the stream is.
        found: StoreKind,
    },
    /// Records stacked into one batch disagree (a Dense stream whose records
    /// have different shapes or types, or a stream some records lack).
    #[error("stream {stream:?}: cannot stack the records: {detail}")]
    Stack {
        /// The stream.
        stream: String,
        /// What disagrees.
        detail: String,
    },
    /// The batch or record has no stream of that name.
    #[error("no stream {0:?}")]
    MissingStream(String),
    /// An invalid configuration (no stream, unequal lengths, zero workers...).
    #[error("{0}")]
    Invalid(String),
    /// A user mapping closure failed.
    #[error("mapping failed: {0}")]
    Map(#[source] BoxError),
    /// A column of a [`TensorBatch`](crate::TensorBatch) failed to convert
    /// when the batch was built; the error is kept and returned on access.
    #[error("stream {stream:?}: {source}")]
    Column {
        /// The stream.
        stream: String,
        /// The conversion error.
        #[source]
        source: Arc<Error>,
    },
}

/// A specialised `Result` for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
