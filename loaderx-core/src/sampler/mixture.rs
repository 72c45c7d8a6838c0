//! Weighted mixtures: which source each record position of a run draws
//! from, and which of that source's records, as a pure function of the
//! position.
//!
//! The weights become whole numbers of records per *period* `W` (their sum).
//! One period's order of sources is laid out once by Balinski and Young's
//! quota method: position `t` goes to the source with the highest
//! `w / (drawn + 1)` among those that would not exceed their upper quota
//! `ceil((t + 1) · w / W)`. That method keeps every source within its quota
//! at every prefix — after `t` records source `s` has drawn
//! `floor(t·w_s/W)` or `ceil(t·w_s/W)` of them — and the period repeats
//! exactly, so the property holds for the whole run. Position `t` is then
//! `table[t % W]`, and that source's `(t / W) · w_s + ordinal[t % W]`-th
//! record: O(1), no state.
//!
//! A source's `k`-th record is record `k % n` of its pass `k / n`: that
//! pass's permutation of the source (`Cyclic`, keyed by the seed, the
//! source and the pass) or the source's order (`Sequential`). A source thus
//! never repeats a record within one of its passes, whatever the weights.

use super::SamplerMode;
use super::feistel::FeistelPermutation;
use super::rng;
use crate::error::Error;

/// Records per period when weights are not small whole numbers: each
/// source's share is then exact to `1 / QUANTUM`.
const QUANTUM: u64 = 1 << 16;
/// The largest period kept from whole-number weights as they are.
const MAX_PERIOD: u64 = 1 << 20;

/// How long a mixture's pass (its epoch) is. The loader is endless unless
/// it is given [`epochs(n)`](crate::DataLoaderBuilder::epochs); then it
/// ends after `n` of these passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MixtureStop {
    /// As many records as the sources hold together.
    #[default]
    Total,
    /// Until the first source has drawn every one of its records: with
    /// `epochs(1)`, no record of any source comes twice.
    FirstExhausted,
    /// Until every source has drawn every one of its records at least
    /// once (the sources that finish early start their next pass).
    AllExhausted,
}

/// The record allocation of a weighted mixture of sources laid end to end
/// in one index space (source `s` holds indices `starts()[s] ..
/// starts()[s + 1]`): which source and record every position of a run
/// draws. A [`Sampler`](crate::Sampler) built with
/// [`SamplerBuilder::mixture`](crate::SamplerBuilder::mixture) draws its
/// positions through it; the loader's
/// [`mixture`](crate::DataLoaderBuilder::mixture) builds both from
/// sources of streams. See the [module docs](crate::guide) and the
/// [`Sampler` docs](crate::Sampler#weighted-mixtures).
///
/// ```
/// use loaderx_core::{Mixture, MixtureStop, SamplerMode};
///
/// // web 60 %, code 25 %, books 15 % of every run's records.
/// let m = Mixture::new(
///     &[(1000, 60.0), (500, 25.0), (200, 15.0)],
///     &[SamplerMode::Cyclic; 3],
///     MixtureStop::FirstExhausted,
/// )?;
/// assert_eq!(m.period_weights(), [12, 5, 3]); // a period of 20 records
/// let mut counts = [0u64; 3];
/// for t in 0..1000 {
///     counts[m.source_at(t)] += 1;
/// }
/// assert_eq!(counts, [600, 250, 150]);
/// // Books (200 records at 15 %) run out first, within 1334 records.
/// assert!((1320..=1334).contains(&m.pass_len()));
/// assert_eq!(m.drawn_before(2, u128::from(m.pass_len())), Some(200));
/// assert_eq!(m.drawn_before(3, 0), None); // no source 3
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mixture {
    lens: Vec<u64>,
    starts: Vec<u64>,
    modes: Vec<SamplerMode>,
    /// Records of each source per period.
    weights: Vec<u64>,
    /// The period's sources, position by position.
    table: Vec<u32>,
    /// The records the position's source drew before it in the period.
    ordinal: Vec<u32>,
    /// Every source's positions in the period, source after source
    /// (`weights[s]` each, from `occ_start[s]`).
    occurrences: Vec<u32>,
    occ_start: Vec<usize>,
    stop: MixtureStop,
    pass_len: u64,
}

