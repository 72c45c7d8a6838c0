//! Batch index sampling: every batch is a pure function of `(seed, step)`.
//!
//! Three modes, as in Python loaderx:
//!
//! - [`SamplerMode::Sequential`]: records in order. With `drop_last(true)`
//!   (the default) it is a sliding window over the circular index space, as
//!   in Python loaderx: step `k` of a single rank reads `k*B .. k*B + B`
//!   (mod `len`). With `drop_last(false)` every pass starts at record 0.
//! - [`SamplerMode::Iid`]: uniform with replacement, unbiased (Lemire's
//!   multiply-shift with rejection), from a counter-based generator keyed by
//!   `(seed, rank, step)`.
//! - [`SamplerMode::Cyclic`]: without replacement. Pass `p` is a fresh
//!   pseudo-random permutation of `0..len` computed statelessly by a keyed
//!   Feistel network with cycle-walking, so nothing of dataset size is ever
//!   materialised and any step is O(batch) to compute.
//!
//! `seek(step)` is O(1): there is no state besides the step counter.
//!
//! ## Passes (epochs) and the last batch
//!
//! A pass visits the records of one permutation (`Cyclic`) or of the natural
//! order (`Sequential`) once, [`steps_per_epoch`](Sampler::steps_per_epoch)
//! steps long; step `k` belongs to pass `k / steps_per_epoch` (see
//! [`Sampler::epoch_of`]).
//!
//! - `drop_last(true)` (the default): every batch is full; the
//!   `len % (B * world_size)` positions left at the end of a pass are not
//!   drawn, and because a `Cyclic` pass has a fresh permutation, which records
//!   those are changes from pass to pass.
//! - `drop_last(false)`: every record is drawn **exactly once per pass**; the
//!   last step of a pass may be shorter than `B` ([`Sampler::batch_len`]).
//!   `Iid` has no passes and refuses it.
//!
//! ## Multi-host sharding
//!
//! [`SamplerBuilder::shard`] splits each step's global batch of
//! `B * world_size` positions of the pass into one block of `B` per rank, so
//! ranks are disjoint within a pass. With `drop_last(true)` every rank has the
//! same number of steps. With `drop_last(false)` the `rem < B * world_size`
//! positions left for the last step are split as evenly as possible: the
//! first `rem % world_size` ranks get `rem / world_size + 1`, the others
//! `rem / world_size`. A rank whose share is empty has one step fewer per
//! pass; a batch is never empty, and ranks differ by at most one step.
//!
//! Worked example, `len = 10`, `B = 3`, `world_size = 2`, `Sequential`,
//! `drop_last(false)`: step 0 gives rank 0 positions `0 1 2` and rank 1
//! `3 4 5`; 4 positions are left, so step 1 gives rank 0 `6 7` and rank 1
//! `8 9`; step 2 starts the next pass. With `len = 7` the last step has one
//! position: rank 0 gets `6`, and rank 1's pass is one step long.
//!
//! `Iid` gives each rank an independent stream.
//!
//! ```
//! use loaderx_core::{Sampler, SamplerMode};
//!
//! let mut s = Sampler::new(1000, 32, SamplerMode::Cyclic, 7)?;
//! let first = s.next_batch().to_vec();
//! s.seek(0);
//! assert_eq!(s.next_batch(), &first[..]); // pure function of (seed, step)
//! assert_eq!(s.steps_per_epoch(), 31);    // 1000 / 32, remainder dropped
//!
//! // An evaluation pass: every record once, the last batch partial.
//! let eval = Sampler::builder(1000, 32)
//!     .mode(SamplerMode::Sequential)
//!     .drop_last(false)
//!     .build()?;
//! assert_eq!(eval.steps_per_epoch(), 32);
//! assert_eq!(eval.batch_len(31), 1000 - 31 * 32);
//! # Ok::<(), loaderx_core::Error>(())
//! ```

mod feistel;
mod rng;

