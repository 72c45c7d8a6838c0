//! Batches of framework tensors: the column conversion an adapter supplies,
//! and everything around it that is the same in every framework.

use super::{HostArray, PackedRagged, PadValue, Padded};
use crate::dtype::DType;
use crate::error::{Error, StoreKind};
use crate::loader::{Batch, Column, StagedBuffer, Staging};

/// The buffers a converter's staging gathers into.
pub type BufferOf<C> = <<C as ColumnConverter>::Staging as Staging>::Buffer;

/// How Ragged streams become tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RaggedMode {
    /// Padded to the batch's largest extent of every axis, with lengths and
    /// a mask ([`Padded`](super::Padded)).
    #[default]
    Padded,
    /// One tensor per record.
    PerRecord,
    /// Packed ([`PackedRagged`]): values end to end, `cu_seqlens` and
    /// shapes, no padding. A loader built with this mode gathers Ragged
    /// streams [packed](crate::DataLoaderBuilder::packed), so the values
    /// are the staged buffer.
    Packed,
}

/// The framework-specific last step of a batch's path: host bytes to the
/// framework's tensor. An adapter names its [`Staging`] (where batches are
/// gathered, e.g. its tensors' own storage, and so the buffer type the
/// columns hold), implements [`tensor_from_bytes`](Self::tensor_from_bytes)
/// and, to hand its staged buffers over without a copy,
/// [`buffer_tensor`](Self::buffer_tensor), which gets the staging's own
/// buffer type back; Dense, packed, per-record and padded conversion of
/// whole columns are built on it here, the same for every framework.
///
/// ```
/// use loaderx_core::adapter::{ColumnConverter, PadValue};
/// use loaderx_core::{Codec, DType, DataLoader, Ragged, RaggedWriter};
///
/// /// "Tensors" that are `(shape, element count)`, from core's pooled buffers.
/// struct Shapes;
/// impl ColumnConverter for Shapes {
///     type Tensor = (Vec<usize>, usize);
///     type Error = loaderx_core::Error;
///     type Staging = loaderx_core::adapter::BufferPool;
///     fn staging(&self) -> loaderx_core::adapter::BufferPool {
///         loaderx_core::adapter::BufferPool::new(0)
///     }
///     fn tensor_from_bytes(&self, dtype: DType, bytes: &[u8], shape: &[usize]) -> loaderx_core::Result<Self::Tensor> {
///         Ok((shape.to_vec(), bytes.len() / dtype.size()))
///     }
/// }
///
/// let dir = tempfile::tempdir()?;
/// let mut w = RaggedWriter::<u16>::create(dir.path().join("tok"), 1, Codec::Raw)?;
/// w.append([vec![1u16, 2, 3], vec![4]])?;
/// w.close()?;
/// let mut loader = DataLoader::builder()
///     .stream("tok", Ragged::<u16>::open(dir.path().join("tok"))?)
///     .batch_size(2)
///     .mode(loaderx_core::SamplerMode::Sequential)
///     .build()?;
/// let batch = loader.next().unwrap()?;
/// let tok = batch.column("tok").unwrap();
/// assert_eq!(Shapes.records(tok)?, [(vec![3], 3), (vec![1], 1)]);
/// let padded = Shapes.padded(tok, PadValue::ZERO)?;
/// assert_eq!(padded.values, (vec![2, 3], 6));
/// assert_eq!(padded.lengths, (vec![2, 1], 2));
/// assert!(Shapes.copy_dense(tok).is_err()); // a Ragged column
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ColumnConverter: Send + Sync + 'static {
    /// The framework's tensor.
    type Tensor: Send + 'static;
    /// The adapter's error; core errors convert into it.
    type Error: From<Error> + Send + 'static;
    /// Where the batches this converter takes are gathered.
    type Staging: Staging;

    /// The staging for a loader built with this converter
    /// ([`DataLoaderBuilder::build_tensors`](crate::DataLoaderBuilder::build_tensors),
    /// and [`PairsBuilder::build`](super::PairsBuilder::build) through it):
    /// the framework's own tensor storage or pinned memory, or a
    /// [`BufferPool`](crate::adapter::BufferPool) for a converter that copies.
    fn staging(&self) -> Self::Staging;

    /// A tensor of `shape` from elements of `dtype` in `bytes` (any
    /// alignment, C order), copied and widened as the framework needs (see
    /// [`DTypeTable`](super::DTypeTable)).
    ///
    /// # Errors
    ///
    /// When the bytes cannot become a tensor (a value out of range for the
    /// framework's type, the framework's own errors).
    fn tensor_from_bytes(
        &self,
        dtype: DType,
        bytes: &[u8],
        shape: &[usize],
    ) -> Result<Self::Tensor, Self::Error>;

    /// A host array as a tensor (e.g. one of [`Padded`]'s).
    ///
    /// # Errors
    ///
    /// As [`tensor_from_bytes`](Self::tensor_from_bytes).
    fn array(&self, array: &HostArray) -> Result<Self::Tensor, Self::Error> {
        self.tensor_from_bytes(array.dtype(), array.bytes(), array.shape())
    }

    /// A Dense column as one `(B, *item_shape)` tensor, copying its bytes.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Ragged
    /// column, and as [`tensor_from_bytes`](Self::tensor_from_bytes).
    fn copy_dense<B: StagedBuffer>(&self, column: &Column<B>) -> Result<Self::Tensor, Self::Error> {
        let shape = column.dense_shape()?;
        self.tensor_from_bytes(column.dtype(), column.bytes(), shape)
    }

    /// The first `product(shape)` elements of `column`'s staged buffer as
    /// one tensor of `shape` (a Dense column's batch, or the values of a
    /// Ragged column gathered [packed](crate::DataLoaderBuilder::packed));
    /// the column is the converter's, to take its staged buffer (of its
    /// staging's type) back without a copy. This is the method an adapter
    /// overrides for its own staging; the default copies.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when the column holds fewer bytes than `shape` needs, and as
    /// [`tensor_from_bytes`](Self::tensor_from_bytes).
    fn buffer_tensor(
        &self,
        column: Column<BufferOf<Self>>,
        shape: &[usize],
    ) -> Result<Self::Tensor, Self::Error> {
        let len = column.array_len(shape)?;
        self.tensor_from_bytes(column.dtype(), &column.bytes()[..len], shape)
    }

    /// A Dense column as one `(B, *item_shape)` tensor, through
    /// [`buffer_tensor`](Self::buffer_tensor): without a copy from the
    /// adapter's own staging.
    ///
    /// # Errors
    ///
    /// As [`copy_dense`](Self::copy_dense).
    fn dense(&self, column: Column<BufferOf<Self>>) -> Result<Self::Tensor, Self::Error> {
        let shape = column.dense_shape()?.to_vec();
        self.buffer_tensor(column, &shape)
    }

    /// A Ragged column packed (see [`PackedRagged`]): `values` 1-D in the
    /// (mapped) element type, `cu_seqlens` `i32` and `shapes` `u32` (in the
    /// framework's types for them). A column gathered
    /// [packed](crate::DataLoaderBuilder::packed) hands its buffer over as
    /// the values through [`buffer_tensor`](Self::buffer_tensor); any other
    /// is copied end to end first.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Dense
    /// column, as [`Column::packed`] (more than `i32::MAX` elements, a
    /// dimension above `u32::MAX`), and as
    /// [`tensor_from_bytes`](Self::tensor_from_bytes).
    fn packed(
        &self,
        column: Column<BufferOf<Self>>,
    ) -> Result<PackedRagged<Self::Tensor>, Self::Error> {
        let layout = column.ragged_layout()?;
        if !layout.is_packed() {
            return self.copy_packed(&column);
        }
        let dtype = column.dtype();
        let cu_seqlens = self.array(&layout.cu_seqlens_array(dtype)?)?;
        let shapes = self.array(&layout.shapes_array()?)?;
        let elements = layout.packed_bytes() / dtype.size().max(1);
        Ok(PackedRagged {
            values: self.buffer_tensor(column, &[elements])?,
            cu_seqlens,
            shapes,
        })
    }

    /// [`packed`](Self::packed) from a borrowed column: the values are
    /// copied once, from the column's own bytes when it was gathered
    /// [packed](crate::DataLoaderBuilder::packed), or end to end from its
    /// segments.
    ///
    /// # Errors
    ///
    /// As [`packed`](Self::packed).
    fn copy_packed<B: StagedBuffer>(
        &self,
        column: &Column<B>,
    ) -> Result<PackedRagged<Self::Tensor>, Self::Error> {
        let layout = column.ragged_layout()?;
        let dtype = column.dtype();
        let elements = layout.packed_bytes() / dtype.size().max(1);
        Ok(PackedRagged {
            values: self.tensor_from_bytes(dtype, &column.packed_values()?, &[elements])?,
            cu_seqlens: self.array(&layout.cu_seqlens_array(dtype)?)?,
            shapes: self.array(&layout.shapes_array()?)?,
        })
    }

    /// A Ragged column padded with `pad` to the largest extent of every axis
    /// (see [`Column::padded`]), as tensors: values, `i64` lengths, `bool` mask
    /// (in the framework's types for them).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Dense
    /// column, as [`Column::padded`] (a `pad` of another element type), and as
    /// [`tensor_from_bytes`](Self::tensor_from_bytes).
    fn padded<B: StagedBuffer>(
        &self,
        column: &Column<B>,
        pad: PadValue,
    ) -> Result<Padded<Self::Tensor>, Self::Error> {
        column.ragged_layout()?;
        column.padded(pad)?.try_map(|array| self.array(&array))
    }

    /// A Ragged column as one tensor per record, each of its own shape.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Dense
    /// column, and as [`tensor_from_bytes`](Self::tensor_from_bytes).
    fn records<B: StagedBuffer>(
        &self,
        column: &Column<B>,
    ) -> Result<Vec<Self::Tensor>, Self::Error> {
        column.ragged_layout()?;
        column
            .records()
            .map(|(shape, bytes)| self.tensor_from_bytes(column.dtype(), bytes, shape))
            .collect()
    }
}

