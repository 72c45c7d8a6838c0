//! The untyped store engine: byte records in, byte records out.
//!
//! The engine knows the physical format ([`crate::format`]) and the codecs,
//! and nothing of dtypes or shapes: the typed [`crate::dense`] and
//! [`crate::ragged`] layers hand it record byte spans to append and
//! destination buffers to fill.
//!
//! - [`writer`] appends windows of records: workers of the rayon pool encode
//!   shard-local chunks in parallel, offsets are assigned in record order (so
//!   the same input always gives the same files), payloads are written with
//!   positional writes, then the window's locations. `close` syncs and
//!   publishes the static page last.
//! - [`reader`] validates a store at open, maps the location table and the
//!   payload shards, and gathers records in parallel straight into caller
//!   memory: a raw record is one `memcpy` from the page cache, a compressed one
//!   decompresses into its destination.
//! - [`varlen`] is the entry point of variable-length (Ragged) gathers: a
//!   plan checks every record's location and logical length once and places
//!   the records in 8-byte-aligned segments of one buffer; the gather reads
//!   them there. The Ragged layer reads only the shape headers it gets back.
//! - [`parts`] reads several stores of one schema end to end as one
//!   ([`Engine::Parts`]): a record's part by a binary search, a gather
//!   split by part and run in parallel, straight into the caller's buffer.
//! - [`source`] is the seam to stores whose shards are not mapped files
//!   (object storage, the `remote` module): a [`source::ShardSource`]
//!   fetches a gather's stored bytes or lends its in-memory blocks
//!   ([`blocks`]: the tier, and the view the reader copies out of inline);
//!   the reader decodes as for a local store.
//! - [`cold`] is the read path of local stores that are not in the page
//!   cache ([`ReadMode`](cold::ReadMode): `Auto` by default, `Mapped`,
//!   `Direct`): instead of one synchronous page fault per record with the
//!   kernel's read-around, a gather hands all its records' reads to the
//!   kernel at once ([`io`]: a ring per thread through io_uring, or a pool
//!   of `pread` threads where io_uring cannot be set up), `O_DIRECT` into
//!   an aligned scratch (through the page cache, read-ahead off, where the
//!   file system refuses `O_DIRECT`), which the copy or the usual decode
//!   reads as [`source::StagedBytes`]. `Auto` picks the path per gather
//!   from the residency (`mincore`) of a sample of its records, so a warm
//!   store keeps the mapped path. [`Engine::prefetch`] is the loader's
//!   look-ahead (clairvoyant prefetch, from the sampler's future steps): a
//!   cold local store reads those records into memory on the look-ahead
//!   thread's own ring, many reads in flight, buffers owned by the ring
//!   until their completion, into a cache its gathers take them from
//!   ([`cold::AheadCache`]); a remote store fetches their blocks into its
//!   block cache ([`source::ShardSource::prefetch`]). Nothing is read
//!   twice (a record being read is waited for; a remote block being
//!   fetched is claimed, and waited for by any other gather that needs
//!   it). For a windowed order the look-ahead asks for whole blocks
//!   instead ([`Engine::prefetch_ranges`]), once each, into the page
//!   cache, so the drive reads them at its sequential speed (unless the
//!   records are large enough to be long reads each). All `unsafe` of
//!   this path is in [`io`] and [`scratch`] (the huge-page buffers reads
//!   land in).
//! - [`files`] holds file naming, locking and memory mapping; [`durable`]
//!   the syncs and the no-replace rename that make creation and publication
//!   crash-safe.

/// Takes the completions of the look-ahead reads this thread started
/// ([`Engine::prefetch`] of a store read `O_DIRECT`), waiting for every one
/// in flight: a thread that started reads calls it before it sleeps or
/// ends, for the gathers wait for them.
pub(crate) fn finish_look_ahead() {
    io::reap_owned(true);
}

/// Takes the completions of this thread's look-ahead reads that are done,
/// without waiting.
pub(crate) fn poll_look_ahead() {
    io::reap_owned(false);
}

/// Whether this thread has look-ahead reads in flight.
pub(crate) fn look_ahead_in_flight() -> bool {
    io::owned_in_flight()
}

pub(crate) mod blocks;
pub(crate) mod cold;
pub(crate) mod durable;
pub(crate) mod files;
pub(crate) mod io;
pub(crate) mod layout;
pub(crate) mod lazy;
pub(crate) mod parts;
pub(crate) mod reader;
pub(crate) mod scratch;
pub(crate) mod source;
pub(crate) mod varlen;
pub(crate) mod writer;

