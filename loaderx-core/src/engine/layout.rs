//! Where records live, worked out once at open instead of read per record.
//!
//! A store's location table gives every record its own 16-byte
//! [`RecordLoc`]; reading it costs a gather a second random memory access per
//! record, which for records of a few bytes is most of the work. Most tables
//! follow a pattern, though: when every record stores the same number of
//! bytes (raw Dense stores, the only kind where that is the rule), this
//! crate's writer puts record `i` at `(i / S) * width` in shard `i % S`, and
//! Python loaderx writes runs of consecutive records whose order in a shard
//! depends on which worker finished first.
//!
//! [`Layout::detect`] reads the table once, in parallel, and when every
//! record has the same stored and logical length and lies inside its shard's
//! committed bytes, compresses it into runs: per shard, the shard-local
//! index of each run's first record and its offset, the run's records
//! following back to back. One run per shard is the regular layout: a
//! record's offset is one multiply-add. More runs are looked up through a
//! bucket index (the run holding every `2^b`-th record, `2^b` at most the
//! mean run length, then a step or two forward), and only kept while at most [`MAX_RUN_SHARE`] of the table's size
//! (a run table larger than that would not be cheaper to search than the
//! table is to read). Any other table (sizes that differ, a location outside
//! its shard, a table too fragmented) keeps [`Layout::Table`], and every
//! location is validated when read, as before: correctness never depends on
//! the detection, which only decides how a valid location is found.
//!
//! The runs are copied out of the table into memory of their own, so a
//! location validated at open cannot change afterwards.

use rayon::prelude::*;

use crate::format::{MAX_RECORD_LEN, RECORD_LOC_LEN, RecordLoc};

/// Records per task of the detection pass (rounded up to whole stripes).
const CHUNK_RECORDS: usize = 1 << 16;
/// A run table is kept while it has at most one run per this many records.
pub(crate) const MAX_RUN_SHARE: u64 = 4;

/// How a gather finds a record's stored bytes.
pub(crate) enum Layout {
    /// Read and validate each record's location in the table.
    Table,
    /// Every record has the same lengths; locations were validated at open.
    Uniform(Uniform),
}

/// A store whose records all store `phys` bytes that decode to `logic`, at
/// offsets given by runs.
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
    /// Several runs in some shard.
    Runs(Vec<ShardRuns>),
}

/// The runs of one shard, ordered by first record.
#[derive(Default)]
struct ShardRuns {
    /// Shard-local index of each run's first record: ascending, from 0.
    first: Vec<u64>,
    /// Offset of each run's first record.
    offset: Vec<u64>,
    /// The run holding record `b << shift`, for every bucket `b`: a lookup
    /// starts there and steps forward (buckets are no longer than the mean
    /// run, so rarely more than once) instead of searching all runs.
    bucket: Vec<u32>,
    shift: u32,
}

impl ShardRuns {
    fn len(&self) -> usize {
        self.first.len()
    }

    /// Adds record `k` at `offset`, extending the last run when it follows it.
    fn push(&mut self, k: u64, offset: u64, phys: u64) {
        if let (Some(&f), Some(&o)) = (self.first.last(), self.offset.last())
            && o.checked_add((k - f).saturating_mul(phys)) == Some(offset)
        {
            return;
        }
        self.first.push(k);
        self.offset.push(offset);
    }

    /// Builds the buckets for a shard of `count` records.
    fn index(&mut self, count: u64) {
        let mean = count / (self.len() as u64).max(1);
        self.shift = mean.max(1).ilog2();
        self.bucket = (0..=count >> self.shift)
            .map(|b| {
                let k = b << self.shift;
                self.first.partition_point(|&f| f <= k).saturating_sub(1) as u32
            })
            .collect();
    }

    /// The run holding record `k`.
    #[inline(always)]
    fn run_of(&self, k: u64) -> usize {
        let mut r = self
            .bucket
            .get((k >> self.shift) as usize)
            .map_or(0, |&r| r as usize);
        while self.first.get(r + 1).is_some_and(|&f| f <= k) {
            r += 1;
        }
        r
    }

    /// Appends `next`, the runs of the following records of this shard.
    fn extend(&mut self, next: ShardRuns, phys: u64) {
        for (k, o) in next.first.into_iter().zip(next.offset) {
            self.push(k, o, phys);
        }
    }
}

