//! Where records live, worked out once at open instead of read per record.
//!
//! A store's location table gives every record its own 16-byte
//! [`RecordLoc`]; reading it costs a gather a second random memory access per
//! record, which for records of a few bytes is most of the work. Most tables
//! follow a pattern, though: when every record stores the same number of
//! bytes (raw Dense stores, the only kind where that is the rule), this
//! crate's writer puts record `i` at `(i / S) * width` in shard `i % S`, and
//! Python loaderx 2.4.6 writes runs of consecutive records (512 KiB a run)
//! whose order in a shard depends on which writer lane finished first.
//!
//! [`Layout::detect`] reads the table once, in parallel, and when every
//! record has the same stored and logical length and lies inside its shard's
//! committed bytes, finds the runs: record `k` of a shard starts a run when
//! it does not follow record `k - 1` back to back. No run but the first in
//! any shard is the regular layout: a record's offset is one multiply-add.
//! Otherwise every run starts at a multiple of `2^b` shard-local records,
//! `2^b` the largest power of two dividing every run's first record, so a
//! block of `2^b` records never straddles two runs: a table of each block's
//! first offset (one `u64` per block and shard) places any record with one
//! lookup and a multiply-add, whatever the order of the runs — permuted
//! 512 KiB runs cost one table entry per run, runs of 64 records 1/8 byte a
//! record, and a table where every record moved (`b = 0`) 8 bytes a record.
//! The block table is kept while at most [`MAX_BLOCK_TABLE_BYTES`]; any
//! other table (sizes that differ, a location outside its shard, a block
//! table larger than that) keeps [`Layout::Table`], and every location is
//! validated when read, as before: correctness never depends on the
//! detection, which only decides how a valid location is found.
//!
//! Where the records themselves cost no more memory than that table, or
//! are at most [`COPY_ALWAYS_MAX`] bytes (where a lookup measured to slow a
//! gather by 10 to 40 %), and the shards are in memory, the records are
//! instead copied once, in parallel, in record order ([`Places::Logical`]):
//! gathers then read that copy as one shard in the regular layout. A store
//! of a million 1-byte records out of order costs 1 MB that way.
//!
//! The block offsets (or the records) are copied out of the table into
//! memory of their own, so a location validated at open cannot change
//! afterwards.

use rayon::prelude::*;

use crate::MAX_RECORD_LEN;
use crate::format::{RECORD_LOC_LEN, RecordLoc};

/// Records per task of the detection passes.
const CHUNK_RECORDS: usize = 1 << 16;
/// The largest block table kept (1 GiB: 2^27 records of a store whose
/// every record moved); a store needing more reads its locations per record.
pub(crate) const MAX_BLOCK_TABLE_BYTES: u64 = 1 << 30;

/// How a gather finds a record's stored bytes.
pub(crate) enum Layout {
    /// Read and validate each record's location in the table.
    Table,
    /// Every record has the same lengths; locations were validated at open.
    Uniform(Uniform),
}

/// A store whose records all store `phys` bytes that decode to `logic`, at
/// offsets given by blocks.
pub(crate) struct Uniform {
    /// Stored length of every record.
    pub(crate) phys: u32,
    /// Logical length of every record.
    pub(crate) logic: u32,
    shards: u64,
    /// `log2(shards)` when the shard count is a power of two.
    shift: Option<u32>,
    places: Places,
}

enum Places {
    /// One run per shard: record `k` of shard `s` at `base[s] + k * phys`.
    Regular { base: Vec<u64> },
    /// Record `k` of shard `s` at `first[(k >> b) * shards + s] + (k & mask) * phys`:
    /// blocks of `2^b` records, each inside one run.
    Blocks(Blocks),
    /// A copy of every record's bytes in record order, made at open: record
    /// `i` at `i * phys` of it (reported as shard 0).
    Logical(Vec<u8>),
}

/// Records of at most this many bytes out of order are always copied in
/// record order (when [`MAX_BLOCK_TABLE_BYTES`] allows): a block-table
/// lookup measured to slow their gathers by 10 to 40 % (`benches/layouts.rs`,
/// the suite's `small` section: 6.2 against 8.8 ns an 8-byte record), and
/// the copy costs at most half of their location table.
const COPY_ALWAYS_MAX: u32 = 8;

/// The base of [`Places::Logical`] seen as the regular layout of one shard.
const LOGICAL_BASE: [u64; 1] = [0];

/// The block table of a store whose runs are out of order.
pub(crate) struct Blocks {
    /// `log2` of the records in a block.
    b: u32,
    /// The first offset of every block, block-major (all shards' block 0,
    /// then block 1, ...); `u64::MAX` past a shard's last record.
    first: Vec<u64>,
}

