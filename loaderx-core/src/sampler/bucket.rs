//! Length-aware batch formation: sorted windows (`Bucketed`) and length
//! buckets under a token budget (`TokenBudget`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::feistel::FeistelPermutation;
use super::rng::mix;
use crate::error::Error;
use crate::sequence::LengthIndex;

/// Keys the per-pass shuffle of batch order.
const ORDER_TAG: u64 = 0x6f72_6465_7200_0001;
/// Keys the per-pass, per-bucket permutation of a token-budget bucket.
const BUCKET_TAG: u64 = 0x6275_636b_6574_0002;

/// The per-pass permutation of `batches` batch slots.
pub(super) fn batch_order(seed: u64, pass: u64, batches: u64) -> FeistelPermutation {
    FeistelPermutation::new(batches, mix(mix(seed, pass), ORDER_TAG))
}

/// Sorted windows of `Bucketed` passes, memoised: the `k` batches of a
/// window share one draw-and-sort of its `k × b` records instead of each
/// repeating it. Bounded to the larger of [`WindowMemo::BYTES`] of record
/// ids and two windows (the oldest windows go first, never the one just
/// sorted), so a window larger than the bound is still sorted once;
/// batches stay a pure function of the step, the memo only saves work.
pub(super) struct WindowMemo {
    inner: Mutex<MemoInner>,
    /// The bound for windows of at most half of it.
    cap: usize,
    /// Windows sorted so far (for tests of the policy).
    sorts: AtomicU64,
}

impl Default for WindowMemo {
    fn default() -> WindowMemo {
        WindowMemo::with_cap(Self::BYTES)
    }
}

#[derive(Default)]
struct MemoInner {
    /// `(pass, m, lo)` → the window's record ids sorted by length.
    windows: HashMap<(u64, u64, u64), Arc<[u64]>>,
    /// Insertion order, for eviction.
    order: VecDeque<(u64, u64, u64)>,
    bytes: usize,
}

impl WindowMemo {
    /// At least this many bytes of record ids are kept (8 M records).
    pub(super) const BYTES: usize = 64 << 20;

    /// A memo keeping at least `cap` bytes of record ids.
    fn with_cap(cap: usize) -> WindowMemo {
        WindowMemo {
            inner: Mutex::default(),
            cap,
            sorts: AtomicU64::new(0),
        }
    }

    fn get_or_sort(
        &self,
        key: (u64, u64, u64),
        sort: impl FnOnce() -> Result<Vec<u64>, Error>,
    ) -> Result<Arc<[u64]>, Error> {
        let lock = || self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = lock().windows.get(&key) {
            return Ok(Arc::clone(w));
        }
        // Sorted outside the lock; two workers may race on one window and
        // compute the same ids.
        self.sorts.fetch_add(1, Ordering::Relaxed);
        let w: Arc<[u64]> = sort()?.into();
        let bytes = 8 * w.len();
        // Room for two windows of this size however small the bound: the
        // window just sorted is always kept (it was evicted at once when
        // larger than the bound, so that every batch re-sorted it).
        let cap = self.cap.max(bytes.saturating_mul(2));
        let mut m = lock();
        if !m.windows.contains_key(&key) {
            m.bytes += bytes;
            m.windows.insert(key, Arc::clone(&w));
            m.order.push_back(key);
            while m.bytes > cap && m.order.len() > 1 {
                let Some(old) = m.order.pop_front() else {
                    break;
                };
                if let Some(gone) = m.windows.remove(&old) {
                    m.bytes -= 8 * gone.len();
                }
            }
        }
        Ok(w)
    }
}

impl std::fmt::Debug for WindowMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("WindowMemo")
            .field("windows", &m.windows.len())
            .field("bytes", &m.bytes)
            .field("sorts", &self.sorts.load(Ordering::Relaxed))
            .finish()
    }
}

