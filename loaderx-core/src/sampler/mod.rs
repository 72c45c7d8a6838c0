//! Batch index sampling: every batch is a pure function of `(seed, step)`.
//!
//! Three modes, as in Python loaderx:
//!
//! - [`SamplerMode::Sequential`]: a sliding window over the circular index
//!   space; step `k` of a single rank reads `k*B .. k*B + B` (mod `len`).
//! - [`SamplerMode::Iid`]: uniform with replacement, unbiased (Lemire's
//!   multiply-shift with rejection), from a counter-based generator keyed by
//!   `(seed, rank, step)`.
//! - [`SamplerMode::Cyclic`]: without replacement. Cycle `c` is a fresh
//!   pseudo-random permutation of `0..len` computed statelessly by a keyed
//!   Feistel network with cycle-walking, so nothing of dataset size is ever
//!   materialised and any step is O(batch) to compute. Every batch is full;
//!   the `len % (B * world_size)` positions left over at the end of a cycle
//!   are dropped, and because the permutation changes, so do the dropped
//!   records.
//!
//! `seek(step)` is O(1): there is no state besides the step counter.
//!
//! ## Multi-host sharding
//!
//! [`Sampler::shard`] splits each step's global batch of `B * world_size`
//! positions into one block of `B` per rank. Every rank therefore gets the
//! same number of steps (the stream is endless; a cycle is
//! [`Sampler::steps_per_cycle`] steps for everyone), ranks are disjoint
//! within a cycle, and together they cover all but the dropped remainder.
//! `Iid` gives each rank an independent stream.
//!
//! ```
//! use loaderx_core::sampler::{Sampler, SamplerMode};
//!
//! let mut s = Sampler::new(1000, 32, SamplerMode::Cyclic, 7)?;
//! let first = s.next_batch().to_vec();
//! s.seek(0);
//! assert_eq!(s.next_batch(), &first[..]); // pure function of (seed, step)
//! assert_eq!(s.steps_per_cycle(), 31);    // 1000 / 32, remainder dropped
//! # Ok::<(), loaderx_core::Error>(())
//! ```

mod feistel;
mod rng;

use crate::error::Error;

pub use feistel::FeistelPermutation;

/// How indices are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplerMode {
    /// Sliding window over the circular index space.
    Sequential,
    /// Uniform with replacement.
    Iid,
    /// Without replacement, a fresh permutation every cycle.
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

/// Draws batches of record indices; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Sampler {
    len: u64,
    batch_size: usize,
    mode: SamplerMode,
    seed: u64,
    rank: u64,
    world_size: u64,
    step: u64,
    buf: Vec<u64>,
}

impl Sampler {
    /// A sampler over `0..len` drawing `batch_size` indices per step.
    pub fn new(
        len: u64,
        batch_size: usize,
        mode: SamplerMode,
        seed: u64,
    ) -> Result<Sampler, Error> {
        let s = Sampler {
            len,
            batch_size,
            mode,
            seed,
            rank: 0,
            world_size: 1,
            step: 0,
            buf: vec![0; batch_size],
        };
        s.validate()?;
        Ok(s)
    }

    /// This sampler restricted to rank `rank` of `world_size`; see the
    /// [module docs](self#multi-host-sharding).
    pub fn shard(mut self, rank: usize, world_size: usize) -> Result<Sampler, Error> {
        if world_size == 0 || rank >= world_size {
            return Err(Error::invalid(format!(
                "rank {rank} must be below world_size {world_size} (at least 1)"
            )));
        }
        self.rank = rank as u64;
        self.world_size = world_size as u64;
        self.validate()?;
        Ok(self)
    }

    fn validate(&self) -> Result<(), Error> {
        if self.len == 0 {
            return Err(Error::invalid("cannot sample from zero records"));
        }
        if self.batch_size == 0 {
            return Err(Error::invalid("batch_size must be at least 1"));
        }
        let global = (self.batch_size as u64).checked_mul(self.world_size);
        if self.mode != SamplerMode::Iid && global.is_none_or(|g| g > self.len) {
            return Err(Error::invalid(format!(
                "{:?} sampling of batches of {} over {} ranks needs at least {} records, got {}",
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

    /// Indices per batch.
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

    /// The step the next [`next_batch`](Self::next_batch) draws.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Moves to `step`, in O(1).
    pub fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// Steps in one cycle: `len / (batch_size * world_size)` (at least 1).
    /// For `Cyclic` every record appears at most once per cycle; for
    /// `Sequential` a cycle is one pass of the window; `Iid` has no cycles and
    /// reports the same figure as its epoch-equivalent.
    pub fn steps_per_cycle(&self) -> u64 {
        (self.len / (self.batch_size as u64 * self.world_size)).max(1)
    }

    /// Writes the batch of `step` into `out`, which must be exactly
    /// [`batch_size`](Self::batch_size) long. Pure: the same
    /// `(seed, rank, world_size, step)` always gives the same indices.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// `out` is not `batch_size` long (a longer slice would address positions
    /// past the end of a cycle).
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), Error> {
        if out.len() != self.batch_size {
            return Err(Error::invalid(format!(
                "sampler output has room for {} indices, the batch size is {}",
                out.len(),
                self.batch_size
            )));
        }
        let b = self.batch_size as u64;
        let global = b * self.world_size;
        match self.mode {
            SamplerMode::Sequential => {
                // Global window of B*W positions starting at step*B*W (mod len).
                let start = ((step as u128 * global as u128 + (self.rank * b) as u128)
                    % self.len as u128) as u64;
                for (j, o) in out.iter_mut().enumerate() {
                    let p = start as u128 + j as u128;
                    *o = (p % self.len as u128) as u64;
                }
            }
            SamplerMode::Iid => {
                let mut g = rng::SplitMix64::keyed(self.seed, self.rank, step);
                for o in out.iter_mut() {
                    *o = g.below(self.len);
                }
            }
            SamplerMode::Cyclic => {
                let spc = self.steps_per_cycle();
                let cycle = step / spc;
                // Below spc * B * W <= len, since `out` is B long.
                let base = (step % spc) * global + self.rank * b;
                let perm = FeistelPermutation::new(self.len, rng::mix(self.seed, cycle));
                for (j, o) in out.iter_mut().enumerate() {
                    let position = base + j as u64;
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

    /// Draws the batch of the current step and advances by one. The slice is
    /// reused by the next call. The step counter wraps from `u64::MAX` to 0.
    pub fn next_batch(&mut self) -> &[u64] {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(self.batch_size, 0);
        // `buf` is batch_size long, the one thing `fill` checks.
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
