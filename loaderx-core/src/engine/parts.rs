//! Concatenated stores: several stores of one schema read as one sequence
//! of records, the first part's records first (a multi-part dataset's
//! stream, a mixture's sources).
//!
//! Record `i` of the whole lies in the part whose range holds it, found by
//! a binary search over the parts' first indices (no per-record memory
//! beyond the parts' own tables). A gather that touches one part is that
//! part's own gather; one that spans parts groups its records by part and
//! runs the groups in parallel, each record still read straight into its
//! place in the caller's buffer.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::reader::StoreReader;
use super::varlen::{SEGMENT_ALIGN, VarlenPlan};
use crate::codec::Sink;
use crate::error::{Error, ErrorKind};
use crate::format::RecordLoc;

/// Stores read end to end as one.
pub(crate) struct Parts {
    path: PathBuf,
    readers: Vec<StoreReader>,
    /// `starts[p]`: the index of part `p`'s first record; one entry more,
    /// the total.
    starts: Vec<u64>,
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
        let mut starts = Vec::with_capacity(readers.len() + 1);
        let mut total = 0u64;
        starts.push(0);
        for r in &readers {
            total = total
                .checked_add(r.len())
                .ok_or_else(|| Error::invalid("the parts hold more than 2^64 records"))?;
            starts.push(total);
        }
        Ok(Parts {
            path: path.to_path_buf(),
            readers,
            starts,
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
        self.starts.last().copied().unwrap_or(0)
    }

    /// The first index of every part, and the total.
    pub(crate) fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// `(part, index in the part)` of record `index` (in range).
    fn locate(&self, index: u64) -> (usize, u64) {
        // The last start at or below `index`; empty parts are skipped, as
        // their start equals the next one's.
        let p = self
            .starts
            .partition_point(|&s| s <= index)
            .saturating_sub(1);
        (p, index - self.starts[p])
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

    /// The validated location of record `index`.
    pub(crate) fn loc(&self, index: u64) -> Result<RecordLoc, Error> {
        self.check_indices(&[index])?;
        let (p, local) = self.locate(index);
        self.readers[p].loc(local)
    }

    /// The part holding every one of `indices` (in range), if one does.
    fn single_part(&self, indices: &[u64]) -> Option<usize> {
        let (&first, rest) = indices.split_first()?;
        let (p, _) = self.locate(first);
        let (lo, hi) = (self.starts[p], self.starts[p + 1]);
        rest.iter().all(|&i| (lo..hi).contains(&i)).then_some(p)
    }

    /// `items`, each with the index it reads, grouped by part: `(part,
    /// [(index in the part, item)])`, parts in order, items in their order.
    fn group<T>(&self, items: impl IntoIterator<Item = (u64, T)>) -> Vec<(usize, Vec<(u64, T)>)> {
        let mut tagged: Vec<(usize, u64, T)> = items
            .into_iter()
            .map(|(i, t)| {
                let (p, local) = self.locate(i);
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

    /// Gathers fixed-width records, as [`StoreReader::gather_fixed`].
    pub(crate) fn gather_fixed<D: Sink>(
        &self,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<(), Error> {
        if indices.len().checked_mul(width) != Some(dst.len()) {
            return Err(ErrorKind::Buffer {
                detail: format!(
                    "{} records of {width} bytes need {} bytes, got {}",
                    indices.len(),
                    indices.len().saturating_mul(width),
                    dst.len()
                ),
            }
            .into());
        }
        self.check_indices(indices)?;
        if let Some(p) = self.single_part(indices) {
            let start = self.starts[p];
            let local: Vec<u64> = indices.iter().map(|&i| i - start).collect();
            return self.readers[p].gather_fixed(&local, width, dst);
        }
        if width == 0 {
            return Ok(());
        }
        let groups = self.group(indices.iter().copied().zip(dst.chunks_exact_mut(width)));
        groups
            .into_par_iter()
            .try_for_each(|(p, jobs)| self.readers[p].gather_fixed_jobs(jobs, width))
    }

    /// Plans a variable-length gather, as [`StoreReader::plan_varlen`]: each
    /// part checks its own records.
    pub(crate) fn plan_varlen(&self, indices: &[u64], header: usize) -> Result<VarlenPlan, Error> {
        self.check_indices(indices)?;
        if let Some(p) = self.single_part(indices) {
            let start = self.starts[p];
            let local: Vec<u64> = indices.iter().map(|&i| i - start).collect();
            let mut plan = self.readers[p].plan_varlen(&local, header)?;
            plan.indices = indices.to_vec();
            return Ok(plan);
        }
        let mut locs = vec![RecordLoc::default(); indices.len()];
        let mut check_fetched = false;
        let groups = self.group(indices.iter().copied().zip(0..indices.len()));
        for (p, records) in groups {
            let local: Vec<u64> = records.iter().map(|r| r.0).collect();
            let sub = self.readers[p].plan_varlen(&local, header)?;
            check_fetched |= sub.check_fetched;
            for (&(_, at), loc) in records.iter().zip(sub.locs) {
                locs[at] = loc;
            }
        }
        let lead = header.next_multiple_of(SEGMENT_ALIGN) - header;
        let overflow = || ErrorKind::Buffer {
            detail: format!(
                "a gather of {} variable-length records overflows memory",
                indices.len()
            ),
        };
        let (mut len, mut packed_len) = (0usize, 0usize);
        for loc in &locs {
            let logic = loc.logic_length as usize;
            len = len
                .checked_add((lead + logic).next_multiple_of(SEGMENT_ALIGN))
                .ok_or_else(overflow)?;
            // Every part checked `logic > header`.
            packed_len += logic - header;
        }
        Ok(VarlenPlan {
            indices: indices.to_vec(),
            locs,
            lead,
            len,
            header,
            packed_len,
            check_fetched,
        })
    }

    /// Reads a plan of [`Self::plan_varlen`], as [`StoreReader::gather_varlen`].
    pub(crate) fn gather_varlen<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
    ) -> Result<&'d mut [u8], Error> {
        let dst = plan.dst(dst, plan.len, "")?;
        let jobs = plan.tile(&mut *dst);
        let groups = self.group(jobs.into_iter().map(|(i, loc, d)| (i, (loc, d))));
        groups.into_par_iter().try_for_each(|(p, jobs)| {
            let r = &self.readers[p];
            let records: Vec<(u64, RecordLoc)> =
                jobs.iter().map(|(i, (loc, _))| (*i, *loc)).collect();
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

    /// Reads a plan of [`Self::plan_varlen`] packed, as
    /// [`StoreReader::gather_varlen_packed`].
    pub(crate) fn gather_varlen_packed<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
        headers: &mut [u8],
    ) -> Result<&'d mut [u8], Error> {
        let (n, header) = (plan.indices.len(), plan.header);
        let dst = plan.dst(dst, plan.packed_len, "packed ")?;
        if Some(headers.len()) != n.checked_mul(header) {
            return Err(ErrorKind::Buffer {
                detail: format!(
                    "{} header bytes for {n} records of {header}-byte headers",
                    headers.len()
                ),
            }
            .into());
        }
        let jobs = plan.tile_packed(&mut *dst, headers);
        let groups = self.group(jobs.into_iter().map(|(i, loc, h, d)| (i, (loc, h, d))));
        groups.into_par_iter().try_for_each(|(p, jobs)| {
            let r = &self.readers[p];
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
        // which tile it, and every group returned `Ok` from
        // `read_packed_jobs`, which wrote each of its ranges whole; the
        // groups hold every record of the plan.
        Ok(unsafe { D::assume_init(dst) })
    }
}
