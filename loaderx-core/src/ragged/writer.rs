//! Appending Ragged records: the [`RaggedRecord`] trait and the writers.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::path::Path;

use ndarray::{ArrayBase, Data, Dimension};

use crate::MAX_RECORD_LEN;
use crate::codec::Codec;
use crate::dtype::{DType, Element};
use crate::engine::{RecordSource, StoreWriter};
use crate::error::{Error, ErrorKind};
use crate::format::Schema;
use crate::options::CreateOptions;

/// One record a [`RaggedWriter`] can append.
pub trait RaggedRecord<T: Element> {
    /// The record's shape; its length must be the store's `ndim`.
    fn record_shape(&self) -> Cow<'_, [usize]>;
    /// The record's elements in C order.
    fn record_data(&self) -> Cow<'_, [T]>;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> RaggedRecord<T> for ArrayBase<S, D> {
    fn record_shape(&self) -> Cow<'_, [usize]> {
        Cow::Borrowed(self.shape())
    }

    fn record_data(&self) -> Cow<'_, [T]> {
        match self.as_slice() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(self.iter().copied().collect()),
        }
    }
}

impl<T: Element> RaggedRecord<T> for [T] {
    fn record_shape(&self) -> Cow<'_, [usize]> {
        Cow::Owned(vec![self.len()])
    }

    fn record_data(&self) -> Cow<'_, [T]> {
        Cow::Borrowed(self)
    }
}

impl<T: Element> RaggedRecord<T> for Vec<T> {
    fn record_shape(&self) -> Cow<'_, [usize]> {
        Cow::Owned(vec![self.len()])
    }

    fn record_data(&self) -> Cow<'_, [T]> {
        Cow::Borrowed(self)
    }
}

impl<T: Element, R: RaggedRecord<T> + ?Sized> RaggedRecord<T> for &R {
    fn record_shape(&self) -> Cow<'_, [usize]> {
        (**self).record_shape()
    }

    fn record_data(&self) -> Cow<'_, [T]> {
        (**self).record_data()
    }
}

struct RaggedRecords<'a> {
    heads: Vec<u8>,
    head_len: usize,
    bodies: Vec<&'a [u8]>,
}

impl RecordSource for RaggedRecords<'_> {
    fn len(&self) -> usize {
        self.bodies.len()
    }

    fn record(&self, j: usize) -> (&[u8], &[u8]) {
        (
            &self.heads[j * self.head_len..(j + 1) * self.head_len],
            self.bodies[j],
        )
    }
}

/// A Ragged store being built, element type known at run time.
pub struct DynRaggedWriter {
    engine: StoreWriter,
    dtype: DType,
    ndim: usize,
    /// Bytes per dimension length in a record's header (the generation's).
    dim_width: usize,
}

impl DynRaggedWriter {
    /// Creates a Ragged store of rank `ndim` at the new path `path`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AlreadyExists`] when `path` exists; [`ErrorKind::InvalidArgument`]
    /// for a schema or options that cannot make a store (a record of 0 bytes or over 2
    /// GiB, a rank outside 1..=64, a shard count outside 1..=255, a dictionary zstd
    /// cannot load, a path without a final name, a store URL); [`ErrorKind::Io`] when the directory
    /// or its files cannot be made (nothing is left behind then).
    pub fn create(
        path: impl AsRef<Path>,
        dtype: DType,
        ndim: usize,
        options: &CreateOptions,
    ) -> Result<DynRaggedWriter, Error> {
        let schema = Schema::ragged(dtype, ndim)?;
        let engine = StoreWriter::create(path.as_ref(), &schema, options)?;
        Ok(DynRaggedWriter {
            engine,
            dtype,
            ndim,
            dim_width: options.format_generation().dim_width(),
        })
    }

