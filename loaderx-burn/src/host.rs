//! A batch in host memory — gathered by the loader, or stacked from dataset
//! records — and its conversion to burn tensors.

use std::sync::Arc;

use burn::tensor::kind::{Basic, TensorKind};
use burn::tensor::{Bool, Device, Float, Int, Tensor, TensorData};
use loaderx_core::adapter::{ColumnConverter, PadValue, StagedBuffer, VecBuffer};
use loaderx_core::ndarray::ArrayViewD;
use loaderx_core::{Batch, Column};
use loaderx_core::{DType, Element, StoreKind};

use crate::converter::BurnConverter;
use crate::dataset::{Record, split_records};
use crate::error::{Error, Result};

struct HostColumn<B> {
    name: String,
    dtype: DType,
    /// The loader's gather buffer, the records a batcher stacked, or why
    /// they could not be stacked.
    column: Result<Column<B>, String>,
}

impl<B: StagedBuffer> HostColumn<B> {
    /// The column, or the stacking error.
    fn column(&self) -> Result<&Column<B>> {
        self.column.as_ref().map_err(|detail| Error::Stack {
            stream: self.name.clone(),
            detail: detail.clone(),
        })
    }

    fn kind(&self) -> StoreKind {
        self.column.as_ref().map_or(StoreKind::Dense, Column::kind)
    }
}

/// One loader step, or records stacked by a batcher, in host memory, with the
/// device its tensors go to: what a mapping closure turns into the model's
/// batch type.
///
/// burn's tensor kind is part of the tensor's type, so columns keep the
/// store's element type until the caller names a kind: the `tensor`,
/// `float`, `int`, `bool`, `padded` and `packed` methods are core's
/// [`ColumnConverter`] methods of a [`BurnConverter`] (Dense, padded and
/// packed conversion are core's, the same in every adapter) followed by
/// [`BurnConverter::tensor`] on [`device`](Self::device), by the rules of
/// the [dtype table](crate::burn_dtype). One copy happens per tensor (from
/// the gathered column into burn's host data, which a batch read twice
/// needs), plus the element conversion burn does for the device's type.
///
/// Cloning is cheap (the columns are shared). `B` is the staging buffer
/// the columns were gathered into: burn's loaders gather with
/// [`BurnConverter`]'s staging (core's
/// [`VecStaging`](loaderx_core::adapter::VecStaging)); a batch of any other
/// loaderx loader works the same ([`from_batch`](Self::from_batch)).
pub struct HostBatch<B = VecBuffer> {
    step: Option<u64>,
    indices: Arc<[u64]>,
    columns: Arc<[HostColumn<B>]>,
    converter: BurnConverter,
}

impl<B> Clone for HostBatch<B> {
    fn clone(&self) -> Self {
        HostBatch {
            step: self.step,
            indices: Arc::clone(&self.indices),
            columns: Arc::clone(&self.columns),
            converter: self.converter.clone(),
        }
    }
}

impl HostBatch {
    /// Stacks dataset records (streams in the first record's order). Records
    /// that disagree make that column fail on access ([`Error::Stack`]).
    pub(crate) fn from_records(records: &[Record], device: &Device) -> HostBatch {
        let indices = records.iter().map(Record::index).collect();
        let columns = match records.first() {
            None => Arc::from([]),
            Some(first) => (0..first.fields.len())
                .map(|k| stack_column(records, k))
                .collect(),
        };
        HostBatch {
            step: None,
            indices,
            columns,
            converter: BurnConverter::new(device),
        }
    }
}

impl<B: StagedBuffer> HostBatch<B> {
    /// A batch of a plain loaderx DataLoader (any staging), for code that
    /// drives loaderx itself but wants this crate's tensor accessors.
    pub fn from_batch(batch: Batch<B>, device: &Device) -> HostBatch<B> {
        let step = Some(batch.step());
        let indices = batch.indices().into();
        let columns = batch
            .into_columns()
            .into_iter()
            .map(|(name, column)| HostColumn {
                name,
                dtype: column.dtype(),
                column: Ok(column),
            })
            .collect();
        HostBatch {
            step,
            indices,
            columns,
            converter: BurnConverter::new(device),
        }
    }

    /// The batch's records, one [`Record`] per row (each field copied into
    /// its own buffer), as [`ZrecordDataset`](crate::ZrecordDataset) would
    /// give them: what a burn `Batcher`'s items are decoded from.
    ///
    /// # Errors
    ///
    /// [`Error::Stack`] for a column whose records could not be stacked;
    /// [`Error::Core`] when a buffer cannot be allocated or a `bool` byte is
    /// neither 0 nor 1.
    pub fn to_records(&self) -> Result<Vec<Record>> {
        split_records(
            &self.indices,
            self.columns
                .iter()
                .map(|c| Ok((Arc::from(c.name.as_str()), c.column()?))),
        )
    }