/// One stream of a [`TensorBatch`].
#[derive(Debug, Clone)]
pub enum TensorColumn<T, P = Padded<T>> {
    /// A Dense stream: `(B, *item_shape)`.
    Dense(T),
    /// A Ragged stream, padded.
    Padded(P),
    /// A Ragged stream, one tensor per record.
    Records(Vec<T>),
    /// A Ragged stream, packed.
    Packed(PackedRagged<T>),
}

/// A loader step as framework tensors, streams in the loader's order.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TensorBatch<T, P = Padded<T>> {
    /// The sampler step.
    pub step: u64,
    /// The pass the step belongs to.
    pub epoch: u64,
    /// The step's position in its pass.
    pub step_in_epoch: u64,
    /// The record indices (the same for every stream).
    pub indices: Vec<u64>,
    /// Each record's mixture source ([`Batch::sources`](crate::Batch::sources)).
    pub sources: Option<Vec<u32>>,
    /// `(name, column)` per stream.
    pub columns: Vec<(String, TensorColumn<T, P>)>,
}

impl<T> TensorBatch<T> {
    /// Converts a loader batch column by column with `converter` (Ragged
    /// columns padded with zeros, or one tensor per record, as `mode` says).
    ///
    /// # Errors
    ///
    /// The converter's first error.
    pub fn convert<C>(
        batch: Batch<BufferOf<C>>,
        converter: &C,
        mode: RaggedMode,
    ) -> Result<Self, C::Error>
    where
        C: ColumnConverter<Tensor = T>,
    {
        let (step, epoch, step_in_epoch) = (batch.step(), batch.epoch(), batch.step_in_epoch());
        let indices = batch.indices().to_vec();
        let sources = batch.sources().map(<[u32]>::to_vec);
        let columns = batch
            .into_columns()
            .into_iter()
            .map(|(name, column)| {
                let converted = match (column.kind(), mode) {
                    (StoreKind::Dense, _) => TensorColumn::Dense(converter.dense(column)?),
                    (_, RaggedMode::Padded) => {
                        TensorColumn::Padded(converter.padded(&column, PadValue::ZERO)?)
                    }
                    (_, RaggedMode::PerRecord) => {
                        TensorColumn::Records(converter.records(&column)?)
                    }
                    (_, RaggedMode::Packed) => TensorColumn::Packed(converter.packed(column)?),
                };
                Ok((name, converted))
            })
            .collect::<Result<_, C::Error>>()?;
        Ok(TensorBatch {
            step,
            epoch,
            step_in_epoch,
            indices,
            sources,
            columns,
        })
    }
}

