//! CSV and TSV files (`.csv`, `.tsv`, gzipped `.csv.gz`, `.tsv.gz`) to
//! Zrecord (feature `csv`).
//!
//! Every record of a file is one row; its fields are the columns, converted
//! by the table layer's rules ([`crate::table`]), as JSON Lines are
//! ([`crate::jsonl`]):
//!
//! | field values (inferred)                    | Arrow type | store                      |
//! |--------------------------------------------|------------|----------------------------|
//! | integers (`3`, `-12`)                      | `int64`    | Dense `i64` scalar         |
//! | numbers, some with a fraction or exponent  | `float64`  | Dense `f64` scalar         |
//! | `true` / `false` (any case)                | `bool`     | Dense `bool` scalar        |
//! | anything else                              | `string`   | Ragged `u8` bytes (`--text bytes`) or `u32` token ids (`--tokenizer`) |
//!
//! **The first record is the header** (the column names) unless
//! [`CsvOptions::header`] is off (`--no-header`): the columns are then
//! named `column_1`, `column_2`, ... A header field left empty (the index
//! column pandas' `to_csv` writes) is named the same way, by its position.
//! Every file of a split must have the same header.
//!
//! **Types are inferred** from the first [`CsvOptions::infer_rows`] rows
//! (default [`DEFAULT_INFER_ROWS`]) of a split's files, in order, ignoring
//! empty fields: a column whose values are all integer literals is `int64`,
//! all numbers `float64`, all `true`/`false` `bool`, else `string` (also a
//! column with no value in the sample). An integer literal that `int64`
//! cannot hold is an error: give the column's type instead, `uint64` or
//! `string`. **Types can be given** with [`CsvOptions::schema`]
//! (`--schema FILE`), the JSON object of [`jsonl::parse_schema`](crate::jsonl::parse_schema)
//! (`{"label": "int64", "score": "float32", "name": "string"}`, scalar
//! types only): the columns converted are the ones it names, in its
//! order, found by header name (without a header, it names every column,
//! in file order).
//!
//! **An empty field** is a null in a `bool` or numeric column, which the
//! table layer refuses unless rows holding one are dropped
//! ([`TableOptions::drop_null_rows`](crate::table::TableOptions::drop_null_rows),
//! `--drop-null-rows`); in a `string` column it is the empty string.
//!
//! **Format**: fields separated by [`CsvOptions::delimiter`] (default `,`,
//! and a tab for `.tsv` files), quoted with [`CsvOptions::quote`] (default
//! `"`; a quote inside a quoted field is doubled; quoted fields may hold
//! delimiters and line breaks), records ended by `\n` or `\r\n`; blank
//! lines and a UTF-8 byte order mark are skipped.
//!
//! **Errors name the file and line** (the physical line a record starts
//! on, counting the header and blank lines): a record with another number
//! of fields than the header, a value its column's type does not take, a
//! field that is not UTF-8, a record longer than
//! [`CsvOptions::max_record_bytes`] (an unclosed quote reads to the end of
//! the file); so do the table layer's messages about a row (a null). A
//! failed conversion leaves nothing at its output.
//!
//! Files are sorted into splits as [`crate::local`] does (files given, a
//! directory's subdirectories, split globs), taking files named `*.csv`,
//! `*.tsv`, `*.csv.gz` and `*.tsv.gz`; parts
//! ([`TableOptions::part`](crate::table::TableOptions::part)) cut a split
//! by rows. Opening a file counts its rows in one streaming pass; a scan
//! of a plain file seeks to its first row (an index of every 4096th row's
//! offset), a gzipped one decompresses up to it.
//!
//! ```no_run
//! use loaderx_convert::csv::{CsvOptions, convert_csv};
//! use loaderx_convert::local::LocalSource;
//! use loaderx_convert::table::TableOptions;
//!
//! // train.csv: "text,label\nhello,0\n..."; the texts as their bytes.
//! let source = LocalSource::new(["train.csv", "more.csv"])
//!     .options(TableOptions::new().text_bytes().drop_null_rows(true));
//! let summary = convert_csv(&source, &CsvOptions::new().infer_rows(5000), "stores")?;
//! println!("{summary}"); // train: ... records [text: ragged u8 (rank 1), label: dense i64 []]
//! # Ok::<(), loaderx_convert::Error>(())
//! ```

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_csv::reader::{Decoder, Format, ReaderBuilder};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use csv_core::ReadRecordResult;
use serde_json::Value;

use crate::error::Error;
use crate::local::{Kind, LocalSource, local_splits};
use crate::table::{Scan, Sizing, SplitTables, TableSource, TableSummary, convert_tables};

/// Rows sampled to infer a split's types, unless told otherwise.
pub const DEFAULT_INFER_ROWS: usize = 1000;
/// The longest record read, in bytes, unless told otherwise (64 MiB).
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 64 << 20;
/// A scan can start at every this many rows without parsing those before.
const INDEX_STRIDE: u64 = 4096;
/// Read buffer of a file.
const READ_BUFFER: usize = 1 << 20;
/// The UTF-8 byte order mark.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// The context of the table layer's messages (`csv split "train"`).
const CONTEXT: &str = "csv";

/// How CSV files are read: header, delimiter, quote, the types (inferred
/// or given) and the longest record; a builder.
#[derive(Debug, Clone)]
pub struct CsvOptions {
    header: bool,
    delimiter: Option<u8>,
    quote: u8,
    infer_rows: usize,
    max_record_bytes: u64,
    schema: Option<SchemaRef>,
}

impl Default for CsvOptions {
    fn default() -> CsvOptions {
        CsvOptions::new()
    }
}

impl CsvOptions {
    /// A header record, `,` between fields (a tab in `.tsv` files), `"`
    /// quotes, types inferred from the first [`DEFAULT_INFER_ROWS`] rows of
    /// each split, records of at most [`DEFAULT_MAX_RECORD_BYTES`].
    pub fn new() -> CsvOptions {
        CsvOptions {
            header: true,
            delimiter: None,
            quote: b'"',
            infer_rows: DEFAULT_INFER_ROWS,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            schema: None,
        }
    }

