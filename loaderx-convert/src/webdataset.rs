//! WebDataset tar shards to Zrecord (feature `webdataset`).
//!
//! A [WebDataset](https://github.com/webdataset/webdataset) shard is a tar
//! archive whose members are grouped into samples by key: a member's key is
//! its path up to the first `.` of its file name, the rest is its
//! extension (`train/000123.seg.png` has key `train/000123` and extension
//! `seg.png`), and consecutive members with the same key form one sample.
//! [`convert_webdataset`] writes one store per extension (lowercased, the
//! store's name), by the kind its last component names:
//!
//! | extension                 | column                        | store |
//! |---------------------------|-------------------------------|-------|
//! | `jpg`, `jpeg`, `png`      | an `Image`                    | decoded pixels, Dense when one shape across the split else Ragged (the table layer's rule, [`crate::table`]); the file's bytes with [`TableOptions::encoded_images`] |
//! | `cls`, `cls2`, `index`    | `int64`, the member's text (an integer, surrounding white space allowed) | Dense `i64` scalar |
//! | `txt`, `json`             | a string (the member's UTF-8 text; a `.json` member is stored as its text, its fields are not split into columns) | with [`TableOptions::text_bytes`] Ragged `u8`, with [`TableOptions::tokenizer`] Ragged `u32`; refused otherwise |
//! | `npy`                     | the array (`np.save`'s file)  | Dense `[shape]` when every sample's array has one shape, else Ragged of its rank; bool, ints, `float16/32/64`, either byte order, C or Fortran order (converted to C order) |
//! | anything else             | raw bytes                     | refused by the layer, naming the column: leave it out with [`TableOptions::drop`] |
//!
//! Every sample of a split must hold the same extensions: a sample missing
//! one (or holding one more) is an error naming the shard, the key and the
//! member. Samples are read in shard order (as given, a directory's or a
//! glob's `.tar` files sorted by path), members in archive order.
//!
//! Shards are streamed, never unpacked: opening one reads its tar headers
//! only (member data is skipped by seeking; an `.npy` member's header is
//! read), counting its samples and noting where each starts; a scan reads
//! just the samples of its rows, in bounded batches, so a part writer
//! ([`TableOptions::part`]) reads only its rows' members.
//!
//! Refused, with an error naming the shard (and member): a member whose
//! path is absolute or holds `..` (never written anywhere, but refused), a
//! member that is not a regular file (a link, a device; directories are
//! skipped), a member without an extension, a member larger than a record
//! may hold, a truncated archive (a member's data running past the end of
//! the file, or no end-of-archive block), and a damaged header.
//!
//! Splits: [`WebDataset::new`]'s shards form the split
//! [`WebDataset::split_name`] (default `train`); [`WebDataset::split_glob`]
//! adds named splits.
//!
//! ```no_run
//! use loaderx_convert::table::TableOptions;
//! use loaderx_convert::webdataset::{WebDataset, convert_webdataset};
//!
//! let source = WebDataset::new(["shards/train-000000.tar", "shards/train-000001.tar"])
//!     .split_glob("test", "shards/test-*.tar")
//!     .options(TableOptions::new().text_bytes());
//! let summary = convert_webdataset(&source, "stores")?;
//! println!("{summary}");
//! # Ok::<(), loaderx_convert::Error>(())
//! ```

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    LargeBinaryBuilder, LargeStringBuilder, OffsetBufferBuilder, StringBuilder,
};
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, BooleanArray, FixedSizeListArray, Int64Array, LargeListArray,
    PrimitiveArray, RecordBatch, RecordBatchOptions, StructArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use serde_json::{Map, Value, json};

use crate::error::Error;
use crate::folder::{batch_end, check_image_bytes};
use crate::local::{self, expand_glob};
use crate::table::{Scan, Sizing, SplitTables, TableOptions, TableSource, TableSummary};

/// The size of a tar block.
const BLOCK: u64 = 512;

/// The most bytes of an `.npy` member read for its header.
const NPY_HEADER_MAX: u64 = 1 << 20;

/// Shards to convert, how they form splits, and the table options; a
/// builder.
#[derive(Debug, Clone)]
pub struct WebDataset {
    shards: Vec<PathBuf>,
    globs: Vec<(String, String)>,
    split: String,
    options: TableOptions,
}

impl WebDataset {
    /// Converts `shards` (tar files, directories of `.tar` files, or glob
    /// patterns such as `data/train-*.tar`) as the split
    /// [`WebDataset::split_name`], with the default [`TableOptions`].
    pub fn new<I, P>(shards: I) -> WebDataset
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        WebDataset {
            shards: shards.into_iter().map(Into::into).collect(),
            globs: Vec::new(),
            split: "train".to_owned(),
            options: TableOptions::new(),
        }
    }

    /// The split `name` holds the `.tar` files `glob` matches (sorted; `*`
    /// stays within one directory, `**` crosses them); repeatable, and a
    /// name given twice concatenates.
    pub fn split_glob(mut self, name: impl Into<String>, glob: impl Into<String>) -> WebDataset {
        self.globs.push((name.into(), glob.into()));
        self
    }

    /// The split of the shards given to [`WebDataset::new`] (default
    /// `train`).
    pub fn split_name(mut self, name: impl Into<String>) -> WebDataset {
        self.split = name.into();
        self
    }

    /// How the samples convert (strings, images, codec, parts...).
    pub fn options(mut self, options: TableOptions) -> WebDataset {
        self.options = options;
        self
    }
}

/// What a member's extension holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Image,
    Int,
    Text,
    Npy,
    Bytes,
}

impl Kind {
    fn of(ext: &str) -> Kind {
        match ext.rsplit('.').next().unwrap_or(ext) {
            "jpg" | "jpeg" | "png" => Kind::Image,
            "cls" | "cls2" | "index" => Kind::Int,
            "txt" | "json" => Kind::Text,
            "npy" => Kind::Npy,
            _ => Kind::Bytes,
        }
    }
}

/// The element types an `.npy` member may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NpyType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
}

