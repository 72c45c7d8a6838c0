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
//! | `jpg`, `jpeg`, `png`, `webp` | an `Image`                    | decoded pixels, Dense when one shape across the split; the files' bytes (Ragged `u8`) when the images have several sizes or with [`TableOptions::encoded_images`]; Ragged pixels with [`TableOptions::decoded_images`] (the table layer's rule, [`crate::table`]) |
//! | `cls`, `cls2`, `index`    | `int64`, the member's text (an integer, surrounding white space allowed) | Dense `i64` scalar |
//! | `txt`, `json`             | a string (the member's UTF-8 text; a `.json` member is stored as its text, its fields are not split into columns) | Ragged `u8` of its UTF-8 bytes, or with [`TableOptions::tokenizer`] Ragged `u32` token ids |
//! | `npy`                     | the array (`np.save`'s file)  | Dense `[shape]` when every sample's array has one shape, else Ragged of its rank; bool, ints, `float16/32/64`, either byte order, C or Fortran order (converted to C order) |
//! | anything else             | raw bytes                     | refused by the layer, naming the column: leave it out with [`TableOptions::drop`] |
//!
//! Every sample of a split must hold the same extensions: a sample missing
//! one (or holding one more) is an error naming the shard, the key and the
//! member. Samples are read in shard order (as given; a directory's or a
//! glob's shards sorted by path; a brace pattern's in the order it expands
//! to), members in archive order.
//!
//! Shards are `.tar` files, or gzipped ones (`.tar.gz`, `.tgz`: a file
//! starting with the gzip magic bytes is read as one, whatever its name).
//! A shard argument may be a file, a directory (its shards), a glob, or a
//! brace pattern as WebDataset writes shard lists
//! (`train-{000000..000099}.tar`, `{a,b}`, several or nested braces; zero
//! padding kept): braces expand first (at most 1 000 000 paths per
//! pattern), then each path holding a glob character is globbed and each
//! other path must exist (an error naming it and the pattern).
//!
//! Shards are streamed, never unpacked: opening a plain one reads its tar
//! headers only (member data is skipped by seeking; an `.npy` member's
//! header is read), counting its samples and noting where each starts; a
//! scan reads just the samples of its rows, in bounded batches, so a part
//! writer ([`TableOptions::part`]) reads only its rows' members. A gzipped
//! shard has no random access: opening it streams it once through the
//! decompressor (then up to 16 MiB after the end-of-archive block, to
//! check the gzip trailer), and each scan streams it again from the start,
//! skipping (decompressing) the samples before its rows; nothing is written
//! to disk.
//!
//! A hard-link member holds its target's data (an earlier regular member
//! of the shard), as tar extracts it. GNU long names, pax headers (long or
//! non-ASCII paths, global headers), `./` prefixes and upper-case
//! extensions are read as tar and WebDataset read them.
//!
//! Refused, with an error naming the shard (and member): a member whose
//! path is absolute or holds `..` (never written anywhere, but refused), a
//! member that is neither a regular file nor a hard link to one (a
//! symbolic link, a device; directories are skipped), a member without an
//! extension, a member larger than a record may hold, a truncated archive
//! (a member's data running past the end of the file or the gzip stream,
//! or no end-of-archive block), a damaged header, and a damaged or cut
//! gzip stream.
//!
//! Splits: [`WebDataset::new`]'s shards form the split
//! [`WebDataset::split_name`] (default `train`); [`WebDataset::split_glob`]
//! adds named splits.
//!
//! ```no_run
//! use loaderx_convert::table::TableOptions;
//! use loaderx_convert::webdataset::{WebDataset, convert_webdataset};
//!
//! let source = WebDataset::new(["shards/train-{000000..000009}.tar"])
//!     .split_glob("test", "shards/test-*.tar.gz")
//!     .options(TableOptions::new());
//! let summary = convert_webdataset(&source, "stores")?;
//! println!("{summary}");
//! # Ok::<(), loaderx_convert::Error>(())
//! ```

use std::collections::{BTreeMap, HashMap};
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
use flate2::read::MultiGzDecoder;
use serde_json::{Map, Value, json};

