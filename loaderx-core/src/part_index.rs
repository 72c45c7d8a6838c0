//! Where a record of several parts read as one lies: its part and its
//! index there.

use crate::error::Error;

/// The map from a record of parts read end to end (a multi-part dataset,
/// a mixture's source of several stores) to `(part, index in the part)`,
/// in O(1) for parts of similar sizes and O(log parts) at worst, with
/// memory proportional to the parts (about 24 bytes a part), never to the
/// records.
///
/// Beside every part's first record it keeps a bucket table: the records
/// are cut into at most two power-of-two buckets a part, and each bucket
/// boundary notes the part holding it, so a record's part lies between
/// its bucket's entry and the next one's (usually one part; a search, by
/// conditional moves, among those otherwise).
///
/// ```
/// use loaderx_core::PartIndex;
///
/// let index = PartIndex::new([300, 0, 257, 1])?;
/// assert_eq!(index.len(), 558);
/// assert_eq!(index.locate(0), Some((0, 0)));
/// assert_eq!(index.locate(300), Some((2, 0))); // part 1 is empty
/// assert_eq!(index.locate(557), Some((3, 0)));
/// assert_eq!(index.locate(558), None);
/// assert_eq!(index.starts(), &[0, 300, 300, 557, 558]);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PartIndex {
    /// `starts[p]`: part `p`'s first record; one entry more, the total.
    starts: Vec<u64>,
    /// `buckets[k]`: the part holding record `k << shift` (the last
    /// record's part past the end).
    buckets: Vec<usize>,
    shift: u32,
    /// Buckets no wider than the smallest non-empty part: a bucket holds
    /// at most one part boundary, so a record's part is its bucket's entry
    /// or the next one's, told apart by one comparison.
    one_boundary: bool,
}

impl PartIndex {
    /// The index of parts holding `lengths` records, in order.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// for no part or more than 2^64 records in all.
    pub fn new(lengths: impl IntoIterator<Item = u64>) -> Result<PartIndex, Error> {
        let mut starts = vec![0u64];
        let mut total = 0u64;
        for n in lengths {
            total = total
                .checked_add(n)
                .ok_or_else(|| Error::invalid("the parts hold more than 2^64 records"))?;
            starts.push(total);
        }
        if starts.len() == 1 {
            return Err(Error::invalid("an index of parts needs at least one part"));
        }
        let (buckets, shift, one_boundary) = bucket_table(&starts);
        Ok(PartIndex {
            starts,
            buckets,
            shift,
            one_boundary,
        })
    }

    /// Records in all parts.
    pub fn len(&self) -> u64 {
        self.starts[self.starts.len() - 1]
    }

    /// True when no part holds a record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of parts.
    pub fn parts(&self) -> usize {
        self.starts.len() - 1
    }

    /// Every part's first record, then the total.
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// Bytes the index holds (its tables), whatever the record count.
    pub fn memory_bytes(&self) -> usize {
        self.starts.capacity() * size_of::<u64>() + self.buckets.capacity() * size_of::<usize>()
    }

    /// `(part, index in the part)` of `record`; `None` past the end.
    #[inline]
    pub fn locate(&self, record: u64) -> Option<(usize, u64)> {
        (record < self.len()).then(|| self.locate_in_range(record))
    }

    /// [`locate`](Self::locate) of a record known in range.
    #[inline(always)]
    pub(crate) fn locate_in_range(&self, record: u64) -> (usize, u64) {
        let k = (record >> self.shift) as usize;
        let (lo, hi) = (self.buckets[k], self.buckets[k + 1]);
        let p = if self.one_boundary {
            // Arithmetic, not a branch: random records would mispredict it
            // half the time, and each miss drops the copies in flight.
            lo + usize::from(self.starts[hi] <= record) * (hi - lo)
        } else {
            last_start_at_or_below(&self.starts, lo, hi - lo + 1, record)
        };
        (p, record - self.starts[p])
    }
}

/// The last part among the `len` parts from `base` whose start is at or
/// below `index` (an empty part shares its start with the next one, so the
/// last of equal starts is the one holding `index`): a binary search whose
/// step is a conditional move, not a branch that random indices would
/// mispredict at every level.
#[inline]
fn last_start_at_or_below(starts: &[u64], mut base: usize, mut len: usize, index: u64) -> usize {
    while len > 1 {
        let half = len / 2;
        base = if starts[base + half] <= index {
            base + half
        } else {
            base
        };
        len -= half;
    }
    base
}

/// The bucket table of parts starting at `starts` (the total last): its
/// entries (for every bucket boundary, the part holding the record there),
/// the buckets' width as a power of two, and whether a bucket holds at most
/// one part boundary. That width is the largest power of two no wider than
/// the smallest non-empty part when this gives at most four buckets a part
/// (parts of similar sizes, as writers' shares are), else the smallest
/// giving at most two buckets a part.
fn bucket_table(starts: &[u64]) -> (Vec<usize>, u32, bool) {
    let parts = starts.len() - 1;
    let total = starts[parts];
    let last = total.saturating_sub(1);
    let most = 2 * parts as u64;
    let mut shift = 0u32;
    while (last >> shift) + 1 > most {
        shift += 1;
    }
    let smallest = starts
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|&n| n > 0)
        .min();
    let fine = smallest
        .map(|m| 63 - m.leading_zeros())
        .filter(|&s| (last >> s) < 2 * most);
    let one_boundary = fine.is_some();
    if let Some(s) = fine {
        shift = s;
    }
    let buckets = (last >> shift) as usize + 1;
    let table = (0..=buckets)
        .map(|k| {
            let first = ((k as u128) << shift).min(u128::from(last)) as u64;
            last_start_at_or_below(starts, 0, parts, first)
        })
        .collect();
    (table, shift, one_boundary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucketed search finds what a scan finds, empty parts, uneven
    /// parts and huge totals included.
    #[test]
    fn buckets_bound_the_part_of_every_record() {
        let layouts: [&[u64]; 9] = [
            &[250, 251, 0, 250, 251, 0, 0, 250],
            &[143, 143, 143, 143, 143, 143, 143],
            &[1 << 20; 3],
            &[5],
            &[0, 3, 0, 0, 7, 1, 0],
            &[1, 1, 1, 1000, 1, 1],
            &[64; 100],
            &[1 << 40, 3, 1 << 41],
            &[u64::MAX / 2, u64::MAX / 2],
        ];
        for sizes in layouts {
            let mut starts = vec![0u64];
            for s in sizes {
                starts.push(starts.last().unwrap() + s);
            }
            let index = PartIndex::new(sizes.iter().copied()).unwrap();
            let total = *starts.last().unwrap();
            let similar = sizes.iter().filter(|&&n| n > 0).max() < Some(&(2 * sizes[0].max(1)));
            assert!(!similar || index.one_boundary, "{sizes:?}");
            assert!(index.buckets.len() <= 4 * sizes.len() + 1, "{sizes:?}");
            let mut probes: Vec<u64> = (0..2000u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % total)
                .collect();
            probes.extend(
                starts
                    .iter()
                    .flat_map(|&s| [s.saturating_sub(1), s])
                    .filter(|&s| s < total),
            );
            for i in probes {
                let (p, local) = index.locate(i).unwrap();
                assert_eq!(local, i - starts[p]);
                let want = (0..sizes.len()).rev().find(|&q| starts[q] <= i).unwrap();
                assert_eq!(p, want, "record {i} of {sizes:?}");
                assert!(starts[p] <= i && i < starts[p + 1]);
            }
        }
    }
}