impl Mixture {
    /// The mixture of sources of `(records, weight)`, each drawn in its
    /// `modes` entry (`Cyclic`: a fresh permutation per pass of the source;
    /// `Sequential`: in order), passes as `stop` says. The sampler drawing
    /// through it keys the sources' permutations with its seed.
    ///
    /// Weights are relative (any positive finite scale, subnormal to
    /// `f64::MAX`). Whole-number weights summing to at most 2^20 are a
    /// period of that many records, exact; any other weights are rounded
    /// to shares of 2^16 (largest remainder, every source at least one),
    /// so a proportion is exact to 1/65536. Weights whose sum overflows
    /// `f64` are divided by the largest first, so their proportions are
    /// kept.
    ///
    /// Building the period's order costs O(period · log sources), at most
    /// about 2^20 · 16 steps: even 65536 sources build in well under a
    /// second.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// for no source, more than 65536 sources, a source of no record, a
    /// weight that is not finite and positive, a mode other than
    /// `Sequential` or `Cyclic`, `modes` not one per source, more than 2^64
    /// records in all, or a pass longer than 2^64 records.
    pub fn new(
        sources: &[(u64, f64)],
        modes: &[SamplerMode],
        stop: MixtureStop,
    ) -> Result<Mixture, Error> {
        if sources.is_empty() || sources.len() as u64 > QUANTUM {
            return Err(Error::invalid(format!(
                "a mixture needs 1 to {QUANTUM} sources, got {}",
                sources.len()
            )));
        }
        if modes.len() != sources.len() {
            return Err(Error::invalid(format!(
                "{} sampler modes for {} mixture sources",
                modes.len(),
                sources.len()
            )));
        }
        for (s, (&(len, w), mode)) in sources.iter().zip(modes).enumerate() {
            if len == 0 {
                return Err(Error::invalid(format!(
                    "mixture source {s} holds no record"
                )));
            }
            if !(w.is_finite() && w > 0.0) {
                return Err(Error::invalid(format!(
                    "mixture source {s} has weight {w}; weights must be finite and positive"
                )));
            }
            if !matches!(mode, SamplerMode::Sequential | SamplerMode::Cyclic) {
                return Err(Error::invalid(format!(
                    "mixture source {s} is sampled {mode:?}; a source is Sequential or Cyclic"
                )));
            }
        }
        let lens: Vec<u64> = sources.iter().map(|s| s.0).collect();
        let mut starts = Vec::with_capacity(lens.len() + 1);
        let mut total = 0u64;
        starts.push(0);
        for &n in &lens {
            total = total.checked_add(n).ok_or_else(|| {
                Error::invalid("the mixture's sources hold more than 2^64 records")
            })?;
            starts.push(total);
        }
        let weights = period_weights(sources.iter().map(|s| s.1));
        let (table, ordinal) = quota_order(&weights);
        let mut occ_start = Vec::with_capacity(weights.len() + 1);
        let mut at = 0usize;
        for &w in &weights {
            occ_start.push(at);
            at += w as usize;
        }
        occ_start.push(at);
        let mut occurrences = vec![0u32; table.len()];
        let mut fill = occ_start.clone();
        for (t, &s) in table.iter().enumerate() {
            occurrences[fill[s as usize]] = t as u32;
            fill[s as usize] += 1;
        }
        let mut m = Mixture {
            lens,
            starts,
            modes: modes.to_vec(),
            weights,
            table,
            ordinal,
            occurrences,
            occ_start,
            stop,
            pass_len: 0,
        };
        m.pass_len = match stop {
            MixtureStop::Total => Some(total),
            MixtureStop::FirstExhausted => (0..m.lens.len())
                .map(|s| m.end_of_first_pass(s))
                .min()
                .flatten(),
            MixtureStop::AllExhausted => (0..m.lens.len())
                .map(|s| m.end_of_first_pass(s))
                .try_fold(0u64, |a, b| b.map(|b| a.max(b))),
        }
        .ok_or_else(|| Error::invalid("a mixture pass longer than 2^64 records"))?;
        Ok(m)
    }

    /// The position after the one where source `s` draws its last record
    /// of its first pass: the records a run draws until `s` is exhausted.
    fn end_of_first_pass(&self, s: usize) -> Option<u64> {
        let k = self.lens[s] - 1; // 0-based: the n-th record
        let w = self.weights[s];
        let (periods, r) = (k / w, k % w);
        let within = u64::from(self.occurrences[self.occ_start[s] + r as usize]);
        periods
            .checked_mul(self.period())?
            .checked_add(within)?
            .checked_add(1)
    }