    /// Whether the first record of each file names the columns (default
    /// true); without one, the columns are `column_1`, `column_2`, ...
    pub fn header(mut self, header: bool) -> CsvOptions {
        self.header = header;
        self
    }

    /// The field delimiter, one ASCII byte, for every file (default: a tab
    /// for `.tsv` and `.tsv.gz` files, else `,`).
    pub fn delimiter(mut self, delimiter: u8) -> CsvOptions {
        self.delimiter = Some(delimiter);
        self
    }

    /// The quote, one ASCII byte (default `"`).
    pub fn quote(mut self, quote: u8) -> CsvOptions {
        self.quote = quote;
        self
    }

    /// Infers each split's types from its first `rows` rows (at least 1;
    /// default [`DEFAULT_INFER_ROWS`]).
    pub fn infer_rows(mut self, rows: usize) -> CsvOptions {
        self.infer_rows = rows;
        self
    }

    /// A record longer than `bytes` is an error naming its file and line
    /// (default [`DEFAULT_MAX_RECORD_BYTES`]).
    pub fn max_record_bytes(mut self, bytes: u64) -> CsvOptions {
        self.max_record_bytes = bytes;
        self
    }

    /// The columns to convert and their types, in order, instead of
    /// inferring them (see [`jsonl::parse_schema`](crate::jsonl::parse_schema);
    /// scalar types only).
    pub fn schema(mut self, schema: Schema) -> CsvOptions {
        self.schema = Some(Arc::new(schema));
        self
    }

    fn check(&self) -> Result<(), Error> {
        if self.infer_rows == 0 {
            return Err(Error::invalid("--infer-rows must be at least 1"));
        }
        if self.max_record_bytes == 0 {
            return Err(Error::invalid(
                "the longest CSV record must be at least 1 byte",
            ));
        }
        for (what, b) in [("delimiter", self.delimiter), ("quote", Some(self.quote))] {
            if let Some(b) = b
                && (!b.is_ascii() || b == b'\n' || b == b'\r')
            {
                return Err(Error::invalid(format!(
                    "the CSV {what} must be one ASCII character other than a line break"
                )));
            }
        }
        if self.delimiter == Some(self.quote) {
            return Err(Error::invalid("the CSV delimiter and quote must differ"));
        }
        if let Some(s) = &self.schema {
            if s.fields().is_empty() {
                return Err(Error::invalid("the given CSV schema names no column"));
            }
            for f in s.fields() {
                if !is_scalar(f.data_type()) {
                    return Err(Error::invalid(format!(
                        "the given CSV schema's column {:?}: the type {} is not read from CSV \
                         (bool, int8..int64, uint8..uint64, float16..float64, string)",
                        f.name(),
                        f.data_type()
                    )));
                }
            }
        }
        Ok(())
    }

    /// The delimiter of `path`'s fields.
    fn delimiter_of(&self, path: &Path) -> u8 {
        self.delimiter.unwrap_or_else(|| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().to_ascii_lowercase())
                .unwrap_or_default();
            if name.ends_with(".tsv") || name.ends_with(".tsv.gz") {
                b'\t'
            } else {
                b','
            }
        })
    }
}

/// True for a type read from a CSV field.
fn is_scalar(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Utf8
    )
}

fn read_err(label: &str, e: &std::io::Error) -> Error {
    Error::Source {
        file: label.to_owned(),
        detail: format!("cannot be read: {e}"),
    }
}

/// True for a gzipped file (by its name).
fn is_gzip(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// How one file's records are split: delimiter and quote.
#[derive(Debug, Clone, Copy)]
struct Dialect {
    delimiter: u8,
    quote: u8,
}

impl Dialect {
    fn core(self) -> csv_core::Reader {
        csv_core::ReaderBuilder::new()
            .delimiter(self.delimiter)
            .quote(self.quote)
            .build()
    }
}

/// Where a record starts: row `row` (from 0, the header not counted) is
/// on line `line`, at byte `offset` of the (decompressed) file.
#[derive(Debug, Clone, Copy)]
struct Mark {
    offset: u64,
    row: u64,
    line: u64,
}

/// The records of a file, one at a time, with the line each starts on;
/// never holds more than the limit of one record.
struct RecordReader<'a> {
    input: Box<dyn BufRead + 'a>,
    core: csv_core::Reader,
    label: &'a str,
    max: u64,
    /// The byte order mark's length (0 or 3), before `offset` 0.
    bom: u64,
    /// Bytes read (after the byte order mark, of the decompressed data).
    offset: u64,
    /// Line breaks read.
    newlines: u64,
    /// The last record's fields, and where each ends in `fields`.
    fields: Vec<u8>,
    ends: Vec<usize>,
    /// How many of `ends` the last record filled.
    count: usize,
    /// The line the last record started on.
    line: u64,
}

/// What reading a record found.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// A record ([`RecordReader::line`], [`RecordReader::len`] and
    /// [`RecordReader::field`] describe it).
    Record,
    /// The end of the file.
    End,
}

