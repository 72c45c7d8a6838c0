//! JSON Lines files (`.jsonl`, `.ndjson`, `.json`) to Zrecord (feature
//! `arrow`).
//!
//! Every non-empty line of a file is one JSON object, one row; its fields
//! are the columns, converted by the table layer's rules ([`crate::table`]):
//!
//! | JSON value                         | inferred Arrow type        | store                    |
//! |------------------------------------|----------------------------|--------------------------|
//! | integer (`3`)                      | `int64`                    | Dense `i64` scalar       |
//! | number with a fraction or exponent | `float64`                  | Dense `f64` scalar       |
//! | `true` / `false`                   | `bool`                     | Dense `bool` scalar      |
//! | string                             | `string`                   | Ragged `u8` UTF-8 bytes, or `u32` token ids (`--tokenizer`) |
//! | list of numbers, every sampled row the same length | `list<T, n>` | Dense `[n]`           |
//! | list of numbers of varying length  | `list<T>`                  | Ragged rank 1            |
//! | lists of lists                     | one level each             | Dense or Ragged, one dimension per level |
//!
//! **Types are inferred** from a bounded sample, the first
//! [`JsonlOptions::infer_rows`] rows (default [`DEFAULT_INFER_ROWS`]) of a
//! split's files, in order: integers as `int64`, numbers with a fraction or
//! an exponent as `float64` (a field holding both is `float64`), lists by
//! their elements; a list level is fixed-length (Dense) when it has one
//! length, not 0, in every sampled row, else variable (Ragged). Columns are
//! in the order their fields first appear. A row past the sample that does
//! not fit (a fraction in an `int64` column, another list length, a field
//! the sample never had) is an error naming its file and line; give the
//! types instead.
//!
//! **Types can be given** ([`JsonlOptions::schema`], `--schema FILE`) as a
//! JSON object mapping each field to a type, in column order
//! ([`parse_schema`]):
//!
//! ```json
//! {"label": "int64", "score": "float32", "ok": "bool", "text": "string",
//!  "tokens": "list<int32>", "xy": "list<float32, 2>", "grid": "list<list<uint8, 3>, 3>"}
//! ```
//!
//! Types: `bool`, `int8`, `int16`, `int32`, `int64`, `uint8`, `uint16`,
//! `uint32`, `uint64`, `float16`, `float32`, `float64`, `string`,
//! `list<T>` (variable length) and `list<T, N>` (every list exactly `N`
//! long). A given schema narrows numbers: a value out of the type's range is
//! an error; a float is rounded to the nearest `float32`/`float16`. Fields of
//! a line that the given schema does not name are ignored.
//!
//! Values are read strictly: an integer column takes only integer literals
//! (`1.0`, `"1"` are errors), a float column only numbers, a string column
//! only strings. A missing field or `null` is a null, which the table layer
//! refuses unless rows with nulls are dropped
//! ([`TableOptions::drop_null_rows`](crate::table::TableOptions::drop_null_rows));
//! its messages about a row (a null, an empty string, a list of lists that
//! is not rectangular) name the row's file and line, as every other
//! message does.
//!
//! **Integers are never rounded**: an integer literal (no fraction, no
//! exponent) that its column's type cannot hold is an error naming the
//! file, the line and the field. Inference never makes a `float64` column
//! of an integer beyond `int64` (serde_json reads one beyond `uint64` as a
//! float: the literal is read again from arrow-json's tape); an integer
//! column refuses one out of its range; a float column takes an integer
//! literal only when its type holds it exactly (`9007199254740993` is not
//! a `float64`), while a number with a fraction or an exponent is rounded
//! to the nearest value of the type.
//!
//! **Hostile input**: a line longer than [`JsonlOptions::max_line_bytes`]
//! (default [`DEFAULT_MAX_LINE_BYTES`]) is an error naming the file and the
//! line, and is never held in memory; so is a line that is not one complete
//! JSON object (a truncated last line, two objects on a line, an array, a
//! number). Opening a file counts its rows in one streaming pass of bounded
//! memory; a scan seeks to its first row (an index of every 4096th row's
//! offset) and decodes only the rows it wants. A failed conversion leaves
//! nothing at its output.
//!
//! Files are sorted into splits as [`crate::local`] does (files given, a
//! directory's subdirectories, `--split-glob NAME=GLOB`), taking files named
//! `*.jsonl`, `*.ndjson` and `*.json`; parts ([`TableOptions::part`](crate::table::TableOptions::part))
//! cut a split by rows.
//!
//! ```no_run
//! use loaderx_convert::jsonl::{JsonlOptions, convert_jsonl};
//! use loaderx_convert::local::LocalSource;
//! use loaderx_convert::table::TableOptions;
//!
//! let source = LocalSource::new(["data.jsonl"]).options(TableOptions::new());
//! let summary = convert_jsonl(&source, &JsonlOptions::new(), "stores")?;
//! println!("{summary}");
//! # Ok::<(), loaderx_convert::Error>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arrow_array::builder::PrimitiveBuilder;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{ArrayRef, ArrowPrimitiveType, NullArray, RecordBatch};
use arrow_json::reader::{ArrayDecoder, Decoder, DecoderContext, DecoderFactory, ReaderBuilder};
use arrow_json::{Tape, TapeElement};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Schema, SchemaRef};
use serde_json::Value;

use crate::error::Error;
use crate::local::{Kind, LocalSource, local_splits};
use crate::table::{Scan, Sizing, SplitTables, TableSource, TableSummary, convert_tables};

/// Rows sampled to infer a split's types, unless told otherwise.
pub const DEFAULT_INFER_ROWS: usize = 1000;
/// The longest line read, in bytes, unless told otherwise (64 MiB).
pub const DEFAULT_MAX_LINE_BYTES: u64 = 64 << 20;
/// A scan can start at every this many rows without reading those before.
const INDEX_STRIDE: u64 = 4096;
/// Read buffer of a file.
const READ_BUFFER: usize = 1 << 20;
/// The UTF-8 byte order mark.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// The largest schema file read.
const MAX_SCHEMA_BYTES: u64 = 16 << 20;

/// How JSON Lines files are read: the types (inferred or given) and the
/// longest line; a builder.
#[derive(Debug, Clone)]
pub struct JsonlOptions {
    infer_rows: usize,
    max_line_bytes: u64,
    schema: Option<SchemaRef>,
}

impl Default for JsonlOptions {
    fn default() -> JsonlOptions {
        JsonlOptions::new()
    }
}

impl JsonlOptions {
    /// Types inferred from the first [`DEFAULT_INFER_ROWS`] rows of each
    /// split, lines of at most [`DEFAULT_MAX_LINE_BYTES`].
    pub fn new() -> JsonlOptions {
        JsonlOptions {
            infer_rows: DEFAULT_INFER_ROWS,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            schema: None,
        }
    }

    /// Infers each split's types from its first `rows` rows (at least 1;
    /// default [`DEFAULT_INFER_ROWS`]). Each sampled line is parsed once
    /// more, so a large sample costs time, not memory.
    pub fn infer_rows(mut self, rows: usize) -> JsonlOptions {
        self.infer_rows = rows;
        self
    }

    /// A line longer than `bytes` (not counting its newline) is an error
    /// naming its file and line (default [`DEFAULT_MAX_LINE_BYTES`]).
    pub fn max_line_bytes(mut self, bytes: u64) -> JsonlOptions {
        self.max_line_bytes = bytes;
        self
    }

