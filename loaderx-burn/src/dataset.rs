//! burn's [`Dataset`] over Zrecord streams.

use std::borrow::Borrow;
use std::path::Path;
use std::sync::Arc;

use burn::data::dataset::{Dataset, DatasetError};
use burn::tensor::kind::{Basic, TensorKind};
use burn::tensor::{Device, Tensor};
use loaderx_core::adapter::{AlignedBuf, HostArray, StagedBuffer};
use loaderx_core::ndarray::ArrayViewD;
use loaderx_core::{Column, DType, Element, Store, StoreKind, Stream};

use crate::converter::to_tensor;
use crate::error::{BoxError, Error, Result};

/// One stream's value in a [`Record`]: an array of the store's element type.
#[derive(Clone)]
pub struct Field {
    pub(crate) name: Arc<str>,
    pub(crate) kind: StoreKind,
    pub(crate) array: HostArray,
}

impl Field {
    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.array.dtype()
    }

    /// The contract of the store it came from.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// The record's shape (`[]` for a scalar).
    pub fn shape(&self) -> &[usize] {
        self.array.shape()
    }

    /// The elements' bytes (C order, little-endian).
    pub fn bytes(&self) -> &[u8] {
        self.array.bytes()
    }

    /// The record as an array view of `T` (which must be its element type).
    ///
    /// # Errors
    ///
    /// [`Error::Core`] ([`InvalidArgument`](loaderx_core::ErrorKind::InvalidArgument))
    /// when `T` is not the record's element type.
    pub fn array<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        Ok(self.array.view()?)
    }

    /// The record as a tensor of kind `K` on `device`, by the rules of the
    /// [dtype table](crate::burn_dtype). `D` is the record's rank; burn has no
    /// rank-0 tensors, so a scalar record is a one-element `Tensor<1, K>`.
    ///
    /// # Errors
    ///
    /// [`Error::Kind`] when the element type cannot be held losslessly by kind `K` (see
    /// the [dtype table](crate::burn_dtype)); [`Error::Stream`] around core's
    /// [`OutOfRange`](loaderx_core::ErrorKind::OutOfRange) for a value the kind
    /// cannot represent (a `u64` above `i64::MAX`); [`Error::Rank`] when `D` is not the
    /// batch's rank.
    pub fn tensor<const D: usize, K: Basic + TensorKind>(
        &self,
        device: &Device,
    ) -> Result<Tensor<D, K>> {
        let shape: &[usize] = if self.shape().is_empty() {
            &[1]
        } else {
            self.shape()
        };
        to_tensor(&self.name, self.dtype(), self.bytes(), shape, device)
    }
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Field")
            .field("name", &self.name)
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .finish()
    }
}

/// One record of a [`ZrecordDataset`]: its index and one [`Field`] per
/// stream, in the dataset's stream order.
#[derive(Clone, Debug)]
pub struct Record {
    pub(crate) index: u64,
    pub(crate) fields: Vec<Field>,
}

impl Record {
    /// The record's index in the stores.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Every field, in stream order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The field of stream `name`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`.
    pub fn field(&self, name: &str) -> Result<&Field> {
        self.fields
            .iter()
            .find(|f| &*f.name == name)
            .ok_or_else(|| Error::MissingStream(name.to_owned()))
    }

    /// Stream `name` as an array view of `T`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`, and as
    /// [`Field::array`].
    pub fn array<T: Element>(&self, name: &str) -> Result<ArrayViewD<'_, T>> {
        self.field(name)?.array()
    }

    /// The single value of a scalar (or one-element) stream `name`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; as [`Field::array`];
    /// [`Error::Core`] ([`InvalidArgument`](loaderx_core::ErrorKind::InvalidArgument)) when the record does not hold exactly one value.
    pub fn scalar<T: Element>(&self, name: &str) -> Result<T> {
        let array = self.array::<T>(name)?;
        match array.len() {
            1 => array
                .iter()
                .next()
                .copied()
                .ok_or_else(|| Error::invalid(format!("stream {name:?} is empty"))),
            n => Err(Error::invalid(format!(
                "stream {name:?} holds {n} values, not one"
            ))),
        }
    }
}

