//! Appending Ragged records: the [`RaggedRecord`] trait and the writers.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::path::Path;

use ndarray::{ArrayBase, Data, Dimension};

use crate::codec::Codec;
use crate::dtype::{DType, Element};
use crate::engine::{RecordSource, StoreWriter};
use crate::error::{Error, ErrorKind};
use crate::format::{MAX_RECORD_LEN, Schema};
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
    /// cannot load, a path without a final name); [`ErrorKind::Io`] when the directory
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
    /// cannot load, a path without a final name); [`ErrorKind::Io`] when the directory
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
    /// cannot load, a path without a final name); [`ErrorKind::Io`] when the directory
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
