//! NumPy arrays (`.npy` files and `.npz` archives) to Zrecord.
//!
//! Every array becomes one Dense store, `OUT/<split>/<stream>/`: axis 0
//! counts the records, the other axes are the item shape (a 1-D array
//! gives scalar records). The stream is named after the file's stem
//! (`image.npy` → `image`) or the archive member's key (`np.savez(f,
//! label=…)` → `label`); every array of one conversion must have the same
//! length on axis 0.
//!
//! - Element types: every one NumPy writes that a store holds: `bool`,
//!   `int8`..`int64`, `uint8`..`uint64`, `float16`, `float32`, `float64`,
//!   `complex64`, `complex128`. Object (pickled), string, structured,
//!   datetime and long-double arrays are refused, naming the file and the
//!   type.
//! - Big-endian arrays are byte-swapped to the stores' little-endian;
//!   Fortran-order arrays are converted to C order a chunk of records at a
//!   time.
//! - Memory: files are memory-mapped and written in chunks of
//!   [`NpyOptions::chunk_bytes`] (64 MiB), so a 50 GB array converts in
//!   memory of a few chunks. Stored (uncompressed) members of an `.npz`
//!   (`np.savez`) are mapped in place, their CRC-32 checked first (one
//!   pass over the member); deflated ones (`np.savez_compressed`) are
//!   inflated as a stream, read to their end so that zip checks their
//!   CRC-32, except a Fortran-order one or one written with the
//!   `zstd_dict` codec, which is inflated into an unnamed temporary file
//!   beside the output first (both need random access).
//! - Headers are read by [`ndarray_npy`]'s parser (versions 1.0 to 3.0),
//!   and at most [`MAX_HEADER_BYTES`] of them, as NumPy's `np.load` limits
//!   them; a header whose shape needs more bytes than the file holds, or
//!   more than the address space, is an error naming the file.
//!
//! As every converter of this crate, the output is built aside and renamed
//! into place when every store closed: a failed conversion leaves nothing.
//!
//! ```no_run
//! use loaderx_core::Codec;
//! use loaderx_convert::npy::{NpyOptions, convert_npy};
//!
//! // x.npy: (60000, 28, 28) uint8, y.npy: (60000,) int64.
//! let summary = convert_npy(&["x.npy", "y.npy"], "mnist", &NpyOptions::new(Codec::Zstd, 4))?;
//! assert_eq!(summary.records, 60_000);
//! // mnist/train/x: u8 records of [28, 28]; mnist/train/y: scalar i64 records.
//! # Ok::<(), loaderx_convert::Error>(())
//! ```
//!
//! [`convert_npy_part`] writes one part of a multi-part dataset, cut by
//! rows, as [`convert_idx_part`](crate::idx::convert_idx_part) does.

use std::fmt;
use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use ndarray_npy::npy::header::Header;
use zip::{CompressionMethod, ZipArchive};

use loaderx_core::{Codec, CreateOptions, DType, Dataset, DynDenseWriter, Generation, train_dict};

use crate::codec::{CodecChoice, CodecDecision, Sampler, sample_indices};
use crate::error::Error;
use crate::output::{PartLock, StagedRoot};

/// The most header bytes (magic, version, length and the header text) a
/// file may have: NumPy's `np.load` refuses headers over 10 000 bytes of
/// text by default; this allows a little more, and never lets a lying
/// header length make the parser read (or allocate for) more.
pub const MAX_HEADER_BYTES: u64 = 16 * 1024;

/// The default [`NpyOptions::chunk_bytes`]: 64 MiB.
pub const DEFAULT_CHUNK_BYTES: usize = 64 << 20;

/// Which stores [`convert_npy`] and [`convert_npy_part`] write, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NpyOptions {
    /// The codec: forced, or chosen per stream from a sample of its
    /// records ([`crate::codec`]).
    pub codec: CodecChoice,
    /// Payload shards per store.
    pub shards: usize,
    /// The format generation.
    pub generation: Generation,
    /// The split every stream is written to (`train` by default).
    pub split: String,
    /// About how many bytes of records are read, converted and appended at
    /// once ([`DEFAULT_CHUNK_BYTES`]); at least one record.
    pub chunk_bytes: usize,
}

impl NpyOptions {
    /// `codec`, `shards` payload shards, the default generation, split
    /// `train`, chunks of 64 MiB.
    ///
    /// `codec` is a [`Codec`], or [`CodecChoice::Auto`] (or `None`) for a
    /// choice per stream.
    pub fn new(codec: impl Into<CodecChoice>, shards: usize) -> NpyOptions {
        NpyOptions {
            codec: codec.into(),
            shards,
            generation: Generation::DEFAULT,
            split: "train".to_owned(),
            chunk_bytes: DEFAULT_CHUNK_BYTES,
        }
    }

    /// The format generation of the stores.
    pub fn generation(mut self, generation: Generation) -> NpyOptions {
        self.generation = generation;
        self
    }

    /// The split the streams are written to.
    pub fn split(mut self, split: impl Into<String>) -> NpyOptions {
        self.split = split.into();
        self
    }

    /// About how many bytes are converted at once (at least one record).
    pub fn chunk_bytes(mut self, bytes: usize) -> NpyOptions {
        self.chunk_bytes = bytes;
        self
    }
}

/// One converted array.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NpyStream {
    /// The stream (store) name.
    pub name: String,
    /// The file it was read from (for an `.npz` member, the archive).
    pub path: PathBuf,
    /// The `.npz` member (`label.npy`), if any.
    pub member: Option<String>,
    /// Element type.
    pub dtype: DType,
    /// Shape of one record (axes 1.. of the array).
    pub item_shape: Vec<usize>,
    /// The array was big-endian (its elements were byte-swapped).
    pub big_endian: bool,
    /// The array was in Fortran order (it was converted to C order).
    pub fortran_order: bool,
    /// The store's codec, and why.
    pub codec: CodecDecision,
}

/// What [`convert_npy`] or [`convert_npy_part`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NpySummary {
    /// The published root (for a part, the output root holding the parts).
    pub root: PathBuf,
    /// The split.
    pub split: String,
    /// Records in each store (for a part, in this part).
    pub records: u64,
    /// Records of the arrays (axis 0).
    pub source_records: u64,
    /// `(part, parts)` for a part writer.
    pub part: Option<(u64, u64)>,
    /// The streams, in the order the arrays were given.
    pub streams: Vec<NpyStream>,
}

impl fmt::Display for NpySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wrote {} ({}", self.root.display(), self.split)?;
        if let Some((part, parts)) = self.part {
            write!(
                f,
                " part {part} of {parts}: {} of {} records",
                self.records, self.source_records
            )?;
        } else {
            write!(f, ": {} records", self.records)?;
        }
        for s in &self.streams {
            write!(f, "; {}: {} {:?}", s.name, s.dtype, s.item_shape)?;
        }
        write!(f, ")")?;
        for s in &self.streams {
            write!(f, "\n  {}: {}", s.name, s.codec)?;
        }
        Ok(())
    }
}