    /// Number of sources.
    pub fn sources(&self) -> usize {
        self.lens.len()
    }

    /// Records of every source.
    pub fn lens(&self) -> &[u64] {
        &self.lens
    }

    /// The first index of every source in the mixture's index space, then
    /// the total.
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// Records all sources hold together: the size of the index space.
    pub fn total(&self) -> u64 {
        self.starts[self.lens.len()]
    }

    /// Records per period, and of each source in it: the weights as whole
    /// numbers.
    pub fn period(&self) -> u64 {
        self.table.len() as u64
    }

    /// Records of each source per [`period`](Self::period).
    pub fn period_weights(&self) -> &[u64] {
        &self.weights
    }

    /// The stop rule.
    pub fn stop(&self) -> MixtureStop {
        self.stop
    }

    /// Records per pass of the mixture, as the [stop rule](MixtureStop) sets.
    pub fn pass_len(&self) -> u64 {
        self.pass_len
    }

    /// The source of record index `index` of the mixture's index space
    /// (`None` past its end).
    pub fn source_of(&self, index: u64) -> Option<usize> {
        (index < self.total()).then(|| self.starts.partition_point(|&s| s <= index) - 1)
    }

    /// The source position `t` of the run draws from.
    pub fn source_at(&self, t: u128) -> usize {
        self.table[(t % self.table.len() as u128) as usize] as usize
    }

    /// Records source `s` has drawn in positions `0..t` of the run; `None`
    /// when there is no source `s` (`s >= sources()`).
    pub fn drawn_before(&self, s: usize, t: u128) -> Option<u128> {
        let (from, to) = (
            *self.occ_start.get(s)?,
            *self.occ_start.get(s.checked_add(1)?)?,
        );
        let w = self.table.len() as u128;
        let (periods, r) = (t / w, (t % w) as usize);
        let within = self.occurrences[from..to].partition_point(|&p| (p as usize) < r);
        Some(periods * u128::from(self.weights[s]) + within as u128)
    }

    /// The record index (in the mixture's index space) position `t` of the
    /// run draws, and its source, the sources' permutations keyed by
    /// `seed`. `cache` keeps the last permutation of every source between
    /// calls (reused while the source's pass stays the same).
    pub(crate) fn index_at(&self, t: u128, seed: u64, cache: &mut PermCache) -> (usize, u64) {
        let w = self.table.len() as u128;
        let j = (t % w) as usize;
        let s = self.table[j] as usize;
        let ord = (t / w) * u128::from(self.weights[s]) + u128::from(self.ordinal[j]);
        let n = u128::from(self.lens[s]);
        let (pass, r) = ((ord / n) as u64, (ord % n) as u64);
        let local = match self.modes[s] {
            SamplerMode::Sequential => r,
            _ => {
                let slot = &mut cache.perms[s];
                if slot.as_ref().is_none_or(|(p, _)| *p != pass) {
                    let key = rng::mix(rng::mix(seed, s as u64), pass);
                    *slot = Some((pass, FeistelPermutation::new(self.lens[s], key)));
                }
                // r < lens[s]: the permutation's domain.
                slot.as_ref().and_then(|(_, p)| p.apply(r)).unwrap_or(r)
            }
        };
        (s, self.starts[s] + local)
    }

    /// An empty permutation cache for [`Self::index_at`].
    pub(crate) fn cache(&self) -> PermCache {
        PermCache {
            perms: vec![None; self.lens.len()],
        }
    }
}

/// The last permutation of every source of a [`Mixture`], by pass.
pub(crate) struct PermCache {
    perms: Vec<Option<(u64, FeistelPermutation)>>,
}