use crate::error::Error;

pub use feistel::FeistelPermutation;

/// How indices are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplerMode {
    /// Records in order: a circular sliding window, or whole passes from
    /// record 0 with `drop_last(false)`.
    Sequential,
    /// Uniform with replacement.
    Iid,
    /// Without replacement, a fresh permutation every pass.
    Cyclic,
}

impl std::str::FromStr for SamplerMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "sequential" => Ok(SamplerMode::Sequential),
            "iid" => Ok(SamplerMode::Iid),
            "cyclic" => Ok(SamplerMode::Cyclic),
            _ => Err(Error::invalid(format!(
                "unknown sampler mode {s:?}; expected sequential, iid or cyclic"
            ))),
        }
    }
}

/// Configures a [`Sampler`]; from [`Sampler::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct SamplerBuilder {
    len: u64,
    batch_size: usize,
    mode: SamplerMode,
    seed: u64,
    rank: usize,
    world_size: usize,
    drop_last: bool,
}

impl SamplerBuilder {
    /// The sampling mode (default `Cyclic`).
    pub fn mode(mut self, mode: SamplerMode) -> Self {
        self.mode = mode;
        self
    }

    /// The seed (default 42).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Draw only rank `rank`'s share of every step (default rank 0 of 1);
    /// see the [module docs](self#multi-host-sharding).
    pub fn shard(mut self, rank: usize, world_size: usize) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }

    /// `true` (the default): every batch is full. `false`: every record once
    /// per pass, the last batch of a pass possibly partial; see the
    /// [module docs](self#passes-epochs-and-the-last-batch).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// The sampler, at step 0.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for
    /// zero records, a zero batch size, `rank >= world_size`, `drop_last(false)`
    /// with `Iid`, fewer records than ranks with `drop_last(false)`, or, with
    /// `drop_last(true)` in `Sequential` and `Cyclic` mode, fewer records than
    /// one global batch of `batch_size * world_size`.
    pub fn build(self) -> Result<Sampler, Error> {
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(Error::invalid(format!(
                "rank {} must be below world_size {} (at least 1)",
                self.rank, self.world_size
            )));
        }
        let s = Sampler {
            len: self.len,
            batch_size: self.batch_size,
            mode: self.mode,
            seed: self.seed,
            rank: self.rank as u64,
            world_size: self.world_size as u64,
            drop_last: self.drop_last,
            step: 0,
            buf: Vec::new(),
        };
        s.validate()?;
        Ok(s)
    }
}

/// Draws batches of record indices; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Sampler {
    len: u64,
    batch_size: usize,
    mode: SamplerMode,
    seed: u64,
    rank: u64,
    world_size: u64,
    drop_last: bool,
    step: u64,
    buf: Vec<u64>,
}

/// Where a step's positions lie in its pass.
struct Slot {
    pass: u64,
    /// First position in the pass's order.
    base: u64,
    len: u64,
}

impl Sampler {
    /// A builder over `0..len` drawing `batch_size` indices per step, with the
    /// defaults: `Cyclic`, seed 42, rank 0 of 1, `drop_last(true)`.
    pub fn builder(len: u64, batch_size: usize) -> SamplerBuilder {
        SamplerBuilder {
            len,
            batch_size,
            mode: SamplerMode::Cyclic,
            seed: 42,
            rank: 0,
            world_size: 1,
            drop_last: true,
        }
    }

    /// A sampler over `0..len` drawing `batch_size` indices per step, every
    /// batch full; the [`builder`](Self::builder) has the other options.
    ///
    /// # Errors
    ///
    /// As [`SamplerBuilder::build`].
    pub fn new(
        len: u64,
        batch_size: usize,
        mode: SamplerMode,
        seed: u64,
    ) -> Result<Sampler, Error> {
        Sampler::builder(len, batch_size)
            .mode(mode)
            .seed(seed)
            .build()
    }