    /// Appends records given as `(shape, C-order little-endian bytes)`.
    /// The whole batch is validated before anything is written.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ShapeMismatch`] for a record whose rank is not the store's or whose
    /// bytes do not match its shape; [`ErrorKind::InvalidArgument`] for an empty batch,
    /// an empty record, a record over 2 GiB, a dimension over `u32::MAX` in
    /// the 2.8.19 generation or a `bool` byte other than 0 or 1;
    /// [`ErrorKind::WriterFailed`] after an earlier I/O error; [`ErrorKind::Io`] when a
    /// write fails, after which the writer is failed for good. Nothing of a rejected
    /// batch is written.
    pub fn append_bytes<'a, I>(&mut self, records: I) -> Result<(), Error>
    where
        I: IntoIterator<Item = (&'a [usize], &'a [u8])>,
    {
        let head_len = self.dim_width * self.ndim;
        let mut src = RaggedRecords {
            heads: Vec::new(),
            head_len,
            bodies: Vec::new(),
        };
        for (index, (shape, bytes)) in records.into_iter().enumerate() {
            let expected = shape
                .iter()
                .try_fold(self.dtype.size(), |acc, &d| acc.checked_mul(d));
            if shape.len() != self.ndim || expected != Some(bytes.len()) {
                return Err(ErrorKind::ShapeMismatch {
                    index,
                    expected: format!(
                        "rank {} with {} bytes per {} element",
                        self.ndim,
                        self.dtype.size(),
                        self.dtype
                    ),
                    found: shape.to_vec(),
                }
                .into());
            }
            if self.dtype == DType::Bool
                && let Some(&b) = bytes.iter().find(|&&b| b > 1)
            {
                return Err(crate::dense::not_bool_error(index, b));
            }
            if bytes.is_empty() {
                return Err(Error::invalid(format!(
                    "record {index} of the batch has no elements (shape {shape:?}); ragged records must be non-empty"
                )));
            }
            if (bytes.len() + head_len) as u64 > MAX_RECORD_LEN {
                return Err(Error::invalid(format!(
                    "record {index} of the batch exceeds 2 GiB"
                )));
            }
            if self.dim_width == 4 {
                for &d in shape {
                    let d = u32::try_from(d).map_err(|_| {
                        Error::invalid(format!(
                            "record {index} of the batch has dimension {d}; the 2.8.19 \
                             generation stores dimensions as u32"
                        ))
                    })?;
                    src.heads.extend_from_slice(&d.to_le_bytes());
                }
            } else {
                for &d in shape {
                    src.heads.extend_from_slice(&(d as u64).to_le_bytes());
                }
            }
            src.bodies.push(bytes);
        }
        self.engine.append(&src)
    }

    /// Appends a packed batch, as Python loaderx 2.8.19's
    /// `RaggedWriter.append(RaggedBatch(values, cu_seqlens, shapes))`
    /// takes it (see [`PackedRagged`](crate::adapter::PackedRagged)): `values`
    /// the records' element bytes end to end, `cu_seqlens` their offsets in
    /// elements (one more than the records, from 0, strictly increasing, the
    /// last one the element count) and `shapes` their shapes (`ndim` per
    /// record), each agreeing with its record's element count. The whole
    /// batch is validated before anything is written.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when the three do not agree (offsets
    /// that do not start at 0, do not increase, or do not end at the
    /// element count; shapes not `ndim` per record or not matching their
    /// records' element counts; values not whole elements), and as
    /// [`append_bytes`](Self::append_bytes).
    pub fn append_packed_bytes(
        &mut self,
        values: &[u8],
        cu_seqlens: &[i32],
        shapes: &[u32],
    ) -> Result<(), Error> {
        let size = self.dtype.size();
        let records = check_packed(values.len(), size, cu_seqlens, shapes, self.ndim)?;
        let dims: Vec<usize> = shapes.iter().map(|&d| d as usize).collect();
        let ndim = self.ndim;
        self.append_bytes(records.iter().enumerate().map(|(i, r)| {
            (
                &dims[i * ndim..(i + 1) * ndim],
                &values[r.start * size..r.end * size],
            )
        }))
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Rank of every record.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// Records appended so far.
    pub fn len(&self) -> u64 {
        self.engine.len()
    }

    /// True before the first append.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The codec.
    pub fn codec(&self) -> Codec {
        self.engine.codec()
    }

    /// Number of payload shards.
    pub fn data_shards(&self) -> usize {
        self.engine.data_shards()
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        self.engine.path()
    }

    /// Syncs and publishes the store. Dropping a writer without `close`
    /// leaves a store that refuses to open.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::WriterFailed`] after an earlier I/O error, and [`ErrorKind::Io`]
    /// when a write or an fsync fails; the store is then left unpublished (it refuses
    /// to open).
    pub fn close(self) -> Result<(), Error> {
        self.engine.close()
    }
}

/// A Ragged store being built, element type `T`.
///
/// ```
/// use loaderx_core::{Codec, Ragged, RaggedWriter};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("tokens");
/// let seqs: Vec<Vec<i32>> = [3, 1, 4, 1, 5].iter().map(|&n| (0..n).collect()).collect();
/// let mut w = RaggedWriter::<i32>::create(&path, 1, Codec::Zstd)?;
/// w.append(&seqs)?;
/// w.close()?;
///
/// let rs = Ragged::<i32>::open(&path)?;
/// let batch = rs.gather(&[0, 2, 4])?;
/// assert_eq!(batch.shape(1), &[4]);
/// assert_eq!(batch.data(2), &[0, 1, 2, 3, 4]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RaggedWriter<T: Element> {
    inner: DynRaggedWriter,
    _t: PhantomData<fn(T)>,
}