    /// The loader step this batch is (`None` for records stacked by a batcher).
    pub fn step(&self) -> Option<u64> {
        self.step
    }

    /// The record indices, in batch order (the same for every stream).
    pub fn indices(&self) -> &[u64] {
        &self.indices
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True when the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// The device tensors are created on.
    pub fn device(&self) -> &Device {
        self.converter.device()
    }

    /// The converter the accessors use (e.g. for core's
    /// [`records`](ColumnConverter::records), one host data per record).
    pub fn converter(&self) -> &BurnConverter {
        &self.converter
    }

    /// Stream names, in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.columns.iter().map(|c| c.name.as_str())
    }

    fn host(&self, name: &str) -> Result<&HostColumn<B>> {
        self.columns
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| Error::MissingStream(name.to_owned()))
    }

    /// Stream `name`'s column as gathered (or stacked).
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`;
    /// [`Error::Stack`] when its records could not be stacked.
    pub fn column(&self, name: &str) -> Result<&Column<B>> {
        self.host(name)?.column()
    }

    /// Element type of stream `name`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`.
    pub fn dtype(&self, name: &str) -> Result<DType> {
        Ok(self.host(name)?.dtype)
    }

    /// Record contract of stream `name`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`.
    pub fn kind(&self, name: &str) -> Result<StoreKind> {
        Ok(self.host(name)?.kind())
    }

    /// A Dense stream as a `(B, *item_shape)` host view, no copy.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Core`]
    /// for a Ragged stream ([`ColumnKind`](loaderx_core::ErrorKind::ColumnKind))
    /// or when `T` is not its element type.
    pub fn dense<T: Element>(&self, name: &str) -> Result<ArrayViewD<'_, T>> {
        let column = self.column(name)?;
        column.dense_shape().map_err(|e| Error::stream(name, e))?;
        Ok(column.dense()?)
    }

    /// Any stream as one host view per record, no copy.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Core`] when
    /// `T` is not its element type.
    pub fn records<T: Element>(&self, name: &str) -> Result<Vec<ArrayViewD<'_, T>>> {
        Ok(self.column(name)?.record_views()?)
    }

    /// Host data of stream `name` (or the conversion's error) as a rank-`D`
    /// tensor of kind `K`; errors name the stream.
    fn upload<const D: usize, K: Basic + TensorKind>(
        &self,
        name: &str,
        dtype: DType,
        data: Result<TensorData>,
    ) -> Result<Tensor<D, K>> {
        let data = data.map_err(|e| e.in_stream(name))?;
        self.converter.tensor(name, dtype, data)
    }

    /// A Dense stream as a `(B, *item_shape)` tensor of kind `K` on the
    /// batch's device; `D` must be `1 + item rank`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`;
    /// [`Error::Stream`] around core's
    /// [`ColumnKind`](loaderx_core::ErrorKind::ColumnKind) for a Ragged
    /// stream, or its [`OutOfRange`](loaderx_core::ErrorKind::OutOfRange)
    /// for a value the kind cannot represent (a `u64` above `i64::MAX`);
    /// [`Error::Kind`] when the element type cannot be held losslessly by
    /// kind `K` (see the [dtype table](crate::burn_dtype)); [`Error::Rank`]
    /// when `D` is not the batch's rank.
    pub fn tensor<const D: usize, K: Basic + TensorKind>(
        &self,
        name: &str,
    ) -> Result<Tensor<D, K>> {
        let column = self.column(name)?;
        let data = self.converter.copy_dense(column);
        self.upload(name, column.dtype(), data)
    }

    /// [`tensor`](Self::tensor) as `Float`.
    ///
    /// # Errors
    ///
    /// As [`tensor`](Self::tensor).
    pub fn float<const D: usize>(&self, name: &str) -> Result<Tensor<D, Float>> {
        self.tensor::<D, Float>(name)
    }

    /// [`tensor`](Self::tensor) as `Int` (integer and bool streams; range-checked).
    ///
    /// # Errors
    ///
    /// As [`tensor`](Self::tensor).
    pub fn int<const D: usize>(&self, name: &str) -> Result<Tensor<D, Int>> {
        self.tensor::<D, Int>(name)
    }

    /// [`tensor`](Self::tensor) as `Bool` (bool streams only).
    ///
    /// # Errors
    ///
    /// As [`tensor`](Self::tensor).
    pub fn bool<const D: usize>(&self, name: &str) -> Result<Tensor<D, Bool>> {
        self.tensor::<D, Bool>(name)
    }

    /// Stream `name` (Ragged, or Dense) zero-padded to the largest length of
    /// every axis, as kind `K`, with each record's lengths and an in-record
    /// mask (core's [`ColumnConverter::padded`]). `D` must be `1 + record rank`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`;
    /// [`Error::Stream`] around core's
    /// [`ColumnKind`](loaderx_core::ErrorKind::ColumnKind) for a Dense
    /// stream; otherwise as [`tensor`](Self::tensor).
    pub fn padded<const D: usize, K: Basic + TensorKind>(
        &self,
        name: &str,
    ) -> Result<Padded<D, K>> {
        let column = self.column(name)?;
        let host = self
            .converter
            .padded(column, PadValue::ZERO)
            .map_err(|e| e.in_stream(name))?;
        Ok(Padded {
            values: self.upload(name, column.dtype(), Ok(host.values))?,
            lengths: self.upload(name, DType::I64, Ok(host.lengths))?,
            mask: self.upload(name, DType::Bool, Ok(host.mask))?,
        })
    }

    /// Ragged stream `name` packed, as Python loaderx 2.8.19's `RaggedBatch`
    /// and variable-length kernels take it (core's
    /// [`ColumnConverter::copy_packed`]): `values` 1-D of kind `K` (every
    /// record's elements end to end), `cu_seqlens` `Int` (records + 1
    /// offsets, in elements) and `shapes` `(B, ndim)` `Int`. A loader built
    /// with [`packed`](loaderx_core::DataLoaderBuilder::packed) gathers the
    /// values that way, so they are copied into burn once, as a Dense
    /// stream is; otherwise they are packed first.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`;
    /// [`Error::Stream`] around core's error for a Dense stream
    /// ([`ColumnKind`](loaderx_core::ErrorKind::ColumnKind)), more than
    /// `i32::MAX` elements or a dimension above `u32::MAX`; otherwise as
    /// [`tensor`](Self::tensor).
    pub fn packed<K: Basic + TensorKind>(&self, name: &str) -> Result<PackedRagged<K>> {
        let column = self.column(name)?;
        let host = self
            .converter
            .copy_packed(column)
            .map_err(|e| e.in_stream(name))?;
        Ok(PackedRagged {
            values: self.upload(name, column.dtype(), Ok(host.values))?,
            cu_seqlens: self.upload(name, DType::I32, Ok(host.cu_seqlens))?,
            shapes: self.upload(name, DType::U32, Ok(host.shapes))?,
        })
    }
}