impl<'a> RecordReader<'a> {
    /// Reads `path` (gunzipped when its name ends in `.gz`).
    fn open(
        path: &Path,
        label: &'a str,
        dialect: Dialect,
        max: u64,
    ) -> Result<RecordReader<'a>, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let input: Box<dyn BufRead> = if is_gzip(path) {
            Box::new(BufReader::with_capacity(
                READ_BUFFER,
                flate2::read::MultiGzDecoder::new(BufReader::new(file)),
            ))
        } else {
            Box::new(BufReader::with_capacity(READ_BUFFER, file))
        };
        RecordReader::new(input, label, dialect, max)
    }

    /// Reads the records of `input`, past a byte order mark.
    fn new(
        mut input: Box<dyn BufRead + 'a>,
        label: &'a str,
        dialect: Dialect,
        max: u64,
    ) -> Result<RecordReader<'a>, Error> {
        let buf = input.fill_buf().map_err(|e| read_err(label, &e))?;
        let bom = buf.starts_with(UTF8_BOM);
        if bom {
            input.consume(UTF8_BOM.len());
        }
        Ok(RecordReader {
            input,
            core: dialect.core(),
            label,
            max,
            bom: if bom { UTF8_BOM.len() as u64 } else { 0 },
            offset: 0,
            newlines: 0,
            fields: vec![0; 1024],
            ends: vec![0; 64],
            count: 0,
            line: 0,
        })
    }

    /// Moves `path`'s reader to `mark` (a plain file seeks, a gzipped one
    /// decompresses up to it).
    fn seek_to(&mut self, path: &Path, dialect: Dialect, mark: Mark) -> Result<(), Error> {
        if mark.offset == 0 {
            return Ok(());
        }
        if is_gzip(path) {
            let skip = mark.offset - self.offset;
            let copied = std::io::copy(&mut (&mut self.input).take(skip), &mut std::io::sink())
                .map_err(|e| read_err(self.label, &e))?;
            if copied != skip {
                return Err(changed(self.label));
            }
        } else {
            let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
            file.seek(SeekFrom::Start(self.bom + mark.offset))
                .map_err(|e| Error::io(path, e))?;
            self.input = Box::new(BufReader::with_capacity(READ_BUFFER, file));
        }
        self.core = dialect.core();
        self.offset = mark.offset;
        self.newlines = mark.line.saturating_sub(1);
        Ok(())
    }

    /// Reads the next record, appending its bytes (with any blank lines
    /// before it) to `raw` when given.
    fn next(&mut self, mut raw: Option<&mut Vec<u8>>) -> Result<Next, Error> {
        let (mut nout, mut nend) = (0usize, 0usize);
        let mut len = 0u64;
        let mut started = false;
        loop {
            let input = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_err(self.label, &e)),
            };
            let (res, nin, out, end) =
                self.core
                    .read_record(input, &mut self.fields[nout..], &mut self.ends[nend..]);
            for &b in &input[..nin] {
                if !started && b != b'\n' && b != b'\r' {
                    started = true;
                    self.line = self.newlines + 1;
                }
                if b == b'\n' {
                    self.newlines += 1;
                }
            }
            if let Some(raw) = raw.as_deref_mut() {
                raw.extend_from_slice(&input[..nin]);
            }
            self.input.consume(nin);
            self.offset += nin as u64;
            if started {
                len += nin as u64;
            }
            nout += out;
            nend += end;
            if len > self.max {
                return Err(Error::at_line(
                    self.label,
                    self.line,
                    format!(
                        "a record longer than {} bytes (the longest read); is a quote left \
                         open?",
                        self.max
                    ),
                ));
            }
            match res {
                ReadRecordResult::InputEmpty => {}
                ReadRecordResult::OutputFull => {
                    let n = self.fields.len() * 2;
                    self.fields.resize(n, 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    let n = self.ends.len() * 2;
                    self.ends.resize(n, 0);
                }
                ReadRecordResult::Record => {
                    self.count = nend;
                    if !started {
                        self.line = self.newlines;
                    }
                    return Ok(Next::Record);
                }
                ReadRecordResult::End => return Ok(Next::End),
            }
        }
    }

    /// The number of fields of the last record.
    fn len(&self) -> usize {
        self.count
    }

    /// Field `i` of the last record.
    fn field(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.fields[start..self.ends[i]]
    }

    /// Field `i` of the last record as text.
    fn text(&self, i: usize) -> Result<&str, Error> {
        std::str::from_utf8(self.field(i)).map_err(|_| {
            Error::at_line(
                self.label,
                self.line,
                format!("field {} is not UTF-8 text", i + 1),
            )
        })
    }
}

fn changed(label: &str) -> Error {
    Error::Source {
        file: label.to_owned(),
        detail: "changed while it was read".into(),
    }
}

/// A file's columns: the header's names (or `column_<n>`), and the
/// number of fields every record must have.
fn read_header(
    path: &Path,
    label: &str,
    dialect: Dialect,
    options: &CsvOptions,
) -> Result<Vec<String>, Error> {
    let mut reader = RecordReader::open(path, label, dialect, options.max_record_bytes)?;
    if reader.next(None)? == Next::End {
        return Ok(Vec::new());
    }
    let mut names = Vec::with_capacity(reader.len());
    for i in 0..reader.len() {
        let name = if options.header {
            reader.text(i)?.to_owned()
        } else {
            String::new()
        };
        names.push(if name.is_empty() {
            format!("column_{}", i + 1)
        } else {
            name
        });
    }
    Ok(names)
}

/// A split's columns and how they are read.
#[derive(Debug, Clone)]
struct SplitSchema {
    /// Every column of the files, in file order.
    names: Vec<String>,
    /// The columns converted: their indices in the files, in order.
    keep: Vec<usize>,
    /// Their types (as `keep`).
    schema: SchemaRef,
    /// `Some(rows)` when inferred from that many rows.
    inferred: Option<usize>,
}

impl SplitSchema {
    /// A decoder of `dialect` records (no header) into batches of the kept
    /// columns.
    fn decoder(&self, dialect: Dialect, batch_rows: usize) -> Decoder {
        self.decoder_of(dialect, batch_rows, self.keep.clone())
    }

    fn decoder_of(&self, dialect: Dialect, batch_rows: usize, projection: Vec<usize>) -> Decoder {
        let mut fields: Vec<Field> = self
            .names
            .iter()
            .map(|n| Field::new(n, DataType::Utf8, true))
            .collect();
        for (f, &i) in self.schema.fields().iter().zip(&self.keep) {
            fields[i] = f.as_ref().clone();
        }
        let format = Format::default()
            .with_header(false)
            .with_delimiter(dialect.delimiter)
            .with_quote(dialect.quote);
        ReaderBuilder::new(Arc::new(Schema::new(fields)))
            .with_format(format)
            .with_batch_size(batch_rows.max(1))
            .with_projection(projection)
            .build_decoder()
    }