impl<T: Element> RaggedWriter<T> {
    /// Creates a store with default options (4 shards, no dictionary).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AlreadyExists`] when `path` exists; [`ErrorKind::InvalidArgument`]
    /// for a schema or options that cannot make a store (a record of 0 bytes or over 2
    /// GiB, a rank outside 1..=64, a shard count outside 1..=255, a dictionary zstd
    /// cannot load, a path without a final name, a store URL); [`ErrorKind::Io`] when the directory
    /// or its files cannot be made (nothing is left behind then).
    pub fn create(path: impl AsRef<Path>, ndim: usize, codec: Codec) -> Result<Self, Error> {
        Self::create_with(path, ndim, &CreateOptions::new(codec))
    }

    /// Creates a store with `options`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AlreadyExists`] when `path` exists; [`ErrorKind::InvalidArgument`]
    /// for a schema or options that cannot make a store (a record of 0 bytes or over 2
    /// GiB, a rank outside 1..=64, a shard count outside 1..=255, a dictionary zstd
    /// cannot load, a path without a final name, a store URL); [`ErrorKind::Io`] when the directory
    /// or its files cannot be made (nothing is left behind then).
    pub fn create_with(
        path: impl AsRef<Path>,
        ndim: usize,
        options: &CreateOptions,
    ) -> Result<Self, Error> {
        Ok(RaggedWriter {
            inner: DynRaggedWriter::create(path, T::DTYPE, ndim, options)?,
            _t: PhantomData,
        })
    }

    /// Appends every record of `records`, in order, each keeping its own
    /// shape. The whole batch is validated before anything is written.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ShapeMismatch`] for a record whose rank is not the store's or whose
    /// bytes do not match its shape; [`ErrorKind::InvalidArgument`] for an empty batch,
    /// an empty record, a record over 2 GiB, a dimension over `u32::MAX` in
    /// the 2.8.19 generation or a `bool` byte other than 0 or 1;
    /// [`ErrorKind::WriterFailed`] after an earlier I/O error; [`ErrorKind::Io`] when a
    /// write fails, after which the writer is failed for good. Nothing of a rejected
    /// batch is written.
    pub fn append<I>(&mut self, records: I) -> Result<(), Error>
    where
        I: IntoIterator,
        I::Item: RaggedRecord<T>,
    {
        let items: Vec<I::Item> = records.into_iter().collect();
        let parts: Vec<_> = items
            .iter()
            .map(|r| (r.record_shape(), r.record_data()))
            .collect();
        self.inner
            .append_bytes(parts.iter().map(|(s, d)| (&s[..], T::as_bytes(d))))
    }

    /// Appends a packed batch: the records' elements end to end in
    /// `values`, their offsets in `cu_seqlens` and their shapes in `shapes`
    /// (see [`DynRaggedWriter::append_packed_bytes`]).
    ///
    /// ```
    /// use loaderx_core::{Codec, Ragged, RaggedWriter};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = RaggedWriter::<i32>::create(dir.path().join("r"), 2, Codec::Zstd)?;
    /// // Records of shapes (1, 2), (2, 2) and (1, 1).
    /// w.append_packed(&[3, 5, 7, 11, 13, 17, 19], &[0, 2, 6, 7], &[1, 2, 2, 2, 1, 1])?;
    /// w.close()?;
    /// let r = Ragged::<i32>::open(dir.path().join("r"))?;
    /// assert_eq!(r.get(1)?.shape(), &[2, 2]);
    /// assert!(r.len() == 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`DynRaggedWriter::append_packed_bytes`].
    pub fn append_packed(
        &mut self,
        values: &[T],
        cu_seqlens: &[i32],
        shapes: &[u32],
    ) -> Result<(), Error> {
        self.inner
            .append_packed_bytes(T::as_bytes(values), cu_seqlens, shapes)
    }

    /// Rank of every record.
    pub fn ndim(&self) -> usize {
        self.inner.ndim()
    }

    /// Records appended so far.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// True before the first append.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The untyped writer.
    pub fn into_dyn(self) -> DynRaggedWriter {
        self.inner
    }

    /// Syncs and publishes the store.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::WriterFailed`] after an earlier I/O error, and [`ErrorKind::Io`]
    /// when a write or an fsync fails; the store is then left unpublished (it refuses
    /// to open).
    pub fn close(self) -> Result<(), Error> {
        self.inner.close()
    }
}

