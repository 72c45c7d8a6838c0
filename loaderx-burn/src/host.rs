//! A batch in host memory — gathered by the loader, or stacked from dataset
//! records — and its conversion to burn tensors.

use std::sync::Arc;

use burn::tensor::kind::{Basic, TensorKind};
use burn::tensor::{Bool, Device, Float, Int, Tensor};
use loaderx_core::RaggedLayout;
use loaderx_core::host::{AlignedBuf, PadValue, Padded as HostPadded, pad_records};
use loaderx_core::ndarray::{ArrayViewD, IxDyn};
use loaderx_core::{Batch, Column, ColumnLayout};
use loaderx_core::{DType, Element, StoreKind};

use crate::dataset::{Field, Record};
use crate::dtype::to_tensor;
use crate::error::{Error, Result};
use crate::tensors::TensorBatch;

/// Where a column's bytes live, and how its records lie in them.
enum Storage {
    /// The loader's gather buffer (recycled when the batch is dropped).
    Staged(Column),
    /// Records stacked by a batcher.
    Owned {
        layout: ColumnLayout,
        bytes: AlignedBuf,
    },
    /// The records could not be stacked; why.
    Invalid(String),
}

struct HostColumn {
    name: String,
    dtype: DType,
    storage: Storage,
}

impl HostColumn {
    /// The layout and bytes, or the stacking error.
    fn parts(&self) -> Result<(&ColumnLayout, &[u8])> {
        match &self.storage {
            Storage::Staged(c) => Ok((c.layout(), c.bytes())),
            Storage::Owned { layout, bytes } => Ok((layout, bytes.as_bytes())),
            Storage::Invalid(detail) => Err(Error::Stack {
                stream: self.name.clone(),
                detail: detail.clone(),
            }),
        }
    }

    fn kind(&self) -> StoreKind {
        match self.parts() {
            Ok((ColumnLayout::Ragged(_), _)) => StoreKind::Ragged,
            _ => StoreKind::Dense,
        }
    }

    /// Every record's `(shape, bytes)`, in batch order.
    fn records(&self) -> Result<Vec<(&[usize], &[u8])>> {
        Ok(match self.parts()? {
            (ColumnLayout::Dense { shape }, bytes) => {
                let item = shape.get(1..).unwrap_or_default();
                let rb = item.iter().product::<usize>() * self.dtype.size();
                let n = shape.first().copied().unwrap_or(0);
                (0..n)
                    .map(|i| (item, &bytes[i * rb..(i + 1) * rb]))
                    .collect()
            }
            (ColumnLayout::Ragged(l), bytes) => l.records(bytes).collect(),
        })
    }

    /// A Dense column's `(B, *item_shape)` and bytes.
    fn dense(&self) -> Result<(&[usize], &[u8])> {
        match self.parts()? {
            (ColumnLayout::Dense { shape }, bytes) => Ok((shape, bytes)),
            (ColumnLayout::Ragged(_), _) => Err(Error::Layout {
                stream: self.name.clone(),
                expected: StoreKind::Dense,
                found: StoreKind::Ragged,
            }),
        }
    }

