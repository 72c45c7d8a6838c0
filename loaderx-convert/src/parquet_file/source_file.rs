//! [`SourceFile`]: a parquet file as the parquet crate reads it, with the
//! end of the file enforced.
//!
//! The crate's own `ChunkReader` for `File` trusts the lengths a file
//! declares in two places that a malformed file controls:
//! - its readers return `Ok(0)` at the end of the file, and the crate's
//!   thrift skipping (`skip_bytes` under a list of declared length) does not
//!   check what it read, so a page header declaring a list of 2^31 doubles
//!   just past the end makes 2^31 empty `read` calls (AFL++ found such
//!   files: 14 million system calls, 3 s, from a 300-byte file);
//! - `get_bytes` reserves the length it is asked for before reading.
//!
//! Here a read at the end of the file is an `UnexpectedEof` error, and a
//! byte range past the end is refused before anything is allocated. A
//! well-formed file never reads past its end, so this only changes what a
//! malformed one does: a typed error, at once.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use super::metadata_types::{FILE_META_DATA, PAGE_HEADER, Ty};

/// A parquet file opened for the parquet crate, reads bounded by its length
/// (taken once, at open).
#[derive(Debug)]
pub(crate) struct SourceFile {
    file: File,
    len: u64,
}

impl SourceFile {
    /// Wraps an open file; its length is read now.
    pub(crate) fn new(file: File) -> std::io::Result<SourceFile> {
        let len = file.metadata()?.len();
        Ok(SourceFile { file, len })
    }

    fn reader_at(&self, start: u64) -> Result<File, ParquetError> {
        if start > self.len {
            return Err(ParquetError::EOF(format!(
                "a read at byte {start} of a {}-byte file",
                self.len
            )));
        }
        let mut file = self.file.try_clone()?;
        file.seek(SeekFrom::Start(start))?;
        Ok(file)
    }
}

impl Length for SourceFile {
    fn len(&self) -> u64 {
        self.len
    }
}

/// A reader from some offset to the end of a [`SourceFile`]; reading at its
/// end is an error rather than `Ok(0)`.
pub(crate) struct StrictRead {
    inner: BufReader<File>,
}

impl Read for StrictRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the parquet file ends before what it declares",
            ));
        }
        Ok(n)
    }
}

impl ChunkReader for SourceFile {
    type T = StrictRead;

