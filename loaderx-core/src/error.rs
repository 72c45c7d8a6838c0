//! The error type shared by every part of `loaderx-core`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::dtype::DType;

/// A specialised `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `loaderx-core`.
///
/// The error is one pointer wide; [`Error::kind`] tells what happened, with the
/// store path and record index where they are known.
pub struct Error(Box<ErrorKind>);

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// Unwraps the boxed kind.
    pub fn into_kind(self) -> ErrorKind {
        *self.0
    }

    pub(crate) fn io(path: impl AsRef<Path>, source: io::Error) -> Self {
        ErrorKind::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
        .into()
    }

    pub(crate) fn corrupt(path: impl AsRef<Path>, detail: impl Into<String>) -> Self {
        ErrorKind::Corrupt {
            path: path.as_ref().to_path_buf(),
            detail: detail.into(),
        }
        .into()
    }

    pub(crate) fn corrupt_record(
        path: impl AsRef<Path>,
        index: u64,
        detail: impl Into<String>,
    ) -> Self {
        ErrorKind::CorruptRecord {
            path: path.as_ref().to_path_buf(),
            index,
            detail: detail.into(),
        }
        .into()
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        ErrorKind::InvalidArgument {
            message: message.into(),
        }
        .into()
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error(Box::new(kind))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

/// Which record contract a store follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// Every record has the schema's `item_shape`.
    Dense,
    /// Every record has the schema's rank and its own dimension lengths.
    Ragged,
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreKind::Dense => "dense",
            StoreKind::Ragged => "ragged",
        })
    }
}

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An operating-system I/O error on a file of a store.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// `create` was given a path that already exists.
    #[error("{}: path already exists; a store is always created at a new path", path.display())]
    AlreadyExists {
        /// The refused path.
        path: PathBuf,
    },
    /// `open` was given a path that holds no store (no `meta.zr`).
    #[error("{}: no store here (meta.zr is missing)", path.display())]
    NotAStore {
        /// The path that was opened.
        path: PathBuf,
    },
    /// The store's writer never closed it, so it was never published.
    #[error("{}: store was never published (its writer did not close it); rebuild it", path.display())]
    NotPublished {
        /// The store directory.
        path: PathBuf,
    },
    /// Another handle holds a conflicting lock on the store.
    #[error("{}: store is busy (a writer holds it, or a writer was refused because readers hold it)", path.display())]
    Busy {
        /// The store directory.
        path: PathBuf,
    },
    /// Store-level metadata is malformed: header, schema, tails, shard files, dictionary.
    #[error("{}: corrupt store: {detail}", path.display())]
    Corrupt {
        /// The store directory or file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// One record's location or payload is malformed.
    #[error("{}: record {index}: {detail}", path.display())]
    CorruptRecord {
        /// The store directory.
        path: PathBuf,
        /// The logical record index.
        index: u64,
        /// What is wrong.
        detail: String,
    },
    /// The store holds a different element type than the one asked for.
    #[error("{}: element type mismatch: store holds {found}, caller asked for {expected}", path.display())]
    DTypeMismatch {
        /// The store directory.
        path: PathBuf,
        /// The type the caller asked for.
        expected: DType,
        /// The type the store holds.
        found: DType,
    },
    /// The store follows the other record contract.
    #[error("{}: store is {found}, opened as {expected}", path.display())]
    KindMismatch {
        /// The store directory.
        path: PathBuf,
        /// The contract the caller asked for.
        expected: StoreKind,
        /// The contract the store follows.
        found: StoreKind,
    },
    /// The schema names an element type loaderx does not support.
    #[error("unsupported element type {dtype:?}")]
    UnsupportedDType {
        /// The NumPy dtype string.
        dtype: String,
    },
    /// An appended batch or record has the wrong shape.
    #[error("record {index}: shape {found:?} does not fit the store ({expected})")]
    ShapeMismatch {
        /// Index of the record within the appended batch.
        index: usize,
        /// What the store requires, in words.
        expected: String,
        /// The shape that was given.
        found: Vec<usize>,
    },
    /// A record index is past the end of the store.
    #[error("{}: record index {index} out of range for a store of length {len}", path.display())]
    IndexOutOfRange {
        /// The store directory.
        path: PathBuf,
        /// The offending index.
        index: u64,
        /// The store length.
        len: u64,
    },
    /// A destination buffer has the wrong size or alignment.
    #[error("destination buffer: {detail}")]
    Buffer {
        /// What is wrong.
        detail: String,
    },
    /// A writer failed earlier and can no longer append or publish.
    #[error("{}: an earlier append failed; this build cannot be published, rebuild it", path.display())]
    WriterFailed {
        /// The store directory.
        path: PathBuf,
    },
    /// Dictionary training failed or its input was unusable.
    #[error("dictionary training: {detail}")]
    Dictionary {
        /// What went wrong.
        detail: String,
    },
    /// A loader could not gather a stream's batch.
    #[error("step {step}: stream {stream:?}: {source}")]
    Gather {
        /// The step whose batch failed.
        step: u64,
        /// The stream.
        stream: String,
        /// What went wrong.
        source: Error,
    },
    /// A loader's transform returned an error.
    #[error("step {step}: transform failed: {source}")]
    Transform {
        /// The step whose batch failed.
        step: u64,
        /// The transform's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A loader worker panicked (in the transform or a staging hook).
    #[error("step {step}: loader worker panicked: {message}")]
    WorkerPanicked {
        /// The step being produced.
        step: u64,
        /// The panic message, when it was a string.
        message: String,
    },
    /// Any other invalid argument: bad option, empty batch, zero-byte or oversized record.
    #[error("{message}")]
    InvalidArgument {
        /// What is wrong.
        message: String,
    },
}