/// Whole records per period for `weights`: the weights themselves when
/// they are whole numbers summing to at most [`MAX_PERIOD`], else shares
/// of [`QUANTUM`] by largest remainder, every source at least one.
fn period_weights(weights: impl Iterator<Item = f64> + Clone) -> Vec<u64> {
    let whole = weights
        .clone()
        .all(|w| w.fract() == 0.0 && w <= MAX_PERIOD as f64);
    if whole {
        let ints: Vec<u64> = weights.clone().map(|w| w as u64).collect();
        if ints.iter().sum::<u64>() <= MAX_PERIOD {
            // Reduced by their common divisor: the shortest exact period.
            let g = ints.iter().fold(0, |a, &b| gcd(a, b)).max(1);
            return ints.into_iter().map(|w| w / g).collect();
        }
    }
    let mut sum: f64 = weights.clone().sum();
    let mut scale = 1.0;
    if !sum.is_finite() {
        // Finite weights whose sum overflows (near `f64::MAX`): divided by
        // the largest first, each is at most 1 and they sum to at most
        // 65536. Sums that fit are used as they are, so the shares of
        // every other input are the ones they always were.
        scale = weights.clone().fold(0.0, f64::max);
        sum = weights.clone().map(|w| w / scale).sum();
    }
    let ideal: Vec<f64> = weights.map(|w| w / scale / sum * QUANTUM as f64).collect();
    let mut out: Vec<u64> = ideal.iter().map(|&x| (x.floor() as u64).max(1)).collect();
    let mut assigned: u64 = out.iter().sum();
    // Hand out what is left by the largest remainders (stable: the first
    // source wins a tie), or take back from the largest shares what the
    // minimum of one added.
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (ideal[a] - out[a] as f64, ideal[b] - out[b] as f64);
        rb.total_cmp(&ra)
    });
    let mut i = 0;
    while assigned < QUANTUM {
        out[order[i % order.len()]] += 1;
        assigned += 1;
        i += 1;
    }
    // The largest share first, the last source of equal ones: a heap, as
    // up to one record per source may have to be taken back.
    let mut big: std::collections::BinaryHeap<(u64, usize)> = out
        .iter()
        .enumerate()
        .filter(|&(_, &w)| w > 1)
        .map(|(s, &w)| (w, s))
        .collect();
    while assigned > QUANTUM {
        let Some((w, s)) = big.pop() else {
            break;
        };
        out[s] = w - 1;
        assigned -= 1;
        if w - 1 > 1 {
            big.push((w - 1, s));
        }
    }
    out
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// One period of sources in the quota method's order, and each
/// position's ordinal within its source.
///
/// Position `t` goes to the source of highest `w / (drawn + 1)` (compared
/// exactly; the lowest index wins a tie) among the *eligible* ones, those
/// with `drawn + 1 <= ceil((t + 1) · w / W)`. A source stays eligible from
/// position `floor(drawn · W / w)` until it draws, and its priority only
/// changes when it draws, so two heaps find it in O(log sources) a
/// position: the eligible sources by priority, the others by the position
/// they become eligible at. The order is the one a scan of every source at
/// every position gives (the tests compare the two).
fn quota_order(weights: &[u64]) -> (Vec<u32>, Vec<u32>) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let period: u64 = weights.iter().sum();
    let mut table = Vec::with_capacity(period as usize);
    let mut ordinal = Vec::with_capacity(period as usize);
    let mut drawn = vec![0u64; weights.len()];
    // With nothing drawn every source is eligible at position 0.
    let mut eligible: BinaryHeap<Due> = weights
        .iter()
        .enumerate()
        .map(|(source, &weight)| Due {
            weight,
            drawn: 0,
            source,
        })
        .collect();
    // `(position it becomes eligible at, source)`, earliest first.
    let mut waiting: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    for t in 0..period {
        while let Some(&Reverse((at, s))) = waiting.peek() {
            if at > t {
                break;
            }
            waiting.pop();
            eligible.push(Due {
                weight: weights[s],
                drawn: drawn[s],
                source: s,
            });
        }
        // The quota method always has an eligible source (Balinski and
        // Young); the fallback, the next source to become eligible, keeps
        // this total and is never reached. Some source has records left
        // in the period (fewer than `period` are drawn), so one of the two
        // heaps holds it.
        let Some(s) = eligible
            .pop()
            .map(|d| d.source)
            .or_else(|| waiting.pop().map(|Reverse((_, s))| s))
        else {
            break;
        };
        table.push(s as u32);
        ordinal.push(drawn[s] as u32);
        drawn[s] += 1;
        let w = weights[s];
        if drawn[s] < w {
            // The first `t` with `drawn · W < (t + 1) · w`.
            let at = u128::from(drawn[s]) * u128::from(period) / u128::from(w);
            waiting.push(Reverse((at as u64, s)));
        }
    }
    (table, ordinal)
}