impl NpyType {
    /// Parses a NumPy type string such as `<f4`: the type and whether it is
    /// big-endian.
    fn parse(descr: &str) -> Option<(NpyType, bool)> {
        let mut chars = descr.chars();
        let order = chars.next()?;
        let rest = chars.as_str();
        let t = match rest {
            "b1" => NpyType::Bool,
            "i1" => NpyType::I8,
            "i2" => NpyType::I16,
            "i4" => NpyType::I32,
            "i8" => NpyType::I64,
            "u1" => NpyType::U8,
            "u2" => NpyType::U16,
            "u4" => NpyType::U32,
            "u8" => NpyType::U64,
            "f2" => NpyType::F16,
            "f4" => NpyType::F32,
            "f8" => NpyType::F64,
            _ => return None,
        };
        let big = match order {
            '<' | '|' => false,
            '>' => true,
            '=' => cfg!(target_endian = "big"),
            _ => return None,
        };
        Some((t, big && t.size() > 1))
    }

    fn size(self) -> usize {
        match self {
            NpyType::Bool | NpyType::I8 | NpyType::U8 => 1,
            NpyType::I16 | NpyType::U16 | NpyType::F16 => 2,
            NpyType::I32 | NpyType::U32 | NpyType::F32 => 4,
            NpyType::I64 | NpyType::U64 | NpyType::F64 => 8,
        }
    }

    fn arrow(self) -> DataType {
        match self {
            NpyType::Bool => DataType::Boolean,
            NpyType::I8 => DataType::Int8,
            NpyType::I16 => DataType::Int16,
            NpyType::I32 => DataType::Int32,
            NpyType::I64 => DataType::Int64,
            NpyType::U8 => DataType::UInt8,
            NpyType::U16 => DataType::UInt16,
            NpyType::U32 => DataType::UInt32,
            NpyType::U64 => DataType::UInt64,
            NpyType::F16 => DataType::Float16,
            NpyType::F32 => DataType::Float32,
            NpyType::F64 => DataType::Float64,
        }
    }
}

/// An `.npy` member's header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NpyHeader {
    dtype: NpyType,
    big_endian: bool,
    fortran: bool,
    shape: Vec<usize>,
    /// Bytes of the member before the data.
    data_offset: usize,
}

/// Reads the header of `.npy` bytes (at least the whole header), checking
/// that the member's `size` bytes hold exactly its data.
fn npy_header(head: &[u8], size: u64) -> Result<NpyHeader, String> {
    use ndarray_npy::npy::header::Header;
    // The header's declared length and nesting are checked before the
    // parser sizes a buffer from the one and recurses on the other.
    const MAX_HEADER: usize = 16 * 1024;
    let declared = match head.get(6) {
        Some(1) => head
            .get(8..10)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]]))),
        Some(2 | 3) => head
            .get(8..12)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize),
        _ => None,
    };
    if declared.is_some_and(|n| n > MAX_HEADER) {
        return Err(format!(
            "not a readable .npy file: its header declares more than {MAX_HEADER} bytes"
        ));
    }
    let mut depth = 0usize;
    for &b in head.iter().take(MAX_HEADER + 12) {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > 32 {
                    return Err("not a readable .npy file: its header nests too deep".to_owned());
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let mut cursor = Cursor::new(head);
    let header =
        Header::from_reader(&mut cursor).map_err(|e| format!("not a readable .npy file: {e}"))?;
    let descr = match header.type_descriptor.as_string() {
        Some(s) => s.clone(),
        None => {
            return Err(format!(
                "holds a structured NumPy dtype {}; only bool, integer and float arrays convert",
                header.type_descriptor
            ));
        }
    };
    let (dtype, big_endian) = NpyType::parse(&descr).ok_or_else(|| {
        format!(
            "holds NumPy dtype {descr:?}; only bool, int8-64, uint8-64 and float16/32/64 \
             arrays convert"
        )
    })?;
    let data_offset = cursor.position() as usize;
    let elements = header
        .shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64));
    let bytes = elements.and_then(|n| n.checked_mul(dtype.size() as u64));
    let want = bytes.and_then(|b| b.checked_add(data_offset as u64));
    if want != Some(size) {
        return Err(format!(
            "its header declares shape {:?} of {descr}, {} data bytes, but the member holds {} \
             after the header",
            header.shape,
            bytes.map_or_else(|| "over 2^64".to_owned(), |b| b.to_string()),
            size.saturating_sub(data_offset as u64)
        ));
    }
    Ok(NpyHeader {
        dtype,
        big_endian,
        fortran: header.layout.is_fortran(),
        shape: header.shape,
        data_offset,
    })
}

/// An `.npy` array's data as C-order little-endian bytes.
fn npy_data(h: &NpyHeader, member: &[u8]) -> Vec<u8> {
    let data = &member[h.data_offset..];
    let item = h.dtype.size();
    let mut out = if h.fortran && h.shape.len() > 1 {
        fortran_to_c(data, &h.shape, item)
    } else {
        data.to_vec()
    };
    if h.big_endian {
        for c in out.chunks_exact_mut(item) {
            c.reverse();
        }
    }
    out
}

/// Reorders the Fortran-order elements `data` (of `item` bytes, `shape`)
/// into C order.
fn fortran_to_c(data: &[u8], shape: &[usize], item: usize) -> Vec<u8> {
    let n: usize = shape.iter().product();
    let mut strides = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        strides[k] = strides[k - 1] * shape[k - 1];
    }
    let mut out = Vec::with_capacity(data.len());
    let mut index = vec![0usize; shape.len()];
    for _ in 0..n {
        let at: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.extend_from_slice(&data[at * item..(at + 1) * item]);
        for k in (0..shape.len()).rev() {
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    out
}

/// Where a sample starts in its shard, and the bytes of its members.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// The offset of the first header block of its first member.
    offset: u64,
    /// Its members' data bytes.
    bytes: u64,
}

/// A member's key and extension (lowercased), by the WebDataset rule.
fn key_ext(name: &str) -> Option<(&str, String)> {
    let base_at = name.rfind('/').map_or(0, |i| i + 1);
    let dot = name[base_at..].find('.')? + base_at;
    if dot == base_at || dot + 1 == name.len() {
        return None;
    }
    Some((&name[..dot], name[dot + 1..].to_ascii_lowercase()))
}

