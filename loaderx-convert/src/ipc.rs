//! Arrow IPC files (`.arrow`/`.feather` v2, with a footer) and Arrow IPC
//! streams (no footer: what `datasets.Dataset.save_to_disk` writes) as
//! tables of a split.
//!
//! Opening a table reads its schema and counts its rows (every batch's
//! header is read, no column is decoded). A scan decodes only the columns
//! asked for; an IPC file's scan starts at the batch holding its first
//! row. A panic inside the Arrow reader on a malformed file is an error
//! naming the file.

use std::fs::File;
use std::io::{BufReader, Read};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_schema::SchemaRef;
use serde_json::Value;

use crate::error::Error;
use crate::table::convert::{panic_message, source_error};
use crate::table::{Scan, Sizing, TableSource};

/// The first bytes of an Arrow IPC file (a stream starts otherwise).
const FILE_MAGIC: &[u8; 6] = b"ARROW1";

/// The last bytes of a complete Arrow IPC stream: a continuation marker
/// and a zero message length.
const END_OF_STREAM: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];

/// Runs `f`, a call into the Arrow IPC reader on file `label`: a panic
/// there becomes an error naming the file.
fn guard<T>(label: &str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(source_error(
            label,
            format!(
                "the Arrow IPC reader failed on this malformed file (it panicked: {})",
                panic_message(panic.as_ref())
            ),
        ))
    })
}

/// One Arrow IPC file or stream.
pub(crate) struct IpcTable {
    path: PathBuf,
    label: String,
    schema: SchemaRef,
    /// True for the file format (with a footer), false for a stream.
    file_format: bool,
    /// Rows of each batch, in order.
    batch_rows: Vec<u64>,
    /// `features` given by the source (a `save_to_disk` directory's
    /// `dataset_info.json`), overriding the schema's metadata.
    features: Option<Value>,
}

enum Reader {
    File(FileReader<BufReader<File>>),
    Stream(StreamReader<BufReader<File>>),
}

impl Reader {
    fn next_batch(&mut self) -> Option<Result<RecordBatch, arrow_schema::ArrowError>> {
        match self {
            Reader::File(r) => r.next(),
            Reader::Stream(r) => r.next(),
        }
    }

    fn schema(&self) -> SchemaRef {
        match self {
            Reader::File(r) => r.schema(),
            Reader::Stream(r) => RecordBatchReader::schema(r),
        }
    }
}

impl IpcTable {
    /// Opens `path` (named `label` in messages): reads its schema and the
    /// row count of every batch.
    pub(crate) fn open(path: &Path, label: &str) -> Result<IpcTable, Error> {
        let mut magic = [0u8; 6];
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        let n = read_up_to(&mut file, &mut magic).map_err(|e| Error::io(path, e))?;
        let file_format = n == magic.len() && &magic == FILE_MAGIC;
        if !file_format {
            // A stream has no footer: only its end-of-stream marker tells a
            // complete stream from one cut at a batch boundary.
            use std::io::{Seek, SeekFrom};
            let mut end = [0u8; 8];
            let len = file
                .seek(SeekFrom::End(0))
                .map_err(|e| Error::io(path, e))?;
            let complete = len >= 8
                && file
                    .seek(SeekFrom::End(-8))
                    .and_then(|_| file.read_exact(&mut end).map(|()| end))
                    .map_err(|e| Error::io(path, e))?
                    == END_OF_STREAM;
            if !complete {
                return Err(source_error(
                    label,
                    "not a complete Arrow IPC file or stream (no file footer, and no \
                     end-of-stream marker: a stream cut short, or another kind of file)",
                ));
            }
        }
        let mut table = IpcTable {
            path: path.to_path_buf(),
            label: label.to_owned(),
            schema: SchemaRef::new(arrow_schema::Schema::empty()),
            file_format,
            batch_rows: Vec::new(),
            features: None,
        };
        table.schema = guard(label, || Ok(table.reader(None)?.schema()))?;
        let mut counter = table.reader(Some(Vec::new()))?;
        let mut rows = Vec::new();
        guard(label, || {
            while let Some(batch) = counter.next_batch() {
                let batch = batch.map_err(|e| {
                    source_error(label, format!("not a readable Arrow IPC file: {e}"))
                })?;
                rows.push(batch.num_rows() as u64);
            }
            Ok(())
        })?;
        table.batch_rows = rows;
        Ok(table)
    }

    /// Gives the table the Hugging Face `features` of its columns.
    pub(crate) fn with_features(mut self, features: Option<Value>) -> IpcTable {
        self.features = features;
        self
    }

