//! Gathering Ragged records: [`RaggedGatherPlan`] and the [`DynRagged`]
//! gathers built on it, through the engine's variable-length entry point
//! ([`crate::engine::varlen`]). This layer only checks the shape headers the
//! engine hands back and turns them into a [`RaggedLayout`].

use super::{DynRagged, DynRaggedBatch, RaggedLayout};
use crate::adapter::spare_bytes;
use crate::codec::Sink;
use crate::engine::VarlenPlan;
use crate::error::{Error, ErrorKind};

/// A Ragged gather planned by [`DynRagged::plan_gather`]: every record's
/// location looked up and checked once, and the bytes the batch needs.
///
/// [`DynRagged::gather_planned`] reads the records into a buffer of at
/// least [`len`](Self::len) bytes. Planning first lets a caller size or
/// stage that buffer without locating and checking every record twice, as
/// [`gather_len`](DynRagged::gather_len) followed by
/// [`gather_into`](DynRagged::gather_into) does. A plan serves the store
/// that made it, which it borrows. A remote store (feature `remote`)
/// fetches nothing to plan; the gather fetches the records.
///
/// ```
/// use loaderx_core::{Codec, Ragged, RaggedWriter};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = RaggedWriter::<u16>::create(dir.path().join("tok"), 1, Codec::Zstd)?;
/// w.append([vec![1u16, 2, 3], vec![4], vec![5, 6]])?;
/// w.close()?;
/// let tok = Ragged::<u16>::open(dir.path().join("tok"))?;
///
/// let plan = tok.as_dyn().plan_gather(&[2, 0])?;
/// let mut buf = vec![0u8; plan.len()]; // or a staged buffer of that size
/// let layout = tok.as_dyn().gather_planned(&plan, &mut buf)?;
/// assert_eq!(layout.shape(1), &[3]);
/// assert_eq!(&buf[layout.byte_range(0)], &[5, 0, 6, 0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RaggedGatherPlan<'s> {
    store: &'s DynRagged,
    plan: VarlenPlan,
}

impl RaggedGatherPlan<'_> {
    /// Bytes a [`gather_planned`](DynRagged::gather_planned) of this plan
    /// writes, the size its destination needs: every record's shape header
    /// and elements in its own 8-byte-aligned segment.
    pub fn len(&self) -> usize {
        self.plan.len()
    }

    /// Bytes a [`gather_planned_packed`](DynRagged::gather_planned_packed)
    /// of this plan writes: every record's elements, end to end.
    pub fn packed_len(&self) -> usize {
        self.plan.packed_len()
    }

    /// True when the plan gathers nothing (no records).
    pub fn is_empty(&self) -> bool {
        self.plan.len() == 0
    }

    /// The record indices, in gather order.
    pub fn indices(&self) -> &[u64] {
        self.plan.indices()
    }
}

impl std::fmt::Debug for RaggedGatherPlan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaggedGatherPlan")
            .field("store", &self.store.path())
            .field("records", &self.plan.indices().len())
            .field("len", &self.plan.len())
            .finish()
    }
}