/// Writes global batch `j` of pass `pass` of a `Bucketed` sampler: the
/// pass's first `m` positions of `perm` (a multiple of `b`) are cut into
/// windows of `k * b`, each window sorted by length (stably: ties keep
/// permutation order) and cut into batches of `b`; batch slot `j` is batch
/// `order(j)` of that list.
#[allow(clippy::too_many_arguments)]
pub(super) fn bucketed_fill(
    memo: &WindowMemo,
    pass: u64,
    perm: &FeistelPermutation,
    order: &FeistelPermutation,
    lengths: &LengthIndex,
    m: u64,
    (b, k): (u64, u64),
    j: u64,
    out: &mut [u64],
) -> Result<(), Error> {
    let outside = |what: &str, x: u64| Error::invalid(format!("bucketed {what} {x} out of range"));
    let g = order.apply(j).ok_or_else(|| outside("batch", j))?;
    let window = k.saturating_mul(b);
    let lo = (g / k) * window;
    let hi = lo.saturating_add(window).min(m);
    let sorted = memo.get_or_sort((pass, m, lo), || {
        let mut items = Vec::with_capacity((hi - lo) as usize);
        for p in lo..hi {
            let index = perm.apply(p).ok_or_else(|| outside("position", p))?;
            let len = lengths.get(index).ok_or_else(|| outside("record", index))?;
            items.push((len, index));
        }
        items.sort_by_key(|&(len, _)| len);
        Ok(items.into_iter().map(|(_, index)| index).collect())
    })?;
    let start = ((g % k) * b) as usize;
    let batch = sorted
        .get(start..start + out.len())
        .ok_or_else(|| outside("batch", g))?;
    out.copy_from_slice(batch);
    Ok(())
}

/// Prefix sums of the batch lengths of `TokenBudget` passes, memoised for
/// the few most recent passes (shared by a sampler's clones): entry `s` of
/// a pass's sums is the records its steps `0..s` draw, so record counts and
/// record positions within a pass are a lookup or a binary search instead
/// of a walk over the steps.
#[derive(Default)]
pub(super) struct PassPrefixes {
    inner: Mutex<VecDeque<(u64, Arc<[u64]>)>>,
    /// Passes whose sums were built (for tests of the memo).
    builds: AtomicU64,
}

impl PassPrefixes {
    /// Passes kept: the current one and the next (an epoch loader asks for
    /// the next epoch's total while the current one is delivered).
    const PASSES: usize = 4;

    /// The sums of pass `pass`, built by `build` unless memoised.
    pub(super) fn get_or_build(&self, pass: u64, build: impl FnOnce() -> Vec<u64>) -> Arc<[u64]> {
        let lock = || self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, sums)) = lock().iter().find(|(p, _)| *p == pass) {
            return Arc::clone(sums);
        }
        // Built outside the lock; two threads may race on one pass.
        self.builds.fetch_add(1, Ordering::Relaxed);
        let sums: Arc<[u64]> = build().into();
        let mut m = lock();
        if !m.iter().any(|(p, _)| *p == pass) {
            if m.len() == Self::PASSES {
                m.pop_front();
            }
            m.push_back((pass, Arc::clone(&sums)));
        }
        sums
    }

    /// Passes whose sums were built so far.
    pub(super) fn builds(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for PassPrefixes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("PassPrefixes")
            .field("passes", &m.iter().map(|(p, _)| *p).collect::<Vec<_>>())
            .field("builds", &self.builds())
            .finish()
    }
}

/// One length bucket of a token-budget plan.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// First position in `sorted`.
    start: u64,
    /// Records in the bucket.
    n: u64,
    /// Records per batch: as many as fit the budget at the bucket's
    /// longest length, at most the sampler's batch size.
    size: u64,
}

/// Token-budget batches: records sorted by length are cut into `buckets`
/// buckets of equal record counts; bucket `b` makes batches of
/// `size_b = min(batch_size, max_tokens / longest_b)` records, so a batch
/// padded to its longest record holds at most `max_tokens` tokens. The
/// number of batches per pass depends on the lengths only, never on the
/// seed: passes (and so `steps_per_epoch` and resume) are fixed.
pub(super) struct TokenPlan {
    /// Record ids sorted by `(length, id)`.
    sorted: Vec<u64>,
    buckets: Vec<Bucket>,
    /// `prefix[b]`: batches of the buckets before `b`; one entry more.
    prefix: Vec<u64>,
    /// Records in all the batches of a pass.
    records: u64,
}

impl std::fmt::Debug for TokenPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenPlan")
            .field("records", &self.sorted.len())
            .field("buckets", &self.buckets.len())
            .field("batches", &self.batches())
            .finish()
    }
}