/// Where an array comes from, for error messages.
#[derive(Debug, Clone)]
struct Origin {
    path: PathBuf,
    member: Option<String>,
}

impl Origin {
    fn error(&self, detail: impl fmt::Display) -> Error {
        Error::Npy {
            path: self.path.clone(),
            detail: match &self.member {
                Some(m) => format!("member {m:?}: {detail}"),
                None => detail.to_string(),
            },
        }
    }

    fn label(&self) -> String {
        match &self.member {
            Some(m) => format!("{}:{m}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }
}

/// Where an array's elements are.
#[derive(Debug, Clone, Copy)]
enum Body<'a> {
    /// Memory-mapped (a `.npy` file or a stored `.npz` member): the bytes
    /// after the header, at least as many as the shape needs.
    Mapped(&'a [u8]),
    /// A deflated `.npz` member: the archive's bytes and the member's index.
    Deflated { archive: &'a [u8], index: usize },
}

/// One array to convert, its header read and checked.
#[derive(Debug)]
struct Array<'a> {
    origin: Origin,
    name: String,
    dtype: DType,
    /// Byte-swap each element (each half of a complex one).
    swap: bool,
    fortran: bool,
    rows: u64,
    item_shape: Vec<usize>,
    record_bytes: usize,
    /// Bytes of the header (before the data).
    header_bytes: u64,
    body: Body<'a>,
}

const NPY_MAGIC: &[u8] = b"\x93NUMPY";
const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
const EMPTY_ZIP_MAGIC: &[u8] = b"PK\x05\x06";

/// The store type of NumPy type string `descr` (`<f4`, `>i8`, `|b1`) and
/// whether its elements must be byte-swapped; else what it is, for the
/// refusal.
fn element_type(descr: &str) -> Result<(DType, bool), String> {
    let mut chars = descr.chars();
    let order = chars.next().unwrap_or(' ');
    let (order, rest) = if matches!(order, '<' | '>' | '|' | '=') {
        (order, chars.as_str())
    } else {
        ('=', descr)
    };
    let kind = rest.chars().next().unwrap_or(' ');
    let size: Option<usize> = rest.get(1..).and_then(|s| s.parse().ok());
    let dtype = match (kind, size) {
        ('b', Some(1)) | ('?', None) => DType::Bool,
        ('i', Some(1)) => DType::I8,
        ('i', Some(2)) => DType::I16,
        ('i', Some(4)) => DType::I32,
        ('i', Some(8)) => DType::I64,
        ('u', Some(1)) => DType::U8,
        ('u', Some(2)) => DType::U16,
        ('u', Some(4)) => DType::U32,
        ('u', Some(8)) => DType::U64,
        ('f', Some(2)) => DType::F16,
        ('f', Some(4)) => DType::F32,
        ('f', Some(8)) => DType::F64,
        ('c', Some(8)) => DType::C64,
        ('c', Some(16)) => DType::C128,
        _ => {
            let what = match kind {
                'O' => "Python objects, pickled",
                'U' => "unicode strings",
                'S' | 'a' => "byte strings",
                'V' => "raw bytes (void)",
                'M' => "datetime64",
                'm' => "timedelta64",
                'f' => "a float of this size (long double?)",
                'c' => "a complex of this size (long double?)",
                _ => "unknown",
            };
            let descr: String = descr.chars().take(40).collect();
            return Err(format!(
                "element type {descr:?} ({what}) is not one a store holds \
                 (bool, int8..int64, uint8..uint64, float16/32/64, complex64/128)"
            ));
        }
    };
    // Only multi-byte big-endian elements need swapping.
    Ok((dtype, order == '>' && dtype.size() > 1))
}

/// Reads the header at the start of `reader`: returns it and how many
/// bytes it took. At most [`MAX_HEADER_BYTES`] are read (for a stream,
/// some of its data too: skip the header's length to reach the data).
///
/// The header text is a Python literal, parsed recursively and with
/// backtracking: its bracket nesting is checked first
/// ([`check_nesting`](crate::npy_header::check_nesting)), so the parser
/// neither runs deep on the stack nor for long.
fn read_header(reader: impl Read, origin: &Origin) -> Result<(Header, u64), Error> {
    let mut head = Vec::new();
    reader
        .take(MAX_HEADER_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| origin.error(format!("cannot read the .npy header: {e}")))?;
    crate::npy_header::check_nesting(&head)
        .map_err(|e| origin.error(format!("not a readable .npy header: {e}")))?;
    let mut cursor = Cursor::new(&head[..]);
    let header = Header::from_reader(&mut cursor).map_err(|e| {
        origin.error(format!(
            "not a readable .npy header (of at most {MAX_HEADER_BYTES} bytes): {e}"
        ))
    })?;
    Ok((header, cursor.position()))
}

/// Interprets a parsed header: the array's type, shape and size, checked.
/// `available` is how many data bytes follow the header (`None`: unknown,
/// checked while reading).
fn describe<'a>(
    (header, header_bytes): (Header, u64),
    origin: Origin,
    name: String,
    available: Option<u64>,
    body: Body<'a>,
) -> Result<Array<'a>, Error> {
    let descr = match header.type_descriptor.as_string() {
        Some(s) => s.clone(),
        None => {
            return Err(origin.error(format!(
                "a structured element type ({}) is not one a store holds; save each field as its own array",
                header.type_descriptor
            )));
        }
    };
    let (dtype, swap) = element_type(&descr).map_err(|e| origin.error(e))?;
    let shape = &header.shape;
    let Some((&rows, item_shape)) = shape.split_first() else {
        return Err(origin
            .error("a 0-dimensional array has no records (axis 0); save it with a first axis"));
    };
    let record_bytes = item_shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
    let total = record_bytes
        .and_then(|r| r.checked_mul(rows))
        .filter(|&t| isize::try_from(t).is_ok());
    let (Some(record_bytes), Some(total)) = (record_bytes, total) else {
        return Err(origin.error(format!(
            "shape {shape:?} of {descr} elements overflows the address space (a lying header?)"
        )));
    };
    if record_bytes == 0 {
        return Err(origin.error(format!(
            "shape {shape:?}: records of 0 bytes (item shape {item_shape:?}) cannot be stored"
        )));
    }
    if let Some(available) = available
        && available < total as u64
    {
        return Err(origin.error(format!(
            "truncated: shape {shape:?} of {descr} elements needs {total} bytes of data, the file holds {available}"
        )));
    }
    Ok(Array {
        origin,
        name,
        dtype,
        swap,
        fortran: header.layout.is_fortran() && item_shape.iter().any(|&d| d > 1),
        rows: rows as u64,
        item_shape: item_shape.to_vec(),
        record_bytes,
        header_bytes,
        body,
    })
}

/// Maps `path` read-only.
fn map(path: &Path) -> Result<Mmap, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and private to this conversion; like
    // every reader of a memory-mapped file (NumPy's `mmap_mode` included)
    // it assumes the file is not truncated or rewritten while it converts.
    unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

/// The arrays of `.npy` file or `.npz` archive `path`, mapped as `bytes`.
fn arrays_of<'a>(path: &Path, bytes: &'a [u8], out: &mut Vec<Array<'a>>) -> Result<(), Error> {
    let file_origin = Origin {
        path: path.to_path_buf(),
        member: None,
    };
    if bytes.starts_with(NPY_MAGIC) {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let header = read_header(bytes, &file_origin)?;
        let data = bytes.get(header.1 as usize..).unwrap_or_default();
        out.push(describe(
            header,
            file_origin,
            name,
            Some(data.len() as u64),
            Body::Mapped(data),
        )?);
        return Ok(());
    }
    if !(bytes.starts_with(ZIP_MAGIC) || bytes.starts_with(EMPTY_ZIP_MAGIC)) {
        return Err(file_origin.error("neither a .npy file nor an .npz archive (bad magic)"));
    }
    let mut archive = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| file_origin.error(format!("not a readable .npz archive: {e}")))?;
    let before = out.len();
    for index in 0..archive.len() {
        let mut member = archive
            .by_index(index)
            .map_err(|e| file_origin.error(format!("archive member {index}: {e}")))?;
        let member_name = String::from_utf8_lossy(member.name_raw()).into_owned();
        if member.is_dir() {
            continue;
        }
        let origin = Origin {
            path: path.to_path_buf(),
            member: Some(member_name.clone()),
        };
        let Some(name) = member_name.strip_suffix(".npy") else {
            return Err(origin.error("not a .npy array (an .npz holds only NAME.npy members)"));
        };
        let name = name.to_owned();
        match member.compression() {
            CompressionMethod::Stored => {
                let start = member.data_start().map(|s| s as usize);
                let size = member.size();
                let data = start
                    .zip(usize::try_from(size).ok())
                    .filter(|_| member.compressed_size() == size)
                    .and_then(|(start, size)| bytes.get(start..start.checked_add(size)?))
                    .ok_or_else(|| {
                        origin.error(format!(
                            "stored member of {size} bytes lies outside the archive (truncated?)"
                        ))
                    })?;
                // Mapped in place, never read through zip: its CRC-32 is
                // checked here, once (zip checks a deflated member's as it
                // is inflated to its end).
                let mut crc = flate2::Crc::new();
                crc.update(data);
                if crc.sum() != member.crc32() {
                    return Err(origin.error(format!(
                        "damaged: the member's bytes have the CRC-32 {:08x}, the archive \
                         records {:08x}",
                        crc.sum(),
                        member.crc32()
                    )));
                }
                let header = read_header(data, &origin)?;
                let data = data.get(header.1 as usize..).unwrap_or_default();
                out.push(describe(
                    header,
                    origin,
                    name,
                    Some(data.len() as u64),
                    Body::Mapped(data),
                )?);
            }
            CompressionMethod::Deflated => {
                let size = member.size();
                let header = read_header(&mut member, &origin)?;
                let available = size.saturating_sub(header.1);
                out.push(describe(
                    header,
                    origin,
                    name,
                    Some(available),
                    Body::Deflated {
                        archive: bytes,
                        index,
                    },
                )?);
            }
            other => {
                return Err(origin.error(format!(
                    "compression method {other} is not one NumPy writes (stored or deflated)"
                )));
            }
        }
    }
    if out.len() == before {
        return Err(file_origin.error("the archive holds no arrays"));
    }
    Ok(())
}

