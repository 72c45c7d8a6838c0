use std::borrow::Cow;
use std::marker::PhantomData;
use std::path::Path;

use ndarray::{ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};

use crate::codec::{Codec, DICT_SAMPLE_BYTES, strided_sample, train_from_samples};
use crate::dtype::{DType, Element};
use crate::engine::reader::Staged;
use crate::engine::{RecordSource, StoreReader, StoreWriter};
use crate::error::{Error, ErrorKind, StoreKind};
use crate::format::{MAX_RECORD_LEN, Schema};
use crate::host::{PadValue, Padded, pad_records};
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
        })
    }

    /// Appends records given as `(shape, C-order little-endian bytes)`.
    /// The whole batch is validated before anything is written.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ShapeMismatch`] for a record whose rank is not the store's or whose
    /// bytes do not match its shape; [`ErrorKind::InvalidArgument`] for an empty batch,
    /// an empty record, a record over 2 GiB or a `bool` byte other than 0 or 1;
    /// [`ErrorKind::WriterFailed`] after an earlier I/O error; [`ErrorKind::Io`] when a
    /// write fails, after which the writer is failed for good. Nothing of a rejected
    /// batch is written.
    pub fn append_bytes<'a, I>(&mut self, records: I) -> Result<(), Error>
    where
        I: IntoIterator<Item = (&'a [usize], &'a [u8])>,
    {
        let head_len = 8 * self.ndim;
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
            for &d in shape {
                src.heads.extend_from_slice(&(d as u64).to_le_bytes());
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
    /// an empty record, a record over 2 GiB or a `bool` byte other than 0 or 1;
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

/// Where each record of a gathered ragged batch lies in its buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaggedLayout {
    ndim: usize,
    offsets: Vec<usize>,
    byte_lens: Vec<usize>,
    dims: Vec<usize>,
}

impl RaggedLayout {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// True for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Shape of record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn shape(&self, i: usize) -> &[usize] {
        &self.dims[i * self.ndim..(i + 1) * self.ndim]
    }

    /// Byte range of record `i`'s elements in the buffer.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn byte_range(&self, i: usize) -> std::ops::Range<usize> {
        self.offsets[i]..self.offsets[i] + self.byte_lens[i]
    }
}

impl RaggedLayout {
    /// A layout of records with shapes `dims` (`ndim` values per record, in
    /// record order) at byte ranges `ranges` of a buffer of `buffer_len`
    /// bytes, with `elem_size`-byte elements.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when `dims` does not hold `ndim` values
    /// per range, a range is reversed or past `buffer_len`, or a range's
    /// length is not its shape's element count times `elem_size`.
    pub fn try_new(
        ndim: usize,
        dims: Vec<usize>,
        ranges: &[std::ops::Range<usize>],
        elem_size: usize,
        buffer_len: usize,
    ) -> Result<RaggedLayout, Error> {
        if Some(dims.len()) != ranges.len().checked_mul(ndim) {
            return Err(Error::invalid(format!(
                "{} dims for {} records of rank {ndim}",
                dims.len(),
                ranges.len()
            )));
        }
        for (i, r) in ranges.iter().enumerate() {
            let shape = &dims[i * ndim..(i + 1) * ndim];
            let want = shape.iter().try_fold(elem_size, |a, &d| a.checked_mul(d));
            if r.start > r.end || r.end > buffer_len || want != Some(r.end - r.start) {
                return Err(Error::invalid(format!(
                    "record {i}: bytes {r:?} of a {buffer_len}-byte buffer do not hold shape \
                     {shape:?} of {elem_size}-byte elements"
                )));
            }
        }
        Ok(RaggedLayout {
            ndim,
            offsets: ranges.iter().map(|r| r.start).collect(),
            byte_lens: ranges.iter().map(|r| r.end - r.start).collect(),
            dims,
        })
    }