/// Refuses an absolute member path or one holding `..`.
fn check_member_path(name: &str) -> Result<(), String> {
    if name.starts_with('/') || name.starts_with('\\') || name.contains('\0') {
        return Err("has an absolute path; WebDataset members are relative paths".to_owned());
    }
    if name.split(['/', '\\']).any(|c| c == "..") {
        return Err(
            "has a path holding `..` (it would escape the directory it is unpacked in); \
             refusing the shard"
                .to_owned(),
        );
    }
    Ok(())
}

/// One shard, as its first pass over the headers found it.
struct Shard {
    path: PathBuf,
    label: String,
    samples: Vec<Sample>,
    /// The first sample's key.
    first_key: String,
    /// Its extensions, sorted: the columns.
    exts: Vec<String>,
    /// The header of every sample's `.npy` members, per `.npy` column.
    npy: BTreeMap<String, Vec<NpyHeader>>,
}

/// The most bytes an extension header (a GNU long name or link, a pax
/// header) may hold: the `tar` crate reads one whole before a member's own
/// checks could run.
const MAX_EXTENSION_BYTES: u64 = 1 << 20;

/// Walks the 512-byte headers of the tar file `file` (`len` bytes) and
/// refuses an extension header larger than [`MAX_EXTENSION_BYTES`], naming
/// its offset; everything else is left to the `tar` crate.
fn check_extension_headers(file: &File, len: u64, label: &str) -> Result<(), Error> {
    use std::os::unix::fs::FileExt;
    let mut at = 0u64;
    let mut header = [0u8; BLOCK as usize];
    while at.saturating_add(BLOCK) <= len {
        file.read_exact_at(&mut header, at)
            .map_err(|e| shard_error(label, format!("cannot read a header at offset {at}: {e}")))?;
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let field = &header[124..136];
        let size = if field[0] & 0x80 != 0 {
            // Base-256: the low 8 bytes are enough for any real size.
            field[4..].iter().fold(0u64, |n, &b| {
                n.saturating_mul(256).saturating_add(u64::from(b))
            })
        } else {
            field
                .iter()
                .filter(|b| b.is_ascii_digit())
                .fold(0u64, |n, &b| {
                    n.saturating_mul(8).saturating_add(u64::from(b - b'0'))
                })
        };
        let kind = match header[156] {
            b'L' => Some("GNU long-name"),
            b'K' => Some("GNU long-link"),
            b'x' => Some("pax"),
            b'g' => Some("pax global"),
            _ => None,
        };
        if let Some(kind) = kind
            && size > MAX_EXTENSION_BYTES
        {
            return Err(shard_error(
                label,
                format!(
                    "the {kind} extension header at offset {at} declares {size} bytes (at most \
                     {MAX_EXTENSION_BYTES}); not a WebDataset shard"
                ),
            ));
        }
        at = at
            .saturating_add(BLOCK)
            .saturating_add(size.div_ceil(BLOCK).saturating_mul(BLOCK));
    }
    Ok(())
}

fn shard_error(label: &str, detail: impl Into<String>) -> Error {
    Error::Source {
        file: label.to_owned(),
        detail: detail.into(),
    }
}

/// The members of a sample being read: its key and extensions.
struct Pending {
    key: String,
    offset: u64,
    bytes: u64,
    exts: Vec<String>,
}

impl Shard {
    /// Reads the headers of shard `path`.
    fn open(path: &Path) -> Result<Shard, Error> {
        let label = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        check_extension_headers(&file, len, &label)?;
        let mut archive = tar::Archive::new(BufReader::with_capacity(1 << 16, file));
        let mut shard = Shard {
            path: path.to_path_buf(),
            label: label.clone(),
            samples: Vec::new(),
            first_key: String::new(),
            exts: Vec::new(),
            npy: BTreeMap::new(),
        };
        let bad = |e: std::io::Error| {
            shard_error(
                &label,
                format!("not a readable tar archive (truncated or damaged): {e}"),
            )
        };
        let mut pending: Option<Pending> = None;
        // The end of the last member's data blocks: where the next
        // member's first header block is.
        let mut end = 0u64;
        let mut last_member = String::new();
        for entry in archive.entries_with_seek().map_err(bad)? {
            let mut entry = entry.map_err(bad)?;
            let start = end;
            let size = entry.size();
            let data_at = entry.raw_file_position();
            end = data_at
                .checked_add(size.div_ceil(BLOCK) * BLOCK)
                .ok_or_else(|| shard_error(&label, "a member's size overflows"))?;
            let name = String::from_utf8(entry.path_bytes().into_owned()).map_err(|e| {
                shard_error(
                    &label,
                    format!(
                        "member {:?}: its path is not UTF-8",
                        String::from_utf8_lossy(e.as_bytes())
                    ),
                )
            })?;
            let member = |detail: String| shard_error(&label, format!("member {name:?} {detail}"));
            check_member_path(&name).map_err(member)?;
            if data_at.saturating_add(size) > len {
                return Err(shard_error(
                    &label,
                    format!(
                        "is truncated: member {name:?} declares {size} bytes at offset {data_at} \
                         but the file ends at {len}"
                    ),
                ));
            }
            let ty = entry.header().entry_type();
            if ty.is_dir() || ty.is_pax_global_extensions() {
                continue;
            }
            if !(ty.is_file() || ty == tar::EntryType::Continuous) {
                return Err(member(format!(
                    "is not a regular file (tar type {:?}); WebDataset members are files",
                    ty
                )));
            }
            if size > loaderx_core::MAX_RECORD_LEN {
                return Err(member(format!(
                    "is {size} bytes, more than a record may hold ({} bytes)",
                    loaderx_core::MAX_RECORD_LEN
                )));
            }
            let Some((key, ext)) = key_ext(&name) else {
                return Err(member(
                    "has no extension; WebDataset members are named KEY.EXTENSION".to_owned(),
                ));
            };
            if Kind::of(&ext) == Kind::Npy {
                let mut head = Vec::new();
                (&mut entry)
                    .take(size.min(NPY_HEADER_MAX))
                    .read_to_end(&mut head)
                    .map_err(|e| member(format!("cannot be read: {e}")))?;
                let h = npy_header(&head, size).map_err(member)?;
                shard.npy.entry(ext.clone()).or_default().push(h);
            }
            match &mut pending {
                Some(p) if p.key == key => {
                    if p.exts.contains(&ext) {
                        return Err(member(format!(
                            "repeats extension .{ext} in sample {key:?}"
                        )));
                    }
                    p.exts.push(ext);
                    p.bytes = p.bytes.saturating_add(size);
                }
                _ => {
                    if let Some(done) = pending.take() {
                        shard.finish(done)?;
                    }
                    pending = Some(Pending {
                        key: key.to_owned(),
                        offset: start,
                        bytes: size,
                        exts: vec![ext],
                    });
                }
            }
            last_member = name;
        }
        if let Some(done) = pending.take() {
            shard.finish(done)?;
        }
        if shard.samples.is_empty() {
            return Err(shard_error(&label, "holds no samples"));
        }
        // The end-of-archive block (tar writers write two zero blocks): a
        // file cut at a member boundary has none.
        let mut tail = [0u8; BLOCK as usize];
        let has_end = end.saturating_add(BLOCK) <= len && {
            let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
            f.seek(SeekFrom::Start(end))
                .and_then(|_| f.read_exact(&mut tail))
                .map_err(|e| Error::io(path, e))?;
            tail.iter().all(|&b| b == 0)
        };
        if !has_end {
            return Err(shard_error(
                &label,
                format!(
                    "is truncated: no end-of-archive block after its last member {last_member:?}"
                ),
            ));
        }
        Ok(shard)
    }