impl TokenPlan {
    pub(super) fn new(
        lengths: &LengthIndex,
        max_tokens: u64,
        buckets: u32,
        batch_size: usize,
        drop_last: bool,
    ) -> Result<TokenPlan, Error> {
        if max_tokens == 0 || buckets == 0 {
            return Err(Error::invalid(format!(
                "token-budget sampling needs max_tokens and buckets of at least 1, \
                 got {max_tokens} and {buckets}"
            )));
        }
        let l = lengths.lengths();
        if let Some(i) = l.iter().position(|&x| u64::from(x) > max_tokens) {
            return Err(Error::invalid(format!(
                "record {i} holds {} tokens, more than the budget of {max_tokens} per batch",
                l[i]
            )));
        }
        let mut sorted: Vec<u64> = (0..l.len() as u64).collect();
        sorted.sort_unstable_by_key(|&i| (l[i as usize], i));
        let n = sorted.len() as u64;
        let nb = u64::from(buckets).min(n);
        let mut out = Vec::with_capacity(nb as usize);
        let mut prefix = Vec::with_capacity(nb as usize + 1);
        prefix.push(0u64);
        let mut records = 0u64;
        for b in 0..nb {
            let (start, end) = (b * n / nb, (b + 1) * n / nb);
            let longest = l[sorted[end as usize - 1] as usize];
            let size = (max_tokens / u64::from(longest)).min(batch_size as u64);
            let count = end - start;
            let batches = if drop_last {
                count / size
            } else {
                count.div_ceil(size)
            };
            records += if drop_last { batches * size } else { count };
            out.push(Bucket {
                start,
                n: count,
                size,
            });
            prefix.push(prefix[prefix.len() - 1] + batches);
        }
        Ok(TokenPlan {
            sorted,
            buckets: out,
            prefix,
            records,
        })
    }

    /// Records in all the batches of one pass (what a pass of a single
    /// rank draws).
    pub(super) fn records(&self) -> u64 {
        self.records
    }

    /// Batches in one pass (all ranks).
    pub(super) fn batches(&self) -> u64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Bucket and batch-within-bucket of batch `g` (below `batches()`).
    fn locate(&self, g: u64) -> (usize, u64) {
        let b = self.prefix.partition_point(|&p| p <= g) - 1;
        (b, g - self.prefix[b])
    }

    /// Records in batch `g`.
    pub(super) fn batch_len(&self, g: u64) -> u64 {
        let (b, i) = self.locate(g);
        let bucket = &self.buckets[b];
        bucket.size.min(bucket.n - i * bucket.size)
    }

    /// Writes batch `g` of pass `pass`: the bucket's records in a fresh
    /// per-pass permutation, cut into batches of the bucket's size.
    pub(super) fn fill(&self, seed: u64, pass: u64, g: u64, out: &mut [u64]) -> Result<(), Error> {
        let (b, i) = self.locate(g);
        let bucket = &self.buckets[b];
        let key = mix(mix(mix(seed, pass), BUCKET_TAG), b as u64);
        let perm = FeistelPermutation::new(bucket.n, key);
        for (t, o) in out.iter_mut().enumerate() {
            let p = i * bucket.size + t as u64;
            let q = perm.apply(p).ok_or_else(|| {
                Error::invalid(format!("token-budget position {p} outside bucket {b}"))
            })?;
            *o = self.sorted[(bucket.start + q) as usize];
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every batch of pass 0 of a `Bucketed` layout of `m` records, `b`
    /// per batch, `k` batches per window, drawn through `memo`.
    fn draw_all(memo: &WindowMemo, m: u64, (b, k): (u64, u64)) -> Vec<Vec<u64>> {
        let lengths: Vec<u32> = (0..m).map(|i| 1 + (mix(1, i) % 50) as u32).collect();
        let lengths = LengthIndex::from_lengths(lengths).unwrap();
        let perm = FeistelPermutation::new(m, 7);
        let order = batch_order(7, 0, m / b);
        (0..m / b)
            .map(|j| {
                let mut out = vec![0; b as usize];
                bucketed_fill(memo, 0, &perm, &order, &lengths, m, (b, k), j, &mut out).unwrap();
                out
            })
            .collect()
    }

    #[test]
    fn a_window_larger_than_the_bound_is_sorted_once() {
        // Windows of 4 × 4 ids (128 bytes) against a bound of 64 bytes: the
        // window was evicted right after its sort, so each of its batches
        // sorted it again.
        let memo = WindowMemo::with_cap(64);
        let one = draw_all(&memo, 16, (4, 4));
        assert_eq!(memo.sorts.load(Ordering::Relaxed), 1);
        // Two such windows, their batches interleaved by the shuffled
        // order: each still sorted once (room for two windows).
        let memo = WindowMemo::with_cap(64);
        let two = draw_all(&memo, 32, (4, 4));
        assert_eq!(memo.sorts.load(Ordering::Relaxed), 2);
        // The memo only saves work: the batches are those of an unbounded one.
        let big = WindowMemo::default();
        assert_eq!(draw_all(&big, 16, (4, 4)), one);
        assert_eq!(draw_all(&big, 32, (4, 4)), two);
        // More windows than the bound holds: the oldest go first.
        let memo = WindowMemo::with_cap(64);
        draw_all(&memo, 64, (4, 4));
        let m = memo.inner.lock().unwrap();
        assert!(
            m.windows.len() <= 2 && m.bytes <= 256,
            "{} {}",
            m.windows.len(),
            m.bytes
        );
    }
}