    /// The columns and their types, in order, instead of inferring them
    /// (see [`parse_schema`] for the types read; every field should be
    /// nullable, a null is refused or dropped by the table layer). Fields
    /// of a line that `schema` does not name are ignored.
    pub fn schema(mut self, schema: Schema) -> JsonlOptions {
        self.schema = Some(Arc::new(schema));
        self
    }

    fn check(&self) -> Result<(), Error> {
        if self.infer_rows == 0 {
            return Err(Error::invalid("--infer-rows must be at least 1"));
        }
        if self.max_line_bytes == 0 {
            return Err(Error::invalid("--max-line-bytes must be at least 1"));
        }
        if let Some(s) = &self.schema {
            if s.fields().is_empty() {
                return Err(Error::invalid("the given JSONL schema names no field"));
            }
            for f in s.fields() {
                check_type(f.data_type()).map_err(|e| {
                    Error::invalid(format!(
                        "the given JSONL schema's field {:?}: {e}",
                        f.name()
                    ))
                })?;
            }
        }
        Ok(())
    }
}

/// True for a type this reader decodes (strictly).
fn check_type(dt: &DataType) -> Result<(), String> {
    match dt {
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
        | DataType::LargeUtf8 => Ok(()),
        DataType::List(f) | DataType::LargeList(f) => check_type(f.data_type()),
        DataType::FixedSizeList(f, n) if *n > 0 => check_type(f.data_type()),
        other => Err(format!("the type {other} is not read from JSON Lines")),
    }
}

/// Parses a scalar or list type of the schema mapping.
fn parse_type(text: &str) -> Result<DataType, String> {
    let t = text.trim();
    if let Some(inner) = t.strip_prefix("list<").and_then(|r| r.strip_suffix('>')) {
        // The element type may itself hold commas (`list<list<u8, 3>, 2>`):
        // a length is a last comma outside any angle brackets.
        let mut depth = 0i32;
        let mut split = None;
        for (i, c) in inner.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                ',' if depth == 0 => split = Some(i),
                _ => {}
            }
        }
        let (element, length) = match split {
            Some(i) => (&inner[..i], Some(inner[i + 1..].trim())),
            None => (inner, None),
        };
        let child = Arc::new(Field::new("item", parse_type(element)?, true));
        return match length {
            None => Ok(DataType::List(child)),
            Some(n) => match n.parse::<i32>() {
                Ok(n) if n > 0 => Ok(DataType::FixedSizeList(child, n)),
                _ => Err(format!("{t:?}: the length {n:?} is not a positive number")),
            },
        };
    }
    Ok(match t {
        "bool" | "boolean" => DataType::Boolean,
        "int8" => DataType::Int8,
        "int16" => DataType::Int16,
        "int32" => DataType::Int32,
        "int64" => DataType::Int64,
        "uint8" => DataType::UInt8,
        "uint16" => DataType::UInt16,
        "uint32" => DataType::UInt32,
        "uint64" => DataType::UInt64,
        "float16" => DataType::Float16,
        "float32" => DataType::Float32,
        "float64" => DataType::Float64,
        "string" => DataType::Utf8,
        _ => {
            return Err(format!(
                "{t:?} is not a type (bool, int8, int16, int32, int64, uint8, uint16, uint32, \
                 uint64, float16, float32, float64, string, list<T>, list<T, N>)"
            ));
        }
    })
}

/// A JSON object's entries in the order written.
struct Ordered(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ordered, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    out.push(entry);
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// Parses a JSONL schema: a JSON object mapping each field, in column
/// order, to its type, e.g. `{"label": "int64", "tokens": "list<int32>",
/// "xy": "list<float32, 2>"}`; see the [module documentation](self) for
/// the types. Every field is nullable.
///
/// # Errors
///
/// [`Error::InvalidOption`] naming the field whose type is not understood,
/// or saying why the text is not such an object.
pub fn parse_schema(text: &str) -> Result<Schema, Error> {
    let Ordered(entries) = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("the JSONL schema is not a JSON object: {e}")))?;
    if entries.is_empty() {
        return Err(Error::invalid("the JSONL schema names no field"));
    }
    let mut fields: Vec<Field> = Vec::with_capacity(entries.len());
    for (name, ty) in entries {
        if fields.iter().any(|f| *f.name() == name) {
            return Err(Error::invalid(format!(
                "the JSONL schema names the field {name:?} twice"
            )));
        }
        let ty = ty.as_str().ok_or_else(|| {
            Error::invalid(format!(
                "the JSONL schema's field {name:?}: the type {ty} is not a string"
            ))
        })?;
        let dt = parse_type(ty)
            .map_err(|e| Error::invalid(format!("the JSONL schema's field {name:?}: {e}")))?;
        fields.push(Field::new(name, dt, true));
    }
    Ok(Schema::new(fields))
}

/// Reads a JSONL schema file ([`parse_schema`]).
///
/// # Errors
///
/// [`Error::Io`] when it cannot be read, [`Error::Source`] naming it when
/// it is larger than 16 MiB or not a schema.
pub fn read_schema(path: impl AsRef<Path>) -> Result<Schema, Error> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(file, MAX_SCHEMA_BYTES + 1),
        &mut text,
    )
    .map_err(|e| Error::io(path, e))?;
    if text.len() as u64 > MAX_SCHEMA_BYTES {
        return Err(source_err(path, "larger than 16 MiB; not a JSONL schema"));
    }
    parse_schema(&text).map_err(|e| source_err(path, e.to_string()))
}

fn source_err(path: &Path, detail: impl Into<String>) -> Error {
    Error::Source {
        file: path.display().to_string(),
        detail: detail.into(),
    }
}

/// A hint for a line that is not JSON and holds `NaN` or `Infinity`,
/// which Python's `json.dumps` writes for such floats (unless
/// `allow_nan=False`) but JSON has no literal for.
fn not_json_hint(line: &[u8]) -> &'static str {
    let has = |word: &[u8]| line.windows(word.len()).any(|w| w == word);
    if has(b"NaN") || has(b"Infinity") {
        " (NaN and Infinity are not JSON, though Python's json.dumps writes them: write \
         null for a missing value, or the number as a quoted string)"
    } else {
        ""
    }
}

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Reads a file line by line, never holding more than the limit of one
/// line: its position, the number of the last line read.
struct LineReader<'a> {
    reader: BufReader<File>,
    label: &'a str,
    max: u64,
    /// The number (from 1) of the last line read.
    line: u64,
    /// The byte offset of the next line.
    offset: u64,
}

impl<'a> LineReader<'a> {
    fn open(path: &Path, label: &'a str, max: u64) -> Result<LineReader<'a>, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(LineReader {
            reader: BufReader::with_capacity(READ_BUFFER, file),
            label,
            max,
            line: 0,
            offset: 0,
        })
    }

    /// Skips a UTF-8 byte order mark at the start of the file (Windows
    /// tools write one; it is not JSON).
    fn skip_bom(&mut self) -> Result<(), Error> {
        let buf = self.reader.fill_buf().map_err(|e| Error::Source {
            file: self.label.to_owned(),
            detail: format!("cannot be read: {e}"),
        })?;
        if buf.starts_with(UTF8_BOM) {
            self.reader.consume(UTF8_BOM.len());
            self.offset = UTF8_BOM.len() as u64;
        }
        Ok(())
    }