    /// Adds the finished sample `p`, checking its extensions against the
    /// first sample's.
    fn finish(&mut self, mut p: Pending) -> Result<(), Error> {
        p.exts.sort();
        if self.samples.is_empty() {
            self.first_key = p.key.clone();
            self.exts = p.exts;
        } else if p.exts != self.exts {
            return Err(self.mismatch(&p.key, &p.exts, &self.first_key, &self.exts));
        }
        self.samples.push(Sample {
            offset: p.offset,
            bytes: p.bytes,
        });
        Ok(())
    }

    /// The error for sample `key` holding `exts` where `first_key` holds
    /// `want`.
    fn mismatch(&self, key: &str, exts: &[String], first_key: &str, want: &[String]) -> Error {
        let list = want
            .iter()
            .map(|e| format!(".{e}"))
            .collect::<Vec<_>>()
            .join(", ");
        let detail = match want.iter().find(|e| !exts.contains(e)) {
            Some(missing) => format!(
                "sample {key:?} has no member {key}.{missing} (every sample of a split holds \
                 the same extensions; sample {first_key:?} holds {list})"
            ),
            None => {
                let extra = exts.iter().find(|e| !want.contains(e)).cloned();
                format!(
                    "sample {key:?} has a member {key}.{} that sample {first_key:?} lacks (every \
                     sample of a split holds the same extensions: {list})",
                    extra.unwrap_or_default()
                )
            }
        };
        shard_error(&self.label, detail)
    }
}

/// How an `.npy` column is stored: its element type and, when every array
/// of the split has one shape, that shape (else the arrays' rank).
#[derive(Debug, Clone, PartialEq, Eq)]
struct NpyColumn {
    dtype: NpyType,
    shape: Option<Vec<usize>>,
    ndim: usize,
}

impl NpyColumn {
    fn data_type(&self) -> DataType {
        let leaf = self.dtype.arrow();
        match &self.shape {
            Some(shape) => shape.iter().rev().fold(leaf, |inner, &n| {
                DataType::FixedSizeList(Arc::new(Field::new("item", inner, true)), n as i32)
            }),
            None => DataType::Struct(ragged_fields(leaf, self.ndim)),
        }
    }
}

/// The fields of Python loaderx 2.8.19's Ragged contract,
/// `struct{values: list<T>, shape: fixed_size_list<uint32, ndim>}`.
fn ragged_fields(leaf: DataType, ndim: usize) -> Fields {
    Fields::from(vec![
        Field::new(
            "values",
            DataType::LargeList(Arc::new(Field::new("item", leaf, true))),
            false,
        ),
        Field::new(
            "shape",
            DataType::FixedSizeList(
                Arc::new(Field::new("item", DataType::UInt32, true)),
                ndim as i32,
            ),
            false,
        ),
    ])
}

/// The `{bytes, path}` fields of an image column.
fn image_fields() -> Fields {
    Fields::from(vec![
        Field::new("bytes", DataType::LargeBinary, false),
        Field::new("path", DataType::Utf8, false),
    ])
}

/// One column of a split: its extension, kind and Arrow type.
#[derive(Debug, Clone)]
struct Column {
    ext: String,
    kind: Kind,
    npy: Option<NpyColumn>,
}

/// A file read from `base` on, as if it started there: the `tar` crate
/// keeps its position from the positions its reader's seeks return, so an
/// archive read from a sample's first header needs them relative to it.
struct Window {
    inner: BufReader<File>,
    base: u64,
}

impl Window {
    fn new(mut file: File, base: u64) -> std::io::Result<Window> {
        file.seek(SeekFrom::Start(base))?;
        Ok(Window {
            inner: BufReader::with_capacity(1 << 20, file),
            base,
        })
    }
}

impl Read for Window {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

impl Seek for Window {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let pos = match pos {
            SeekFrom::Start(n) => SeekFrom::Start(self.base.saturating_add(n)),
            other => other,
        };
        let at = self.inner.seek(pos)?;
        at.checked_sub(self.base).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a seek before the sample's start",
            )
        })
    }
}

/// A member read: its name and bytes.
type Member = (String, Vec<u8>);

/// One shard of a split as a table.
struct ShardTable {
    shard: Shard,
    columns: Arc<Vec<Column>>,
    schema: SchemaRef,
    features: Value,
}

