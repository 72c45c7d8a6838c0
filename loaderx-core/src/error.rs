//! The error type shared by every part of `loaderx-core`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::dtype::DType;

/// The message a panic carried (a `&str` or `String` payload), if any.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
}

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

    /// The store, file or directory the error is about, when there is one
    /// (for a loader's `Gather` error, the stream's store).
    pub fn path(&self) -> Option<&Path> {
        match &*self.0 {
            ErrorKind::Io { path, .. }
            | ErrorKind::AlreadyExists { path }
            | ErrorKind::NotAStore { path }
            | ErrorKind::NotPublished { path }
            | ErrorKind::Busy { path }
            | ErrorKind::Corrupt { path, .. }
            | ErrorKind::CorruptRecord { path, .. }
            | ErrorKind::DTypeMismatch { path, .. }
            | ErrorKind::KindMismatch { path, .. }
            | ErrorKind::IndexOutOfRange { path, .. }
            | ErrorKind::WriterFailed { path }
            | ErrorKind::Remote { path, .. }
            | ErrorKind::LazyPart { path, .. }
            | ErrorKind::ClassNames { path, .. } => Some(path),
            ErrorKind::PushFailed { path, .. } => Some(path),
            ErrorKind::Gather { error, .. } => error.path(),
            _ => None,
        }
    }

    /// The record index the error is about, when there is one: a corrupt
    /// record, an index out of range, an image that cannot be decoded, or
    /// (for a loader's `Gather` or `Transform` error) the record of the
    /// error inside.
    pub fn record(&self) -> Option<u64> {
        match &*self.0 {
            ErrorKind::CorruptRecord { index, .. } | ErrorKind::IndexOutOfRange { index, .. } => {
                Some(*index)
            }
            ErrorKind::Remote { record, .. } | ErrorKind::Image { record, .. } => *record,
            ErrorKind::Gather { error, .. } => error.record(),
            ErrorKind::Transform { error, .. } => error.downcast_ref::<Error>()?.record(),
            _ => None,
        }
    }

    pub(crate) fn io(path: impl AsRef<Path>, error: io::Error) -> Self {
        ErrorKind::Io {
            path: path.as_ref().to_path_buf(),
            error,
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

/// The message of an error already holds its cause's (an I/O error, a failed
/// gather, a transform's error), so `source` returns `None`: a report that
/// walks the chain (`anyhow`'s `{:#}`, `eyre`) prints each cause once, as
/// with `csv::Error`. The causes themselves are fields of [`ErrorKind`].
impl std::error::Error for Error {}

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
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error (its message is part of this one's).
        error: io::Error,
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
    /// A loader column follows the other record contract than the call
    /// needs (e.g. a Ragged column where a Dense one is converted).
    #[error("column is {found}, expected {expected}")]
    ColumnKind {
        /// The contract the call needs.
        expected: StoreKind,
        /// The contract the column follows.
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
    #[error("step {step}: stream {stream:?}: {error}")]
    Gather {
        /// The step whose batch failed.
        step: u64,
        /// The stream.
        stream: String,
        /// What went wrong (its message is part of this one's).
        error: Error,
    },
    /// A lazily converted dataset's part could not be converted
    /// ([`lazy`](crate::lazy)).
    #[error("{}: part {part} could not be converted: {error}", path.display())]
    LazyPart {
        /// The source (its URL, redacted).
        path: PathBuf,
        /// The part (a row group of the source's files, in order).
        part: u64,
        /// What the source's conversion returned.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A loader's transform returned an error.
    #[error("step {step}: transform failed: {error}")]
    Transform {
        /// The step whose batch failed.
        step: u64,
        /// The transform's error (its message is part of this one's).
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The loader could not start one of its worker threads (the process or
    /// its cgroup is out of threads or memory).
    #[error("cannot start loader worker thread {worker}: {error}")]
    WorkerSpawn {
        /// Which worker (0-based).
        worker: usize,
        /// The operating system's error (its message is part of this one's).
        error: io::Error,
    },
    /// A loader worker panicked (in the transform or a staging hook).
    #[error("step {step}: loader worker panicked: {message}")]
    WorkerPanicked {
        /// The step being produced.
        step: u64,
        /// The panic message, when it was a string.
        message: String,
    },
    /// An encoded image (feature `vision`) could not be decoded or
    /// augmented: not a JPEG, PNG or WebP, corrupt, truncated, over the pixel
    /// limit, or of a mode that is not decoded.
    #[error("{}{}{detail}", stream.as_ref().map(|s| format!("stream {s:?}: ")).unwrap_or_default(), record.map(|i| format!("record {i}: ")).unwrap_or_default())]
    Image {
        /// The loader stream the image belongs to, when it is one's.
        stream: Option<String>,
        /// The record's index in its store, when known.
        record: Option<u64>,
        /// What is wrong with the image.
        detail: String,
    },
    /// `DataLoaderBuilder::augment`
    /// (feature `vision`) names a stream that does not hold encoded images:
    /// a Dense stream, a stream of another element type than `u8`, or a
    /// Ragged `u8` stream whose first record is not a JPEG, PNG or WebP file
    /// (decoded pixels, say). Refused by `build()`.
    #[error(
        "augment({stream:?}): {detail}; augment takes encoded JPEG, PNG or WebP files: convert \
         with --encoded (the default for images of several sizes)"
    )]
    NotEncodedImages {
        /// The stream.
        stream: String,
        /// What the stream holds.
        detail: String,
    },
    /// A value does not fit the type it is converted to (see
    /// [`host::widen`](crate::adapter::widen) and
    /// [`host::check_values`](crate::adapter::check_values)): a `u64` above
    /// `i64::MAX` for `i64`, an integer outside a narrower integer type, or a
    /// `bool` byte other than 0 and 1.
    #[error("{dtype} value {value} does not fit {target}")]
    OutOfRange {
        /// The stored element type.
        dtype: DType,
        /// The value, as text.
        value: String,
        /// The type it was converted to.
        target: DType,
    },
    /// Any other invalid argument: bad option, empty batch, zero-byte or oversized record.
    #[error("{message}")]
    InvalidArgument {
        /// What is wrong.
        message: String,
    },
    /// A request to an object store failed after its retries: the network,
    /// the service or the credentials (feature `remote`).
    #[error("{}{}: {detail}", path.display(), record.map(|i| format!(": record {i}")).unwrap_or_default())]
    Remote {
        /// The URL of the object (a store URL followed by its file name).
        path: PathBuf,
        /// The record being read, when the request served a gather.
        record: Option<u64>,
        /// What failed, with the object store's message.
        detail: String,
    },
    /// A split's class-name file ([`CLASSES_FILE`](crate::CLASSES_FILE))
    /// is malformed.
    #[error("{}{}: {detail}", path.display(), line.zip(*column).map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
    ClassNames {
        /// The file.
        path: PathBuf,
        /// The line (from 1) where its JSON breaks, when it does not parse.
        line: Option<usize>,
        /// The column (from 1) where its JSON breaks, when it does not parse.
        column: Option<usize>,
        /// What is wrong.
        detail: String,
    },
    /// A push of one or more stores failed after it had started uploading
    /// (feature `remote`); `remains` says exactly which objects it left
    /// behind. No `meta.zr` it wrote is left unless `remains` says so.
    #[error("{error}; {remains}")]
    PushFailed {
        /// The URL of the store whose upload failed.
        path: PathBuf,
        /// What failed (its message is part of this one's).
        error: Error,
        /// What the failed push left on the object store.
        remains: String,
    },
}

/// An [`ErrorKind::Image`] error.
#[cfg_attr(not(feature = "vision"), allow(dead_code))]
pub(crate) fn image_error(
    stream: Option<&str>,
    record: Option<u64>,
    detail: impl Into<String>,
) -> Error {
    ErrorKind::Image {
        stream: stream.map(str::to_owned),
        record,
        detail: detail.into(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message in an error's chain, as chain reporters print them.
    fn chain(e: &dyn std::error::Error) -> Vec<String> {
        let mut out = vec![e.to_string()];
        let mut at = e.source();
        while let Some(cause) = at {
            out.push(cause.to_string());
            at = cause.source();
        }
        out
    }

    #[test]
    fn a_report_prints_each_cause_once() {
        let io = io::Error::other("disk on fire");
        let inner = Error::io("/store/data_0.zr", io);
        let outer: Error = ErrorKind::Gather {
            step: 7,
            stream: "image".into(),
            error: inner,
        }
        .into();
        let report = chain(&outer).join(": ");
        assert_eq!(report.matches("disk on fire").count(), 1, "{report}");
        assert_eq!(report.matches("data_0.zr").count(), 1, "{report}");
        assert!(report.starts_with("step 7: stream \"image\""), "{report}");
        // The same through the kind, which is an error type of its own.
        let kind_report = chain(outer.kind()).join(": ");
        assert_eq!(
            kind_report.matches("disk on fire").count(),
            1,
            "{kind_report}"
        );

        assert_eq!(outer.path(), Some(Path::new("/store/data_0.zr")));
        assert_eq!(outer.record(), None);
        let rec = Error::corrupt_record("/s", 12, "bad frame");
        assert_eq!(
            (rec.path(), rec.record()),
            (Some(Path::new("/s")), Some(12))
        );

        let t: Error = ErrorKind::Transform {
            step: 1,
            error: "bad pixel".into(),
        }
        .into();
        assert_eq!(chain(&t).join(": ").matches("bad pixel").count(), 1);
    }
}
