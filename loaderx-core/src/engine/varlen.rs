//! Gathers of variable-length records (the Ragged contract's), as the
//! engine's entry point: planned once, then read into one buffer.
//!
//! [`StoreReader::plan_varlen`] looks up and checks every record's location
//! and logical length and places each record in its own 8-byte-aligned
//! segment, so that the elements after its header start 8-byte aligned: a
//! header of a multiple of 8 bytes (`u64` dims) starts the segment, a
//! shorter one (`u32` dims of odd rank) is preceded by zeros. The plan's
//! [`len`](VarlenPlan::len) is the buffer size.
//! [`StoreReader::gather_varlen`] then decodes every record into its
//! segment (fetching a remote store's stored bytes first) and zeroes the
//! bytes around it, so that the whole buffer is written.
//!
//! [`StoreReader::gather_varlen_packed`] reads the same plan packed: the
//! records' elements end to end from the buffer's first byte (no headers,
//! no padding), each header into a table of its own. Raw records are
//! copied from the stored bytes straight to their place; a compressed one
//! is decoded into a worker's scratch and its elements copied from there,
//! as Python loaderx 2.8.19 does.

use crate::codec::{Codec, Sink};
use crate::engine::reader::{Staged, StoreReader};
use crate::error::{Error, ErrorKind};
use crate::format::RecordLoc;

/// A record of a packed gather: its index and location, and where its
/// header and its elements go.
pub(super) type PackedJob<'h, 'd, D> = (u64, RecordLoc, &'h mut [u8], &'d mut [D]);

/// Alignment of every record's segment in a variable-length gather.
pub(crate) const SEGMENT_ALIGN: usize = 8;

/// A planned gather of variable-length records: their locations, checked,
/// and the buffer they fill, each record in its own segment.
#[derive(Debug, Clone)]
pub(crate) struct VarlenPlan {
    pub(super) indices: Vec<u64>,
    pub(super) locs: Vec<RecordLoc>,
    /// Zero bytes before each record in its segment, so that its elements
    /// (after the header) start aligned.
    pub(super) lead: usize,
    /// Bytes of the buffer: the segments end to end.
    pub(super) len: usize,
    /// Bytes of every record's header.
    pub(super) header: usize,
    /// Bytes of a packed gather: every record's elements, end to end.
    pub(super) packed_len: usize,
    /// The logical lengths still have to be checked against the lengths the
    /// stored frames declare, once fetched (a remote store's records).
    pub(super) check_fetched: bool,
    /// The parts of a lazily converted stream the plan was made over,
    /// held until its gather reads them (never another copy of a part).
    pub(super) held: Option<super::lazy::Held>,
}

impl VarlenPlan {
    /// Bytes the gather writes: every record's segment, end to end.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes a packed gather writes: every record's elements, end to end.
    pub(crate) fn packed_len(&self) -> usize {
        self.packed_len
    }

    /// Bytes of every record's header.
    pub(crate) fn header(&self) -> usize {
        self.header
    }

    /// The record indices, in gather order.
    pub(crate) fn indices(&self) -> &[u64] {
        &self.indices
    }