use crate::error::Error;
use crate::folder::{batch_end, check_image_bytes};
use crate::local::{self, expand_glob};
use crate::table::{Scan, Sizing, SplitTables, TableOptions, TableSource, TableSummary};

/// The size of a tar block.
const BLOCK: u64 = 512;

/// The most bytes of a gzipped shard read after its end-of-archive block
/// (tar padding, then the gzip trailer whose checksum is checked): beyond
/// this the rest is not read (a plain shard's trailing bytes are ignored
/// too).
const GZIP_TAIL_MAX: u64 = 16 << 20;

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
    /// Converts `shards` (tar files, plain or gzipped, directories of
    /// them, glob patterns such as `data/train-*.tar`, or brace patterns
    /// such as `data/train-{000000..000099}.tar`) as the split
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

    /// The split `name` holds the shards (`.tar`, `.tar.gz`, `.tgz`) `glob`
    /// names: braces expanded first, as for [`WebDataset::new`], then each
    /// glob's matches sorted (`*` stays within one directory, `**` crosses
    /// them); repeatable, and a name given twice concatenates.
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
            "jpg" | "jpeg" | "png" | "webp" => Kind::Image,
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
    crate::npy_header::check_nesting(head).map_err(|e| format!("not a readable .npy file: {e}"))?;
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
    /// Whether the file is gzipped (its tar bytes are read as a stream:
    /// sample offsets are offsets in the decompressed bytes).
    gzip: bool,
    /// The targets of its hard-link members, by name: where their data
    /// starts in the tar bytes, and its size.
    links: HashMap<String, (u64, u64)>,
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

/// Where the header block `header` (at offset `at` of the tar bytes) says
/// the next header starts, or `None` for a zero block (the end of the
/// archive); an extension header (a GNU long name or link, a pax header)
/// larger than [`MAX_EXTENSION_BYTES`] is refused, naming its offset.
fn next_header(header: &[u8; BLOCK as usize], at: u64) -> Result<Option<u64>, String> {
    if header.iter().all(|&b| b == 0) {
        return Ok(None);
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
        return Err(format!(
            "the {kind} extension header at offset {at} declares {size} bytes (at most \
             {MAX_EXTENSION_BYTES}); not a WebDataset shard"
        ));
    }
    Ok(Some(at.saturating_add(BLOCK).saturating_add(
        size.div_ceil(BLOCK).saturating_mul(BLOCK),
    )))
}

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
        match next_header(&header, at).map_err(|d| shard_error(label, d))? {
            Some(next) => at = next,
            None => break,
        }
    }
    Ok(())
}

/// The decompressed tar bytes of a gzipped shard.
type Gunzipped = TarStream<BufReader<MultiGzDecoder<File>>>;

/// A forward-only reader of a gzipped shard's tar bytes (which have no
/// random access): counts its position, and checks each header block as it
/// passes, refusing an extension header larger than [`MAX_EXTENSION_BYTES`]
/// before the `tar` crate reads the extension (what
/// [`check_extension_headers`] does for a plain shard).
struct TarStream<R> {
    inner: R,
    /// The bytes read so far.
    pos: u64,
    /// Where the next header block starts; `None` past the end of the
    /// archive.
    next_header: Option<u64>,
    header: [u8; BLOCK as usize],
    /// The bytes of `header` read so far.
    filled: usize,
}

impl Gunzipped {
    /// Opens the gzipped shard `path` at the start of its tar bytes.
    fn open(path: &Path) -> Result<Gunzipped, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(TarStream {
            inner: BufReader::with_capacity(1 << 16, MultiGzDecoder::new(file)),
            pos: 0,
            next_header: Some(0),
            header: [0; BLOCK as usize],
            filled: 0,
        })
    }
}

impl<R: Read> TarStream<R> {
    /// Reads on to offset `to` of the tar bytes (at or after the position);
    /// false when they end before it.
    fn skip_to(&mut self, to: u64) -> std::io::Result<bool> {
        let want = to.saturating_sub(self.pos);
        let skipped = std::io::copy(&mut self.by_ref().take(want), &mut std::io::sink())?;
        Ok(skipped == want)
    }
}

