//! Packing a step's records into rows of a fixed token budget.

use std::sync::Arc;

use crate::adapter::{AlignedBuf, HostArray, PadValue};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind};
use crate::loader::{Batch, Column, ColumnBuffer, ColumnLayout, StagedBuffer};

/// What packing does with a record longer than a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LongRecords {
    /// Cut it into pieces of at most `max_len` tokens, each its own segment
    /// (positions keep counting from the record's start).
    #[default]
    Split,
    /// Refuse the step with an error naming the record.
    Refuse,
}

/// How [`pack_records`] lays records out; `max_len` tokens per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct PackOptions {
    max_len: usize,
    rows: Option<usize>,
    long: LongRecords,
    pad: PadValue,
}

impl PackOptions {
    /// Rows of `max_len` tokens, as many rows as the step needs, long
    /// records split, zero padding.
    pub fn new(max_len: usize) -> PackOptions {
        PackOptions {
            max_len,
            rows: None,
            long: LongRecords::Split,
            pad: PadValue::ZERO,
        }
    }

    /// Always exactly `rows` rows (fixed tensor shapes): unused rows are
    /// padding, and a step that needs more is an error.
    pub fn rows(mut self, rows: usize) -> Self {
        self.rows = Some(rows);
        self
    }

    /// What to do with records longer than `max_len` (default: split).
    pub fn long_records(mut self, long: LongRecords) -> Self {
        self.long = long;
        self
    }

    /// The token value of padding positions (default zero).
    pub fn pad(mut self, pad: PadValue) -> Self {
        self.pad = pad;
        self
    }

    /// Tokens per row.
    pub fn max_len(&self) -> usize {
        self.max_len
    }
}

/// One piece of a record in a packed row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PackedSegment {
    /// The record's position in the step's batch (not its store index).
    pub record: usize,
    /// First column of the row the piece occupies.
    pub start: usize,
    /// Tokens in the piece.
    pub len: usize,
    /// Offset of the piece's first token in its record (non-zero only for
    /// the later pieces of a split record).
    pub record_offset: usize,
}

/// A step's records packed into rows: `tokens`, `segment_ids` and
/// `positions`, each `(rows, max_len)`, and every row's segments.
///
/// - `segment_ids` (`i32`): `1, 2, ..` for the row's segments in order,
///   `0` for padding — attention stays within equal non-zero ids;
/// - `positions` (`i32`): each token's position in its record, so `0` at
///   the start of every record; `0` in padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// The tokens, the column's element type, padding as asked.
    pub tokens: HostArray,
    /// Segment of every token, `0` for padding.
    pub segment_ids: HostArray,
    /// Position of every token in its record, `0` for padding.
    pub positions: HostArray,
    /// Each row's segments, left to right.
    pub rows: Vec<Vec<PackedSegment>>,
}

impl Packed {
    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.rows.len()
    }

    /// Padding positions over all positions.
    pub fn padding_fraction(&self) -> f64 {
        let cells = self.tokens.len();
        let used: usize = self.rows.iter().flatten().map(|s| s.len).sum();
        if cells == 0 {
            0.0
        } else {
            (cells - used) as f64 / cells as f64
        }
    }

    /// The segment table as one `(segments, 4)` `i64` array of
    /// `[row, start, len, record]` rows, row-major: the per-row record
    /// boundaries as a tensor.
    ///
    /// # Errors
    ///
    /// Only when the memory cannot be had.
    pub fn segment_table(&self) -> Result<HostArray, Error> {
        let mut t = Vec::new();
        for (r, row) in self.rows.iter().enumerate() {
            for s in row {
                t.extend([r as i64, s.start as i64, s.len as i64, s.record as i64]);
            }
        }
        let n = t.len() / 4;
        HostArray::from_slice(&t, vec![n, 4])
    }
}

