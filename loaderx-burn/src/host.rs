//! A batch in host memory — gathered by the loader, or stacked from dataset
//! records — and its conversion to burn tensors.

use std::sync::Arc;

use burn::tensor::kind::{Basic, TensorKind};
use burn::tensor::{Bool, Device, Float, Int, Tensor};
use loaderx_core::adapter::{PadValue, Padded as HostPadded};
use loaderx_core::ndarray::ArrayViewD;
use loaderx_core::{Batch, Column};
use loaderx_core::{DType, Element, StoreKind};

use crate::dataset::{Record, split_records};
use crate::dtype::to_tensor;
use crate::error::{Error, Result};
use crate::tensors::TensorBatch;

struct HostColumn {
    name: String,
    dtype: DType,
    /// The loader's gather buffer (recycled when the batch is dropped), the
    /// records a batcher stacked, or why they could not be stacked.
    column: Result<Column, String>,
}

impl HostColumn {
    /// The column, or the stacking error.
    fn column(&self) -> Result<&Column> {
        self.column.as_ref().map_err(|detail| Error::Stack {
            stream: self.name.clone(),
            detail: detail.clone(),
        })
    }

    fn kind(&self) -> StoreKind {
        self.column.as_ref().map_or(StoreKind::Dense, Column::kind)
    }

    /// A Dense column's `(B, *item_shape)` and bytes.
    fn dense(&self) -> Result<(&[usize], &[u8])> {
        let column = self.column()?;
        let shape = column.shape().ok_or_else(|| Error::Layout {
            stream: self.name.clone(),
            expected: StoreKind::Dense,
            found: StoreKind::Ragged,
        })?;
        Ok((shape, column.bytes()))
    }
}

/// One loader step, or records stacked by a batcher, in host memory, with the
/// device its tensors go to: what a mapping closure turns into the model's
/// batch type.
///
/// Columns keep the store's element type until a tensor is asked for; the
/// `tensor`, `float`, `int`, `bool` and `padded` methods create tensors on
/// [`device`](Self::device) by the rules of the [dtype table](crate::burn_dtype).
/// One copy happens per tensor (from the gather buffer into burn's host
/// data), plus the element conversion burn does for the device's type.
pub struct HostBatch {
    step: Option<u64>,
    indices: Vec<u64>,
    columns: Vec<HostColumn>,
    device: Device,
}