impl<R: Read> Read for TarStream<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let end = self.pos + n as u64;
        // Headers lie at or after the position: every byte is seen once.
        while let Some(at) = self.next_header {
            let need = at + self.filled as u64;
            if need >= end {
                break;
            }
            let from = (need - self.pos) as usize;
            let take = (BLOCK as usize - self.filled).min(n - from);
            self.header[self.filled..self.filled + take].copy_from_slice(&buf[from..from + take]);
            self.filled += take;
            if self.filled == BLOCK as usize {
                self.filled = 0;
                self.next_header = next_header(&self.header, at)
                    .map_err(|d| std::io::Error::new(std::io::ErrorKind::InvalidData, d))?;
            }
        }
        self.pos = end;
        Ok(n)
    }
}

/// Whether `file` starts with the gzip magic bytes (a `.tar.gz` shard,
/// whatever its name).
fn is_gzip(file: &File) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < magic.len() {
        match file.read_at(&mut magic[got..], got as u64)? {
            0 => return Ok(false),
            k => got += k,
        }
    }
    Ok(magic == [0x1f, 0x8b])
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
    /// Reads the headers of shard `path`: a tar file, or a gzipped one
    /// (whatever its name) streamed through the decompressor once.
    fn open(path: &Path) -> Result<Shard, Error> {
        let label = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let gzip = is_gzip(&file).map_err(|e| Error::io(path, e))?;
        let mut shard = Shard {
            path: path.to_path_buf(),
            label,
            gzip,
            links: HashMap::new(),
            samples: Vec::new(),
            first_key: String::new(),
            exts: Vec::new(),
            npy: BTreeMap::new(),
        };
        // The last member, and whether the end-of-archive block follows it.
        let (last_member, has_end) = if gzip {
            drop(file);
            let mut stream = Gunzipped::open(path)?;
            let (end, last_member) = {
                let mut archive = tar::Archive::new(&mut stream);
                let entries = archive.entries().map_err(|e| shard.unreadable(e))?;
                shard.walk(entries, None)?
            };
            // The walk stops at a zero block or where the bytes end; the
            // stream passed the block only in the first case.
            let has_end = stream.pos >= end.saturating_add(BLOCK);
            if has_end {
                // Read the tar padding and the gzip trailer, whose checksum
                // and length the decoder checks (a damaged or cut stream
                // fails here), up to a bound.
                std::io::copy(
                    &mut stream.by_ref().take(GZIP_TAIL_MAX),
                    &mut std::io::sink(),
                )
                .map_err(|e| shard.unreadable(e))?;
            }
            (last_member, has_end)
        } else {
            check_extension_headers(&file, len, &shard.label)?;
            let mut archive = tar::Archive::new(BufReader::with_capacity(1 << 16, file));
            let entries = archive
                .entries_with_seek()
                .map_err(|e| shard.unreadable(e))?;
            let (end, last_member) = shard.walk(entries, Some(len))?;
            // The end-of-archive block (tar writers write two zero blocks):
            // a file cut at a member boundary has none.
            let mut tail = [0u8; BLOCK as usize];
            let has_end = end.saturating_add(BLOCK) <= len && {
                let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
                f.seek(SeekFrom::Start(end))
                    .and_then(|_| f.read_exact(&mut tail))
                    .map_err(|e| Error::io(path, e))?;
                tail.iter().all(|&b| b == 0)
            };
            (last_member, has_end)
        };
        if shard.samples.is_empty() {
            return Err(shard_error(&shard.label, "holds no samples"));
        }
        if !has_end {
            return Err(shard_error(
                &shard.label,
                format!(
                    "is truncated: no end-of-archive block after its last member {last_member:?}"
                ),
            ));
        }
        Ok(shard)
    }

    /// The error for tar (or gzip) bytes the reader cannot read.
    fn unreadable(&self, e: std::io::Error) -> Error {
        let what = if self.gzip {
            "not a readable gzipped tar archive (truncated or damaged)"
        } else {
            "not a readable tar archive (truncated or damaged)"
        };
        shard_error(&self.label, format!("{what}: {e}"))
    }

    /// Reads the members `entries` lists (the whole archive), noting its
    /// samples; `len` is the file's length when the archive is not
    /// compressed (a member's data must lie within it). Returns where the
    /// last member's data blocks end and that member's name.
    fn walk<R: Read>(
        &mut self,
        entries: tar::Entries<'_, R>,
        len: Option<u64>,
    ) -> Result<(u64, String), Error> {
        let label = self.label.clone();
        let mut pending: Option<Pending> = None;
        // The regular members so far: where their data is, its size, and an
        // `.npy` member's header (a hard link's target is one of them).
        let mut files: HashMap<String, (u64, u64, Option<NpyHeader>)> = HashMap::new();
        // The end of the last member's data blocks: where the next
        // member's first header block is.
        let mut end = 0u64;
        let mut last_member = String::new();
        for entry in entries {
            let mut entry = entry.map_err(|e| match last_member.as_str() {
                "" => self.unreadable(e),
                last => self.unreadable(std::io::Error::new(
                    e.kind(),
                    format!("{e} (after member {last:?})"),
                )),
            })?;
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
            if let Some(len) = len
                && data_at.saturating_add(size) > len
            {
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
            // A hard link holds its target's data, as tar extracts it: an
            // earlier regular member of the shard.
            let link = if ty == tar::EntryType::Link {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                let Some(found) = files.get(&target) else {
                    return Err(member(format!(
                        "is a hard link to {target:?}, which is not an earlier regular member \
                         of the shard"
                    )));
                };
                self.links.insert(target.clone(), (found.0, found.1));
                Some(found.clone())
            } else if ty.is_file() || ty == tar::EntryType::Continuous {
                None
            } else {
                return Err(member(format!(
                    "is not a regular file or a hard link (tar type {:?}); WebDataset members \
                     are files",
                    ty
                )));
            };
            let size = link.as_ref().map_or(size, |l| l.1);
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
            let npy = match &link {
                Some((_, _, npy)) => npy.clone(),
                None if Kind::of(&ext) == Kind::Npy => {
                    let mut head = Vec::new();
                    (&mut entry)
                        .take(size.min(NPY_HEADER_MAX))
                        .read_to_end(&mut head)
                        .map_err(|e| member(format!("cannot be read: {e}")))?;
                    Some(npy_header(&head, size).map_err(member)?)
                }
                None => None,
            };
            if link.is_none() {
                files.insert(name.clone(), (data_at, size, npy.clone()));
            }
            if Kind::of(&ext) == Kind::Npy {
                let h = npy.ok_or_else(|| {
                    member("is an .npy member linked to a member of another kind".to_owned())
                })?;
                self.npy.entry(ext.clone()).or_default().push(h);
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
                        self.finish(done)?;
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
            self.finish(done)?;
        }
        Ok((end, last_member))
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
    /// Reads samples `from..to` with the columns `wanted` (schema indices);
    /// `stream` is the scan's position in a gzipped shard (opened on first
    /// use, read on forward: a plain shard seeks instead).
    fn read(
        &self,
        wanted: &[usize],
        from: usize,
        to: usize,
        stream: &mut Option<Gunzipped>,
    ) -> Result<RecordBatch, Error> {
        let n = to - from;
        let label = &self.shard.label;
        let path = &self.shard.path;
        // members[c][i]: sample i's member of column wanted[c], and its name.
        let mut members: Vec<Vec<Option<Member>>> = vec![vec![None; n]; wanted.len()];
        if !wanted.is_empty() && n > 0 {
            let offset = self.shard.samples[from].offset;
            if self.shard.gzip {
                // A scan reads forward; one that went past the sample (a
                // shard that changed) starts the stream again.
                let s = match stream {
                    Some(s) if s.pos <= offset => s,
                    _ => stream.insert(Gunzipped::open(path)?),
                };
                if !s.skip_to(offset).map_err(|e| self.shard.unreadable(e))? {
                    return Err(shard_error(
                        label,
                        format!(
                            "ends before sample {from} (offset {offset}); did it change since \
                             it was opened?"
                        ),
                    ));
                }
                let mut archive = tar::Archive::new(s);
                let entries = archive.entries().map_err(|e| self.shard.unreadable(e))?;
                self.members(entries, wanted, &mut members)?;
            } else {
                let file = File::open(path).map_err(|e| Error::io(path, e))?;
                let from_sample = Window::new(file, offset).map_err(|e| Error::io(path, e))?;
                let mut archive = tar::Archive::new(from_sample);
                let entries = archive
                    .entries_with_seek()
                    .map_err(|e| self.shard.unreadable(e))?;
                self.members(entries, wanted, &mut members)?;
            }
        }
        let schema = Arc::new(
            self.schema
                .project(wanted)
                .map_err(|e| Error::invalid(format!("{label}: {e}")))?,
        );
        let changed = |what: String| {
            shard_error(label, format!("{what}; did it change since it was opened?"))
        };
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

    /// Reads the members of the columns `wanted` of the `members[0].len()`
    /// samples `entries` lists first into `members` (`members[c][i]`:
    /// sample i's member of column `wanted[c]`).
    fn members<R: Read>(
        &self,
        entries: tar::Entries<'_, R>,
        wanted: &[usize],
        members: &mut [Vec<Option<Member>>],
    ) -> Result<(), Error> {
        let label = &self.shard.label;
        let n = members.first().map_or(0, Vec::len);
        let changed = |what: String| {
            shard_error(label, format!("{what}; did it change since it was opened?"))
        };
        let mut sample: Option<(usize, String)> = None;
        let per_sample = self.shard.exts.len();
        let mut seen = 0usize;
        for entry in entries {
            let mut entry = entry.map_err(|e| self.shard.unreadable(e))?;
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
            if ty == tar::EntryType::Link {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                let data = self.link_data(&target).map_err(|e| {
                    shard_error(
                        label,
                        format!("member {name:?}, a hard link to {target:?}: {e}"),
                    )
                })?;
                members[c][index] = Some((name, data));
            } else {
                members[c][index] = Some((name.clone(), read_member(&mut entry, label, &name)?));
            }
            if seen == n * per_sample {
                break;
            }
        }
        Ok(())
    }

    /// The data of the hard-link target `target` (read again: from the
    /// file, or by a second pass over a gzipped shard's stream).
    fn link_data(&self, target: &str) -> Result<Vec<u8>, String> {
        let &(at, size) = self
            .shard
            .links
            .get(target)
            .ok_or("its target is not a member any more; did the shard change?")?;
        let mut data = vec![0u8; usize::try_from(size).map_err(|e| e.to_string())?];
        if self.shard.gzip {
            let mut stream = Gunzipped::open(&self.shard.path).map_err(|e| e.to_string())?;
            if !stream.skip_to(at).map_err(|e| e.to_string())? {
                return Err("the shard ends before the target; did it change?".to_owned());
            }
            stream.read_exact(&mut data).map_err(|e| e.to_string())?;
        } else {
            use std::os::unix::fs::FileExt;
            File::open(&self.shard.path)
                .and_then(|f| f.read_exact_at(&mut data, at))
                .map_err(|e| e.to_string())?;
        }
        Ok(data)
    }
}

/// The data of the member `entry` (`name`, of shard `label`), checked to
/// be whole.
fn read_member<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    label: &str,
    name: &str,
) -> Result<Vec<u8>, Error> {
    let size = entry.size();
    let mut data = Vec::new();
    data.try_reserve_exact(size as usize).map_err(|e| {
        shard_error(
            label,
            format!("member {name:?}: cannot allocate {size} bytes: {e}"),
        )
    })?;
    entry
        .read_to_end(&mut data)
        .map_err(|e| shard_error(label, format!("member {name:?} cannot be read: {e}")))?;
    if data.len() as u64 != size {
        return Err(shard_error(
            label,
            format!(
                "is truncated: member {name:?} holds {} of its {size} bytes",
                data.len()
            ),
        ));
    }
    Ok(data)
}

impl ShardTable {
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
        let mut stream = None;
        Box::new(std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let to = batch_end(&weights, at, end, sizing);
            let batch = self.read(columns, at, to, &mut stream);
            at = if batch.is_ok() { to } else { end };
            Some(batch)
        }))
    }
}