pub(crate) use reader::StoreReader;
pub(crate) use varlen::VarlenPlan;
pub(crate) use writer::{RecordSource, StoreWriter};

use std::path::Path;

use self::source::ShardSource;
use crate::Generation;
use crate::codec::{Codec, Sink};
use crate::error::Error;
use crate::format::RecordLoc;

/// What a Dense or Ragged reader reads: one store, or stores of one schema
/// end to end.
pub(crate) enum Engine {
    /// One store.
    Store(StoreReader),
    /// Stores end to end (their schemas checked by the typed layer).
    Parts(parts::Parts),
    /// Parts converted when first needed, into a local cache
    /// ([`lazy`]).
    Lazy(Box<lazy::LazyStream>),
}

impl From<StoreReader> for Engine {
    fn from(r: StoreReader) -> Engine {
        Engine::Store(r)
    }
}

impl Engine {
    /// The store, or the first part (there is one): what describes the whole.
    fn first(&self) -> &StoreReader {
        &self.stores()[0]
    }

    /// Every store read, in order.
    pub(crate) fn stores(&self) -> &[StoreReader] {
        match self {
            Engine::Store(r) => std::slice::from_ref(r),
            Engine::Parts(p) => p.readers(),
            // What describes the whole: part 0's store.
            Engine::Lazy(l) => std::slice::from_ref(l.template()),
        }
    }

    /// The stores read, in order, unwrapped.
    pub(crate) fn into_stores(self) -> Vec<StoreReader> {
        match self {
            Engine::Store(r) => vec![r],
            Engine::Parts(p) => p.into_readers(),
            Engine::Lazy(l) => vec![l.into_template()],
        }
    }

    /// Drops the shared lock of every store read.
    pub(crate) fn release_locks(&mut self) {
        match self {
            Engine::Store(r) => r.release_lock(),
            Engine::Parts(p) => p.release_locks(),
            Engine::Lazy(_) => {}
        }
    }