impl<B: StagedBuffer> std::fmt::Debug for HostBatch<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBatch")
            .field("step", &self.step)
            .field("len", &self.indices.len())
            .field("streams", &self.names().collect::<Vec<_>>())
            .field("device", self.device())
            .finish()
    }
}

/// A packed Ragged stream as burn tensors (see [`HostBatch::packed`]):
/// `values` 1-D of kind `K`, `cu_seqlens` `Int` (records + 1 offsets, in
/// elements), `shapes` `(B, ndim)` `Int`.
pub type PackedRagged<K = Float> =
    loaderx_core::adapter::PackedRagged<Tensor<1, K>, Tensor<1, Int>, Tensor<2, Int>>;

/// A padded stream as burn tensors: `values` `(B, max_0, ..., max_{ndim-1})`
/// of kind `K`, zeros past each record's extent; `lengths` `(B, ndim)`, each
/// record's own shape; `mask` of `values`' shape, true inside a record and
/// false in padding.
pub type Padded<const D: usize, K = Float> =
    loaderx_core::adapter::Padded<Tensor<D, K>, Tensor<2, Int>, Tensor<D, Bool>>;

fn stack_column(records: &[Record], k: usize) -> HostColumn<VecBuffer> {
    let first = &records[0].fields[k];
    let fields = records
        .iter()
        .map(|r| match r.fields.get(k).filter(|f| f.name == first.name) {
            Some(f) if f.dtype() == first.dtype() && f.kind == first.kind => {
                Ok((f.shape(), f.bytes()))
            }
            Some(f) => Err(format!(
                "record {} holds {} {}, record {} {} {}",
                records[0].index,
                first.kind,
                first.dtype(),
                r.index,
                f.kind,
                f.dtype()
            )),
            None => Err(format!("record {} has no stream at position {k}", r.index)),
        })
        .collect::<Result<Vec<_>, String>>();
    HostColumn {
        name: first.name.to_string(),
        dtype: first.dtype(),
        column: fields.and_then(|fields| {
            Column::stack(first.dtype(), first.kind, fields).map_err(|e| e.to_string())
        }),
    }
}
