//! Concatenated stores: several stores of one schema read as one sequence
//! of records, the first part's records first (a multi-part dataset's
//! stream, a mixture's sources).
//!
//! Record `i` of the whole lies in the part whose range holds it, found by
//! a [`PartIndex`] (a bucket table over the parts' first indices: no
//! per-record memory beyond the parts' own tables). A gather that touches
//! one part is that part's own gather; one that spans local parts reads its
//! records in the batch's order, in parallel, with one set of decoders a
//! worker for all parts; one that spans remote parts groups its records by
//! part, so each part fetches its bytes at once. Every record is read
//! straight into its place in the caller's buffer.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::reader::{PARALLEL_MIN_BYTES, PARALLEL_MIN_RECORDS, Staged, StoreReader, run_jobs};
use super::varlen::{PackedJob, VarlenPlan};
use crate::codec::{Codec, SharedDecoders, Sink};
use crate::error::{Error, ErrorKind};
use crate::format::RecordLoc;
use crate::part_index::PartIndex;

/// Stores read end to end as one.
pub(crate) struct Parts {
    path: PathBuf,
    readers: Vec<StoreReader>,
    /// Record → (part, index in the part).
    index: PartIndex,
    /// The smallest of the parts' thresholds for decoding in parallel.
    parallel_min_bytes: usize,
    /// No part is on object storage: records are read where they lie, in
    /// the batch's order, without grouping them by part (remote parts are
    /// grouped, each part fetching its records' bytes at once).
    local: bool,
    /// Every part is a local raw store in the writer's regular layout:
    /// where each part's records lie, in one compact table, so a record is
    /// found without touching its part's reader.
    regular: Option<RegularParts>,
}

/// The regular layout of every part ([`StoreReader::raw_regular`]): part
/// `p`'s shard `s` is `shards[parts[p].first + s]`, an address and length
/// in that part's mapped payload.
struct RegularParts {
    parts: Vec<RegularPart>,
    shards: Vec<(usize, usize)>,
}

#[derive(Clone, Copy)]
struct RegularPart {
    first: usize,
    mask: u64,
    shift: u32,
    width: usize,
}