/// Checks names and lengths across the arrays of one conversion.
fn check_arrays(arrays: &[Array<'_>], split: &str) -> Result<(), Error> {
    crate::output::safe_component("split", split)?;
    for (i, a) in arrays.iter().enumerate() {
        Dataset::check_stream_name(&a.name)
            .map_err(|e| a.origin.error(format!("stream name {:?}: {e}", a.name)))?;
        if let Some(b) = arrays[..i].iter().find(|b| b.name == a.name) {
            return Err(a.origin.error(format!(
                "stream {:?} is also the name of {}; rename one file",
                a.name,
                b.origin.label()
            )));
        }
        let first = &arrays[0];
        if a.rows != first.rows {
            return Err(a.origin.error(format!(
                "{} records (axis 0) but {} has {}: every array of a conversion must have the same length",
                a.rows,
                first.origin.label(),
                first.rows
            )));
        }
    }
    Ok(())
}

/// Reverses the bytes of every element (every half of a complex one).
fn swap_bytes(buf: &mut [u8], dtype: DType) {
    let unit = if dtype.is_complex() {
        dtype.size() / 2
    } else {
        dtype.size()
    };
    if unit > 1 {
        buf.chunks_exact_mut(unit).for_each(<[u8]>::reverse);
    }
}

impl Array<'_> {
    /// Records `r0..r1` of a Fortran-order array whose bytes are `data`,
    /// in C order, into `out` (`(r1 - r0) * record_bytes` bytes).
    fn gather_fortran(&self, data: &[u8], r0: usize, r1: usize, out: &mut [u8]) {
        let es = self.dtype.size();
        let n = self.rows as usize;
        let dims = &self.item_shape;
        let m = self.record_bytes / es;
        // C-order strides of the item axes, in elements.
        let mut strides = vec![1usize; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * dims[d + 1];
        }
        // Walk the item's elements in Fortran order (axis 1 fastest): each
        // is a contiguous run over the records; `c` is its C-order index.
        let mut index = vec![0usize; dims.len()];
        let mut c = 0usize;
        for j in 0..m {
            let run = &data[(j * n + r0) * es..(j * n + r1) * es];
            for (r, e) in run.chunks_exact(es).enumerate() {
                let at = (r * m + c) * es;
                out[at..at + es].copy_from_slice(e);
            }
            for d in 0..dims.len() {
                index[d] += 1;
                c += strides[d];
                if index[d] < dims[d] {
                    break;
                }
                c -= index[d] * strides[d];
                index[d] = 0;
            }
        }
    }

    /// Records `r0..r1` of mapped bytes `data` as canonical bytes (C order,
    /// little-endian): borrowed when already so, else made in `buf`.
    fn canonical<'b>(&self, data: &'b [u8], r0: u64, r1: u64, buf: &'b mut Vec<u8>) -> &'b [u8] {
        let (r0, r1) = (r0 as usize, r1 as usize);
        let rb = self.record_bytes;
        if !self.fortran && !self.swap {
            return &data[r0 * rb..r1 * rb];
        }
        buf.clear();
        if self.fortran {
            buf.resize((r1 - r0) * rb, 0);
            self.gather_fortran(data, r0, r1, buf);
        } else {
            buf.extend_from_slice(&data[r0 * rb..r1 * rb]);
        }
        if self.swap {
            swap_bytes(buf, self.dtype);
        }
        buf
    }

    /// Fails on a `bool` byte other than 0 or 1 among `records`, which
    /// start at record `first`.
    fn check_bools(&self, records: &[u8], first: u64) -> Result<(), Error> {
        if self.dtype == DType::Bool
            && let Some(at) = records.iter().position(|&b| b > 1)
        {
            return Err(self.origin.error(format!(
                "record {}: byte {} is not a bool (0 or 1)",
                first + (at / self.record_bytes) as u64,
                records[at]
            )));
        }
        Ok(())
    }

    /// Rows per chunk of about `chunk_bytes`.
    fn chunk_rows(&self, chunk_bytes: usize) -> u64 {
        (chunk_bytes / self.record_bytes).max(1) as u64
    }

    /// A dictionary trained on an evenly strided sample of records
    /// `range` of mapped bytes `data`.
    fn train(&self, data: &[u8], range: std::ops::Range<u64>) -> Result<Vec<u8>, Error> {
        let n = range.end - range.start;
        let fit = (loaderx_core::DICT_SAMPLE_BYTES / self.record_bytes).max(1) as u64;
        let take = n.min(fit).max(1);
        let mut buf = Vec::new();
        let mut records = Vec::new();
        for k in 0..take {
            let r = range.start + k * n / take;
            records.push(self.canonical(data, r, r + 1, &mut buf).to_vec());
        }
        Ok(train_dict(&records)?)
    }

    /// The codec of a store at `path` of `records` records: `choice`'s
    /// when forced, else from a sample spread over them, `add(i, sampler)`
    /// adding record `i`'s canonical bytes to the sampler.
    fn choose_codec(
        path: &Path,
        choice: CodecChoice,
        records: u64,
        mut add: impl FnMut(u64, &mut Sampler) -> io::Result<()>,
    ) -> Result<CodecDecision, Error> {
        if let CodecChoice::Fixed(codec) = choice {
            return Ok(CodecDecision::fixed(codec));
        }
        let mut sampler = Sampler::new(None).map_err(|e| Error::io(path, e))?;
        for i in sample_indices(records) {
            if sampler.full() {
                break;
            }
            add(i, &mut sampler).map_err(|e| Error::io(path, e))?;
        }
        Ok(sampler.decision())
    }

    /// Writes records `range` to a new store at `path`; returns its codec
    /// and why.
    fn write(
        &self,
        path: &Path,
        range: std::ops::Range<u64>,
        options: &NpyOptions,
        spool_dir: &Path,
    ) -> Result<CodecDecision, Error> {
        let dict = options.codec == CodecChoice::Fixed(Codec::ZstdDict);
        let spooled;
        let data = match self.body {
            Body::Mapped(data) => Some(data),
            Body::Deflated { .. } if self.fortran || dict => {
                spooled = self.spool(spool_dir)?;
                Some(&spooled[..])
            }
            Body::Deflated { .. } => None,
        };
        let create = |decision: CodecDecision| -> Result<DynDenseWriter, Error> {
            let mut create = CreateOptions::new(decision.codec)
                .data_shards(options.shards)
                .generation(options.generation);
            if decision.codec == Codec::ZstdDict
                && range.end > range.start
                && let Some(data) = data
            {
                create = create.dict_bytes(self.train(data, range.clone())?);
            }
            Ok(DynDenseWriter::create(
                path,
                self.dtype,
                &self.item_shape,
                &create,
            )?)
        };
        let step = self.chunk_rows(options.chunk_bytes);
        let mut buf = Vec::new();
        let rb = self.record_bytes;
        let (w, decision) = match (data, self.body) {
            (Some(data), _) => {
                let decision =
                    Self::choose_codec(path, options.codec, range.end - range.start, |i, s| {
                        let r = range.start + i;
                        s.add(&[], self.canonical(data, r, r + 1, &mut buf))
                    })?;
                let mut w = create(decision)?;
                let mut r0 = range.start;
                while r0 < range.end {
                    let r1 = (r0 + step).min(range.end);
                    let chunk = self.canonical(data, r0, r1, &mut buf);
                    self.check_bools(chunk, r0)?;
                    w.append_bytes(chunk, (r1 - r0) as usize)?;
                    r0 = r1;
                }
                (w, decision)
            }
            (None, Body::Deflated { archive, index }) => {
                // The codec is chosen from the first chunk.
                let mut opened: Option<(DynDenseWriter, CodecDecision)> = None;
                self.stream(archive, index, range.clone(), step, |chunk, first, rows| {
                    self.check_bools(chunk, first)?;
                    let (w, _) = match &mut opened {
                        Some(o) => o,
                        None => {
                            let decision =
                                Self::choose_codec(path, options.codec, rows as u64, |i, s| {
                                    let at = usize::try_from(i).unwrap_or(usize::MAX) * rb;
                                    s.add(&[], &chunk[at..at + rb])
                                })?;
                            opened.insert((create(decision)?, decision))
                        }
                    };
                    Ok(w.append_bytes(chunk, rows)?)
                })?;
                match opened {
                    Some(o) => o,
                    None => {
                        let decision = Self::choose_codec(path, options.codec, 0, |_, _| Ok(()))?;
                        (create(decision)?, decision)
                    }
                }
            }
            (None, Body::Mapped(_)) => {
                let decision = Self::choose_codec(path, options.codec, 0, |_, _| Ok(()))?;
                (create(decision)?, decision)
            }
        };
        w.close()?;
        Ok(decision)
    }

    /// Inflates deflated member `index` of `archive` and hands records
    /// `range` to `sink` in chunks of `step` records, canonical (C order,
    /// little-endian); then reads the member to its end, so its checksum
    /// is checked.
    fn stream(
        &self,
        archive: &[u8],
        index: usize,
        range: std::ops::Range<u64>,
        step: u64,
        mut sink: impl FnMut(&[u8], u64, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut zip = ZipArchive::new(Cursor::new(archive)).map_err(|e| {
            self.origin
                .error(format!("not a readable .npz archive: {e}"))
        })?;
        let mut member = zip
            .by_index(index)
            .map_err(|e| self.origin.error(format!("cannot inflate: {e}")))?;
        let rb = self.record_bytes as u64;
        let truncated = |e: io::Error| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                self.origin.error(format!(
                    "truncated: the shape needs {} bytes of data, the member holds fewer",
                    self.rows * rb
                ))
            } else {
                self.origin.error(format!("cannot inflate: {e}"))
            }
        };
        let skip = self.header_bytes + range.start * rb;
        let skipped =
            io::copy(&mut (&mut member).take(skip), &mut io::sink()).map_err(truncated)?;
        if skipped < skip {
            return Err(truncated(io::ErrorKind::UnexpectedEof.into()));
        }
        let mut buf = Vec::new();
        let mut r0 = range.start;
        while r0 < range.end {
            let r1 = (r0 + step).min(range.end);
            buf.resize(((r1 - r0) * rb) as usize, 0);
            member.read_exact(&mut buf).map_err(truncated)?;
            if self.swap {
                swap_bytes(&mut buf, self.dtype);
            }
            sink(&buf, r0, (r1 - r0) as usize)?;
            r0 = r1;
        }
        // The rest, so the member's CRC is checked (and a short member is
        // noticed by every part, not only by the last).
        let rest = (self.rows - range.end) * rb;
        let read = io::copy(&mut (&mut member).take(rest), &mut io::sink()).map_err(truncated)?;
        if read < rest {
            return Err(truncated(io::ErrorKind::UnexpectedEof.into()));
        }
        io::copy(&mut member, &mut io::sink()).map_err(truncated)?;
        Ok(())
    }

    /// Inflates a deflated member's data (after its header) into an
    /// unnamed temporary file in `dir` and maps it.
    fn spool(&self, dir: &Path) -> Result<Mmap, Error> {
        let Body::Deflated { archive, index } = self.body else {
            return Err(self.origin.error("only a deflated member is spooled"));
        };
        let mut file = tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
        {
            let mut writer = io::BufWriter::new(&mut file);
            let step = self.chunk_rows(DEFAULT_CHUNK_BYTES.min(8 << 20));
            let plain = Array {
                origin: self.origin.clone(),
                name: self.name.clone(),
                dtype: self.dtype,
                swap: false,
                fortran: false,
                rows: self.rows,
                item_shape: self.item_shape.clone(),
                record_bytes: self.record_bytes,
                header_bytes: self.header_bytes,
                body: self.body,
            };
            plain.stream(archive, index, 0..self.rows, step, |chunk, _, _| {
                io::Write::write_all(&mut writer, chunk).map_err(|e| Error::io(dir, e))
            })?;
            io::Write::flush(&mut writer).map_err(|e| Error::io(dir, e))?;
        }
        // SAFETY: the file is unnamed and private to this process.
        unsafe { Mmap::map(&file) }.map_err(|e| Error::io(dir, e))
    }

    fn stream_info(&self, codec: CodecDecision) -> NpyStream {
        NpyStream {
            name: self.name.clone(),
            path: self.origin.path.clone(),
            member: self.origin.member.clone(),
            dtype: self.dtype,
            item_shape: self.item_shape.clone(),
            big_endian: self.swap,
            fortran_order: self.fortran,
            codec,
        }
    }
}