/// The most paths the braces of one shard pattern may expand to.
const MAX_BRACE_EXPANSION: usize = 1_000_000;

/// The paths shard pattern `pattern` names after brace expansion, as
/// WebDataset's `braceexpand` does it: ranges `{000000..000099}` (zero
/// padding kept, `{3..1}` counts down, `{0..10..5}` steps), lists
/// `{a,b}`, several and nested braces, in the order they expand to; a
/// pattern without braces is itself.
fn expand_braces(pattern: &str) -> Result<Vec<String>, Error> {
    if !pattern.contains('{') {
        return Ok(vec![pattern.to_owned()]);
    }
    let all = brace_expansion::expand_with_max(pattern, MAX_BRACE_EXPANSION + 1);
    if all.len() > MAX_BRACE_EXPANSION {
        return Err(Error::invalid(format!(
            "shard pattern {pattern:?} expands to more than {MAX_BRACE_EXPANSION} paths (the \
             most one pattern may name); split it into several"
        )));
    }
    Ok(all)
}

/// The shard files of a file or directory that exists: itself, or the
/// directory's shards, sorted.
fn existing_shards(path: &Path, meta: &std::fs::Metadata) -> Result<Vec<PathBuf>, Error> {
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    local::walk(path, local::Kind::Tar, &mut out)?;
    if out.is_empty() {
        return Err(shard_error(
            &path.display().to_string(),
            "holds no .tar, .tar.gz or .tgz files",
        ));
    }
    Ok(out)
}

