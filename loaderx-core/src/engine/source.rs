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
//! ([`ShardSource::fetch`]), or, when it keeps blocks in the engine's
//! memory tier ([`super::blocks`]), copies straight out of them
//! ([`ShardSource::resident`], [`Resident::copy`]), in the same inlined
//! loop as out of a local store's maps. The engine knows nothing of
//! requests, retries or the disk cache; a source knows nothing of codecs,
//! layouts or destinations.

use super::blocks::Resident;
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

    /// Starts fetching the blocks holding the stored bytes of every
    /// `wanted` record into the block cache, ahead of the gather that will
    /// ask for them (the loader's look-ahead), and returns the payload
    /// bytes it asked for (0 when everything is cached already, or the
    /// source keeps no cache). A block already cached, or being fetched by
    /// a gather or an earlier prefetch, is not fetched again. Errors are
    /// dropped: the gather meets them again, with its record named.
    fn prefetch(&self, wanted: Vec<Wanted>) -> u64;

    /// The blocks this source holds in memory (or mapped), locked for one gather that
    /// copies straight out of them ([`Resident::copy`]); `tick` is the
    /// gather's when this view serves one part of a parallel gather
    /// ([`Resident::tick`]), `None` to start a new gather. `None` when the
    /// source keeps no blocks in memory. Drop the view before calling
    /// [`Self::fetch`], which may need to add blocks.
    fn resident(&self, tick: Option<u64>) -> Option<Resident<'_>>;

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
    use crate::engine::blocks::{Copied, Geometry, MemoryBlocks};
    use bytes::Bytes;
    use std::sync::RwLock;

    /// Blocks of 4 bytes of shard 0, `resident` of them in memory; block 3
    /// (the shard's last) holds `last_len` bytes.
    fn blocks(resident: &[u64], last_len: usize) -> RwLock<MemoryBlocks> {
        let mut m = MemoryBlocks {
            limit: 1 << 20,
            ..MemoryBlocks::default()
        };
        for &b in resident {
            let len = if b == 3 { last_len } else { 4 };
            m.put(
                0,
                b,
                (0..len as u8).map(|i| b as u8 * 4 + i).collect::<Bytes>(),
            );
        }
        RwLock::new(m)
    }

    fn view(m: &RwLock<MemoryBlocks>) -> Resident<'_> {
        Resident::new(m.read().unwrap(), None, Geometry::new(4))
    }

    #[test]
    fn records_are_copied_within_and_across_blocks() {
        let m = blocks(&[0, 1, 2, 3], 2);
        let view = view(&m);
        let mut hits = 0;
        let mut dst = [0u8; 3];
        assert!(matches!(view.copy(0, 1, &mut dst, &mut hits), Copied::Done));
        assert_eq!(dst, [1, 2, 3]);
        let mut dst = [0u8; 7];
        assert!(matches!(view.copy(0, 3, &mut dst, &mut hits), Copied::Done));
        assert_eq!(dst, [3, 4, 5, 6, 7, 8, 9]);
        // Blocks 0, 1 and 2, each counted once in the gather.
        assert_eq!(hits, 3);
        // A new gather counts them again.
        let again = Resident::new(m.read().unwrap(), None, Geometry::new(4));
        assert_ne!(again.tick(), view.tick());
    }

    #[test]
    fn missing_blocks_miss_and_past_the_last_block_is_outside() {
        let m = blocks(&[0, 2, 3], 2);
        let view = view(&m);
        let mut hits = 0;
        let mut dst = [0u8; 4];
        assert!(matches!(view.copy(0, 2, &mut dst, &mut hits), Copied::Miss));
        assert!(matches!(view.copy(1, 0, &mut dst, &mut hits), Copied::Miss));
        // Block 3 holds 2 of its 4 bytes (the shard's end).
        let mut dst = [0u8; 1];
        assert!(matches!(
            view.copy(0, 14, &mut dst, &mut hits),
            Copied::Outside
        ));
        let mut dst = [0u8; 2];
        assert!(matches!(
            view.copy(0, 12, &mut dst, &mut hits),
            Copied::Done
        ));
        assert_eq!(dst, [12, 13]);
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