impl Parts {
    /// `readers`, whose schemas the caller checked, end to end; `path`
    /// names the whole (a dataset's directory).
    pub(crate) fn new(path: &Path, readers: Vec<StoreReader>) -> Result<Parts, Error> {
        if readers.is_empty() {
            return Err(Error::invalid(format!(
                "{}: a concatenation needs at least one part",
                path.display()
            )));
        }
        let index = PartIndex::new(readers.iter().map(StoreReader::len))?;
        let local = readers.iter().all(|r| !r.is_remote());
        let regular = if local && readers.iter().all(|r| r.codec() == Codec::Raw) {
            let mut table = RegularParts {
                parts: Vec::with_capacity(readers.len()),
                shards: Vec::new(),
            };
            let complete = readers.iter().all(|r| match r.raw_regular() {
                Some((shift, width, shards)) => {
                    table.parts.push(RegularPart {
                        first: table.shards.len(),
                        mask: shards.len() as u64 - 1,
                        shift,
                        width,
                    });
                    table.shards.extend(
                        shards
                            .iter()
                            .map(|b| (b.as_ptr().expose_provenance(), b.len())),
                    );
                    true
                }
                None => false,
            });
            complete.then_some(table)
        } else {
            None
        };
        let parallel_min_bytes = readers
            .iter()
            .map(StoreReader::parallel_min_bytes)
            .min()
            .unwrap_or(PARALLEL_MIN_BYTES);
        Ok(Parts {
            path: path.to_path_buf(),
            readers,
            index,
            parallel_min_bytes,
            local,
            regular,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn readers(&self) -> &[StoreReader] {
        &self.readers
    }

    /// Drops every part's shared lock.
    pub(crate) fn release_locks(&mut self) {
        self.readers.iter_mut().for_each(StoreReader::release_lock);
    }

    /// Unwraps the parts' readers.
    pub(crate) fn into_readers(self) -> Vec<StoreReader> {
        self.readers
    }

    pub(crate) fn len(&self) -> u64 {
        self.index.len()
    }

    /// The first index of every part, and the total.
    pub(crate) fn starts(&self) -> &[u64] {
        self.index.starts()
    }

    /// `(part, index in the part)` of record `index` (in range).
    #[inline]
    fn locate(&self, index: u64) -> (usize, u64) {
        self.index.locate_in_range(index)
    }

    pub(crate) fn check_indices(&self, indices: &[u64]) -> Result<(), Error> {
        check_in_range(&self.path, self.len(), indices)
    }

    /// The validated location of record `index`.
    pub(crate) fn loc(&self, index: u64) -> Result<RecordLoc, Error> {
        self.check_indices(&[index])?;
        let (p, local) = self.locate(index);
        self.readers[p].loc(local)
    }

    /// Whether a gather of `indices` (in range) over local parts reads
    /// cold ([`StoreReader::reads_direct`]), by the parts of up to
    /// [`SAMPLE`](super::cold::SAMPLE) of its records: such a gather takes
    /// the grouped path, each part reading its records at once.
    fn reads_direct(&self, indices: &[u64]) -> bool {
        if !self.local || indices.is_empty() {
            return false;
        }
        let (n, k) = (indices.len(), indices.len().min(super::cold::SAMPLE));
        (0..k).any(|j| {
            let (p, local) = self.locate(indices[j * n / k]);
            self.readers[p].reads_direct(&[local])
        })
    }

    /// Starts reading the records at `indices` ahead of their gather, each
    /// part its own ([`StoreReader::prefetch`]); the stored bytes asked for.
    pub(crate) fn prefetch(&self, indices: &[u64]) -> u64 {
        self.group(indices.iter().map(|&i| (i, ())))
            .into_iter()
            .map(|(p, records)| {
                let local: Vec<u64> = records.into_iter().map(|r| r.0).collect();
                self.readers[p].prefetch(&local)
            })
            .sum()
    }

    /// Starts reading every record of `ranges` ahead of their gathers,
    /// each range cut at the parts' boundaries and read by its parts
    /// ([`StoreReader::prefetch_ranges`]); the stored bytes asked for.
    pub(crate) fn prefetch_ranges(&self, ranges: &[std::ops::Range<u64>]) -> u64 {
        let starts = self.index.starts();
        let mut bytes = 0;
        for (p, reader) in self.readers.iter().enumerate() {
            let (lo, hi) = (starts[p], starts[p + 1]);
            let local: Vec<std::ops::Range<u64>> = ranges
                .iter()
                .map(|r| r.start.max(lo)..r.end.min(hi))
                .filter(|r| r.start < r.end)
                .map(|r| r.start - lo..r.end - lo)
                .collect();
            if !local.is_empty() {
                bytes += reader.prefetch_ranges(&local);
            }
        }
        bytes
    }

    /// The part holding every one of `indices` (in range), if one does.
    fn single_part(&self, indices: &[u64]) -> Option<usize> {
        let (&first, rest) = indices.split_first()?;
        let (p, _) = self.locate(first);
        let (lo, hi) = (self.index.starts()[p], self.index.starts()[p + 1]);
        rest.iter().all(|&i| (lo..hi).contains(&i)).then_some(p)
    }

    /// `items` grouped by part ([`group_by_part`]).
    fn group<T>(&self, items: impl IntoIterator<Item = (u64, T)>) -> Vec<(usize, Vec<(u64, T)>)> {
        group_by_part(&self.index, items)
    }

    /// Gathers fixed-width records, as [`StoreReader::gather_fixed`].
    pub(crate) fn gather_fixed<D: Sink>(
        &self,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<(), Error> {
        super::reader::check_fixed_dst(indices.len(), width, dst.len())?;
        self.check_indices(indices)?;
        if let Some(p) = self.single_part(indices) {
            let start = self.index.starts()[p];
            if start == 0 {
                return self.readers[p].gather_fixed(indices, width, dst);
            }
            let local: Vec<u64> = indices.iter().map(|&i| i - start).collect();
            return self.readers[p].gather_fixed(&local, width, dst);
        }
        if width == 0 {
            return Ok(());
        }
        let direct = self.reads_direct(indices);
        // Every part a local raw store in the writer's regular layout: each
        // record copied from its part's map where it lies, found in the
        // compact table, the batch cut into one chunk per task as a single
        // store's raw gather is. (Other local parts take the general path
        // below, in the batch's order as well.)
        if let Some(t) = self
            .regular
            .as_ref()
            .filter(|t| !direct && t.parts.iter().all(|p| p.width == width))
        {
            let copy = |idx: &[u64], d: &mut [D]| -> Result<(), Error> {
                // Two passes a block: first every record's address (table
                // lookups only, cached), then the copies, whose loads are
                // then independent of each other and overlap in memory as
                // one store's do.
                const BLOCK: usize = 64;
                let mut from = [0usize; BLOCK];
                for (idx, d) in idx.chunks(BLOCK).zip(d.chunks_mut(BLOCK * width)) {
                    for (&i, at) in idx.iter().zip(from.iter_mut()) {
                        let (p, local) = self.locate(i);
                        let part = t.parts[p];
                        let (addr, len) = t.shards[part.first + (local & part.mask) as usize];
                        let start = ((local >> part.shift) as usize).wrapping_mul(width);
                        if start.checked_add(width).is_none_or(|end| end > len) {
                            return Err(Error::corrupt_record(
                                self.readers[p].path(),
                                local,
                                "location outside its shard",
                            ));
                        }
                        *at = addr + start;
                        super::reader::prefetch(std::ptr::with_exposed_provenance::<u8>(*at));
                    }
                    for (&at, d) in from[..idx.len()].iter().zip(d.chunks_exact_mut(width)) {
                        // SAFETY: `at` is `addr + start` of the first pass:
                        // `addr, len` is a shard's bytes from its base, a
                        // slice of a payload map that a reader of
                        // `self.readers` owns; the maps live as long as
                        // `self` (the table is built after the readers and
                        // dropped with them; no reader is replaced or
                        // remapped meanwhile) and are never written
                        // (read-only maps of published stores). `start +
                        // width <= len` was checked there, so the `width`
                        // bytes from `at` lie inside that slice. `d` has a
                        // record for each of the first pass's addresses.
                        let src = unsafe {
                            std::slice::from_raw_parts(
                                std::ptr::with_exposed_provenance::<u8>(at),
                                width,
                            )
                        };
                        D::put(d, src);
                    }
                }
                Ok(())
            };
            let threads = rayon::current_num_threads();
            if dst.len() < PARALLEL_MIN_BYTES || indices.len() < PARALLEL_MIN_RECORDS || threads < 2
            {
                return copy(indices, dst);
            }
            let per_job = indices.len().div_ceil(2 * threads).max(1);
            return dst
                .par_chunks_mut(width * per_job)
                .zip(indices.par_chunks(per_job))
                .try_for_each(|(d, idx)| copy(idx, d));
        }
        if self.local && !direct {
            let mut jobs = Vec::with_capacity(indices.len());
            for (&i, d) in indices.iter().zip(dst.chunks_exact_mut(width)) {
                let (p, local) = self.locate(i);
                jobs.push((p, local, self.readers[p].loc(local)?, d));
            }
            return self.read_local(jobs);
        }
        let groups = self.group(indices.iter().copied().zip(dst.chunks_exact_mut(width)));
        gather_fixed_groups(groups, width, |p| &self.readers[p])
    }

    /// Decodes `(part, index in the part, location, destination)` jobs of
    /// local parts in the order given, in parallel when worth it, with one
    /// set of decoders a worker whatever the number of parts. On `Ok`
    /// every destination was written whole.
    fn read_local<D: Sink>(&self, jobs: Vec<LocalJob<'_, D>>) -> Result<(), Error> {
        read_local_jobs(jobs, self.parallel_min_bytes, |p| &self.readers[p])
    }

    /// Plans a variable-length gather, as [`StoreReader::plan_varlen`]: each
    /// part checks its own records.
    pub(crate) fn plan_varlen(&self, indices: &[u64], header: usize) -> Result<VarlenPlan, Error> {
        self.check_indices(indices)?;
        if let Some(p) = self.single_part(indices) {
            let start = self.index.starts()[p];
            let local: Vec<u64> = indices.iter().map(|&i| i - start).collect();
            let mut plan = self.readers[p].plan_varlen(&local, header)?;
            plan.indices = indices.to_vec();
            return Ok(plan);
        }
        if self.local && !self.reads_direct(indices) {
            // Each record checked by its part where it lies, in order.
            let locs = indices
                .iter()
                .map(|&i| {
                    let (p, local) = self.locate(i);
                    self.readers[p].plan_record(local, header, Some(&Staged::Local))
                })
                .collect::<Result<Vec<_>, _>>()?;
            return VarlenPlan::new(indices.to_vec(), locs, header, false);
        }
        plan_varlen_groups(&self.index, indices, header, |p| &self.readers[p])
    }

    /// Reads a plan of [`Self::plan_varlen`], as [`StoreReader::gather_varlen`].
    pub(crate) fn gather_varlen<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
    ) -> Result<&'d mut [u8], Error> {
        // A plan read cold checks its records once read (grouped by part).
        if !self.local || plan.check_fetched {
            return gather_varlen_groups(&self.index, plan, dst, |p| &self.readers[p]);
        }
        gather_varlen_local(&self.index, plan, dst, self.parallel_min_bytes, |p| {
            &self.readers[p]
        })
    }

    /// Reads a plan of [`Self::plan_varlen`] packed, as
    /// [`StoreReader::gather_varlen_packed`].
    pub(crate) fn gather_varlen_packed<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
        headers: &mut [u8],
    ) -> Result<&'d mut [u8], Error> {
        if !self.local || plan.check_fetched {
            return gather_packed_groups(&self.index, plan, dst, headers, |p| &self.readers[p]);
        }
        gather_packed_local(
            &self.index,
            plan,
            dst,
            headers,
            self.parallel_min_bytes,
            |p| &self.readers[p],
        )
    }
}

