use std::marker::PhantomData;
use std::ops::Range;
use std::path::Path;

use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::codec::{Codec, Sink, strided_sample, train_from_samples};
use crate::dtype::{DType, Element};
use crate::engine::{Engine, RecordSource, StoreReader, StoreWriter};
use crate::error::{Error, ErrorKind, StoreKind};
use crate::format::Schema;
use crate::options::CreateOptions;

/// The error for appending a `bool` record holding a byte other than 0 or 1:
/// stored, it would make every later read of the record fail.
pub(crate) fn not_bool_error(index: usize, byte: u8) -> Error {
    Error::invalid(format!(
        "record {index} of the batch: byte {byte} is not a bool (0 or 1)"
    ))
}

/// A Dense store being built, element type known at run time.
pub struct DynDenseWriter {
    engine: StoreWriter,
    dtype: DType,
    item_shape: Vec<usize>,
    record_bytes: usize,
}

struct FixedRecords<'a> {
    bytes: &'a [u8],
    width: usize,
}

impl RecordSource for FixedRecords<'_> {
    fn len(&self) -> usize {
        self.bytes.len() / self.width
    }

    fn record(&self, j: usize) -> (&[u8], &[u8]) {
        (&[], &self.bytes[j * self.width..(j + 1) * self.width])
    }
}

impl DynDenseWriter {
    /// Creates a Dense store at the new path `path`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AlreadyExists`] when `path` exists; [`ErrorKind::InvalidArgument`]
    /// for a schema or options that cannot make a store (a record of 0 bytes or over 2
    /// GiB, a rank of 64 or more, a shard count outside 1..=255, a dictionary zstd
    /// cannot load, a path without a final name, a store URL); [`ErrorKind::Io`] when the directory
    /// or its files cannot be made (nothing is left behind then).
    pub fn create(
        path: impl AsRef<Path>,
        dtype: DType,
        item_shape: &[usize],
        options: &CreateOptions,
    ) -> Result<DynDenseWriter, Error> {
        let schema = Schema::dense(dtype, item_shape)?;
        let record_bytes = schema.record_bytes().unwrap_or(0);
        let engine = StoreWriter::create(path.as_ref(), &schema, options)?;
        Ok(DynDenseWriter {
            engine,
            dtype,
            item_shape: item_shape.to_vec(),
            record_bytes,
        })
    }