/// Maps every file (`files` must not be empty).
fn map_all<P: AsRef<Path>>(files: &[P]) -> Result<Vec<(PathBuf, Mmap)>, Error> {
    if files.is_empty() {
        return Err(Error::invalid(
            "no input: give one or more .npy files or an .npz archive",
        ));
    }
    files
        .iter()
        .map(|p| {
            let p = p.as_ref();
            Ok((p.to_path_buf(), map(p)?))
        })
        .collect()
}

/// Every array of the mapped files, checked.
fn read_all<'a>(maps: &'a [(PathBuf, Mmap)], split: &str) -> Result<Vec<Array<'a>>, Error> {
    let mut arrays = Vec::new();
    for (path, map) in maps {
        arrays_of(path, map, &mut arrays)?;
    }
    check_arrays(&arrays, split)?;
    Ok(arrays)
}

/// Converts `.npy` files and `.npz` archives to `out/<split>/<stream>`
/// Dense stores (see the [module documentation](self)): one stream per
/// `.npy` file (named by its stem) and per `.npz` member (named by its
/// key), all of the same length on axis 0.
///
/// # Errors
///
/// [`Error::Npy`] naming the file (and member) for a malformed or
/// truncated file, an element type no store holds, a shape that
/// overflows, arrays of different lengths, a stream name that is not
/// plain or taken twice; [`Error::InvalidOption`] without files;
/// [`Error::AlreadyExists`] when `out` exists; [`Error::UnsafeName`] for a
/// bad split name; [`Error::Store`] and [`Error::Io`] from reading and
/// writing. Nothing is left at `out` after a failure.
pub fn convert_npy<P: AsRef<Path>>(
    files: &[P],
    out: impl AsRef<Path>,
    options: &NpyOptions,
) -> Result<NpySummary, Error> {
    let maps = map_all(files)?;
    let arrays = read_all(&maps, &options.split)?;
    let root = StagedRoot::new(out)?;
    let rows = arrays.first().map_or(0, |a| a.rows);
    let mut streams = Vec::with_capacity(arrays.len());
    for a in &arrays {
        let codec = a.write(
            &root.store_path(&options.split, &a.name)?,
            0..rows,
            options,
            root.temp_path(),
        )?;
        streams.push(a.stream_info(codec));
    }
    Ok(NpySummary {
        root: root.publish()?,
        split: options.split.clone(),
        records: rows,
        source_records: rows,
        part: None,
        streams,
    })
}

