//! Length-aware batch formation: sorted windows (`Bucketed`) and length
//! buckets under a token budget (`TokenBudget`).

use std::collections::{HashMap, VecDeque};
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
/// repeating it. Bounded to [`WindowMemo::BYTES`] of record ids (the
/// oldest windows go first); batches stay a pure function of the step,
/// the memo only saves work.
#[derive(Default)]
pub(super) struct WindowMemo {
    inner: Mutex<MemoInner>,
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
    /// At most this many bytes of record ids are kept (8 M records).
    pub(super) const BYTES: usize = 64 << 20;

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
        let w: Arc<[u64]> = sort()?.into();
        let mut m = lock();
        if !m.windows.contains_key(&key) {
            m.bytes += 8 * w.len();
            m.windows.insert(key, Arc::clone(&w));
            m.order.push_back(key);
            while m.bytes > Self::BYTES {
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
        })
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
