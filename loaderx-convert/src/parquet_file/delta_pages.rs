//! Checks of delta-encoded data pages before the parquet crate decodes
//! them.
//!
//! A `DELTA_LENGTH_BYTE_ARRAY` or `DELTA_BYTE_ARRAY` page starts its values
//! with `DELTA_BINARY_PACKED` streams whose headers declare how many values
//! they hold, and the parquet crate (60.1) allocates that many `i32`s, zeroed,
//! before it decodes one (`vec![0; n]`): a few bytes declaring 2^57 values
//! abort the process (AFL++ found ten such files). Here such a page is
//! decompressed first and every stream must declare no more values than
//! the page header holds, and no more than its decoded bytes can give
//! ([`MAX_VALUES_PER_BYTE`], or [`VALUES_FLOOR`]).

use std::ops::Range;

use std::io::Read;

use parquet::basic::Compression;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::ChunkReader;

use super::source_file::{Compact, DataPage, SourceFile, ThriftError};

/// `DELTA_LENGTH_BYTE_ARRAY` and `DELTA_BYTE_ARRAY` in parquet's `Encoding`.
const DELTA_LENGTH_BYTE_ARRAY: i64 = 6;
const DELTA_BYTE_ARRAY: i64 = 7;

/// A page may always declare this many values per stream.
const VALUES_FLOOR: u64 = 1 << 20;

/// Values a stream may declare per decoded byte of its page beyond the
/// floor (a value takes at least a bit of its levels).
const MAX_VALUES_PER_BYTE: u64 = 8;

/// Checks the data page whose stored bytes are `body` in `file` (of
/// `column`'s chunk), `uncompressed` bytes decoded, described by `page`.
/// Pages of other encodings pass untouched.
///
/// # Errors
///
/// A message saying what the page declares that it cannot hold.
pub(super) fn check(
    file: &SourceFile,
    column: &ColumnChunkMetaData,
    body: Range<u64>,
    uncompressed: usize,
    page: DataPage,
) -> Result<(), String> {
    if !matches!(page.encoding, DELTA_LENGTH_BYTE_ARRAY | DELTA_BYTE_ARRAY) {
        return Ok(());
    }
    let stored = file
        .get_bytes(body.start, (body.end - body.start) as usize)
        .map_err(|e| format!("cannot read the page: {e}"))?;
    let values = values_of(column, &stored, uncompressed, page)?;
    let most = u64::try_from(page.num_values)
        .map_err(|_| format!("{} values", page.num_values))?
        .min(VALUES_FLOOR.max((uncompressed as u64).saturating_mul(MAX_VALUES_PER_BYTE)));
    let mut stream = Compact {
        buf: &values,
        at: 0,
    };
    let streams = if page.encoding == DELTA_BYTE_ARRAY {
        2
    } else {
        1
    };
    for k in 0..streams {
        let n = skip_delta_binary_packed(&mut stream, most)?;
        if n > most {
            return Err(format!(
                "its delta stream {k} declares {n} values, the page {} (at most {most} \
                 read)",
                page.num_values
            ));
        }
    }
    Ok(())
}

/// The page's decoded values section: after its levels, decompressed.
fn values_of(
    column: &ColumnChunkMetaData,
    stored: &[u8],
    uncompressed: usize,
    page: DataPage,
) -> Result<Vec<u8>, String> {
    let codec = column.compression();
    let decompress = |input: &[u8], size: usize| decompress(codec, input, size);
    let descr = column.column_descr();
    match page.v2 {
        Some(v2) => {
            let levels = usize::try_from(v2.def_len)
                .ok()
                .zip(usize::try_from(v2.rep_len).ok())
                .and_then(|(d, r)| d.checked_add(r))
                .filter(|&l| l <= stored.len() && l <= uncompressed)
                .ok_or_else(|| "its level lengths overrun the page".to_owned())?;
            let values = &stored[levels..];
            if v2.compressed {
                decompress(values, uncompressed - levels)
            } else {
                Ok(values.to_vec())
            }
        }
        None => {
            let all = decompress(stored, uncompressed)?;
            let mut at = 0usize;
            let n = usize::try_from(page.num_values).unwrap_or(0);
            for (max, encoding) in [
                (descr.max_rep_level(), page.rep_encoding),
                (descr.max_def_level(), page.def_encoding),
            ] {
                if max == 0 {
                    continue;
                }
                let len = if encoding == 4 {
                    // BIT_PACKED: no length prefix.
                    let width = 16 - (max as u16).leading_zeros() as usize;
                    n.saturating_mul(width).div_ceil(8)
                } else {
                    let prefix = all
                        .get(at..at + 4)
                        .ok_or_else(|| "its levels overrun the page".to_owned())?;
                    at += 4;
                    u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize
                };
                at = at
                    .checked_add(len)
                    .filter(|&a| a <= all.len())
                    .ok_or_else(|| "its levels overrun the page".to_owned())?;
            }
            Ok(all[at..].to_vec())
        }
    }
}

