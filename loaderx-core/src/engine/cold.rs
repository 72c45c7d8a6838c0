//! The cold read path of local stores: records read with many reads in
//! flight instead of page faults on the maps, when they are not in the page
//! cache; and the prefetch hints of the loader's look-ahead.
//!
//! A local store's records are normally copied (or decoded) straight out
//! of its mapped shards. That is the fastest path while the pages are in
//! the page cache, and the slowest when they are not: each missing page is
//! a synchronous fault, one at a time per thread, and the kernel reads
//! around it by up to the device's read-ahead (often 8 MiB on cloud
//! disks), so a 4 KiB record can cost megabytes. A gather that reads
//! *directly* instead hands every record's read to the kernel at once
//! ([`super::io`]: io_uring, or a pool of `pread` threads) with read-ahead
//! disabled on the files (`POSIX_FADV_RANDOM`): each record costs its own
//! pages, and the drive works at the queue depth of the batch.
//!
//! - A raw record is read straight into its place in the destination.
//! - A compressed record (zstd, zstd with a dictionary), and every record of
//!   a packed Ragged gather, is read into one scratch buffer per gather,
//!   its stored bytes found there by [`StagedBytes`] as a remote store's
//!   fetched bytes are; the decode then fans out over the pool as before.
//!   Records adjacent in a shard are read together.
//! - Short reads are continued; a read of nothing before a record's end (a
//!   shard truncated after open) is a [`CorruptRecord`](crate::ErrorKind::CorruptRecord)
//!   error and a failed read an [`Io`](crate::ErrorKind::Io) error, both
//!   naming the store and the record.
//!
//! [`ReadMode`] picks the path per store: `Mapped` always maps, `Direct`
//! always reads, `Auto` (the default) decides per gather from residency:
//! `mincore` on the pages of up to [`SAMPLE`] of the gather's records, at
//! most once per [`VERDICT_NS`] per store (a warm store pays a few system
//! calls a millisecond, and keeps the mapped path). The first cold verdict
//! also advises the maps `MADV_RANDOM`, so that a fault that still happens
//! (a record the sample missed) reads only its own pages. While the
//! loader's look-ahead (which samples the records ahead of the gathers)
//! last found the store cold, within [`AHEAD_NS`], an `Auto` gather reads
//! directly without a sample: the look-ahead's reads make the gather's
//! sample look resident while most of its records are not, and the mapped
//! path would fault on those one at a time.
//!
//! The look-ahead's hints are `POSIX_FADV_WILLNEED` on runs of bytes, in
//! pieces of [`io::WILL_NEED_CHUNK`] (the kernel drops what one advice asks
//! beyond its read-ahead limit); for the windowed order, whole blocks
//! ([`StoreReader::prefetch_ranges`]).
//!
//! The shards' files are opened for direct reads on first use (a store
//! read warm holds no more descriptors than before), checked to be the
//! files mapped at open.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use super::io::{self, ReadReq};
use super::reader::{Staged, StoreReader};
use super::source::StagedBytes;
use crate::codec::Sink;
use crate::error::Error;
use crate::format::{self, RecordLoc};

/// How a local store's records are read.
///
/// Set per store ([`Store::with_read_mode`](crate::Store::with_read_mode)
/// and the same method on every reader type), or for every stream of a
/// loader ([`DataLoaderBuilder::read_mode`](crate::DataLoaderBuilder::read_mode)).
/// It changes how fast a gather is, never what it returns. Stores on
/// object storage (feature `remote`) have their own block cache and ignore
/// it. The default is [`Auto`](Self::Auto), unless the environment sets
/// `LOADERX_READ_MODE` to `auto`, `mapped` or `direct` (read when a store
/// is opened).
///
/// ```
/// use loaderx_core::{Codec, DenseWriter, Dense, ReadMode};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<u8>::create(dir.path().join("x"), &[4], Codec::Raw)?;
/// w.append_slice(&[1, 2, 3, 4, 5, 6, 7, 8], 2)?;
/// w.close()?;
/// let store = Dense::<u8>::open(dir.path().join("x"))?.with_read_mode(ReadMode::Direct);
/// assert_eq!(store.read_mode(), ReadMode::Direct);
/// assert_eq!(store.gather(&[1, 0])?.as_slice().unwrap(), &[5, 6, 7, 8, 1, 2, 3, 4]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReadMode {
    /// Decide per gather: the mapped path while the records' pages are in
    /// the page cache, direct reads when they are not (sampled with
    /// `mincore`, at most once a millisecond per store). The right choice
    /// unless measured otherwise.
    #[default]
    Auto,
    /// Copy and decode out of the memory-mapped shards, as a store always
    /// did: the fastest for a store in the page cache; for one that is not,
    /// each missing page is a synchronous fault with the kernel's
    /// read-around.
    Mapped,
    /// Read every record with positional reads, many in flight at once
    /// (io_uring, or a pool of `pread` threads where io_uring is not
    /// available), without read-ahead: for datasets larger than memory.
    Direct,
}

