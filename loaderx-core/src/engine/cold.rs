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
//! ([`super::io`]: io_uring, or a pool of `pread` threads):
//!
//! - with `O_DIRECT` where the file system allows it (the page cache is
//!   bypassed: in a memory-limited cgroup, page-cache reads cost the
//!   kernel a third of the drive's bandwidth in allocation and reclaim):
//!   each record's bytes are widened to the alignment `statx` reports
//!   (512 bytes on most drives), records whose widened bytes meet are read
//!   together (in pieces of at most 1 MiB), into one aligned scratch of
//!   huge pages ([`super::scratch`]: one segment per read for the disk,
//!   not one per 4 KiB page); raw
//!   records are copied into their destinations, compressed ones decoded
//!   from it as a remote store's fetched bytes are ([`StagedBytes`]);
//! - else through the page cache with read-ahead disabled on the files
//!   (`POSIX_FADV_RANDOM`): raw records straight into their destinations,
//!   compressed ones into a scratch. A read refused `EINVAL` turns
//!   `O_DIRECT` off for the store (and `LOADERX_NO_O_DIRECT=1` for the
//!   process).
//! - Short reads are continued (an `O_DIRECT` read may end past the file,
//!   within its alignment); a read of nothing before a record's end (a
//!   shard truncated after open) is a [`CorruptRecord`](crate::ErrorKind::CorruptRecord)
//!   error and a failed read an [`Io`](crate::ErrorKind::Io) error, both
//!   naming the store and the record.
//!
//! The loader's look-ahead ([`StoreReader::prefetch`]) reads the records of
//! the steps ahead the same way, on its own thread's ring without waiting
//! (the buffers owned by the ring until each read completes), into the
//! store's [`AheadCache`]: each record once, with one use per step that
//! draws it. A gather takes its records from there (waiting for those
//! still being read, never reading them again) and reads the rest itself.
//! What a stopping loader leaves behind is dropped
//! ([`StoreReader::forget_ahead`]).
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
//! Where `O_DIRECT` cannot be had, the look-ahead's reads are hints
//! instead: `POSIX_FADV_WILLNEED` on runs of bytes, in pieces of
//! [`io::WILL_NEED_CHUNK`] (the kernel drops what one advice asks beyond
//! its read-ahead limit). The windowed order's look-ahead advises whole
//! blocks into the page cache ([`StoreReader::prefetch_ranges`]; over
//! records of half a megabyte or more it reads records as other orders do),
//! which the drive reads at its sequential speed; its gathers then read
//! through the page cache, to find them there.
//!
//! The shards' files are opened for direct reads on first use (a store
//! read warm holds no more descriptors than before), checked to be the
//! files mapped at open.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
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
    /// Groups of records the look-ahead read into memory (`O_DIRECT`).
    pub(crate) ahead_groups: AtomicU64,
    /// Records gathers took from what the look-ahead read into memory.
    pub(crate) ahead_hits: AtomicU64,
    /// Records gathers read themselves with `O_DIRECT`.
    pub(crate) own_reads: AtomicU64,
    /// Gathers whose reads were `O_DIRECT`.
    pub(crate) o_direct_gathers: AtomicU64,
    /// Records the look-ahead read into memory.
    pub(crate) ahead_records: AtomicU64,
}

/// A local store's `O_DIRECT` reads: its files, and the records its
/// look-ahead read into memory.
struct DirectIo {
    /// Every payload shard's file opened `O_DIRECT` on first use, with the
    /// alignment its reads need; `None` where the file system refuses it.
    files: Vec<OnceLock<DirectFile>>,
    /// `O_DIRECT` reads are off for this store: refused by a read, or by
    /// `LOADERX_NO_O_DIRECT`.
    off: AtomicBool,
    /// When the look-ahead last advised a windowed order's blocks into the
    /// page cache (as `verdict`'s time, 0 for never): gathers then read
    /// buffered, to find those pages there.
    ranged: AtomicU64,
    /// Records the look-ahead read into memory for the gathers to come.
    ahead: Arc<AheadCache>,
}