    /// Appends `records` records whose C-order little-endian bytes are `bytes`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when `bytes` is not `records` records
    /// long, `records` is 0, or a `bool` store is given a byte other than 0
    /// or 1; an I/O error, after which the writer is failed for good.
    pub fn append_bytes(&mut self, bytes: &[u8], records: usize) -> Result<(), Error> {
        if records == 0 {
            return Err(Error::invalid("append needs at least one record"));
        }
        if records.checked_mul(self.record_bytes) != Some(bytes.len()) {
            return Err(Error::invalid(format!(
                "{} bytes are not {records} records of {} bytes",
                bytes.len(),
                self.record_bytes
            )));
        }
        if self.dtype == DType::Bool
            && let Some(at) = bytes.iter().position(|&b| b > 1)
        {
            return Err(not_bool_error(at / self.record_bytes.max(1), bytes[at]));
        }
        self.engine.append(&FixedRecords {
            bytes,
            width: self.record_bytes,
        })
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape of every record.
    pub fn item_shape(&self) -> &[usize] {
        &self.item_shape
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

/// A Dense store being built, element type `T`.
///
/// ```
/// use loaderx_core::{Codec, Dense, DenseWriter};
/// use ndarray::Array3;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("images");
/// let images = Array3::<u8>::from_shape_fn((10, 28, 28), |(i, y, x)| (i + y + x) as u8);
/// let mut w = DenseWriter::<u8>::create(&path, &[28, 28], Codec::Zstd)?;
/// w.append(&images)?;
/// w.close()?;
///
/// let ds = Dense::<u8>::open(&path)?;
/// assert_eq!(ds.gather(&[3, 1])?.shape(), &[2, 28, 28]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DenseWriter<T: Element> {
    inner: DynDenseWriter,
    _t: PhantomData<fn(T)>,
}

impl<T: Element> DenseWriter<T> {
    /// Creates a store with default options (4 shards, no dictionary).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AlreadyExists`] when `path` exists; [`ErrorKind::InvalidArgument`]
    /// for a schema or options that cannot make a store (a record of 0 bytes or over 2
    /// GiB, a rank of 64 or more, a shard count outside 1..=255, a dictionary zstd
    /// cannot load, a path without a final name, a store URL); [`ErrorKind::Io`] when the directory
    /// or its files cannot be made (nothing is left behind then).
    pub fn create(
        path: impl AsRef<Path>,
        item_shape: &[usize],
        codec: Codec,
    ) -> Result<Self, Error> {
        Self::create_with(path, item_shape, &CreateOptions::new(codec))
    }

    /// Creates a store with `options`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::AlreadyExists`] when `path` exists; [`ErrorKind::InvalidArgument`]
    /// for a schema or options that cannot make a store (a record of 0 bytes or over 2
    /// GiB, a rank of 64 or more, a shard count outside 1..=255, a dictionary zstd
    /// cannot load, a path without a final name, a store URL); [`ErrorKind::Io`] when the directory
    /// or its files cannot be made (nothing is left behind then).
    pub fn create_with(
        path: impl AsRef<Path>,
        item_shape: &[usize],
        options: &CreateOptions,
    ) -> Result<Self, Error> {
        Ok(DenseWriter {
            inner: DynDenseWriter::create(path, T::DTYPE, item_shape, options)?,
            _t: PhantomData,
        })
    }

    /// Appends a batch: axis 0 indexes records, the rest must be `item_shape`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ShapeMismatch`] when the batch is not `(B, *item_shape)`;
    /// [`ErrorKind::InvalidArgument`] for an empty or non-contiguous batch; otherwise
    /// as [`DynDenseWriter::append_bytes`].
    pub fn append<S, D>(&mut self, batch: &ArrayBase<S, D>) -> Result<(), Error>
    where
        S: Data<Elem = T>,
        D: Dimension,
    {
        let shape = batch.shape();
        if shape.is_empty() || shape[1..] != self.inner.item_shape[..] {
            return Err(ErrorKind::ShapeMismatch {
                index: 0,
                expected: format!("a batch of shape (B, {:?})", self.inner.item_shape),
                found: shape.to_vec(),
            }
            .into());
        }
        let records = shape[0];
        let data = batch.as_standard_layout();
        let slice = data
            .as_slice()
            .ok_or_else(|| Error::invalid("batch is not contiguous"))?;
        self.inner.append_bytes(T::as_bytes(slice), records)
    }

    /// Appends `records` records stored contiguously in `data`.
    ///
    /// # Errors
    ///
    /// As [`DynDenseWriter::append_bytes`]: `data` must hold exactly `records` records,
    /// at least one.
    pub fn append_slice(&mut self, data: &[T], records: usize) -> Result<(), Error> {
        self.inner.append_bytes(T::as_bytes(data), records)
    }

    /// Shape of every record.
    pub fn item_shape(&self) -> &[usize] {
        self.inner.item_shape()
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
    pub fn into_dyn(self) -> DynDenseWriter {
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

/// An open Dense store, element type known at run time.
pub struct DynDense {
    engine: Engine,
    dtype: DType,
    item_shape: Vec<usize>,
    record_bytes: usize,
}

impl DynDense {
    crate::store::reader_accessors!();

    crate::store::store_openers!(
        "the Dense store",
        "[`ErrorKind::KindMismatch`](crate::ErrorKind::KindMismatch) when the store is Ragged."
    );

    pub(crate) fn from_engine(engine: StoreReader) -> Result<DynDense, Error> {
        match engine.schema().clone() {
            Schema::Dense { dtype, item_shape } => Ok(DynDense {
                record_bytes: engine.schema().record_bytes().unwrap_or(0),
                engine: engine.into(),
                dtype,
                item_shape,
            }),
            Schema::Ragged { .. } => Err(ErrorKind::KindMismatch {
                path: engine.path().to_path_buf(),
                expected: StoreKind::Dense,
                found: StoreKind::Ragged,
            }
            .into()),
        }
    }

    /// Shape of every record.
    pub fn item_shape(&self) -> &[usize] {
        &self.item_shape
    }

    /// Bytes of one record.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
    }

    /// Reads `parts`, Dense stores of one element type and record shape,
    /// as one store: their records end to end, record `i` of part `p`
    /// being record `parts[0].len() + … + parts[p - 1].len() + i` of the
    /// whole. `path` names the whole (a dataset's directory) in errors and
    /// [`path`](Self::path). A gather that spans parts reads each part's
    /// records in parallel, straight into the destination. A part that is
    /// itself a concatenation contributes its parts. [`codec`](Self::codec),
    /// [`dict`](Self::dict) and [`generation`](Self::generation) are the
    /// first part's (parts may differ in them);
    /// [`data_shards`](Self::data_shards) and
    /// [`stored_bytes`](Self::stored_bytes) add up.
    ///
    /// ```
    /// use loaderx_core::{Codec, Dense, DenseWriter, DynDense};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut parts = Vec::new();
    /// for (p, codec) in [Codec::Raw, Codec::Zstd].into_iter().enumerate() {
    ///     let path = dir.path().join(format!("part{p}"));
    ///     let mut w = DenseWriter::<u32>::create(&path, &[], codec)?;
    ///     w.append_slice(&[10 * p as u32, 10 * p as u32 + 1], 2)?;
    ///     w.close()?;
    ///     parts.push(DynDense::open(&path)?);
    /// }
    /// let whole = DynDense::concat(dir.path(), parts)?.typed::<u32>()?;
    /// assert_eq!(whole.len(), 4);
    /// assert_eq!(whole.gather(&[3, 0, 2])?.into_raw_vec_and_offset().0, [11, 0, 10]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for no part, parts of different
    /// element types or record shapes, or more than `2^64` records in all.
    pub fn concat(path: impl AsRef<Path>, parts: Vec<DynDense>) -> Result<DynDense, Error> {
        let path = path.as_ref();
        let Some(first) = parts.first() else {
            return Err(Error::invalid(format!(
                "{}: a concatenation needs at least one part",
                path.display()
            )));
        };
        let (dtype, item_shape, record_bytes) =
            (first.dtype, first.item_shape.clone(), first.record_bytes);
        let mut readers = Vec::new();
        for part in parts {
            if matches!(part.engine, Engine::Lazy(_)) {
                return Err(Error::invalid(format!(
                    "{}: part {} is converted lazily and cannot be concatenated \
                     (freeze it into a dataset first)",
                    path.display(),
                    part.path().display()
                )));
            }
            if part.dtype != dtype || part.item_shape != item_shape {
                return Err(Error::invalid(format!(
                    "{}: part {} holds {} records of shape {:?}, the first part {dtype} of {item_shape:?}",
                    path.display(),
                    part.path().display(),
                    part.dtype,
                    part.item_shape,
                )));
            }
            readers.extend(part.engine.into_stores());
        }
        Ok(DynDense {
            engine: Engine::Parts(crate::engine::parts::Parts::new(path, readers)?),
            dtype,
            item_shape,
            record_bytes,
        })
    }

    /// Gathers the records at `indices`, in that order, into `dst`, which
    /// must be exactly `indices.len() * record_bytes()` bytes.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`] when `dst` is not `indices.len() * record_bytes()` bytes;
    /// [`ErrorKind::IndexOutOfRange`] for an index past the end;
    /// [`ErrorKind::CorruptRecord`] for a malformed record, naming the first one in
    /// `indices`.
    pub fn gather_into(&self, indices: &[u64], dst: &mut [u8]) -> Result<(), Error> {
        self.engine.gather_fixed(indices, self.record_bytes, dst)
    }

    /// [`gather_into`](Self::gather_into) into bytes that may be
    /// uninitialised: on `Ok` every byte of `dst` was written; after an
    /// error `dst` must not be read.
    pub(crate) fn gather_into_to<D: Sink>(
        &self,
        indices: &[u64],
        dst: &mut [D],
    ) -> Result<(), Error> {
        self.engine.gather_fixed(indices, self.record_bytes, dst)
    }

    /// Gathers the records at `indices` into a new byte vector.
    ///
    /// # Errors
    ///
    /// As [`gather_into`](Self::gather_into), and [`ErrorKind::Buffer`] when the output
    /// cannot be allocated.
    pub fn gather_bytes(&self, indices: &[u64]) -> Result<Vec<u8>, Error> {
        self.engine.gather_fixed_vec(indices, self.record_bytes)
    }

    /// This store as `Dense<T>`, if `T` is its element type.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::DTypeMismatch`] when `T` is not the store's element type.
    pub fn typed<T: Element>(self) -> Result<Dense<T>, Error> {
        if self.dtype != T::DTYPE {
            return Err(ErrorKind::DTypeMismatch {
                path: self.path().to_path_buf(),
                expected: T::DTYPE,
                found: self.dtype,
            }
            .into());
        }
        Ok(Dense {
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
        if self.is_empty() {
            return Err(ErrorKind::Dictionary {
                detail: "cannot train a dictionary on an empty store".into(),
            }
            .into());
        }
        if self.record_bytes > crate::codec::DICT_SAMPLE_BYTES {
            return Err(ErrorKind::Dictionary {
                detail: "one record exceeds the 4 MiB sample budget".into(),
            }
            .into());
        }
        let n = usize::try_from(self.len()).unwrap_or(usize::MAX);
        let idx: Vec<u64> = strided_sample(n, self.record_bytes)
            .into_iter()
            .map(|i| i as u64)
            .collect();
        let data = self.gather_bytes(&idx)?;
        train_from_samples(&data, &vec![self.record_bytes; idx.len()])
    }
}

/// An open Dense store of element type `T`; see [`DenseWriter`] for an example.
///
/// Reads return `(B, *item_shape)` arrays. A reader is `Send + Sync`: many
/// threads may gather from one reader at once.
///
/// The Dense contract: every record has the schema's `item_shape`.
///
/// [`DenseWriter<T>`] and [`Dense<T>`] fix the element type at compile time;
/// [`DynDenseWriter`] and [`DynDense`] carry it as a [`DType`] value for code
/// that learns it at run time (loaders, adapters, the CLI). A writer can only
/// append and a reader can only read: they are different types.
pub struct Dense<T: Element> {
    inner: DynDense,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> Dense<T> {
    crate::store::typed_accessors!(DynDense);

    /// Opens the store at `path`; its element type must be `T`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotAStore`] when `path` holds no store, [`ErrorKind::NotPublished`]
    /// when its writer never closed it, [`ErrorKind::Busy`] while a writer holds it,
    /// [`ErrorKind::Corrupt`] for malformed metadata (header, schema, including an
    /// element type loaderx does not know, shard files, dictionary), and
    /// [`ErrorKind::Io`] when a file cannot be read or locked.
    /// [`ErrorKind::KindMismatch`] when the store follows the other record contract,
    /// and [`ErrorKind::DTypeMismatch`] when its element type is not `T`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        DynDense::open(path)?.typed()
    }

    /// Shape of every record.
    pub fn item_shape(&self) -> &[usize] {
        self.inner.item_shape()
    }

    /// Gathers the records at `indices`, in order, as a `(B, *item_shape)` array.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::IndexOutOfRange`] for an index past the end;
    /// [`ErrorKind::CorruptRecord`] for a record whose location or payload is malformed
    /// (including a `bool` byte other than 0 or 1), naming the first such record in
    /// `indices`; [`ErrorKind::Buffer`] when the output cannot be allocated.
    pub fn gather(&self, indices: &[u64]) -> Result<ArrayD<T>, Error> {
        // Indices first: nothing is allocated for a batch that cannot be read.
        self.inner.engine.check_indices(indices)?;
        let per = self.inner.record_bytes / size_of::<T>();
        let total = indices
            .len()
            .checked_mul(per)
            .ok_or_else(|| ErrorKind::Buffer {
                detail: format!(
                    "{} records of {per} elements overflow memory",
                    indices.len()
                ),
            })?;
        let values = T::filled_vec(total, |bytes| self.inner.gather_into(indices, bytes))?
            .ok_or_else(|| self.not_bool(indices))?;
        let mut shape = Vec::with_capacity(1 + self.item_shape().len());
        shape.push(indices.len());
        shape.extend_from_slice(self.item_shape());
        ArrayD::from_shape_vec(IxDyn(&shape), values)
            .map_err(|e| Error::invalid(format!("array shape: {e}")))
    }

    /// One record, of shape `item_shape`.
    ///
    /// # Errors
    ///
    /// As [`gather`](Self::gather).
    pub fn get(&self, index: u64) -> Result<ArrayD<T>, Error> {
        let batch = self.gather(&[index])?;
        Ok(batch.index_axis_move(ndarray::Axis(0), 0))
    }

    /// The records of `range`, in order.
    ///
    /// # Errors
    ///
    /// As [`gather`](Self::gather).
    pub fn range(&self, range: Range<u64>) -> Result<ArrayD<T>, Error> {
        let indices: Vec<u64> = range.collect();
        self.gather(&indices)
    }

    /// Gathers into caller memory: `dst` must hold exactly
    /// `indices.len() * item_shape.product()` elements.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`] when `dst` does not have the size stated above, otherwise
    /// as [`gather`](Self::gather) ([`ErrorKind::IndexOutOfRange`],
    /// [`ErrorKind::CorruptRecord`]).
    pub fn gather_into(&self, indices: &[u64], dst: &mut [T]) -> Result<(), Error> {
        if T::fill_slice(dst, |bytes| self.inner.gather_into(indices, bytes))? {
            Ok(())
        } else {
            Err(self.not_bool(indices))
        }
    }

    /// Trains a `zstd_dict` dictionary on an evenly strided sample of this store.
    ///
    /// # Errors
    ///
    /// As [`DynDense::train_dict`].
    pub fn train_dict(&self) -> Result<Vec<u8>, Error> {
        self.inner.train_dict()
    }

    /// The error for a `bool` gather of `indices` that met a byte other than
    /// 0 or 1, naming the first such record (found by reading them again:
    /// this is the error path only).
    fn not_bool(&self, indices: &[u64]) -> Error {
        const WHAT: &str = "a bool record holds a byte other than 0 or 1";
        let per = self.inner.record_bytes.max(1);
        let first = self.inner.gather_bytes(indices).ok().and_then(|bytes| {
            let at = bytes.iter().position(|&b| b > 1)?;
            indices.get(at / per).copied()
        });
        match first {
            Some(index) => Error::corrupt_record(self.inner.path(), index, WHAT),
            None => Error::corrupt(self.inner.path(), WHAT),
        }
    }
}