impl ShardTable {
    /// Reads samples `from..to` with the columns `wanted` (schema indices).
    fn read(&self, wanted: &[usize], from: usize, to: usize) -> Result<RecordBatch, Error> {
        let n = to - from;
        let label = &self.shard.label;
        let changed = |what: String| {
            shard_error(label, format!("{what}; did it change since it was opened?"))
        };
        // members[c][i]: sample i's member of column wanted[c], and its name.
        let mut members: Vec<Vec<Option<Member>>> = vec![vec![None; n]; wanted.len()];
        if !wanted.is_empty() && n > 0 {
            let file = File::open(&self.shard.path).map_err(|e| Error::io(&self.shard.path, e))?;
            let from_sample = Window::new(file, self.shard.samples[from].offset)
                .map_err(|e| Error::io(&self.shard.path, e))?;
            let mut archive = tar::Archive::new(from_sample);
            let bad = |e: std::io::Error| {
                shard_error(
                    label,
                    format!("not a readable tar archive (truncated or damaged): {e}"),
                )
            };
            let mut sample: Option<(usize, String)> = None;
            let per_sample = self.shard.exts.len();
            let mut seen = 0usize;
            for entry in archive.entries_with_seek().map_err(bad)? {
                let mut entry = entry.map_err(bad)?;
                let ty = entry.header().entry_type();
                if ty.is_dir() || ty.is_pax_global_extensions() {
                    continue;
                }
                let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
                let (key, ext) = key_ext(&name)
                    .ok_or_else(|| changed(format!("member {name:?} has no extension")))?;
                let index = match &sample {
                    Some((i, k)) if k == key => *i,
                    Some((i, _)) => i + 1,
                    None => 0,
                };
                if index >= n {
                    break;
                }
                if sample.as_ref().is_none_or(|(i, _)| *i != index) {
                    sample = Some((index, key.to_owned()));
                }
                seen += 1;
                let Some(c) = wanted
                    .iter()
                    .position(|&w| self.columns.get(w).is_some_and(|col| col.ext == ext))
                else {
                    continue;
                };
                let size = entry.size();
                let mut data = Vec::new();
                data.try_reserve_exact(size as usize).map_err(|e| {
                    shard_error(
                        label,
                        format!("member {name:?}: cannot allocate {size} bytes: {e}"),
                    )
                })?;
                entry.read_to_end(&mut data).map_err(|e| {
                    shard_error(label, format!("member {name:?} cannot be read: {e}"))
                })?;
                if data.len() as u64 != size {
                    return Err(shard_error(
                        label,
                        format!(
                            "is truncated: member {name:?} holds {} of its {size} bytes",
                            data.len()
                        ),
                    ));
                }
                members[c][index] = Some((name, data));
                if seen == n * per_sample {
                    break;
                }
            }
        }
        let schema = Arc::new(
            self.schema
                .project(wanted)
                .map_err(|e| Error::invalid(format!("{label}: {e}")))?,
        );
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(wanted.len());
        for (c, &w) in wanted.iter().enumerate() {
            let column = &self.columns[w];
            let mut values = Vec::with_capacity(n);
            for (i, m) in members[c].drain(..).enumerate() {
                values.push(m.ok_or_else(|| {
                    changed(format!(
                        "sample {} has no .{} member any more",
                        from + i,
                        column.ext
                    ))
                })?);
            }
            arrays.push(self.array(column, values)?);
        }
        RecordBatch::try_new_with_options(
            schema,
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )
        .map_err(|e| Error::invalid(format!("{label}: {e}")))
    }

    /// The Arrow array of `column` from its members' `(name, bytes)`.
    fn array(&self, column: &Column, values: Vec<(String, Vec<u8>)>) -> Result<ArrayRef, Error> {
        let label = &self.shard.label;
        let member =
            |name: &str, detail: String| shard_error(label, format!("member {name:?} {detail}"));
        Ok(match column.kind {
            Kind::Image => {
                let mut bytes = LargeBinaryBuilder::new();
                let mut paths = StringBuilder::new();
                for (name, data) in values {
                    check_image_bytes(&data).map_err(|d| member(&name, d))?;
                    bytes.append_value(data);
                    paths.append_value(format!("{label}:{name}"));
                }
                let parts: Vec<ArrayRef> = vec![Arc::new(bytes.finish()), Arc::new(paths.finish())];
                Arc::new(
                    StructArray::try_new(image_fields(), parts, None)
                        .map_err(|e| Error::invalid(format!("{label}: {e}")))?,
                )
            }
            Kind::Int => {
                let mut out = Vec::with_capacity(values.len());
                for (name, data) in values {
                    let text = std::str::from_utf8(&data).ok().map(str::trim);
                    let v = text.and_then(|t| t.parse::<i64>().ok()).ok_or_else(|| {
                        member(
                            &name,
                            format!(
                                "holds {:?}, not the text of an integer",
                                String::from_utf8_lossy(&data[..data.len().min(64)])
                            ),
                        )
                    })?;
                    out.push(v);
                }
                Arc::new(Int64Array::from(out))
            }
            Kind::Text => {
                let mut b = LargeStringBuilder::new();
                for (name, data) in values {
                    let s = String::from_utf8(data)
                        .map_err(|e| member(&name, format!("is not UTF-8 text: {e}")))?;
                    b.append_value(s);
                }
                Arc::new(b.finish())
            }
            Kind::Bytes => {
                let mut b = LargeBinaryBuilder::new();
                for (_, data) in values {
                    b.append_value(data);
                }
                Arc::new(b.finish())
            }
            Kind::Npy => {
                let Some(npy) = &column.npy else {
                    return Err(Error::invalid(format!(
                        "{label}: .{} has no type",
                        column.ext
                    )));
                };
                let mut flat = Vec::new();
                let mut shapes = Vec::with_capacity(values.len());
                for (name, data) in values {
                    let h = npy_header(&data, data.len() as u64).map_err(|d| member(&name, d))?;
                    if h.dtype != npy.dtype || h.shape.len() != npy.ndim {
                        return Err(shard_error(
                            label,
                            format!(
                                "member {name:?} changed since the shard was opened (its .npy \
                                 header differs)"
                            ),
                        ));
                    }
                    if let Some(shape) = &npy.shape
                        && *shape != h.shape
                    {
                        return Err(shard_error(
                            label,
                            format!("member {name:?} changed since the shard was opened"),
                        ));
                    }
                    flat.extend_from_slice(&npy_data(&h, &data));
                    shapes.push(h.shape);
                }
                npy_array(npy, &flat, &shapes).map_err(|e| member(&column.ext, e))?
            }
        })
    }
}