impl DynRagged {
    /// Plans a gather of the records at `indices`, in order: looks up and
    /// checks every record's location and length once. The plan's
    /// [`len`](RaggedGatherPlan::len) is the size of the buffer
    /// [`gather_planned`](Self::gather_planned) fills.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::IndexOutOfRange`](crate::ErrorKind::IndexOutOfRange) for
    /// an index past the end;
    /// [`ErrorKind::CorruptRecord`](crate::ErrorKind::CorruptRecord) for a
    /// malformed location, or a length the stored bytes cannot decode to or
    /// that cannot hold the shape header, naming the first such record in
    /// `indices`; [`ErrorKind::Buffer`](crate::ErrorKind::Buffer) when the
    /// total overflows `usize`.
    pub fn plan_gather(&self, indices: &[u64]) -> Result<RaggedGatherPlan<'_>, Error> {
        let plan = self.engine.plan_varlen(indices, self.shape_header_len())?;
        Ok(RaggedGatherPlan { store: self, plan })
    }

    /// Gathers the records of `plan` into the first
    /// [`plan.len()`](RaggedGatherPlan::len) bytes of `dst`; returns where
    /// each record lies. Records start 8-byte aligned relative to `dst`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// another store made `plan`; [`ErrorKind::Buffer`](crate::ErrorKind::Buffer)
    /// when `dst` is shorter than the plan;
    /// [`ErrorKind::CorruptRecord`](crate::ErrorKind::CorruptRecord) for a
    /// record whose payload or shape header is malformed;
    /// [`ErrorKind::Remote`](crate::ErrorKind::Remote) when a remote store
    /// cannot fetch the records. After an error `dst` holds unspecified
    /// bytes.
    pub fn gather_planned(
        &self,
        plan: &RaggedGatherPlan<'_>,
        dst: &mut [u8],
    ) -> Result<RaggedLayout, Error> {
        self.gather_planned_to(plan, dst)
    }

    /// [`gather_planned`](Self::gather_planned) into bytes that may be
    /// uninitialised: on `Ok` every one of the first
    /// [`plan.len()`](RaggedGatherPlan::len) bytes of `dst` was written
    /// (records, and zeros in their padding); after an error `dst` must not
    /// be read.
    pub(crate) fn gather_planned_to<D: Sink>(
        &self,
        plan: &RaggedGatherPlan<'_>,
        dst: &mut [D],
    ) -> Result<RaggedLayout, Error> {
        self.check_plan(plan)?;
        let bytes = self.engine.gather_varlen(&plan.plan, dst)?;
        self.layout_of(&plan.plan, bytes)
    }

    /// Gathers the records of `plan` packed: their elements end to end in
    /// the first [`plan.packed_len()`](RaggedGatherPlan::packed_len) bytes
    /// of `dst`, without shape headers or padding; returns where each
    /// record lies (a layout that [`is_packed`](RaggedLayout::is_packed)).
    /// Raw records are copied from the store straight to their place; a
    /// compressed one is decoded into a worker's scratch first.
    ///
    /// ```
    /// use loaderx_core::{Codec, Ragged, RaggedWriter};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = RaggedWriter::<u16>::create(dir.path().join("tok"), 1, Codec::Raw)?;
    /// w.append([vec![1u16, 2, 3], vec![4], vec![5, 6]])?;
    /// w.close()?;
    /// let tok = Ragged::<u16>::open(dir.path().join("tok"))?;
    /// let plan = tok.as_dyn().plan_gather(&[2, 0])?;
    /// let mut values = vec![0u8; plan.packed_len()];
    /// let layout = tok.as_dyn().gather_planned_packed(&plan, &mut values)?;
    /// assert_eq!(values, [5, 0, 6, 0, 1, 0, 2, 0, 3, 0]);
    /// assert_eq!(layout.cu_seqlens(2)?, [0, 2, 5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`gather_planned`](Self::gather_planned), with `dst` shorter than
    /// the plan's packed length as
    /// [`ErrorKind::Buffer`](crate::ErrorKind::Buffer).
    pub fn gather_planned_packed(
        &self,
        plan: &RaggedGatherPlan<'_>,
        dst: &mut [u8],
    ) -> Result<RaggedLayout, Error> {
        self.gather_packed_to(plan, dst)
    }

    /// [`gather_planned_packed`](Self::gather_planned_packed) into bytes
    /// that may be uninitialised: on `Ok` every one of the first
    /// [`plan.packed_len()`](RaggedGatherPlan::packed_len) bytes of `dst`
    /// was written; after an error `dst` must not be read.
    pub(crate) fn gather_packed_to<D: Sink>(
        &self,
        plan: &RaggedGatherPlan<'_>,
        dst: &mut [D],
    ) -> Result<RaggedLayout, Error> {
        self.check_plan(plan)?;
        let plan = &plan.plan;
        let n = plan.indices().len();
        let head = plan.header();
        let mut headers = Vec::new();
        headers
            .try_reserve_exact(n.saturating_mul(head))
            .map_err(|_| ErrorKind::Buffer {
                detail: format!("cannot allocate the shape headers of {n} records"),
            })?;
        headers.resize(n * head, 0);
        self.engine.gather_varlen_packed(plan, dst, &mut headers)?;
        let mut layout = RaggedLayout {
            ndim: self.ndim,
            offsets: Vec::with_capacity(n),
            byte_lens: Vec::with_capacity(n),
            dims: Vec::with_capacity(n * self.ndim),
        };
        let mut at = 0usize;
        for ((index, _, len), header) in plan.records().zip(headers.chunks_exact(head.max(1))) {
            let payload = len - head;
            if !push_dims(
                &mut layout.dims,
                header,
                self.dim_width,
                self.dtype.size(),
                payload,
            ) {
                return Err(Error::corrupt_record(
                    self.path(),
                    index,
                    format!(
                        "shape {:?} does not match its {payload} element bytes",
                        &layout.dims[layout.dims.len() - self.ndim..],
                    ),
                ));
            }
            layout.offsets.push(at);
            layout.byte_lens.push(payload);
            at += payload;
        }
        Ok(layout)
    }

    /// Gathers the records at `indices`, in order, packed into one
    /// allocation: their elements end to end, as
    /// [`gather_planned_packed`](Self::gather_planned_packed) places them;
    /// [`DynRaggedBatch::packed`] then gives Python loaderx 2.8.19's
    /// `values`, `cu_seqlens` and `shapes`.
    ///
    /// # Errors
    ///
    /// As [`gather`](Self::gather).
    pub fn gather_packed(&self, indices: &[u64]) -> Result<DynRaggedBatch, Error> {
        let plan = self.plan_gather(indices)?;
        self.gather_owned(plan.packed_len(), |dst| self.gather_packed_to(&plan, dst))
    }

    /// A batch in one allocation of `len` bytes (rounded up to whole
    /// `u64` words, the rest zeroed) that `fill` writes whole, or fails.
    /// Reserved fallibly, so a batch too large for this machine is an error
    /// rather than an abort; never zeroed before `fill` writes it.
    fn gather_owned(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [std::mem::MaybeUninit<u8>]) -> Result<RaggedLayout, Error>,
    ) -> Result<DynRaggedBatch, Error> {
        let words = len.div_ceil(8);
        let mut storage = Vec::<u64>::new();
        storage
            .try_reserve_exact(words)
            .map_err(|_| ErrorKind::Buffer {
                detail: format!("cannot allocate {len} bytes for a ragged gather"),
            })?;
        let spare = &mut spare_bytes(&mut storage)[..words * 8];
        let (dst, tail) = spare.split_at_mut(len);
        tail.fill(std::mem::MaybeUninit::new(0));
        let layout = fill(dst)?;
        // SAFETY: `words` words were reserved above; `fill` returned `Ok`,
        // so it wrote the first `len` bytes (its contract, as the gathers'),
        // and the rest of the last word was zeroed; any bytes are a valid
        // `u64`.
        unsafe { storage.set_len(words) };
        Ok(DynRaggedBatch {
            storage,
            layout,
            dtype: self.dtype,
        })
    }

    /// Refuses a plan another store made.
    fn check_plan(&self, plan: &RaggedGatherPlan<'_>) -> Result<(), Error> {
        if std::ptr::eq(plan.store, self) {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "{}: a gather plan made by another store ({})",
            self.path().display(),
            plan.store.path().display()
        )))
    }

    /// Where each record of `plan` lies in `bytes`, which the engine filled:
    /// checks every shape header against its record's length.
    fn layout_of(&self, plan: &VarlenPlan, bytes: &[u8]) -> Result<RaggedLayout, Error> {
        let head = self.shape_header_len();
        let n = plan.indices().len();
        let mut layout = RaggedLayout {
            ndim: self.ndim,
            offsets: Vec::with_capacity(n),
            byte_lens: Vec::with_capacity(n),
            dims: Vec::with_capacity(n * self.ndim),
        };
        for (index, start, len) in plan.records() {
            let record = &bytes[start..start + len];
            let Some(payload) = push_shape(
                &mut layout.dims,
                record,
                self.ndim,
                self.dim_width,
                self.dtype.size(),
            ) else {
                return Err(Error::corrupt_record(
                    self.path(),
                    index,
                    format!(
                        "shape {:?} does not match its {} element bytes",
                        &layout.dims[layout.dims.len() - self.ndim..],
                        len.saturating_sub(head)
                    ),
                ));
            };
            layout.offsets.push(start + head);
            layout.byte_lens.push(payload);
        }
        Ok(layout)
    }

    /// Bytes a [`gather_into`](Self::gather_into) of `indices` needs: the
    /// [`len`](RaggedGatherPlan::len) of their [plan](Self::plan_gather).
    ///
    /// # Errors
    ///
    /// As [`plan_gather`](Self::plan_gather).
    pub fn gather_len(&self, indices: &[u64]) -> Result<usize, Error> {
        Ok(self.plan_gather(indices)?.len())
    }

    /// Gathers the records at `indices` into caller memory of at least
    /// [`gather_len`](Self::gather_len) bytes; returns where each record lies.
    /// Records start 8-byte aligned relative to `dst`. To size `dst` first,
    /// [`plan_gather`](Self::plan_gather) and
    /// [`gather_planned`](Self::gather_planned) locate every record once.
    ///
    /// # Errors
    ///
    /// As [`plan_gather`](Self::plan_gather) and
    /// [`gather_planned`](Self::gather_planned).
    pub fn gather_into(&self, indices: &[u64], dst: &mut [u8]) -> Result<RaggedLayout, Error> {
        let plan = self.plan_gather(indices)?;
        self.gather_planned(&plan, dst)
    }

    /// Gathers the records at `indices`, in order, into one allocation.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::IndexOutOfRange`](crate::ErrorKind::IndexOutOfRange) for
    /// an index past the end;
    /// [`ErrorKind::CorruptRecord`](crate::ErrorKind::CorruptRecord) for a
    /// record whose location, shape header or payload is malformed, naming
    /// the first such record in `indices`;
    /// [`ErrorKind::Buffer`](crate::ErrorKind::Buffer) when the output cannot
    /// be allocated.
    pub fn gather(&self, indices: &[u64]) -> Result<DynRaggedBatch, Error> {
        let plan = self.plan_gather(indices)?;
        self.gather_owned(plan.len(), |dst| self.gather_planned_to(&plan, dst))
    }
}