/// Reads a plan of local parts' records (made where they lie, unchecked
/// after the read) in the batch's order, straight into its segments, as
/// [`StoreReader::gather_varlen`].
pub(super) fn gather_varlen_local<'d, 'r, D: Sink>(
    index: &PartIndex,
    plan: &VarlenPlan,
    dst: &'d mut [D],
    parallel_min_bytes: usize,
    reader: impl Fn(usize) -> &'r StoreReader + Sync,
) -> Result<&'d mut [u8], Error> {
    let dst = plan.dst(dst, plan.len, "")?;
    let jobs = plan
        .tile(&mut *dst)
        .into_iter()
        .map(|(i, loc, d)| {
            let (p, local) = index.locate_in_range(i);
            (p, local, loc, d)
        })
        .collect();
    read_local_jobs(jobs, parallel_min_bytes, reader)?;
    // SAFETY: `tile` cut `dst` into the records' segments, zeroing each
    // lead and padding, and `read_local_jobs` returned `Ok`, so it wrote
    // every record's destination whole.
    Ok(unsafe { D::assume_init(dst) })
}

/// [`gather_varlen_local`] packed, as [`StoreReader::gather_varlen_packed`].
pub(super) fn gather_packed_local<'d, 'r, D: Sink>(
    index: &PartIndex,
    plan: &VarlenPlan,
    dst: &'d mut [D],
    headers: &mut [u8],
    parallel_min_bytes: usize,
    reader: impl Fn(usize) -> &'r StoreReader + Sync,
) -> Result<&'d mut [u8], Error> {
    let header = plan.header;
    let dst = plan.dst(dst, plan.packed_len, "packed ")?;
    plan.check_headers(headers)?;
    let jobs = plan.tile_packed(&mut *dst, headers);
    read_local_packed_jobs(index, jobs, header, parallel_min_bytes, reader)?;
    // SAFETY: `tile_packed` cut `dst` into the records' element ranges,
    // which tile it, and `read_local_packed_jobs` returned `Ok`, so it
    // wrote every range whole.
    Ok(unsafe { D::assume_init(dst) })
}