/// A shard file opened `O_DIRECT` and the alignment its reads need; `None`
/// where it cannot be.
type DirectFile = Option<(Arc<File>, usize)>;

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
    /// `O_DIRECT` reads and the look-ahead's reads into memory (boxed: a
    /// store's reader stays small beside a parts reader).
    direct: Box<DirectIo>,
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
            direct: Box::new(DirectIo {
                files: ids.iter().map(|_| OnceLock::new()).collect(),
                // `LOADERX_NO_O_DIRECT`: direct reads go through the page
                // cache (read-ahead off), as before `O_DIRECT` reads.
                off: AtomicBool::new(io::env_flag("LOADERX_NO_O_DIRECT")),
                ranged: AtomicU64::new(0),
                ahead: Arc::default(),
            }),
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
        let kept = self.files.iter_mut().filter_map(OnceLock::take).count()
            + self
                .direct
                .files
                .iter_mut()
                .filter_map(|f| f.take().flatten())
                .count();
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

    /// Makes this store's direct reads go through the page cache, as where
    /// `O_DIRECT` is refused (tests of the fallback); `false` lets them use
    /// `O_DIRECT` again.
    #[cfg(test)]
    pub(crate) fn force_buffered(&self, on: bool) {
        self.cold.direct.off.store(on, Ordering::Relaxed);
    }

    /// Whether this store's shard 0 can be read `O_DIRECT` here (tests: a
    /// file system such as tmpfs refuses it).
    #[cfg(test)]
    pub(crate) fn o_direct_usable(&self) -> bool {
        self.data_shards() > 0 && self.direct_file(0).is_some()
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
        self.run_reads_io(reqs)
            .map_err(|(k, e)| self.read_error(tags[k], e))
    }

    /// [`Self::run_reads`], the failed request's index and error as the
    /// system gave it.
    fn run_reads_io(&self, reqs: &mut [ReadReq<'_>]) -> Result<(), (usize, std::io::Error)> {
        let c = &self.cold.counters;
        let backend = io::read_all(reqs, self.cold.pread_only.load(Ordering::Relaxed))?;
        match backend {
            io::Backend::Uring => c.uring_batches.fetch_add(1, Ordering::Relaxed),
            io::Backend::Pread => c.pread_batches.fetch_add(1, Ordering::Relaxed),
        };
        Ok(())
    }

    /// The error of a read of record `index` in shard `s` that failed with
    /// `e`: a read that came back short is a corrupt record (a shard
    /// truncated after open), any other an I/O error; both name the record.
    fn read_error(&self, (index, s): (u64, usize), e: std::io::Error) -> Error {
        let p = self.path().join(format::data_file(s));
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            return Error::corrupt_record(self.path(), index, format!("{}: {e}", p.display()));
        }
        Error::io(
            p,
            std::io::Error::new(e.kind(), format!("record {index}: {e}")),
        )
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
        if self.o_direct() {
            let records: Vec<(u64, RecordLoc)> = jobs.iter().map(|j| (j.0, j.1)).collect();
            if let Some(bytes) = self.read_o_direct(&records)? {
                for (index, loc, dst) in jobs.iter_mut() {
                    let src = bytes
                        .get(self.shard_index(*index), loc.offset, loc.phys_length)
                        .ok_or_else(|| {
                            Error::corrupt_record(self.path(), *index, "record not read")
                        })?;
                    D::put(dst, src);
                }
                return Ok(());
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
        if self.o_direct()
            && let Some(bytes) = self.read_o_direct(records)?
        {
            return Ok(Staged::Fetched(Box::new(bytes)));
        }
        self.read_spans_buffered(records)
            .map(|b| Staged::Fetched(Box::new(b)) as Staged)
    }

    /// The stored bytes of `records` (validated locations) read
    /// `O_DIRECT`: those the look-ahead read into memory
    /// ([`Self::take_ahead`]), the rest read now ([`Self::read_spans`]).
    /// `Ok(None)` when the store cannot be read `O_DIRECT` (the caller
    /// reads through the page cache).
    fn read_o_direct(&self, records: &[(u64, RecordLoc)]) -> Result<Option<Composite>, Error> {
        // Each record once (a batch may draw one twice).
        let mut unique = records.to_vec();
        unique.sort_unstable_by_key(|r| r.0);
        unique.dedup_by_key(|r| r.0);
        let (ahead, rest) = self.take_ahead(unique);
        let own = if rest.is_empty() {
            None
        } else {
            match self.read_spans(&rest)? {
                Some(own) => Some(own),
                None => return Ok(None),
            }
        };
        Ok(Some(Composite { own, ahead }))
    }

    /// Whether this store's direct reads may use `O_DIRECT`: not refused
    /// (by a read or `LOADERX_NO_O_DIRECT`), and no windowed look-ahead
    /// advised pages into the page cache within [`AHEAD_NS`] (those reads
    /// find them there).
    fn o_direct(&self) -> bool {
        if self.cold.direct.off.load(Ordering::Relaxed) {
            return false;
        }
        let ranged = self.cold.direct.ranged.load(Ordering::Relaxed);
        ranged == 0 || self.now_ns().saturating_sub(ranged) >= AHEAD_NS
    }

    /// Shard `s`'s file opened `O_DIRECT` and the alignment its reads need,
    /// opened on first use and kept while the store holds its lock (and
    /// fewer than [`MAX_KEPT_FILES`] are kept); `None` when the file system
    /// refuses `O_DIRECT`, or the file cannot be kept.
    fn direct_file(&self, s: usize) -> Option<(&Arc<File>, usize)> {
        if !self.holds_lock() {
            return None;
        }
        let cell = &self.cold.direct.files[s];
        let kept = cell.get_or_init(|| {
            let id = self.cold.ids[s]?;
            if KEPT_FILES.fetch_add(1, Ordering::Relaxed) >= MAX_KEPT_FILES {
                KEPT_FILES.fetch_sub(1, Ordering::Relaxed);
                return None;
            }
            let opened = io::open_direct(&self.path().join(format::data_file(s)), id);
            if opened.is_none() {
                KEPT_FILES.fetch_sub(1, Ordering::Relaxed);
            }
            opened.map(|(f, a)| (Arc::new(f), a))
        });
        kept.as_ref().map(|(f, a)| (f, *a))
    }

    /// The `O_DIRECT` reads of the stored bytes of `records` (validated
    /// locations): each record's bytes widened to the alignment, records
    /// whose widened bytes meet read together, laid end to end in one
    /// aligned buffer. `Ok(None)` when a shard cannot be read `O_DIRECT`
    /// (its file system refuses it, or its file cannot be kept open).
    fn plan_direct(&self, records: &[(u64, RecordLoc)]) -> Result<Option<DirectPlan>, Error> {
        let mut shards: Vec<Option<(Arc<File>, usize)>> = vec![None; self.data_shards()];
        let mut wanted: Vec<(usize, u64, u64, u64)> = Vec::with_capacity(records.len());
        for &(i, loc) in records {
            let s = self.shard_index(i);
            if shards[s].is_none() {
                match self.direct_file(s) {
                    Some((f, a)) => shards[s] = Some((Arc::clone(f), a)),
                    None => return Ok(None),
                }
            }
            let align = shards[s].as_ref().map_or(1, |f| f.1) as u64;
            let end = loc.offset + u64::from(loc.phys_length);
            wanted.push((s, loc.offset / align * align, end, i));
        }
        wanted.sort_unstable();
        // Extents `(shard, start, end of the bytes wanted, first record)`:
        // starts aligned; merged when one's aligned end meets the next.
        let mut runs: Vec<(usize, u64, u64, u64)> = Vec::new();
        for (s, start, end, i) in wanted {
            let align = shards[s].as_ref().map_or(1, |f| f.1) as u64;
            match runs.last_mut() {
                Some(r) if r.0 == s && start <= r.2.next_multiple_of(align) => r.2 = r.2.max(end),
                _ => runs.push((s, start, end, i)),
            }
        }
        let mut reads = Vec::with_capacity(runs.len());
        let mut spans = Vec::with_capacity(runs.len());
        let mut tags = Vec::with_capacity(runs.len());
        let mut at = 0usize;
        for r in &runs {
            let Some((file, align)) = shards[r.0].as_ref() else {
                return Ok(None);
            };
            let len = usize::try_from(r.2.next_multiple_of(*align as u64) - r.1).ok();
            let next = len.and_then(|l| at.checked_add(l));
            let (Some(len), Some(next)) = (len, next) else {
                return Err(overflow(records.len()));
            };
            // In pieces of at most DIRECT_PIECE.
            let need = (r.2 - r.1) as usize;
            let mut from = 0;
            while from < len {
                let piece = (len - from).min(DIRECT_PIECE);
                reads.push(io::OwnedRead {
                    file: Arc::clone(file),
                    offset: r.1 + from as u64,
                    at: at + from,
                    len: piece,
                    need: need.saturating_sub(from).min(piece),
                    align: *align,
                });
                tags.push((r.3, r.0));
                from += piece;
            }
            spans.push((r.0, r.1, r.2, at));
            at = next;
        }
        Ok(Some(DirectPlan {
            reads,
            spans,
            tags,
            total: at,
        }))
    }

    /// Reads the stored bytes of `records` (validated locations, each
    /// record once) with `O_DIRECT` ([`Self::plan_direct`]) on this thread. `Ok(None)` when a
    /// shard cannot be read `O_DIRECT` (the caller then reads buffered): as
    /// for the plan, or a read was refused (`EINVAL`), after which the
    /// store reads buffered for good.
    fn read_spans(&self, records: &[(u64, RecordLoc)]) -> Result<Option<LocalBytes>, Error> {
        let Some(plan) = self.plan_direct(records)? else {
            return Ok(None);
        };
        let Some(mut buf) = io::AlignedBuf::take(plan.total) else {
            return Err(overflow(records.len()));
        };
        let mut reqs = Vec::with_capacity(plan.reads.len());
        let mut rest = buf.as_mut_slice();
        for r in &plan.reads {
            let (d, tail) = rest.split_at_mut(r.len);
            rest = tail;
            reqs.push(ReadReq::direct(&r.file, r.offset, d, r.need, r.align));
        }
        match self.run_reads_io(&mut reqs) {
            Ok(()) => {}
            Err((_, e)) if e.raw_os_error() == Some(libc::EINVAL) => {
                // The file system took the open but refuses these reads.
                self.cold.direct.off.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            Err((k, e)) => return Err(self.read_error(plan.tags[k], e)),
        }
        drop(reqs);
        let c = &self.cold.counters;
        c.o_direct_gathers.fetch_add(1, Ordering::Relaxed);
        c.own_reads
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        Ok(Some(LocalBytes {
            buf: Buf::Aligned(buf),
            spans: plan.spans,
        }))
    }

    /// The look-ahead's reads of `indices` (in range) into memory, with
    /// `O_DIRECT`: the records not in [`AheadCache`] yet are entered there
    /// as being read and their reads started on this thread's ring
    /// ([`io::submit_owned`]); each one already there gains a use. `None`
    /// when the store cannot be read `O_DIRECT` (the caller advises the
    /// page cache instead). Returns the stored bytes asked for.
    fn prefetch_direct(&self, indices: &[u64]) -> Option<u64> {
        if !self.o_direct() {
            return None;
        }
        let mut unique: Vec<u64> = indices.to_vec();
        unique.sort_unstable();
        unique.dedup();
        let located: Vec<(u64, RecordLoc)> = unique
            .iter()
            .filter_map(|&i| self.loc(i).ok().map(|l| (i, l)))
            .collect();
        // Refused before anything is entered: the caller advises instead.
        if let Some(&(i, _)) = located.first() {
            self.direct_file(self.shard_index(i))?;
        }
        let cache = &self.cold.direct.ahead;
        let mut new = Vec::new();
        let mut bytes = 0;
        {
            let mut map = cache.lock();
            let generation = map.next_gen();
            for &(i, loc) in &located {
                bytes += u64::from(loc.phys_length);
                if let Some(slot) = map.slots.get_mut(&i) {
                    slot.uses += 1;
                } else {
                    map.insert(i, u64::from(loc.phys_length), generation);
                    new.push((i, loc));
                }
            }
            cache.count.store(map.slots.len(), Ordering::Relaxed);
        }
        if new.is_empty() {
            return Some(bytes);
        }
        let plan = match self.plan_direct(&new) {
            Ok(Some(plan)) => plan,
            _ => {
                cache.fail(new.iter().map(|r| r.0));
                return Some(bytes);
            }
        };
        let Some(buf) = io::AlignedBuf::take(plan.total) else {
            cache.fail(new.iter().map(|r| r.0));
            return Some(bytes);
        };
        let done_cache = Arc::clone(cache);
        let spans = plan.spans;
        let records: Vec<u64> = new.iter().map(|r| r.0).collect();
        let c = &self.cold.counters;
        c.ahead_groups.fetch_add(1, Ordering::Relaxed);
        c.ahead_records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        io::submit_owned(
            io::OwnedReads {
                buf,
                reads: plan.reads,
                on_done: Box::new(move |buf, failed| {
                    if failed.is_some() {
                        // The gathers read these themselves (and report
                        // what fails).
                        done_cache.fail(records.into_iter());
                    } else {
                        let bytes = Arc::new(LocalBytes {
                            buf: Buf::Aligned(buf),
                            spans,
                        });
                        done_cache.ready(records.into_iter(), &bytes);
                    }
                }),
            },
            self.cold.pread_only.load(Ordering::Relaxed),
        );
        Some(bytes)
    }

    /// Takes the records of `records` (sorted, each once) that the
    /// look-ahead read into memory, one use each, waiting for those still
    /// being read: the buffers that hold them, and the records left to
    /// read.
    fn take_ahead(
        &self,
        records: Vec<(u64, RecordLoc)>,
    ) -> (Vec<Arc<LocalBytes>>, Vec<(u64, RecordLoc)>) {
        let cache = &self.cold.direct.ahead;
        if cache.count.load(Ordering::Relaxed) == 0 {
            return (Vec::new(), records);
        }
        let mut map = cache.lock();
        loop {
            let reading = records.iter().any(|(i, _)| {
                map.slots
                    .get(i)
                    .is_some_and(|s| matches!(s.state, SlotState::Reading))
            });
            if !reading {
                break;
            }
            // This thread's own look-ahead reads (a caller that prefetched
            // then gathers) complete only when it takes them.
            if io::owned_in_flight() {
                drop(map);
                io::reap_owned(true);
                map = cache.lock();
                continue;
            }
            map = cache.ready.wait(map).unwrap_or_else(|p| p.into_inner());
        }
        let asked = records.len();
        let mut groups: Vec<Arc<LocalBytes>> = Vec::new();
        let mut rest = Vec::new();
        for r in records {
            match map.take(r.0) {
                Some(bytes) => {
                    if !groups.iter().any(|g| Arc::ptr_eq(g, &bytes)) {
                        groups.push(bytes);
                    }
                }
                None => rest.push(r),
            }
        }
        cache.count.store(map.slots.len(), Ordering::Relaxed);
        drop(map);
        self.cold
            .counters
            .ahead_hits
            .fetch_add((asked - rest.len()) as u64, Ordering::Relaxed);
        (groups, rest)
    }

    /// Drops every record the look-ahead read and no gather took (a
    /// loader that stops leaves none behind).
    pub(crate) fn forget_ahead(&self) {
        self.cold.direct.ahead.forget();
    }

    /// Reads the stored bytes of `records` (validated locations) into one
    /// scratch buffer through the page cache, records adjacent in a shard
    /// with one read.
    fn read_spans_buffered(&self, records: &[(u64, RecordLoc)]) -> Result<LocalBytes, Error> {
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
            return Err(overflow(records.len()));
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
        Ok(LocalBytes {
            buf: Buf::Vec(buf),
            spans,
        })
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
        if let Some(bytes) = self.prefetch_direct(indices) {
            return bytes;
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
        self.cold
            .direct
            .ranged
            .store(self.now_ns(), Ordering::Relaxed);
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

/// The `O_DIRECT` reads of a gather or a look-ahead step
/// ([`StoreReader::plan_direct`]).
struct DirectPlan {
    reads: Vec<io::OwnedRead>,
    /// `(shard, start, end, at)` of each read, as [`LocalBytes`] has them.
    spans: Vec<(usize, u64, u64, usize)>,
    /// `(first record, shard)` of each read, for errors.
    tags: Vec<(u64, usize)>,
    /// Bytes of the buffer.
    total: usize,
}

/// Most bytes of one `O_DIRECT` read; a longer run of records is read in
/// pieces. Into huge pages (see `engine::scratch`) a 1 MiB piece is one or
/// two segments of a disk request. 1 MiB records cold, interleaved runs:
/// 2 540–2 720 MiB/s in 1 MiB pieces, 2 050–2 630 in 256 KiB ones; into
/// 4 KiB pages (256 segments, split by the block layer at 254) the two
/// read the same.
const DIRECT_PIECE: usize = 1 << 20;

/// Most stored bytes [`AheadCache`] holds, whatever the loaders ask: past
/// it, the records entered first and not taken are dropped (a gather then
/// reads them itself).
pub(crate) const AHEAD_CACHE_MAX: u64 = 1 << 30;

/// The records a store's look-ahead read into memory for the gathers to
/// come (`O_DIRECT`, [`StoreReader::prefetch`]): each with the uses the
/// look-ahead asked for (one per step that draws it), taken one per
/// gather; a record being read is waited for, never read twice.
#[derive(Default)]
pub(crate) struct AheadCache {
    map: Mutex<AheadMap>,
    /// Woken when records being read are ready (or failed).
    ready: Condvar,
    /// Records in `map` (read without the lock: most gathers find none).
    count: AtomicUsize,
}

#[derive(Default)]
struct AheadMap {
    slots: HashMap<u64, Slot>,
    /// Records in the order they were entered, with their generation: the
    /// first dropped past [`AHEAD_CACHE_MAX`].
    fifo: VecDeque<(u64, u64)>,
    bytes: u64,
    generation: u64,
}

struct Slot {
    uses: u32,
    bytes: u64,
    generation: u64,
    state: SlotState,
}

enum SlotState {
    Reading,
    Ready(Arc<LocalBytes>),
    Failed,
}

impl AheadCache {
    fn lock(&self) -> MutexGuard<'_, AheadMap> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `records` read into `bytes`; wakes the gathers waiting.
    fn ready(&self, records: impl Iterator<Item = u64>, bytes: &Arc<LocalBytes>) {
        let mut map = self.lock();
        for i in records {
            if let Some(slot) = map.slots.get_mut(&i)
                && matches!(slot.state, SlotState::Reading)
            {
                slot.state = SlotState::Ready(Arc::clone(bytes));
            }
        }
        map.evict();
        self.count.store(map.slots.len(), Ordering::Relaxed);
        drop(map);
        self.ready.notify_all();
    }

    /// Marks `records` failed: their gathers read them themselves.
    fn fail(&self, records: impl Iterator<Item = u64>) {
        let mut map = self.lock();
        for i in records {
            if let Some(slot) = map.slots.get_mut(&i) {
                slot.state = SlotState::Failed;
            }
        }
        drop(map);
        self.ready.notify_all();
    }

    /// Drops every record not being read.
    fn forget(&self) {
        let mut map = self.lock();
        map.slots
            .retain(|_, s| matches!(s.state, SlotState::Reading));
        map.bytes = map.slots.values().map(|s| s.bytes).sum();
        let AheadMap { slots, fifo, .. } = &mut *map;
        fifo.retain(|(i, g)| slots.get(i).is_some_and(|s| s.generation == *g));
        self.count.store(map.slots.len(), Ordering::Relaxed);
    }
}

impl AheadMap {
    fn next_gen(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// Enters record `i` (of `bytes` stored bytes) as being read.
    fn insert(&mut self, i: u64, bytes: u64, generation: u64) {
        self.slots.insert(
            i,
            Slot {
                uses: 1,
                bytes,
                generation,
                state: SlotState::Reading,
            },
        );
        self.fifo.push_back((i, generation));
        self.bytes += bytes;
    }

    /// Takes one use of record `i`: its bytes when it was read (the slot
    /// goes with its last use, or when its read failed).
    fn take(&mut self, i: u64) -> Option<Arc<LocalBytes>> {
        let slot = self.slots.get_mut(&i)?;
        slot.uses = slot.uses.saturating_sub(1);
        let bytes = match &slot.state {
            SlotState::Ready(b) => Some(Arc::clone(b)),
            SlotState::Failed | SlotState::Reading => None,
        };
        if slot.uses == 0 || bytes.is_none() {
            let gone = slot.bytes;
            self.slots.remove(&i);
            self.bytes -= gone;
        }
        bytes
    }

    /// Drops the records entered first (and not being read) while more
    /// than [`AHEAD_CACHE_MAX`] bytes are held.
    fn evict(&mut self) {
        let mut kept = Vec::new();
        while self.bytes > AHEAD_CACHE_MAX {
            let Some((i, g)) = self.fifo.pop_front() else {
                break;
            };
            match self.slots.get(&i) {
                Some(s) if s.generation == g && matches!(s.state, SlotState::Reading) => {
                    kept.push((i, g));
                }
                Some(s) if s.generation == g => {
                    self.bytes -= s.bytes;
                    self.slots.remove(&i);
                }
                _ => {}
            }
        }
        for k in kept.into_iter().rev() {
            self.fifo.push_front(k);
        }
        // Entries of records taken since: dropped once they dominate.
        if self.fifo.len() > 2 * self.slots.len() + 1024 {
            let slots = &self.slots;
            self.fifo
                .retain(|(i, g)| slots.get(i).is_some_and(|s| s.generation == *g));
        }
    }
}

/// The stored bytes of a gather: those it read itself, and those the
/// look-ahead read into memory before it.
struct Composite {
    own: Option<LocalBytes>,
    ahead: Vec<Arc<LocalBytes>>,
}

impl StagedBytes for Composite {
    fn get(&self, shard: usize, offset: u64, len: u32) -> Option<&[u8]> {
        self.own
            .as_ref()
            .and_then(|b| b.get(shard, offset, len))
            .or_else(|| self.ahead.iter().find_map(|b| b.get(shard, offset, len)))
    }
}

/// The stored bytes of a local gather's records, read into one buffer:
/// `spans` are `(shard, start, end, at)`, sorted, disjoint within a shard,
/// the bytes `start..end` of the shard lying at `at` in `buf`.
struct LocalBytes {
    buf: Buf,
    spans: Vec<(usize, u64, u64, usize)>,
}

/// The buffer of [`LocalBytes`]: aligned for `O_DIRECT` reads, or not.
enum Buf {
    Vec(Vec<u8>),
    Aligned(io::AlignedBuf),
}

impl std::ops::Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buf::Vec(v) => v,
            Buf::Aligned(b) => b.as_slice(),
        }
    }
}

/// The error of a gather whose stored bytes overflow memory.
fn overflow(records: usize) -> Error {
    crate::ErrorKind::Buffer {
        detail: format!("the stored bytes of {records} records overflow memory"),
    }
    .into()
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