/// Packs rank-1 records of `dtype`, each given as `(shape, bytes)`, into
/// rows of `options.max_len()` tokens by **first-fit decreasing**: pieces
/// are placed longest first (ties in batch order) into the first row with
/// room. Deterministic: the same records in the same order give the same
/// rows. Every token lands exactly once.
///
/// ```
/// use loaderx_core::DType;
/// use loaderx_core::sequence::{PackOptions, pack_records};
///
/// let (a, b, c) = ([1u16, 2, 3], [4u16, 5], [6u16, 7, 8, 9]);
/// let recs = [
///     (&[3usize][..], bytemuck::cast_slice(&a)),
///     (&[2usize][..], bytemuck::cast_slice(&b)),
///     (&[4usize][..], bytemuck::cast_slice(&c)),
/// ];
/// let p = pack_records(DType::U16, recs, &PackOptions::new(5))?;
/// assert_eq!(p.tokens.shape(), &[2, 5]);
/// assert_eq!(p.tokens.as_slice::<u16>()?, &[6, 7, 8, 9, 0, 1, 2, 3, 4, 5]);
/// assert_eq!(p.segment_ids.as_slice::<i32>()?, &[1, 1, 1, 1, 0, 1, 1, 1, 2, 2]);
/// assert_eq!(p.positions.as_slice::<i32>()?, &[0, 1, 2, 3, 0, 0, 1, 2, 0, 1]);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
///
/// # Errors
///
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for
/// `max_len` 0, a record that is not rank 1, a padding value of another
/// type, a record longer than `max_len` with [`LongRecords::Refuse`], or
/// more rows needed than [`PackOptions::rows`] allows;
/// [`ErrorKind::Buffer`](crate::ErrorKind::Buffer) when the rows (their
/// count times `max_len` tokens) do not fit in memory.
pub fn pack_records<'a, I>(dtype: DType, records: I, options: &PackOptions) -> Result<Packed, Error>
where
    I: IntoIterator<Item = (&'a [usize], &'a [u8])>,
{
    let max_len = options.max_len;
    if max_len == 0 {
        return Err(Error::invalid("packing needs max_len of at least 1"));
    }
    if max_len > i32::MAX as usize {
        return Err(Error::invalid(format!(
            "max_len {max_len} does not fit the i32 positions"
        )));
    }
    let size = dtype.size();
    let pad = options.pad.element(dtype)?.to_vec();
    let records: Vec<&[u8]> = records
        .into_iter()
        .enumerate()
        .map(|(i, (shape, bytes))| match shape {
            [n] if n.checked_mul(size) == Some(bytes.len()) => Ok(bytes),
            _ => Err(Error::invalid(format!(
                "packing takes sequences (rank-1 records); record {i} has shape {shape:?}"
            ))),
        })
        .collect::<Result<_, Error>>()?;
    // Pieces: (record, record_offset, len).
    let mut pieces = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        let n = r.len() / size;
        if n > max_len && options.long == LongRecords::Refuse {
            return Err(Error::invalid(format!(
                "record {i} of the step holds {n} tokens, more than a row of {max_len} \
                 (LongRecords::Split would cut it)"
            )));
        }
        let mut off = 0;
        while off < n {
            let len = (n - off).min(max_len);
            pieces.push((i, off, len));
            off += len;
        }
    }
    // Longest first; the sort is stable, so ties keep batch order.
    pieces.sort_by_key(|p| std::cmp::Reverse(p.2));
    let mut rows: Vec<Vec<PackedSegment>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    for (record, record_offset, len) in pieces {
        let row = match free.iter().position(|&f| f >= len) {
            Some(r) => r,
            None => {
                rows.push(Vec::new());
                free.push(max_len);
                rows.len() - 1
            }
        };
        let start = max_len - free[row];
        free[row] -= len;
        rows[row].push(PackedSegment {
            record,
            start,
            len,
            record_offset,
        });
    }
    // Sized (and checked) before anything is allocated: the row count and
    // the row length come from options, the tokens from a store.
    let want = options.rows.unwrap_or(rows.len());
    if rows.len() > want {
        return Err(Error::invalid(format!(
            "the step's records need {} rows of {max_len} tokens, the packing allows {want}",
            rows.len()
        )));
    }
    let too_large = || ErrorKind::Buffer {
        detail: format!("{want} packed rows of {max_len} {dtype} tokens do not fit in memory"),
    };
    let cells = want.checked_mul(max_len).ok_or_else(too_large)?;
    let token_bytes = cells.checked_mul(size).ok_or_else(too_large)?;
    let mut tokens = AlignedBuf::zeroed(token_bytes)?;
    let mut segment_ids = zeroed_i32(cells).ok_or_else(too_large)?;
    let mut positions = zeroed_i32(cells).ok_or_else(too_large)?;
    rows.try_reserve_exact(want - rows.len())
        .map_err(|_| too_large())?;
    rows.resize(want, Vec::new());
    let t = tokens.as_bytes_mut();
    if pad.iter().any(|&b| b != 0) {
        for cell in t.chunks_exact_mut(size) {
            cell.copy_from_slice(&pad);
        }
    }
    for (r, row) in rows.iter().enumerate() {
        for (k, s) in row.iter().enumerate() {
            let at = r * max_len + s.start;
            let src = &records[s.record][s.record_offset * size..(s.record_offset + s.len) * size];
            t[at * size..(at + s.len) * size].copy_from_slice(src);
            segment_ids[at..at + s.len].fill(k as i32 + 1);
            for (j, p) in positions[at..at + s.len].iter_mut().enumerate() {
                // Below max_len... or the record's length, which a Ragged
                // record (under 2 GiB) keeps within i32 for every type but
                // bool/u8/i8: saturate rather than wrap there.
                *p = i32::try_from(s.record_offset + j).unwrap_or(i32::MAX);
            }
        }
    }
    let shape = vec![rows.len(), max_len];
    Ok(Packed {
        tokens: HostArray::try_new(dtype, shape.clone(), tokens)?,
        segment_ids: HostArray::from_slice(&segment_ids, shape.clone())?,
        positions: HostArray::from_slice(&positions, shape)?,
        rows,
    })
}

