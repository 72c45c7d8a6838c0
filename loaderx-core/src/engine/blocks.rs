//! The in-memory tier of fixed-size payload blocks that a store whose
//! shards are not mapped keeps (object storage, the `remote` module), and
//! the read-locked view of it a gather copies records straight out of.
//!
//! It belongs to the engine, beside the reader that copies out of it, so
//! that the warm path is the same inlined loop as a local store's: a source
//! ([`super::source::ShardSource`]) fills the tier and lends it locked
//! ([`Resident`]); it knows nothing of layouts or destinations, and the
//! engine nothing of how blocks are fetched or kept on disk.

// Filled only by the `remote` module's source: without that feature the
// tier is never built (the reader's warm path then never runs).
#![cfg_attr(not(feature = "remote"), allow(dead_code))]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::RwLockReadGuard;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::codec::Sink;

/// How shard offsets map to cache blocks: block `b` of a shard holds its
/// bytes `[b * bytes, (b + 1) * bytes)` (the last block up to the tail).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Block size, at least 4096.
    pub(crate) bytes: u64,
    /// `log2(bytes)` when it is a power of two (the default is), so that
    /// [`Geometry::split`] is a shift and a mask instead of a division.
    pub(crate) shift: Option<u32>,
}

impl Geometry {
    pub(crate) fn new(bytes: u64) -> Geometry {
        let bytes = bytes.max(1);
        Geometry {
            bytes,
            shift: bytes.is_power_of_two().then(|| bytes.trailing_zeros()),
        }
    }

    /// The block holding shard offset `offset`, and where in it.
    #[inline(always)]
    pub(crate) fn split(self, offset: u64) -> (u64, usize) {
        match self.shift {
            Some(shift) => (offset >> shift, (offset & (self.bytes - 1)) as usize),
            None => (offset / self.bytes, (offset % self.bytes) as usize),
        }
    }
}

/// The key of block `b` of shard `s` in the memory tier. Shards number at
/// most [`MAX_DATA_SHARDS`](crate::format::MAX_DATA_SHARDS) (255, a `u8` in the header) and a block number
/// is below 2^52 (offsets are `u64`, blocks at least 4096 bytes), so the
/// key is unique.
#[inline(always)]
pub(crate) fn block_key(s: usize, b: u64) -> u64 {
    debug_assert!(s < 256);
    (b << 8) | (s as u64 & 0xff)
}

/// Shard and block of a [`block_key`]: its inverse.
#[cfg(feature = "remote")]
pub(crate) fn block_of_key(key: u64) -> (usize, u64) {
    ((key & 0xff) as usize, key >> 8)
}

/// Hashes the memory tier's `u64` block keys: one multiply by the 64-bit
/// golden ratio (Fibonacci hashing), whose high bits depend on every bit of
/// the key, folded into the low bits that pick a bucket. std's SipHash costs
/// several times more, to resist keys chosen to collide; these are block
/// numbers of the store's own shards (consecutive integers, which this
/// spreads evenly), and a collision costs a probe, never a wrong block.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline(always)]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// Builds [`KeyHasher`]s.
pub(crate) type FastKeys = BuildHasherDefault<KeyHasher>;

/// A block in the memory tier.
pub(crate) struct Cached {
    /// The tick of its last use: stored under the shared lock, so atomic.
    pub(crate) stamp: AtomicU64,
    pub(crate) bytes: Bytes,
}

/// Blocks in memory, least recently used evicted first.
///
/// A hit only stamps its block with its gather's tick (O(1), once per block
/// and gather, under the shared lock: an atomic store, done only when the
/// stamp changes); eviction, which is rare, sorts the blocks by their stamps
/// and drops the oldest until an eighth of the limit is free, so its cost is
/// spread over the puts that filled that eighth.
#[derive(Default)]
pub(crate) struct MemoryBlocks {
    pub(crate) limit: u64,
    pub(crate) used: u64,
    /// The last tick handed out: one per gather and one per put.
    pub(crate) tick: AtomicU64,
    /// Block (by [`block_key`]) → last use and bytes.
    pub(crate) blocks: HashMap<u64, Cached, FastKeys>,
}

impl MemoryBlocks {
    /// A new tick, for one gather's lookups.
    pub(crate) fn next_tick(&self) -> u64 {
        self.tick.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
    }

    /// Block `key`, if in memory, stamped with `tick`; `true` when this is
    /// its first use at `tick` (so that a gather counts each block once).
    #[inline(always)]
    pub(crate) fn touch(&self, key: u64, tick: u64) -> Option<(&Bytes, bool)> {
        let c = self.blocks.get(&key)?;
        let first = c.stamp.load(Ordering::Relaxed) != tick;
        if first {
            c.stamp.store(tick, Ordering::Relaxed);
        }
        Some((&c.bytes, first))
    }

    /// Drops block `key`, if held.
    pub(crate) fn remove(&mut self, key: u64) {
        if let Some(old) = self.blocks.remove(&key) {
            self.used -= old.bytes.len() as u64;
        }
    }