    /// `detail`, with a hint when the types were inferred.
    fn explain(&self, detail: impl fmt::Display) -> String {
        match self.inferred {
            Some(n) => format!(
                "{detail} (the types were inferred from the split's first {n} rows; raise \
                 --infer-rows or give them with --schema)"
            ),
            None => detail.to_string(),
        }
    }
}

/// What the sampled values of a column can all be read as.
#[derive(Debug, Clone, Copy)]
struct Candidates {
    any: bool,
    bool: bool,
    int: bool,
    float: bool,
}

impl Candidates {
    const ALL: Candidates = Candidates {
        any: false,
        bool: true,
        int: true,
        float: true,
    };

    fn data_type(self) -> DataType {
        match self {
            Candidates { any: false, .. } => DataType::Utf8,
            Candidates { bool: true, .. } => DataType::Boolean,
            Candidates { int: true, .. } => DataType::Int64,
            Candidates { float: true, .. } => DataType::Float64,
            _ => DataType::Utf8,
        }
    }
}

/// True for an integer literal: an optional sign, then digits.
fn is_integer_literal(s: &str) -> bool {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// True for text read as a float: a number with a digit, or a name of
/// NaN or infinity.
fn is_float(s: &str) -> bool {
    let named = matches!(
        s.trim_start_matches(['-', '+'])
            .to_ascii_lowercase()
            .as_str(),
        "nan" | "inf" | "infinity"
    );
    s.parse::<f64>().is_ok() && (named || s.bytes().any(|b| b.is_ascii_digit()))
}

/// Infers the types of a split's columns from its first rows.
fn infer_schema(
    files: &[(PathBuf, String, Dialect)],
    names: &[String],
    options: &CsvOptions,
) -> Result<SplitSchema, Error> {
    let mut columns = vec![Candidates::ALL; names.len()];
    // The first integer literal beyond int64 of each column, and where.
    let mut beyond: Vec<Option<(String, String, u64)>> = vec![None; names.len()];
    let mut sampled = 0usize;
    'files: for (path, label, dialect) in files {
        let mut reader = RecordReader::open(path, label, *dialect, options.max_record_bytes)?;
        if options.header && reader.next(None)? == Next::End {
            continue;
        }
        while sampled < options.infer_rows {
            if reader.next(None)? == Next::End {
                continue 'files;
            }
            check_width(&reader, names.len(), options.header)?;
            sampled += 1;
            for (i, c) in columns.iter_mut().enumerate() {
                let text = reader.text(i)?.trim();
                if text.is_empty() {
                    continue;
                }
                c.any = true;
                c.bool &= text.eq_ignore_ascii_case("true") || text.eq_ignore_ascii_case("false");
                let int = is_integer_literal(text);
                if int && beyond[i].is_none() && text.parse::<i64>().is_err() {
                    beyond[i] = Some((text.to_owned(), label.clone(), reader.line));
                }
                c.int &= int;
                c.float &= is_float(text);
            }
        }
        break;
    }
    if sampled == 0 {
        return Err(Error::Source {
            file: files
                .iter()
                .map(|(_, l, _)| l.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            detail: "holds no rows: nothing to infer the columns' types from (an empty file, or \
                     only a header?)"
                .into(),
        });
    }
    let fields: Vec<Field> = names
        .iter()
        .zip(&columns)
        .map(|(n, c)| Field::new(n, c.data_type(), true))
        .collect();
    // Inference never makes a column of an integer int64 cannot hold, nor
    // rounds one to a float64.
    for (f, big) in fields.iter().zip(&beyond) {
        if let Some((value, label, line)) = big
            && f.data_type().is_numeric()
        {
            return Err(Error::at_line(
                label,
                *line,
                format!(
                    "the column {:?} holds the integer {value}, beyond int64; give its type \
                     (uint64, float64 to round it, or string) with --schema",
                    f.name()
                ),
            ));
        }
    }
    check_unique(&fields, &files[0].1)?;
    Ok(SplitSchema {
        names: names.to_vec(),
        keep: (0..names.len()).collect(),
        schema: Arc::new(Schema::new(fields)),
        inferred: Some(sampled),
    })
}

/// Refuses two converted columns of one name.
fn check_unique(fields: &[Field], label: &str) -> Result<(), Error> {
    for (i, f) in fields.iter().enumerate() {
        if fields[..i].iter().any(|g| g.name() == f.name()) {
            return Err(Error::Source {
                file: label.to_owned(),
                detail: format!(
                    "the header names the column {:?} twice (--drop cannot tell them apart; \
                     rename one, or give the columns with --schema)",
                    f.name()
                ),
            });
        }
    }
    Ok(())
}

/// The columns a given schema picks out of a file's `names`.
fn given_schema(
    schema: &SchemaRef,
    names: &[String],
    label: &str,
    header: bool,
) -> Result<SplitSchema, Error> {
    let keep = if header {
        let mut keep = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            let found: Vec<usize> = (0..names.len())
                .filter(|&i| names[i] == *f.name())
                .collect();
            match found.as_slice() {
                [i] => keep.push(*i),
                [] => {
                    return Err(Error::Source {
                        file: label.to_owned(),
                        detail: format!(
                            "has no column {:?}, which the schema names (columns: {})",
                            f.name(),
                            names.join(", ")
                        ),
                    });
                }
                _ => {
                    return Err(Error::Source {
                        file: label.to_owned(),
                        detail: format!("the header names the column {:?} twice", f.name()),
                    });
                }
            }
        }
        keep
    } else {
        if names.len() != schema.fields().len() {
            return Err(Error::at_line(
                label,
                1,
                format!(
                    "{} fields, but the schema names {} columns (without a header, the schema \
                     names every column, in order)",
                    names.len(),
                    schema.fields().len()
                ),
            ));
        }
        (0..names.len()).collect()
    };
    let names = if header {
        names.to_vec()
    } else {
        schema.fields().iter().map(|f| f.name().clone()).collect()
    };
    Ok(SplitSchema {
        names,
        keep,
        schema: schema.clone(),
        inferred: None,
    })
}