    /// Moves to byte `offset`, the start of line `line`.
    fn seek(&mut self, offset: u64, line: u64, path: &Path) -> Result<(), Error> {
        self.reader
            .seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(path, e))?;
        self.offset = offset;
        self.line = line.saturating_sub(1);
        Ok(())
    }

    /// Reads the next line (without its newline), appending it to `out`
    /// when given: `None` at the end of the file, else whether it holds
    /// anything but whitespace.
    fn next_line(&mut self, mut out: Option<&mut Vec<u8>>) -> Result<Option<bool>, Error> {
        let mut len = 0u64;
        let mut nonblank = false;
        let mut any = false;
        if self.offset == 0 {
            self.skip_bom()?;
        }
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Error::Source {
                        file: self.label.to_owned(),
                        detail: format!("cannot be read: {e}"),
                    });
                }
            };
            if buf.is_empty() {
                if !any {
                    return Ok(None);
                }
                self.line += 1;
                return Ok(Some(nonblank));
            }
            any = true;
            let (chunk, newline) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            len += chunk.len() as u64;
            if len > self.max {
                return Err(Error::at_line(
                    self.label,
                    self.line + 1,
                    format!(
                        "longer than {} bytes (the longest line read; --max-line-bytes sets it); \
                         is this a JSON Lines file?",
                        self.max
                    ),
                ));
            }
            if !nonblank {
                nonblank = chunk.iter().any(|&b| !is_blank(b));
            }
            if let Some(out) = out.as_deref_mut() {
                out.extend_from_slice(chunk);
            }
            let used = chunk.len() + usize::from(newline);
            self.reader.consume(used);
            self.offset += used as u64;
            if newline {
                self.line += 1;
                return Ok(Some(nonblank));
            }
        }
    }
}

/// Where a scan can start: row `row` is line `line`, at byte `offset`.
#[derive(Debug, Clone, Copy)]
struct Mark {
    offset: u64,
    row: u64,
    line: u64,
}

/// Strict decoders: integers from integer literals only, floats from
/// numbers only, each in its type's range.
#[derive(Debug)]
struct Strict;

impl DecoderFactory for Strict {
    fn make_default_decoder(
        &self,
        _ctx: &DecoderContext,
        field: &FieldRef,
        _is_nullable: bool,
    ) -> Result<Option<Box<dyn ArrayDecoder>>, ArrowError> {
        let d: Box<dyn ArrayDecoder> = match field.data_type() {
            DataType::Int8 => Box::new(IntDecoder::<Int8Type>::default()),
            DataType::Int16 => Box::new(IntDecoder::<Int16Type>::default()),
            DataType::Int32 => Box::new(IntDecoder::<Int32Type>::default()),
            DataType::Int64 => Box::new(IntDecoder::<Int64Type>::default()),
            DataType::UInt8 => Box::new(IntDecoder::<UInt8Type>::default()),
            DataType::UInt16 => Box::new(IntDecoder::<UInt16Type>::default()),
            DataType::UInt32 => Box::new(IntDecoder::<UInt32Type>::default()),
            DataType::UInt64 => Box::new(IntDecoder::<UInt64Type>::default()),
            DataType::Float16 => Box::new(FloatDecoder::<Float16Type>::default()),
            DataType::Float32 => Box::new(FloatDecoder::<Float32Type>::default()),
            DataType::Float64 => Box::new(FloatDecoder::<Float64Type>::default()),
            _ => return Ok(None),
        };
        Ok(Some(d))
    }
}

fn json_err(detail: String) -> ArrowError {
    ArrowError::JsonError(detail)
}

/// What a tape element is, for messages.
fn found(tape: &Tape<'_>, p: u32) -> String {
    match tape.get(p) {
        TapeElement::String(i) => {
            let s = tape.get_string(i);
            if s.len() > 40 {
                "a string".to_owned()
            } else {
                format!("the string {s:?}")
            }
        }
        TapeElement::StartList(_) => "a list".to_owned(),
        TapeElement::StartObject(_) => "an object".to_owned(),
        TapeElement::True | TapeElement::False => "a boolean".to_owned(),
        _ => "another value".to_owned(),
    }
}

struct IntDecoder<P>(std::marker::PhantomData<fn(P) -> P>);

impl<P> Default for IntDecoder<P> {
    fn default() -> Self {
        IntDecoder(std::marker::PhantomData)
    }
}

impl<P> ArrayDecoder for IntDecoder<P>
where
    P: ArrowPrimitiveType,
    P::Native: std::str::FromStr,
{
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut b = PrimitiveBuilder::<P>::with_capacity(pos.len());
        for &p in pos {
            match tape.get(p) {
                TapeElement::Null => b.append_null(),
                TapeElement::Number(i) => {
                    let s = tape.get_string(i);
                    if s.contains(['.', 'e', 'E']) {
                        return Err(json_err(format!(
                            "{s} is not an integer (the column holds {})",
                            P::DATA_TYPE
                        )));
                    }
                    let v = s.parse::<P::Native>().map_err(|_| {
                        json_err(format!(
                            "the integer {s} does not fit the column's {}; give the field a type \
                             that holds it with --schema, or quote such values in the file (a \
                             string column)",
                            P::DATA_TYPE
                        ))
                    })?;
                    b.append_value(v);
                }
                _ => {
                    return Err(json_err(format!(
                        "expected an integer ({}), found {}",
                        P::DATA_TYPE,
                        found(tape, p)
                    )));
                }
            }
        }
        Ok(Arc::new(b.finish()))
    }
}

/// A float type parsed from a JSON number's text.
trait ParseFloat: ArrowPrimitiveType {
    /// The value, `None` when it is out of range (a finite literal that
    /// would be infinite).
    fn parse(s: &str) -> Option<Self::Native>;
    /// The value as an `f64` (exactly).
    fn wide(v: Self::Native) -> f64;
    /// Every integer of at most this many digits is exactly a value of
    /// the type (below 2^11, 2^24, 2^53).
    const EXACT_DIGITS: usize;
}

impl ParseFloat for Float64Type {
    const EXACT_DIGITS: usize = 15;
    fn parse(s: &str) -> Option<f64> {
        s.parse::<f64>().ok().filter(|v| v.is_finite())
    }
    fn wide(v: f64) -> f64 {
        v
    }
}

impl ParseFloat for Float32Type {
    const EXACT_DIGITS: usize = 7;
    fn parse(s: &str) -> Option<f32> {
        s.parse::<f32>().ok().filter(|v| v.is_finite())
    }
    fn wide(v: f32) -> f64 {
        f64::from(v)
    }
}

impl ParseFloat for Float16Type {
    const EXACT_DIGITS: usize = 3;
    fn parse(s: &str) -> Option<half::f16> {
        let v = half::f16::from_f64(s.parse::<f64>().ok()?);
        v.is_finite().then_some(v)
    }
    fn wide(v: half::f16) -> f64 {
        v.to_f64()
    }
}

/// True for a JSON number written as an integer (no fraction, no exponent).
fn is_integer_literal(s: &str) -> bool {
    !s.contains(['.', 'e', 'E'])
}

/// True when float `v`, read from integer literal `s`, is exactly that
/// integer. JSON integers have no leading zeros or `+`, so the literal is
/// the integer's decimal form, which `{v:.0}` writes exactly.
fn exact_integer<P: ParseFloat>(s: &str, v: f64) -> bool {
    s.trim_start_matches('-').len() <= P::EXACT_DIGITS || format!("{v:.0}") == s
}

struct FloatDecoder<P>(std::marker::PhantomData<fn(P) -> P>);

impl<P> Default for FloatDecoder<P> {
    fn default() -> Self {
        FloatDecoder(std::marker::PhantomData)
    }
}

