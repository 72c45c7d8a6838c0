//! The seam between the engine and a store whose payload shards are not
//! files on this machine.
//!
//! A local store's shards are mapped, and the reader copies and decodes
//! straight out of the maps: that path is the engine's own, with no call
//! through a trait per record. Every other place a store can live (object
//! storage, in the `remote` module, feature `remote`) is a [`ShardSource`]
//! that the opener attaches to the reader it assembled
//! ([`StoreReader::with_source`](super::StoreReader::with_source)): the
//! reader asks it for the stored bytes of a gather's records
//! ([`ShardSource::fetch`]), or, when it keeps blocks in memory, copies
//! straight out of them ([`ShardSource::resident`], [`copy_resident`]). The
//! engine knows nothing of requests, retries or caches; a source knows
//! nothing of codecs, layouts or destinations.

use crate::codec::Sink;
use crate::error::Error;

/// One record's stored bytes a gather wants: `(record, shard, offset,
/// length)`, every one within its shard's committed tail.
pub(crate) type Wanted = (u64, usize, u64, u32);

/// Where the payload shards of a store that is not mapped come from.
pub(crate) trait ShardSource: Send + Sync {
    /// Makes the stored bytes of every `wanted` record available (fetched,
    /// or looked up in a cache).
    ///
    /// # Errors
    ///
    /// What the source could not read, naming the object and record.
    fn fetch(&self, wanted: Vec<Wanted>) -> Result<Box<dyn StagedBytes>, Error>;

    /// The blocks this source holds in memory, locked for one gather that
    /// copies straight out of them ([`copy_resident`]); `tick` is the
    /// gather's when this view serves one part of a parallel gather
    /// ([`ResidentBlocks::tick`]), `None` to start a new gather. `None`
    /// when the source keeps no blocks in memory. Drop the view before
    /// calling [`Self::fetch`], which may need to add blocks.
    fn resident(&self, tick: Option<u64>) -> Option<Box<dyn ResidentBlocks + '_>>;

    /// Counts `n` blocks a gather copied out of a [`Self::resident`] view.
    fn count_memory_hits(&self, n: u64);

    /// What the source fetched since it was opened.
    fn stats(&self) -> RemoteStats;
}

/// The stored bytes [`ShardSource::fetch`] made available for one gather.
pub(crate) trait StagedBytes: Send + Sync {
    /// The `len` stored bytes at `offset` of shard `shard`, if they were
    /// among those wanted.
    fn get(&self, shard: usize, offset: u64, len: u32) -> Option<&[u8]>;
}

/// A source's in-memory blocks, locked for one gather.
pub(crate) trait ResidentBlocks {
    /// The gather's tick, for the views of the other parts of a parallel
    /// gather (each block is counted once per gather).
    fn tick(&self) -> u64;

    /// The block holding stored byte `offset` of shard `shard` and where
    /// in it `offset` lies, if the block is in memory; `true` when this is
    /// the gather's first use of the block. `None` for a block not in
    /// memory, including every block past the end of the shard.
    fn block_at(&self, shard: usize, offset: u64) -> Option<(&[u8], usize, bool)>;
}

/// What [`copy_resident`] did.
pub(crate) enum Copied {
    /// Every byte of the destination was written.
    Done,
    /// A block is not in memory (some bytes may have been written).
    Miss,
    /// The bytes run past the end of the last block in memory that holds
    /// them: a location outside its shard.
    Outside,
}

/// Copies the `dst.len()` stored bytes at `offset` of shard `shard` out of
/// `view` into `dst`, a record straddling blocks piece by piece; adds to
/// `hits` each block the gather touches for the first time.
#[inline(always)]
pub(crate) fn copy_resident<D: Sink>(
    view: &dyn ResidentBlocks,
    shard: usize,
    offset: u64,
    dst: &mut [D],
    hits: &mut u64,
) -> Copied {
    let Some((mut block, mut at, first)) = view.block_at(shard, offset) else {
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
        let Some((next, next_at, first)) = view.block_at(shard, offset + done as u64) else {
            return Copied::Miss;
        };
        *hits += u64::from(first);
        (block, at) = (next, next_at);
    }
}