/// Refuses a record whose number of fields is not `width`.
fn check_width(reader: &RecordReader<'_>, width: usize, header: bool) -> Result<(), Error> {
    if reader.len() == width {
        return Ok(());
    }
    Err(Error::at_line(
        reader.label,
        reader.line,
        format!(
            "{} fields, but {} has {width} (a quote left open, or a delimiter inside an \
             unquoted field?)",
            reader.len(),
            if header {
                "the header"
            } else {
                "the first record"
            },
        ),
    ))
}

/// One CSV file of a split.
struct CsvTable {
    path: PathBuf,
    label: String,
    dialect: Dialect,
    schema: SplitSchema,
    max_record_bytes: u64,
    rows: u64,
    marks: Vec<Mark>,
}

impl CsvTable {
    /// Opens `path` (named `label` in messages), counts its rows and checks
    /// every record's width.
    fn open(
        path: &Path,
        label: &str,
        dialect: Dialect,
        schema: SplitSchema,
        options: &CsvOptions,
    ) -> Result<CsvTable, Error> {
        let mut reader = RecordReader::open(path, label, dialect, options.max_record_bytes)?;
        if options.header {
            reader.next(None)?;
        }
        let width = schema.names.len();
        let mut rows = 0u64;
        let mut marks = Vec::new();
        loop {
            let offset = reader.offset;
            let newlines = reader.newlines;
            if reader.next(None)? == Next::End {
                break;
            }
            check_width(&reader, width, options.header)?;
            if rows.is_multiple_of(INDEX_STRIDE) {
                marks.push(Mark {
                    offset,
                    row: rows,
                    line: newlines + 1,
                });
            }
            rows += 1;
        }
        Ok(CsvTable {
            path: path.to_path_buf(),
            label: label.to_owned(),
            dialect,
            schema,
            max_record_bytes: options.max_record_bytes,
            rows,
            marks,
        })
    }

    /// A reader at the last mark at or before row `row`, and that mark.
    fn reader_at(&self, row: u64) -> Result<(RecordReader<'_>, Mark), Error> {
        let mark = self
            .marks
            .iter()
            .rev()
            .find(|m| m.row <= row)
            .copied()
            .unwrap_or(Mark {
                offset: 0,
                row: 0,
                line: 1,
            });
        // Row 0's mark is past the header, if any: a file without marks
        // has no row to read.
        let mut reader =
            RecordReader::open(&self.path, &self.label, self.dialect, self.max_record_bytes)?;
        reader.seek_to(&self.path, self.dialect, mark)?;
        Ok((reader, mark))
    }

    /// The line (from 1) that row `row` (from 0) starts on.
    fn line_of(&self, row: u64) -> Result<u64, Error> {
        let (mut reader, mark) = self.reader_at(row)?;
        let mut at = mark.row;
        loop {
            if reader.next(None)? == Next::End {
                return Err(changed(&self.label));
            }
            if at == row {
                return Ok(reader.line);
            }
            at += 1;
        }
    }
}

/// The batches of one scan of a CSV file.
struct CsvScan<'a> {
    table: &'a CsvTable,
    reader: RecordReader<'a>,
    decoder: Decoder,
    columns: &'a [usize],
    skip: u64,
    left: u64,
    max_rows: usize,
    target_bytes: usize,
    /// The current batch's records, each ended by a line break.
    text: Vec<u8>,
    /// Each record of the current batch: its end in `text`, its line.
    ends: Vec<(usize, u64)>,
    failed: bool,
}

impl CsvScan<'_> {
    fn fail(&self, line: u64, detail: impl fmt::Display) -> Error {
        Error::at_line(&self.table.label, line, self.table.schema.explain(detail))
    }

    /// Decodes `text` (whole records) with `decoder`.
    fn decode(decoder: &mut Decoder, text: &[u8]) -> Result<Option<RecordBatch>, ArrowError> {
        let mut at = 0;
        while at < text.len() {
            let used = decoder.decode(&text[at..])?;
            if used == 0 {
                break;
            }
            at += used;
        }
        decoder.decode(&[])?;
        decoder.flush()
    }

    /// The error of the batch's first record that fails to decode alone,
    /// naming its line and column.
    fn locate(&self, error: &ArrowError) -> Error {
        let schema = &self.table.schema;
        let mut start = 0;
        for &(end, line) in &self.ends {
            let text = &self.text[start..end];
            start = end;
            let mut one = schema.decoder(self.table.dialect, 1);
            if Self::decode(&mut one, text).is_ok() {
                continue;
            }
            // The column at fault, and its value as the file holds it.
            let mut reader = match RecordReader::new(
                Box::new(text),
                &self.table.label,
                self.table.dialect,
                u64::MAX,
            ) {
                Ok(r) => r,
                Err(e) => return e,
            };
            if let Err(e) = reader.next(None) {
                return e;
            }
            for (k, &i) in schema.keep.iter().enumerate() {
                let mut d = schema.decoder_of(self.table.dialect, 1, vec![i]);
                if Self::decode(&mut d, text).is_ok() {
                    continue;
                }
                let field = &schema.schema.fields()[k];
                if i >= reader.len() {
                    break;
                }
                let detail = match std::str::from_utf8(reader.field(i)) {
                    Ok(value) => format!(
                        "column {:?}: {value:?} is not a {} value",
                        field.name(),
                        type_name(field.data_type())
                    ),
                    Err(_) => format!("column {:?}: not UTF-8 text", field.name()),
                };
                return self.fail(line, detail);
            }
            return self.fail(line, arrow_message(error));
        }
        let first = self.ends.first().map_or(0, |e| e.1);
        let last = self.ends.last().map_or(0, |e| e.1);
        Error::Source {
            file: self.table.label.clone(),
            detail: format!(
                "lines {first} to {last}: {}",
                self.table.schema.explain(arrow_message(error))
            ),
        }
    }

    fn next_batch(&mut self) -> Result<RecordBatch, Error> {
        self.text.clear();
        self.ends.clear();
        let want = usize::try_from(self.left)
            .unwrap_or(usize::MAX)
            .min(self.max_rows);
        while self.ends.len() < want
            && (self.ends.is_empty() || self.text.len() < self.target_bytes)
        {
            let start = self.text.len();
            if self.reader.next(Some(&mut self.text))? == Next::End {
                return Err(Error::Source {
                    file: self.table.label.clone(),
                    detail: format!(
                        "the file ended {} rows early (did it change while it was read?)",
                        self.left - self.ends.len() as u64
                    ),
                });
            }
            if self.skip > 0 {
                self.skip -= 1;
                self.text.truncate(start);
                continue;
            }
            if !matches!(self.text.last(), Some(b'\n' | b'\r')) {
                self.text.push(b'\n');
            }
            self.ends.push((self.text.len(), self.reader.line));
        }
        let batch = match Self::decode(&mut self.decoder, &self.text) {
            Ok(Some(b)) => b,
            Ok(None) => RecordBatch::new_empty(self.table.schema.schema.clone()),
            Err(e) => return Err(self.locate(&e)),
        };
        if batch.num_rows() != self.ends.len() {
            return Err(changed(&self.table.label));
        }
        self.left -= batch.num_rows() as u64;
        let columns: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|&c| empty_strings(batch.column(c)))
            .collect();
        let schema = Arc::new(
            self.table
                .schema
                .schema
                .project(self.columns)
                .map_err(|e| Error::invalid(format!("cannot select the columns: {e}")))?,
        );
        RecordBatch::try_new(schema, columns)
            .map_err(|e| Error::invalid(format!("cannot select the columns: {e}")))
    }
}