impl<P: ParseFloat> ArrayDecoder for FloatDecoder<P> {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut b = PrimitiveBuilder::<P>::with_capacity(pos.len());
        for &p in pos {
            match tape.get(p) {
                TapeElement::Null => b.append_null(),
                TapeElement::Number(i) => {
                    let s = tape.get_string(i);
                    let v = P::parse(s).ok_or_else(|| {
                        json_err(format!("{s} is out of the column's {} range", P::DATA_TYPE))
                    })?;
                    // An integer is kept exactly or refused: never rounded
                    // without a word (a fraction or exponent asks for the
                    // nearest float).
                    if is_integer_literal(s) && !exact_integer::<P>(s, P::wide(v)) {
                        return Err(json_err(format!(
                            "the integer {s} is not exactly a {} (it would become {:.0}); give \
                             the field an integer type with --schema, quote such values in the \
                             file (a string column), or write {s}.0 to take the nearest float",
                            P::DATA_TYPE,
                            P::wide(v)
                        )));
                    }
                    b.append_value(v);
                }
                _ => {
                    return Err(json_err(format!(
                        "expected a number ({}), found {}",
                        P::DATA_TYPE,
                        found(tape, p)
                    )));
                }
            }
        }
        Ok(Arc::new(b.finish()))
    }
}

/// The bytes a row takes in the fixed-size lists of `schema`'s columns
/// (their lengths multiplied down to the leaf, times its width), whatever
/// the row holds: what a decoder reserves even for a null.
fn fixed_row_bytes(schema: &SchemaRef) -> usize {
    fn bytes(dt: &DataType) -> usize {
        match dt {
            DataType::FixedSizeList(f, n) => usize::try_from(*n)
                .unwrap_or(usize::MAX)
                .saturating_mul(bytes(f.data_type()).max(1)),
            DataType::List(_) | DataType::LargeList(_) => 8,
            other => other.primitive_width().unwrap_or(8),
        }
    }
    schema
        .fields()
        .iter()
        .map(|f| bytes(f.data_type()))
        .fold(0usize, usize::saturating_add)
}

/// A split's schema and how it came about.
#[derive(Debug, Clone)]
struct SplitSchema {
    schema: SchemaRef,
    /// `Some(rows)` when inferred from that many rows.
    inferred: Option<usize>,
}

impl SplitSchema {
    fn decoder(&self, batch_rows: usize) -> Result<Decoder, Error> {
        ReaderBuilder::new(self.schema.clone())
            .with_batch_size(batch_rows.max(1))
            .with_strict_mode(self.inferred.is_some())
            .with_decoder_factory(Arc::new(Strict))
            .build_decoder()
            .map_err(|e| Error::invalid(format!("cannot decode JSON with this schema: {e}")))
    }

    /// `detail`, with a hint when the types were inferred.
    fn explain(&self, detail: impl fmt::Display) -> String {
        match self.inferred {
            Some(n) => format!(
                "{detail} (the types were inferred from the split's first {n} rows; \
                 raise --infer-rows or give them with --schema)"
            ),
            None => detail.to_string(),
        }
    }
}

/// The length every list of one nesting level had, as far as seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Length {
    Unseen,
    Fixed(usize),
    Varying,
}

/// What a field's value is, for the check that a field holds one kind of
/// value; `None` for a null.
fn json_kind(v: &Value) -> Option<&'static str> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    })
}

/// Records the list lengths of `v` at `depth` and below.
fn note_lengths(v: &Value, depth: usize, lengths: &mut Vec<Length>) {
    let Value::Array(items) = v else {
        return;
    };
    if lengths.len() <= depth {
        lengths.resize(depth + 1, Length::Unseen);
    }
    lengths[depth] = match (lengths[depth], items.len()) {
        (_, 0) => Length::Varying,
        (Length::Unseen, n) => Length::Fixed(n),
        (Length::Fixed(m), n) if m == n => Length::Fixed(n),
        _ => Length::Varying,
    };
    for item in items {
        note_lengths(item, depth + 1, lengths);
    }
}

/// `dt` with its list levels made fixed-size where `lengths` says so.
fn fix_lengths(dt: &DataType, lengths: &[Length]) -> DataType {
    match dt {
        DataType::List(child) => {
            let inner = fix_lengths(child.data_type(), lengths.get(1..).unwrap_or(&[]));
            let child = Arc::new(child.as_ref().clone().with_data_type(inner));
            match lengths.first() {
                Some(Length::Fixed(n)) => match i32::try_from(*n) {
                    Ok(n) => DataType::FixedSizeList(child, n),
                    Err(_) => DataType::List(child),
                },
                _ => DataType::List(child),
            }
        }
        other => other.clone(),
    }
}

/// True when `value` (or a number in its lists) may have been written as
/// an integer that `int64` cannot hold: serde_json reads one up to
/// `u64::MAX` as a `u64`, and one beyond that or below `i64::MIN` as the
/// nearest `f64`, which only the literal tells apart from `1e20`.
fn maybe_beyond_i64(value: &Value) -> bool {
    match value {
        Value::Number(n) if n.is_i64() => false,
        Value::Number(n) => {
            n.is_u64()
                || n.as_f64()
                    .is_some_and(|v| v.fract() == 0.0 && v.abs() >= 9.0e18)
        }
        Value::Array(items) => items.iter().any(maybe_beyond_i64),
        _ => false,
    }
}

/// Finds, in the values it is handed, the first integer literal that
/// `int64` cannot hold (at any depth of lists), as written: a decoder for
/// the `null`-typed probe fields of [`integer_beyond_i64`].
#[derive(Debug)]
struct Probe(Arc<OnceLock<String>>);

impl DecoderFactory for Probe {
    fn make_default_decoder(
        &self,
        _ctx: &DecoderContext,
        field: &FieldRef,
        _is_nullable: bool,
    ) -> Result<Option<Box<dyn ArrayDecoder>>, ArrowError> {
        Ok((*field.data_type() == DataType::Null)
            .then(|| Box::new(Probe(self.0.clone())) as Box<dyn ArrayDecoder>))
    }
}

impl ArrayDecoder for Probe {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        for &p in pos {
            // A list's (or object's) elements are the tape between its ends.
            let end = match tape.get(p) {
                TapeElement::StartList(end) | TapeElement::StartObject(end) => end,
                _ => p,
            };
            for q in p..=end {
                if let TapeElement::Number(i) = tape.get(q) {
                    let s = tape.get_string(i);
                    if is_integer_literal(s) && s.parse::<i64>().is_err() {
                        let _ = self.0.set(s.to_owned());
                        return Ok(Arc::new(NullArray::new(pos.len())));
                    }
                }
            }
        }
        Ok(Arc::new(NullArray::new(pos.len())))
    }
}

/// The first integer literal that `int64` cannot hold in the field `name`
/// of `line` (one JSON object), read from arrow-json's tape, which keeps
/// numbers as written (serde_json's do not).
fn integer_beyond_i64(line: &[u8], name: &str) -> Option<String> {
    let found = Arc::new(OnceLock::new());
    let schema = Schema::new(vec![Field::new(name, DataType::Null, true)]);
    let mut decoder = ReaderBuilder::new(Arc::new(schema))
        .with_batch_size(1)
        .with_decoder_factory(Arc::new(Probe(found.clone())))
        .build_decoder()
        .ok()?;
    decoder.decode(line).ok()?;
    decoder.flush().ok()?;
    found.get().cloned()
}

