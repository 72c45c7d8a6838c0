//! [`Histogram`]: durations counted in fixed logarithmic buckets, four per
//! power of two (each about 19 % wide), for the recorder's percentiles.
//! Recording is a few instructions; two histograms subtract, so the
//! percentiles of a period are those of its own samples.

/// Buckets: values below 4 ns one each, then four per octave up to 2^45 ns
/// (almost ten hours); longer durations count in the last.
const BUCKETS: usize = 4 * 44;

/// Durations in nanoseconds, counted per bucket.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.total)
            .finish_non_exhaustive()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

/// The bucket of `ns`.
fn bucket(ns: u64) -> usize {
    if ns < 4 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize;
    let m = ((ns >> (e - 2)) & 3) as usize;
    (4 * (e - 1) + m).min(BUCKETS - 1)
}

/// The smallest value of bucket `i`.
fn lower(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let (e, m) = (i / 4 + 1, (i % 4) as u64);
    (4 + m) << (e - 2)
}

impl Histogram {
    /// Counts one duration of `ns` nanoseconds.
    pub(crate) fn record(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.total += 1;
    }

    /// How many durations were counted.
    pub(crate) fn count(&self) -> u64 {
        self.total
    }

    /// Adds `other`'s counts.
    pub(crate) fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
    }

    /// The counts since `earlier`, an earlier state of this histogram.
    pub(crate) fn since(&self, earlier: &Histogram) -> Histogram {
        let mut out = self.clone();
        for (a, b) in out.counts.iter_mut().zip(earlier.counts.iter()) {
            *a = a.saturating_sub(*b);
        }
        out.total = out.counts.iter().sum();
        out
    }

    /// The `q` quantile (0 to 1) in nanoseconds, the middle of its bucket
    /// (within about 10 % of the true value); 0 when empty.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = (lower(i), lower(i + 1));
                return lo + (hi - lo) / 2;
            }
        }
        lower(BUCKETS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_hold_their_values() {
        for i in 0..BUCKETS - 1 {
            assert!(lower(i) < lower(i + 1), "{i}");
            assert_eq!(bucket(lower(i)), i);
            assert_eq!(bucket(lower(i + 1) - 1), i);
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_within_a_bucket_and_periods_subtract() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), 0);
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        for (q, want) in [(0.5, 500_000.0), (0.95, 950_000.0), (0.99, 990_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got / want - 1.0).abs() < 0.15, "{q}: {got}");
        }
        let earlier = h.clone();
        for _ in 0..10 {
            h.record(7);
        }
        let period = h.since(&earlier);
        assert_eq!(period.count(), 10);
        assert_eq!(period.quantile(0.99), 7);
        let mut sum = earlier.clone();
        sum.merge(&period);
        assert_eq!(sum, h);
    }
}
