//! One local parquet file as a table of a split: its footer and every page
//! header checked before the parquet crate sizes a buffer from them, its
//! rows read in batches sized by what they decode to.

use std::fs::File;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};

use super::source_file::{SourceFile, check_footer, check_pages};
use crate::error::Error;
use crate::table::convert::{panic_message, source_error};
use crate::table::{Scan, Sizing, TableSource};

/// A parquet file, its metadata read and checked.
pub(crate) struct ParquetFile {
    path: PathBuf,
    label: String,
    pub(crate) meta: ArrowReaderMetadata,
    /// The one row group read, when not the whole file (a lazily converted
    /// dataset's part).
    row_group: Option<usize>,
}

impl ParquetFile {
    /// Opens `path` (named `label` in messages) and checks its footer and
    /// page headers.
    pub(crate) fn open(path: &Path, label: &str) -> Result<ParquetFile, Error> {
        ParquetFile::open_pages(path, label, Pages::All)
    }

    /// Opens `path` as a table of its row group `group` alone: the footer,
    /// and the page headers of that row group only, are checked; no other
    /// row group's bytes are read (a file whose other row groups are holes
    /// reads as well).
    pub(crate) fn open_row_group(
        path: &Path,
        label: &str,
        group: usize,
    ) -> Result<ParquetFile, Error> {
        let file = ParquetFile::open_pages(path, label, Pages::Group(group))?;
        if group >= file.meta.metadata().num_row_groups() {
            return Err(source_error(
                label,
                format!(
                    "no row group {group}: the file has {}",
                    file.meta.metadata().num_row_groups()
                ),
            ));
        }
        Ok(ParquetFile {
            row_group: Some(group),
            ..file
        })
    }

    /// The metadata of `path`, its footer checked; no page is read (a
    /// file of which only the footer is there reads as well).
    pub(crate) fn open_footer(path: &Path, label: &str) -> Result<ArrowReaderMetadata, Error> {
        Ok(ParquetFile::open_pages(path, label, Pages::None)?.meta)
    }

    fn open_pages(path: &Path, label: &str, pages: Pages) -> Result<ParquetFile, Error> {
        let file = File::open(path)
            .and_then(SourceFile::new)
            .map_err(|e| Error::io(path, e))?;
        // The footer walked before the parquet crate decodes it.
        guard(label, || check_footer(&file))?
            .map_err(|e| source_error(label, format!("malformed parquet file: {e}")))?;
        let meta = guard(label, || {
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
        })?
        .map_err(|e| source_error(label, format!("not a readable parquet file: {e}")))?;
        // Every page checked before the parquet crate sizes a buffer from it.
        let only = match pages {
            Pages::All => Some(None),
            Pages::Group(g) => Some(Some(g)),
            Pages::None => None,
        };
        if let Some(only) = only {
            guard(label, || check_pages(&file, meta.metadata(), only))?
                .map_err(|e| source_error(label, format!("malformed parquet file: {e}")))?;
        }
        // The row count parts are cut by: the footer's, which must be its
        // row groups' (a file stating 0 would be skipped, its rows lost).
        let declared = meta.metadata().file_metadata().num_rows();
        let groups: i64 = meta
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .try_fold(0i64, |a, n| (n >= 0).then(|| a.checked_add(n)).flatten())
            .unwrap_or(-1);
        if declared < 0 || declared != groups {
            return Err(source_error(
                label,
                format!(
                    "malformed parquet file: the footer declares {declared} rows, its row \
                     groups hold {groups}"
                ),
            ));
        }
        Ok(ParquetFile {
            path: path.to_path_buf(),
            label: label.to_owned(),
            meta,
            row_group: None,
        })
    }

    /// The rows its footer declares (its row group's, for a file opened
    /// as one row group).
    pub(crate) fn rows(&self) -> u64 {
        let rows = match self.row_group {
            Some(g) => self.meta.metadata().row_group(g).num_rows(),
            None => self.meta.metadata().file_metadata().num_rows(),
        };
        u64::try_from(rows).unwrap_or(0)
    }