/// A primitive array of `T` from little-endian bytes.
fn primitive<T: ArrowPrimitiveType>(
    bytes: &[u8],
    from: impl Fn(&[u8]) -> T::Native,
) -> PrimitiveArray<T> {
    PrimitiveArray::<T>::from_iter_values(bytes.chunks_exact(size_of::<T::Native>()).map(from))
}

/// The flat values array of `.npy` data.
fn npy_values(dtype: NpyType, bytes: &[u8]) -> Result<ArrayRef, String> {
    macro_rules! le {
        ($t:ty) => {
            Arc::new(primitive::<$t>(bytes, |c| {
                <$t as ArrowPrimitiveType>::Native::from_le_bytes(c.try_into().unwrap_or_default())
            })) as ArrayRef
        };
    }
    Ok(match dtype {
        NpyType::Bool => {
            let mut v = Vec::with_capacity(bytes.len());
            for &b in bytes {
                v.push(match b {
                    0 => false,
                    1 => true,
                    _ => return Err(format!("holds the byte {b} in a bool array")),
                });
            }
            Arc::new(BooleanArray::from(v))
        }
        NpyType::I8 => le!(Int8Type),
        NpyType::I16 => le!(Int16Type),
        NpyType::I32 => le!(Int32Type),
        NpyType::I64 => le!(Int64Type),
        NpyType::U8 => le!(UInt8Type),
        NpyType::U16 => le!(UInt16Type),
        NpyType::U32 => le!(UInt32Type),
        NpyType::U64 => le!(UInt64Type),
        NpyType::F16 => le!(Float16Type),
        NpyType::F32 => le!(Float32Type),
        NpyType::F64 => le!(Float64Type),
    })
}

/// The Arrow array of an `.npy` column's rows: `flat` holds every row's
/// C-order little-endian elements, `shapes` every row's shape.
fn npy_array(npy: &NpyColumn, flat: &[u8], shapes: &[Vec<usize>]) -> Result<ArrayRef, String> {
    let values = npy_values(npy.dtype, flat)?;
    let leaf = npy.dtype.arrow();
    match &npy.shape {
        Some(shape) => {
            let mut array = values;
            let mut dt = leaf;
            for &n in shape.iter().rev() {
                let field = Arc::new(Field::new("item", dt, true));
                let list = FixedSizeListArray::try_new(field.clone(), n as i32, array, None)
                    .map_err(|e| e.to_string())?;
                dt = DataType::FixedSizeList(field, n as i32);
                array = Arc::new(list);
            }
            Ok(array)
        }
        None => {
            let mut dims = Vec::with_capacity(shapes.len() * npy.ndim);
            let mut offsets = OffsetBufferBuilder::<i64>::new(shapes.len());
            for s in shapes {
                offsets.push_length(s.iter().product::<usize>());
                for &d in s {
                    dims.push(u32::try_from(d).map_err(|_| format!("dimension {d} too large"))?);
                }
            }
            let values = Arc::new(
                LargeListArray::try_new(
                    Arc::new(Field::new("item", leaf, true)),
                    offsets.finish(),
                    values,
                    None,
                )
                .map_err(|e| e.to_string())?,
            ) as ArrayRef;
            let shape_field = Arc::new(Field::new("item", DataType::UInt32, true));
            let shape = Arc::new(
                FixedSizeListArray::try_new(
                    shape_field,
                    npy.ndim as i32,
                    Arc::new(UInt32Array::from(dims)),
                    None,
                )
                .map_err(|e| e.to_string())?,
            ) as ArrayRef;
            Ok(Arc::new(
                StructArray::try_new(
                    ragged_fields(npy.dtype.arrow(), npy.ndim),
                    vec![values, shape],
                    None,
                )
                .map_err(|e| e.to_string())?,
            ))
        }
    }
}

impl TableSource for ShardTable {
    fn label(&self) -> &str {
        &self.shard.label
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn features(&self) -> Result<Option<Value>, String> {
        Ok(Some(self.features.clone()))
    }

    fn rows(&self) -> u64 {
        self.shard.samples.len() as u64
    }

    fn scan<'a>(
        &'a self,
        columns: &'a [usize],
        rows: Option<(usize, usize)>,
        sizing: Sizing,
    ) -> Scan<'a> {
        let total = self.shard.samples.len();
        let (first, count) = rows.unwrap_or((0, total));
        let end = first.saturating_add(count).min(total);
        let weights: Vec<u64> = self.shard.samples[..end].iter().map(|s| s.bytes).collect();
        let mut at = first.min(end);
        Box::new(std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let to = batch_end(&weights, at, end, sizing);
            let batch = self.read(columns, at, to);
            at = if batch.is_ok() { to } else { end };
            Some(batch)
        }))
    }
}

/// The shard files of input `input`: a file, a directory's `.tar` files,
/// or a glob's.
fn shard_files(input: &Path) -> Result<Vec<PathBuf>, Error> {
    match std::fs::metadata(input) {
        Ok(m) if m.is_dir() => {
            let mut out = Vec::new();
            local::walk(input, local::Kind::Tar, &mut out)?;
            if out.is_empty() {
                return Err(shard_error(
                    &input.display().to_string(),
                    "holds no .tar files",
                ));
            }
            Ok(out)
        }
        Ok(_) => Ok(vec![input.to_path_buf()]),
        Err(e) => {
            let text = input.to_string_lossy();
            if text.contains(['*', '?', '[', '{']) {
                let files = expand_glob(&text, local::Kind::Tar)?;
                if files.is_empty() {
                    return Err(Error::invalid(format!("no .tar file matches {text:?}")));
                }
                Ok(files)
            } else {
                Err(Error::io(input, e))
            }
        }
    }
}