/// `cells` zeros, or `None` when they cannot be had.
fn zeroed_i32(cells: usize) -> Option<Vec<i32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(cells).ok()?;
    v.resize(cells, 0);
    Some(v)
}

/// Packs a Ragged loader column (see [`pack_records`]).
///
/// # Errors
///
/// As [`pack_records`]; a Dense column is refused.
pub fn pack_column<B: StagedBuffer>(
    column: &Column<B>,
    options: &PackOptions,
) -> Result<Packed, Error> {
    if !matches!(column.layout(), ColumnLayout::Ragged(_)) {
        return Err(Error::invalid(
            "packing takes a Ragged column, got a Dense one",
        ));
    }
    pack_records(column.dtype(), column.records(), options)
}

/// Suffix of the segment-id stream [`pack_batch`] adds.
pub const SEGMENT_IDS: &str = ".segment_ids";
/// Suffix of the positions stream [`pack_batch`] adds.
pub const POSITIONS: &str = ".positions";
/// Suffix of the segment-table stream [`pack_batch`] adds.
pub const SEGMENTS: &str = ".segments";

/// Replaces Ragged stream `stream` of `batch` by its packing, as Dense
/// streams every adapter converts like any other: `stream` (the tokens,
/// `(rows, max_len)`), `stream.segment_ids` and `stream.positions` (`i32`,
/// `(rows, max_len)`) and `stream.segments` (`i64`, `(segments, 4)`, see
/// [`Packed::segment_table`]). The other streams and the batch's indices
/// are unchanged (they stay per record). This is what
/// [`DataLoaderBuilder::pack`](crate::DataLoaderBuilder::pack) runs on the
/// workers.
///
/// # Errors
///
/// As [`pack_column`]; a missing stream, or a name the added streams
/// would take twice.
pub fn pack_batch<B: StagedBuffer>(
    mut batch: Batch<B>,
    stream: &str,
    options: &PackOptions,
) -> Result<Batch<B>, Error> {
    let i = batch
        .names
        .iter()
        .position(|n| n == stream)
        .ok_or_else(|| Error::invalid(format!("the batch has no stream {stream:?} to pack")))?;
    let added = [SEGMENT_IDS, POSITIONS, SEGMENTS].map(|s| format!("{stream}{s}"));
    if let Some(taken) = added.iter().find(|a| batch.names.contains(a)) {
        return Err(Error::invalid(format!(
            "packing {stream:?} adds stream {taken:?}, which the batch already has"
        )));
    }
    let packed = pack_column(&batch.columns[i], options)?;
    let table = packed.segment_table()?;
    let dense = |a: HostArray| {
        let (dtype, shape, buf) = a.into_parts();
        Column {
            dtype,
            len: buf.len(),
            layout: ColumnLayout::Dense { shape },
            buffer: ColumnBuffer::Host(buf),
        }
    };
    batch.columns[i] = dense(packed.tokens);
    batch.columns.push(dense(packed.segment_ids));
    batch.columns.push(dense(packed.positions));
    batch.columns.push(dense(table));
    let mut names = batch.names.to_vec();
    names.extend(added);
    batch.names = Arc::from(names);
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pack_u32(records: &[Vec<u32>], options: &PackOptions) -> Result<Packed, Error> {
        let shapes: Vec<[usize; 1]> = records.iter().map(|r| [r.len()]).collect();
        pack_records(
            DType::U32,
            records
                .iter()
                .zip(&shapes)
                .map(|(r, s)| (&s[..], bytemuck::cast_slice::<u32, u8>(r))),
            options,
        )
    }

    /// Record `i`'s token `j` is `i << 16 | j`: every token says where it came from.
    fn records(lengths: &[usize]) -> Vec<Vec<u32>> {
        lengths
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n as u32).map(|j| (i as u32) << 16 | j).collect())
            .collect()
    }

    proptest! {
        #[test]
        fn every_token_once_and_segments_consistent(
            lengths in prop::collection::vec(1usize..300, 1..60),
            max_len in 1usize..257,
        ) {
            let recs = records(&lengths);
            let p = pack_u32(&recs, &PackOptions::new(max_len).pad(PadValue::of(u32::MAX))).unwrap();
            let tokens = p.tokens.as_slice::<u32>().unwrap();
            let seg = p.segment_ids.as_slice::<i32>().unwrap();
            let pos = p.positions.as_slice::<i32>().unwrap();
            prop_assert_eq!(p.tokens.shape(), &[p.num_rows(), max_len]);
            let mut seen = vec![Vec::new(); recs.len()];
            for r in 0..p.num_rows() {
                let row = r * max_len..(r + 1) * max_len;
                for c in row.clone() {
                    if seg[c] == 0 {
                        prop_assert_eq!(tokens[c], u32::MAX);
                        prop_assert_eq!(pos[c], 0);
                        continue;
                    }
                    let (rec, j) = ((tokens[c] >> 16) as usize, (tokens[c] & 0xffff) as usize);
                    // Positions are positions in the token's own record.
                    prop_assert_eq!(pos[c] as usize, j);
                    // A segment is one record's consecutive tokens.
                    if c > row.start && seg[c - 1] == seg[c] {
                        prop_assert_eq!(tokens[c - 1] >> 16, tokens[c] >> 16);
                        prop_assert_eq!(pos[c - 1] + 1, pos[c]);
                    } else if c > row.start {
                        prop_assert!(seg[c - 1] < seg[c]);
                    }
                    seen[rec].push(j);
                }
                // The segment table agrees with the ids.
                for (k, s) in p.rows[r].iter().enumerate() {
                    prop_assert!(seg[r * max_len + s.start..][..s.len].iter().all(|&x| x == k as i32 + 1));
                }
            }
            for (i, mut s) in seen.into_iter().enumerate() {
                s.sort_unstable();
                prop_assert_eq!(s, (0..lengths[i]).collect::<Vec<_>>(), "record {}", i);
            }
            // Deterministic.
            prop_assert_eq!(pack_u32(&recs, &PackOptions::new(max_len).pad(PadValue::of(u32::MAX))).unwrap(), p);
        }
    }

    #[test]
    fn options_are_enforced() {
        let recs = records(&[5, 3, 9]);
        let e = pack_u32(
            &recs,
            &PackOptions::new(8).long_records(LongRecords::Refuse),
        );
        assert!(e.unwrap_err().to_string().contains("record 2"));
        let p = pack_u32(&recs, &PackOptions::new(9).rows(3)).unwrap();
        assert_eq!(p.tokens.shape(), &[3, 9]);
        assert!(p.rows[2].is_empty());
        assert!(pack_u32(&recs, &PackOptions::new(9).rows(1)).is_err());
        assert!(pack_u32(&recs, &PackOptions::new(0)).is_err());
        assert!(pack_u32(&recs, &PackOptions::new(9).pad(PadValue::of(1u8))).is_err());
        // FFD: 9 | 5 3 — two full-ish rows, padding only 1 cell.
        let p = pack_u32(&recs, &PackOptions::new(9)).unwrap();
        assert_eq!(p.num_rows(), 2);
        assert!((p.padding_fraction() - 1.0 / 18.0).abs() < 1e-12);
        let rank2 = [(&[2usize, 1][..], &[0u8; 8][..])];
        assert!(pack_records(DType::U32, rank2, &PackOptions::new(4)).is_err());
    }

    #[test]
    fn sizes_beyond_memory_are_errors_before_any_allocation() {
        let recs = records(&[5, 3]);
        // `rows` so large that resizing the row table first would panic
        // (capacity overflow), or whose cells overflow `usize` once
        // multiplied by the row length or the element size.
        for options in [
            PackOptions::new(8).rows(usize::MAX / 16),
            PackOptions::new(1 << 20).rows(usize::MAX >> 19),
            PackOptions::new(1 << 30).rows(1 << 31),
            PackOptions::new(1 << 30).rows(1 << 40),
        ] {
            let e = pack_u32(&recs, &options).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::Buffer { .. }),
                "{options:?}: {e}"
            );
        }
        // The record count still wins over a valid row count.
        let e = pack_u32(&recs, &PackOptions::new(5).rows(1)).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
        // A shape whose byte count overflows is a shape error, not a panic.
        let huge = [(&[usize::MAX / 2][..], &[0u8; 8][..])];
        let e = pack_records(DType::U32, huge, &PackOptions::new(4)).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
    }
}