/// The shard files of pattern `pattern`: its braces expanded first
/// ([`expand_braces`]), then each path that holds a glob character (`*`,
/// `?`, `[`) globbed (its shards sorted), each other path a file or
/// directory that must exist (an error naming it and the pattern).
fn pattern_shards(pattern: &str) -> Result<Vec<PathBuf>, Error> {
    let expanded = expand_braces(pattern)?;
    let braced = expanded.len() != 1 || expanded[0] != pattern;
    let mut out = Vec::new();
    for path in expanded {
        if path.contains(['*', '?', '[', '{']) {
            out.extend(expand_glob(&path, local::Kind::Tar)?);
            continue;
        }
        match std::fs::metadata(&path) {
            Ok(meta) => out.extend(existing_shards(Path::new(&path), &meta)?),
            Err(e) if braced => {
                return Err(shard_error(
                    &path,
                    format!("cannot be read (named by the shard pattern {pattern:?}): {e}"),
                ));
            }
            Err(e) => return Err(Error::io(Path::new(&path), e)),
        }
    }
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "no .tar, .tar.gz or .tgz file matches {pattern:?}"
        )));
    }
    Ok(out)
}

/// The shard files of input `input`: a file, a directory's shards, or a
/// pattern's ([`pattern_shards`]).
fn shard_files(input: &Path) -> Result<Vec<PathBuf>, Error> {
    match std::fs::metadata(input) {
        Ok(meta) => existing_shards(input, &meta),
        Err(e) => match input.to_str() {
            Some(text) if text.contains(['*', '?', '[', '{']) => pattern_shards(text),
            _ => Err(Error::io(input, e)),
        },
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
        let files = pattern_shards(pattern).map_err(|e| match e {
            Error::InvalidOption { message } => {
                Error::invalid(format!("--split-glob {name}={pattern}: {message}"))
            }
            e => e,
        })?;
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

    /// `bytes` gzipped, as `gzip` writes them.
    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    /// The canonical digest of every store of `split` under `out`.
    fn digests(out: &Path, split: &str) -> Vec<(String, String)> {
        let mut names: Vec<String> = std::fs::read_dir(out.join(split))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|n| {
                let store = loaderx_core::Store::open(out.join(split).join(&n)).unwrap();
                let d = loaderx_core::digest(&store).unwrap().sha256;
                (n, d)
            })
            .collect()
    }

    #[test]
    fn gzipped_shards_convert_like_plain_ones() {
        let dir = tempfile::tempdir().unwrap();
        let a0 = npy("<f4", false, &[2], &[0, 0, 128, 63, 0, 0, 0, 64]);
        let a1 = npy("<f4", false, &[1], &[0, 0, 64, 64]);
        let mut members: Vec<(String, Vec<u8>)> = Vec::new();
        for i in 0..7 {
            members.push((format!("s/{i:03}.cls"), i.to_string().into_bytes()));
            members.push((format!("s/{i:03}.txt"), vec![b'a' + i as u8; 700 * i + 1]));
            members.push((
                format!("s/{i:03}.npy"),
                if i % 2 == 0 { a0.clone() } else { a1.clone() },
            ));
        }
        let list: Vec<(&str, &[u8])> = members
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_slice()))
            .collect();
        let plain = tar(&list);
        std::fs::create_dir(dir.path().join("p")).unwrap();
        std::fs::create_dir(dir.path().join("g")).unwrap();
        std::fs::write(dir.path().join("p/a.tar"), &plain).unwrap();
        std::fs::write(dir.path().join("g/a.tar.gz"), gzip(&plain)).unwrap();
        std::fs::write(dir.path().join("g/b.tgz"), gzip(&plain)).unwrap();
        std::fs::write(dir.path().join("p/b.tar"), &plain).unwrap();
        // Small batches: a scan reads the stream on from batch to batch.
        let options = || TableOptions::new().text_bytes().batch_limits(2, 1 << 20);
        let convert = |input: PathBuf, out: &str| {
            let out = dir.path().join(out);
            let summary =
                convert_webdataset(&WebDataset::new([input]).options(options()), &out).unwrap();
            assert_eq!(summary.splits[0].records, 14);
            digests(&out, "train")
        };
        let from_plain = convert(dir.path().join("p"), "plain");
        assert_eq!(from_plain.len(), 3);
        assert_eq!(convert(dir.path().join("g"), "gz"), from_plain);
        assert_eq!(convert(dir.path().join("g/*"), "glob"), from_plain);

        // Parts read from the middle of a gzipped stream.
        let parts = dir.path().join("parts");
        for i in 0..3 {
            let source = WebDataset::new([dir.path().join("g")]).options(options().part(i, 3));
            convert_webdataset(&source, &parts).unwrap();
        }
        let merged = loaderx_core::Dataset::merge(parts.join("train"), Some(3)).unwrap();
        for (name, store) in merged.streams() {
            let d = loaderx_core::digest(store).unwrap().sha256;
            assert!(from_plain.contains(&(name.to_string(), d)), "{name}");
        }
    }

    #[test]
    fn cut_or_damaged_gzipped_shards_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let plain = tar(&[
            ("000.cls", b"1"),
            ("000.txt", &[b'a'; 3000]),
            ("001.cls", b"2"),
            ("001.txt", &[b'b'; 3000]),
        ]);
        let gz = gzip(&plain);
        let open = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            Shard::open(&path).map(|_| ()).unwrap_err().to_string()
        };
        // Cut in the middle, in the tar padding, in the gzip trailer.
        for (name, cut) in [("half.tar.gz", gz.len() / 2), ("tail.tar.gz", gz.len() - 4)] {
            let e = open(name, &gz[..cut]);
            assert!(e.contains(name) && e.contains("gzip"), "{e}");
        }
        let mut damaged = gz.clone();
        let at = damaged.len() / 2;
        damaged[at] ^= 0x55;
        damaged[at + 1] ^= 0xaa;
        let e = open("damaged.tar.gz", &damaged);
        assert!(e.contains("damaged.tar.gz"), "{e}");
        // A member cut short by a gzip stream that ends cleanly.
        let e = open("short.tar.gz", &gzip(&plain[..1536]));
        assert!(e.contains("short.tar.gz") && e.contains("000.txt"), "{e}");
        let e = open("noend.tar.gz", &gzip(&plain[..plain.len() - 1024]));
        assert!(e.contains("noend.tar.gz") && e.contains("truncated"), "{e}");
        // A huge extension header is refused before the tar crate reads it.
        let mut header = [0u8; 512];
        header[..9].copy_from_slice(b"PaxHeader");
        header[124..136].copy_from_slice(b"00100000000000"[..12].as_ref());
        header[156] = b'x';
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&[0u8; 1024]);
        let e = open("huge.tar.gz", &gzip(&bytes));
        assert!(e.contains("pax") && e.contains("offset 0"), "{e}");
    }

    #[test]
    fn braces_expand_like_braceexpand() {
        let x = |p: &str| expand_braces(p).unwrap();
        assert_eq!(
            x("s/train-{000000..000002}.tar"),
            [
                "s/train-000000.tar",
                "s/train-000001.tar",
                "s/train-000002.tar"
            ]
        );
        assert_eq!(x("{8..11}"), ["8", "9", "10", "11"]);
        assert_eq!(x("{08..11}"), ["08", "09", "10", "11"]);
        assert_eq!(x("{3..1}.tar"), ["3.tar", "2.tar", "1.tar"]);
        assert_eq!(x("{0..10..5}"), ["0", "5", "10"]);
        assert_eq!(
            x("{a,b}/{0..1}.tar"),
            ["a/0.tar", "a/1.tar", "b/0.tar", "b/1.tar"]
        );
        assert_eq!(x("x{a,b{1..2}}"), ["xa", "xb1", "xb2"]);
        assert_eq!(x("plain/a*.tar"), ["plain/a*.tar"]);
        assert_eq!(x("a{b}c"), ["a{b}c"]);
        let e = expand_braces("{0..999}{0..999}{0..9}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 1000000 paths"), "{e}");
        assert!(expand_braces("{0..999}{0..999}").is_ok());
    }

    #[test]
    fn a_brace_range_names_every_shard_it_expands_to() {
        let dir = tempfile::tempdir().unwrap();
        let shard = tar(&[("000.cls", b"1")]);
        for i in [0, 1, 3] {
            std::fs::write(dir.path().join(format!("t-{i:06}.tar")), &shard).unwrap();
        }
        let base = dir.path().display();
        let files = pattern_shards(&format!("{base}/t-{{000000..000001}}.tar")).unwrap();
        assert_eq!(
            files,
            [
                dir.path().join("t-000000.tar"),
                dir.path().join("t-000001.tar")
            ]
        );
        let files = shard_files(Path::new(&format!("{base}/t-{{000003,000000}}.t*"))).unwrap();
        assert_eq!(
            files,
            [
                dir.path().join("t-000003.tar"),
                dir.path().join("t-000000.tar")
            ]
        );
        let pattern = format!("{base}/t-{{000000..000003}}.tar");
        let e = shard_files(Path::new(&pattern)).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{base}/t-000002.tar")) && e.contains(&pattern),
            "{e}"
        );
        // The same through split_glob.
        let source = WebDataset::new(Vec::<PathBuf>::new())
            .split_glob("test", &pattern)
            .options(TableOptions::new());
        let e = convert_webdataset(&source, dir.path().join("out"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("t-000002.tar"), "{e}");
    }

    #[test]
    fn webp_members_are_images() {
        assert_eq!(Kind::of("webp"), Kind::Image);
        assert_eq!(Kind::of("thumb.webp"), Kind::Image);
        assert_eq!(Kind::of("jpeg"), Kind::Image);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.tar");
        std::fs::write(&path, tar(&[("000.WEBP", b"RIFF"), ("000.cls", b"1")])).unwrap();
        let tables = split_tables(vec![Shard::open(&path).unwrap()]).unwrap();
        let schema = tables[0].schema();
        assert_eq!(
            schema.field_with_name("webp").unwrap().data_type(),
            &DataType::Struct(image_fields())
        );
        assert_eq!(
            tables[0].features().unwrap().unwrap(),
            json!({"webp": {"_type": "Image"}})
        );
    }
}