    /// This sampler restricted to rank `rank` of `world_size`; see the
    /// [module docs](self#multi-host-sharding).
    ///
    /// # Errors
    ///
    /// As [`SamplerBuilder::build`].
    pub fn shard(self, rank: usize, world_size: usize) -> Result<Sampler, Error> {
        Sampler::builder(self.len, self.batch_size)
            .mode(self.mode)
            .seed(self.seed)
            .drop_last(self.drop_last)
            .shard(rank, world_size)
            .build()
            .map(|mut s| {
                s.step = self.step;
                s
            })
    }

    fn validate(&self) -> Result<(), Error> {
        if self.len == 0 {
            return Err(Error::invalid("cannot sample from zero records"));
        }
        if self.batch_size == 0 {
            return Err(Error::invalid("batch_size must be at least 1"));
        }
        if !self.drop_last {
            if self.mode == SamplerMode::Iid {
                return Err(Error::invalid(
                    "drop_last(false) needs passes over the data; Iid sampling has none",
                ));
            }
            if self.world_size > self.len {
                return Err(Error::invalid(format!(
                    "{} records cannot give each of {} ranks a batch",
                    self.len, self.world_size
                )));
            }
            return Ok(());
        }
        let global = (self.batch_size as u64).checked_mul(self.world_size);
        if self.mode != SamplerMode::Iid && global.is_none_or(|g| g > self.len) {
            return Err(Error::invalid(format!(
                "{:?} sampling of full batches of {} over {} ranks needs at least {} records, \
                 got {} (drop_last(false) allows a partial batch)",
                self.mode,
                self.batch_size,
                self.world_size,
                self.batch_size as u128 * self.world_size as u128,
                self.len
            )));
        }
        Ok(())
    }