    /// The one store read, unless this reads several.
    pub(crate) fn store(&self) -> Option<&StoreReader> {
        match self {
            Engine::Store(r) => Some(r),
            Engine::Parts(_) | Engine::Lazy(_) => None,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        match self {
            Engine::Store(r) => r.path(),
            Engine::Parts(p) => p.path(),
            Engine::Lazy(l) => l.path(),
        }
    }

    pub(crate) fn len(&self) -> u64 {
        match self {
            Engine::Store(r) => r.len(),
            Engine::Parts(p) => p.len(),
            Engine::Lazy(l) => l.len(),
        }
    }

    /// The first index of every store read, and the total.
    pub(crate) fn starts(&self) -> Vec<u64> {
        match self {
            Engine::Store(r) => vec![0, r.len()],
            Engine::Parts(p) => p.starts().to_vec(),
            Engine::Lazy(l) => l.starts().to_vec(),
        }
    }

    pub(crate) fn generation(&self) -> Generation {
        self.first().generation()
    }

    pub(crate) fn codec(&self) -> Codec {
        self.first().codec()
    }

    pub(crate) fn data_shards(&self) -> usize {
        self.stores().iter().map(StoreReader::data_shards).sum()
    }

    pub(crate) fn dict(&self) -> Option<&[u8]> {
        self.first().dict()
    }

    pub(crate) fn stored_bytes(&self) -> u64 {
        self.stores().iter().map(StoreReader::stored_bytes).sum()
    }

    /// Bytes of the payload shards of every store read.
    pub(crate) fn payload_bytes(&self) -> u64 {
        self.stores().iter().map(StoreReader::payload_bytes).sum()
    }

    /// What the remote stores read fetched, added up; `None` when none is
    /// remote.
    pub(crate) fn remote_stats(&self) -> Option<source::RemoteStats> {
        self.stores()
            .iter()
            .filter_map(|r| r.source().map(ShardSource::stats))
            .reduce(|a, b| a + b)
    }

    /// How the local stores read are read.
    pub(crate) fn read_mode(&self) -> cold::ReadMode {
        self.first().read_mode()
    }

    /// Sets how every store read is read (a lazily converted stream's
    /// parts are always read through their maps).
    pub(crate) fn set_read_mode(&self, mode: cold::ReadMode) {
        if let Engine::Lazy(_) = self {
            return;
        }
        for r in self.stores() {
            r.set_read_mode(mode);
        }
    }

    /// Whether [`Self::prefetch`] may read anything ahead now (cheap: no
    /// record is looked at).
    pub(crate) fn wants_prefetch(&self) -> bool {
        if let Engine::Lazy(l) = self {
            return !l.shared().all_ready();
        }
        self.stores().iter().any(StoreReader::wants_prefetch)
    }

    /// Starts reading the stored bytes of the records at `indices` (in
    /// range) ahead of their gather, without waiting: a local store's into
    /// the page cache when it reads cold ([`cold`]), a remote store's
    /// blocks into its block cache. Returns the stored bytes asked for.
    pub(crate) fn prefetch(&self, indices: &[u64]) -> u64 {
        if !self.wants_prefetch() {
            return 0;
        }
        match self {
            Engine::Store(r) => r.prefetch(indices),
            Engine::Parts(p) => p.prefetch(indices),
            Engine::Lazy(l) => l.prefetch(indices),
        }
    }

    /// Drops the records the look-ahead read into memory and no gather
    /// took ([`cold`]), in every store read.
    pub(crate) fn forget_ahead(&self) {
        for r in self.stores() {
            r.forget_ahead();
        }
    }

    /// Starts reading every record of `ranges` (sorted; clipped to the
    /// records there are) ahead of their gathers, as [`Self::prefetch`]
    /// does for single records: the whole blocks of a windowed order, one
    /// advice per run of bytes a shard holds of them. Returns the stored
    /// bytes asked for.
    pub(crate) fn prefetch_ranges(&self, ranges: &[std::ops::Range<u64>]) -> u64 {
        if !self.wants_prefetch() {
            return 0;
        }
        match self {
            Engine::Store(r) => r.prefetch_ranges(ranges),
            Engine::Parts(p) => p.prefetch_ranges(ranges),
            Engine::Lazy(l) => l.prefetch_ranges(ranges),
        }
    }

    pub(crate) fn check_indices(&self, indices: &[u64]) -> Result<(), Error> {
        match self {
            Engine::Store(r) => r.check_indices(indices),
            Engine::Parts(p) => p.check_indices(indices),
            Engine::Lazy(l) => l.check_indices(indices),
        }
    }

    pub(crate) fn loc(&self, index: u64) -> Result<RecordLoc, Error> {
        match self {
            Engine::Store(r) => r.loc(index),
            Engine::Parts(p) => p.loc(index),
            Engine::Lazy(l) => l.loc(index),
        }
    }

    pub(crate) fn gather_fixed<D: Sink>(
        &self,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<(), Error> {
        match self {
            Engine::Store(r) => r.gather_fixed(indices, width, dst),
            Engine::Parts(p) => p.gather_fixed(indices, width, dst),
            Engine::Lazy(l) => l.gather_fixed(indices, width, dst),
        }
    }

    pub(crate) fn gather_fixed_vec(&self, indices: &[u64], width: usize) -> Result<Vec<u8>, Error> {
        match self {
            Engine::Store(r) => r.gather_fixed_vec(indices, width),
            Engine::Parts(_) | Engine::Lazy(_) => reader::gather_vec(indices.len(), width, |dst| {
                self.gather_fixed(indices, width, dst)
            }),
        }
    }

    pub(crate) fn plan_varlen(&self, indices: &[u64], header: usize) -> Result<VarlenPlan, Error> {
        match self {
            Engine::Store(r) => r.plan_varlen(indices, header),
            Engine::Parts(p) => p.plan_varlen(indices, header),
            Engine::Lazy(l) => l.plan_varlen(indices, header),
        }
    }

    pub(crate) fn gather_varlen<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
    ) -> Result<&'d mut [u8], Error> {
        match self {
            Engine::Store(r) => r.gather_varlen(plan, dst),
            Engine::Parts(p) => p.gather_varlen(plan, dst),
            Engine::Lazy(l) => l.gather_varlen(plan, dst),
        }
    }

    pub(crate) fn gather_varlen_packed<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
        headers: &mut [u8],
    ) -> Result<&'d mut [u8], Error> {
        match self {
            Engine::Store(r) => r.gather_varlen_packed(plan, dst, headers),
            Engine::Parts(p) => p.gather_varlen_packed(plan, dst, headers),
            Engine::Lazy(l) => l.gather_varlen_packed(plan, dst, headers),
        }
    }
}
