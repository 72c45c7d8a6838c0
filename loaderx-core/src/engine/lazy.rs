//! Parts converted when first needed ([`Engine::Lazy`](super::Engine)): a
//! dataset whose records live elsewhere (parquet row groups on the Hub or
//! in a bucket), each part written into a local cache directory the first
//! time a gather or the loader's look-ahead needs it, by a
//! [`PartSource`](crate::lazy::PartSource), and read from there as an
//! ordinary local store.
//!
//! One [`LazyParts`] is shared by every stream of the dataset: a part is
//! converted once for all its streams. The cache is bounded in bytes: when
//! a new part takes it over the bound, the parts least recently needed (by
//! a gather, or asked for by the look-ahead) are deleted, never the one
//! just written. A gather holds its parts' readers while it reads, so a
//! part deleted meanwhile (its maps stay valid) is read whole, and is
//! converted again when next needed: a conversion is a pure function of
//! the source, so the same records come back.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::StoreReader;
use super::parts::{gather_packed_local, gather_varlen_local, read_local_jobs};
use super::reader::Staged;
use super::varlen::VarlenPlan;
use crate::codec::Sink;
use crate::error::{Error, ErrorKind};
use crate::format::RecordLoc;
use crate::format::Schema;
use crate::lazy::{LazyOptions, LazyStats, PartSource};
use crate::part_index::PartIndex;
use crate::{Dataset, Generation};

/// A part's stores, one per stream.
type PartStores = Arc<[StoreReader]>;

/// A number no other temporary or evicted directory of this process has.
fn unique() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The parts a [`VarlenPlan`] of a lazily converted stream was made over,
/// held until its gather reads them: a part evicted and converted again
/// in between is never read through another copy's locations.
#[derive(Clone)]
pub(crate) struct Held(Arc<HashMap<usize, PartStores>>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Held").field(&self.0.len()).finish()
    }
}

/// A part's place in the cache.
enum Slot {
    /// Not on disk (or not known to be).
    Absent,
    /// Converted by an earlier run, found in the directory at open, not
    /// opened: its bytes count against the bound, and it is evicted first.
    OnDisk { bytes: u64 },
    /// Being converted or opened by some thread.
    Loading,
    /// Open: its stores (one per stream), bytes on disk, and when it was
    /// last needed.
    Ready {
        stores: PartStores,
        bytes: u64,
        used: u64,
    },
}

struct State {
    slots: Vec<Slot>,
    /// Bytes of the parts ready.
    bytes: u64,
    /// Ticks of needs, for recency.
    clock: u64,
    ready: usize,
    /// Parts being converted or opened.
    loading: usize,
    /// When the look-ahead last asked for each part (0: never): the
    /// further ahead a part is needed, the later the look-ahead asked, so
    /// eviction goes by it rather than by the gathers' own needs, which
    /// favour the window that is ending over the one that begins.
    ahead: Vec<u64>,
}

/// The parts of one lazily converted dataset, shared by its streams.
pub(crate) struct LazyParts {
    source: Arc<dyn PartSource>,
    /// The source's name, as every path in an error about it.
    name: PathBuf,
    dir: PathBuf,
    index: PartIndex,
    /// The streams, in the order of every part's stores.
    streams: Vec<String>,
    /// Part 0's schema and generation of every stream, which every part
    /// must have.
    schemas: Vec<(Schema, Generation)>,
    budget: u64,
    state: Mutex<State>,
    changed: Condvar,
    pool: rayon::ThreadPool,
    converted: AtomicU64,
    reopened: AtomicU64,
    evicted: AtomicU64,
}

impl std::fmt::Debug for LazyParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyParts")
            .field("source", &self.name)
            .field("dir", &self.dir)
            .field("parts", &self.index.parts())
            .finish()
    }
}