/// [`ErrorKind::IndexOutOfRange`] for the first of `indices` past `len`
/// records of the whole named `path`.
pub(super) fn check_in_range(path: &Path, len: u64, indices: &[u64]) -> Result<(), Error> {
    match indices.iter().find(|&&i| i >= len) {
        Some(&index) => Err(ErrorKind::IndexOutOfRange {
            path: path.to_path_buf(),
            index,
            len,
        }
        .into()),
        None => Ok(()),
    }
}

/// One record of a local gather: `(part, index in the part, location,
/// destination)`.
pub(super) type LocalJob<'d, D> = (usize, u64, RecordLoc, &'d mut [D]);

/// Decodes local parts' jobs in the order given, in parallel when worth
/// it, with one set of decoders a worker whatever the number of parts;
/// part `p` is `reader(p)`. On `Ok` every destination was written whole.
pub(super) fn read_local_jobs<'r, D: Sink>(
    jobs: Vec<LocalJob<'_, D>>,
    parallel_min_bytes: usize,
    reader: impl Fn(usize) -> &'r StoreReader + Sync,
) -> Result<(), Error> {
    let total: usize = jobs.iter().map(|j| j.3.len()).sum();
    run_jobs(
        jobs,
        total,
        parallel_min_bytes,
        SharedDecoders::new,
        |dec: &mut SharedDecoders<'r>, (p, local, loc, d)| {
            let r = reader(p);
            let dec = dec
                .for_state(r.codec_state())
                .map_err(|e| Error::io(r.path(), e))?;
            r.read_at(local, loc, d, dec, &Staged::Local)
        },
    )
}