impl ReadMode {
    fn to_u8(self) -> u8 {
        match self {
            ReadMode::Auto => 0,
            ReadMode::Mapped => 1,
            ReadMode::Direct => 2,
        }
    }

    fn from_u8(v: u8) -> ReadMode {
        match v {
            1 => ReadMode::Mapped,
            2 => ReadMode::Direct,
            _ => ReadMode::Auto,
        }
    }

    /// The mode stores open with: `LOADERX_READ_MODE` when it names one,
    /// else [`Auto`](Self::Auto).
    pub(crate) fn initial() -> ReadMode {
        match std::env::var("LOADERX_READ_MODE")
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            Ok("mapped") => ReadMode::Mapped,
            Ok("direct") => ReadMode::Direct,
            _ => ReadMode::Auto,
        }
    }
}

/// Records of a gather whose pages `Auto` checks.
pub(crate) const SAMPLE: usize = 8;
/// How long an `Auto` verdict holds before the next gather samples again.
pub(crate) const VERDICT_NS: u64 = 1_000_000;
/// How long the look-ahead's cold verdict sends an `Auto` store's gathers
/// to direct reads (the look-ahead samples every step it asks for, but
/// waits while it is `prefetch_bytes` ahead of the consumer).
pub(crate) const AHEAD_NS: u64 = 1_000_000_000;

/// Gathers and reads of the cold path, for tests and monitoring.
#[derive(Debug, Default)]
pub(crate) struct ColdCounters {
    /// Gathers that read directly.
    pub(crate) direct_gathers: AtomicU64,
    /// `read_all` calls served by io_uring, and by the `pread` pool.
    pub(crate) uring_batches: AtomicU64,
    pub(crate) pread_batches: AtomicU64,
    /// Runs of bytes the look-ahead advised `POSIX_FADV_WILLNEED`.
    pub(crate) will_need_runs: AtomicU64,
}

/// The cold path's state of one local store.
pub(crate) struct ColdState {
    mode: AtomicU8,
    /// The last `Auto` verdict: bit 0 set when cold, the rest the time it
    /// was sampled, nanoseconds since `epoch` shifted left by one; 0 when
    /// none was.
    verdict: AtomicU64,
    epoch: Instant,
    /// The look-ahead's last `Auto` verdict (as `verdict`): warm, it does
    /// not sample again for [`VERDICT_NS`]; cold, and younger than
    /// [`AHEAD_NS`], an `Auto` gather reads directly without a sample of
    /// its own.
    ahead: AtomicU64,
    /// The maps were advised `MADV_RANDOM`.
    advised: AtomicBool,
    /// Reads go to the `pread` pool even where io_uring works (tests).
    pread_only: AtomicBool,
    /// Every payload shard's file, opened for direct reads on first use.
    files: Vec<OnceLock<File>>,
    /// Every payload shard's `(device, inode)` at open.
    ids: Vec<Option<(u64, u64)>>,
    /// Boxed: a store's reader stays small beside a parts reader.
    pub(crate) counters: Box<ColdCounters>,
}