/// One [`Record`] per index, holding its record of every named column as a
/// field (copied into its own buffer): how a dataset's gathers and a loader
/// batch become records.
pub(crate) fn split_records<B: StagedBuffer, C: Borrow<Column<B>>>(
    indices: &[u64],
    columns: impl ExactSizeIterator<Item = Result<(Arc<str>, C)>>,
) -> Result<Vec<Record>> {
    let mut records: Vec<Record> = indices
        .iter()
        .map(|&index| Record {
            index,
            fields: Vec::with_capacity(columns.len()),
        })
        .collect();
    for named in columns {
        let (name, column) = named?;
        let column = column.borrow();
        for (record, (shape, bytes)) in records.iter_mut().zip(column.records()) {
            let bytes = AlignedBuf::from_bytes(bytes)?;
            record.fields.push(Field {
                name: Arc::clone(&name),
                kind: column.kind(),
                array: HostArray::try_new(column.dtype(), shape.to_vec(), bytes)?,
            });
        }
    }
    Ok(records)
}

/// burn's [`Dataset`] over one or more Zrecord stores of equal length: item
/// `i` is a [`Record`] holding record `i` of every store.
///
/// Works with everything burn builds on datasets: its `DataLoaderBuilder`,
/// `ShuffledDataset`, `PartialDataset`, `MapperDataset`... `get_many` (what
/// burn's loaders call for a batch) gathers each store once for all the
/// indices, in parallel, instead of record by record. Use
/// [`map`](Self::map) to make items of your own type.
///
/// ```
/// use burn::data::dataset::Dataset;
/// use loaderx_burn::ZrecordDataset;
/// use loaderx_core::{Codec, Dense, DenseWriter};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<u8>::create(dir.path().join("image"), &[2, 2], Codec::Zstd)?;
/// w.append_slice(&(0..40).collect::<Vec<u8>>(), 10)?;
/// w.close()?;
/// let mut w = DenseWriter::<u8>::create(dir.path().join("label"), &[], Codec::Raw)?;
/// w.append_slice(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 10)?;
/// w.close()?;
///
/// let ds = ZrecordDataset::open_dir(dir.path())?;     // streams "image" and "label"
/// assert_eq!(ds.len(), 10);
/// let item = ds.get(3)?;
/// assert_eq!(item.scalar::<u8>("label")?, 3);
/// assert_eq!(item.array::<u8>("image")?.shape(), &[2, 2]);
///
/// // Items of your own type:
/// let labels = ds.map(|r| r.scalar::<u8>("label"));
/// assert_eq!(labels.get(7)?, 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ZrecordDataset {
    names: Arc<[Arc<str>]>,
    streams: Arc<[Stream]>,
    len: u64,
}

/// Configures a [`ZrecordDataset`].
#[derive(Default)]
pub struct ZrecordDatasetBuilder {
    streams: Vec<(String, Stream)>,
}

impl ZrecordDatasetBuilder {
    /// Adds a named stream (a `Dense`, `Ragged`, `DynDense`, `DynRagged` or
    /// `Store`); every stream must hold the same number of records.
    pub fn stream(mut self, name: impl Into<String>, stream: impl Into<Stream>) -> Self {
        self.streams.push((name.into(), stream.into()));
        self
    }

    /// The dataset.
    ///
    /// # Errors
    ///
    /// [`Error::Core`] for no stream, a name used twice, or streams of
    /// different lengths (`loaderx_core::Stream::check_named`).
    pub fn build(self) -> Result<ZrecordDataset> {
        let len = Stream::check_named(&self.streams)?;
        let (names, streams): (Vec<String>, Vec<Stream>) = self.streams.into_iter().unzip();
        Ok(ZrecordDataset {
            names: names.into_iter().map(Arc::from).collect(),
            streams: streams.into(),
            len,
        })
    }
}

impl ZrecordDataset {
    /// A builder; add streams with [`ZrecordDatasetBuilder::stream`].
    pub fn builder() -> ZrecordDatasetBuilder {
        ZrecordDatasetBuilder::default()
    }

    /// Every store directly under `dir` (a converted split such as
    /// `fashion/train` holding `image/` and `label/`), named after its
    /// directory, in name order. Directories that hold no store are skipped.
    ///
    /// # Errors
    ///
    /// [`Error::Core`] when `dir` cannot be listed or a store under it cannot be opened
    /// (see `loaderx_core::Store::open_dir`); then as
    /// [`build`](ZrecordDatasetBuilder::build).
    pub fn open_dir(dir: impl AsRef<Path>) -> Result<ZrecordDataset> {
        Store::open_dir(dir)?
            .into_iter()
            .fold(ZrecordDataset::builder(), |b, (name, store)| {
                b.stream(name, store)
            })
            .build()
    }

    /// Number of records, as the stores count them.
    pub fn records_len(&self) -> u64 {
        self.len
    }

