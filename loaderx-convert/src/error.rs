//! The error type of every converter.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A specialised `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while converting a dataset.
///
/// Each variant carries the context a user needs to act: the path, the
/// dataset and split, the column, the row.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Writing or closing a store failed.
    #[error(transparent)]
    Store(#[from] loaderx_core::Error),
    /// An operating-system I/O error.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error (its message is part of this one's, so it
        /// is not also returned by `source()`: a report prints it once).
        error: io::Error,
    },
    /// The output root, or the part a part writer writes, already exists;
    /// converters always write a new one and never replace one.
    #[error(
        "{}: path already exists; a conversion writes a new output root and never replaces or adds to one: remove it, or give another `-o OUT` (a part is written once: remove it to write it again)",
        path.display()
    )]
    AlreadyExists {
        /// The refused path.
        path: PathBuf,
    },
    /// Another writer of the same part is running: it holds the part's lock
    /// file ([`PartLock`](crate::output::PartLock)).
    #[error(
        "{}: another writer of {part} is running (it holds this lock); a part is written by one writer at a time",
        path.display()
    )]
    PartBusy {
        /// The lock file.
        path: PathBuf,
        /// The part's name (`part-00001`).
        part: String,
    },
    /// A name taken from the source (split, config, column, file) is not a
    /// plain path component and could escape the output root.
    #[error(
        "{kind} name {name:?} is not a plain directory name; refusing to write outside the output root"
    )]
    UnsafeName {
        /// What the name names (`split`, `column`, ...).
        kind: &'static str,
        /// The refused name.
        name: String,
    },
    /// A bad option or combination of options.
    #[error("{message}")]
    InvalidOption {
        /// What is wrong.
        message: String,
    },
    /// An IDX file is malformed, or the IDX files of a directory disagree.
    #[error("{}: {detail}", path.display())]
    Idx {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A `.npy` file or `.npz` archive is malformed (truncated data, a shape
    /// that overflows), holds an element type no store holds (object,
    /// string, structured, datetime, long double), or disagrees with the
    /// other arrays of a conversion in length or stream name.
    #[error("{}: {detail}", path.display())]
    Npy {
        /// The file (for a member of an `.npz`, the archive; the detail
        /// names the member).
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The Hub could not be reached, refused a request, or answered with
    /// something unusable.
    #[error("{repo}: {detail}")]
    Hub {
        /// The dataset (or model) repo id.
        repo: String,
        /// What went wrong (never the token).
        detail: String,
    },
    /// The dataset's files or card do not say what to convert: no parquet
    /// files, several configs and none chosen, an unreadable card.
    #[error("{repo}: {detail}")]
    Layout {
        /// The dataset repo id.
        repo: String,
        /// What is wrong.
        detail: String,
    },
    /// The requested config does not exist.
    #[error("{repo}: no config {config:?} with parquet files (configs: {})", available.join(", "))]
    UnknownConfig {
        /// The dataset repo id.
        repo: String,
        /// The config asked for.
        config: String,
        /// The configs there are.
        available: Vec<String>,
    },
    /// The requested split does not exist in the config.
    #[error("{repo}: config {config:?} has no split {split:?} (splits: {})", available.join(", "))]
    UnknownSplit {
        /// The dataset repo id.
        repo: String,
        /// The config.
        config: String,
        /// The split asked for.
        split: String,
        /// The splits there are.
        available: Vec<String>,
    },
    /// A column named in a selection does not exist.
    #[error("{context}: {flag} names no column {column:?} (columns: {})", available.join(", "))]
    UnknownColumn {
        /// Dataset and split, e.g. `owner/name@sha split "train"`.
        context: String,
        /// The option that named it (`--columns` or `--drop`).
        flag: &'static str,
        /// The unknown name.
        column: String,
        /// The columns there are.
        available: Vec<String>,
    },
    /// A parquet file of the source cannot be read or disagrees with the others.
    #[error("{file}: {detail}")]
    Source {
        /// The file, as named in the repo.
        file: String,
        /// What is wrong.
        detail: String,
    },
    /// A column (or one of its rows) cannot be converted losslessly.
    #[error("{context}: column {column:?}: {}{detail}", row.map(|r| format!("row {r}: ")).unwrap_or_default())]
    Column {
        /// Dataset and split, e.g. `owner/name@sha split "train"`.
        context: String,
        /// The column.
        column: String,
        /// The split row, when one row is at fault.
        row: Option<u64>,
        /// What is wrong, and which option would help where one does.
        detail: String,
    },
    /// A tokenizer could not be loaded or failed on a record.
    #[error("tokenizer {reference}: {detail}")]
    Tokenizer {
        /// The tokenizer file or Hub model repo.
        reference: String,
        /// What went wrong.
        detail: String,
    },
}

impl Error {
    /// A [`Error::Source`] at `line` of the file `label` (1-based, as an
    /// editor counts): `line 7: detail`.
    #[cfg(feature = "arrow")]
    pub(crate) fn at_line(label: &str, line: u64, detail: impl fmt::Display) -> Self {
        Error::Source {
            file: label.to_owned(),
            detail: format!("line {line}: {detail}"),
        }
    }

    pub(crate) fn io(path: impl AsRef<Path>, error: io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            error,
        }
    }

    pub(crate) fn invalid(message: impl fmt::Display) -> Self {
        Error::InvalidOption {
            message: message.to_string(),
        }
    }
}