/// Converts writer `part`'s share of the arrays (see [`convert_npy`]) into
/// part `part` of a multi-part dataset: `out/<split>/part-<part>/<stream>`,
/// holding records [`Dataset::part_range`]`(rows, part, parts)` (an empty
/// part when there are fewer rows than parts). Writers `0..parts` may run
/// at once, on machines sharing `out`; `loaderx dataset merge out/<split>`
/// ([`Dataset::merge`]) then joins them, with the digest of a single
/// conversion. As [`convert_idx_part`](crate::idx::convert_idx_part): the
/// part is staged aside and renamed into place, the writer holds the lock
/// file `out/.part-<part>.lock`, and a part is written once.
/// [`part_from_env`](crate::output::part_from_env) resolves `part` from
/// `JOB_COMPLETION_INDEX`.
///
/// # Errors
///
/// As [`convert_npy`]; [`Error::InvalidOption`] for `part >= parts`;
/// [`Error::AlreadyExists`] when the part exists (nothing is written);
/// [`Error::PartBusy`] while another writer of the part runs.
pub fn convert_npy_part<P: AsRef<Path>>(
    files: &[P],
    out: impl AsRef<Path>,
    options: &NpyOptions,
    part: u64,
    parts: u64,
) -> Result<NpySummary, Error> {
    if part >= parts {
        return Err(Error::invalid(format!(
            "part {part} of {parts}: a part index runs from 0 to {}",
            parts.saturating_sub(1)
        )));
    }
    let out = out.as_ref();
    let maps = map_all(files)?;
    let arrays = read_all(&maps, &options.split)?;
    let name = Dataset::part_name(part);
    let lock = PartLock::acquire(out, &name)?;
    let splits = [options.split.clone()];
    lock.check_unpublished(&splits)?;
    let root = StagedRoot::new(out.join(&name))?;
    let rows = arrays.first().map_or(0, |a| a.rows);
    let range = Dataset::part_range(rows, part, parts);
    let mut streams = Vec::with_capacity(arrays.len());
    for a in &arrays {
        let codec = a.write(
            &root.store_path(&options.split, &a.name)?,
            range.clone(),
            options,
            root.temp_path(),
        )?;
        streams.push(a.stream_info(codec));
    }
    root.publish_part(out, &name, &splits)?;
    drop(lock);
    Ok(NpySummary {
        root: out.to_path_buf(),
        split: options.split.clone(),
        records: range.end - range.start,
        source_records: rows,
        part: Some((part, parts)),
        streams,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use loaderx_core::{Store, digest};

    use super::*;

    /// A version 1.0 `.npy` file.
    fn npy(descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
        npy_literal(&format!("'{descr}'"), fortran, shape, data)
    }

    /// A version 1.0 `.npy` file whose `descr` is the Python literal `descr`.
    fn npy_literal(descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        let tuple = match dims.as_slice() {
            [one] => format!("({one},)"),
            _ => format!("({})", dims.join(", ")),
        };
        let fortran = if fortran { "True" } else { "False" };
        let mut header =
            format!("{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {tuple}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    /// An `.npz` of `(name, bytes, deflated)` members.
    fn npz(members: &[(&str, &[u8], bool)]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, bytes, deflated) in members {
            let method = if *deflated {
                CompressionMethod::Deflated
            } else {
                CompressionMethod::Stored
            };
            w.start_file(
                *name,
                zip::write::SimpleFileOptions::default().compression_method(method),
            )
            .unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    /// Element type, item shape and bytes of the store at `path`.
    fn read(path: &Path) -> (DType, Vec<usize>, Vec<u8>) {
        let store = Store::open(path).unwrap();
        let mut shape = Vec::new();
        let mut bytes = Vec::new();
        store
            .for_each_record(|_, s, b| {
                shape = s.to_vec();
                bytes.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        if let Store::Dense(d) = &store {
            shape = d.item_shape().to_vec();
        }
        (store.dtype(), shape, bytes)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn le<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| to(v)).collect()
    }

    #[test]
    fn element_types_map_or_are_refused_by_name() {
        for (descr, dtype, swap) in [
            ("|b1", DType::Bool, false),
            ("|i1", DType::I8, false),
            ("|u1", DType::U8, false),
            ("<i2", DType::I16, false),
            (">u2", DType::U16, true),
            ("<i4", DType::I32, false),
            ("<u4", DType::U32, false),
            (">i8", DType::I64, true),
            ("<u8", DType::U64, false),
            ("<f2", DType::F16, false),
            (">f4", DType::F32, true),
            ("<f8", DType::F64, false),
            ("<c8", DType::C64, false),
            (">c16", DType::C128, true),
        ] {
            assert_eq!(element_type(descr), Ok((dtype, swap)), "{descr}");
        }
        for (descr, why) in [
            ("|O", "Python objects"),
            ("<U5", "unicode strings"),
            ("|S3", "byte strings"),
            ("|V4", "void"),
            ("<M8[ns]", "datetime64"),
            ("<m8[s]", "timedelta64"),
            ("<f16", "long double"),
            ("<c32", "long double"),
            ("<x4", "unknown"),
            ("", "unknown"),
        ] {
            let e = element_type(descr).unwrap_err();
            assert!(e.contains(why) && e.contains(descr), "{e} ({why})");
        }
    }

    #[test]
    fn c_fortran_and_big_endian_arrays_convert_to_c_order_little_endian() {
        let dir = tempfile::tempdir().unwrap();
        // x: (4, 2, 3) f32, values = C index.
        let values: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let c = le(&values, f32::to_le_bytes);
        // The same array in Fortran order: element (i, j, k) at i + 4 * (j + 2 * k).
        let mut f = vec![0f32; 24];
        for i in 0..4 {
            for j in 0..2 {
                for k in 0..3 {
                    f[i + 4 * (j + 2 * k)] = values[i * 6 + j * 3 + k];
                }
            }
        }
        let files = [
            ("x.npy", npy("<f4", false, &[4, 2, 3], &c)),
            (
                "xf.npy",
                npy("<f4", true, &[4, 2, 3], &le(&f, f32::to_le_bytes)),
            ),
            (
                "xb.npy",
                npy(">f4", false, &[4, 2, 3], &le(&values, f32::to_be_bytes)),
            ),
            (
                "xfb.npy",
                npy(">f4", true, &[4, 2, 3], &le(&f, f32::to_be_bytes)),
            ),
            (
                "z.npy",
                npy(
                    ">c8",
                    false,
                    &[4],
                    &le(&[1f32, 2., 3., 4., 5., 6., 7., 8.], f32::to_be_bytes),
                ),
            ),
            (
                "b.npy",
                npy("|b1", true, &[4, 2], &[1, 0, 0, 1, 1, 1, 0, 0]),
            ),
            (
                "h.npy",
                npy("<f2", false, &[4], &[0, 0x3c, 0, 0x40, 0, 0x42, 0, 0x44]),
            ),
        ];
        let mut paths = Vec::new();
        for (name, bytes) in &files {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            paths.push(p);
        }
        for chunk in [DEFAULT_CHUNK_BYTES, 1, 30] {
            let out = dir.path().join(format!("out-{chunk}"));
            let options = NpyOptions::new(Codec::Zstd, 2)
                .chunk_bytes(chunk)
                .split("all");
            let s = convert_npy(&paths, &out, &options).unwrap();
            assert_eq!((s.records, s.split.as_str()), (4, "all"));
            assert!(s.streams[3].big_endian && s.streams[3].fortran_order);
            assert_eq!(
                names(&out.join("all")),
                ["b", "h", "x", "xb", "xf", "xfb", "z"]
            );
            for x in ["x", "xf", "xb", "xfb"] {
                assert_eq!(
                    read(&out.join("all").join(x)),
                    (DType::F32, vec![2, 3], c.clone()),
                    "{x}"
                );
            }
            assert_eq!(
                read(&out.join("all/z")),
                (
                    DType::C64,
                    vec![],
                    le(&[1f32, 2., 3., 4., 5., 6., 7., 8.], f32::to_le_bytes)
                )
            );
            // b in Fortran order: column 0 is 1,0,0,1 and column 1 is 1,1,0,0.
            assert_eq!(
                read(&out.join("all/b")),
                (DType::Bool, vec![2], vec![1, 1, 0, 1, 0, 0, 1, 0])
            );
            assert_eq!(read(&out.join("all/h")).0, DType::F16);
            let text = s.to_string();
            let mut lines = text.lines();
            assert_eq!(
                lines.next().unwrap(),
                format!(
                    "wrote {} (all: 4 records; x: f32 [2, 3]; xf: f32 [2, 3]; xb: f32 [2, 3]; xfb: f32 [2, 3]; z: c64 []; b: bool [2]; h: f16 [])",
                    out.display()
                )
            );
            // A line per stream with its codec, forced here.
            let codecs: Vec<&str> = lines.collect();
            assert_eq!(codecs.len(), 7, "{text}");
            assert_eq!(codecs[0], "  x: zstd (asked for)");
        }
    }

    /// Without a forced codec each stream gets its own: 8-byte labels raw
    /// (a zstd frame each would be larger), repetitive rows zstd; from a
    /// mapped `.npy` and from a deflated `.npz` member (decided on its
    /// first chunk), and for a part writer.
    #[test]
    fn an_automatic_codec_is_chosen_per_stream() {
        let dir = tempfile::tempdir().unwrap();
        let labels: Vec<i64> = (0..3000).map(|v| v % 10).collect();
        let label = npy("<i8", false, &[3000], &le(&labels, i64::to_le_bytes));
        let rows: Vec<f32> = (0..3000 * 64).map(|v| (v % 64) as f32).collect();
        let x = npy("<f4", false, &[3000, 64], &le(&rows, f32::to_le_bytes));
        let (lp, xp) = (dir.path().join("label.npy"), dir.path().join("x.npy"));
        std::fs::write(&lp, &label).unwrap();
        std::fs::write(&xp, &x).unwrap();
        let zp = dir.path().join("both.npz");
        std::fs::write(
            &zp,
            npz(&[("label.npy", &label, true), ("x.npy", &x, true)]),
        )
        .unwrap();
        let options = NpyOptions::new(None, 2).chunk_bytes(1000);
        for (name, files) in [("npy", vec![&lp, &xp]), ("npz", vec![&zp])] {
            let out = dir.path().join(name);
            let summary = convert_npy(&files, &out, &options).unwrap();
            let codecs: Vec<Codec> = summary.streams.iter().map(|s| s.codec.codec).collect();
            assert_eq!(codecs, [Codec::Raw, Codec::Zstd], "{name}");
            let text = summary.to_string();
            assert!(
                text.contains("\n  label: raw (zstd would store ")
                    && text.contains("\n  x: zstd (0."),
                "{text}"
            );
            assert_eq!(
                Store::open(out.join("train/label")).unwrap().codec(),
                Codec::Raw
            );
            assert_eq!(
                Store::open(out.join("train/x")).unwrap().codec(),
                Codec::Zstd
            );
            assert_eq!(read(&out.join("train/label")).2, label[128..]);
            assert_eq!(read(&out.join("train/x")).2, x[128..]);
            // A part writer decides on its own records.
            let parts = dir.path().join(format!("{name}-parts"));
            let part = convert_npy_part(&files, &parts, &options, 1, 2).unwrap();
            assert_eq!(part.streams[0].codec.codec, Codec::Raw);
            assert_eq!(part.streams[1].codec.codec, Codec::Zstd);
        }
    }

    #[test]
    fn damaged_npz_members_are_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<i32> = (0..4096).map(|v| v % 251).collect();
        let x = npy("<i4", false, &[1024, 4], &le(&values, i32::to_le_bytes));
        let options = NpyOptions::new(Codec::Raw, 1);
        for deflated in [false, true] {
            let good = npz(&[("x.npy", &x, deflated)]);
            let p = dir.path().join(format!("good-{deflated}.npz"));
            std::fs::write(&p, &good).unwrap();
            let out = dir.path().join(format!("out-{deflated}"));
            convert_npy(&[&p], &out, &options).unwrap();
            assert_eq!(read(&out.join("train/x")).2, x[128..]);
            // One bit flipped: of a stored member's data (a record's value),
            // of a deflated member's stream.
            let (start, size) = {
                let mut a = ZipArchive::new(Cursor::new(&good[..])).unwrap();
                let m = a.by_index(0).unwrap();
                (
                    m.data_start().unwrap() as usize,
                    m.compressed_size() as usize,
                )
            };
            let mut bad = good.clone();
            let at = if deflated {
                start + size / 2
            } else {
                start + 128 + 4001
            };
            bad[at] ^= 0x10;
            let p = dir.path().join(format!("bad-{deflated}.npz"));
            std::fs::write(&p, &bad).unwrap();
            let out = dir.path().join(format!("bad-{deflated}"));
            let e = convert_npy(&[&p], &out, &options).unwrap_err().to_string();
            assert!(e.contains("bad-") && e.contains("member \"x.npy\""), "{e}");
            if !deflated {
                assert!(e.contains("damaged"), "{e}");
            }
            assert!(!out.exists());
            // A part writer checks the whole member too.
            let e = convert_npy_part(&[&p], &out, &options, 0, 4).unwrap_err();
            assert!(e.to_string().contains("x.npy"), "{e}");
            assert!(!out.join("train/part-00000").exists());
        }
    }

    #[test]
    fn npz_members_stored_or_deflated_are_streams() {
        let dir = tempfile::tempdir().unwrap();
        // Enough records for zstd to train a dictionary on.
        let n = 700;
        let values: Vec<i32> = (0..n as i32 * 12).map(|v| v % 97).collect();
        let c = le(&values, i32::to_le_bytes);
        // (n, 3, 4) in Fortran order, big-endian.
        let mut f = vec![0i32; n * 12];
        for i in 0..n {
            for j in 0..3 {
                for k in 0..4 {
                    f[i + n * (j + 3 * k)] = values[i * 12 + j * 4 + k];
                }
            }
        }
        let fb = npy(">i4", true, &[n, 3, 4], &le(&f, i32::to_be_bytes));
        let cc = npy("<i4", false, &[n, 3, 4], &c);
        let label: Vec<i64> = (0..n as i64).collect();
        let labels = npy("<i8", false, &[n], &le(&label, i64::to_le_bytes));
        let archive = npz(&[
            ("stored.npy", &cc, false),
            ("deflated.npy", &cc, true),
            ("fortran_stored.npy", &fb, false),
            ("fortran_deflated.npy", &fb, true),
            ("label.npy", &labels, true),
        ]);
        let p = dir.path().join("data.npz");
        std::fs::write(&p, archive).unwrap();
        for (codec, chunk) in [
            (Codec::Raw, 1),
            (Codec::Zstd, 1000),
            (Codec::ZstdDict, 1 << 20),
        ] {
            let out = dir.path().join(format!("out-{codec}-{chunk}"));
            let options = NpyOptions::new(codec, 3).chunk_bytes(chunk);
            let s = convert_npy(&[&p], &out, &options).unwrap();
            assert_eq!(s.records, n as u64);
            assert_eq!(s.streams[1].member.as_deref(), Some("deflated.npy"));
            for x in ["stored", "deflated", "fortran_stored", "fortran_deflated"] {
                assert_eq!(
                    read(&out.join("train").join(x)),
                    (DType::I32, vec![3, 4], c.clone()),
                    "{x} {codec}"
                );
                assert_eq!(
                    Store::open(out.join("train").join(x)).unwrap().codec(),
                    codec
                );
            }
            assert_eq!(read(&out.join("train/label")).2, labels[128..]);
            assert_eq!(
                names(dir.path())
                    .iter()
                    .filter(|n| n.starts_with('.'))
                    .count(),
                0
            );
        }
        // Parts of a deflated member: each skips to its rows.
        let out = dir.path().join("parts");
        let options = NpyOptions::new(Codec::Zstd, 1);
        for part in 0..3 {
            let s = convert_npy_part(&[&p], &out, &options, part, 3).unwrap();
            assert_eq!(s.records, [233, 233, 234][part as usize]);
        }
        let merged = Dataset::merge(out.join("train"), Some(3)).unwrap();
        let whole = dir.path().join("out-zstd-1000/train");
        for (name, store) in merged.streams() {
            let one = Store::open(whole.join(name)).unwrap();
            assert_eq!(digest(store).unwrap(), digest(&one).unwrap(), "{name}");
        }
    }

    #[test]
    fn parts_cut_by_rows_and_merge_to_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let x: Vec<u16> = (0..30).collect();
        let px = dir.path().join("x.npy");
        let py = dir.path().join("y.npy");
        std::fs::write(&px, npy("<u2", true, &[10, 3], &le(&x, u16::to_le_bytes))).unwrap();
        std::fs::write(&py, npy("|u1", false, &[10], &[9; 10])).unwrap();
        let options = NpyOptions::new(Codec::Raw, 1);
        let whole = convert_npy(&[&px, &py], dir.path().join("whole"), &options).unwrap();
        let out = dir.path().join("parts");
        let mut records = Vec::new();
        for part in [2, 0, 1] {
            let s = convert_npy_part(&[&px, &py], &out, &options, part, 3).unwrap();
            assert_eq!((s.source_records, s.part), (10, Some((part, 3))));
            records.push(s.records);
        }
        assert_eq!(records, [4, 3, 3]);
        // Written once.
        let e = convert_npy_part(&[&px, &py], &out, &options, 1, 3).unwrap_err();
        assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
        let e = convert_npy_part(&[&px, &py], &out, &options, 3, 3).unwrap_err();
        assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
        assert_eq!(names(&out), ["train"]);
        let merged = Dataset::merge(out.join("train"), Some(3)).unwrap();
        assert_eq!(merged.len(), 10);
        for (name, store) in merged.streams() {
            let one = Store::open(whole.root.join("train").join(name)).unwrap();
            assert_eq!(digest(store).unwrap(), digest(&one).unwrap(), "{name}");
        }
        // More parts than rows: empty parts.
        let out = dir.path().join("many");
        let s = convert_npy_part(&[&px, &py], &out, &options, 0, 20).unwrap();
        assert_eq!(s.records, 0);
        assert_eq!(read(&out.join("train/part-00000/x")).2, Vec::<u8>::new());
    }

    #[test]
    fn hostile_files_are_errors_naming_the_file_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.npy");
        std::fs::write(&good, npy("<i2", false, &[3, 2], &[0; 12])).unwrap();
        let mut deep = npy("<i2", false, &[3], &[0; 6]);
        let text = format!(
            "{{'descr': '<i2', 'fortran_order': False, 'shape': {}3{}, }}",
            "(".repeat(5400),
            ",)".repeat(5400)
        );
        deep.truncate(8);
        deep.extend_from_slice(&(text.len() as u16 + 1).to_le_bytes());
        deep.extend_from_slice(text.as_bytes());
        deep.push(b'\n');
        let mut long = npy("<i2", false, &[1], &[0; 2]);
        long[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "trunc.npy",
                npy("<i2", false, &[3, 2], &[0; 11]),
                "truncated: shape [3, 2] of <i2 elements needs 12 bytes of data, the file holds 11",
            ),
            (
                "huge.npy",
                npy("<f8", false, &[1 << 40, 1 << 40], &[0; 8]),
                "overflows",
            ),
            (
                "big.npy",
                npy("<f8", false, &[3, 1 << 60], &[0; 8]),
                "overflows",
            ),
            (
                "obj.npy",
                npy("|O", false, &[3], &[0x80, 3, 0]),
                "\"|O\" (Python objects, pickled)",
            ),
            (
                "str.npy",
                npy("<U3", false, &[3, 2], &[0; 72]),
                "unicode strings",
            ),
            (
                "short.npy",
                npy("<i2", false, &[4, 2], &[0; 16]),
                "4 records (axis 0) but",
            ),
            (
                "scalar.npy",
                npy("<i2", false, &[], &[0; 2]),
                "0-dimensional",
            ),
            (
                "empty_item.npy",
                npy("<i2", false, &[3, 0], &[]),
                "records of 0 bytes",
            ),
            (
                "bool.npy",
                npy("|b1", false, &[3], &[0, 1, 2]),
                "record 2: byte 2 is not a bool",
            ),
            (
                "magic.npy",
                b"\x93NUMPX\x01\x00".to_vec(),
                "neither a .npy file nor an .npz",
            ),
            (
                "hdr.npy",
                b"\x93NUMPY\x01\x00\x10".to_vec(),
                "not a readable .npy header",
            ),
            ("long.npy", long, "not a readable .npy header"),
            ("deep.npy", deep, "not a readable .npy header"),
            (
                "bad name.npy",
                npy("<i2", false, &[3], &[0; 6]),
                "stream name \"bad name\"",
            ),
            (
                "good.npz",
                npz(&[("good.npy", &npy("<i2", false, &[3], &[0; 6]), false)]),
                "stream \"good\" is also the name of",
            ),
            (
                "member.npz",
                npz(&[
                    ("a.npy", &npy("<i2", false, &[3], &[0; 6]), true),
                    ("notes.txt", b"hi", false),
                ]),
                "member \"notes.txt\": not a .npy array",
            ),
            (
                "dtrunc.npz",
                npz(&[("a.npy", &npy("<i2", false, &[3], &[0; 5]), true)]),
                "member \"a.npy\": truncated",
            ),
            ("none.npz", npz(&[]), "the archive holds no arrays"),
            (
                "struct.npy",
                npy_literal("[('a', '<i4')]", false, &[3], &[0; 12]),
                "structured",
            ),
        ];
        for (name, bytes, why) in cases {
            let p = dir.path().join(name);
            std::fs::write(&p, &bytes).unwrap();
            let out = dir.path().join("out");
            let outcome = std::panic::catch_unwind(|| {
                convert_npy(&[&good, &p], &out, &NpyOptions::new(Codec::Zstd, 1)).map(|_| ())
            });
            let e = outcome
                .unwrap_or_else(|_| panic!("{name}: panicked"))
                .unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, Error::Npy { .. }), "{name}: {text}");
            assert!(text.contains(name), "{name}: {text}");
            assert!(text.contains(why), "{name}: {text} (expected {why})");
            std::fs::remove_file(&p).unwrap();
            assert_eq!(names(dir.path()), ["good.npy"], "{name}");
        }
        let e = convert_npy::<&Path>(&[], dir.path().join("out"), &NpyOptions::new(Codec::Raw, 1))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
        let e = convert_npy(
            &[&good],
            dir.path().join("out"),
            &NpyOptions::new(Codec::Raw, 1).split("../x"),
        )
        .unwrap_err();
        assert!(matches!(e, Error::UnsafeName { .. }), "{e}");
        assert_eq!(names(dir.path()), ["good.npy"]);
    }
}