impl<T, P> TensorBatch<T, P> {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True when the batch holds no record (never delivered by a loader).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// Stream `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// naming the streams there are, when there is no stream `name`.
    pub fn column(&self, name: &str) -> Result<&TensorColumn<T, P>, Error> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
            .ok_or_else(|| self.missing(name))
    }

    fn missing(&self, name: &str) -> Error {
        let names: Vec<&str> = self.columns.iter().map(|(n, _)| n.as_str()).collect();
        Error::invalid(format!(
            "the batch has no stream {name:?} (streams: {})",
            names.join(", ")
        ))
    }

    fn wrong(name: &str, want: &str, column: &TensorColumn<T, P>) -> Error {
        let found = match column {
            TensorColumn::Dense(_) => "a Dense stream",
            TensorColumn::Padded(_) => "a padded Ragged stream",
            TensorColumn::Records(_) => "a per-record Ragged stream",
            TensorColumn::Packed(_) => "a packed Ragged stream",
        };
        Error::invalid(format!("stream {name:?} is {found}, asked for {want}"))
    }

    /// Dense stream `name`.
    ///
    /// # Errors
    ///
    /// When there is no such stream, or it is Ragged.
    pub fn dense(&self, name: &str) -> Result<&T, Error> {
        match self.column(name)? {
            TensorColumn::Dense(t) => Ok(t),
            other => Err(Self::wrong(name, "a Dense stream", other)),
        }
    }

    /// Padded Ragged stream `name`.
    ///
    /// # Errors
    ///
    /// When there is no such stream, or it is Dense or per-record.
    pub fn padded(&self, name: &str) -> Result<&P, Error> {
        match self.column(name)? {
            TensorColumn::Padded(p) => Ok(p),
            other => Err(Self::wrong(name, "a padded Ragged stream", other)),
        }
    }

    /// Per-record Ragged stream `name`.
    ///
    /// # Errors
    ///
    /// When there is no such stream, or it is Dense or padded.
    pub fn records(&self, name: &str) -> Result<&[T], Error> {
        match self.column(name)? {
            TensorColumn::Records(r) => Ok(r),
            other => Err(Self::wrong(name, "a per-record Ragged stream", other)),
        }
    }

    /// Packed Ragged stream `name`.
    ///
    /// # Errors
    ///
    /// When there is no such stream, or it is Dense, padded or per-record.
    pub fn packed(&self, name: &str) -> Result<&PackedRagged<T>, Error> {
        match self.column(name)? {
            TensorColumn::Packed(p) => Ok(p),
            other => Err(Self::wrong(name, "a packed Ragged stream", other)),
        }
    }

    /// Takes stream `name` out of the batch.
    ///
    /// # Errors
    ///
    /// When there is no such stream.
    pub fn take(&mut self, name: &str) -> Result<TensorColumn<T, P>, Error> {
        let i = self
            .columns
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| self.missing(name))?;
        Ok(self.columns.remove(i).1)
    }
}