    /// The column padded with zeros to the largest extent of every axis:
    /// core's one padding definition.
    fn padded(&self) -> Result<HostPadded> {
        let ndim = match self.parts()?.0 {
            ColumnLayout::Dense { shape } => shape.len().saturating_sub(1),
            ColumnLayout::Ragged(l) => l.ndim(),
        };
        Ok(pad_records(
            self.dtype,
            ndim,
            self.records()?,
            PadValue::ZERO,
        )?)
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
                storage: Storage::Staged(column),
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
    /// [`Error::Core`] when a buffer cannot be allocated.
    pub fn to_records(&self) -> Result<Vec<Record>> {
        let mut records: Vec<Record> = self
            .indices
            .iter()
            .map(|&index| Record {
                index,
                fields: Vec::with_capacity(self.columns.len()),
            })
            .collect();
        for column in &self.columns {
            let name: Arc<str> = Arc::from(column.name.as_str());
            let kind = column.kind();
            for (record, (shape, bytes)) in records.iter_mut().zip(column.records()?) {
                record.fields.push(Field {
                    name: Arc::clone(&name),
                    dtype: column.dtype,
                    kind,
                    shape: shape.to_vec(),
                    bytes: AlignedBuf::from_bytes(bytes)?,
                });
            }
        }
        Ok(records)
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
        let (shape, bytes) = column.dense()?;
        let values = typed::<T>(column, bytes)?;
        ArrayViewD::from_shape(IxDyn(shape), values).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// Any stream as one host view per record, no copy.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Core`] when
    /// `T` is not its element type.
    pub fn records<T: Element>(&self, name: &str) -> Result<Vec<ArrayViewD<'_, T>>> {
        let column = self.column(name)?;
        column
            .records()?
            .into_iter()
            .map(|(shape, bytes)| {
                ArrayViewD::from_shape(IxDyn(shape), typed::<T>(column, bytes)?)
                    .map_err(|e| Error::Invalid(e.to_string()))
            })
            .collect()
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
        self.column(name)?.padded()
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

fn typed<'a, T: Element>(column: &HostColumn, bytes: &'a [u8]) -> Result<&'a [T]> {
    if column.dtype != T::DTYPE {
        return Err(Error::Invalid(format!(
            "stream {:?} holds {}, asked for {}",
            column.name,
            column.dtype,
            T::DTYPE
        )));
    }
    T::try_from_bytes(bytes).ok_or_else(|| {
        Error::Invalid(format!(
            "stream {:?}: bytes are misaligned or not valid {} values",
            column.name,
            T::DTYPE
        ))
    })
}

/// A padded stream as burn tensors.
#[derive(Debug, Clone)]
pub struct Padded<const D: usize, K: Basic = Float> {
    /// `(B, max_0, ..., max_{ndim-1})`, zeros past each record's extent.
    pub values: Tensor<D, K>,
    /// `(B, ndim)`: each record's own shape.
    pub lengths: Tensor<2, Int>,
    /// Same shape as `values`: true inside a record, false in padding.
    pub mask: Tensor<D, Bool>,
}

fn stack_column(records: &[Record], k: usize) -> HostColumn {
    let first = &records[0].fields[k];
    HostColumn {
        name: first.name.to_string(),
        dtype: first.dtype,
        storage: stack_fields(records, k).unwrap_or_else(Storage::Invalid),
    }
}

/// Field `k` of every record in one aligned buffer with its layout: Dense
/// records contiguous, Ragged ones each starting 8-byte aligned.
fn stack_fields(records: &[Record], k: usize) -> Result<Storage, String> {
    let first = &records[0].fields[k];
    let mut fields = Vec::with_capacity(records.len());
    for r in records {
        match r.fields.get(k).filter(|f| f.name == first.name) {
            Some(f) if f.dtype == first.dtype && f.kind == first.kind => fields.push(f),
            Some(f) => {
                return Err(format!(
                    "record {} holds {} {}, record {} {} {}",
                    records[0].index, first.kind, first.dtype, r.index, f.kind, f.dtype
                ));
            }
            None => return Err(format!("record {} has no stream at position {k}", r.index)),
        }
    }
    let mut ranges = Vec::with_capacity(fields.len());
    let mut end = 0usize;
    for f in &fields {
        let start = match first.kind {
            StoreKind::Dense => end,
            StoreKind::Ragged => end.next_multiple_of(8),
        };
        end = start
            .checked_add(f.bytes.len())
            .ok_or("the batch is larger than memory")?;
        ranges.push(start..end);
    }
    let mut bytes = AlignedBuf::zeroed(end).map_err(|e| e.to_string())?;
    for (range, f) in ranges.iter().zip(&fields) {
        bytes.as_bytes_mut()[range.clone()].copy_from_slice(f.bytes.as_bytes());
    }
    let layout = match first.kind {
        StoreKind::Dense => {
            if let Some(f) = fields.iter().find(|f| f.shape != first.shape) {
                return Err(format!(
                    "dense records of shapes {:?} and {:?}",
                    first.shape, f.shape
                ));
            }
            let mut shape = Vec::with_capacity(1 + first.shape.len());
            shape.push(fields.len());
            shape.extend_from_slice(&first.shape);
            ColumnLayout::Dense { shape }
        }
        StoreKind::Ragged => {
            let ndim = first.shape.len();
            if let Some(f) = fields.iter().find(|f| f.shape.len() != ndim) {
                return Err(format!(
                    "ragged records of ranks {ndim} and {}",
                    f.shape.len()
                ));
            }
            let dims = fields.iter().flat_map(|f| f.shape.clone()).collect();
            let layout = RaggedLayout::try_new(ndim, dims, &ranges, first.dtype.size(), end)
                .map_err(|e| e.to_string())?;
            ColumnLayout::Ragged(layout)
        }
    };
    Ok(Storage::Owned { layout, bytes })
}