impl Blocks {
    /// `log2` of the records in a block.
    #[inline(always)]
    pub(crate) fn block_shift(&self) -> u32 {
        self.b
    }

    /// The first offsets, block-major over the shards.
    #[inline(always)]
    pub(crate) fn first(&self) -> &[u64] {
        &self.first
    }
}

/// What the first detection pass found in one task's records: `None` when
/// they leave the uniform layout, else the OR of the shard-local indices of
/// the runs they start (0: no run starts past a shard's first record).
type Scan = Option<u64>;

impl Layout {
    /// Detects the layout of a location table `table` (`len` entries of
    /// [`RECORD_LOC_LEN`] bytes, the static page excluded) over shards whose
    /// committed ends are `tails` and whose bytes are `regions` (empty for
    /// a shard not in memory, e.g. a remote store's).
    pub(crate) fn detect(table: &[u8], tails: &[u64], len: u64, regions: &[&[u8]]) -> Layout {
        let shards = tails.len();
        let Some(n) = usize::try_from(len)
            .ok()
            .filter(|&n| n > 0 && shards > 0 && table.len() / RECORD_LOC_LEN >= n)
        else {
            return Layout::Table;
        };
        let table = &table[..n * RECORD_LOC_LEN];
        let first = decode(table, 0);
        let (phys, logic) = (first.phys_length, first.logic_length);
        if phys == 0 || logic == 0 || u64::from(logic) > MAX_RECORD_LEN {
            return Layout::Table;
        }
        let starts = (0..n.div_ceil(CHUNK_RECORDS))
            .into_par_iter()
            .map(|c| {
                let end = ((c + 1) * CHUNK_RECORDS).min(n);
                scan(table, c * CHUNK_RECORDS..end, tails, phys, logic)
            })
            .try_reduce(|| 0, |a, b| Some(a | b));
        let Some(starts) = starts else {
            return Layout::Table;
        };
        let (shards64, shift) = (
            shards as u64,
            shards.is_power_of_two().then(|| shards.trailing_zeros()),
        );
        let places = if starts == 0 {
            Places::Regular {
                base: (0..shards.min(n))
                    .map(|s| decode(table, s).offset)
                    .collect(),
            }
        } else {
            let b = starts.trailing_zeros();
            // Blocks in the longest shard (shard 0's records).
            let per_shard = (len.div_ceil(shards64) - 1) >> b;
            let entries = (per_shard + 1).saturating_mul(shards64);
            if entries.saturating_mul(8) > MAX_BLOCK_TABLE_BYTES {
                return Layout::Table;
            }
            // Decided before the block table is built, which the copy
            // would make unneeded.
            match logical_copy(table, n, phys, entries * 8, regions, tails) {
                Some(copy) => Places::Logical(copy),
                None => Places::Blocks(Blocks {
                    b,
                    first: block_firsts(table, len, shards64, b, entries),
                }),
            }
        };
        Layout::Uniform(Uniform {
            phys,
            logic,
            shards: shards64,
            shift,
            places,
        })
    }

    /// The uniform layout, if the records have one.
    pub(crate) fn uniform(&self) -> Option<&Uniform> {
        match self {
            Layout::Uniform(u) => Some(u),
            Layout::Table => None,
        }
    }

    /// Entries of the block table; 0 for the table, the shard count (or
    /// fewer) for the regular layout. For tests and the benchmark.
    #[cfg(test)]
    pub(crate) fn blocks(&self) -> usize {
        match self {
            Layout::Table => 0,
            Layout::Uniform(u) => match &u.places {
                Places::Regular { base } => base.len(),
                Places::Blocks(b) => b.first.len(),
                Places::Logical(_) => usize::MAX,
            },
        }
    }

    /// True when offsets are computed without a lookup.
    #[cfg(test)]
    pub(crate) fn is_regular(&self) -> bool {
        matches!(
            self,
            Layout::Uniform(Uniform {
                places: Places::Regular { .. },
                ..
            })
        )
    }
}

impl Uniform {
    /// For the regular layout over a power-of-two number of shards (what
    /// this crate's writer makes): `log2(shards)` and each shard's base
    /// offset, so that record `i` lies in shard `i & (shards - 1)` at
    /// `base[shard] + (i >> shift) * phys`. Lets a copy loop hoist the
    /// layout's case analysis out of the loop.
    ///
    /// A [`logical`](Self::logical) copy is the regular layout of one shard
    /// (`shift` 0, base 0): its bytes stand for the store's shards.
    pub(crate) fn regular_pow2(&self) -> Option<(u32, &[u64])> {
        match (&self.places, self.shift) {
            (Places::Regular { base }, Some(shift)) => Some((shift, base)),
            (Places::Logical(_), _) => Some((0, &LOGICAL_BASE)),
            _ => None,
        }
    }