/// A string column with its nulls (empty fields) made empty strings.
fn empty_strings(array: &ArrayRef) -> ArrayRef {
    match array.as_any().downcast_ref::<StringArray>() {
        Some(s) if s.null_count() > 0 => {
            let (offsets, values, _) = s.clone().into_parts();
            Arc::new(StringArray::new(offsets, values, None))
        }
        _ => array.clone(),
    }
}

/// A type's name as the schema file writes it.
fn type_name(dt: &DataType) -> String {
    match dt {
        DataType::Boolean => "bool".into(),
        DataType::Utf8 => "string".into(),
        other => other.to_string().to_ascii_lowercase(),
    }
}

/// An arrow error's text, without its kind's prefix.
fn arrow_message(e: &ArrowError) -> String {
    match e {
        ArrowError::CsvError(s) | ArrowError::ParseError(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Iterator for CsvScan<'_> {
    type Item = Result<RecordBatch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.left == 0 {
            return None;
        }
        let batch = self.next_batch();
        self.failed = batch.is_err();
        Some(batch)
    }
}

impl TableSource for CsvTable {
    fn label(&self) -> &str {
        &self.label
    }

    fn schema(&self) -> SchemaRef {
        self.schema.schema.clone()
    }

    fn features(&self) -> Result<Option<Value>, String> {
        Ok(None)
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn scan<'a>(
        &'a self,
        columns: &'a [usize],
        rows: Option<(usize, usize)>,
        sizing: Sizing,
    ) -> Scan<'a> {
        let (first, count) = match rows {
            Some((first, count)) => (first as u64, count as u64),
            None => (0, self.rows),
        };
        if count == 0 {
            return Box::new(std::iter::empty());
        }
        let max_rows = sizing.max_rows.max(1);
        match self.reader_at(first) {
            Ok((reader, mark)) => Box::new(CsvScan {
                table: self,
                reader,
                decoder: self.schema.decoder(self.dialect, max_rows),
                columns,
                skip: first - mark.row,
                left: count,
                max_rows,
                target_bytes: sizing.target_bytes.max(1),
                text: Vec::new(),
                ends: Vec::new(),
                failed: false,
            }),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }
}

/// Converts CSV and TSV files (see the [module documentation](self)) to
/// stores under `out`: `out/<split>/<store>/`, or a part of each split
/// with [`TableOptions::part`](crate::table::TableOptions::part). The
/// table options of `source` apply (columns, text, nulls, codec, parts).
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `out` exists (for a whole conversion);
/// [`Error::Io`] for an input that cannot be read; [`Error::Source`] naming
/// the file and line of a record with another number of fields than the
/// header, a value its column's type does not take, a record that is too
/// long, and naming the file of one whose header differs from its split's
/// first file or lacks a column the schema names, or a split with no rows
/// to infer types from; [`Error::UnknownColumn`], [`Error::Column`] and
/// [`Error::InvalidOption`] as the table layer reports them; [`Error::Store`]
/// from writing. A failed conversion leaves nothing at `out`.
pub fn convert_csv(
    source: &LocalSource,
    csv: &CsvOptions,
    out: impl AsRef<Path>,
) -> Result<TableSummary, Error> {
    source.table_options().check()?;
    csv.check()?;
    let splits = local_splits(source, Kind::Csv)?;
    let names: Vec<String> = splits.iter().map(|(name, _)| name.clone()).collect();
    let all_files: Vec<PathBuf> = splits.iter().flat_map(|(_, f)| f.iter().cloned()).collect();
    let mut opened_files: Vec<(String, Vec<Arc<CsvTable>>)> = Vec::new();
    let open = || {
        let mut tables = Vec::with_capacity(splits.len());
        for (name, files) in &splits {
            let labelled: Vec<(PathBuf, String, Dialect)> = files
                .iter()
                .map(|p| {
                    let dialect = Dialect {
                        delimiter: csv.delimiter_of(p),
                        quote: csv.quote,
                    };
                    (p.clone(), p.display().to_string(), dialect)
                })
                .collect();
            let mut header: Option<(Vec<String>, &str)> = None;
            for (path, label, dialect) in &labelled {
                let names = read_header(path, label, *dialect, csv)?;
                match &header {
                    None => header = Some((names, label)),
                    Some((first, first_label)) => {
                        if csv.header && !names.is_empty() && names != *first {
                            return Err(Error::Source {
                                file: label.clone(),
                                detail: format!(
                                    "its header ({}) differs from {first_label}'s ({}); every \
                                     file of a split has the same columns",
                                    names.join(", "),
                                    first.join(", ")
                                ),
                            });
                        }
                    }
                }
            }
            let (columns, first_label) = header.unwrap_or_default();
            let schema = match &csv.schema {
                Some(s) => given_schema(s, &columns, first_label, csv.header)?,
                None => infer_schema(&labelled, &columns, csv)?,
            };
            let mut opened: Vec<Box<dyn TableSource>> = Vec::with_capacity(files.len());
            let mut handles = Vec::with_capacity(files.len());
            for (path, label, dialect) in &labelled {
                let table = Arc::new(CsvTable::open(path, label, *dialect, schema.clone(), csv)?);
                handles.push(table.clone());
                opened.push(Box::new(Shared(table)));
            }
            opened_files.push((name.clone(), handles));
            tables.push(SplitTables {
                name: name.clone(),
                partial: false,
                tables: opened,
            });
        }
        Ok(tables)
    };
    convert_tables(
        &names,
        open,
        out.as_ref(),
        source.table_options(),
        CONTEXT,
        all_files,
    )
    .map_err(|e| name_line(e, &opened_files))
}

/// A table the conversion and the error messages share.
struct Shared(Arc<CsvTable>);

impl TableSource for Shared {
    fn label(&self) -> &str {
        self.0.label()
    }
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }
    fn features(&self) -> Result<Option<Value>, String> {
        Ok(None)
    }
    fn rows(&self) -> u64 {
        self.0.rows
    }
    fn scan<'a>(
        &'a self,
        columns: &'a [usize],
        rows: Option<(usize, usize)>,
        sizing: Sizing,
    ) -> Scan<'a> {
        self.0.scan(columns, rows, sizing)
    }
}