/// Requests and bytes a remote store has fetched since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteStats {
    /// Ranged GET requests for payload bytes (retries not counted).
    pub requests: u64,
    /// Payload bytes those requests returned.
    pub bytes_fetched: u64,
    /// Cache blocks served from memory.
    pub memory_hits: u64,
    /// Cache blocks served from the cache directory.
    pub disk_hits: u64,
    /// Cache blocks fetched.
    pub misses: u64,
}

impl std::ops::Add for RemoteStats {
    type Output = RemoteStats;

    fn add(self, b: RemoteStats) -> RemoteStats {
        RemoteStats {
            requests: self.requests + b.requests,
            bytes_fetched: self.bytes_fetched + b.bytes_fetched,
            memory_hits: self.memory_hits + b.memory_hits,
            disk_hits: self.disk_hits + b.disk_hits,
            misses: self.misses + b.misses,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::{HashMap, HashSet};

    /// Blocks of `size` bytes of shard 0, some of them in memory.
    struct Blocks {
        size: usize,
        resident: HashMap<u64, Vec<u8>>,
        touched: RefCell<HashSet<u64>>,
    }

    impl ResidentBlocks for Blocks {
        fn tick(&self) -> u64 {
            7
        }

        fn block_at(&self, shard: usize, offset: u64) -> Option<(&[u8], usize, bool)> {
            let b = offset / self.size as u64;
            let block = self.resident.get(&b).filter(|_| shard == 0)?;
            let first = self.touched.borrow_mut().insert(b);
            Some((block, (offset % self.size as u64) as usize, first))
        }
    }

    fn blocks(resident: &[u64], last_len: usize) -> Blocks {
        let mut map = HashMap::new();
        for &b in resident {
            let len = if b == 3 { last_len } else { 4 };
            map.insert(b, (0..len as u8).map(|i| b as u8 * 4 + i).collect());
        }
        Blocks {
            size: 4,
            resident: map,
            touched: RefCell::default(),
        }
    }

    #[test]
    fn records_are_copied_within_and_across_blocks() {
        let view = blocks(&[0, 1, 2, 3], 2);
        let mut hits = 0;
        let mut dst = [0u8; 3];
        assert!(matches!(
            copy_resident(&view, 0, 1, &mut dst, &mut hits),
            Copied::Done
        ));
        assert_eq!(dst, [1, 2, 3]);
        let mut dst = [0u8; 7];
        assert!(matches!(
            copy_resident(&view, 0, 3, &mut dst, &mut hits),
            Copied::Done
        ));
        assert_eq!(dst, [3, 4, 5, 6, 7, 8, 9]);
        // Blocks 0, 1 and 2, each counted once.
        assert_eq!(hits, 3);
    }

    #[test]
    fn missing_blocks_miss_and_short_last_blocks_are_outside() {
        let view = blocks(&[0, 2, 3], 2);
        let mut hits = 0;
        let mut dst = [0u8; 4];
        assert!(matches!(
            copy_resident(&view, 0, 2, &mut dst, &mut hits),
            Copied::Miss
        ));
        assert!(matches!(
            copy_resident(&view, 1, 0, &mut dst, &mut hits),
            Copied::Miss
        ));
        // Block 3 holds 2 of its 4 bytes (the shard's end): a record
        // running past it is outside the shard.
        let mut dst = [0u8; 3];
        assert!(matches!(
            copy_resident(&view, 0, 12, &mut dst, &mut hits),
            Copied::Outside
        ));
        let mut dst = [0u8; 1];
        assert!(matches!(
            copy_resident(&view, 0, 14, &mut dst, &mut hits),
            Copied::Outside
        ));
    }

    #[test]
    fn stats_add_up() {
        let a = RemoteStats {
            requests: 1,
            bytes_fetched: 2,
            memory_hits: 3,
            disk_hits: 4,
            misses: 5,
        };
        assert_eq!(
            a + a,
            RemoteStats {
                requests: 2,
                bytes_fetched: 4,
                memory_hits: 6,
                disk_hits: 8,
                misses: 10,
            }
        );
    }
}