/// Checks a packed batch of `value_bytes` bytes of `size`-byte elements:
/// returns every record's element range.
fn check_packed(
    value_bytes: usize,
    size: usize,
    cu_seqlens: &[i32],
    shapes: &[u32],
    ndim: usize,
) -> Result<Vec<std::ops::Range<usize>>, Error> {
    let bad = |m: String| Err(Error::invalid(format!("packed batch: {m}")));
    if size == 0 || !value_bytes.is_multiple_of(size) {
        return bad(format!(
            "{value_bytes} value bytes are not whole {size}-byte elements"
        ));
    }
    let elements = value_bytes / size;
    let Some((&first, rest)) = cu_seqlens.split_first() else {
        return bad("cu_seqlens is empty; it holds one offset more than the records".into());
    };
    if first != 0 {
        return bad(format!("cu_seqlens starts at {first}, not 0"));
    }
    let n = rest.len();
    if Some(shapes.len()) != n.checked_mul(ndim) {
        return bad(format!(
            "{} shape values for {n} records of rank {ndim}",
            shapes.len()
        ));
    }
    let mut ranges = Vec::with_capacity(n);
    let mut at = 0usize;
    for (i, &end) in rest.iter().enumerate() {
        let end = usize::try_from(end).unwrap_or(0);
        if end <= at {
            return bad(format!(
                "cu_seqlens[{}] = {} does not increase past {at}",
                i + 1,
                rest[i]
            ));
        }
        let shape = &shapes[i * ndim..(i + 1) * ndim];
        let count = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d as usize));
        if count != Some(end - at) {
            return bad(format!(
                "record {i} has shape {shape:?} but {} elements",
                end - at
            ));
        }
        ranges.push(at..end);
        at = end;
    }
    if at != elements {
        return bad(format!(
            "cu_seqlens ends at {at}, but values hold {elements} elements"
        ));
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, DynRagged};

    #[test]
    fn packed_appends_store_what_per_record_appends_store() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<i32> = vec![3, 5, 7, 11, 13, 17, 19];
        let (cu, shapes) = ([0, 2, 6, 7], [1u32, 2, 2, 2, 1, 1]);
        let mut w = RaggedWriter::<i32>::create(dir.path().join("p"), 2, Codec::Zstd).unwrap();
        w.append_packed(&values, &cu, &shapes).unwrap();
        w.close().unwrap();
        let mut w = RaggedWriter::<i32>::create(dir.path().join("r"), 2, Codec::Zstd).unwrap();
        w.append([
            ndarray::arr2(&[[3, 5]]),
            ndarray::arr2(&[[7, 11], [13, 17]]),
            ndarray::arr2(&[[19]]),
        ])
        .unwrap();
        w.close().unwrap();
        for f in ["meta.zr", "data_0.zr"] {
            assert_eq!(
                std::fs::read(dir.path().join("p").join(f)).unwrap(),
                std::fs::read(dir.path().join("r").join(f)).unwrap(),
                "{f}"
            );
        }
        // And read back packed, the same three arrays.
        let p = DynRagged::open(dir.path().join("p"))
            .unwrap()
            .gather_packed(&[0, 1, 2])
            .unwrap()
            .packed()
            .unwrap();
        assert_eq!(p.values.as_slice::<i32>().unwrap(), &values);
        assert_eq!(p.cu_seqlens.as_slice::<i32>().unwrap(), &cu);
        assert_eq!(p.shapes.as_slice::<u32>().unwrap(), &shapes);
    }

    #[test]
    fn packed_appends_that_do_not_agree_are_refused_and_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = RaggedWriter::<i32>::create(dir.path().join("p"), 1, Codec::Raw).unwrap();
        let v = [1, 2, 3, 4];
        for (cu, shapes, says) in [
            (&[][..], &[][..], "cu_seqlens is empty"),
            (&[1, 4][..], &[3][..], "starts at 1"),
            (&[0, 2, 2, 4][..], &[2, 0, 2][..], "does not increase"),
            (&[0, 3, 2][..], &[3, 1][..], "does not increase"),
            (&[0, 2, 4][..], &[2][..], "1 shape values for 2 records"),
            (
                &[0, 2, 4][..],
                &[2, 3][..],
                "record 1 has shape [3] but 2 elements",
            ),
            (&[0, 2, 3][..], &[2, 1][..], "ends at 3, but values hold 4"),
            (&[0, -1][..], &[1][..], "does not increase"),
        ] {
            let e = w.append_packed(&v, cu, shapes).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::InvalidArgument { .. }),
                "{cu:?}: {e}"
            );
            assert!(e.to_string().contains(says), "{cu:?}: {e}");
        }
        assert_eq!(w.len(), 0);
        let e = w
            .inner
            .append_packed_bytes(&[0; 5], &[0, 1], &[1])
            .unwrap_err();
        assert!(e.to_string().contains("not whole 4-byte elements"), "{e}");
        w.append_packed(&v, &[0, 1, 4], &[1, 3]).unwrap();
        assert_eq!(w.len(), 2);
    }
}