/// A table-layer error about one split row (a null, an empty string, a
/// string the tokenizer refuses), which counts the rows of all of the
/// split's files, made an error naming the file and line of the row. Any
/// other error is returned as it is.
fn name_line(e: Error, splits: &[(String, Vec<Arc<CsvTable>>)]) -> Error {
    let Error::Column {
        context,
        column,
        row: Some(row),
        detail,
    } = &e
    else {
        return e;
    };
    let Some((_, files)) = splits
        .iter()
        .find(|(name, _)| *context == format!("{CONTEXT} split {name:?}"))
    else {
        return e;
    };
    let mut first = 0u64;
    for file in files {
        if *row < first.saturating_add(file.rows) {
            return match file.line_of(row - first) {
                Ok(line) => {
                    Error::at_line(&file.label, line, format!("column {column:?}: {detail}"))
                }
                Err(_) => e,
            };
        }
        first = first.saturating_add(file.rows);
    }
    e
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Write;

    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type, UInt64Type};

    use super::*;
    use crate::table::TableOptions;

    fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
        let p = dir.join(name);
        File::create(&p).unwrap().write_all(text).unwrap();
        p
    }

    /// Opens the one-file split `path` as the converter does.
    fn table(path: &Path, options: &CsvOptions) -> Result<CsvTable, Error> {
        let label = path.display().to_string();
        let dialect = Dialect {
            delimiter: options.delimiter_of(path),
            quote: options.quote,
        };
        let names = read_header(path, &label, dialect, options)?;
        let schema = match &options.schema {
            Some(s) => given_schema(s, &names, &label, options.header)?,
            None => infer_schema(
                &[(path.to_path_buf(), label.clone(), dialect)],
                &names,
                options,
            )?,
        };
        CsvTable::open(path, &label, dialect, schema, options)
    }

    fn scan_all(
        t: &CsvTable,
        rows: Option<(usize, usize)>,
        max_rows: usize,
    ) -> Result<Vec<RecordBatch>, Error> {
        let columns: Vec<usize> = (0..t.schema().fields().len()).collect();
        let sizing = Sizing {
            target_bytes: 1 << 20,
            extra_row_bytes: 0,
            max_rows,
        };
        t.scan(&columns, rows, sizing).collect()
    }

    fn error(text: &str, options: &CsvOptions) -> String {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "bad.csv", text.as_bytes());
        match table(&p, options) {
            Err(e) => e.to_string(),
            Ok(t) => scan_all(&t, None, 3).unwrap_err().to_string(),
        }
    }

    #[test]
    fn types_are_inferred_per_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.csv",
            b"\xEF\xBB\xBFi,f,b,s,e,n\r\n1,1.5,true,x,,nan\r\n\r\n-2,3,FALSE,\"y, \"\"z\"\"\",,1e3\r\n",
        );
        let t = table(&p, &CsvOptions::new()).unwrap();
        assert_eq!(t.rows, 2);
        let s = t.schema();
        let types: Vec<&DataType> = s.fields().iter().map(|f| f.data_type()).collect();
        assert_eq!(
            types,
            [
                &DataType::Int64,
                &DataType::Float64,
                &DataType::Boolean,
                &DataType::Utf8,
                &DataType::Utf8,
                &DataType::Float64
            ]
        );
        let b = scan_all(&t, None, 10).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(
            b[0].column(0).as_primitive::<Int64Type>().values(),
            &[1, -2]
        );
        assert_eq!(
            b[0].column(1).as_primitive::<Float64Type>().values(),
            &[1.5, 3.0]
        );
        let bools = b[0].column(2).as_boolean();
        assert!(bools.value(0) && !bools.value(1));
        let strings = b[0].column(3).as_string::<i32>();
        assert_eq!(strings.value(1), "y, \"z\"");
        // An empty string column: empty strings, not nulls.
        assert_eq!(b[0].column(4).null_count(), 0);
        let n = b[0].column(5).as_primitive::<Float64Type>();
        assert!(n.value(0).is_nan() && n.value(1) == 1000.0);
    }

    #[test]
    fn tsv_gzip_no_header_and_quoted_line_breaks() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"1\t\"two\nlines\"\n2\tplain\n").unwrap();
        let p = write(dir.path(), "a.tsv.gz", &gz.finish().unwrap());
        let t = table(&p, &CsvOptions::new().header(false)).unwrap();
        assert_eq!(t.schema.names, ["column_1", "column_2"]);
        let b = scan_all(&t, None, 10).unwrap();
        assert_eq!(b[0].column(1).as_string::<i32>().value(0), "two\nlines");
        // The line after the quoted break is the third.
        assert_eq!(t.line_of(1).unwrap(), 3);
        // A scan from row 1 (gzipped: decompressed up to it).
        let b = scan_all(&t, Some((1, 1)), 10).unwrap();
        assert_eq!(b[0].column(0).as_primitive::<Int64Type>().values(), &[2]);
    }

    #[test]
    fn scans_seek_to_their_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("i,note\n");
        for i in 0..10_000 {
            if i % 7 == 0 {
                text.push_str(&format!("{i},\"a\nb\"\n\n"));
            } else {
                text.push_str(&format!("{i},c\n"));
            }
        }
        let p = write(dir.path(), "a.csv", text.as_bytes());
        let t = table(&p, &CsvOptions::new()).unwrap();
        assert_eq!(t.rows, 10_000);
        assert_eq!(t.marks.len(), 3);
        for (first, count) in [(0, 10), (4095, 3), (4096, 5000), (9990, 10)] {
            let batches = scan_all(&t, Some((first, count)), 1000).unwrap();
            let got: Vec<i64> = batches
                .iter()
                .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect();
            let want: Vec<i64> = (first as i64..(first + count) as i64).collect();
            assert_eq!(got, want);
        }
        // Lines: 1 the header, 2-3 row 0, 4 blank, 5-10 rows 1-6, 11-12
        // row 7, 13 blank, 14 row 8.
        assert_eq!(t.line_of(0).unwrap(), 2);
        assert_eq!(t.line_of(1).unwrap(), 5);
        assert_eq!(t.line_of(7).unwrap(), 11);
        assert_eq!(t.line_of(8).unwrap(), 14);
    }

    #[test]
    fn bad_records_name_their_line() {
        let small = CsvOptions::new().infer_rows(2);
        for (text, options, want) in [
            (
                "a,b\n1,2\n3\n",
                &small,
                "bad.csv: line 3: 1 fields, but the header has 2",
            ),
            (
                "a,b\n1,2\n3,4\n\"5\n6\",x\n",
                &small,
                "bad.csv: line 4: column \"a\": \"5\\n6\" is not a int64 value (the types were \
                 inferred",
            ),
            (
                "a,b\n1,2\n3,4\n5,x\n",
                &small,
                "line 4: column \"b\": \"x\" is not a int64",
            ),
            (
                "a\n1\n2\n18446744073709551616\n",
                &CsvOptions::new(),
                "line 4: the column \"a\" holds the integer 18446744073709551616, beyond int64",
            ),
            ("a,b\n", &CsvOptions::new(), "holds no rows"),
            (
                "a,b\n1,\"open\n2,3\n",
                &CsvOptions::new().max_record_bytes(8),
                "line 2: a record longer than 8 bytes",
            ),
            (
                "a,a\n1,2\n",
                &CsvOptions::new(),
                "names the column \"a\" twice",
            ),
        ] {
            let e = error(text, options);
            assert!(e.contains(want), "{text:?}: {e}");
        }
        // A given schema: values read strictly, a missing column named.
        let schema = crate::jsonl::parse_schema(r#"{"b": "uint8", "a": "float32"}"#).unwrap();
        let given = CsvOptions::new().schema(schema);
        assert!(
            error("a,b\n1,2\n1,300\n", &given)
                .contains("line 3: column \"b\": \"300\" is not a uint8 value"),
            "{}",
            error("a,b\n1,2\n1,300\n", &given)
        );
        let e = error("a,c\n1,2\n", &given);
        assert!(e.contains("has no column \"b\""), "{e}");
    }

    #[test]
    fn given_schemas_pick_and_order_columns() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.csv", b"x,a,b\nz,1,18446744073709551615\n");
        let schema = crate::jsonl::parse_schema(r#"{"b": "uint64", "a": "string"}"#).unwrap();
        let t = table(&p, &CsvOptions::new().schema(schema)).unwrap();
        let b = scan_all(&t, None, 10).unwrap();
        assert_eq!(b[0].num_columns(), 2);
        assert_eq!(
            b[0].column(0).as_primitive::<UInt64Type>().values(),
            &[u64::MAX]
        );
        assert_eq!(b[0].column(1).as_string::<i32>().value(0), "1");
        let lists = crate::jsonl::parse_schema(r#"{"a": "list<int8>"}"#).unwrap();
        let e = CsvOptions::new().schema(lists).check().unwrap_err();
        assert!(e.to_string().contains("not read from CSV"), "{e}");
        assert!(CsvOptions::new().delimiter(b'"').check().is_err());
        assert!(CsvOptions::new().quote(b'\n').check().is_err());
    }

    #[test]
    fn nulls_of_numeric_columns_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.csv", b"x,y\n1,a\n2,b\n");
        let b = write(dir.path(), "b.csv", b"x,y\n3,c\n\n,d\n");
        let out = dir.path().join("out");
        let source = LocalSource::new([&a, &b]).options(TableOptions::new().text_bytes());
        let e = convert_csv(&source, &CsvOptions::new(), &out)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("{}: line 4: column \"x\"", b.display())),
            "{e}"
        );
        assert!(!out.exists());
        let source = LocalSource::new([&a, &b])
            .options(TableOptions::new().text_bytes().drop_null_rows(true));
        let summary = convert_csv(&source, &CsvOptions::new(), &out).unwrap();
        assert_eq!(summary.splits[0].records, 3, "{summary}");
        let x = loaderx_core::Store::open(out.join("train/x")).unwrap();
        assert_eq!(x.len(), 3);
    }
}