    /// The first `len` elements of `dst`, or the `Buffer` error of a
    /// gather of this plan into a shorter one.
    pub(super) fn dst<'d, D>(
        &self,
        dst: &'d mut [D],
        len: usize,
        what: &str,
    ) -> Result<&'d mut [D], Error> {
        let dst_len = dst.len();
        dst.get_mut(..len).ok_or_else(|| {
            ErrorKind::Buffer {
                detail: format!(
                    "a {what}gather of {} records needs {len} bytes, got {dst_len}",
                    self.indices.len(),
                ),
            }
            .into()
        })
    }

    /// Refuses `headers` unless it holds one header per record.
    pub(super) fn check_headers(&self, headers: &[u8]) -> Result<(), Error> {
        let (n, header) = (self.indices.len(), self.header);
        if Some(headers.len()) != n.checked_mul(header) {
            return Err(ErrorKind::Buffer {
                detail: format!(
                    "{} header bytes for {n} records of {header}-byte headers",
                    headers.len()
                ),
            }
            .into());
        }
        Ok(())
    }

    /// Cuts `dst` (exactly [`len`](Self::len) bytes) into the records'
    /// segments: each is its lead, its record, then its padding; the leads
    /// and paddings are zeroed, and the records returned as
    /// `(index, location, destination)` jobs, in plan order.
    pub(super) fn tile<'d, D: Sink>(&self, dst: &'d mut [D]) -> Vec<(u64, RecordLoc, &'d mut [D])> {
        let mut jobs = Vec::with_capacity(self.indices.len());
        let mut rest = dst;
        for (&index, &loc) in self.indices.iter().zip(&self.locs) {
            let logic = loc.logic_length as usize;
            let (segment, tail) =
                rest.split_at_mut((self.lead + logic).next_multiple_of(SEGMENT_ALIGN));
            rest = tail;
            let (lead, segment) = segment.split_at_mut(self.lead);
            let (record, padding) = segment.split_at_mut(logic);
            // Deterministic bytes, whatever the buffer held.
            D::zero(lead);
            D::zero(padding);
            jobs.push((index, loc, record));
        }
        debug_assert!(rest.is_empty());
        jobs
    }

    /// Cuts `dst` (exactly [`packed_len`](Self::packed_len) bytes) into the
    /// records' element ranges and `headers` (a header per record) into
    /// their headers: `(index, location, header, elements)` jobs, in plan
    /// order.
    pub(super) fn tile_packed<'d, 'h, D>(
        &self,
        dst: &'d mut [D],
        headers: &'h mut [u8],
    ) -> Vec<PackedJob<'h, 'd, D>> {
        let mut jobs = Vec::with_capacity(self.indices.len());
        let mut rest = dst;
        let mut heads = headers.chunks_exact_mut(self.header.max(1));
        for (&index, &loc) in self.indices.iter().zip(&self.locs) {
            let (values, tail) = rest.split_at_mut(loc.logic_length as usize - self.header);
            rest = tail;
            jobs.push((index, loc, heads.next().unwrap_or_default(), values));
        }
        debug_assert!(rest.is_empty());
        jobs
    }

    /// The plan of `locs` (checked: each holds more than `header` bytes)
    /// for `indices`: every record in its segment, after the zero lead that
    /// aligns its elements, and the sizes of both gathers.
    ///
    /// Errors: `Buffer` when the total overflows `usize`.
    pub(super) fn new(
        indices: Vec<u64>,
        locs: Vec<RecordLoc>,
        header: usize,
        check_fetched: bool,
    ) -> Result<VarlenPlan, Error> {
        let lead = header.next_multiple_of(SEGMENT_ALIGN) - header;
        let (mut len, mut packed_len) = (0usize, 0usize);
        for loc in &locs {
            let logic = loc.logic_length as usize;
            len = len
                .checked_add((lead + logic).next_multiple_of(SEGMENT_ALIGN))
                .ok_or_else(|| ErrorKind::Buffer {
                    detail: format!(
                        "a gather of {} variable-length records overflows memory",
                        indices.len()
                    ),
                })?;
            // Never more than `len`, which did not overflow; `logic > header`
            // was checked.
            packed_len += logic - header;
        }
        Ok(VarlenPlan {
            indices,
            locs,
            lead,
            len,
            header,
            packed_len,
            check_fetched,
            held: None,
        })
    }

    /// `(index, record start, record length)` of every record, in order.
    pub(crate) fn records(&self) -> impl ExactSizeIterator<Item = (u64, usize, usize)> + '_ {
        let mut start = 0;
        let lead = self.lead;
        self.indices.iter().zip(&self.locs).map(move |(&i, loc)| {
            let len = loc.logic_length as usize;
            let at = start + lead;
            start += (lead + len).next_multiple_of(SEGMENT_ALIGN);
            (i, at, len)
        })
    }
}