    fn get_read(&self, start: u64) -> Result<StrictRead, ParquetError> {
        Ok(StrictRead {
            inner: BufReader::new(self.reader_at(start)?),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        let end = u64::try_from(length)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&end| end <= self.len)
            .ok_or_else(|| {
                ParquetError::EOF(format!(
                    "{length} bytes at byte {start} of a {}-byte file",
                    self.len
                ))
            })?;
        let mut buf = vec![0u8; (end - start) as usize];
        self.reader_at(start)?.read_exact(&mut buf)?;
        Ok(buf.into())
    }
}

/// Most a page may claim to decode to per stored byte: zstd's largest
/// expansion (a 128 KiB block in 4 bytes); the other codecs expand less.
const MAX_EXPANSION: u64 = 32 << 10;

/// A page may always claim this much, whatever its stored size.
const PAGE_FLOOR: u64 = 64 << 20;

/// Reads past a page header that can hold it: grown from this, up to the
/// column chunk's end.
const HEADER_PROBE: usize = 16 << 10;

/// Checks every page header of every column chunk before the parquet crate
/// decodes a page: the crate sizes a page's buffer from the header's
/// `uncompressed_page_size` (up to 2 GiB) before anything checks it
/// (apache/arrow-rs#10734, open at parquet 60.1), so a file of a few bytes
/// could make it allocate and zero 2 GiB per page. A page must lie inside
/// its column chunk, claim no more than the chunk's declared uncompressed
/// total (the invariant upstream's fix checks) and no more than
/// [`MAX_EXPANSION`] times its stored bytes (or [`PAGE_FLOOR`]).
///
/// # Errors
///
/// A message naming the row group, column and page that breaks a rule.
pub(crate) fn check_pages(
    file: &SourceFile,
    meta: &parquet::file::metadata::ParquetMetaData,
    only: Option<usize>,
) -> Result<(), String> {
    for (g, group) in meta.row_groups().iter().enumerate() {
        if only.is_some_and(|o| o != g) {
            continue;
        }
        for (c, column) in group.columns().iter().enumerate() {
            let at = |detail: String| {
                format!(
                    "row group {g}, column {c} ({}): {detail}",
                    column.column_path()
                )
            };
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            let (Ok(start), Ok(len), Ok(total)) = (
                u64::try_from(start),
                u64::try_from(column.compressed_size()),
                u64::try_from(column.uncompressed_size()),
            ) else {
                return Err(at("negative offset or size".into()));
            };
            let end = start
                .checked_add(len)
                .filter(|&e| e <= file.len)
                .ok_or_else(|| at(format!("{len} bytes at byte {start} overrun the file")))?;
            let mut offset = start;
            let mut page = 0usize;
            while offset < end {
                let (header_len, header) = read_header(file, offset, end)
                    .map_err(|e| at(format!("page {page} at byte {offset}: {e}")))?;
                let fail =
                    |detail: String| Err(at(format!("page {page} at byte {offset}: {detail}")));
                let next = match next_page(offset, header_len, header, end, total) {
                    Ok(next) => next,
                    Err(e) => return fail(e),
                };
                if let Some(data) = header.data
                    && let Err(e) = super::delta_pages::check(
                        file,
                        column,
                        offset + header_len..next,
                        header.uncompressed as usize,
                        data,
                    )
                {
                    return fail(e);
                }
                offset = next;
                page += 1;
            }
        }
    }
    Ok(())
}

/// Largest footer walked: the parquet crate's own default limit on
/// metadata it decodes is far below this.
const MAX_FOOTER: u64 = 256 << 20;

/// Walks the file's footer (its Thrift `FileMetaData`) before the parquet
/// crate decodes it: the crate's Thrift skipping counts the elements of a
/// list of booleans without reading a byte for each (as the compact
/// protocol stores them), so a footer field declaring a list of 2^31
/// booleans costs seconds, and a footer of a few hundred such lists hangs
/// the conversion (AFL++ found one: 1.7 KB, 2 s per open). Here every
/// list, set and map must declare no more elements than bytes remain and
/// nesting is bounded, so a malformed footer is an error at once. A footer
/// that is not plain (an encrypted `PARE` file, or no magic at all) is left
/// to the crate, which refuses it.
///
/// # Errors
///
/// A message saying what is wrong with the footer.
pub(crate) fn check_footer(file: &SourceFile) -> Result<(), String> {
    let Some(tail_at) = file.len.checked_sub(8) else {
        return Ok(());
    };
    let tail = file
        .get_bytes(tail_at, 8)
        .map_err(|e| format!("cannot read the footer: {e}"))?;
    if &tail[4..] != b"PAR1" {
        return Ok(());
    }
    let len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if len > tail_at || len > MAX_FOOTER {
        return Err(format!("a {len}-byte footer in a {}-byte file", file.len));
    }
    let bytes = file
        .get_bytes(tail_at - len, len as usize)
        .map_err(|e| format!("cannot read the footer: {e}"))?;
    let mut r = Compact { buf: &bytes, at: 0 };
    match r.walk(FILE_META_DATA, 64) {
        Ok(()) => Ok(()),
        Err(Short) => Err("the footer's metadata declares more than the footer holds".into()),
        Err(Bad(e)) => Err(format!("malformed footer metadata: {e}")),
    }
}

/// Where the page after the one at `offset` starts, when that page (its
/// header `header_len` bytes long, its sizes `sizes`) keeps the rules: it
/// ends by the chunk's `end`, claims no more than the chunk's `total`
/// decoded bytes and no more than any codec expands its stored bytes to.
fn next_page(
    offset: u64,
    header_len: u64,
    sizes: PageSizes,
    end: u64,
    total: u64,
) -> Result<u64, String> {
    let (Ok(stored), Ok(claimed)) = (
        u64::try_from(sizes.compressed),
        u64::try_from(sizes.uncompressed),
    ) else {
        return Err("negative page size".into());
    };
    let next = offset
        .checked_add(header_len)
        .and_then(|o| o.checked_add(stored))
        .filter(|&o| o <= end)
        .ok_or_else(|| format!("{stored} stored bytes overrun the column chunk"))?;
    if claimed > total {
        return Err(format!(
            "claims {claimed} bytes, more than the column chunk's {total}"
        ));
    }
    if claimed > PAGE_FLOOR.max(stored.saturating_mul(MAX_EXPANSION)) {
        return Err(format!(
            "claims {claimed} bytes from {stored} stored bytes, more than any codec expands"
        ));
    }
    Ok(next)
}

/// A page header's sizes, and a data page's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PageSizes {
    uncompressed: i64,
    compressed: i64,
    data: Option<DataPage>,
}