/// Reads a record's shape header (`ndim` little-endian dims of `width`
/// bytes) onto `dims` (unreadable dims as `usize::MAX`); returns the element
/// bytes after it when the header's shape counts exactly them, in
/// `elem_size`-byte elements, and `None` otherwise.
fn push_shape(
    dims: &mut Vec<usize>,
    record: &[u8],
    ndim: usize,
    width: usize,
    elem_size: usize,
) -> Option<usize> {
    let head = width * ndim;
    let Some(header) = record.get(..head) else {
        dims.extend(std::iter::repeat_n(usize::MAX, ndim));
        return None;
    };
    let payload = record.len() - head;
    push_dims(dims, header, width, elem_size, payload).then_some(payload)
}

/// Reads a shape header (little-endian dims of `width` bytes) onto `dims`
/// (unreadable dims as `usize::MAX`); true when the shape counts exactly
/// `payload` bytes of `elem_size`-byte elements.
fn push_dims(
    dims: &mut Vec<usize>,
    header: &[u8],
    width: usize,
    elem_size: usize,
    payload: usize,
) -> bool {
    let mut elements = Some(1usize);
    for chunk in header.chunks_exact(width) {
        let mut b = [0u8; 8];
        b[..width].copy_from_slice(chunk);
        let d = usize::try_from(u64::from_le_bytes(b)).ok();
        elements = elements.zip(d).and_then(|(a, d)| a.checked_mul(d));
        dims.push(d.unwrap_or(usize::MAX));
    }
    elements.and_then(|e| e.checked_mul(elem_size)) == Some(payload)
}