impl StoreReader {
    /// Plans a gather of the records at `indices`, in order, each of which
    /// must hold more than its `header` bytes of header.
    ///
    /// Every location is looked up and validated once, and every logical
    /// length checked against the stored bytes before any memory is sized
    /// by it ([`StoreReader::check_logical_length`]). A remote store fetches
    /// nothing here: its lengths are bounded by the expansion limit now and
    /// checked against the frames by [`gather_varlen`](Self::gather_varlen).
    ///
    /// Errors: `IndexOutOfRange` for an index past the end; `CorruptRecord`
    /// for a malformed location, a logical length the stored bytes cannot
    /// have, or a record of at most `header` bytes; `Buffer` when the total
    /// overflows `usize`.
    pub(crate) fn plan_varlen(&self, indices: &[u64], header: usize) -> Result<VarlenPlan, Error> {
        self.check_indices(indices)?;
        // A local store's stored bytes are at hand: check what the frames
        // declare now, once.
        // Read cold, they are checked once read, as a remote store's.
        let local = (!self.is_remote() && !self.reads_direct(indices)).then_some(Staged::Local);
        let locs = indices
            .iter()
            .map(|&i| self.plan_record(i, header, local.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        VarlenPlan::new(indices.to_vec(), locs, header, local.is_none())
    }

    /// Reads the records of `plan`, which this store made, into the first
    /// [`plan.len()`](VarlenPlan::len) bytes of `dst`: each record in its
    /// segment ([`VarlenPlan::records`]), the bytes before and after it
    /// zeroed. A remote store fetches the stored bytes first and checks the
    /// lengths their frames declare.
    ///
    /// On `Ok` every one of those bytes was written, so `dst` may be
    /// uninitialised memory; they are returned, as bytes.
    ///
    /// Errors: `Buffer` when `dst` is shorter than the plan; `CorruptRecord`
    /// for a record whose stored bytes do not decode to its logical length;
    /// `Remote` when a fetch fails. After an error `dst` holds unspecified
    /// (possibly still uninitialised) bytes.
    pub(crate) fn gather_varlen<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
    ) -> Result<&'d mut [u8], Error> {
        let dst = plan.dst(dst, plan.len, "")?;
        #[cfg_attr(not(feature = "remote"), allow(unused_mut))]
        let mut jobs = plan.tile(&mut *dst);
        // Warm raw records: straight out of the memory tier. (A raw record's
        // logical length was checked by the plan: it stores exactly it.)
        let copied = plan.check_fetched && self.copy_jobs_resident(&mut jobs)?;
        // Raw records read cold: straight into their segments (a raw
        // record's length was checked by the plan: it stores exactly it).
        if plan.check_fetched && !self.is_remote() && self.codec() == Codec::Raw {
            self.read_raw_direct(&mut jobs)?;
        } else if !copied {
            let staged = self.stage_plan(plan)?;
            self.read_jobs(jobs, &staged)?;
        }
        // SAFETY: the segments tile `dst` (the plan's length is the sum of
        // their sizes): every lead and padding was zeroed above, and `read_jobs` or
        // `copy_jobs_resident` returned `Ok` (`true` for the latter), so one
        // of them wrote every record's destination whole.
        Ok(unsafe { D::assume_init(dst) })
    }
}

impl StoreReader {
    /// The stored bytes of `plan`'s records: at hand for a local store; for
    /// a remote one fetched, and the lengths their frames declare checked.
    fn stage_plan(&self, plan: &VarlenPlan) -> Result<Staged, Error> {
        if !plan.check_fetched {
            return Ok(Staged::Local);
        }
        let records: Vec<_> = plan
            .indices
            .iter()
            .copied()
            .zip(plan.locs.iter().copied())
            .collect();
        self.stage_checked(&records)
    }

    /// Fetches the stored bytes of a remote store's `records`, or reads a
    /// local one's when it reads cold ([`StoreReader::reads_direct`]; else
    /// they are in the maps), and checks the lengths their frames declare.
    pub(super) fn stage_checked(&self, records: &[(u64, RecordLoc)]) -> Result<Staged, Error> {
        let staged = if self.is_remote() {
            self.stage(records)?
        } else {
            let indices: Vec<u64> = records.iter().map(|r| r.0).collect();
            if self.reads_direct(&indices) {
                self.read_stored_direct(records)?
            } else {
                Staged::Local
            }
        };
        for &(i, loc) in records {
            self.check_logical_length(i, loc, Some(&staged))?;
        }
        Ok(staged)
    }