    /// Rank of every record.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// `(shape, bytes)` of every record in `bytes`, the buffer this layout
    /// describes.
    ///
    /// # Panics
    ///
    /// When `bytes` is shorter than the buffer the layout was made for.
    pub fn records<'a>(
        &'a self,
        bytes: &'a [u8],
    ) -> impl ExactSizeIterator<Item = (&'a [usize], &'a [u8])> + Clone + 'a {
        (0..self.len()).map(move |i| (self.shape(i), &bytes[self.byte_range(i)]))
    }

    /// Pads the records in `bytes` (the buffer this layout describes) to the
    /// largest extent of every axis; see [`pad_records`].
    ///
    /// # Errors
    ///
    /// As [`pad_records`]; a `bytes` shorter than the layout's buffer is
    /// [`ErrorKind::InvalidArgument`].
    pub fn pad(&self, dtype: DType, bytes: &[u8], pad: PadValue) -> Result<Padded, Error> {
        if let Some(end) = (0..self.len()).map(|i| self.byte_range(i).end).max()
            && end > bytes.len()
        {
            return Err(Error::invalid(format!(
                "the layout needs {end} bytes, the buffer has {}",
                bytes.len()
            )));
        }
        pad_records(dtype, self.ndim, self.records(bytes), pad)
    }
}

/// A gathered ragged batch, element type known at run time: one allocation
/// plus a [`RaggedLayout`].
#[derive(Debug, Clone)]
pub struct DynRaggedBatch {
    storage: Vec<u64>,
    layout: RaggedLayout,
    dtype: DType,
}

impl DynRaggedBatch {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.layout.len()
    }

    /// True for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.layout.is_empty()
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape of record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn shape(&self, i: usize) -> &[usize] {
        self.layout.shape(i)
    }

    /// Element bytes of record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn bytes(&self, i: usize) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.storage)[self.layout.byte_range(i)]
    }

    /// Where each record lies in the allocation.
    pub fn layout(&self) -> &RaggedLayout {
        &self.layout
    }

    /// The batch padded to the largest extent of every axis, with lengths
    /// and a mask (see [`pad_records`]).
    ///
    /// # Errors
    ///
    /// As [`pad_records`].
    pub fn pad(&self, pad: PadValue) -> Result<Padded, Error> {
        self.layout
            .pad(self.dtype, bytemuck::cast_slice(&self.storage), pad)
    }

    /// This batch with element type `T`, if `T` is its type and (for `bool`)
    /// every byte is 0 or 1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when `T` is not the batch's element type or its
    /// bytes are not valid `T` values (a `bool` byte other than 0 or 1).
    pub fn typed<T: Element>(self) -> Result<RaggedBatch<T>, Error> {
        if self.dtype != T::DTYPE {
            return Err(Error::invalid(format!(
                "batch holds {}, asked for {}",
                self.dtype,
                T::DTYPE
            )));
        }
        if (0..self.len()).any(|i| T::try_from_bytes(self.bytes(i)).is_none()) {
            return Err(Error::invalid(format!(
                "batch bytes are not valid {} values",
                T::DTYPE
            )));
        }
        Ok(RaggedBatch {
            inner: self,
            _t: PhantomData,
        })
    }
}

/// A gathered ragged batch of element type `T`.
#[derive(Debug, Clone)]
pub struct RaggedBatch<T: Element> {
    inner: DynRaggedBatch,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> RaggedBatch<T> {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// True for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Shape of record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn shape(&self, i: usize) -> &[usize] {
        self.inner.shape(i)
    }

    /// Elements of record `i`, C order.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn data(&self, i: usize) -> &[T] {
        T::try_from_bytes(self.inner.bytes(i))
            .expect("element bytes were validated and aligned when the batch was built")
    }

    /// Record `i` as an array view.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn view(&self, i: usize) -> ArrayViewD<'_, T> {
        ArrayViewD::from_shape(IxDyn(self.shape(i)), self.data(i))
            .expect("record shape and length were validated when the batch was built")
    }

    /// Every record as a view, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ArrayViewD<'_, T>> + '_ {
        (0..self.len()).map(|i| self.view(i))
    }

    /// Copies every record into its own array.
    pub fn to_arrays(&self) -> Vec<ArrayD<T>> {
        self.iter().map(|v| v.to_owned()).collect()
    }

    /// Where each record lies in the allocation.
    pub fn layout(&self) -> &RaggedLayout {
        self.inner.layout()
    }

    /// The untyped batch.
    pub fn into_dyn(self) -> DynRaggedBatch {
        self.inner
    }
}

/// An open Ragged store, element type known at run time.
pub struct DynRagged {
    engine: StoreReader,
    dtype: DType,
    ndim: usize,
    /// The length index, built on first use ([`DynRagged::lengths`]).
    lengths: std::sync::OnceLock<crate::sequence::LengthIndex>,
}