    /// Stream names, in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.names.iter().map(|n| &**n)
    }

    /// The streams with their names, in order.
    pub(crate) fn streams(&self) -> impl Iterator<Item = (&str, &Stream)> + '_ {
        self.names.iter().map(|n| &**n).zip(self.streams.iter())
    }

    /// Record `index`.
    ///
    /// # Errors
    ///
    /// As [`records`](Self::records).
    pub fn record(&self, index: u64) -> Result<Record> {
        let mut records = self.records(&[index])?;
        records
            .pop()
            .ok_or_else(|| Error::invalid("gather returned no record"))
    }

    /// Records at `indices`, gathering each store once (in parallel).
    ///
    /// # Errors
    ///
    /// [`Error::Core`] for an index past the end or a damaged record (the errors of
    /// `loaderx_core`'s gathers).
    pub fn records(&self, indices: &[u64]) -> Result<Vec<Record>> {
        split_records(
            indices,
            self.names
                .iter()
                .zip(self.streams.iter())
                .map(|(name, stream)| Ok((Arc::clone(name), stream.gather(indices)?))),
        )
    }

    /// A dataset of `T`s made from records by `map` (a user struct, a tuple,
    /// one stream's value...). Its errors reach burn as [`DatasetError`]s.
    pub fn map<T, E, F>(self, map: F) -> MappedDataset<T>
    where
        E: Into<BoxError>,
        F: Fn(Record) -> Result<T, E> + Send + Sync + 'static,
    {
        MappedDataset {
            inner: self,
            map: Arc::new(move |r| map(r).map_err(Into::into)),
        }
    }
}

impl std::fmt::Debug for ZrecordDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZrecordDataset")
            .field("streams", &self.names)
            .field("len", &self.len)
            .finish()
    }
}

fn to_indices(len: u64, indexes: &[usize]) -> Result<Vec<u64>, DatasetError> {
    indexes
        .iter()
        .map(|&i| {
            let i = i as u64;
            if i < len {
                Ok(i)
            } else {
                Err(DatasetError::new(Error::invalid(format!(
                    "index {i} out of range for a dataset of {len} records"
                ))))
            }
        })
        .collect()
}

/// Out-of-range indices are an `Err`, not a panic (burn's contract allows
/// either; a loader reports an error cleanly).
impl Dataset<Record> for ZrecordDataset {
    fn get(&self, index: usize) -> Result<Record, DatasetError> {
        let index = to_indices(self.len, &[index])?[0];
        self.record(index).map_err(DatasetError::new)
    }

    fn get_many(&self, indexes: Vec<usize>) -> Result<Vec<Record>, DatasetError> {
        let indices = to_indices(self.len, &indexes)?;
        self.records(&indices).map_err(DatasetError::new)
    }

    fn len(&self) -> usize {
        usize::try_from(self.len).unwrap_or(usize::MAX)
    }
}

pub(crate) type MapFn<T> = Arc<dyn Fn(Record) -> Result<T, BoxError> + Send + Sync>;

/// A [`ZrecordDataset`] whose items are made by a mapping closure
/// ([`ZrecordDataset::map`]).
pub struct MappedDataset<T> {
    inner: ZrecordDataset,
    map: MapFn<T>,
}

impl<T> Clone for MappedDataset<T> {
    fn clone(&self) -> Self {
        MappedDataset {
            inner: self.inner.clone(),
            map: Arc::clone(&self.map),
        }
    }
}

impl<T> MappedDataset<T> {
    /// The underlying record dataset.
    pub fn records(&self) -> &ZrecordDataset {
        &self.inner
    }

    /// The mapping from records to items.
    pub(crate) fn decoder(&self) -> MapFn<T> {
        Arc::clone(&self.map)
    }
}

impl<T> std::fmt::Debug for MappedDataset<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedDataset")
            .field("inner", &self.inner)
            .finish()
    }
}

impl<T> Dataset<T> for MappedDataset<T> {
    fn get(&self, index: usize) -> Result<T, DatasetError> {
        let record = self.inner.get(index)?;
        (self.map)(record).map_err(|e| DatasetError::new(Error::Map(e)))
    }

    fn get_many(&self, indexes: Vec<usize>) -> Result<Vec<T>, DatasetError> {
        self.inner
            .get_many(indexes)?
            .into_iter()
            .map(|r| (self.map)(r).map_err(|e| DatasetError::new(Error::Map(e))))
            .collect()
    }

    fn len(&self) -> usize {
        Dataset::<Record>::len(&self.inner)
    }
}