    /// The copy of the records in record order, when the layout is one.
    pub(crate) fn logical(&self) -> Option<&[u8]> {
        match &self.places {
            Places::Logical(copy) => Some(copy),
            _ => None,
        }
    }

    /// For the block layout over a power-of-two number of shards:
    /// `log2(shards)` and the blocks, so that record `i` (shard
    /// `s = i & (shards - 1)`, `k = i >> shift` in it) lies at
    /// `first[((k >> b) << shift) | s] + (k & (2^b - 1)) * phys`.
    pub(crate) fn blocks_pow2(&self) -> Option<(u32, &Blocks)> {
        match (&self.places, self.shift) {
            (Places::Blocks(blocks), Some(shift)) => Some((shift, blocks)),
            _ => None,
        }
    }

    /// The shard and offset of record `index` (which the caller has checked
    /// is in range; an index out of range gives an offset past the shard's
    /// end, never a panic).
    #[inline(always)]
    pub(crate) fn place(&self, index: u64) -> (usize, u64) {
        let (shard, k) = match self.shift {
            Some(shift) => (index & (self.shards - 1), index >> shift),
            None => (index % self.shards, index / self.shards),
        };
        let phys = u64::from(self.phys);
        let offset = match &self.places {
            Places::Regular { base } => base
                .get(shard as usize)
                .map_or(u64::MAX, |b| b.wrapping_add(k.wrapping_mul(phys))),
            Places::Logical(_) => return (0, index.wrapping_mul(phys)),
            Places::Blocks(Blocks { b, first }) => {
                let within = k & ((1u64 << b) - 1);
                (k >> b)
                    .checked_mul(self.shards)
                    .and_then(|e| usize::try_from(e + shard).ok())
                    .and_then(|e| first.get(e))
                    .map_or(u64::MAX, |f| f.wrapping_add(within.wrapping_mul(phys)))
            }
        };
        (shard as usize, offset)
    }

    /// The location of record `index`.
    pub(crate) fn loc(&self, index: u64) -> (usize, RecordLoc) {
        let (shard, offset) = self.place(index);
        (
            shard,
            RecordLoc {
                offset,
                phys_length: self.phys,
                logic_length: self.logic,
            },
        )
    }
}

/// The first offset of every block of `2^b` shard-local records, block-major
/// over the `shards` shards (`entries` of them, at most
/// [`MAX_BLOCK_TABLE_BYTES`] / 8, so an index of this machine); `u64::MAX`
/// past a shard's last record.
fn block_firsts(table: &[u8], len: u64, shards: u64, b: u32, entries: u64) -> Vec<u64> {
    (0..entries as usize)
        .into_par_iter()
        .with_min_len(CHUNK_RECORDS)
        .map(|e| {
            let (block, s) = (e as u64 / shards, e as u64 % shards);
            let id = (block << b) * shards + s;
            if id < len {
                decode(table, id as usize).offset
            } else {
                u64::MAX
            }
        })
        .collect()
}

/// For `n` records of `phys` bytes whose locations in `table` were
/// validated, when a copy of them in record order costs no more memory than
/// their block table (`table_bytes`), or they are at most
/// [`COPY_ALWAYS_MAX`] bytes, at most [`MAX_BLOCK_TABLE_BYTES`] in all, and
/// every shard is in `regions` (its committed bytes at least `tails`): that
/// copy, made in parallel. Gathers then read it as one shard in the regular
/// layout.
fn logical_copy(
    table: &[u8],
    n: usize,
    phys: u32,
    table_bytes: u64,
    regions: &[&[u8]],
    tails: &[u64],
) -> Option<Vec<u8>> {
    let bytes = (n as u64).checked_mul(u64::from(phys))?;
    let resident = regions.len() == tails.len()
        && regions.iter().zip(tails).all(|(r, &t)| r.len() as u64 >= t);
    if !resident || bytes > MAX_BLOCK_TABLE_BYTES || (bytes > table_bytes && phys > COPY_ALWAYS_MAX)
    {
        return None;
    }
    let (w, shards) = (phys as usize, tails.len());
    let mut copy = vec![0u8; usize::try_from(bytes).ok()?];
    let ok = copy
        .par_chunks_mut(w * CHUNK_RECORDS)
        .enumerate()
        .all(|(c, out)| {
            out.chunks_exact_mut(w).enumerate().all(|(j, dst)| {
                let id = c * CHUNK_RECORDS + j;
                let src = usize::try_from(decode(table, id).offset)
                    .ok()
                    .and_then(|start| regions[id % shards].get(start..start.checked_add(w)?));
                src.map(|src| dst.copy_from_slice(src)).is_some()
            })
        });
    ok.then_some(copy)
}