/// What one task of the detection pass found: the runs of its records per
/// shard, or `None` when its records leave the uniform layout.
type Scan = Option<Vec<ShardRuns>>;

impl Layout {
    /// Detects the layout of a location table `table` (`len` entries of
    /// [`RECORD_LOC_LEN`] bytes, the static page excluded) over shards whose
    /// committed ends are `tails`.
    pub(crate) fn detect(table: &[u8], tails: &[u64], len: u64) -> Layout {
        let shards = tails.len();
        let Some(n) = usize::try_from(len)
            .ok()
            .filter(|&n| n > 0 && shards > 0 && table.len() / RECORD_LOC_LEN >= n)
        else {
            return Layout::Table;
        };
        let first = decode(table, 0);
        let (phys, logic) = (first.phys_length, first.logic_length);
        if phys == 0 || logic == 0 || u64::from(logic) > MAX_RECORD_LEN {
            return Layout::Table;
        }
        // Whole stripes per task, so a task's records of a shard are consecutive.
        let chunk = CHUNK_RECORDS.div_ceil(shards) * shards;
        let scans: Vec<Scan> = table[..n * RECORD_LOC_LEN]
            .par_chunks(chunk * RECORD_LOC_LEN)
            .enumerate()
            .map(|(c, part)| scan(part, c * chunk, tails, phys, logic))
            .collect();
        let mut runs: Vec<ShardRuns> = (0..shards).map(|_| ShardRuns::default()).collect();
        for scan in scans {
            let Some(part) = scan else {
                return Layout::Table;
            };
            for (all, more) in runs.iter_mut().zip(part) {
                all.extend(more, u64::from(phys));
            }
        }
        let places = if runs.iter().all(|r| r.len() <= 1) {
            Places::Regular {
                base: runs
                    .iter()
                    .map(|r| r.offset.first().copied().unwrap_or(0))
                    .collect(),
            }
        } else if runs.iter().map(ShardRuns::len).sum::<usize>() as u64 <= len / MAX_RUN_SHARE {
            for (s, r) in runs.iter_mut().enumerate() {
                r.index(len.saturating_sub(s as u64).div_ceil(shards as u64));
            }
            Places::Runs(runs)
        } else {
            return Layout::Table;
        };
        Layout::Uniform(Uniform {
            phys,
            logic,
            shards: shards as u64,
            shift: shards.is_power_of_two().then(|| shards.trailing_zeros()),
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

    /// Runs of offsets in the run table; 0 for the table, the shard count
    /// (or fewer) for the regular layout. For tests and the benchmark.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> usize {
        match self {
            Layout::Table => 0,
            Layout::Uniform(u) => match &u.places {
                Places::Regular { base } => base.len(),
                Places::Runs(r) => r.iter().map(ShardRuns::len).sum(),
            },
        }
    }

    /// True when offsets are computed without a search.
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
    pub(crate) fn regular_pow2(&self) -> Option<(u32, &[u64])> {
        match (&self.places, self.shift) {
            (Places::Regular { base }, Some(shift)) => Some((shift, base)),
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
            Places::Runs(runs) => runs.get(shard as usize).map_or(u64::MAX, |r| {
                let at = r.run_of(k);
                match (r.first.get(at), r.offset.get(at)) {
                    (Some(&f), Some(&o)) => o.wrapping_add(k.wrapping_sub(f).wrapping_mul(phys)),
                    _ => u64::MAX,
                }
            }),
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

/// Table entry `i` of `table`.
fn decode(table: &[u8], i: usize) -> RecordLoc {
    let mut b = [0u8; RECORD_LOC_LEN];
    b.copy_from_slice(&table[i * RECORD_LOC_LEN..(i + 1) * RECORD_LOC_LEN]);
    RecordLoc::decode(&b)
}

/// Scans the entries `part` of records `start..`: each must store `phys`
/// bytes for `logic` inside its shard's committed bytes.
fn scan(part: &[u8], start: usize, tails: &[u64], phys: u32, logic: u32) -> Scan {
    let shards = tails.len();
    let records = part.len() / RECORD_LOC_LEN;
    let mut runs: Vec<ShardRuns> = (0..shards).map(|_| ShardRuns::default()).collect();
    let mut count = 0;
    for (j, entry) in part.chunks_exact(RECORD_LOC_LEN).enumerate() {
        let id = start + j;
        let mut b = [0u8; RECORD_LOC_LEN];
        b.copy_from_slice(entry);
        let loc = RecordLoc::decode(&b);
        let s = id % shards;
        let fits = loc
            .offset
            .checked_add(u64::from(phys))
            .is_some_and(|end| end <= tails[s]);
        if loc.phys_length != phys || loc.logic_length != logic || !fits {
            return None;
        }
        let r = &mut runs[s];
        let before = r.len();
        r.push((id / shards) as u64, loc.offset, u64::from(phys));
        count += r.len() - before;
        if count as u64 > (records as u64 / MAX_RUN_SHARE).max(shards as u64) {
            return None;
        }
    }
    Some(runs)
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
    }

    #[test]
    fn the_writers_layout_is_regular() {
        for shards in [1usize, 3, 4] {
            let w = 8u32;
            let locs: Vec<_> = (0..1000u64)
                .map(|i| ((i / shards as u64) * u64::from(w), w, w))
                .collect();
            let tails = vec![1000 * 8; shards];
            let l = Layout::detect(&table(&locs), &tails, 1000);
            assert!(l.is_regular(), "{shards}");
            agrees(&l, &locs, shards);
        }
    }

    #[test]
    fn permuted_runs_make_a_run_table() {
        // Two shards; each shard's records in runs of 10 stored in reverse order.
        let (n, w) = (400u64, 4u32);
        let locs: Vec<_> = (0..n)
            .map(|i| {
                let k = i / 2;
                let (run, within) = (k / 10, k % 10);
                let runs = n / 2 / 10;
                (((runs - 1 - run) * 10 + within) * u64::from(w), w, w)
            })
            .collect();
        let l = Layout::detect(&table(&locs), &[800, 800], n);
        assert!(!l.is_regular());
        assert_eq!(l.runs(), 40);
        agrees(&l, &locs, 2);
    }

    #[test]
    fn irregular_tables_keep_the_table() {
        let w = 2u32;
        let regular: Vec<_> = (0..100u64).map(|i| (i * u64::from(w), w, w)).collect();
        let bad = |f: &dyn Fn(&mut Locs)| {
            let mut locs = regular.clone();
            f(&mut locs);
            Layout::detect(&table(&locs), &[200], 100)
        };
        assert!(bad(&|_| ()).is_regular());
        // Lengths that differ, a record past the tail, too many runs.
        assert_eq!(bad(&|l| l[50].1 = 3).runs(), 0);
        assert_eq!(bad(&|l| l[50].2 = 3).runs(), 0);
        assert_eq!(bad(&|l| l[99].0 = 199).runs(), 0);
        assert_eq!(bad(&|l| l[7].0 = u64::MAX - 1).runs(), 0);
        assert_eq!(
            bad(&|l| l.iter_mut().for_each(|x| x.0 = 198 - x.0)).runs(),
            0
        );
        // Lengths out of range in every record.
        let zero: Vec<_> = (0..10u64).map(|i| (i, 0, 0)).collect();
        assert_eq!(Layout::detect(&table(&zero), &[10], 10).runs(), 0);
        // A table shorter than claimed, no records.
        assert_eq!(Layout::detect(&table(&regular[..5]), &[200], 100).runs(), 0);
        assert_eq!(Layout::detect(&[], &[0], 0).runs(), 0);
    }

    #[test]
    fn overlapping_records_are_uniform() {
        // Every record at offset 0 of its shard: runs of one, too many.
        let locs: Vec<_> = (0..64u64).map(|_| (0, 8, 8)).collect();
        assert_eq!(Layout::detect(&table(&locs), &[8, 8], 64).runs(), 0);
        // Each shard's second half stored over its first half: two runs.
        let locs: Vec<_> = (0..64u64).map(|i| ((i / 2 % 16) * 8, 8, 8)).collect();
        let l = Layout::detect(&table(&locs), &[128, 128], 64);
        assert_eq!(l.runs(), 4);
        agrees(&l, &locs, 2);
    }
}