impl ColdState {
    /// The state of a store of shards `ids` (`None` for a shard not read
    /// from a local file).
    pub(crate) fn new(ids: Vec<Option<(u64, u64)>>) -> ColdState {
        ColdState {
            mode: AtomicU8::new(ReadMode::initial().to_u8()),
            verdict: AtomicU64::new(0),
            ahead: AtomicU64::new(0),
            epoch: Instant::now(),
            advised: AtomicBool::new(false),
            pread_only: AtomicBool::new(false),
            files: ids.iter().map(|_| OnceLock::new()).collect(),
            ids,
            counters: Box::default(),
        }
    }
}

/// Most shard files kept open for direct reads in the process, all stores
/// together (a store beyond opens its shards per gather).
pub(crate) const MAX_KEPT_FILES: usize = 256;

/// Shard files kept open for direct reads in the process.
static KEPT_FILES: AtomicUsize = AtomicUsize::new(0);

/// A shard file for direct reads: kept by its store, or opened for one
/// gather.
enum FileRef<'a> {
    Kept(&'a File),
    Once(File),
}

impl std::ops::Deref for FileRef<'_> {
    type Target = File;
    fn deref(&self) -> &File {
        match self {
            FileRef::Kept(f) => f,
            FileRef::Once(f) => f,
        }
    }
}

impl ColdState {
    /// Closes the shard files kept for direct reads (a store releasing its
    /// lock holds no descriptor).
    pub(crate) fn close_files(&mut self) {
        let kept = self.files.iter_mut().filter_map(OnceLock::take).count();
        KEPT_FILES.fetch_sub(kept, Ordering::Relaxed);
    }
}

impl Drop for ColdState {
    fn drop(&mut self) {
        self.close_files();
    }
}

