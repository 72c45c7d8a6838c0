//! The timed gather loop: fresh IID batches, sampler time excluded, calls
//! repeated until their accumulated time reaches the minimum.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Uniform IID index batches with replacement, from a seeded stream.
pub struct Iid {
    rng: SmallRng,
    n: u64,
}

impl Iid {
    /// A stream over `0..n`.
    pub fn new(n: usize, seed: u64) -> Iid {
        Iid {
            rng: SmallRng::seed_from_u64(seed),
            n: n as u64,
        }
    }

    /// The next batch of `b` indices.
    pub fn batch(&mut self, b: usize) -> Vec<u64> {
        (0..b).map(|_| self.rng.random_range(0..self.n)).collect()
    }
}

/// What a timed gather loop measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct GatherStats {
    /// Timed calls.
    pub calls: u64,
    /// Accumulated time inside the calls.
    pub seconds: f64,
    /// Records returned.
    pub records: u64,
    /// Logical bytes returned.
    pub bytes: u64,
    /// 95th percentile of one call, milliseconds.
    pub p95_ms: f64,
}

impl GatherStats {
    /// Logical MiB per second.
    pub fn mib_s(&self) -> f64 {
        self.bytes as f64 / self.seconds / (1 << 20) as f64
    }

    /// Nanoseconds per record returned.
    pub fn ns_per_record(&self) -> f64 {
        self.seconds * 1e9 / self.records as f64
    }

    /// Thousands of records per second.
    pub fn krec_s(&self) -> f64 {
        self.records as f64 / self.seconds / 1e3
    }
}

/// The 95th percentile of `samples` (sorted in place).
pub fn p95(samples: &mut [Duration]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let k = ((samples.len() as f64 * 0.95).ceil() as usize).clamp(1, samples.len()) - 1;
    samples[k].as_secs_f64() * 1e3
}

/// Times `gather` on fresh IID batches of `batch` over `0..n` until `min`
/// has accumulated (three calls at least). `bytes` gives the logical bytes
/// of what `gather` returned, read from that output (as the Python peers
/// read `nbytes`): nothing else is touched between calls, so no contender
/// finds its caches or TLB emptied by the harness's own bookkeeping. What
/// `gather` returns is measured and dropped outside the timer.
pub fn time_gather<T>(
    n: usize,
    batch: usize,
    seed: u64,
    min: Duration,
    mut gather: impl FnMut(&[u64]) -> T,
    bytes: impl Fn(&T) -> usize,
) -> GatherStats {
    let mut iid = Iid::new(n, seed);
    let mut samples = Vec::new();
    let mut stats = GatherStats::default();
    let mut spent = Duration::ZERO;
    while spent < min || samples.len() < 3 {
        let idx = iid.batch(batch);
        let started = Instant::now();
        let out = gather(&idx);
        let took = started.elapsed();
        stats.bytes += bytes(&out) as u64;
        drop(out);
        spent += took;
        samples.push(took);
        stats.records += idx.len() as u64;
    }
    stats.calls = samples.len() as u64;
    stats.seconds = spent.as_secs_f64();
    stats.p95_ms = p95(&mut samples);
    stats
}

/// Runs `f` in rounds of `per_round` calls until `min` has passed; calls per second.
pub fn rate(min: Duration, per_round: u64, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    let mut calls = 0u64;
    while started.elapsed() < min {
        for _ in 0..per_round {
            f();
        }
        calls += per_round;
    }
    calls as f64 / started.elapsed().as_secs_f64()
}