/// [`read_local_jobs`] for a packed gather's jobs (global index, location,
/// header, elements), the parts found by `index`.
pub(super) fn read_local_packed_jobs<'r, D: Sink>(
    index: &PartIndex,
    jobs: Vec<PackedJob<'_, '_, D>>,
    header: usize,
    parallel_min_bytes: usize,
    reader: impl Fn(usize) -> &'r StoreReader + Sync,
) -> Result<(), Error> {
    let total: usize = jobs.iter().map(|j| j.3.len()).sum();
    run_jobs(
        jobs,
        total,
        parallel_min_bytes,
        || (SharedDecoders::new(), Vec::new()),
        |(dec, scratch): &mut (SharedDecoders<'r>, Vec<u8>), (i, loc, head, values)| {
            let (p, local) = index.locate_in_range(i);
            let r = reader(p);
            let dec = dec
                .for_state(r.codec_state())
                .map_err(|e| Error::io(r.path(), e))?;
            r.read_packed_at(
                local,
                loc,
                head,
                values,
                header,
                scratch,
                dec,
                &Staged::Local,
            )
        },
    )
}

/// `items`, each with the index it reads, grouped by the part of `index`
/// holding it: `(part, [(index in the part, item)])`, parts in order,
/// items in their order.
pub(super) fn group_by_part<T>(
    index: &PartIndex,
    items: impl IntoIterator<Item = (u64, T)>,
) -> Vec<(usize, Vec<(u64, T)>)> {
    let mut tagged: Vec<(usize, u64, T)> = items
        .into_iter()
        .map(|(i, t)| {
            let (p, local) = index.locate_in_range(i);
            (p, local, t)
        })
        .collect();
    // Stable: a part's records keep their order.
    tagged.sort_by_key(|t| t.0);
    let mut groups: Vec<(usize, Vec<(u64, T)>)> = Vec::new();
    for (p, local, t) in tagged {
        match groups.last_mut() {
            Some((q, g)) if *q == p => g.push((local, t)),
            _ => groups.push((p, vec![(local, t)])),
        }
    }
    groups
}

/// One part's records of a fixed-width gather: `(part, [(index in the
/// part, destination)])`.
pub(super) type PartJobs<'d, D> = (usize, Vec<(u64, &'d mut [D])>);

/// Gathers fixed-width records grouped by part ([`group_by_part`]), each
/// part (`reader(part)`) reading its own, the parts in parallel.
pub(super) fn gather_fixed_groups<'r, D: Sink>(
    groups: Vec<PartJobs<'_, D>>,
    width: usize,
    reader: impl Fn(usize) -> &'r StoreReader + Sync,
) -> Result<(), Error> {
    groups
        .into_par_iter()
        .try_for_each(|(p, jobs)| reader(p).gather_fixed_jobs(jobs, width))
}

