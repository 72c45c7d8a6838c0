//! How random a pass's order is: the figures that say what
//! [`SamplerMode::Windowed`](super::SamplerMode::Windowed) gives up against
//! a full permutation.

use super::Sampler;
use crate::error::Error;

/// How random one pass of a sampler is, measured on the records it draws.
///
/// Positions are counted over the pass's draws in order (`t = 0, 1, …`);
/// `n` is the sampler's [`len`](Sampler::len); a "run" is an aligned range
/// `k·run .. (k+1)·run` of consecutive records of the store, the reach of
/// one long read. [`OrderStats::uniform`] gives what a uniformly random
/// permutation scores; `Sequential` passes score the other extreme
/// (displacement 0, correlation 1, about `run / B` runs per batch of `B`).
///
/// ```
/// use loaderx_core::{OrderStats, Sampler, SamplerMode};
///
/// let n = 1 << 16;
/// let cyclic = Sampler::new(n, 256, SamplerMode::Cyclic, 1)?;
/// let windowed = Sampler::new(n, 256, SamplerMode::Windowed { block: 256, window: 16 }, 1)?;
/// let full = OrderStats::of_pass(&cyclic, 0, 256)?;
/// let win = OrderStats::of_pass(&windowed, 0, 256)?;
/// // Blocks go anywhere in the pass: records move as far as in a full shuffle...
/// assert!((full.displacement - 1.0 / 3.0).abs() < 0.01);
/// assert!((win.displacement - 1.0 / 3.0).abs() < 0.02);
/// // ...but a batch draws from `window` runs of 256 records, a shuffled one
/// // from about 160 of the 256.
/// assert!(full.runs_per_batch > 150.0);
/// assert!(win.runs_per_batch <= 16.0);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct OrderStats {
    /// Records drawn in the pass.
    pub records: u64,
    /// Mean `|t − record| / n` over the pass: how far records move from
    /// their place in the store. A uniform permutation: ≈ 1/3.
    pub displacement: f64,
    /// Pearson correlation of position and record. A uniform permutation:
    /// ≈ 0; the store's order: 1.
    pub correlation: f64,
    /// Of all pairs of records drawn in one batch, the share that lie in
    /// the same run. A uniform permutation: ≈ `run / n`; it is the excess
    /// over that which correlates a batch's records wherever neighbours in
    /// the store are alike (written in class order, from one document or
    /// one source).
    pub same_run_pairs: f64,
    /// Distinct runs a batch draws from, averaged over the pass's batches.
    /// A uniform permutation: ≈ `B` for batches of `B` when `B × run ≪ n`.
    pub runs_per_batch: f64,
}

impl OrderStats {
    /// Measures the steps of pass `pass` of `sampler`, with runs of `run`
    /// records. O(batch) memory, O(batch) time per step.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for
    /// a `run` of 0 or a sharded sampler (measure the unsharded one: ranks
    /// share one global order).
    pub fn of_pass(sampler: &Sampler, pass: u64, run: u64) -> Result<OrderStats, Error> {
        if run == 0 {
            return Err(Error::invalid(
                "order statistics need runs of at least 1 record",
            ));
        }
        if sampler.rank().1 != 1 {
            return Err(Error::invalid(format!(
                "order statistics measure one global order; this sampler is rank {} of {}",
                sampler.rank().0,
                sampler.rank().1
            )));
        }
        let first = sampler.first_step_of(pass).unwrap_or(u64::MAX);
        let spe = sampler.steps_per_epoch();
        let n = sampler.len() as f64;
        let mut acc = Accumulator::default();
        let mut batch = Vec::with_capacity(sampler.batch_size());
        let mut runs = Vec::with_capacity(sampler.batch_size());
        for step in first..first.saturating_add(spe) {
            if sampler.epoch_of(step).0 != pass {
                break;
            }
            batch.resize(sampler.batch_len(step), 0);
            sampler.fill(step, &mut batch)?;
            acc.batch(&batch, run, &mut runs);
        }
        Ok(acc.finish(n))
    }

    /// What a uniformly random permutation of `len` records, cut into
    /// batches of `batch`, scores in expectation (`records` is `len`).
    pub fn uniform(len: u64, batch: usize, run: u64) -> OrderStats {
        let n = len.max(1) as f64;
        let run = run.clamp(1, len.max(1));
        let (whole, tail) = (len / run, len % run);
        let pairs = |c: u64| c as f64 * (c as f64 - 1.0);
        let same = if len < 2 {
            0.0
        } else {
            (whole as f64 * pairs(run) + pairs(tail)) / (n * (n - 1.0))
        };
        // A run of c records is missed by a batch of b with probability
        // prod_k (n − c − k) / (n − k).
        let b = batch.min(len as usize) as u64;
        let missed = |c: u64| -> f64 {
            (0..b)
                .map(|k| ((len - k).saturating_sub(c)) as f64 / (len - k) as f64)
                .product()
        };
        let mut runs = whole as f64 * (1.0 - missed(run));
        if tail > 0 {
            runs += 1.0 - missed(tail);
        }
        OrderStats {
            records: len,
            displacement: (n * n - 1.0) / (3.0 * n * n),
            correlation: 0.0,
            same_run_pairs: same,
            runs_per_batch: runs,
        }
    }
}

/// Running sums over a pass.
#[derive(Default)]
struct Accumulator {
    t: u64,
    moved: f64,
    sum_t: f64,
    sum_i: f64,
    sum_tt: f64,
    sum_ii: f64,
    sum_ti: f64,
    same: f64,
    pairs: f64,
    runs: f64,
    batches: u64,
}

impl Accumulator {
    fn batch(&mut self, batch: &[u64], run: u64, runs: &mut Vec<u64>) {
        for &i in batch {
            let (t, i) = (self.t as f64, i as f64);
            self.moved += (t - i).abs();
            self.sum_t += t;
            self.sum_i += i;
            self.sum_tt += t * t;
            self.sum_ii += i * i;
            self.sum_ti += t * i;
            self.t += 1;
        }
        runs.clear();
        runs.extend(batch.iter().map(|&i| i / run));
        runs.sort_unstable();
        let mut distinct = 0u64;
        for group in runs.chunk_by(|a, b| a == b) {
            let c = group.len() as f64;
            self.same += c * (c - 1.0) / 2.0;
            distinct += 1;
        }
        let b = batch.len() as f64;
        self.pairs += b * (b - 1.0) / 2.0;
        self.runs += distinct as f64;
        self.batches += 1;
    }

    fn finish(&self, n: f64) -> OrderStats {
        let m = self.t as f64;
        let cov = self.sum_ti / m - (self.sum_t / m) * (self.sum_i / m);
        let var_t = self.sum_tt / m - (self.sum_t / m).powi(2);
        let var_i = self.sum_ii / m - (self.sum_i / m).powi(2);
        let correlation = if var_t > 0.0 && var_i > 0.0 {
            cov / (var_t * var_i).sqrt()
        } else {
            0.0
        };
        OrderStats {
            records: self.t,
            displacement: if m > 0.0 { self.moved / m / n } else { 0.0 },
            correlation,
            same_run_pairs: if self.pairs > 0.0 {
                self.same / self.pairs
            } else {
                0.0
            },
            runs_per_batch: if self.batches > 0 {
                self.runs / self.batches as f64
            } else {
                0.0
            },
        }
    }
}