/// `input` decompressed with the column's `codec`, to `size` bytes: the
/// parquet crate's codecs, from the same crates (its own are not public).
fn decompress(codec: Compression, input: &[u8], size: usize) -> Result<Vec<u8>, String> {
    let failed = |e: &dyn std::fmt::Display| format!("cannot decompress the page ({codec}): {e}");
    let read_all = |mut r: Box<dyn Read + '_>| -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        r.by_ref()
            .take(size as u64)
            .read_to_end(&mut out)
            .map_err(|e| failed(&e))?;
        Ok(out)
    };
    match codec {
        Compression::UNCOMPRESSED => Ok(input.to_vec()),
        Compression::SNAPPY => snap::raw::Decoder::new()
            .decompress_vec(input)
            .map_err(|e| failed(&e)),
        Compression::GZIP(_) => read_all(Box::new(flate2::read::MultiGzDecoder::new(input))),
        Compression::BROTLI(_) => read_all(Box::new(brotli::Decompressor::new(input, 4096))),
        Compression::ZSTD(_) => zstd::bulk::decompress(input, size).map_err(|e| failed(&e)),
        Compression::LZ4_RAW => lz4_flex::block::decompress(input, size).map_err(|e| failed(&e)),
        Compression::LZ4 => lz4_hadoop(input, size)
            .or_else(|| read_all(Box::new(lz4_flex::frame::FrameDecoder::new(input))).ok())
            .ok_or_else(|| failed(&"neither Hadoop frames nor an LZ4 frame")),
        // LZO, which the parquet crate cannot read either.
        other => Err(failed(&format!("{other} is not supported"))),
    }
}

/// Hadoop's LZ4 framing, as parquet's `LZ4` codec writes it: blocks of
/// `[decompressed u32 BE][compressed u32 BE][LZ4 block]`.
fn lz4_hadoop(mut input: &[u8], size: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let head = input.get(..8)?;
        let (plain, stored) = (be(&head[..4]), be(&head[4..]));
        let block = input.get(8..8 + stored)?;
        if out.len() + plain > size {
            return None;
        }
        out.extend(lz4_flex::block::decompress(block, plain).ok()?);
        input = &input[8 + stored..];
    }
    Some(out)
}

/// Reads a `DELTA_BINARY_PACKED` stream's header at `r` and, when it
/// declares at most `most` values, skips its blocks as the parquet crate
/// reads them (every miniblock of a block, by its bit width); returns the
/// values it declares.
fn skip_delta_binary_packed(r: &mut Compact<'_>, most: u64) -> Result<u64, String> {
    let ended = |e: ThriftError| match e {
        ThriftError::Short => "its delta stream ends early".to_owned(),
        ThriftError::Bad(e) => format!("a delta stream's {e}"),
    };
    let block = r.varint().map_err(ended)?;
    let minis = r.varint().map_err(ended)?;
    let count = r.varint().map_err(ended)?;
    r.varint().map_err(ended)?; // the first value
    if count > most {
        return Ok(count);
    }
    if block == 0 || minis == 0 || block % 128 != 0 || block % minis != 0 {
        return Err(format!(
            "a delta stream of blocks of {block} values in {minis} miniblocks"
        ));
    }
    let per_mini = block / minis;
    let mut left = count.saturating_sub(1);
    while left > 0 {
        r.varint().map_err(ended)?; // the block's least delta
        let mut data = 0u64;
        for _ in 0..minis {
            let width = r.byte().map_err(ended)?;
            data = data.saturating_add(u64::from(width).saturating_mul(per_mini) / 8);
        }
        r.skip_bytes(data).map_err(ended)?;
        left = left.saturating_sub(block);
    }
    Ok(count)
}
