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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rayon::prelude::*;

use super::StoreReader;
use super::parts::{
    gather_fixed_groups, gather_packed_groups, gather_varlen_groups, group_by_part,
    plan_varlen_groups,
};
use super::reader::gather_vec;
use super::varlen::VarlenPlan;
use crate::Dataset;
use crate::codec::Sink;
use crate::error::{Error, ErrorKind};
use crate::format::RecordLoc;
use crate::lazy::{LazyOptions, LazyStats, PartSource};
use crate::part_index::PartIndex;

/// A part's stores, one per stream.
type PartStores = Arc<[StoreReader]>;

/// A part's place in the cache.
enum Slot {
    /// Not on disk (or not known to be).
    Absent,
    /// Being converted or opened by some thread.
    Loading,
    /// Open: its stores (one per stream), bytes on disk, and when it was
    /// last needed.
    Ready {
        stores: Arc<[StoreReader]>,
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
            .build()
            .map_err(|e| Error::invalid(format!("cannot start the conversion threads: {e}")))?;
        let mut parts = LazyParts {
            source,
            name,
            dir: options.cache_dir.clone(),
            index,
            streams: Vec::new(),
            budget: options.cache_bytes,
            state: Mutex::new(State {
                slots: (0..records.len()).map(|_| Slot::Absent).collect(),
                bytes: 0,
                clock: 0,
                ready: 0,
            }),
            changed: Condvar::new(),
            pool,
            converted: AtomicU64::new(0),
            reopened: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        };
        // Part 0 names the streams, and is ready.
        let first = parts.dir.join(Dataset::part_name(0));
        let loaded = parts.load(0)?;
        parts.streams = crate::Store::open_dir(&first)?
            .into_iter()
            .map(|(n, _)| n)
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
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = self.dir.join(format!(
            ".converting-{}-{}-{nanos}",
            Dataset::part_name(part as u64),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        let result = self.source.convert_part(part, &tmp);
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
    /// against the part's record count and the streams.
    fn load(&self, part: usize) -> Result<(Arc<[StoreReader]>, u64), Error> {
        let dir = self.part_dir(part);
        self.ensure_on_disk(part, &dir)?;
        let want = self.index.starts()[part + 1] - self.index.starts()[part];
        let open = || -> Result<Vec<StoreReader>, Error> {
            let mut stores = Vec::with_capacity(self.streams.len().max(1));
            let names: Vec<String> = if self.streams.is_empty() {
                crate::Store::open_dir(&dir)?
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect()
            } else {
                self.streams.clone()
            };
            for name in names {
                let mut r = StoreReader::open(&dir.join(&name))?;
                r.release_lock();
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
        let stores = match open() {
            Ok(s) => s,
            // A damaged or foreign directory: converted again, once.
            Err(_) => {
                let _ = std::fs::remove_dir_all(&dir);
                self.ensure_on_disk(part, &dir)?;
                open()?
            }
        };
        let bytes = stores.iter().map(StoreReader::stored_bytes).sum();
        Ok((stores.into(), bytes))
    }

    /// Part `part`'s stores, converted or opened first if needed (waiting
    /// for another thread that is at it).
    pub(crate) fn part(&self, part: usize) -> Result<Arc<[StoreReader]>, Error> {
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
                slot @ Slot::Absent => {
                    *slot = Slot::Loading;
                    drop(st);
                    return self.finish(part, self.load(part));
                }
            }
        }
    }

    /// Records the outcome of loading part `part`, evicting over the
    /// budget, and wakes the waiters.
    fn finish(
        &self,
        part: usize,
        loaded: Result<(Arc<[StoreReader]>, u64), Error>,
    ) -> Result<Arc<[StoreReader]>, Error> {
        let mut trash = Vec::new();
        let out = {
            let mut st = self.lock();
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
                    Slot::Ready { used, .. } => Some((*used, p)),
                    _ => None,
                })
                .min();
            let Some((_, p)) = victim else { break };
            if let Slot::Ready { bytes, .. } = std::mem::replace(&mut st.slots[p], Slot::Absent) {
                st.bytes -= bytes;
                st.ready -= 1;
            }
            let dir = self.part_dir(p);
            let gone = self.dir.join(format!(
                ".evicted-{}-{}",
                Dataset::part_name(p as u64),
                std::process::id()
            ));
            if std::fs::rename(&dir, &gone).is_ok() {
                trash.push(gone);
            } else {
                trash.push(dir);
            }
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Starts converting, on the conversion threads, every part of
    /// `parts` that is absent, and marks those ready as just needed; the
    /// bytes the started parts are expected to take (the mean of the parts
    /// ready so far), what the loader's look-ahead counts against its
    /// bound.
    pub(crate) fn prefetch_parts(self: &Arc<Self>, parts: impl IntoIterator<Item = usize>) -> u64 {
        let mut started = 0u64;
        let mut st = self.lock();
        for p in parts {
            st.clock += 1;
            let now = st.clock;
            match &mut st.slots[p] {
                Slot::Ready { used, .. } => *used = now,
                Slot::Loading => {}
                slot @ Slot::Absent => {
                    *slot = Slot::Loading;
                    started += 1;
                    let me = Arc::clone(self);
                    self.pool.spawn(move || {
                        // The gather that needs it meets the error again.
                        let _ = me.finish(p, me.load(p));
                    });
                }
            }
        }
        let mean = st.bytes / st.ready.max(1) as u64;
        started * mean.max(1)
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
                // Evicted by another gather between the two: once more.
                Err(_) if tries == 0 && !from.is_dir() => {
                    let _ = std::fs::remove_dir_all(to);
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
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

    /// The stores of every part holding one of `indices`, the absent ones
    /// converted in parallel.
    fn hold(&self, indices: &[u64]) -> Result<HashMap<usize, Arc<[StoreReader]>>, Error> {
        let parts = self.parts_of(indices);
        let held: Result<Vec<(usize, PartStores)>, Error> = if parts.len() > 1 {
            parts.par_iter().map(|&p| Ok((p, self.part(p)?))).collect()
        } else {
            parts.iter().map(|&p| Ok((p, self.part(p)?))).collect()
        };
        Ok(held?.into_iter().collect())
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
        match indices.iter().find(|&&i| i >= self.len()) {
            Some(&index) => Err(ErrorKind::IndexOutOfRange {
                path: self.path.clone(),
                index,
                len: self.len(),
            }
            .into()),
            None => Ok(()),
        }
    }

    /// Held stores, with this stream's reader of each part set to the
    /// template's generation (a Ragged stream's dims width).
    fn hold(&self, indices: &[u64]) -> Result<HashMap<usize, Arc<[StoreReader]>>, Error> {
        self.check_indices(indices)?;
        self.parts.hold(indices)
    }

    fn reader<'a>(
        &self,
        held: &'a HashMap<usize, Arc<[StoreReader]>>,
        p: usize,
    ) -> &'a StoreReader {
        &held[&p][self.stream]
    }

    pub(crate) fn loc(&self, index: u64) -> Result<RecordLoc, Error> {
        self.check_indices(&[index])?;
        let (p, local) = self.parts.index.locate_in_range(index);
        self.parts.part(p)?[self.stream].loc(local)
    }

    pub(crate) fn prefetch(&self, indices: &[u64]) -> u64 {
        let parts = self.parts.parts_of(indices);
        self.parts.prefetch_parts(parts)
    }

    pub(crate) fn prefetch_ranges(&self, ranges: &[std::ops::Range<u64>]) -> u64 {
        let starts = self.parts.index.starts();
        let mut parts = Vec::new();
        for r in ranges.iter().filter(|r| r.start < r.end.min(self.len())) {
            let (first, _) = self.parts.index.locate_in_range(r.start);
            let (last, _) = self.parts.index.locate_in_range(r.end.min(self.len()) - 1);
            parts.extend(first..=last);
        }
        parts.sort_unstable();
        parts.dedup();
        debug_assert!(parts.iter().all(|&p| p + 1 < starts.len()));
        self.parts.prefetch_parts(parts)
    }

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
        let groups = group_by_part(
            &self.parts.index,
            indices.iter().copied().zip(dst.chunks_exact_mut(width)),
        );
        gather_fixed_groups(groups, width, |p| self.reader(&held, p))
    }

    pub(crate) fn gather_fixed_vec(&self, indices: &[u64], width: usize) -> Result<Vec<u8>, Error> {
        gather_vec(indices.len(), width, |dst| {
            self.gather_fixed(indices, width, dst)
        })
    }

    pub(crate) fn plan_varlen(&self, indices: &[u64], header: usize) -> Result<VarlenPlan, Error> {
        let held = self.hold(indices)?;
        plan_varlen_groups(&self.parts.index, indices, header, |p| {
            self.reader(&held, p)
        })
    }

    pub(crate) fn gather_varlen<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
    ) -> Result<&'d mut [u8], Error> {
        let held = self.hold(&plan.indices)?;
        gather_varlen_groups(&self.parts.index, plan, dst, |p| self.reader(&held, p))
    }

    pub(crate) fn gather_varlen_packed<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
        headers: &mut [u8],
    ) -> Result<&'d mut [u8], Error> {
        let held = self.hold(&plan.indices)?;
        gather_packed_groups(&self.parts.index, plan, dst, headers, |p| {
            self.reader(&held, p)
        })
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