/// An eligible source in [`quota_order`]'s heap: ordered by `w / (drawn +
/// 1)`, exactly, then by the lower index (the greatest is drawn next).
#[derive(Debug, Clone, Copy)]
struct Due {
    weight: u64,
    drawn: u64,
    source: usize,
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let mine = u128::from(self.weight) * u128::from(other.drawn + 1);
        let theirs = u128::from(other.weight) * u128::from(self.drawn + 1);
        mine.cmp(&theirs)
            .then_with(|| other.source.cmp(&self.source))
    }
}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Due {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_prefix_keeps_every_source_within_its_quota(
            weights in proptest::collection::vec(1u64..40, 1..6),
        ) {
            let (table, _) = quota_order(&weights);
            let period: u64 = weights.iter().sum();
            let mut drawn = vec![0u64; weights.len()];
            for (t, &s) in table.iter().enumerate() {
                drawn[s as usize] += 1;
                let t = t as u64 + 1;
                for (s, &w) in weights.iter().enumerate() {
                    // floor(t·w/W) <= drawn <= ceil(t·w/W)
                    prop_assert!(drawn[s] * period >= t * w - (t * w) % period, "lower quota");
                    prop_assert!(drawn[s] <= (t * w).div_ceil(period), "upper quota");
                }
            }
            prop_assert_eq!(drawn, weights);
        }
    }

    /// The quota order as it was first written: every source scanned at
    /// every position, O(period · sources). The reference the heap version
    /// must match position for position (a seed's draws depend on it).
    fn quota_order_by_scan(weights: &[u64]) -> (Vec<u32>, Vec<u32>) {
        let period: u64 = weights.iter().sum();
        let mut table = Vec::with_capacity(period as usize);
        let mut ordinal = Vec::with_capacity(period as usize);
        let mut drawn = vec![0u64; weights.len()];
        for t in 0..period {
            let mut best: Option<usize> = None;
            for (s, &w) in weights.iter().enumerate() {
                let quota = ((t + 1) * w).div_ceil(period);
                if drawn[s] + 1 > quota {
                    continue;
                }
                let better = best.is_none_or(|b| {
                    u128::from(w) * u128::from(drawn[b] + 1)
                        > u128::from(weights[b]) * u128::from(drawn[s] + 1)
                });
                if better {
                    best = Some(s);
                }
            }
            let s = best.unwrap_or(0);
            table.push(s as u32);
            ordinal.push(drawn[s] as u32);
            drawn[s] += 1;
        }
        (table, ordinal)
    }

    /// `period_weights`' take-back as first written (a scan per record).
    fn take_back_by_scan(mut out: Vec<u64>) -> Vec<u64> {
        let mut assigned: u64 = out.iter().sum();
        while assigned > QUANTUM {
            let Some(big) = (0..out.len())
                .filter(|&s| out[s] > 1)
                .max_by_key(|&s| out[s])
            else {
                break;
            };
            out[big] -= 1;
            assigned -= 1;
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_heap_quota_order_is_the_scan_s(
            weights in prop_oneof![
                proptest::collection::vec(1u64..40, 1..12),
                // Many equal weights: ties everywhere.
                (1u64..4, 1usize..60).prop_map(|(w, n)| vec![w; n]),
                proptest::collection::vec(1u64..2000, 1..40),
                proptest::collection::vec(prop_oneof![Just(1u64), 1u64..5, 100u64..300], 1..200),
            ],
        ) {
            prop_assert_eq!(quota_order(&weights), quota_order_by_scan(&weights));
        }

        #[test]
        fn the_heap_take_back_is_the_scan_s(
            weights in proptest::collection::vec(
                prop_oneof![1e-12f64..1e-3, 0.5f64..2.0, 1e3f64..1e9], 1..300),
        ) {
            // The shares before any take-back, as `period_weights` has them.
            let sum: f64 = weights.iter().sum();
            let floors: Vec<u64> = weights
                .iter()
                .map(|&w| ((w / sum * QUANTUM as f64).floor() as u64).max(1))
                .collect();
            let got = period_weights(weights.iter().copied());
            prop_assert_eq!(got.iter().sum::<u64>(), QUANTUM);
            if floors.iter().sum::<u64>() > QUANTUM {
                prop_assert_eq!(got, take_back_by_scan(floors));
            }
        }
    }

    #[test]
    fn the_documented_most_sources_build_in_seconds() {
        // Scanning every source at every position took minutes here: 65536
        // sources times a period of 557056 positions.
        let n = 65_536usize;
        let sources: Vec<(u64, f64)> = (0..n).map(|s| (3, (s % 16 + 1) as f64)).collect();
        let m = Mixture::new(&sources, &vec![SamplerMode::Cyclic; n], MixtureStop::Total).unwrap();
        assert_eq!(m.period(), 557_056);
        assert_eq!(m.drawn_before(n - 1, u128::from(m.period())), Some(16));
        // One huge weight and 65535 tiny ones: a record taken back from
        // the huge share for each of the others.
        let mut sources = vec![(1u64, 1.0); n];
        sources[0] = (1, 1e9);
        let m = Mixture::new(&sources, &vec![SamplerMode::Cyclic; n], MixtureStop::Total).unwrap();
        assert_eq!(m.period_weights()[0], 1);
        assert!(m.period_weights().iter().all(|&w| w == 1));
        let m = Mixture::new(
            &sources[..n / 2],
            &vec![SamplerMode::Cyclic; n / 2],
            MixtureStop::Total,
        )
        .unwrap();
        assert_eq!(m.period_weights()[0], QUANTUM - (n / 2 - 1) as u64);
    }

    #[test]
    fn weights_near_the_largest_float_keep_their_proportions() {
        // Their sum overflowed to infinity, every share became 0 and each
        // source got an equal share.
        let w = period_weights([f64::MAX, f64::MAX / 2.0, f64::MAX / 4.0].into_iter());
        assert_eq!(w.iter().sum::<u64>(), QUANTUM);
        assert_eq!(w, [37449, 18725, 9362]);
        let w = period_weights([f64::MAX, f64::MAX].into_iter());
        assert_eq!(w, [QUANTUM / 2, QUANTUM / 2]);
        let w = period_weights([f64::MAX, 1.0].into_iter());
        assert_eq!(w, [QUANTUM - 1, 1]);
        // Subnormal weights are proportions like any other.
        let tiny = f64::from_bits(1); // 2^-1074, the least subnormal
        let w = period_weights([tiny, 3.0 * tiny].into_iter());
        assert_eq!(w, [QUANTUM / 4, 3 * QUANTUM / 4]);
        let w = period_weights([tiny, f64::MAX].into_iter());
        assert_eq!(w, [1, QUANTUM - 1]);
        // Through the constructor, and what it refuses.
        let modes = [SamplerMode::Cyclic; 2];
        let m = Mixture::new(
            &[(9, f64::MAX), (9, f64::MAX / 3.0)],
            &modes,
            MixtureStop::Total,
        )
        .unwrap();
        assert_eq!(m.period_weights(), [49152, 16384]);
        for bad in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -1.0,
            -0.0,
            0.0,
            -tiny,
        ] {
            let e = Mixture::new(&[(9, 1.0), (9, bad)], &modes, MixtureStop::Total).unwrap_err();
            assert!(
                matches!(e.kind(), crate::ErrorKind::InvalidArgument { .. }),
                "{bad}: {e}"
            );
            assert!(e.to_string().contains("source 1"), "{e}");
        }
    }

    #[test]
    fn drawn_before_a_source_past_the_last_is_none() {
        let m = Mixture::new(
            &[(10, 2.0), (10, 1.0)],
            &[SamplerMode::Cyclic; 2],
            MixtureStop::Total,
        )
        .unwrap();
        assert_eq!(m.drawn_before(0, 3), Some(2));
        assert_eq!(m.drawn_before(1, 3), Some(1));
        assert_eq!(m.drawn_before(2, 3), None);
        assert_eq!(m.drawn_before(usize::MAX, u128::MAX), None);
        assert_eq!(m.drawn_before(1, u128::MAX), Some(u128::MAX / 3));
    }

    #[test]
    fn fractional_weights_become_shares_of_the_quantum() {
        let w = period_weights([0.6, 0.25, 0.15].into_iter());
        assert_eq!(w.iter().sum::<u64>(), QUANTUM);
        assert!((w[0] as f64 / QUANTUM as f64 - 0.6).abs() < 1.0 / QUANTUM as f64);
        // Whole numbers are kept, reduced.
        assert_eq!(period_weights([6.0, 3.0, 9.0].into_iter()), [2, 1, 3]);
        // A tiny weight still gets a record per period.
        let w = period_weights([1.0, 1e-9].into_iter());
        assert_eq!(w[1], 1);
        assert_eq!(w.iter().sum::<u64>(), QUANTUM);
    }
}