impl LazyParts {
    /// The parts of `source`, cached under `options`' directory; part 0 is
    /// made ready now (it names the streams and their schemas).
    pub(crate) fn open(
        source: Arc<dyn PartSource>,
        options: &LazyOptions,
    ) -> Result<Arc<LazyParts>, Error> {
        let name = PathBuf::from(source.name());
        let records = source.part_records();
        if records.is_empty() {
            return Err(Error::invalid(format!(
                "{}: the source holds no part",
                name.display()
            )));
        }
        let index = PartIndex::new(records.iter().copied())?;
        std::fs::create_dir_all(&options.cache_dir)
            .map_err(|e| Error::io(&options.cache_dir, e))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.concurrency.max(1))
            .thread_name(|i| format!("loaderx-lazy-{i}"))
            // A conversion's panic is caught where it runs (`load_guarded`);
            // one anywhere else never takes the process down.
            .panic_handler(|_| {})
            .build()
            .map_err(|e| Error::invalid(format!("cannot start the conversion threads: {e}")))?;
        let mut parts = LazyParts {
            source,
            name,
            dir: options.cache_dir.clone(),
            index,
            streams: Vec::new(),
            schemas: Vec::new(),
            budget: options.cache_bytes,
            state: Mutex::new(State {
                slots: (0..records.len()).map(|_| Slot::Absent).collect(),
                bytes: 0,
                clock: 0,
                ready: 0,
                loading: 0,
                ahead: vec![0; records.len()],
            }),
            changed: Condvar::new(),
            pool,
            converted: AtomicU64::new(0),
            reopened: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        };
        // Parts an earlier run converted count against the bound.
        parts.find_converted(records.len())?;
        // Part 0 names the streams, and is ready.
        let loaded = parts.pool.install(|| parts.load_guarded(0))?;
        parts.streams = crate::store::store_names(&parts.part_dir(0))?;
        parts.schemas = loaded
            .0
            .iter()
            .map(|r| (r.schema().clone(), r.generation()))
            .collect();
        parts.finish(0, Ok(loaded))?;
        if parts.streams.is_empty() {
            return Err(Error::invalid(format!(
                "{}: part 0 was converted into no store",
                parts.name.display()
            )));
        }
        Ok(Arc::new(parts))
    }

    /// Marks the parts already converted in the directory (by an earlier
    /// run) as on disk, with their bytes (part 0 is made ready at open).
    fn find_converted(&mut self, parts: usize) -> Result<(), Error> {
        let st = self
            .state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for entry in std::fs::read_dir(&self.dir).map_err(|e| Error::io(&self.dir, e))? {
            let entry = entry.map_err(|e| Error::io(&self.dir, e))?;
            let name = entry.file_name();
            // What a process that is gone left half done (killed while it
            // converted or evicted a part).
            if let Some(pid) = name.to_str().and_then(leftover_pid)
                && !Path::new("/proc").join(pid.to_string()).exists()
            {
                let path = entry.path();
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
                continue;
            }
            // Only part directories as this cache names them.
            let Some(p) = name
                .to_str()
                .and_then(|n| crate::dataset::part_index(n).filter(|&p| Dataset::part_name(p) == n))
                .and_then(|p| usize::try_from(p).ok())
                .filter(|&p| p > 0 && p < parts)
            else {
                continue;
            };
            let bytes = tree_bytes(&entry.path());
            st.slots[p] = Slot::OnDisk { bytes };
            st.bytes += bytes;
        }
        Ok(())
    }

    pub(crate) fn name(&self) -> &Path {
        &self.name
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn index(&self) -> &PartIndex {
        &self.index
    }

    pub(crate) fn streams(&self) -> &[String] {
        &self.streams
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn part_dir(&self, part: usize) -> PathBuf {
        self.dir.join(Dataset::part_name(part as u64))
    }

    /// A name no other directory of the cache has, for part `part` while
    /// it is being converted, evicted or removed as damaged (`what`):
    /// `.what-part-NNNNN-PID-N`, which [`leftover_pid`] reads back when the
    /// process that made it is gone.
    fn scratch_dir(&self, what: &str, part: usize) -> PathBuf {
        self.dir.join(format!(
            ".{what}-{}-{}-{}",
            Dataset::part_name(part as u64),
            std::process::id(),
            unique()
        ))
    }

    /// What the cache did since the dataset was opened.
    pub(crate) fn stats(&self) -> LazyStats {
        let st = self.lock();
        LazyStats {
            parts: self.index.parts() as u64,
            ready: st.ready as u64,
            cached_bytes: st.bytes,
            converted: self.converted.load(Ordering::Relaxed),
            reopened: self.reopened.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }

    /// Whether every part is ready (nothing for a look-ahead to do).
    pub(crate) fn all_ready(&self) -> bool {
        self.lock().ready == self.index.parts()
    }

    /// Converts part `part` into `dir` unless a complete conversion is
    /// there already (the directory appears whole, by a rename).
    fn ensure_on_disk(&self, part: usize, dir: &Path) -> Result<(), Error> {
        if dir.is_dir() {
            self.reopened.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let tmp = self.scratch_dir("converting", part);
        let _ = std::fs::remove_dir_all(&tmp);
        let result = catch_unwind(AssertUnwindSafe(|| self.source.convert_part(part, &tmp)))
            .unwrap_or_else(|panic| {
                let what = crate::error::panic_message(panic.as_ref())
                    .unwrap_or_else(|| "a panic".to_owned());
                Err(format!("the conversion panicked: {what}").into())
            });
        if let Err(error) = result {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(ErrorKind::LazyPart {
                path: self.name.clone(),
                part: part as u64,
                error,
            }
            .into());
        }
        match std::fs::rename(&tmp, dir) {
            Ok(()) => {}
            // Another process converted it meanwhile: theirs is as good.
            Err(_) if dir.is_dir() => {
                let _ = std::fs::remove_dir_all(&tmp);
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(Error::io(dir, e));
            }
        }
        self.converted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Converts (or finds) part `part` and opens its stores, checked
    /// against the part's record count and part 0's schemas.
    fn load(&self, part: usize) -> Result<(PartStores, u64), Error> {
        let dir = self.part_dir(part);
        self.ensure_on_disk(part, &dir)?;
        let want = self.index.starts()[part + 1] - self.index.starts()[part];
        let open = || -> Result<Vec<StoreReader>, Error> {
            // Part 0 names the streams (at open, before they are known).
            let names = if self.streams.is_empty() {
                crate::store::store_names(&dir)?
            } else {
                self.streams.clone()
            };
            let mut stores = Vec::with_capacity(names.len());
            for name in &names {
                let mut r = StoreReader::open(&dir.join(name))?;
                r.release_lock();
                // Read through the maps, which stay valid when the part is
                // evicted while a gather reads it (the cold path reopens
                // the files by name).
                r.set_read_mode(super::cold::ReadMode::Mapped);
                if r.len() != want {
                    return Err(Error::invalid(format!(
                        "{}: part {part}'s stream {name:?} holds {} records, the source says {want}",
                        self.name.display(),
                        r.len()
                    )));
                }
                stores.push(r);
            }
            Ok(stores)
        };
        let mut stores = match open() {
            Ok(s) => s,
            // A damaged directory, or one another process was evicting:
            // moved aside (never deleted where it is: another process may
            // have just put a whole one there) and converted again, once.
            Err(_) => {
                let aside = self.scratch_dir("damaged", part);
                if std::fs::rename(&dir, &aside).is_ok() {
                    let _ = std::fs::remove_dir_all(&aside);
                }
                self.ensure_on_disk(part, &dir)?;
                open()?
            }
        };
        // Every part reads as part 0 does: its schema, and (a Ragged
        // stream's dims width) its generation. A schema that differs is
        // the source's, not the directory's: not converted again.
        for ((r, name), (schema, generation)) in
            stores.iter_mut().zip(&self.streams).zip(&self.schemas)
        {
            if r.schema() != schema {
                return Err(Error::invalid(format!(
                    "{}: part {part}'s stream {name:?} holds {:?}, part 0's {schema:?}: \
                     the source's row groups do not convert to one schema",
                    self.name.display(),
                    r.schema()
                )));
            }
            r.set_generation(*generation);
        }
        let bytes = stores.iter().map(StoreReader::stored_bytes).sum();
        Ok((stores.into(), bytes))
    }

    /// [`load`](Self::load), a panic in it an error: run on the
    /// conversion threads (`self.pool`), so that a conversion's own
    /// parallel work never runs on, nor waits for, a thread of the caller's
    /// pool that may be waiting for a part.
    fn load_guarded(&self, part: usize) -> Result<(PartStores, u64), Error> {
        catch_unwind(AssertUnwindSafe(|| self.load(part))).unwrap_or_else(|_| {
            Err(ErrorKind::LazyPart {
                path: self.name.clone(),
                part: part as u64,
                error: "opening the converted part panicked".into(),
            }
            .into())
        })
    }

    /// Part `part`'s stores, converted or opened first if needed (waiting
    /// for another thread that is at it).
    pub(crate) fn part(&self, part: usize) -> Result<PartStores, Error> {
        let mut st = self.lock();
        loop {
            st.clock += 1;
            let now = st.clock;
            match &mut st.slots[part] {
                Slot::Ready { stores, used, .. } => {
                    *used = now;
                    return Ok(Arc::clone(stores));
                }
                Slot::Loading => {
                    st = self
                        .changed
                        .wait(st)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                slot @ (Slot::Absent | Slot::OnDisk { .. }) => {
                    if let Slot::OnDisk { bytes } = std::mem::replace(slot, Slot::Loading) {
                        st.bytes -= bytes;
                    }
                    st.loading += 1;
                    drop(st);
                    // Finished on the conversion thread too: a caller on a
                    // rayon thread may run other gathers while it waits for
                    // `install`, and one of them may wait for this part.
                    return self
                        .pool
                        .install(|| self.finish(part, self.load_guarded(part)));
                }
            }
        }
    }

    /// Records the outcome of loading part `part`, evicting over the
    /// budget, and wakes the waiters.
    fn finish(
        &self,
        part: usize,
        loaded: Result<(PartStores, u64), Error>,
    ) -> Result<PartStores, Error> {
        let mut trash = Vec::new();
        let out = {
            let mut st = self.lock();
            st.loading = st.loading.saturating_sub(1);
            let out = match loaded {
                Ok((stores, bytes)) => {
                    st.clock += 1;
                    let used = st.clock;
                    st.slots[part] = Slot::Ready {
                        stores: Arc::clone(&stores),
                        bytes,
                        used,
                    };
                    st.bytes += bytes;
                    st.ready += 1;
                    self.evict(&mut st, part, &mut trash);
                    Ok(stores)
                }
                Err(e) => {
                    st.slots[part] = Slot::Absent;
                    Err(e)
                }
            };
            self.changed.notify_all();
            out
        };
        for dir in trash {
            let _ = std::fs::remove_dir_all(dir);
        }
        out
    }

    /// Deletes the least recently needed parts (never `keep`) while the
    /// cache is over its budget: each directory renamed out of the way
    /// now (so a new conversion of it finds nothing), removed by the
    /// caller once the lock is released.
    fn evict(&self, st: &mut State, keep: usize, trash: &mut Vec<PathBuf>) {
        while st.bytes > self.budget {
            let victim = st
                .slots
                .iter()
                .enumerate()
                .filter(|&(p, _)| p != keep)
                .filter_map(|(p, s)| match s {
                    Slot::Ready { used, .. } => Some((
                        match st.ahead[p] {
                            0 => *used,
                            ahead => ahead,
                        },
                        p,
                    )),
                    Slot::OnDisk { .. } => Some((0, p)),
                    _ => None,
                })
                .min();
            let Some((_, p)) = victim else { break };
            match std::mem::replace(&mut st.slots[p], Slot::Absent) {
                Slot::Ready { bytes, .. } => {
                    st.bytes -= bytes;
                    st.ready -= 1;
                }
                Slot::OnDisk { bytes } => st.bytes -= bytes,
                _ => {}
            }
            let dir = self.part_dir(p);
            let gone = self.scratch_dir("evicted", p);
            // Not renamed (another process evicted it already): nothing
            // of it is deleted here.
            if std::fs::rename(&dir, &gone).is_ok() {
                trash.push(gone);
            }
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Starts converting, on the conversion threads, every part of
    /// `parts` that is absent, and marks those ready as just needed; the
    /// bytes the started parts are expected to take (the mean of the parts
    /// ready so far), what the loader's look-ahead counts against its
    /// bound. Ahead of the gathers (`ahead`), a part is started only while
    /// the cache has room for it beside those ready and being converted:
    /// the look-ahead never evicts a part the batches before it still
    /// need (a gather then converts what it needs itself).
    pub(crate) fn prefetch_parts(
        self: &Arc<Self>,
        parts: impl IntoIterator<Item = usize>,
        ahead: bool,
    ) -> u64 {
        let mut started = 0u64;
        let mut st = self.lock();
        let mean = (st.bytes / st.ready.max(1) as u64).max(1);
        for p in parts {
            st.clock += 1;
            let now = st.clock;
            let room = st
                .bytes
                .saturating_add((st.loading as u64 + 1).saturating_mul(mean))
                <= self.budget;
            if ahead {
                st.ahead[p] = now;
            }
            match &mut st.slots[p] {
                Slot::Ready { used, .. } => *used = now,
                Slot::Loading => {}
                Slot::Absent | Slot::OnDisk { .. } if ahead && !room => {}
                slot @ (Slot::Absent | Slot::OnDisk { .. }) => {
                    if let Slot::OnDisk { bytes } = std::mem::replace(slot, Slot::Loading) {
                        st.bytes -= bytes;
                    }
                    st.loading += 1;
                    started += 1;
                    let me = Arc::clone(self);
                    self.pool.spawn(move || {
                        // The gather that needs it meets the error again.
                        let _ = me.finish(p, me.load_guarded(p));
                    });
                }
            }
        }
        started * mean
    }

    /// Makes part `part` ready and links (or copies, across file systems)
    /// its files into the new directory `to`.
    pub(crate) fn link_part(&self, part: usize, to: &Path) -> Result<(), Error> {
        let mut tries = 0;
        loop {
            let held = self.part(part)?;
            let from = self.part_dir(part);
            match link_tree(&from, to) {
                Ok(()) => {
                    drop(held);
                    return Ok(());
                }
                // Evicted (by another process, or a gather here) between
                // the two: forgotten, and converted once more.
                Err(_) if tries == 0 && !from.is_dir() => {
                    let _ = std::fs::remove_dir_all(to);
                    self.forget(part);
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Marks a ready part absent (its directory is gone).
    fn forget(&self, part: usize) {
        let mut st = self.lock();
        if let Slot::Ready { bytes, .. } = st.slots[part] {
            st.slots[part] = Slot::Absent;
            st.bytes -= bytes;
            st.ready -= 1;
        }
    }

    /// The parts holding `indices`, each once, in order.
    pub(crate) fn parts_of(&self, indices: &[u64]) -> Vec<usize> {
        let mut parts: Vec<usize> = indices
            .iter()
            .filter(|&&i| i < self.index.len())
            .map(|&i| self.index.locate_in_range(i).0)
            .collect();
        parts.sort_unstable();
        parts.dedup();
        parts
    }

    /// The stores of every part holding one of `indices`: the absent ones
    /// converted on the conversion threads, several at once, while the
    /// calling thread waits (it never converts: a thread of a rayon pool
    /// waiting for a part must not be the one converting it).
    fn hold(self: &Arc<Self>, indices: &[u64]) -> Result<Held, Error> {
        let parts = self.parts_of(indices);
        if parts.len() > 1 {
            self.prefetch_parts(parts.iter().copied(), false);
        }
        let mut held = HashMap::with_capacity(parts.len());
        for p in parts {
            held.insert(p, self.part(p)?);
        }
        Ok(Held(Arc::new(held)))
    }
}

/// One stream of a [`LazyParts`]: what an [`Engine::Lazy`](super::Engine)
/// reads.
pub(crate) struct LazyStream {
    parts: Arc<LazyParts>,
    stream: usize,
    path: PathBuf,
    /// Part 0's store of this stream: what describes the whole (codec,
    /// generation, schema), kept open.
    template: StoreReader,
}

impl LazyStream {
    pub(crate) fn new(parts: Arc<LazyParts>, stream: usize, template: StoreReader) -> LazyStream {
        let path = parts.name().join(&parts.streams()[stream]);
        LazyStream {
            parts,
            stream,
            path,
            template,
        }
    }

    pub(crate) fn template(&self) -> &StoreReader {
        &self.template
    }

    pub(crate) fn into_template(self) -> StoreReader {
        self.template
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn shared(&self) -> &Arc<LazyParts> {
        &self.parts
    }

    pub(crate) fn len(&self) -> u64 {
        self.parts.index.len()
    }

    pub(crate) fn starts(&self) -> &[u64] {
        self.parts.index.starts()
    }

    pub(crate) fn check_indices(&self, indices: &[u64]) -> Result<(), Error> {
        super::parts::check_in_range(&self.path, self.len(), indices)
    }

    /// The parts holding `indices`, held.
    fn hold(&self, indices: &[u64]) -> Result<Held, Error> {
        self.check_indices(indices)?;
        self.parts.hold(indices)
    }

    fn reader<'a>(&self, held: &'a Held, p: usize) -> &'a StoreReader {
        &held.0[&p][self.stream]
    }

    pub(crate) fn loc(&self, index: u64) -> Result<RecordLoc, Error> {
        self.check_indices(&[index])?;
        let (p, local) = self.parts.index.locate_in_range(index);
        self.parts.part(p)?[self.stream].loc(local)
    }

    pub(crate) fn prefetch(&self, indices: &[u64]) -> u64 {
        let parts = self.parts.parts_of(indices);
        self.parts.prefetch_parts(parts, true)
    }

    pub(crate) fn prefetch_ranges(&self, ranges: &[std::ops::Range<u64>]) -> u64 {
        let mut parts = Vec::new();
        for r in ranges.iter().filter(|r| r.start < r.end.min(self.len())) {
            let (first, _) = self.parts.index.locate_in_range(r.start);
            let (last, _) = self.parts.index.locate_in_range(r.end.min(self.len()) - 1);
            parts.extend(first..=last);
        }
        parts.sort_unstable();
        parts.dedup();
        self.parts.prefetch_parts(parts, true)
    }

    /// Every part is a local store read through its maps: records are read
    /// where they lie, in the batch's order, as a local concatenation's.
    pub(crate) fn gather_fixed<D: Sink>(
        &self,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<(), Error> {
        super::reader::check_fixed_dst(indices.len(), width, dst.len())?;
        let held = self.hold(indices)?;
        if width == 0 {
            return Ok(());
        }
        let mut jobs = Vec::with_capacity(indices.len());
        for (&i, d) in indices.iter().zip(dst.chunks_exact_mut(width)) {
            let (p, local) = self.parts.index.locate_in_range(i);
            jobs.push((p, local, self.reader(&held, p).loc(local)?, d));
        }
        read_local_jobs(jobs, self.template.parallel_min_bytes(), |p| {
            self.reader(&held, p)
        })
    }

    pub(crate) fn plan_varlen(&self, indices: &[u64], header: usize) -> Result<VarlenPlan, Error> {
        let held = self.hold(indices)?;
        // Each record checked by its part where it lies, in order.
        let locs = indices
            .iter()
            .map(|&i| {
                let (p, local) = self.parts.index.locate_in_range(i);
                self.reader(&held, p)
                    .plan_record(local, header, Some(&Staged::Local))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut plan = VarlenPlan::new(indices.to_vec(), locs, header, false)?;
        plan.held = Some(held);
        Ok(plan)
    }

    /// The parts `plan` was made over (held by it), else held now.
    fn held_by(&self, plan: &VarlenPlan) -> Result<Held, Error> {
        match &plan.held {
            Some(h) => Ok(h.clone()),
            None => self.hold(&plan.indices),
        }
    }

    pub(crate) fn gather_varlen<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
    ) -> Result<&'d mut [u8], Error> {
        let held = self.held_by(plan)?;
        gather_varlen_local(
            &self.parts.index,
            plan,
            dst,
            self.template.parallel_min_bytes(),
            |p| self.reader(&held, p),
        )
    }

    pub(crate) fn gather_varlen_packed<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
        headers: &mut [u8],
    ) -> Result<&'d mut [u8], Error> {
        let held = self.held_by(plan)?;
        gather_packed_local(
            &self.parts.index,
            plan,
            dst,
            headers,
            self.template.parallel_min_bytes(),
            |p| self.reader(&held, p),
        )
    }
}

/// Recreates the directory tree `from` at `to` (which must not exist),
/// every file hard-linked, or copied where a link cannot be made.
fn link_tree(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir(to).map_err(|e| Error::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let entry = entry.map_err(|e| Error::io(from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| Error::io(&src, e))?;
        if kind.is_dir() {
            link_tree(&src, &dst)?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(|e| Error::io(&src, e))?;
        }
    }
    Ok(())
}

/// The process that made `name`, when it is a temporary of a conversion,
/// an eviction or a damaged part's removal (`.converting-part-00012-PID-N`
/// and its `.parquet` and `.root` companions).
fn leftover_pid(name: &str) -> Option<u32> {
    let rest = [".converting-", ".evicted-", ".damaged-"]
        .iter()
        .find_map(|p| name.strip_prefix(p))?;
    let rest = rest.strip_prefix("part-")?;
    let (_, rest) = rest.split_once('-')?;
    let (pid, _) = rest.split_once('-')?;
    pid.parse().ok()
}

/// Bytes of the files under `dir` (0 for what cannot be read).
fn tree_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => tree_bytes(&e.path()),
                Ok(_) => e.metadata().map_or(0, |m| m.len()),
                Err(_) => 0,
            })
            .sum()
    })
}

#[cfg(test)]
mod tests {
    use super::leftover_pid;

    #[test]
    fn leftovers_name_their_process() {
        assert_eq!(leftover_pid(".converting-part-00012-4242-7"), Some(4242));
        assert_eq!(
            leftover_pid(".converting-part-00012-4242-7.parquet"),
            Some(4242)
        );
        assert_eq!(leftover_pid(".evicted-part-00003-17-0"), Some(17));
        assert_eq!(leftover_pid(".damaged-part-00003-17-0"), Some(17));
        assert_eq!(leftover_pid("part-00003"), None);
        assert_eq!(leftover_pid("source.json"), None);
        assert_eq!(leftover_pid(".converting-part-x"), None);
    }
}