/// `(device, inode)` of an open file.
pub(crate) fn file_id(file: &File) -> Option<(u64, u64)> {
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

impl StoreReader {
    /// How this store's records are read.
    pub(crate) fn read_mode(&self) -> ReadMode {
        ReadMode::from_u8(self.cold.mode.load(Ordering::Relaxed))
    }

    /// Sets how this store's records are read.
    pub(crate) fn set_read_mode(&self, mode: ReadMode) {
        self.cold.mode.store(mode.to_u8(), Ordering::Relaxed);
        self.cold.verdict.store(0, Ordering::Relaxed);
    }

    /// Sends this store's direct reads to the `pread` pool (tests of the
    /// fallback).
    #[cfg(test)]
    pub(crate) fn force_pread(&self, on: bool) {
        self.cold.pread_only.store(on, Ordering::Relaxed);
    }

    /// The cold path's counters.
    #[cfg(test)]
    pub(crate) fn cold_counters(&self) -> &ColdCounters {
        &self.cold.counters
    }

    /// Whether a gather of `indices` (in range) reads directly: never for
    /// a remote store, one whose layout copied its records into memory, or
    /// in `Mapped` mode; always in `Direct`; in `Auto`, when a sampled
    /// record's pages are not all in the page cache.
    pub(crate) fn reads_direct(&self, indices: &[u64]) -> bool {
        if self.is_remote() || indices.is_empty() || self.in_memory_copy() {
            return false;
        }
        match self.read_mode() {
            ReadMode::Mapped => false,
            ReadMode::Direct => {
                self.advise_maps();
                true
            }
            ReadMode::Auto => self.auto_verdict(indices),
        }
    }

    /// [`Self::reads_direct`] in `Auto` mode: the store's recent verdict,
    /// or a new one from the pages of up to [`SAMPLE`] of `indices`.
    fn auto_verdict(&self, indices: &[u64]) -> bool {
        let now = self.now_ns();
        // The look-ahead found the records ahead cold: this gather's are
        // cold too, though the look-ahead's reads made a sample of them
        // look resident (the mapped path would then fault on every record
        // not read yet, one at a time).
        let ahead = self.cold.ahead.load(Ordering::Relaxed);
        if ahead & 1 == 1 && now.saturating_sub(ahead >> 1) < AHEAD_NS {
            self.advise_maps();
            return true;
        }
        let last = self.cold.verdict.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last >> 1) < VERDICT_NS {
            return last & 1 == 1;
        }
        let n = indices.len();
        let k = n.min(SAMPLE);
        let cold = (0..k).any(|j| {
            let i = indices[j * n / k];
            match self.record_resident(i) {
                Some(resident) => !resident,
                // Unknown (mincore failed): the mapped path, as before.
                None => false,
            }
        });
        self.cold
            .verdict
            .store((now << 1) | u64::from(cold), Ordering::Relaxed);
        if cold {
            self.advise_maps();
        }
        cold
    }

    /// Whether the pages of record `index`'s stored bytes are in the page
    /// cache; `None` when that cannot be told.
    pub(crate) fn record_resident(&self, index: u64) -> Option<bool> {
        let loc = self.loc(index).ok()?;
        let region = self.shard_bytes(self.shard_index(index));
        io::resident(
            region,
            usize::try_from(loc.offset).ok()?,
            loc.phys_length as usize,
        )
    }

    /// Advises the payload maps `MADV_RANDOM`, once: a fault then reads
    /// its own page, not the device's read-ahead around it.
    fn advise_maps(&self) {
        if !self.cold.advised.swap(true, Ordering::Relaxed) {
            for s in 0..self.data_shards() {
                if let Some(map) = self.shard_map(s) {
                    let _ = map.advise(memmap2::Advice::Random);
                }
            }
        }
    }

    /// Shard `s`'s file, opened for direct reads (and checked to be the
    /// file mapped at open): kept open for the next gathers while the store
    /// holds its lock and fewer than [`MAX_KEPT_FILES`] are kept in the
    /// process, else for this gather only (a store that released its lock
    /// holds no descriptor between gathers).
    fn shard_file(&self, s: usize) -> Result<FileRef<'_>, Error> {
        let cell = &self.cold.files[s];
        if let Some(f) = cell.get() {
            return Ok(FileRef::Kept(f));
        }
        let p = self.path().join(format::data_file(s));
        let Some((file, _)) = super::files::open_regular(&p)? else {
            return Err(Error::io(
                &p,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "payload shard is gone (removed after open)",
                ),
            ));
        };
        if file_id(&file) != self.cold.ids[s] || self.cold.ids[s].is_none() {
            return Err(Error::io(
                &p,
                std::io::Error::other("payload shard was replaced after open"),
            ));
        }
        io::clear_nonblock(&file).map_err(|e| Error::io(&p, e))?;
        io::advise_random(&file);
        let keep = self.holds_lock() && KEPT_FILES.fetch_add(1, Ordering::Relaxed) < MAX_KEPT_FILES;
        if !keep {
            if self.holds_lock() {
                KEPT_FILES.fetch_sub(1, Ordering::Relaxed);
            }
            return Ok(FileRef::Once(file));
        }
        if let Err(file) = cell.set(file) {
            // Another thread kept one first: this one is for this gather.
            KEPT_FILES.fetch_sub(1, Ordering::Relaxed);
            return Ok(FileRef::Once(file));
        }
        Ok(FileRef::Kept(
            cell.get().unwrap_or_else(|| unreachable!("set above")),
        ))
    }

    /// Runs `reqs` (each tagged with its record and shard, for errors) and
    /// counts the backend that did.
    fn run_reads(&self, reqs: &mut [ReadReq<'_>], tags: &[(u64, usize)]) -> Result<(), Error> {
        let c = &self.cold.counters;
        match io::read_all(reqs, self.cold.pread_only.load(Ordering::Relaxed)) {
            Ok(io::Backend::Uring) => {
                c.uring_batches.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Ok(io::Backend::Pread) => {
                c.pread_batches.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err((k, e)) => {
                let (index, s) = tags[k];
                let p = self.path().join(format::data_file(s));
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    return Err(Error::corrupt_record(
                        self.path(),
                        index,
                        format!("{}: {e}", p.display()),
                    ));
                }
                Err(Error::io(
                    p,
                    std::io::Error::new(e.kind(), format!("record {index}: {e}")),
                ))
            }
        }
    }

    /// Reads raw records `(index, location, destination)` straight into
    /// their destinations, all at once. On `Ok` every destination was
    /// written whole.
    pub(super) fn read_raw_direct<D: Sink>(
        &self,
        jobs: &mut [(u64, RecordLoc, &mut [D])],
    ) -> Result<(), Error> {
        self.cold
            .counters
            .direct_gathers
            .fetch_add(1, Ordering::Relaxed);
        for (index, loc, dst) in jobs.iter() {
            if loc.logic_length as usize != dst.len() || loc.phys_length != loc.logic_length {
                return Err(Error::corrupt_record(
                    self.path(),
                    *index,
                    format!(
                        "raw record stores {} bytes for {} logical, expected {}",
                        loc.phys_length,
                        loc.logic_length,
                        dst.len()
                    ),
                ));
            }
        }
        // Submitted in file order: the drive and the block layer merge
        // neighbours.
        let mut order: Vec<(usize, u64, usize)> = jobs
            .iter()
            .enumerate()
            .map(|(k, (i, loc, _))| (self.shard_index(*i), loc.offset, k))
            .collect();
        order.sort_unstable();
        let mut files = Vec::with_capacity(self.data_shards());
        for s in 0..self.data_shards() {
            files.push(if order.iter().any(|o| o.0 == s) {
                Some(self.shard_file(s)?)
            } else {
                None
            });
        }
        let mut tags = Vec::with_capacity(jobs.len());
        let mut slots: Vec<Option<(u64, RecordLoc, &mut [D])>> = Vec::with_capacity(jobs.len());
        for (i, loc, d) in jobs.iter_mut() {
            slots.push(Some((*i, *loc, &mut **d)));
        }
        let mut reqs = Vec::with_capacity(order.len());
        for (s, offset, k) in order {
            let Some((i, _, d)) = slots[k].take() else {
                continue;
            };
            let Some(file) = files[s].as_deref() else {
                continue;
            };
            reqs.push(ReadReq::new(file, offset, d));
            tags.push((i, s));
        }
        self.run_reads(&mut reqs, &tags)
    }

    /// Reads the stored bytes of `records` (validated locations) into one
    /// scratch buffer, records adjacent in a shard with one read, and
    /// stages them for [`Self::stored`]: what a compressed or packed gather
    /// decodes from.
    pub(super) fn read_stored_direct(&self, records: &[(u64, RecordLoc)]) -> Result<Staged, Error> {
        self.cold
            .counters
            .direct_gathers
            .fetch_add(1, Ordering::Relaxed);
        let mut wanted: Vec<(usize, u64, u64, u64)> = records
            .iter()
            .map(|&(i, loc)| {
                (
                    self.shard_index(i),
                    loc.offset,
                    loc.offset + u64::from(loc.phys_length),
                    i,
                )
            })
            .collect();
        wanted.sort_unstable();
        // Coalesced runs: (shard, start, end, first record).
        let mut runs: Vec<(usize, u64, u64, u64)> = Vec::new();
        for (s, start, end, i) in wanted {
            match runs.last_mut() {
                Some(r) if r.0 == s && start <= r.2 => r.2 = r.2.max(end),
                _ => runs.push((s, start, end, i)),
            }
        }
        let total = runs.iter().try_fold(0usize, |t, r| {
            usize::try_from(r.2 - r.1)
                .ok()
                .and_then(|n| t.checked_add(n))
        });
        let Some(total) = total else {
            return Err(crate::ErrorKind::Buffer {
                detail: format!(
                    "the stored bytes of {} records overflow memory",
                    records.len()
                ),
            }
            .into());
        };
        let mut spans = Vec::with_capacity(runs.len());
        let mut at = 0usize;
        for r in &runs {
            spans.push((r.0, r.1, r.2, at));
            at += (r.2 - r.1) as usize;
        }
        let buf = super::reader::gather_vec(1, total, |dst| {
            let mut files = Vec::with_capacity(self.data_shards());
            for s in 0..self.data_shards() {
                files.push(if runs.iter().any(|r| r.0 == s) {
                    Some(self.shard_file(s)?)
                } else {
                    None
                });
            }
            let mut reqs = Vec::with_capacity(runs.len());
            let mut tags = Vec::with_capacity(runs.len());
            let mut rest = dst;
            for r in &runs {
                let (d, tail) = rest.split_at_mut((r.2 - r.1) as usize);
                rest = tail;
                if let Some(file) = files[r.0].as_deref() {
                    reqs.push(ReadReq::new(file, r.1, d));
                    tags.push((r.3, r.0));
                }
            }
            self.run_reads(&mut reqs, &tags)
        })?;
        Ok(Staged::Fetched(Box::new(LocalBytes { buf, spans })))
    }

    /// Starts reading the stored bytes of the records at `indices` (in
    /// range) ahead of their gather, without waiting for them (the
    /// loader's look-ahead): a remote store's blocks into its block cache
    /// ([`ShardSource::prefetch`](super::source::ShardSource::prefetch));
    /// a local store's into the page cache: for a
    /// local store in `Direct` mode, or in `Auto` when a sampled record is
    /// not in the page cache, each record's pages are asked for
    /// (`POSIX_FADV_WILLNEED`), records adjacent in a shard together; the
    /// gather that comes for them later finds them there (a page still in
    /// flight is waited for, not read again). Nothing for a warm or
    /// `Mapped` store. Returns the stored bytes asked for.
    pub(crate) fn prefetch(&self, indices: &[u64]) -> u64 {
        let Some(source) = self.source() else {
            return self.prefetch_local(indices);
        };
        let wanted = indices
            .iter()
            .filter_map(|&i| {
                let loc = self.loc(i).ok()?;
                Some((i, self.shard_index(i), loc.offset, loc.phys_length))
            })
            .collect();
        source.prefetch(wanted)
    }

    /// Whether [`Self::prefetch`] may read anything ahead now, without
    /// looking at records: a remote store, a `Direct` one, or an `Auto` one
    /// the look-ahead has not found warm in the last [`VERDICT_NS`] (so a
    /// warm store costs the look-ahead a sample a millisecond).
    pub(crate) fn wants_prefetch(&self) -> bool {
        if self.is_remote() {
            return true;
        }
        match self.read_mode() {
            ReadMode::Mapped => false,
            ReadMode::Direct => true,
            ReadMode::Auto => {
                let ahead = self.cold.ahead.load(Ordering::Relaxed);
                ahead & 1 == 1
                    || ahead == 0
                    || self.now_ns().saturating_sub(ahead >> 1) >= VERDICT_NS
            }
        }
    }

    /// Nanoseconds since the store was opened (at least 1).
    fn now_ns(&self) -> u64 {
        (self.cold.epoch.elapsed().as_nanos() as u64).max(1)
    }

    /// Whether the look-ahead of a local store reads ahead of the records
    /// `sample(0..n)` (those it is about to ask for): never in `Mapped`
    /// mode, a remote store or an in-memory copy; always in `Direct`; in
    /// `Auto` when one of up to [`SAMPLE`] of them is not in the page cache
    /// (its own sample, not the gathers' verdict: a store kept warm by this
    /// look-ahead is still cold ahead of it). The verdict is kept for the
    /// gathers ([`Self::auto_verdict`]).
    fn ahead_go(&self, n: usize, sample: impl Fn(usize) -> u64) -> bool {
        if self.is_remote() || n == 0 || self.in_memory_copy() {
            return false;
        }
        let go = match self.read_mode() {
            ReadMode::Mapped => false,
            ReadMode::Direct => true,
            ReadMode::Auto if !self.wants_prefetch() => false,
            ReadMode::Auto => {
                let k = n.min(SAMPLE);
                let cold = (0..k).any(|j| self.record_resident(sample(j * n / k)) == Some(false));
                self.cold
                    .ahead
                    .store((self.now_ns() << 1) | u64::from(cold), Ordering::Relaxed);
                cold
            }
        };
        if go {
            self.advise_maps();
        }
        go
    }

    /// [`Self::prefetch`] of a local store.
    fn prefetch_local(&self, indices: &[u64]) -> u64 {
        if !self.ahead_go(indices.len(), |j| indices[j]) {
            return 0;
        }
        let mut wanted: Vec<(usize, u64, u64)> = indices
            .iter()
            .filter_map(|&i| {
                let loc = self.loc(i).ok()?;
                Some((
                    self.shard_index(i),
                    loc.offset,
                    loc.offset + u64::from(loc.phys_length),
                ))
            })
            .collect();
        wanted.sort_unstable();
        let mut runs: Vec<(usize, u64, u64)> = Vec::new();
        for (s, start, end) in wanted {
            match runs.last_mut() {
                Some(r) if r.0 == s && start <= r.2 => r.2 = r.2.max(end),
                _ => runs.push((s, start, end)),
            }
        }
        self.will_need_runs(runs)
    }

    /// Advises `POSIX_FADV_WILLNEED` on the byte runs `(shard, start, end)`;
    /// the bytes advised.
    fn will_need_runs(&self, runs: impl IntoIterator<Item = (usize, u64, u64)>) -> u64 {
        let mut bytes = 0;
        for (s, start, end) in runs {
            if let Ok(file) = self.shard_file(s) {
                io::will_need(&file, start, end - start);
                bytes += end - start;
                self.cold
                    .counters
                    .will_need_runs
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        bytes
    }

    /// Starts reading every record of `ranges` (in range) ahead of their
    /// gathers, as [`Self::prefetch`] does for single records: whole
    /// blocks of a windowed order, which the drive then reads at its
    /// sequential speed. A local store advises each maximal run of bytes
    /// that the ranges' records fill in a shard once (records of one range
    /// alternate shards: each shard holds a run of them); a remote store
    /// asks its block cache for every record. Returns the stored bytes
    /// asked for.
    pub(crate) fn prefetch_ranges(&self, ranges: &[std::ops::Range<u64>]) -> u64 {
        let len = self.len();
        let clip = |r: &std::ops::Range<u64>| r.start.min(len)..r.end.min(len);
        if let Some(source) = self.source() {
            let wanted = ranges
                .iter()
                .flat_map(&clip)
                .filter_map(|i| {
                    let loc = self.loc(i).ok()?;
                    Some((i, self.shard_index(i), loc.offset, loc.phys_length))
                })
                .collect();
            return source.prefetch(wanted);
        }
        let count: u64 = ranges.iter().map(|r| clip(r).end - clip(r).start).sum();
        let Ok(n) = usize::try_from(count) else {
            return 0;
        };
        // The j-th record of the ranges laid end to end.
        let nth = |mut j: usize| -> u64 {
            for r in ranges {
                let r = clip(r);
                let k = (r.end - r.start) as usize;
                if j < k {
                    return r.start + j as u64;
                }
                j -= k;
            }
            0
        };
        if !self.ahead_go(n, nth) {
            return 0;
        }
        // Per shard, the run being extended: records of a shard follow one
        // another in the common layouts, so a range costs one advice a shard.
        let mut open: Vec<Option<(u64, u64)>> = vec![None; self.data_shards()];
        let mut runs = Vec::new();
        for i in ranges.iter().flat_map(clip) {
            let Ok(loc) = self.loc(i) else { continue };
            let s = self.shard_index(i);
            let (start, end) = (loc.offset, loc.offset + u64::from(loc.phys_length));
            match &mut open[s] {
                Some(run) if start >= run.0 && start <= run.1 => run.1 = run.1.max(end),
                slot => {
                    if let Some((a, b)) = slot.replace((start, end)) {
                        runs.push((s, a, b));
                    }
                }
            }
        }
        runs.extend(
            open.into_iter()
                .enumerate()
                .filter_map(|(s, r)| r.map(|(a, b)| (s, a, b))),
        );
        self.will_need_runs(runs)
    }
}

/// The stored bytes of a local gather's records, read into one buffer:
/// `spans` are `(shard, start, end, at)`, sorted, disjoint within a shard,
/// the bytes `start..end` of the shard lying at `at` in `buf`.
struct LocalBytes {
    buf: Vec<u8>,
    spans: Vec<(usize, u64, u64, usize)>,
}

impl StagedBytes for LocalBytes {
    fn get(&self, shard: usize, offset: u64, len: u32) -> Option<&[u8]> {
        let k = self
            .spans
            .partition_point(|p| (p.0, p.1) <= (shard, offset))
            .checked_sub(1)?;
        let (s, start, end, at) = self.spans[k];
        let stop = offset.checked_add(u64::from(len))?;
        if s != shard || stop > end {
            return None;
        }
        let from = at + usize::try_from(offset - start).ok()?;
        self.buf.get(from..from + len as usize)
    }
}

#[cfg(test)]
#[path = "cold_tests.rs"]
mod tests;