    pub(crate) fn put(&mut self, s: usize, b: u64, bytes: Bytes) {
        let len = bytes.len() as u64;
        if len > self.limit {
            return;
        }
        let stamp = AtomicU64::new(self.next_tick());
        if let Some(old) = self.blocks.insert(block_key(s, b), Cached { stamp, bytes }) {
            self.used -= old.bytes.len() as u64;
        }
        self.used += len;
        if self.used > self.limit {
            let low = self.limit - self.limit / 8;
            let mut by_age: Vec<(u64, u64)> = self
                .blocks
                .iter()
                .map(|(&k, c)| (c.stamp.load(Ordering::Relaxed), k))
                .collect();
            by_age.sort_unstable();
            for (_, key) in by_age {
                if self.used <= low {
                    break;
                }
                if let Some(old) = self.blocks.remove(&key) {
                    self.used -= old.bytes.len() as u64;
                }
            }
        }
    }
}

/// The memory tier read-locked for one gather (or one part of a parallel
/// one), with that gather's tick: [`Resident::copy`] copies records straight
/// out of its blocks.
///
/// The lock is shared: other gathers read on, and a put (of a block another
/// gather fetched) waits until this one is dropped. Drop it before taking
/// the general path, whose puts lock the tier for writing.
pub(crate) struct Resident<'a> {
    memory: RwLockReadGuard<'a, MemoryBlocks>,
    tick: u64,
    geometry: Geometry,
}

/// What [`Resident::copy`] did.
pub(crate) enum Copied {
    /// Every byte of the destination was written.
    Done,
    /// A block is not in memory (some bytes may have been written).
    Miss,
    /// The bytes run past the end of their shard's last block.
    Outside,
}

impl<'a> Resident<'a> {
    /// `memory`, locked, for a gather at `tick` (`None`: a new gather).
    pub(crate) fn new(
        memory: RwLockReadGuard<'a, MemoryBlocks>,
        tick: Option<u64>,
        geometry: Geometry,
    ) -> Resident<'a> {
        let tick = tick.unwrap_or_else(|| memory.next_tick());
        Resident {
            memory,
            tick,
            geometry,
        }
    }

    /// The gather's tick, for the other parts of a parallel gather.
    pub(crate) fn tick(&self) -> u64 {
        self.tick
    }

    /// The `len` stored bytes at `offset` of shard `s` when one block holds
    /// them all (`None` when they straddle blocks, run past the shard's last
    /// block or their block is not held: [`Resident::copy`] tells which);
    /// adds to `hits` as [`Resident::copy`] does.
    #[inline(always)]
    pub(crate) fn find(&self, s: usize, offset: u64, len: usize, hits: &mut u64) -> Option<&[u8]> {
        let (b, at) = self.geometry.split(offset);
        let (block, first) = self.memory.touch(block_key(s, b), self.tick)?;
        *hits += u64::from(first);
        block.get(at..at.wrapping_add(len))
    }

    /// Copies the `dst.len()` stored bytes at `offset` of shard `s` into
    /// `dst`, a record straddling blocks piece by piece; adds to `hits` each
    /// block this gather touches for the first time.
    #[inline(always)]
    pub(crate) fn copy<D: Sink>(
        &self,
        s: usize,
        offset: u64,
        dst: &mut [D],
        hits: &mut u64,
    ) -> Copied {
        let (mut b, mut at) = self.geometry.split(offset);
        let Some((mut block, first)) = self.memory.touch(block_key(s, b), self.tick) else {
            return Copied::Miss;
        };
        *hits += u64::from(first);
        if let Some(src) = block.get(at..at.wrapping_add(dst.len())) {
            D::put(dst, src);
            return Copied::Done;
        }
        // Straddles blocks (or runs past the last one): piece by piece.
        let mut done = 0;
        loop {
            let n = block.len().saturating_sub(at).min(dst.len() - done);
            let (Some(src), Some(d)) = (block.get(at..at + n), dst.get_mut(done..done + n)) else {
                return Copied::Outside;
            };
            if n == 0 {
                return Copied::Outside;
            }
            D::put(d, src);
            done += n;
            if done == dst.len() {
                return Copied::Done;
            }
            b += 1;
            at = 0;
            let Some((next, first)) = self.memory.touch(block_key(s, b), self.tick) else {
                return Copied::Miss;
            };
            *hits += u64::from(first);
            block = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_and_keys_place_offsets_in_their_blocks() {
        let pow2 = Geometry::new(4096);
        assert_eq!(pow2.split(0), (0, 0));
        assert_eq!(pow2.split(4095), (0, 4095));
        assert_eq!(pow2.split(4096 * 7 + 3), (7, 3));
        let odd = Geometry::new(5000);
        assert_eq!(odd.shift, None);
        assert_eq!(odd.split(4999), (0, 4999));
        assert_eq!(odd.split(5000 * 9 + 11), (9, 11));
        // Keys differ by shard and by block.
        let keys: std::collections::HashSet<u64> = (0..255)
            .flat_map(|s| (0..64).map(move |b| block_key(s, b)))
            .collect();
        assert_eq!(keys.len(), 255 * 64);
        // The hasher spreads consecutive keys over the low bits.
        let h = |k: u64| {
            let mut x = KeyHasher::default();
            x.write_u64(k);
            x.finish() & 1023
        };
        let buckets: std::collections::HashSet<u64> =
            (0..1024).map(|b| h(block_key(0, b))).collect();
        assert!(buckets.len() > 512, "{}", buckets.len());
    }
}