/// What a data page header says of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DataPage {
    /// Values in the page, nulls included.
    pub(super) num_values: i64,
    /// The values' encoding (parquet's `Encoding`).
    pub(super) encoding: i64,
    /// A version 2 page's level lengths; `None` for version 1.
    pub(super) v2: Option<DataPageV2>,
    /// A version 1 page's level encodings (3 `RLE`, 4 `BIT_PACKED`).
    pub(super) def_encoding: i64,
    pub(super) rep_encoding: i64,
}

/// A version 2 data page's levels, stored uncompressed before its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DataPageV2 {
    pub(super) def_len: i64,
    pub(super) rep_len: i64,
    /// Whether the values are compressed.
    pub(super) compressed: bool,
}

/// Reads the page header at `offset` (ending before `end`): its length in
/// bytes and its sizes. Reads a little first and more only for a header
/// longer than that (large statistics).
fn read_header(file: &SourceFile, offset: u64, end: u64) -> Result<(u64, PageSizes), String> {
    let available = usize::try_from(end - offset).unwrap_or(usize::MAX);
    let mut want = HEADER_PROBE.min(available);
    loop {
        let bytes = file
            .get_bytes(offset, want)
            .map_err(|e| format!("cannot read the page header: {e}"))?;
        let mut r = Compact { buf: &bytes, at: 0 };
        match r.page_header() {
            Ok(sizes) => return Ok((r.at as u64, sizes)),
            Err(Short) if want < available => want = want.saturating_mul(4).min(available),
            Err(Short) => return Err("the page header runs past its column chunk".into()),
            Err(Bad(e)) => return Err(format!("malformed page header: {e}")),
        }
    }
}

/// Why a header did not parse: it needs more bytes than were read, or it
/// is malformed.
pub(super) enum ThriftError {
    Short,
    Bad(&'static str),
}
use ThriftError::{Bad, Short};

/// The few parts of Thrift's compact protocol a page header needs: its two
/// sizes read, every other field skipped (bounded by the bytes given and a
/// nesting depth).
pub(super) struct Compact<'a> {
    pub(super) buf: &'a [u8],
    pub(super) at: usize,
}