impl DynRagged {
    /// Opens the Ragged store at `path`; with feature `remote`, `path` may
    /// be a store URL (`s3://…`, `gs://…`, `az://…`, `http(s)://…`), opened
    /// with [`RemoteOptions::from_env`](crate::RemoteOptions::from_env).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotAStore`] when `path` holds no store, [`ErrorKind::NotPublished`]
    /// when its writer never closed it, [`ErrorKind::Busy`] while a writer holds it,
    /// [`ErrorKind::Corrupt`] for malformed metadata (header, schema, shard files,
    /// dictionary), [`ErrorKind::UnsupportedDType`] for an element type loaderx does
    /// not support, and [`ErrorKind::Io`] when a file cannot be read or locked.
    /// [`ErrorKind::KindMismatch`] when the store is Dense.
    /// With a URL, also [`ErrorKind::Remote`](crate::ErrorKind::Remote) when the object
    /// store cannot be read.
    pub fn open(path: impl AsRef<Path>) -> Result<DynRagged, Error> {
        Self::from_engine(StoreReader::open(path.as_ref())?)
    }

    /// Opens the Ragged store at the URL `url` with the options `options`.
    ///
    /// # Errors
    /// As [`Self::open`].
    #[cfg(feature = "remote")]
    pub fn open_url(url: &str, options: &crate::RemoteOptions) -> Result<DynRagged, Error> {
        Self::from_engine(crate::remote::open(url, options)?)
    }

    /// What a remote store fetched since it was opened; `None` for a local one.
    #[cfg(feature = "remote")]
    pub fn remote_stats(&self) -> Option<crate::RemoteStats> {
        self.engine.remote().map(|r| r.stats())
    }

    pub(crate) fn from_engine(engine: StoreReader) -> Result<DynRagged, Error> {
        match *engine.schema() {
            Schema::Ragged { dtype, ndim } => Ok(DynRagged {
                engine,
                dtype,
                ndim,
                lengths: std::sync::OnceLock::new(),
            }),
            Schema::Dense { .. } => Err(ErrorKind::KindMismatch {
                path: engine.path().to_path_buf(),
                expected: StoreKind::Ragged,
                found: StoreKind::Dense,
            }
            .into()),
        }
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.engine.len()
    }