impl HostBatch {
    /// A batch of the plain loaderx DataLoader (e.g. inside its
    /// `build_with` transform), for code that drives loaderx itself but
    /// wants this crate's tensor helpers.
    pub fn from_batch(batch: Batch, device: &Device) -> HostBatch {
        let step = Some(batch.step());
        let indices = batch.indices().to_vec();
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
            device: device.clone(),
        }
    }

    /// Stacks dataset records (streams in the first record's order). Records
    /// that disagree make that column fail on access ([`Error::Stack`]).
    pub(crate) fn from_records(records: &[Record], device: Device) -> HostBatch {
        let indices = records.iter().map(Record::index).collect();
        let columns = match records.first() {
            None => Vec::new(),
            Some(first) => (0..first.fields.len())
                .map(|k| stack_column(records, k))
                .collect(),
        };
        HostBatch {
            step: None,
            indices,
            columns,
            device,
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
        &self.device
    }

    /// Stream names, in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.columns.iter().map(|c| c.name.as_str())
    }

    fn column(&self, name: &str) -> Result<&HostColumn> {
        self.columns
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| Error::MissingStream(name.to_owned()))
    }

    /// Element type of stream `name`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`.
    pub fn dtype(&self, name: &str) -> Result<DType> {
        Ok(self.column(name)?.dtype)
    }

    /// Record contract of stream `name`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`.
    pub fn kind(&self, name: &str) -> Result<StoreKind> {
        Ok(self.column(name)?.kind())
    }

    /// A Dense stream as a `(B, *item_shape)` host view, no copy.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Layout`] when
    /// the stream follows the other record contract; [`Error::Core`] when `T` is not
    /// its element type.
    pub fn dense<T: Element>(&self, name: &str) -> Result<ArrayViewD<'_, T>> {
        let column = self.column(name)?;
        column.dense()?;
        Ok(column.column()?.dense()?)
    }

    /// Any stream as one host view per record, no copy.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Core`] when
    /// `T` is not its element type.
    pub fn records<T: Element>(&self, name: &str) -> Result<Vec<ArrayViewD<'_, T>>> {
        Ok(self.column(name)?.column()?.record_views()?)
    }

    /// A Dense stream's `(B, *item_shape)` and bytes.
    pub(crate) fn dense_bytes(&self, name: &str) -> Result<(&[usize], &[u8])> {
        self.column(name)?.dense()
    }

    /// A Dense stream as a `(B, *item_shape)` tensor of kind `K` on the
    /// batch's device; `D` must be `1 + item rank`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Layout`] when
    /// the stream follows the other record contract; [`Error::Kind`] when the element
    /// type cannot be held losslessly by kind `K` (see the [dtype
    /// table](crate::burn_dtype)); [`Error::OutOfRange`] for a value the kind cannot
    /// represent (a `u64` above `i64::MAX`); [`Error::Rank`] when `D` is not the
    /// batch's rank.
    pub fn tensor<const D: usize, K: Basic + TensorKind>(
        &self,
        name: &str,
    ) -> Result<Tensor<D, K>> {
        let column = self.column(name)?;
        let (shape, bytes) = column.dense()?;
        to_tensor::<D, K>(name, column.dtype, bytes, shape, &self.device)
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

    pub(crate) fn padded_host(&self, name: &str) -> Result<HostPadded> {
        Ok(self.column(name)?.column()?.padded(PadValue::ZERO)?)
    }

    /// Stream `name` (Ragged, or Dense) zero-padded to the largest length of
    /// every axis, as kind `K`, with each record's lengths and an in-record
    /// mask. `D` must be `1 + record rank`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Kind`] when
    /// the element type cannot be held losslessly by kind `K` (see the [dtype
    /// table](crate::burn_dtype)); [`Error::OutOfRange`] for a value the kind cannot
    /// represent (a `u64` above `i64::MAX`); [`Error::Rank`] when `D` is not the
    /// batch's rank.
    pub fn padded<const D: usize, K: Basic + TensorKind>(
        &self,
        name: &str,
    ) -> Result<Padded<D, K>> {
        let host = self.padded_host(name)?;
        let (v, l, m) = (&host.values, &host.lengths, &host.mask);
        let device = &self.device;
        Ok(Padded {
            values: to_tensor::<D, K>(name, v.dtype(), v.bytes(), v.shape(), device)?,
            lengths: to_tensor::<2, Int>(name, l.dtype(), l.bytes(), l.shape(), device)?,
            mask: to_tensor::<D, Bool>(name, m.dtype(), m.bytes(), m.shape(), device)?,
        })
    }

    /// Ragged stream `name` packed, as Python loaderx 2.8.19's `RaggedBatch`
    /// and variable-length kernels take it: `values` 1-D of kind `K` (every
    /// record's elements end to end), `cu_seqlens` `Int` (records + 1
    /// offsets, in elements) and `shapes` `(B, ndim)` `Int`. A loader built
    /// with [`packed`](loaderx_core::DataLoaderBuilder::packed) gathers the
    /// values that way, so they are copied into burn once, as a Dense
    /// stream is; otherwise they are packed first.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`;
    /// [`Error::Core`] for a Dense stream
    /// ([`ColumnKind`](loaderx_core::ErrorKind::ColumnKind)), more than
    /// `i32::MAX` elements or a dimension above `u32::MAX`; [`Error::Kind`]
    /// and [`Error::OutOfRange`] as for [`tensor`](Self::tensor).
    pub fn packed<K: Basic + TensorKind>(&self, name: &str) -> Result<PackedRagged<K>> {
        let column = self.column(name)?.column()?;
        let layout = column.ragged_layout()?;
        let (dtype, device) = (column.dtype(), &self.device);
        let cu = layout.cu_seqlens_array(dtype)?;
        let shapes = layout.shapes_array()?;
        let values = column.packed_values()?;
        let values =
            to_tensor::<1, K>(name, dtype, &values, &[values.len() / dtype.size()], device)?;
        Ok(PackedRagged {
            values,
            cu_seqlens: to_tensor::<1, Int>(name, cu.dtype(), cu.bytes(), cu.shape(), device)?,
            shapes: to_tensor::<2, Int>(
                name,
                shapes.dtype(),
                shapes.bytes(),
                shapes.shape(),
                device,
            )?,
        })
    }

    /// Every stream as tensors of its natural kind (Dense streams as
    /// `(B, *item_shape)`, Ragged ones padded). A stream that fails to convert
    /// keeps its error, returned when the stream is accessed.
    pub fn to_tensors(&self) -> TensorBatch {
        TensorBatch::from_host(self)
    }
}

impl std::fmt::Debug for HostBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBatch")
            .field("step", &self.step)
            .field("len", &self.indices.len())
            .field("streams", &self.names().collect::<Vec<_>>())
            .field("device", &self.device)
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

fn stack_column(records: &[Record], k: usize) -> HostColumn {
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