/// Decides the columns of a split from its shards (their extension sets
/// must agree) and makes its tables.
fn split_tables(shards: Vec<Shard>) -> Result<Vec<Box<dyn TableSource>>, Error> {
    let Some(first) = shards.first() else {
        return Ok(Vec::new());
    };
    let exts = first.exts.clone();
    let first_key = format!("{} in {}", first.first_key, first.label);
    for s in &shards[1..] {
        if s.exts != exts {
            return Err(s.mismatch(&s.first_key, &s.exts, &first_key, &exts));
        }
    }
    let mut columns = Vec::with_capacity(exts.len());
    for ext in &exts {
        let kind = Kind::of(ext);
        let npy = if kind == Kind::Npy {
            let mut found: Option<(NpyType, Vec<usize>, String)> = None;
            let mut same_shape = true;
            for s in &shards {
                for h in s.npy.get(ext).map(Vec::as_slice).unwrap_or_default() {
                    match &found {
                        None => found = Some((h.dtype, h.shape.clone(), s.label.clone())),
                        Some((dtype, shape, where_)) => {
                            if h.dtype != *dtype || h.shape.len() != shape.len() {
                                return Err(shard_error(
                                    &s.label,
                                    format!(
                                        "a .{ext} member holds a {:?} array of rank {}, but the \
                                         first one (in {where_}) holds {dtype:?} of rank {}; \
                                         every .{ext} member of a split must hold one dtype \
                                         and rank",
                                        h.dtype,
                                        h.shape.len(),
                                        shape.len()
                                    ),
                                ));
                            }
                            same_shape &= h.shape == *shape;
                        }
                    }
                }
            }
            let (dtype, shape, _) = found
                .ok_or_else(|| Error::invalid(format!("column .{ext}: no .npy member was read")))?;
            Some(NpyColumn {
                dtype,
                ndim: shape.len(),
                shape: same_shape.then_some(shape),
            })
        } else {
            None
        };
        columns.push(Column {
            ext: ext.clone(),
            kind,
            npy,
        });
    }
    let fields: Vec<Field> = columns
        .iter()
        .map(|c| {
            let dt = match c.kind {
                Kind::Image => DataType::Struct(image_fields()),
                Kind::Int => DataType::Int64,
                Kind::Text => DataType::LargeUtf8,
                Kind::Bytes => DataType::LargeBinary,
                Kind::Npy => c.npy.as_ref().map_or(DataType::Null, NpyColumn::data_type),
            };
            Field::new(c.ext.as_str(), dt, false)
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let mut features = Map::new();
    for c in &columns {
        if c.kind == Kind::Image {
            features.insert(c.ext.clone(), json!({"_type": "Image"}));
        }
    }
    let features = Value::Object(features);
    let columns = Arc::new(columns);
    Ok(shards
        .into_iter()
        .map(|shard| {
            Box::new(ShardTable {
                shard,
                columns: columns.clone(),
                schema: schema.clone(),
                features: features.clone(),
            }) as Box<dyn TableSource>
        })
        .collect())
}

/// Converts the WebDataset shards of `source` (see the [module
/// documentation](self)) to stores under `out`: `out/<split>/<extension>/`,
/// or a part of each split with [`TableOptions::part`].
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `out` exists (for a whole conversion);
/// [`Error::Io`] for a shard that cannot be read; [`Error::Source`] naming
/// the shard (and member, and sample key) for a damaged or truncated
/// archive, a hostile or irregular member, a sample missing a member, a
/// member that does not hold what its extension says; [`Error::Column`],
/// [`Error::UnknownColumn`] and [`Error::InvalidOption`] as the table layer
/// reports them; [`Error::Store`] from writing. A failed conversion leaves
/// nothing at `out`.
pub fn convert_webdataset(
    source: &WebDataset,
    out: impl AsRef<Path>,
) -> Result<TableSummary, Error> {
    source.options.check()?;
    let mut inputs: Vec<(String, Vec<PathBuf>)> = Vec::new();
    let mut add = |name: &str, files: Vec<PathBuf>| match inputs.iter_mut().find(|(n, _)| n == name)
    {
        Some((_, f)) => f.extend(files),
        None => inputs.push((name.to_owned(), files)),
    };
    if !source.shards.is_empty() {
        let mut files = Vec::new();
        for input in &source.shards {
            files.extend(shard_files(input)?);
        }
        add(&source.split, files);
    }
    for (name, pattern) in &source.globs {
        let files = expand_glob(pattern, local::Kind::Tar)?;
        if files.is_empty() {
            return Err(Error::invalid(format!(
                "--split {name}={pattern}: no .tar file matches"
            )));
        }
        add(name, files);
    }
    if inputs.is_empty() {
        return Err(Error::invalid("no shards given"));
    }
    let names: Vec<String> = inputs.iter().map(|(name, _)| name.clone()).collect();
    let all: Vec<PathBuf> = inputs.iter().flat_map(|(_, f)| f.iter().cloned()).collect();
    let open = || {
        let mut splits = Vec::with_capacity(inputs.len());
        for (name, files) in inputs {
            let shards = files
                .iter()
                .map(|f| Shard::open(f))
                .collect::<Result<Vec<Shard>, Error>>()?;
            splits.push(SplitTables {
                name,
                partial: false,
                tables: split_tables(shards)?,
            });
        }
        Ok(splits)
    };
    crate::table::convert_tables(
        &names,
        open,
        out.as_ref(),
        &source.options,
        "webdataset",
        all,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_huge_extension_header_is_refused_before_the_tar_crate_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        for (flag, kind) in [(b'x', "pax"), (b'L', "GNU long-name")] {
            let mut header = [0u8; 512];
            header[..9].copy_from_slice(b"PaxHeader");
            // 128 MiB, in octal.
            header[124..136].copy_from_slice(b"00100000000000"[..12].as_ref());
            header[156] = flag;
            let path = dir.path().join(format!("{}.tar", flag as char));
            let mut bytes = header.to_vec();
            bytes.extend_from_slice(&[0u8; 1024]);
            std::fs::write(&path, &bytes).unwrap();
            let e = super::Shard::open(&path).err().unwrap().to_string();
            assert!(e.contains(kind) && e.contains("offset 0"), "{e}");
        }
    }

    use super::*;

    /// A tar archive of `members` (name, bytes), as `tar` writes one.
    fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in members {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            // Raw names: `append_data` refuses `..`, a hostile writer does not.
            let bytes = name.as_bytes();
            h.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn npy(descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
        let shape = match shape.len() {
            1 => format!("({},)", shape[0]),
            _ => format!(
                "({})",
                shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let mut header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
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

    #[test]
    fn keys_follow_the_webdataset_rule() {
        assert_eq!(
            key_ext("a/b/000.seg.PNG"),
            Some(("a/b/000", "seg.png".to_owned()))
        );
        assert_eq!(key_ext("x.y/000.cls"), Some(("x.y/000", "cls".to_owned())));
        assert_eq!(key_ext("noext"), None);
        assert_eq!(key_ext("d/.hidden"), None);
        assert!(check_member_path("../x.cls").is_err());
        assert!(check_member_path("a/../../x.cls").is_err());
        assert!(check_member_path("/etc/x.cls").is_err());
        assert!(check_member_path("a/b..c.cls").is_ok());
    }

    #[test]
    fn fortran_order_is_reordered() {
        // [[0, 1, 2], [3, 4, 5]] in Fortran order is 0 3 1 4 2 5.
        let f = [0u8, 3, 1, 4, 2, 5];
        assert_eq!(fortran_to_c(&f, &[2, 3], 1), [0, 1, 2, 3, 4, 5]);
        let bytes = npy(">i2", true, &[2, 2], &[0, 1, 0, 3, 0, 2, 0, 4]);
        let h = npy_header(&bytes, bytes.len() as u64).unwrap();
        assert!(h.big_endian && h.fortran);
    }

    #[test]
    fn shards_convert_with_every_kind_of_member() {
        let dir = tempfile::tempdir().unwrap();
        let png = |seed: u8| {
            let pixels: Vec<u8> = (0..12u8).map(|i| i.wrapping_mul(seed)).collect();
            crate::table::images::tests::png(image::ExtendedColorType::L8, 4, 3, &pixels)
        };
        let (p0, p1, p2) = (png(1), png(2), png(3));
        let a0 = npy("<f4", false, &[2], &[0, 0, 128, 63, 0, 0, 0, 64]);
        let a1 = npy("<f4", false, &[1], &[0, 0, 64, 64]);
        let members: Vec<(&str, &[u8])> = vec![
            ("s/000.cls", b"3"),
            ("s/000.png", &p0),
            ("s/000.txt", b"hello"),
            ("s/000.npy", &a0),
            ("s/001.png", &p1),
            ("s/001.cls", b" 7\n"),
            ("s/001.txt", b"world"),
            ("s/001.npy", &a1),
        ];
        std::fs::write(dir.path().join("a.tar"), tar(&members)).unwrap();
        let more: Vec<(&str, &[u8])> = vec![
            ("s/002.cls", b"-1"),
            ("s/002.png", &p2),
            ("s/002.txt", b"!"),
            ("s/002.npy", &a1),
        ];
        std::fs::write(dir.path().join("b.tar"), tar(&more)).unwrap();
        let out = dir.path().join("out");
        let source = WebDataset::new([dir.path().join("*.tar")])
            .options(TableOptions::new().text_bytes().batch_limits(2, 1 << 20));
        let summary = convert_webdataset(&source, &out).unwrap();
        let s = &summary.splits[0];
        assert_eq!(s.records, 3);
        let names: Vec<&str> = s.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["cls", "npy", "png", "txt"]);
        let cls = loaderx_core::Store::open(out.join("train/cls")).unwrap();
        let mut got = Vec::new();
        cls.for_each_record(|_, _, b| {
            got.push(i64::from_le_bytes(b.try_into().unwrap()));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, [3, 7, -1]);
        let npy_store = loaderx_core::Store::open(out.join("train/npy")).unwrap();
        assert_eq!(npy_store.kind(), loaderx_core::StoreKind::Ragged);
        let png_store = loaderx_core::Store::open(out.join("train/png")).unwrap();
        assert_eq!(png_store.kind(), loaderx_core::StoreKind::Dense);

        // Parts by rows merge into the whole.
        let parts = dir.path().join("parts");
        for i in 0..2 {
            let source = WebDataset::new([dir.path().join("*.tar")])
                .options(TableOptions::new().text_bytes().part(i, 2));
            convert_webdataset(&source, &parts).unwrap();
        }
        let merged = loaderx_core::Dataset::merge(parts.join("train"), Some(2)).unwrap();
        for (name, store) in merged.streams() {
            let single = loaderx_core::Store::open(out.join("train").join(name)).unwrap();
            assert_eq!(
                loaderx_core::digest(store).unwrap(),
                loaderx_core::digest(&single).unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn hostile_and_broken_shards_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            Shard::open(&path).map(|_| ()).unwrap_err().to_string()
        };
        let e = open("up.tar", &tar(&[("../x.cls", b"1")]));
        assert!(
            e.contains("up.tar") && e.contains("../x.cls") && e.contains(".."),
            "{e}"
        );
        let e = open("abs.tar", &tar(&[("/x.cls", b"1")]));
        assert!(e.contains("abs.tar") && e.contains("/x.cls"), "{e}");
        let good = tar(&[("000.cls", b"1"), ("000.txt", b"a"), ("001.cls", b"2")]);
        let e = open("missing.tar", &good);
        assert!(
            e.contains("missing.tar") && e.contains("\"001\"") && e.contains("001.txt"),
            "{e}"
        );
        let full = tar(&[("000.cls", b"1"), ("000.txt", &[b'a'; 1000])]);
        let e = open("cut.tar", &full[..1100]);
        assert!(e.contains("cut.tar") && e.contains("truncated"), "{e}");
        let e = open("cut2.tar", &full[..2048]);
        assert!(e.contains("cut2.tar") && e.contains("truncated"), "{e}");
        let e = open("noext.tar", &tar(&[("000", b"1")]));
        assert!(e.contains("has no extension"), "{e}");
    }
}
