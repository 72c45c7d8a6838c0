//! The error type of `loaderx-burn`: core's errors, plus what is burn's own
//! (tensor kinds and ranks, records that do not stack, user closures).

use burn::tensor::kind::Kind;
use loaderx_core::{DType, ErrorKind};

/// A boxed error a user mapping closure may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Errors turning Zrecord data into burn items and tensors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// loaderx failed: a store, a gather, the loader, or a conversion core
    /// defines (a column of the other record contract:
    /// [`ColumnKind`](ErrorKind::ColumnKind); an element type burn has no
    /// type for: [`UnsupportedDType`](ErrorKind::UnsupportedDType) or
    /// [`InvalidArgument`](ErrorKind::InvalidArgument) naming it).
    #[error(transparent)]
    Core(#[from] loaderx_core::Error),
    /// Converting stream `stream` failed (core's error, e.g. a value out of
    /// range for the device's `Int` type: [`OutOfRange`](ErrorKind::OutOfRange);
    /// values are never truncated).
    #[error("stream {stream:?}: {source}")]
    Stream {
        /// The stream.
        stream: String,
        /// What failed.
        #[source]
        source: Box<Error>,
    },
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
    /// The tensor rank asked for is not the data's rank (`1 + record rank`
    /// for a batch; burn tensors have rank 1 or more).
    #[error(
        "stream {stream:?}: its data has rank {found}, asked for a rank-{expected} tensor (burn tensors have rank 1 or more)"
    )]
    Rank {
        /// The stream.
        stream: String,
        /// The rank asked for.
        expected: usize,
        /// The data's rank.
        found: usize,
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
    /// A user mapping closure failed.
    #[error("mapping failed: {0}")]
    Map(#[source] BoxError),
}

impl Error {
    /// Core's error kind behind this error, looking through
    /// [`Stream`](Error::Stream) context; `None` for burn's own errors.
    pub fn core_kind(&self) -> Option<&ErrorKind> {
        match self {
            Error::Core(e) => Some(e.kind()),
            Error::Stream { source, .. } => source.core_kind(),
            _ => None,
        }
    }

    /// `error` in the context of stream `stream` (errors that name their
    /// stream already are returned as they are).
    pub(crate) fn stream(stream: &str, error: impl Into<Error>) -> Error {
        error.into().in_stream(stream)
    }

    /// This error in the context of stream `stream`.
    pub(crate) fn in_stream(self, stream: &str) -> Error {
        match self {
            Error::Core(_) => Error::Stream {
                stream: stream.to_owned(),
                source: Box::new(self),
            },
            named => named,
        }
    }

    /// An invalid argument or configuration (core's
    /// [`InvalidArgument`](ErrorKind::InvalidArgument)).
    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::Core(
            ErrorKind::InvalidArgument {
                message: message.into(),
            }
            .into(),
        )
    }
}

/// A specialised `Result` for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