/// Table entry `i` of `table`.
fn decode(table: &[u8], i: usize) -> RecordLoc {
    let mut b = [0u8; RECORD_LOC_LEN];
    b.copy_from_slice(&table[i * RECORD_LOC_LEN..(i + 1) * RECORD_LOC_LEN]);
    RecordLoc::decode(&b)
}

/// Scans the entries of records `ids` of `table`: each must store `phys`
/// bytes for `logic` inside its shard's committed bytes. Returns the OR of
/// the shard-local indices of the records starting a run (not following
/// the shard's previous record back to back).
fn scan(table: &[u8], ids: std::ops::Range<usize>, tails: &[u64], phys: u32, logic: u32) -> Scan {
    let shards = tails.len();
    let mut starts = 0u64;
    for id in ids {
        let loc = decode(table, id);
        let s = id % shards;
        let fits = loc
            .offset
            .checked_add(u64::from(phys))
            .is_some_and(|end| end <= tails[s]);
        if loc.phys_length != phys || loc.logic_length != logic || !fits {
            return None;
        }
        if id >= shards
            && decode(table, id - shards)
                .offset
                .wrapping_add(u64::from(phys))
                != loc.offset
        {
            starts |= (id / shards) as u64;
        }
    }
    Some(starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(offset, phys_length, logic_length)` of each record.
    type Locs = Vec<(u64, u32, u32)>;

    fn table(locs: &[(u64, u32, u32)]) -> Vec<u8> {
        locs.iter()
            .flat_map(|&(offset, phys_length, logic_length)| {
                RecordLoc {
                    offset,
                    phys_length,
                    logic_length,
                }
                .encode()
            })
            .collect()
    }

    /// Every record's place under `layout` against the table's.
    fn agrees(layout: &Layout, locs: &[(u64, u32, u32)], shards: usize) {
        let u = layout.uniform().unwrap_or_else(|| panic!("not uniform"));
        for (i, &(offset, _, _)) in locs.iter().enumerate() {
            assert_eq!(u.place(i as u64), (i % shards, offset), "record {i}");
        }
        // Past the end: never a panic.
        for i in [locs.len() as u64 + 4096, u64::MAX / 2, u64::MAX] {
            let _ = u.place(i);
        }
    }

    #[test]
    fn the_writers_layout_is_regular() {
        for shards in [1usize, 3, 4] {
            let w = 8u32;
            let locs: Vec<_> = (0..1000u64)
                .map(|i| ((i / shards as u64) * u64::from(w), w, w))
                .collect();
            let tails = vec![1000 * 8; shards];
            let l = Layout::detect(&table(&locs), &tails, 1000, &[]);
            assert!(l.is_regular(), "{shards}");
            agrees(&l, &locs, shards);
        }
    }

    /// Two shards of `n / 2` records each, in runs of `run` records stored
    /// in reverse order.
    fn reversed_runs(n: u64, run: u64, w: u32) -> Locs {
        let runs = (n / 2).div_ceil(run);
        (0..n)
            .map(|i| {
                let k = i / 2;
                let (r, within) = (k / run, k % run);
                (((runs - 1 - r) * run + within) * u64::from(w), w, w)
            })
            .collect()
    }

    #[test]
    fn permuted_runs_make_a_block_table() {
        // Runs of 10: every run starts at a multiple of 2, blocks of 2.
        let (n, w) = (400u64, 4u32);
        let locs = reversed_runs(n, 10, w);
        let l = Layout::detect(&table(&locs), &[800, 800], n, &[]);
        assert!(!l.is_regular());
        assert_eq!(l.blocks(), 200);
        agrees(&l, &locs, 2);
        // Runs of 64 (the last one short): blocks of 64, one entry a run.
        let n = 2 * 1000;
        let locs = reversed_runs(n, 64, w);
        let l = Layout::detect(&table(&locs), &[4096 * 4, 4096 * 4], n, &[]);
        assert_eq!(l.blocks(), 2 * 16);
        agrees(&l, &locs, 2);
        // Three shards, one record fewer in the last; a record past every
        // block is placed nowhere.
        let locs: Vec<_> = (0..3 * 8 - 1u64)
            .map(|i| {
                let k = i / 3;
                (((k + 4) % 8) * 2, 2, 2)
            })
            .collect();
        let l = Layout::detect(&table(&locs), &[16, 16, 16], 23, &[]);
        assert_eq!(l.blocks(), 2 * 3);
        agrees(&l, &locs, 3);
        assert_eq!(l.uniform().unwrap().place(26), (2, u64::MAX));
    }

    #[test]
    fn every_record_moved_is_a_table_of_offsets() {
        let w = 2u32;
        let locs: Vec<_> = (0..100u64)
            .map(|i| ((99 - i) * u64::from(w), w, w))
            .collect();
        let l = Layout::detect(&table(&locs), &[200], 100, &[]);
        assert_eq!(l.blocks(), 100);
        agrees(&l, &locs, 1);
    }

    #[test]
    fn small_records_out_of_order_are_copied_in_record_order() {
        // Two shards of 1-byte records, each shard's records reversed.
        let n = 100u64;
        let locs: Vec<_> = (0..n).map(|i| (49 - i / 2, 1, 1)).collect();
        let shard = |s: u64| -> Vec<u8> { (0..50).rev().map(|k| (k * 2 + s) as u8).collect() };
        let (a, b) = (shard(0), shard(1));
        let l = Layout::detect(&table(&locs), &[50, 50], n, &[&a, &b]);
        let u = l.uniform().unwrap();
        let copy = u.logical().unwrap();
        assert_eq!(copy, (0..n as u8).collect::<Vec<_>>());
        assert_eq!(u.place(7), (0, 7));
        assert_eq!(u.regular_pow2(), Some((0, &[0u64][..])));
        // Without the shards' bytes (a remote store): the block table.
        let l = Layout::detect(&table(&locs), &[50, 50], n, &[]);
        assert_eq!(l.blocks(), 100);
        // Wider records than their block table's share keep the table.
        let locs: Vec<_> = (0..n)
            .map(|i| ((i / 2 / 25 * 25 + 24 - i / 2 % 25) * 64, 64, 64))
            .collect();
        let data = vec![0u8; 64 * 50];
        let l = Layout::detect(&table(&locs), &[3200, 3200], n, &[&data, &data]);
        assert!(l.uniform().unwrap().logical().is_none());
        assert_eq!(l.blocks(), 100);
    }

    #[test]
    fn irregular_tables_keep_the_table() {
        let w = 2u32;
        let regular: Vec<_> = (0..100u64).map(|i| (i * u64::from(w), w, w)).collect();
        let bad = |f: &dyn Fn(&mut Locs)| {
            let mut locs = regular.clone();
            f(&mut locs);
            Layout::detect(&table(&locs), &[200], 100, &[])
        };
        assert!(bad(&|_| ()).is_regular());
        // Lengths that differ, a record past the tail.
        assert_eq!(bad(&|l| l[50].1 = 3).blocks(), 0);
        assert_eq!(bad(&|l| l[50].2 = 3).blocks(), 0);
        assert_eq!(bad(&|l| l[99].0 = 199).blocks(), 0);
        assert_eq!(bad(&|l| l[7].0 = u64::MAX - 1).blocks(), 0);
        // Lengths out of range in every record.
        let zero: Vec<_> = (0..10u64).map(|i| (i, 0, 0)).collect();
        assert_eq!(Layout::detect(&table(&zero), &[10], 10, &[]).blocks(), 0);
        // A table shorter than claimed, no records.
        assert_eq!(
            Layout::detect(&table(&regular[..5]), &[200], 100, &[]).blocks(),
            0
        );
        assert_eq!(Layout::detect(&[], &[0], 0, &[]).blocks(), 0);
    }

    #[test]
    fn overlapping_records_are_uniform() {
        // Every record at offset 0 of its shard: blocks of one record.
        let locs: Vec<_> = (0..64u64).map(|_| (0, 8, 8)).collect();
        let l = Layout::detect(&table(&locs), &[8, 8], 64, &[]);
        assert_eq!(l.blocks(), 64);
        agrees(&l, &locs, 2);
        // Each shard's second half stored over its first half: blocks of 16.
        let locs: Vec<_> = (0..64u64).map(|i| ((i / 2 % 16) * 8, 8, 8)).collect();
        let l = Layout::detect(&table(&locs), &[128, 128], 64, &[]);
        assert_eq!(l.blocks(), 4);
        agrees(&l, &locs, 2);
    }
}