    /// The file's rows (only `columns`, when given; only the `limit` rows
    /// from row `first` on, when `rows` is `Some((first, limit))`) in
    /// batches of about `target` decoded bytes each, counting
    /// `extra_row_bytes` more per row for what a row decodes to later
    /// (pixels, samples), and at most `max_rows` rows.
    pub(crate) fn batches<'a>(
        &'a self,
        target: usize,
        extra_row_bytes: usize,
        max_rows: usize,
        columns: Option<&'a [usize]>,
        rows: Option<(usize, usize)>,
    ) -> Batches<'a> {
        Batches {
            file: self,
            columns,
            first: rows.map_or(0, |(first, _)| first),
            limit: rows.map(|(_, limit)| limit),
            target: target.max(1),
            extra_row_bytes,
            max_rows: max_rows.max(1),
            rows: 1,
            done: 0,
            grown: 0,
            reader: None,
            finished: false,
        }
    }

    /// A reader of the rows from `offset` on (at most `limit` of them),
    /// `rows` at a time.
    fn reader(
        &self,
        rows: usize,
        offset: usize,
        limit: Option<usize>,
        columns: Option<&[usize]>,
    ) -> Result<ParquetRecordBatchReader, Error> {
        let file = File::open(&self.path)
            .and_then(SourceFile::new)
            .map_err(|e| Error::io(&self.path, e))?;
        guard(&self.label, || {
            let mut builder =
                ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.meta.clone())
                    .with_batch_size(rows)
                    .with_offset(offset);
            if let Some(g) = self.row_group {
                builder = builder.with_row_groups(vec![g]);
            }
            if let Some(limit) = limit {
                builder = builder.with_limit(limit);
            }
            if let Some(columns) = columns {
                let mask = ProjectionMask::roots(builder.parquet_schema(), columns.iter().copied());
                builder = builder.with_projection(mask);
            }
            builder.build()
        })?
        .map_err(|e| source_error(&self.label, format!("cannot read: {e}")))
    }
}

/// Which page headers an open checks.
enum Pages {
    /// Every row group's.
    All,
    /// One row group's.
    Group(usize),
    /// None: only the footer is read.
    None,
}

/// How many times a reader is rebuilt to read larger batches, per file (a
/// rebuilt reader skips the rows already read again).
const MAX_GROWTH: u32 = 4;

/// The batches of one file, sized by the bytes they actually decode to
/// (never by the file's own statistics, which it may state falsely): the
/// first batch is one row; whenever a batch comes out more than twice the
/// target, or (a few times) under a quarter of it, the reader is rebuilt
/// at the measured size from the next row on.
pub(crate) struct Batches<'a> {
    file: &'a ParquetFile,
    columns: Option<&'a [usize]>,
    /// The first row of the file to read.
    first: usize,
    /// How many rows to read from `first` on (all when `None`).
    limit: Option<usize>,
    target: usize,
    extra_row_bytes: usize,
    max_rows: usize,
    /// Rows per batch of the current reader.
    rows: usize,
    /// Rows read so far.
    done: usize,
    /// Times the batch size grew.
    grown: u32,
    reader: Option<ParquetRecordBatchReader>,
    finished: bool,
}

impl Batches<'_> {
    /// Resizes the batches after `batch` (of `n` rows) when it was far
    /// from the target.
    fn resize(&mut self, batch: &RecordBatch) {
        let n = batch.num_rows();
        if n == 0 {
            return;
        }
        let per_row = (batch.get_array_memory_size() / n)
            .saturating_add(self.extra_row_bytes)
            .max(1);
        let ideal = (self.target / per_row).clamp(1, self.max_rows);
        let shrink = ideal < self.rows / 2;
        let grow =
            n == self.rows && ideal >= self.rows.saturating_mul(4) && self.grown < MAX_GROWTH;
        if shrink || grow {
            self.grown += u32::from(grow);
            self.rows = ideal;
            self.reader = None;
        }
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<RecordBatch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished || self.limit.is_some_and(|l| self.done >= l) {
            return None;
        }
        let reader = match self.reader.take() {
            Some(r) => r,
            None => match self.file.reader(
                self.rows,
                self.first + self.done,
                self.limit.map(|l| l - self.done),
                self.columns,
            ) {
                Ok(r) => r,
                Err(e) => {
                    self.finished = true;
                    return Some(Err(e));
                }
            },
        };
        let reader = self.reader.insert(reader);
        let file = self.file;
        let label = &file.label;
        match guard(label, || reader.next()) {
            Ok(None) => {
                self.finished = true;
                None
            }
            Ok(Some(Ok(batch))) => {
                self.done += batch.num_rows();
                self.resize(&batch);
                Some(Ok(batch))
            }
            Ok(Some(Err(e))) => {
                self.finished = true;
                Some(Err(source_error(label, format!("cannot decode: {e}"))))
            }
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}

/// Runs `f`, a call into the parquet crate on the bytes of file `label`: a
/// panic there (a malformed file the crate does not check) becomes an
/// error naming the file.
fn guard<T>(label: &str, f: impl FnOnce() -> T) -> Result<T, Error> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        source_error(
            label,
            format!(
                "the parquet reader failed on this malformed file (it panicked: {})",
                panic_message(panic.as_ref())
            ),
        )
    })
}

impl TableSource for ParquetFile {
    fn label(&self) -> &str {
        &self.label
    }

    fn schema(&self) -> SchemaRef {
        self.meta.schema().clone()
    }

    fn rows(&self) -> u64 {
        ParquetFile::rows(self)
    }

    fn scan<'a>(
        &'a self,
        columns: &'a [usize],
        rows: Option<(usize, usize)>,
        sizing: Sizing,
    ) -> Scan<'a> {
        Box::new(self.batches(
            sizing.target_bytes,
            sizing.extra_row_bytes,
            sizing.max_rows,
            Some(columns),
            rows,
        ))
    }
}