    /// Number of records sampled from.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: a sampler has at least one record.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Indices per full batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The mode.
    pub fn mode(&self) -> SamplerMode {
        self.mode
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// `(rank, world_size)`.
    pub fn rank(&self) -> (usize, usize) {
        (self.rank as usize, self.world_size as usize)
    }

    /// Whether every batch is full (see the [module docs](self#passes-epochs-and-the-last-batch)).
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// The step the next [`next_batch`](Self::next_batch) draws.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Moves to `step`, in O(1).
    pub fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// Global batch: positions one step takes from a pass over all ranks.
    fn global(&self) -> u128 {
        self.batch_size as u128 * self.world_size as u128
    }

    /// This rank's share of the positions left for a pass's last step.
    fn last_share(&self) -> (u64, u64) {
        let rem = (self.len as u128 % self.global()) as u64;
        let (each, extra) = (rem / self.world_size, rem % self.world_size);
        let len = each + u64::from(self.rank < extra);
        let offset = self.rank * each + self.rank.min(extra);
        (offset, len)
    }

    /// Steps in one pass for this rank (at least 1).
    ///
    /// - `drop_last(true)`: `len / (batch_size * world_size)`;
    /// - `drop_last(false)`: that, plus one when this rank has a share of
    ///   the remainder;
    /// - `Iid`: `ceil(len / (batch_size * world_size))`, the steps that draw
    ///   as many records as a pass holds.
    pub fn steps_per_epoch(&self) -> u64 {
        let g = self.global();
        let full = (self.len as u128 / g) as u64;
        match (self.mode, self.drop_last) {
            (SamplerMode::Iid, _) => (self.len as u128).div_ceil(g) as u64,
            (_, true) => full.max(1),
            (_, false) => full + u64::from(self.last_share().1 > 0),
        }
    }

    /// `(epoch, step_in_epoch)` of `step`.
    pub fn epoch_of(&self, step: u64) -> (u64, u64) {
        let spe = self.steps_per_epoch();
        (step / spe, step % spe)
    }

    fn slot(&self, step: u64) -> Slot {
        let b = self.batch_size as u128;
        let (pass, s) = self.epoch_of(step);
        let full = self.len as u128 / self.global();
        // Every base below is under `len`: s * global + rank * b < full *
        // global <= len, and the last share ends at len.
        if (s as u128) < full || self.drop_last {
            Slot {
                pass,
                base: (s as u128 * self.global() + self.rank as u128 * b) as u64,
                len: self.batch_size as u64,
            }
        } else {
            let (offset, len) = self.last_share();
            Slot {
                pass,
                base: (full * self.global()) as u64 + offset,
                len,
            }
        }
    }

    /// Number of indices step `step` draws: `batch_size`, or fewer for the
    /// last step of a pass with `drop_last(false)`; never 0.
    pub fn batch_len(&self, step: u64) -> usize {
        match self.mode {
            SamplerMode::Iid => self.batch_size,
            _ => self.slot(step).len as usize,
        }
    }

    /// Writes the batch of `step` into `out`, which must be exactly
    /// [`batch_len(step)`](Self::batch_len) long. Pure: the same
    /// `(seed, rank, world_size, drop_last, step)` always gives the same
    /// indices.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// `out` is not `batch_len(step)` long (a longer slice would address
    /// positions past the end of a pass).
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), Error> {
        let want = self.batch_len(step);
        if out.len() != want {
            return Err(Error::invalid(format!(
                "sampler output has room for {} indices, step {step} draws {want} \
                 (the batch size is {})",
                out.len(),
                self.batch_size
            )));
        }
        match self.mode {
            SamplerMode::Sequential if self.drop_last => {
                // Global window of B*W positions starting at step*B*W (mod len).
                let b = self.batch_size as u128;
                let start =
                    (step as u128 * self.global() + self.rank as u128 * b) % self.len as u128;
                for (j, o) in out.iter_mut().enumerate() {
                    *o = ((start + j as u128) % self.len as u128) as u64;
                }
            }
            SamplerMode::Sequential => {
                let slot = self.slot(step);
                for (j, o) in out.iter_mut().enumerate() {
                    *o = slot.base + j as u64;
                }
            }
            SamplerMode::Iid => {
                let mut g = rng::SplitMix64::keyed(self.seed, self.rank, step);
                for o in out.iter_mut() {
                    *o = g.below(self.len);
                }
            }
            SamplerMode::Cyclic => {
                let slot = self.slot(step);
                let perm = FeistelPermutation::new(self.len, rng::mix(self.seed, slot.pass));
                for (j, o) in out.iter_mut().enumerate() {
                    // Below base + len <= len of the store, by construction.
                    let position = slot.base + j as u64;
                    *o = perm.apply(position).ok_or_else(|| {
                        Error::invalid(format!(
                            "cyclic position {position} outside 0..{}",
                            self.len
                        ))
                    })?;
                }
            }
        }
        Ok(())
    }

    /// The batch of `step`, in a new vector.
    pub fn indices(&self, step: u64) -> Vec<u64> {
        let mut out = vec![0; self.batch_len(step)];
        // `out` is batch_len long, the one thing `fill` checks.
        let filled = self.fill(step, &mut out);
        debug_assert!(filled.is_ok());
        out
    }

    /// Draws the batch of the current step and advances by one. The slice is
    /// reused by the next call. The step counter wraps from `u64::MAX` to 0.
    pub fn next_batch(&mut self) -> &[u64] {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(self.batch_len(self.step), 0);
        // `buf` is batch_len long, the one thing `fill` checks.
        let filled = self.fill(self.step, &mut buf);
        debug_assert!(filled.is_ok());
        self.buf = buf;
        self.step = self.step.wrapping_add(1);
        &self.buf
    }
}

impl Iterator for Sampler {
    type Item = Vec<u64>;

    /// Endless: always `Some`.
    fn next(&mut self) -> Option<Vec<u64>> {
        Some(self.next_batch().to_vec())
    }
}

#[cfg(test)]
mod tests;