impl Compact<'_> {
    pub(super) fn byte(&mut self) -> Result<u8, ThriftError> {
        let b = *self.buf.get(self.at).ok_or(Short)?;
        self.at += 1;
        Ok(b)
    }

    pub(super) fn skip_bytes(&mut self, n: u64) -> Result<(), ThriftError> {
        let n = usize::try_from(n).map_err(|_| Short)?;
        if self.buf.len() - self.at < n {
            return Err(Short);
        }
        self.at += n;
        Ok(())
    }

    pub(super) fn varint(&mut self) -> Result<u64, ThriftError> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(Bad("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Bad("varint longer than 10 bytes"))
    }

    fn zigzag(&mut self) -> Result<i64, ThriftError> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A struct's fields, each handed to `field(self, id, type)`, which
    /// returns false to have it skipped.
    fn fields(
        &mut self,
        depth: u32,
        mut field: impl FnMut(&mut Self, i16, u8) -> Result<bool, ThriftError>,
    ) -> Result<(), ThriftError> {
        let mut last = 0i16;
        loop {
            let b = self.byte()?;
            let kind = b & 0x0f;
            if kind == 0 {
                return Ok(());
            }
            let delta = i16::from(b >> 4);
            let id = if delta == 0 {
                i16::try_from(self.zigzag()?).map_err(|_| Bad("field id out of range"))?
            } else {
                last.checked_add(delta)
                    .ok_or(Bad("field id out of range"))?
            };
            last = id;
            if !field(self, id, kind)? {
                self.skip(kind, depth)?;
            }
        }
    }

    /// A list's or set's header: its elements' type code and count.
    fn list_begin(&mut self) -> Result<(u8, u64), ThriftError> {
        let h = self.byte()?;
        let n = match h >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        Ok((h & 0x0f, n))
    }

    /// Every element takes at least a byte: a count of `n` beyond the bytes
    /// left is short (or malformed), never a long loop.
    fn room_for(&self, n: u64) -> Result<(), ThriftError> {
        if n > (self.buf.len() - self.at) as u64 {
            return Err(Short);
        }
        Ok(())
    }

    fn skip(&mut self, kind: u8, depth: u32) -> Result<(), ThriftError> {
        if depth == 0 {
            return Err(Bad("nested too deeply"));
        }
        match kind {
            1 | 2 => Ok(()),
            3 => self.skip_bytes(1),
            4..=6 => self.varint().map(drop),
            7 => self.skip_bytes(8),
            8 => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            9 | 10 => {
                let (elem, n) = self.list_begin()?;
                // The parquet crate skips a boolean element without reading
                // its byte, so it reads such a list as other bytes than it
                // is: it could then loop for ever on nested lists. No field
                // of parquet's metadata is a list of booleans.
                if n > 0 && matches!(elem, 1 | 2) {
                    return Err(Bad("a list of booleans"));
                }
                self.room_for(n)?;
                for _ in 0..n {
                    self.skip(elem, depth - 1)?;
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                // As for lists (and parquet's metadata has no maps).
                if matches!(kv >> 4, 1 | 2) || matches!(kv & 0x0f, 1 | 2) {
                    return Err(Bad("a map of booleans"));
                }
                self.room_for(n)?;
                for _ in 0..n {
                    for t in [kv >> 4, kv & 0x0f] {
                        self.skip(t, depth - 1)?;
                    }
                }
                Ok(())
            }
            12 => self.fields(depth - 1, |_, _, _| Ok(false)),
            13 => self.skip_bytes(16),
            _ => Err(Bad("unknown field type")),
        }
    }

    /// A value of parquet metadata type `ty` (see [`metadata_types`]):
    /// every known field must have its type, and unknown ones are skipped.
    fn walk(&mut self, ty: Ty, depth: u32) -> Result<(), ThriftError> {
        if depth == 0 {
            return Err(Bad("nested too deeply"));
        }
        match ty {
            // A struct field's boolean is in its type code: the field
            // walks it; a list's would be a byte (none in parquet's
            // metadata).
            Ty::Bool | Ty::Byte => self.skip_bytes(1),
            Ty::I16 | Ty::I32 | Ty::I64 => self.varint().map(drop),
            Ty::Double => self.skip_bytes(8),
            Ty::Binary => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            Ty::List(elem) => {
                let (code, n) = self.list_begin()?;
                if n > 0 && !elem.accepts(code) {
                    return Err(Bad("a list of another type than parquet's"));
                }
                self.room_for(n)?;
                for _ in 0..n {
                    self.walk(*elem, depth - 1)?;
                }
                Ok(())
            }
            Ty::Struct(known) => self.fields(depth - 1, |r, id, kind| {
                let Some(&(_, ty)) = known.iter().find(|(k, _)| *k == id) else {
                    return Ok(false);
                };
                if !ty.accepts(kind) {
                    return Err(Bad("a field of another type than parquet's"));
                }
                if !matches!(ty, Ty::Bool) {
                    r.walk(ty, depth - 1)?;
                }
                Ok(true)
            }),
        }
    }

    /// A `PageHeader` struct: fields 2 (`uncompressed_page_size`) and 3
    /// (`compressed_page_size`), both required `i32`s, and a data page's
    /// header (field 5, or 8 for version 2).
    fn page_header(&mut self) -> Result<PageSizes, ThriftError> {
        // Typed as the parquet crate reads it, first.
        let mut typed = Compact {
            buf: self.buf,
            at: self.at,
        };
        typed.walk(PAGE_HEADER, 32)?;
        let (mut uncompressed, mut compressed, mut data) = (None, None, None);
        self.fields(32, |r, id, kind| {
            Ok(match (id, kind) {
                (2, 5) => {
                    uncompressed = Some(r.zigzag()?);
                    true
                }
                (3, 5) => {
                    compressed = Some(r.zigzag()?);
                    true
                }
                (5, 12) => {
                    data = Some(r.data_page_header(false)?);
                    true
                }
                (8, 12) => {
                    data = Some(r.data_page_header(true)?);
                    true
                }
                _ => false,
            })
        })?;
        match (uncompressed, compressed) {
            (Some(uncompressed), Some(compressed)) => Ok(PageSizes {
                uncompressed,
                compressed,
                data,
            }),
            _ => Err(Bad("no page sizes")),
        }
    }

    /// A `DataPageHeader` (`v2` false: fields 1 `num_values`, 2
    /// `encoding`, 3 and 4 the level encodings) or `DataPageHeaderV2` (1
    /// `num_values`, 4 `encoding`, 5 and 6 the level byte lengths, 7
    /// `is_compressed`).
    fn data_page_header(&mut self, v2: bool) -> Result<DataPage, ThriftError> {
        let mut page = DataPage {
            num_values: 0,
            encoding: 0,
            v2: v2.then_some(DataPageV2 {
                def_len: 0,
                rep_len: 0,
                compressed: true,
            }),
            def_encoding: 3,
            rep_encoding: 3,
        };
        let int = |r: &mut Self| -> Result<i64, ThriftError> { r.zigzag() };
        self.fields(31, |r, id, kind| {
            Ok(match (v2, id, kind) {
                (_, 1, 5) => {
                    page.num_values = int(r)?;
                    true
                }
                (false, 2, 5) | (true, 4, 5) => {
                    page.encoding = int(r)?;
                    true
                }
                (false, 3, 5) => {
                    page.def_encoding = int(r)?;
                    true
                }
                (false, 4, 5) => {
                    page.rep_encoding = int(r)?;
                    true
                }
                (true, 5, 5) => {
                    let n = int(r)?;
                    if let Some(v) = &mut page.v2 {
                        v.def_len = n;
                    }
                    true
                }
                (true, 6, 5) => {
                    let n = int(r)?;
                    if let Some(v) = &mut page.v2 {
                        v.rep_len = n;
                    }
                    true
                }
                (true, 7, 1 | 2) => {
                    if let Some(v) = &mut page.v2 {
                        v.compressed = kind == 1;
                    }
                    true
                }
                _ => false,
            })
        })?;
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, SourceFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        std::fs::write(&path, bytes).unwrap();
        let f = SourceFile::new(File::open(&path).unwrap()).unwrap();
        (dir, f)
    }

    #[test]
    fn reads_stop_with_an_error_at_the_end_of_the_file() {
        let (_dir, f) = file_of(b"0123456789");
        assert_eq!(f.len(), 10);
        let mut r = f.get_read(4).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4];
        loop {
            match r.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
                    break;
                }
            }
        }
        assert_eq!(got, b"456789");
        // An empty buffer is not a read past the end.
        assert_eq!(r.read(&mut []).unwrap(), 0);
        // Skipping past the end, as the thrift reader does, fails.
        let mut r = f.get_read(8).unwrap();
        assert!(std::io::copy(&mut r.by_ref().take(100), &mut std::io::sink()).is_err());
        assert!(f.get_read(11).is_err());
    }

    fn sizes(uncompressed: i64, compressed: i64) -> PageSizes {
        PageSizes {
            data: None,
            uncompressed,
            compressed,
        }
    }

    #[test]
    fn pages_keep_inside_their_chunk_and_claim_what_a_codec_can_decode() {
        // Offset 100, a 10-byte header, chunk ending at 1100 and decoding
        // to 5 GiB in all.
        let total = 5 << 30;
        assert_eq!(next_page(100, 10, sizes(4000, 990), 1100, total), Ok(1100));
        assert_eq!(next_page(100, 10, sizes(0, 0), 1100, total), Ok(110));
        // Up to the floor whatever the stored size, then by expansion.
        assert!(next_page(100, 10, sizes(PAGE_FLOOR as i64, 1), 1100, total).is_ok());
        assert!(next_page(100, 10, sizes(PAGE_FLOOR as i64 + 1, 1), 1100, total).is_err());
        let most = 90_000 * MAX_EXPANSION as i64;
        assert!(next_page(100, 10, sizes(most, 90_000), 100_000, total).is_ok());
        let e = next_page(100, 10, sizes(most + 1, 90_000), 100_000, total).unwrap_err();
        assert!(e.contains("more than any codec expands"), "{e}");
        // The 2 GiB a crafted header claims from a few bytes.
        let e = next_page(100, 10, sizes(i32::MAX.into(), 20), 1100, total).unwrap_err();
        assert!(e.contains("claims 2147483647 bytes"), "{e}");
        // Never more than the chunk's declared total.
        let e = next_page(100, 10, sizes(4001, 990), 1100, 4000).unwrap_err();
        assert!(e.contains("more than the column chunk's 4000"), "{e}");
        // Inside the chunk, sizes not negative.
        assert!(next_page(100, 10, sizes(4000, 991), 1100, total).is_err());
        assert!(next_page(u64::MAX - 5, 10, sizes(0, 0), u64::MAX, total).is_err());
        assert!(next_page(100, 10, sizes(-1, 10), 1100, total).is_err());
        assert!(next_page(100, 10, sizes(10, -1), 1100, total).is_err());
    }

    /// A thrift compact field header and zigzag varint of an i32 field.
    fn i32_field(delta: u8, v: i64) -> Vec<u8> {
        let mut out = vec![(delta << 4) | 5];
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    fn parse(bytes: &[u8]) -> Result<(usize, PageSizes), &'static str> {
        let mut r = Compact { buf: bytes, at: 0 };
        match r.page_header() {
            Ok(s) => Ok((r.at, s)),
            Err(Short) => Err("short"),
            Err(Bad(e)) => Err(e),
        }
    }

    #[test]
    fn page_headers_are_read_in_thrift_compact_form() {
        // type 0, uncompressed 70000, compressed -3, then a struct field
        // (id 6) holding a list of 3 doubles and a binary, then stop.
        let mut h = i32_field(1, 0);
        h.extend(i32_field(1, 70_000));
        h.extend(i32_field(1, -3));
        h.extend([0x3c, 0x19, 0x37]);
        h.extend([0u8; 24]);
        h.extend([0x18, 0x02, b'h', b'i', 0x00, 0x00]);
        assert_eq!(parse(&h), Ok((h.len(), sizes(70_000, -3))));
        // Any prefix is short, never an answer.
        for n in 0..h.len() {
            assert_eq!(parse(&h[..n]), Err("short"), "{n}");
        }
        // A list (in field 9, not parquet's) declaring 2^31 elements with
        // a few bytes left is short at once, not 2^31 steps.
        let mut big = i32_field(1, 0);
        big.extend([0x89, 0xf7, 0xff, 0xff, 0xff, 0x07, 0, 0]);
        assert_eq!(parse(&big), Err("short"));
        // Nesting is bounded.
        let mut deep = vec![0x9cu8; 40];
        deep.extend([0u8; 41]);
        assert_eq!(parse(&deep), Err("nested too deeply"));
        // Sizes are required.
        assert_eq!(parse(&[0x15, 0x00, 0x00]), Err("no page sizes"));
        assert_eq!(parse(&[0x9f, 0x00]), Err("unknown field type"));
        // A field of parquet's with another type than parquet's (field 1 of
        // the data page header, the value count, as a list) is refused:
        // the parquet crate would read it as its own type.
        let mut typed = i32_field(1, 0);
        typed.extend(i32_field(1, 10));
        typed.extend(i32_field(1, 10));
        typed.extend([0x2c, 0x19, 0x00, 0x00, 0x00]);
        assert_eq!(parse(&typed), Err("a field of another type than parquet's"));
        let mut long = vec![0x16];
        long.extend([0xff; 11]);
        assert!(parse(&long).is_err());
    }

    fn with_footer(footer: &[u8]) -> Vec<u8> {
        let mut f = b"PAR1".to_vec();
        f.extend_from_slice(footer);
        f.extend_from_slice(&u32::try_from(footer.len()).unwrap().to_le_bytes());
        f.extend_from_slice(b"PAR1");
        f
    }

    #[test]
    fn footers_declaring_more_elements_than_bytes_are_refused() {
        // Field 15 (not parquet's), a list (type 9) of bytes (3) with a
        // varint count.
        let list_of = |count: u32| {
            let mut v = vec![0xf9, 0xf3];
            let mut n = count;
            while n >= 0x80 {
                v.push((n as u8 & 0x7f) | 0x80);
                n >>= 7;
            }
            v.push(n as u8);
            v
        };
        // 2^31 - 1 bytes in a 7-byte footer: refused without counting.
        let mut footer = list_of(i32::MAX as u32);
        footer.push(0);
        let (_dir, f) = file_of(&with_footer(&footer));
        let e = check_footer(&f).unwrap_err();
        assert!(e.contains("more than the footer holds"), "{e}");
        // Three bytes, then the struct's end: fine.
        let mut footer = list_of(3);
        footer.extend_from_slice(&[1, 2, 1, 0]);
        let (_dir, f) = file_of(&with_footer(&footer));
        check_footer(&f).unwrap();
        // The same as booleans, which the parquet crate skips without
        // reading them (and parquet's metadata never holds): refused.
        footer[1] = 0x31;
        let (_dir, f) = file_of(&with_footer(&footer));
        assert!(check_footer(&f).unwrap_err().contains("a list of booleans"));
        // A map of booleans likewise (one entry, bool keys and values).
        let (_dir, f) = file_of(&with_footer(&[0xfb, 0x01, 0x11, 1, 1, 0]));
        assert!(check_footer(&f).unwrap_err().contains("a map of booleans"));
        // Nesting beyond 64 structs is refused.
        let footer = [[0xfc].repeat(70), vec![0; 71]].concat();
        let (_dir, f) = file_of(&with_footer(&footer));
        let e = check_footer(&f).unwrap_err();
        assert!(e.contains("nested too deeply"), "{e}");
        // A footer length past the start of the file is an error; no magic
        // is left to the parquet crate.
        let mut bad = with_footer(&[0]);
        let n = bad.len();
        bad[n - 8..n - 4].copy_from_slice(&1000u32.to_le_bytes());
        let (_dir, f) = file_of(&bad);
        assert!(check_footer(&f).unwrap_err().contains("1000-byte footer"));
        let (_dir, f) = file_of(b"not parquet at all");
        check_footer(&f).unwrap();
    }

    #[test]
    fn byte_ranges_past_the_end_are_refused_before_allocating() {
        let (_dir, f) = file_of(b"0123456789");
        assert_eq!(&f.get_bytes(2, 3).unwrap()[..], b"234");
        assert_eq!(&f.get_bytes(0, 10).unwrap()[..], b"0123456789");
        assert!(f.get_bytes(10, 0).unwrap().is_empty());
        for (start, len) in [(0, 11), (9, 2), (11, 0), (u64::MAX, 1), (1, usize::MAX)] {
            assert!(f.get_bytes(start, len).is_err(), "{start} {len}");
        }
    }
}