    fn reader(&self, projection: Option<Vec<usize>>) -> Result<Reader, Error> {
        let file = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let file = BufReader::with_capacity(1 << 20, file);
        let label = &self.label;
        guard(label, || {
            let bad = |e: arrow_schema::ArrowError| {
                source_error(
                    label,
                    format!("not a readable Arrow IPC file or stream: {e}"),
                )
            };
            Ok(if self.file_format {
                Reader::File(FileReader::try_new(file, projection).map_err(bad)?)
            } else {
                Reader::Stream(StreamReader::try_new(file, projection).map_err(bad)?)
            })
        })
    }
}

/// Reads as many bytes as `buf` holds, or fewer at the end of the file.
fn read_up_to(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The batches of one scan of an IPC table.
struct IpcScan<'a> {
    table: &'a IpcTable,
    reader: Option<Reader>,
    /// Rows still to skip before the first wanted one.
    skip: u64,
    /// Rows still wanted.
    left: u64,
    max_rows: usize,
    /// About this many bytes per batch handed out, counting
    /// `extra_row_bytes` per row for what a row decodes to later.
    target_bytes: usize,
    extra_row_bytes: usize,
    /// The rest of the last batch read, handed out in batches of about
    /// `target_bytes` and at most `max_rows` rows.
    pending: Option<RecordBatch>,
    failed: bool,
}

impl Iterator for IpcScan<'_> {
    type Item = Result<RecordBatch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed || self.left == 0 {
                return None;
            }
            if let Some(batch) = self.pending.take() {
                let n = batch.num_rows().max(1);
                let per_row = (batch.get_array_memory_size() / n)
                    .saturating_add(self.extra_row_bytes)
                    .max(1);
                let rows = (self.target_bytes / per_row).clamp(1, self.max_rows);
                let take = batch.num_rows().min(rows);
                let take = take.min(usize::try_from(self.left).unwrap_or(usize::MAX));
                if take < batch.num_rows() {
                    self.pending = Some(batch.slice(take, batch.num_rows() - take));
                }
                self.left -= take as u64;
                return Some(Ok(batch.slice(0, take)));
            }
            let reader = self.reader.as_mut()?;
            let label = &self.table.label;
            let next = guard(label, || {
                reader
                    .next_batch()
                    .transpose()
                    .map_err(|e| source_error(label, format!("cannot decode a record batch: {e}")))
            });
            match next {
                Ok(Some(batch)) => {
                    let n = batch.num_rows() as u64;
                    if self.skip >= n {
                        self.skip -= n;
                        continue;
                    }
                    let from = self.skip as usize;
                    self.skip = 0;
                    self.pending = Some(batch.slice(from, batch.num_rows() - from));
                }
                Ok(None) => {
                    self.failed = true;
                    return Some(Err(source_error(
                        label,
                        format!("the file ended {} rows early", self.left),
                    )));
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl TableSource for IpcTable {
    fn label(&self) -> &str {
        &self.label
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn features(&self) -> Result<Option<Value>, String> {
        match &self.features {
            Some(f) => Ok(Some(f.clone())),
            None => crate::table::plan::hf_features(
                self.schema
                    .metadata()
                    .get("huggingface")
                    .map(String::as_str),
            ),
        }
    }

    fn rows(&self) -> u64 {
        self.batch_rows
            .iter()
            .fold(0u64, |a, &n| a.saturating_add(n))
    }

    fn scan<'a>(
        &'a self,
        columns: &'a [usize],
        rows: Option<(usize, usize)>,
        sizing: Sizing,
    ) -> Scan<'a> {
        let (first, count) = match rows {
            Some((first, count)) => (first as u64, count as u64),
            None => (0, self.rows()),
        };
        let mut skip = first;
        let reader = self.reader(Some(columns.to_vec())).and_then(|mut reader| {
            // An IPC file starts at the batch holding the first row.
            if let Reader::File(r) = &mut reader {
                let mut index = 0;
                while index < self.batch_rows.len() && skip >= self.batch_rows[index] {
                    skip -= self.batch_rows[index];
                    index += 1;
                }
                if index > 0 {
                    guard(&self.label, || {
                        r.set_index(index)
                            .map_err(|e| source_error(&self.label, format!("cannot seek: {e}")))
                    })?;
                }
            }
            Ok(reader)
        });
        match reader {
            Ok(reader) => Box::new(IpcScan {
                table: self,
                reader: Some(reader),
                skip,
                left: count,
                max_rows: sizing.max_rows.max(1),
                target_bytes: sizing.target_bytes.max(1),
                extra_row_bytes: sizing.extra_row_bytes,
                pending: None,
                failed: false,
            }),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }
}