/// The refusal of integer literal `big` in field `name`: inference never
/// makes such a column `float64` (it would round the integers).
fn beyond_i64_message(name: &str, big: &str) -> String {
    if big.parse::<u64>().is_ok() {
        format!(
            "the field {name:?} holds the integer {big}, beyond int64; give its type (uint64) \
             with --schema, or quote such values in the file (a string column)"
        )
    } else {
        format!(
            "the field {name:?} holds the integer {big}, beyond int64 and uint64: it would be \
             rounded to a float64; quote such values in the file (a string column), or give the \
             field's type with --schema (float64 takes only the integers it holds exactly)"
        )
    }
}

/// Infers a split's schema from the first `options.infer_rows` rows of its
/// files.
fn infer_schema(files: &[(PathBuf, String)], options: &JsonlOptions) -> Result<SplitSchema, Error> {
    let mut order: Vec<String> = Vec::new();
    // The kind of JSON value each field first held, and where.
    let mut kinds: HashMap<String, (&'static str, String, u64)> = HashMap::new();
    let mut lengths: HashMap<String, Vec<Length>> = HashMap::new();
    let mut failure: Option<Error> = None;
    let mut sampled = 0usize;
    let mut values = files.iter().flat_map(|(path, label)| {
        let mut line = Vec::new();
        let mut reader = match LineReader::open(path, label, options.max_line_bytes) {
            Ok(r) => Some(r),
            Err(e) => {
                failure.get_or_insert(e);
                None
            }
        };
        std::iter::from_fn(move || {
            let r = reader.as_mut()?;
            loop {
                line.clear();
                match r.next_line(Some(&mut line)) {
                    Ok(None) => return None,
                    Ok(Some(false)) => continue,
                    Ok(Some(true)) => {
                        return Some(match serde_json::from_slice::<Ordered>(&line) {
                            Ok(Ordered(entries)) => {
                                let big = entries.iter().find_map(|(k, v)| {
                                    maybe_beyond_i64(v)
                                        .then(|| integer_beyond_i64(&line, k).map(|b| (k, b)))
                                        .flatten()
                                });
                                match big {
                                    Some((k, big)) => Err(Error::at_line(
                                        label,
                                        r.line,
                                        beyond_i64_message(k, &big),
                                    )),
                                    None => Ok((entries, label.as_str(), r.line)),
                                }
                            }
                            Err(e) if e.is_data() => Err(Error::at_line(
                                label,
                                r.line,
                                "not a JSON object (each line of a JSON Lines file is one object)",
                            )),
                            Err(e) => Err(Error::at_line(
                                label,
                                r.line,
                                format!("not JSON: {e}{}", not_json_hint(&line)),
                            )),
                        });
                    }
                    Err(e) => return Some(Err(e)),
                }
            }
        })
    });
    // The iterator handed to arrow-json: values, the first error kept.
    let mut error = None;
    let inferred = arrow_json::reader::infer_json_schema_from_iterator(std::iter::from_fn(|| {
        if sampled >= options.infer_rows || error.is_some() {
            return None;
        }
        match values.next()? {
            Ok((entries, label, line)) => {
                sampled += 1;
                for (k, field) in &entries {
                    if let Some(kind) = json_kind(field) {
                        match kinds.get(k) {
                            None => {
                                kinds.insert(k.clone(), (kind, label.to_owned(), line));
                            }
                            Some((first, at, at_line)) if *first != kind => {
                                error = Some(Error::at_line(
                                    label,
                                    line,
                                    format!(
                                        "the field {k:?} holds {kind}, but {first} on line \
                                         {at_line} of {at}; give its type with --schema"
                                    ),
                                ));
                                return None;
                            }
                            Some(_) => {}
                        }
                    }
                    if !lengths.contains_key(k) {
                        order.push(k.clone());
                    }
                    note_lengths(field, 0, lengths.entry(k.clone()).or_default());
                }
                let map: serde_json::Map<String, Value> = entries.into_iter().collect();
                Some(Ok::<Value, ArrowError>(Value::Object(map)))
            }
            Err(e) => {
                error = Some(e);
                None
            }
        }
    }));
    drop(values);
    if let Some(e) = error.or(failure) {
        return Err(e);
    }
    let label = files
        .iter()
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let inferred = inferred.map_err(|e| Error::Source {
        file: label.clone(),
        detail: format!("cannot infer the columns' types: {e}"),
    })?;
    if sampled == 0 {
        return Err(Error::Source {
            file: label,
            detail: "holds no JSON object: nothing to infer the columns from (an empty file?)"
                .into(),
        });
    }
    if order.is_empty() {
        return Err(Error::Source {
            file: label,
            detail: "its objects have no fields".into(),
        });
    }
    let mut fields = Vec::with_capacity(order.len());
    for name in &order {
        let Ok(f) = inferred.field_with_name(name) else {
            continue;
        };
        let dt = fix_lengths(
            f.data_type(),
            lengths.get(name).map(Vec::as_slice).unwrap_or(&[]),
        );
        fields.push(Field::new(name, dt, true));
    }
    Ok(SplitSchema {
        schema: Arc::new(Schema::new(fields)),
        inferred: Some(sampled),
    })
}

/// One JSON Lines file of a split.
pub(crate) struct JsonlTable {
    path: PathBuf,
    label: String,
    schema: SplitSchema,
    max_line_bytes: u64,
    rows: u64,
    marks: Vec<Mark>,
}

impl JsonlTable {
    /// Opens `path` (named `label` in messages) and counts its rows.
    fn open(
        path: &Path,
        label: &str,
        schema: SplitSchema,
        max_line_bytes: u64,
    ) -> Result<JsonlTable, Error> {
        let mut reader = LineReader::open(path, label, max_line_bytes)?;
        let mut rows = 0u64;
        let mut marks = Vec::new();
        loop {
            let offset = reader.offset;
            match reader.next_line(None)? {
                None => break,
                Some(false) => {}
                Some(true) => {
                    if rows.is_multiple_of(INDEX_STRIDE) {
                        marks.push(Mark {
                            offset,
                            row: rows,
                            line: reader.line,
                        });
                    }
                    rows += 1;
                }
            }
        }
        Ok(JsonlTable {
            path: path.to_path_buf(),
            label: label.to_owned(),
            schema,
            max_line_bytes,
            rows,
            marks,
        })
    }
}

/// The batches of one scan of a JSONL file.
struct JsonlScan<'a> {
    table: &'a JsonlTable,
    reader: LineReader<'a>,
    decoder: Decoder,
    columns: &'a [usize],
    /// Rows still to skip before the first wanted one.
    skip: u64,
    /// Rows still wanted.
    left: u64,
    max_rows: usize,
    target_bytes: usize,
    /// The current batch's lines, each followed by a newline.
    text: Vec<u8>,
    /// Each row of the current batch: its end in `text`, its line.
    ends: Vec<(usize, u64)>,
    failed: bool,
}