/// A record's shape when its header, read with `width`-byte dims, is
/// consistent with its length; `None` otherwise.
pub(super) fn parse_shape(
    record: &[u8],
    ndim: usize,
    width: usize,
    elem_size: usize,
) -> Option<Vec<usize>> {
    let mut dims = Vec::with_capacity(ndim);
    push_shape(&mut dims, record, ndim, width, elem_size).map(|_| dims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, RaggedWriter};

    /// A rank-2 `u16` store of `n` records of shapes `(1 + i % 3, 1 + i % 5)`.
    fn store(dir: &std::path::Path, name: &str, n: usize, codec: Codec) -> DynRagged {
        let path = dir.join(name);
        let mut w = RaggedWriter::<u16>::create(&path, 2, codec).unwrap();
        let records: Vec<ndarray::Array2<u16>> = (0..n)
            .map(|i| {
                ndarray::Array2::from_shape_fn((1 + i % 3, 1 + i % 5), |(r, c)| {
                    (i * 31 + r * 7 + c) as u16
                })
            })
            .collect();
        w.append(&records).unwrap();
        w.close().unwrap();
        DynRagged::open(&path).unwrap()
    }

    #[test]
    fn a_plan_gathers_what_gather_does_and_zeroes_the_padding() {
        let dir = tempfile::tempdir().unwrap();
        for codec in [Codec::Raw, Codec::Zstd] {
            let s = store(dir.path(), codec.name(), 40, codec);
            let indices = [7u64, 0, 39, 7, 12];
            let plan = s.plan_gather(&indices).unwrap();
            assert_eq!(plan.indices(), &indices);
            assert_eq!(plan.len(), s.gather_len(&indices).unwrap());
            assert_eq!(plan.len() % 8, 0);
            // Whatever the buffer held, the gather writes every byte of the
            // plan: records, then zeros up to the next 8-byte boundary.
            let mut buf = vec![0xAAu8; plan.len() + 5];
            let layout = s.gather_planned(&plan, &mut buf).unwrap();
            assert_eq!(&buf[plan.len()..], &[0xAA; 5], "{codec}: past the plan");
            let batch = s.gather(&indices).unwrap();
            assert_eq!(&layout, batch.layout(), "{codec}");
            let mut into = vec![0u8; plan.len()];
            assert_eq!(s.gather_into(&indices, &mut into).unwrap(), layout);
            assert_eq!(&into[..], &buf[..plan.len()], "{codec}");
            for k in 0..layout.len() {
                assert_eq!(&buf[layout.byte_range(k)], batch.bytes(k), "{codec}");
                let end = layout.byte_range(k).end;
                let next = end.next_multiple_of(8);
                assert!(buf[end..next].iter().all(|&b| b == 0), "{codec}: padding");
            }
            // A plan can be read again.
            assert_eq!(s.gather_planned(&plan, &mut buf).unwrap(), layout);
            let empty = s.plan_gather(&[]).unwrap();
            assert!(empty.is_empty());
            assert!(s.gather_planned(&empty, &mut []).unwrap().is_empty());
        }
    }

    #[test]
    fn packed_gathers_hold_the_same_records_end_to_end() {
        let dir = tempfile::tempdir().unwrap();
        for (codec, generation) in [
            (Codec::Raw, crate::Generation::V2_4_6),
            (Codec::Zstd, crate::Generation::V2_4_6),
            (Codec::Raw, crate::Generation::V2_8_19),
            (Codec::Zstd, crate::Generation::V2_8_19),
        ] {
            let path = dir.path().join(format!("{codec}-{generation}"));
            let opts = crate::CreateOptions::new(codec)
                .data_shards(3)
                .generation(generation);
            let mut w = RaggedWriter::<u16>::create_with(&path, 2, &opts).unwrap();
            let records: Vec<ndarray::Array2<u16>> = (0..3000)
                .map(|i| {
                    ndarray::Array2::from_shape_fn((1 + i % 3, 1 + i % 7), |(r, c)| {
                        (i * 31 + r * 7 + c) as u16
                    })
                })
                .collect();
            w.append(&records).unwrap();
            w.close().unwrap();
            let s = DynRagged::open(&path).unwrap();
            // Small batches read on the calling thread, large ones in parallel.
            for indices in [vec![7u64, 0, 2999, 7, 12], (0..3000).rev().collect()] {
                let plan = s.plan_gather(&indices).unwrap();
                let mut values = vec![0xAAu8; plan.packed_len() + 3];
                let layout = s.gather_planned_packed(&plan, &mut values).unwrap();
                assert_eq!(
                    &values[plan.packed_len()..],
                    &[0xAA; 3],
                    "{codec}: past the plan"
                );
                assert!(layout.is_packed());
                assert_eq!(layout.packed_bytes(), plan.packed_len());
                let batch = s.gather(&indices).unwrap();
                let mut at = 0;
                for (k, &i) in indices.iter().enumerate() {
                    assert_eq!(layout.shape(k), batch.shape(k), "{codec} {generation}");
                    let want = batch.bytes(k);
                    assert_eq!(
                        &values[at..at + want.len()],
                        want,
                        "{codec} {generation}: {i}"
                    );
                    at += want.len();
                }
                let packed = s.gather_packed(&indices).unwrap();
                assert_eq!(packed.layout(), &layout);
                let p = packed.packed().unwrap();
                assert_eq!(p, batch.packed().unwrap());
                assert_eq!(p.values.bytes(), &values[..plan.packed_len()]);
                let cu = p.cu_seqlens.as_slice::<i32>().unwrap();
                assert_eq!(cu.len(), indices.len() + 1);
                assert_eq!(*cu.last().unwrap() as usize, plan.packed_len() / 2);
                assert_eq!(p.shapes.shape(), &[indices.len(), 2]);
                assert_eq!(
                    p.shapes.as_slice::<u32>().unwrap()[..2],
                    [1 + (indices[0] % 3) as u32, 1 + (indices[0] % 7) as u32]
                );
            }
            let empty = s.plan_gather(&[]).unwrap();
            assert_eq!(empty.packed_len(), 0);
            assert!(s.gather_planned_packed(&empty, &mut []).unwrap().is_empty());
            let p = s.gather_packed(&[]).unwrap().packed().unwrap();
            assert_eq!(p.cu_seqlens.as_slice::<i32>().unwrap(), &[0]);
            assert_eq!(p.shapes.shape(), &[0, 2]);
            // A destination one byte short is refused.
            let plan = s.plan_gather(&[1, 2]).unwrap();
            let mut short = vec![0u8; plan.packed_len() - 1];
            let e = s.gather_planned_packed(&plan, &mut short).unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::Buffer { .. }), "{e}");
        }
    }

    #[test]
    fn a_packed_gather_checks_every_shape_header() {
        // A raw store whose second record's header is changed on disk: the
        // packed gather names it, as the segment gather does.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        let opts = crate::CreateOptions::new(Codec::Raw).generation(crate::Generation::V2_4_6);
        let mut w = RaggedWriter::<u8>::create_with(&path, 1, &opts).unwrap();
        w.append([vec![1u8, 2, 3], vec![4, 5], vec![6]]).unwrap();
        w.close().unwrap();
        // A raw record is its header (8 bytes in 2.4.6) then its elements,
        // in whichever shard holds it.
        let mut found = 0;
        for entry in std::fs::read_dir(&path).unwrap() {
            let data = entry.unwrap().path();
            let mut bytes = std::fs::read(&data).unwrap();
            if let Some(at) = bytes
                .windows(10)
                .position(|w| w == [2, 0, 0, 0, 0, 0, 0, 0, 4, 5])
            {
                bytes[at] = 3;
                std::fs::write(&data, bytes).unwrap();
                found += 1;
            }
        }
        assert_eq!(found, 1);
        let s = DynRagged::open(&path).unwrap();
        let e = s.gather_packed(&[0, 1]).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::CorruptRecord { index: 1, .. }),
            "{e}"
        );
        assert!(s.gather_packed(&[0, 2]).is_ok());
    }

    #[test]
    fn a_plan_serves_its_own_store_and_needs_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let a = store(dir.path(), "a", 10, Codec::Zstd);
        let b = store(dir.path(), "b", 10, Codec::Zstd);
        let plan = a.plan_gather(&[1, 2, 3]).unwrap();
        let mut buf = vec![0u8; plan.len()];
        let e = b.gather_planned(&plan, &mut buf).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
        let e = a
            .gather_planned(&plan, &mut buf[..plan.len() - 1])
            .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Buffer { .. }), "{e}");
        let e = a.plan_gather(&[3, 10]).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::IndexOutOfRange { index: 10, .. }),
            "{e}"
        );
        assert!(format!("{plan:?}").contains("records: 3"), "{plan:?}");
    }
}