/// Plans a variable-length gather of `indices` (in range of `index`) part
/// by part, each part checking its own records.
pub(super) fn plan_varlen_groups<'r>(
    index: &PartIndex,
    indices: &[u64],
    header: usize,
    reader: impl Fn(usize) -> &'r StoreReader,
) -> Result<VarlenPlan, Error> {
    let mut locs = vec![RecordLoc::default(); indices.len()];
    let mut check_fetched = false;
    let groups = group_by_part(index, indices.iter().copied().zip(0..indices.len()));
    for (p, records) in groups {
        let local: Vec<u64> = records.iter().map(|r| r.0).collect();
        let sub = reader(p).plan_varlen(&local, header)?;
        check_fetched |= sub.check_fetched;
        for (&(_, at), loc) in records.iter().zip(sub.locs) {
            locs[at] = loc;
        }
    }
    // Every part checked its records.
    VarlenPlan::new(indices.to_vec(), locs, header, check_fetched)
}

/// Reads a plan of [`plan_varlen_groups`] part by part, the parts in
/// parallel, each staging (fetching, or reading cold) its records at once.
pub(super) fn gather_varlen_groups<'d, 'r, D: Sink>(
    index: &PartIndex,
    plan: &VarlenPlan,
    dst: &'d mut [D],
    reader: impl Fn(usize) -> &'r StoreReader + Sync,
) -> Result<&'d mut [u8], Error> {
    let dst = plan.dst(dst, plan.len, "")?;
    let jobs = plan.tile(&mut *dst);
    let groups = group_by_part(index, jobs.into_iter().map(|(i, loc, d)| (i, (loc, d))));
    groups.into_par_iter().try_for_each(|(p, jobs)| {
        let r = reader(p);
        let records: Vec<(u64, RecordLoc)> = jobs.iter().map(|(i, (loc, _))| (*i, *loc)).collect();
        let staged = r.stage_checked(&records)?;
        let jobs = jobs.into_iter().map(|(i, (loc, d))| (i, loc, d)).collect();
        r.read_jobs(jobs, &staged)
    })?;
    // SAFETY: `tile` cut `dst` into the records' segments, zeroing each
    // lead and padding, and every group returned `Ok` from `read_jobs`,
    // which wrote each of its records' destinations whole; the groups
    // hold every record of the plan.
    Ok(unsafe { D::assume_init(dst) })
}

/// [`gather_varlen_groups`] packed, as [`StoreReader::gather_varlen_packed`].
pub(super) fn gather_packed_groups<'d, 'r, D: Sink>(
    index: &PartIndex,
    plan: &VarlenPlan,
    dst: &'d mut [D],
    headers: &mut [u8],
    reader: impl Fn(usize) -> &'r StoreReader + Sync,
) -> Result<&'d mut [u8], Error> {
    let header = plan.header;
    let dst = plan.dst(dst, plan.packed_len, "packed ")?;
    plan.check_headers(headers)?;
    let jobs = plan.tile_packed(&mut *dst, headers);
    let groups = group_by_part(
        index,
        jobs.into_iter().map(|(i, loc, h, d)| (i, (loc, h, d))),
    );
    groups.into_par_iter().try_for_each(|(p, jobs)| {
        let r = reader(p);
        let records: Vec<(u64, RecordLoc)> =
            jobs.iter().map(|(i, (loc, _, _))| (*i, *loc)).collect();
        let total = jobs.iter().map(|(_, (_, _, d))| d.len()).sum();
        let staged = r.stage_checked(&records)?;
        let jobs = jobs
            .into_iter()
            .map(|(i, (loc, h, d))| (i, loc, h, d))
            .collect();
        r.read_packed_jobs(jobs, header, total, &staged)
    })?;
    // SAFETY: `tile_packed` cut `dst` into the records' element ranges,
    // which tile it, and every group returned `Ok` from `read_packed_jobs`,
    // which wrote each of its ranges whole; the groups hold every record
    // of the plan.
    Ok(unsafe { D::assume_init(dst) })
}