    /// Reads the records of `plan`, which this store made, packed: their
    /// elements end to end into the first
    /// [`plan.packed_len()`](VarlenPlan::packed_len) bytes of `dst`, and
    /// their headers, [`plan.header()`](VarlenPlan::header) bytes each, end
    /// to end into `headers`. A remote store fetches the stored bytes first
    /// and checks the lengths their frames declare.
    ///
    /// On `Ok` every one of those bytes of `dst` was written, so `dst` may
    /// be uninitialised memory; they are returned, as bytes.
    ///
    /// Errors: `Buffer` when `dst` is shorter than the plan, or `headers`
    /// is not a header per record; `CorruptRecord` for a record whose
    /// stored bytes do not decode to its logical length; `Remote` when a
    /// fetch fails. After an error `dst` holds unspecified (possibly still
    /// uninitialised) bytes.
    pub(crate) fn gather_varlen_packed<'d, D: Sink>(
        &self,
        plan: &VarlenPlan,
        dst: &'d mut [D],
        headers: &mut [u8],
    ) -> Result<&'d mut [u8], Error> {
        let header = plan.header;
        let dst = plan.dst(dst, plan.packed_len, "packed ")?;
        plan.check_headers(headers)?;
        let jobs = plan.tile_packed(&mut *dst, headers);
        let staged = self.stage_plan(plan)?;
        self.read_packed_jobs(jobs, header, plan.packed_len, &staged)?;
        // SAFETY: the records' element ranges tile `dst` (the plan's packed
        // length is the sum of their sizes), and every job returned `Ok`,
        // having written its whole range with `D::put`.
        Ok(unsafe { D::assume_init(dst) })
    }
}

impl StoreReader {
    /// Reads packed jobs of this store's records (`total` element bytes in
    /// all) from `staged`: a raw record straight from its stored bytes, a
    /// compressed one through a worker's scratch; on the calling thread or
    /// in parallel as [`StoreReader::read_jobs`] decides. On `Ok` every
    /// header and element byte was written.
    pub(super) fn read_packed_jobs<D: Sink>(
        &self,
        jobs: Vec<PackedJob<'_, '_, D>>,
        header: usize,
        total: usize,
        staged: &Staged,
    ) -> Result<(), Error> {
        super::reader::run_jobs(
            jobs,
            total,
            self.parallel_min_bytes(),
            || (self.decoder(), Vec::new()),
            |(dec, scratch), (index, loc, head, values)| {
                let dec = dec.as_mut().map_err(|e| {
                    Error::io(self.path(), std::io::Error::new(e.kind(), e.to_string()))
                })?;
                self.read_packed_at(index, loc, head, values, header, scratch, dec, staged)
            },
        )
    }

    /// Reads record `index` (at `loc`) of a packed gather: its `header`
    /// bytes into `head`, its elements into `values`; a raw record straight
    /// from its stored bytes, a compressed one through `scratch`.
    #[allow(clippy::too_many_arguments, reason = "one record's whole context")]
    pub(super) fn read_packed_at<D: Sink>(
        &self,
        index: u64,
        loc: RecordLoc,
        head: &mut [u8],
        values: &mut [D],
        header: usize,
        scratch: &mut Vec<u8>,
        dec: &mut crate::codec::Decoder<'_>,
        staged: &Staged,
    ) -> Result<(), Error> {
        let stored = self.stored(staged, index, loc)?;
        let logic = loc.logic_length as usize;
        let record = if self.codec() == Codec::Raw {
            if stored.len() != logic {
                return Err(Error::corrupt_record(
                    self.path(),
                    index,
                    format!(
                        "raw record stores {} bytes but should hold {logic}",
                        stored.len()
                    ),
                ));
            }
            stored
        } else {
            scratch.clear();
            scratch.resize(logic, 0);
            dec.decode(stored, scratch.as_mut_slice())
                .map_err(|e| Error::corrupt_record(self.path(), index, e))?;
            scratch.as_slice()
        };
        let (h, elements) = record.split_at(header);
        head.copy_from_slice(h);
        D::put(values, elements);
        Ok(())
    }

    /// The location of record `index` (in range) for a variable-length
    /// gather: its logical length checked (against what its frame declares
    /// when `local` holds the stored bytes) and long enough for a `header`
    /// and elements.
    pub(super) fn plan_record(
        &self,
        index: u64,
        header: usize,
        local: Option<&Staged>,
    ) -> Result<RecordLoc, Error> {
        let loc = self.loc(index)?;
        // Memory is sized by the logical lengths: check them first.
        self.check_logical_length(index, loc, local)?;
        let logic = loc.logic_length as usize;
        if logic <= header {
            return Err(Error::corrupt_record(
                self.path(),
                index,
                format!("{logic} bytes cannot hold a {header}-byte header and elements"),
            ));
        }
        Ok(loc)
    }
}