    /// True when the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Rank of every record.
    pub fn ndim(&self) -> usize {
        self.ndim
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

    /// Bytes the store occupies (payloads, table, dictionary).
    pub fn stored_bytes(&self) -> u64 {
        self.engine.stored_bytes()
    }

    /// The `zstd_dict` dictionary, if any.
    pub fn dict(&self) -> Option<&[u8]> {
        self.engine.dict()
    }

    /// Every record's length along its first axis (1 for scalar records),
    /// built once per open store and then served from memory; see
    /// [`LengthIndex::build`](crate::sequence::LengthIndex::build).
    ///
    /// # Errors
    ///
    /// As [`LengthIndex::build`](crate::sequence::LengthIndex::build).
    pub fn lengths(&self) -> Result<&crate::sequence::LengthIndex, Error> {
        if let Some(l) = self.lengths.get() {
            return Ok(l);
        }
        let built = crate::sequence::LengthIndex::build(self)?;
        Ok(self.lengths.get_or_init(|| built))
    }

    /// The validated location of record `index`.
    pub(crate) fn loc(&self, index: u64) -> Result<crate::format::RecordLoc, Error> {
        self.engine.loc(index)
    }

    /// Element bytes of all records, from the location table.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::CorruptRecord`] for a malformed location.
    pub fn logical_bytes(&self) -> Result<u64, Error> {
        let head = 8 * self.ndim as u64;
        (0..self.len()).try_fold(0u64, |acc, i| {
            let logic = u64::from(self.engine.loc(i)?.logic_length);
            Ok(acc + logic.saturating_sub(head))
        })
    }

    /// Segment start and stored length of every record at `indices`, plus
    /// the total and the staged stored bytes. With `fetch` false a remote
    /// store fetches nothing (and bounds logical lengths by the expansion
    /// limit only, see `check_logical_length`); a local one always stages.
    #[allow(clippy::type_complexity)]
    fn plan(
        &self,
        indices: &[u64],
        fetch: bool,
    ) -> Result<
        (
            Vec<crate::format::RecordLoc>,
            Vec<usize>,
            usize,
            Option<Staged>,
        ),
        Error,
    > {
        self.engine.check_indices(indices)?;
        let head = 8 * self.ndim;
        let locs = indices
            .iter()
            .map(|&i| self.engine.loc(i))
            .collect::<Result<Vec<_>, Error>>()?;
        let staged = if !self.engine.is_remote() {
            Some(Staged::Local)
        } else if fetch {
            let records: Vec<_> = indices.iter().copied().zip(locs.iter().copied()).collect();
            Some(self.engine.stage(&records)?)
        } else {
            None
        };
        let mut starts = Vec::with_capacity(indices.len());
        let mut total = 0usize;
        for (&i, &loc) in indices.iter().zip(&locs) {
            // Memory is sized by the logical lengths: check them first.
            self.engine.check_logical_length(i, loc, staged.as_ref())?;
            let logic = loc.logic_length as usize;
            if logic <= head {
                return Err(Error::corrupt_record(
                    self.path(),
                    i,
                    format!("{logic} bytes cannot hold a {head}-byte shape header and elements"),
                ));
            }
            starts.push(total);
            total = total
                .checked_add(logic.next_multiple_of(8))
                .ok_or_else(|| ErrorKind::Buffer {
                    detail: format!(
                        "a ragged gather of {} records overflows memory",
                        indices.len()
                    ),
                })?;
        }
        Ok((locs, starts, total, staged))
    }

    /// Bytes a [`gather_into`](Self::gather_into) of `indices` needs.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::IndexOutOfRange`] for an index past the end;
    /// [`ErrorKind::CorruptRecord`] for a malformed location or shape header;
    /// [`ErrorKind::Buffer`] when the total overflows `usize`.
    pub fn gather_len(&self, indices: &[u64]) -> Result<usize, Error> {
        Ok(self.plan(indices, false)?.2)
    }

    /// Gathers the records at `indices` into caller memory of at least
    /// [`gather_len`](Self::gather_len) bytes; returns where each record lies.
    /// Records start 8-byte aligned relative to `dst`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`] when `dst` is shorter than
    /// [`gather_len`](Self::gather_len); otherwise as [`gather`](Self::gather).
    pub fn gather_into(&self, indices: &[u64], dst: &mut [u8]) -> Result<RaggedLayout, Error> {
        let (locs, starts, total, staged) = self.plan(indices, true)?;
        let staged = staged.unwrap_or(Staged::Local);
        if dst.len() < total {
            return Err(ErrorKind::Buffer {
                detail: format!("ragged gather needs {total} bytes, got {}", dst.len()),
            }
            .into());
        }
        let mut jobs = Vec::with_capacity(indices.len());
        let mut rest = &mut dst[..total];
        for ((&index, loc), &start) in indices.iter().zip(&locs).zip(&starts) {
            let seg = (loc.logic_length as usize).next_multiple_of(8);
            let (segment, tail) = rest.split_at_mut(seg);
            rest = tail;
            debug_assert!(start % 8 == 0);
            let (record, padding) = segment.split_at_mut(loc.logic_length as usize);
            padding.fill(0); // deterministic bytes, whatever the buffer held
            jobs.push((index, *loc, record));
        }
        self.engine.read_jobs(jobs, &staged)?;
        let head = 8 * self.ndim;
        let mut layout = RaggedLayout {
            ndim: self.ndim,
            offsets: Vec::with_capacity(indices.len()),
            byte_lens: Vec::with_capacity(indices.len()),
            dims: Vec::with_capacity(indices.len() * self.ndim),
        };
        for ((&index, loc), &start) in indices.iter().zip(&locs).zip(&starts) {
            let payload = loc.logic_length as usize - head;
            let mut elements = Some(1usize);
            for chunk in dst[start..start + head].chunks_exact(8) {
                let mut b = [0u8; 8];
                b.copy_from_slice(chunk);
                let d = usize::try_from(u64::from_le_bytes(b)).ok();
                elements = elements.zip(d).and_then(|(a, d)| a.checked_mul(d));
                layout.dims.push(d.unwrap_or(usize::MAX));
            }
            if elements.and_then(|e| e.checked_mul(self.dtype.size())) != Some(payload) {
                return Err(Error::corrupt_record(
                    self.path(),
                    index,
                    format!(
                        "shape {:?} does not match its {payload} element bytes",
                        &layout.dims[layout.dims.len() - self.ndim..]
                    ),
                ));
            }
            layout.offsets.push(start + head);
            layout.byte_lens.push(payload);
        }
        Ok(layout)
    }

    /// Gathers the records at `indices`, in order, into one allocation.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::IndexOutOfRange`] for an index past the end;
    /// [`ErrorKind::CorruptRecord`] for a record whose location, shape header or
    /// payload is malformed, naming the first such record in `indices`;
    /// [`ErrorKind::Buffer`] when the output cannot be allocated.
    pub fn gather(&self, indices: &[u64]) -> Result<DynRaggedBatch, Error> {
        let total = self.gather_len(indices)?;
        // Sized by logical lengths that `plan` bounded by the stored bytes;
        // still reserved fallibly, so a batch too large for this machine is
        // an error rather than an abort.
        let mut storage = crate::dtype::zeroed_vec::<u64>(total / 8)?;
        let layout = self.gather_into(indices, bytemuck::cast_slice_mut(&mut storage))?;
        Ok(DynRaggedBatch {
            storage,
            layout,
            dtype: self.dtype,
        })
    }

    /// This store as `Ragged<T>`, if `T` is its element type.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::DTypeMismatch`] when `T` is not the store's element type.
    pub fn typed<T: Element>(self) -> Result<Ragged<T>, Error> {
        if self.dtype != T::DTYPE {
            return Err(ErrorKind::DTypeMismatch {
                path: self.path().to_path_buf(),
                expected: T::DTYPE,
                found: self.dtype,
            }
            .into());
        }
        Ok(Ragged {
            inner: self,
            _t: PhantomData,
        })
    }

    /// Trains a `zstd_dict` dictionary on an evenly strided sample of this store.
    ///
    /// # Errors
    ///
    /// As [`train_dict`](crate::train_dict()), and the errors of a gather
    /// ([`ErrorKind::CorruptRecord`]) for the sampled records.
    pub fn train_dict(&self) -> Result<Vec<u8>, Error> {
        let n = self.len();
        if n == 0 {
            return Err(ErrorKind::Dictionary {
                detail: "cannot train a dictionary on an empty store".into(),
            }
            .into());
        }
        let preview: Vec<u64> = (0..n.min(32)).collect();
        let batch = self.gather(&preview)?;
        let mean = (0..batch.len())
            .map(|i| batch.bytes(i).len())
            .sum::<usize>()
            / batch.len();
        let idx: Vec<u64> = strided_sample(usize::try_from(n).unwrap_or(usize::MAX), mean.max(1))
            .into_iter()
            .map(|i| i as u64)
            .collect();
        let mut data = Vec::new();
        let mut sizes = Vec::new();
        for chunk in idx.chunks(1024) {
            let batch = self.gather(chunk)?;
            for i in 0..batch.len() {
                let b = batch.bytes(i);
                if b.len() > DICT_SAMPLE_BYTES - data.len() {
                    if sizes.is_empty() {
                        return Err(ErrorKind::Dictionary {
                            detail: "one record exceeds the 4 MiB sample budget".into(),
                        }
                        .into());
                    }
                    return train_from_samples(&data, &sizes);
                }
                data.extend_from_slice(b);
                sizes.push(b.len());
            }
        }
        train_from_samples(&data, &sizes)
    }
}

/// An open Ragged store of element type `T`; see [`RaggedWriter`] for an example.
///
/// The Ragged contract: fixed element type and rank, per-record dimension lengths.
///
/// A gathered batch is one allocation holding every record plus their shapes
/// and byte offsets ([`RaggedBatch`]); each record is viewed as an
/// `ArrayViewD` without copying. Inside the allocation each record occupies
/// an 8-byte-aligned segment: its stored dimension header, then its elements,
/// which therefore start 8-byte aligned.
pub struct Ragged<T: Element> {
    inner: DynRagged,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> Ragged<T> {
    /// Opens the store at `path`; its element type must be `T`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotAStore`] when `path` holds no store, [`ErrorKind::NotPublished`]
    /// when its writer never closed it, [`ErrorKind::Busy`] while a writer holds it,
    /// [`ErrorKind::Corrupt`] for malformed metadata (header, schema, shard files,
    /// dictionary), [`ErrorKind::UnsupportedDType`] for an element type loaderx does
    /// not support, and [`ErrorKind::Io`] when a file cannot be read or locked.
    /// [`ErrorKind::KindMismatch`] when the store is Dense, and
    /// [`ErrorKind::DTypeMismatch`] when its element type is not `T`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        DynRagged::open(path)?.typed()
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// True when the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Rank of every record.
    pub fn ndim(&self) -> usize {
        self.inner.ndim()
    }

    /// The untyped reader.
    pub fn as_dyn(&self) -> &DynRagged {
        &self.inner
    }

    /// Unwraps the untyped reader.
    pub fn into_dyn(self) -> DynRagged {
        self.inner
    }

    /// Gathers the records at `indices`, in order.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::IndexOutOfRange`] for an index past the end;
    /// [`ErrorKind::CorruptRecord`] for a record whose location, shape header or
    /// payload is malformed (including a `bool` byte other than 0 or 1), naming the
    /// first such record in `indices`; [`ErrorKind::Buffer`] when the output cannot be
    /// allocated.
    pub fn gather(&self, indices: &[u64]) -> Result<RaggedBatch<T>, Error> {
        let batch = self.inner.gather(indices)?;
        // Only `bool` can fail here: name the first record holding a bad byte.
        let bad = (0..batch.len()).find(|&k| T::try_from_bytes(batch.bytes(k)).is_none());
        match bad {
            None => batch.typed(),
            Some(k) => Err(Error::corrupt_record(
                self.inner.path(),
                indices[k],
                "a bool record holds a byte other than 0 or 1",
            )),
        }
    }

    /// One record as an owned array.
    ///
    /// # Errors
    ///
    /// As [`gather`](Self::gather).
    pub fn get(&self, index: u64) -> Result<ArrayD<T>, Error> {
        Ok(self.gather(&[index])?.view(0).to_owned())
    }

    /// The records of `range`, in order.
    ///
    /// # Errors
    ///
    /// As [`gather`](Self::gather).
    pub fn range(&self, range: std::ops::Range<u64>) -> Result<RaggedBatch<T>, Error> {
        let indices: Vec<u64> = range.collect();
        self.gather(&indices)
    }

    /// Trains a `zstd_dict` dictionary on an evenly strided sample of this store.
    ///
    /// # Errors
    ///
    /// As [`DynRagged::train_dict`].
    pub fn train_dict(&self) -> Result<Vec<u8>, Error> {
        self.inner.train_dict()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_places_records_in_the_corner() {
        // Records (2, 3) and (1, 1) of u8 in one buffer (byte ranges 0..6, 8..9).
        let layout = RaggedLayout::try_new(2, vec![2, 3, 1, 1], &[0..6, 8..9], 1, 9).unwrap();
        let bytes = [1, 2, 3, 4, 5, 6, 0, 0, 9];
        let p = layout.pad(DType::U8, &bytes, PadValue::ZERO).unwrap();
        assert_eq!(p.values.shape(), &[2, 2, 3]);
        assert_eq!(p.values.bytes(), &[1, 2, 3, 4, 5, 6, 9, 0, 0, 0, 0, 0]);
        assert_eq!(p.lengths.as_slice::<i64>().unwrap(), &[2, 3, 1, 1]);
        assert!(layout.pad(DType::U8, &bytes[..8], PadValue::ZERO).is_err());
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn checked_layouts_refuse_what_does_not_fit() {
        assert!(RaggedLayout::try_new(1, vec![2], &[0..8], 4, 8).is_ok());
        assert!(RaggedLayout::try_new(1, vec![2], &[0..8], 4, 7).is_err());
        assert!(RaggedLayout::try_new(1, vec![3], &[0..8], 4, 8).is_err());
        assert!(RaggedLayout::try_new(2, vec![2], &[0..8], 4, 8).is_err());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = [8..0];

        assert!(RaggedLayout::try_new(1, vec![0], &reversed, 4, 8).is_err());
        assert!(RaggedLayout::try_new(2, vec![usize::MAX, 2], &[0..0], 4, 8).is_err());
    }

    #[test]
    fn padding_that_cannot_be_allocated_is_an_error() {
        // Two empty records whose extents multiply past any memory.
        let layout = RaggedLayout {
            ndim: 2,
            offsets: vec![0, 0],
            byte_lens: vec![0, 0],
            dims: vec![0, 1 << 40, 1 << 40, 0],
        };
        let err = layout.pad(DType::F32, &[], PadValue::ZERO).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::InvalidArgument { .. }),
            "{err}"
        );
        let overflow = RaggedLayout {
            ndim: 2,
            offsets: vec![0],
            byte_lens: vec![0],
            dims: vec![usize::MAX, 0],
        };
        let layout = RaggedLayout {
            dims: vec![usize::MAX, 0, 0, 2],
            offsets: vec![0, 0],
            byte_lens: vec![0, 0],
            ..overflow
        };
        assert!(layout.pad(DType::U8, &[], PadValue::ZERO).is_err());
    }
}