impl JsonlScan<'_> {
    fn fail(&self, line: u64, detail: impl fmt::Display) -> Error {
        Error::at_line(&self.table.label, line, self.table.schema.explain(detail))
    }

    /// Finds the row of the batch that fails to decode alone.
    fn locate(&self, error: ArrowError) -> Error {
        let mut start = 0;
        for &(end, line) in &self.ends {
            let text = &self.text[start..end];
            start = end;
            let one = self.table.schema.decoder(1).and_then(|mut d| {
                d.decode(text)
                    .and_then(|_| d.flush())
                    .map_err(|e| self.fail(line, arrow_message(&e)))
            });
            if let Err(e) = one {
                return e;
            }
        }
        let first = self.ends.first().map_or(0, |e| e.1);
        let last = self.ends.last().map_or(0, |e| e.1);
        Error::Source {
            file: self.table.label.clone(),
            detail: format!(
                "lines {first} to {last}: {}",
                self.table.schema.explain(arrow_message(&error))
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
            match self.reader.next_line(Some(&mut self.text))? {
                None => {
                    return Err(Error::Source {
                        file: self.table.label.clone(),
                        detail: format!(
                            "the file ended {} rows early (did it change while it was read?)",
                            self.left - self.ends.len() as u64
                        ),
                    });
                }
                Some(false) => self.text.truncate(start),
                Some(true) if self.skip > 0 => {
                    self.skip -= 1;
                    self.text.truncate(start);
                }
                Some(true) => {
                    self.text.push(b'\n');
                    let line = self.reader.line;
                    let rows = self.ends.len();
                    self.ends.push((self.text.len(), line));
                    let fed = self.text.len() - start;
                    let used = self.decoder.decode(&self.text[start..]).map_err(|e| {
                        let hint = not_json_hint(&self.text[start..]);
                        self.fail(line, format!("{}{hint}", arrow_message(&e)))
                    })?;
                    if self.decoder.has_partial_record() {
                        return Err(self.fail(
                            line,
                            "not a complete JSON value (a truncated line?); each line of a JSON \
                             Lines file is one object",
                        ));
                    }
                    if used != fed || self.decoder.len() != rows + 1 {
                        return Err(self.fail(
                            line,
                            "holds more than one JSON value; each line of a JSON Lines file is \
                             one object",
                        ));
                    }
                }
            }
        }
        let batch = match self.decoder.flush() {
            Ok(Some(b)) => b,
            Ok(None) => RecordBatch::new_empty(self.table.schema.schema.clone()),
            Err(e) => return Err(self.locate(e)),
        };
        self.left -= batch.num_rows() as u64;
        batch
            .project(self.columns)
            .map_err(|e| Error::invalid(format!("cannot select the columns: {e}")))
    }
}

/// An arrow-json error's text, without its `Json error: ` prefix.
fn arrow_message(e: &ArrowError) -> String {
    match e {
        ArrowError::JsonError(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Iterator for JsonlScan<'_> {
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

impl TableSource for JsonlTable {
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
        // A fixed-size list takes its full length in every row, even a null
        // one: rows per batch are capped so that such columns stay within
        // the batch's byte target, however short their lines are.
        let fixed = fixed_row_bytes(&self.schema.schema);
        let max_rows = sizing
            .max_rows
            .min(sizing.target_bytes.max(1) / fixed.max(1))
            .max(1);
        let start = || -> Result<(LineReader<'a>, Decoder, u64), Error> {
            let mut reader = LineReader::open(&self.path, &self.label, self.max_line_bytes)?;
            let mark = self
                .marks
                .iter()
                .rev()
                .find(|m| m.row <= first)
                .copied()
                .unwrap_or(Mark {
                    offset: 0,
                    row: 0,
                    line: 1,
                });
            reader.seek(mark.offset, mark.line, &self.path)?;
            Ok((reader, self.schema.decoder(max_rows)?, first - mark.row))
        };
        match start() {
            Ok((reader, decoder, skip)) => Box::new(JsonlScan {
                table: self,
                reader,
                decoder,
                columns,
                skip,
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

/// Converts JSON Lines files (see the [module documentation](self)) to
/// stores under `out`: `out/<split>/<store>/`, or a part of each split
/// with [`TableOptions::part`](crate::table::TableOptions::part). The
/// table options of `source` apply (columns, text, nulls, codec, parts).
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `out` exists (for a whole conversion);
/// [`Error::Io`] for an input that cannot be read; [`Error::Source`] naming
/// the file and line of a line that is too long, not one JSON object, or
/// holds a value its column's type does not take, and naming the file of
/// one with no rows to infer types from; [`Error::UnknownColumn`],
/// [`Error::Column`] and [`Error::InvalidOption`] as the table layer
/// reports them; [`Error::Store`] from writing. A failed conversion leaves
/// nothing at `out`.
pub fn convert_jsonl(
    source: &LocalSource,
    jsonl: &JsonlOptions,
    out: impl AsRef<Path>,
) -> Result<TableSummary, Error> {
    source.table_options().check()?;
    jsonl.check()?;
    let splits = local_splits(source, Kind::Jsonl)?;
    let names: Vec<String> = splits.iter().map(|(name, _)| name.clone()).collect();
    let all_files: Vec<PathBuf> = splits.iter().flat_map(|(_, f)| f.iter().cloned()).collect();
    // Each split's files with their rows, to name the file and line of a
    // row the table layer refuses.
    let mut opened_files: Vec<(String, Vec<FileRows>)> = Vec::new();
    let open = || {
        let mut tables = Vec::with_capacity(splits.len());
        for (name, files) in &splits {
            let labelled: Vec<(PathBuf, String)> = files
                .iter()
                .map(|p| (p.clone(), p.display().to_string()))
                .collect();
            let schema = match &jsonl.schema {
                Some(s) => SplitSchema {
                    schema: s.clone(),
                    inferred: None,
                },
                None => infer_schema(&labelled, jsonl)?,
            };
            let mut opened: Vec<Box<dyn TableSource>> = Vec::with_capacity(files.len());
            let mut rows = Vec::with_capacity(files.len());
            for (path, label) in &labelled {
                let table = JsonlTable::open(path, label, schema.clone(), jsonl.max_line_bytes)?;
                rows.push(FileRows {
                    path: path.clone(),
                    label: label.clone(),
                    rows: table.rows,
                    marks: table.marks.clone(),
                    max_line_bytes: jsonl.max_line_bytes,
                });
                opened.push(Box::new(table));
            }
            opened_files.push((name.clone(), rows));
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

/// The context of the table layer's messages (`jsonl split "train"`).
const CONTEXT: &str = "jsonl";

/// One opened file of a split: where its rows are.
struct FileRows {
    path: PathBuf,
    label: String,
    rows: u64,
    marks: Vec<Mark>,
    max_line_bytes: u64,
}

impl FileRows {
    /// The line (from 1, counting every line) of row `row` (from 0).
    fn line_of(&self, row: u64) -> Result<u64, Error> {
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
        let mut reader = LineReader::open(&self.path, &self.label, self.max_line_bytes)?;
        reader.seek(mark.offset, mark.line, &self.path)?;
        let mut at = mark.row;
        loop {
            match reader.next_line(None)? {
                None => return Err(source_err(&self.path, "changed while it was read")),
                Some(false) => {}
                Some(true) if at == row => return Ok(reader.line),
                Some(true) => at += 1,
            }
        }
    }
}

/// A table-layer error about one split row (a null, an empty string, a
/// ragged list that is not rectangular, a string the tokenizer refuses),
/// which counts the rows of all of the split's files, made an error naming
/// the file and line that holds the row, as every other JSONL error does.
/// Any other error is returned as it is.
fn name_line(e: Error, splits: &[(String, Vec<FileRows>)]) -> Error {
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

    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        let mut f = File::create(&p).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        p
    }

    fn table(path: &Path, options: &JsonlOptions) -> Result<JsonlTable, Error> {
        let label = path.display().to_string();
        let schema = match &options.schema {
            Some(s) => SplitSchema {
                schema: s.clone(),
                inferred: None,
            },
            None => infer_schema(&[(path.to_path_buf(), label.clone())], options)?,
        };
        JsonlTable::open(path, &label, schema, options.max_line_bytes)
    }

    fn sizing(max_rows: usize) -> Sizing {
        Sizing {
            target_bytes: 1 << 20,
            extra_row_bytes: 0,
            max_rows,
        }
    }

    fn scan_all(
        t: &JsonlTable,
        rows: Option<(usize, usize)>,
        max_rows: usize,
    ) -> Result<Vec<RecordBatch>, Error> {
        let columns: Vec<usize> = (0..t.schema().fields().len()).collect();
        t.scan(&columns, rows, sizing(max_rows)).collect()
    }

    #[test]
    fn schema_mapping_parses_in_order() {
        let s = parse_schema(
            r#"{"z": "int64", "a": "list<int32>", "xy": "list<float32, 2>",
                "g": "list<list<uint8, 3>, 2>", "t": "string", "b": "bool"}"#,
        )
        .unwrap();
        let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["z", "a", "xy", "g", "t", "b"]);
        assert_eq!(*s.field(0).data_type(), DataType::Int64);
        assert!(matches!(s.field(1).data_type(), DataType::List(_)));
        assert!(matches!(
            s.field(2).data_type(),
            DataType::FixedSizeList(_, 2)
        ));
        let DataType::FixedSizeList(inner, 2) = s.field(3).data_type() else {
            panic!("{:?}", s.field(3))
        };
        assert!(matches!(inner.data_type(), DataType::FixedSizeList(_, 3)));
        for (bad, why) in [
            (r#"{"a": "int128"}"#, "not a type"),
            (r#"{"a": "list<int8, 0>"}"#, "positive"),
            (r#"{"a": 5}"#, "not a string"),
            (r#"[1]"#, "not a JSON object"),
            (r#"{}"#, "no field"),
            (r#"{"a": "int8", "a": "int16"}"#, "twice"),
        ] {
            let e = parse_schema(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn inference_orders_fields_and_fixes_equal_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.jsonl",
            "{\"b\": 1, \"a\": 1.5, \"xy\": [1, 2], \"tok\": [1], \"g\": [[1, 2], [3, 4]]}\n\
             \n\
             {\"b\": 2, \"a\": 2, \"xy\": [3, 4], \"tok\": [1, 2, 3], \"g\": [[5, 6]]}\n",
        );
        let t = table(&p, &JsonlOptions::new()).unwrap();
        assert_eq!(t.rows(), 2);
        let s = t.schema();
        let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["b", "a", "xy", "tok", "g"]);
        assert_eq!(*s.field(0).data_type(), DataType::Int64);
        assert_eq!(*s.field(1).data_type(), DataType::Float64);
        assert!(matches!(
            s.field(2).data_type(),
            DataType::FixedSizeList(_, 2)
        ));
        assert!(matches!(s.field(3).data_type(), DataType::List(_)));
        let DataType::List(inner) = s.field(4).data_type() else {
            panic!()
        };
        assert!(matches!(inner.data_type(), DataType::FixedSizeList(_, 2)));
        let batches = scan_all(&t, None, 10).unwrap();
        assert_eq!(batches.len(), 1);
        let b = batches[0].column(0).as_primitive::<Int64Type>();
        assert_eq!(b.values(), &[1, 2]);
    }

    #[test]
    fn scans_seek_to_their_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for i in 0..10_000 {
            text.push_str(&format!("{{\"i\": {i}}}\n"));
            if i % 7 == 0 {
                text.push_str("  \n");
            }
        }
        let p = write(dir.path(), "a.jsonl", &text);
        let t = table(&p, &JsonlOptions::new()).unwrap();
        assert_eq!(t.rows(), 10_000);
        assert_eq!(t.marks.len(), 3);
        for (first, count) in [(0, 10), (4095, 3), (4096, 5000), (9990, 10)] {
            let batches = scan_all(&t, Some((first, count)), 1000).unwrap();
            let got: Vec<i64> = batches
                .iter()
                .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect();
            let want: Vec<i64> = (first as i64..(first + count) as i64).collect();
            assert_eq!(got, want);
            assert!(batches.iter().all(|b| b.num_rows() <= 1000));
        }
    }

    fn scan_error(text: &str, options: &JsonlOptions) -> String {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "bad.jsonl", text);
        match table(&p, options) {
            Err(e) => e.to_string(),
            Ok(t) => scan_all(&t, None, 4).unwrap_err().to_string(),
        }
    }

    #[test]
    fn bad_lines_are_named() {
        let good: String = (0..20).map(|i| format!("{{\"a\": {i}}}\n")).collect();
        let small = JsonlOptions::new().infer_rows(5);
        for (bad, why) in [
            ("{\"a\": 1.5}\n", "1.5 is not an integer"),
            ("{\"a\": \"7\"}\n", "found the string \"7\""),
            ("{\"a\": 1} {\"a\": 2}\n", "more than one JSON value"),
            ("[1, 2]\n", "line 21"),
            ("5\n", "line 21"),
            ("{\"a\": 1, \"b\": 2}\n", "line 21"),
            ("{\"a\": 99999999999999999999}\n", "does not fit"),
            ("{\"a\": 3", "not a complete JSON value"),
            ("{\"a\" 3}\n", "line 21"),
        ] {
            let e = scan_error(&format!("{good}{bad}"), &small);
            assert!(e.contains("line 21"), "{bad}: {e}");
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains("bad.jsonl"), "{bad}: {e}");
        }
        // In the sample: named by the inference.
        let e = scan_error("{\"a\": 1}\n[1]\n", &JsonlOptions::new());
        assert!(e.contains("line 2: not a JSON object"), "{e}");
        let e = scan_error("{\"a\": 1}\n{\"a\": \n", &JsonlOptions::new());
        assert!(e.contains("line 2: not JSON"), "{e}");
        // Two kinds of value in one field of the sample.
        let e = scan_error(
            "{\"a\": 1}\n{\"a\": 2.5}\n{\"a\": \"x\"}\n",
            &JsonlOptions::new(),
        );
        assert!(
            e.contains("line 3: the field \"a\" holds a string, but a number on line 1"),
            "{e}"
        );
        // Integers beyond int64 in the sample are not rounded to float64.
        let e = scan_error(
            "{\"id\": 1}\n{\"id\": [2, 18446744073709551557]}\n",
            &JsonlOptions::new(),
        );
        assert!(
            e.contains("line 2: the field \"id\" holds the integer 18446744073709551557"),
            "{e}"
        );
        // A different list length than the sample's.
        let lists: String = (0..10).map(|_| "{\"a\": [1, 2]}\n".to_owned()).collect();
        let e = scan_error(&format!("{lists}{{\"a\": [1]}}\n"), &small);
        assert!(e.contains("line 11"), "{e}");
        assert!(e.contains("--infer-rows"), "{e}");
    }

    /// The values of column 0 of `text` (one file), as `f64`, or the error.
    fn floats(text: &str, options: &JsonlOptions) -> Result<Vec<f64>, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "n.jsonl", text);
        let t = table(&p, options).map_err(|e| e.to_string())?;
        let batches = scan_all(&t, None, 3).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for b in &batches {
            let mut c = b.column(0).clone();
            if let DataType::List(_) = c.data_type() {
                c = c.as_list::<i32>().values().clone();
            }
            match c.data_type() {
                DataType::Float64 => out.extend(c.as_primitive::<Float64Type>().values()),
                DataType::Float32 => out.extend(
                    c.as_primitive::<Float32Type>()
                        .values()
                        .iter()
                        .map(|&v| f64::from(v)),
                ),
                DataType::Float16 => out.extend(
                    c.as_primitive::<Float16Type>()
                        .values()
                        .iter()
                        .map(|v| v.to_f64()),
                ),
                other => panic!("{other}"),
            }
        }
        Ok(out)
    }

    #[test]
    fn integers_beyond_the_column_type_are_refused_never_rounded() {
        // Beyond uint64 (serde_json reads it as a float): never a float64
        // column, in the sample, also in a list, also below int64.
        for (text, big) in [
            (
                "{\"id\": 1}\n{\"id\": 9007199254740993}\n{\"id\": 100000000000000000000}\n",
                "100000000000000000000",
            ),
            (
                "{\"id\": 1}\n{\"id\": 2}\n{\"id\": -9223372036854775809}\n",
                "-9223372036854775809",
            ),
            (
                "{\"id\": [1]}\n{\"id\": [3]}\n{\"id\": [2, 100000000000000000000]}\n",
                "100000000000000000000",
            ),
        ] {
            let e = scan_error(text, &JsonlOptions::new());
            assert!(
                e.contains(&format!(
                    "bad.jsonl: line 3: the field \"id\" holds the integer {big}, beyond int64 and uint64"
                )),
                "{e}"
            );
            assert!(e.contains("quote such values"), "{e}");
        }
        // Written as floats, the same magnitudes are a float64 column.
        assert_eq!(
            floats(
                "{\"x\": 1e20}\n{\"x\": 100000000000000000000.0}\n",
                &JsonlOptions::new()
            )
            .unwrap(),
            [1e20, 1e20]
        );
        // Past the sample, in an int64 column: refused by its line.
        let e = scan_error(
            "{\"id\": 1}\n{\"id\": 100000000000000000000}\n",
            &JsonlOptions::new().infer_rows(1),
        );
        assert!(e.contains("line 2: "), "{e}");
        assert!(
            e.contains("the integer 100000000000000000000 does not fit"),
            "{e}"
        );
        assert!(e.contains("'id'"), "{e}");
        // A float column keeps an integer only when it is exact; a
        // fraction asks for the nearest float.
        let e = floats(
            "{\"x\": 0.5}\n{\"x\": 9007199254740993}\n",
            &JsonlOptions::new(),
        )
        .unwrap_err();
        assert!(e.contains("line 2: "), "{e}");
        assert!(
            e.contains("the integer 9007199254740993 is not exactly a Float64 (it would become 9007199254740992)"),
            "{e}"
        );
        assert_eq!(
            floats(
                "{\"x\": 0.5}\n{\"x\": 9007199254740992}\n{\"x\": 9007199254740993.0}\n",
                &JsonlOptions::new()
            )
            .unwrap(),
            [0.5, 9007199254740992.0, 9007199254740992.0]
        );
        // Given float64, an integer beyond uint64 that it holds exactly.
        let float64 = JsonlOptions::new().schema(parse_schema(r#"{"x": "float64"}"#).unwrap());
        assert_eq!(
            floats("{\"x\": -100000000000000000000}\n", &float64).unwrap(),
            [-1e20]
        );
        for (ty, fits, rounds) in [
            ("float64", "9007199254740992", "9007199254740993"),
            ("float32", "16777216", "16777217"),
            ("float16", "2048", "2049"),
            ("list<float32>", "[16777216]", "[1, 16777217]"),
        ] {
            let schema =
                JsonlOptions::new().schema(parse_schema(&format!("{{\"x\": \"{ty}\"}}")).unwrap());
            floats(&format!("{{\"x\": {fits}}}\n"), &schema)
                .unwrap_or_else(|e| panic!("{ty}: {e}"));
            let e = floats(
                &format!("{{\"x\": {fits}}}\n{{\"x\": {rounds}}}\n"),
                &schema,
            )
            .unwrap_err();
            assert!(
                e.contains("line 2: ") && e.contains("is not exactly a"),
                "{ty}: {e}"
            );
        }
    }

    #[test]
    fn what_real_producers_write_reads() {
        // A byte order mark (Windows tools), CRLF line ends, a blank CRLF
        // line, a surrogate pair, a last line without a newline.
        let text = "\u{feff}{\"a\": 1, \"s\": \"\\ud83d\\ude00\"}\r\n\r\n{\"a\": 2, \"s\": \"x\"}\r\n\
                    {\"a\": 3, \"s\": \"y\"}";
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "bom.jsonl", text);
        let t = table(&p, &JsonlOptions::new()).unwrap();
        assert_eq!(t.rows(), 3);
        for (first, count) in [(0, 3), (0, 1), (2, 1)] {
            let b = &scan_all(&t, Some((first, count)), 10).unwrap()[0];
            let want: Vec<i64> = (first as i64 + 1..=(first + count) as i64).collect();
            assert_eq!(b.column(0).as_primitive::<Int64Type>().values(), &want[..]);
            if first == 0 {
                assert_eq!(b.column(1).as_string::<i32>().value(0), "\u{1f600}");
            }
        }
        // NaN and Infinity, which Python's json writes: refused by line,
        // with the reason, in the sample and past it.
        let e = scan_error("{\"a\": 1.5}\n{\"a\": NaN}\n", &JsonlOptions::new());
        assert!(e.contains("line 2: not JSON"), "{e}");
        assert!(e.contains("NaN and Infinity are not JSON"), "{e}");
        let e = scan_error(
            "{\"a\": 1.5}\n{\"a\": 2.5}\n{\"a\": -Infinity}\n",
            &JsonlOptions::new().infer_rows(1),
        );
        assert!(e.contains("line 3: "), "{e}");
        assert!(e.contains("NaN and Infinity are not JSON"), "{e}");
    }

    #[test]
    fn long_lines_are_refused_without_reading_them() {
        let long = format!("{{\"a\": \"{}\"}}\n", "x".repeat(1000));
        let options = JsonlOptions::new().max_line_bytes(100);
        let e = scan_error(&format!("{{\"a\": \"x\"}}\n{long}"), &options);
        assert!(e.contains("line 2: longer than 100 bytes"), "{e}");
        // Past the sample, in the count pass.
        let e = scan_error(
            &format!("{{\"a\": \"x\"}}\n{{\"a\": \"y\"}}\n{long}"),
            &options.clone().infer_rows(1),
        );
        assert!(e.contains("line 3: longer than 100 bytes"), "{e}");
    }

    #[test]
    fn empty_files_and_given_schemas() {
        let e = scan_error("", &JsonlOptions::new());
        assert!(e.contains("holds no JSON object"), "{e}");
        let e = scan_error("\n \n", &JsonlOptions::new());
        assert!(e.contains("holds no JSON object"), "{e}");
        // A given schema narrows and ignores other fields.
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.jsonl",
            "{\"a\": 1, \"x\": 0.5, \"other\": {}}\n{\"a\": 255, \"x\": 1e3}\n",
        );
        let schema = parse_schema(r#"{"a": "uint8", "x": "float32"}"#).unwrap();
        let t = table(&p, &JsonlOptions::new().schema(schema.clone())).unwrap();
        let b = &scan_all(&t, None, 10).unwrap()[0];
        assert_eq!(b.column(0).as_primitive::<UInt8Type>().values(), &[1, 255]);
        assert_eq!(
            b.column(1).as_primitive::<Float32Type>().values(),
            &[0.5, 1000.0]
        );
        let p = write(dir.path(), "b.jsonl", "{\"a\": 256, \"x\": 1}\n");
        let t = table(&p, &JsonlOptions::new().schema(schema)).unwrap();
        let e = scan_all(&t, None, 10).unwrap_err().to_string();
        assert!(e.contains("line 1: "), "{e}");
        assert!(e.contains("256 does not fit"), "{e}");
        assert!(!e.contains("--infer-rows"), "{e}");
    }
}
