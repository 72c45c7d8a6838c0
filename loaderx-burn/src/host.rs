//! A batch in host memory — gathered by the loader, or stacked from dataset
//! records — and its conversion to burn tensors.

use std::ops::Range;

use burn::tensor::kind::{Basic, TensorKind};
use burn::tensor::{Bool, Device, Float, Int, Tensor};
use loaderx_core::host::{AlignedBuf, PadValue, Padded as HostPadded, pad_records};
use loaderx_core::loader::{Batch, Column, ColumnLayout};
use loaderx_core::ndarray::{ArrayViewD, IxDyn};
use loaderx_core::{DType, Element, StoreKind};

use crate::dataset::Record;
use crate::dtype::to_tensor;
use crate::error::{Error, Result};
use crate::tensors::TensorBatch;

/// Where a column's bytes live.
enum Storage {
    /// The loader's gather buffer (recycled when the batch is dropped).
    Staged(Column),
    /// Records stacked by a batcher.
    Owned(AlignedBuf),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Staged(c) => c.bytes(),
            Storage::Owned(b) => b.as_bytes(),
        }
    }
}

/// How a column's records lie in its bytes.
enum Layout {
    /// Records of one shape, contiguous.
    Dense { item_shape: Vec<usize> },
    /// One segment per record, each with its own shape.
    Ragged {
        ndim: usize,
        dims: Vec<usize>,
        ranges: Vec<Range<usize>>,
    },
    /// The records could not be stacked; why.
    Invalid(String),
}

struct HostColumn {
    name: String,
    dtype: DType,
    layout: Layout,
    storage: Storage,
}

impl HostColumn {
    fn kind(&self) -> StoreKind {
        match self.layout {
            Layout::Ragged { .. } => StoreKind::Ragged,
            _ => StoreKind::Dense,
        }
    }

    fn invalid(&self) -> Result<()> {
        match &self.layout {
            Layout::Invalid(detail) => Err(Error::Stack {
                stream: self.name.clone(),
                detail: detail.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Shape and bytes of record `i` (a row index into the column).
    fn record(&self, i: usize) -> (&[usize], &[u8]) {
        let bytes = self.storage.bytes();
        match &self.layout {
            Layout::Dense { item_shape } => {
                let rb = item_shape.iter().product::<usize>() * self.dtype.size();
                (item_shape, &bytes[i * rb..(i + 1) * rb])
            }
            Layout::Ragged {
                ndim, dims, ranges, ..
            } => (&dims[i * ndim..(i + 1) * ndim], &bytes[ranges[i].clone()]),
            Layout::Invalid(_) => (&[], &[]),
        }
    }

    /// A Dense column's rows `rows`: `(B, *item_shape)` and their bytes.
    fn dense_rows(&self, rows: &Range<usize>) -> Result<(Vec<usize>, &[u8])> {
        self.invalid()?;
        let Layout::Dense { item_shape } = &self.layout else {
            return Err(Error::Layout {
                stream: self.name.clone(),
                expected: StoreKind::Dense,
                found: StoreKind::Ragged,
            });
        };
        let rb = item_shape.iter().product::<usize>() * self.dtype.size();
        let mut shape = Vec::with_capacity(1 + item_shape.len());
        shape.push(rows.len());
        shape.extend_from_slice(item_shape);
        Ok((shape, &self.storage.bytes()[rows.start * rb..rows.end * rb]))
    }
}

/// One loader step, or records stacked by a batcher, in host memory, with the
/// device its tensors go to: what a mapping closure turns into the model's
/// batch type.
///
/// Columns keep the store's element type until a tensor is asked for; the
/// `tensor`, `float`, `int`, `bool` and `padded` methods create tensors on
/// [`device`](Self::device) by the rules of the [dtype table](crate::dtype).
/// One copy happens per tensor (from the gather buffer into burn's host
/// data), plus the element conversion burn does for the device's type.
pub struct HostBatch {
    step: Option<u64>,
    indices: Vec<u64>,
    rows: Range<usize>,
    columns: Vec<HostColumn>,
    device: Device,
}

impl HostBatch {
    /// A batch of the plain loaderx DataLoader (e.g. inside its
    /// `build_with` transform), for code that drives loaderx itself but
    /// wants this crate's tensor helpers.
    pub fn from_batch(batch: Batch, device: &Device) -> HostBatch {
        let rows = 0..batch.len();
        HostBatch::from_loader(batch, rows, device.clone())
    }

    /// Rows `rows` of a loader batch.
    pub(crate) fn from_loader(batch: Batch, rows: Range<usize>, device: Device) -> HostBatch {
        let step = Some(batch.step());
        let indices = batch.indices()[rows.clone()].to_vec();
        let columns = batch
            .into_columns()
            .into_iter()
            .map(|(name, column)| {
                let layout = match column.layout() {
                    ColumnLayout::Dense { shape } => Layout::Dense {
                        item_shape: shape.get(1..).unwrap_or_default().to_vec(),
                    },
                    ColumnLayout::Ragged(l) => {
                        let ndim = if l.is_empty() { 0 } else { l.shape(0).len() };
                        Layout::Ragged {
                            ndim,
                            dims: (0..l.len()).flat_map(|i| l.shape(i).to_vec()).collect(),
                            ranges: (0..l.len()).map(|i| l.byte_range(i)).collect(),
                        }
                    }
                };
                HostColumn {
                    name,
                    dtype: column.dtype(),
                    layout,
                    storage: Storage::Staged(column),
                }
            })
            .collect();
        HostBatch {
            step,
            indices,
            rows,
            columns,
            device,
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
            rows: 0..records.len(),
            columns,
            device,
        }
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
        self.rows.len()
    }

    /// True when the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
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
    pub fn dtype(&self, name: &str) -> Result<DType> {
        Ok(self.column(name)?.dtype)
    }

    /// Record contract of stream `name`.
    pub fn kind(&self, name: &str) -> Result<StoreKind> {
        Ok(self.column(name)?.kind())
    }

    /// A Dense stream as a `(B, *item_shape)` host view, no copy.
    pub fn dense<T: Element>(&self, name: &str) -> Result<ArrayViewD<'_, T>> {
        let column = self.column(name)?;
        let (shape, bytes) = column.dense_rows(&self.rows)?;
        let values = typed::<T>(column, bytes)?;
        ArrayViewD::from_shape(IxDyn(&shape), values).map_err(|e| Error::Invalid(e.to_string()))
    }

    /// Any stream as one host view per record, no copy.
    pub fn records<T: Element>(&self, name: &str) -> Result<Vec<ArrayViewD<'_, T>>> {
        let column = self.column(name)?;
        column.invalid()?;
        self.rows
            .clone()
            .map(|i| {
                let (shape, bytes) = column.record(i);
                ArrayViewD::from_shape(IxDyn(shape), typed::<T>(column, bytes)?)
                    .map_err(|e| Error::Invalid(e.to_string()))
            })
            .collect()
    }

    /// A Dense stream's `(B, *item_shape)` and bytes.
    pub(crate) fn dense_bytes(&self, name: &str) -> Result<(Vec<usize>, &[u8])> {
        self.column(name)?.dense_rows(&self.rows)
    }

    /// A Dense stream as a `(B, *item_shape)` tensor of kind `K` on the
    /// batch's device; `D` must be `1 + item rank`.
    pub fn tensor<const D: usize, K: Basic + TensorKind>(
        &self,
        name: &str,
    ) -> Result<Tensor<D, K>> {
        let column = self.column(name)?;
        let (shape, bytes) = column.dense_rows(&self.rows)?;
        to_tensor::<D, K>(name, column.dtype, bytes, &shape, &self.device)
    }

    /// [`tensor`](Self::tensor) as `Float`.
    pub fn float<const D: usize>(&self, name: &str) -> Result<Tensor<D, Float>> {
        self.tensor::<D, Float>(name)
    }

    /// [`tensor`](Self::tensor) as `Int` (integer and bool streams; range-checked).
    pub fn int<const D: usize>(&self, name: &str) -> Result<Tensor<D, Int>> {
        self.tensor::<D, Int>(name)
    }

    /// [`tensor`](Self::tensor) as `Bool` (bool streams only).
    pub fn bool<const D: usize>(&self, name: &str) -> Result<Tensor<D, Bool>> {
        self.tensor::<D, Bool>(name)
    }

    pub(crate) fn padded_host(&self, name: &str) -> Result<HostPadded> {
        let column = self.column(name)?;
        column.invalid()?;
        pad(column, &self.rows)
    }

    /// Stream `name` (Ragged, or Dense) zero-padded to the largest length of
    /// every axis, as kind `K`, with each record's lengths and an in-record
    /// mask. `D` must be `1 + record rank`.
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
            .field("len", &self.rows.len())
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
    let mut column = HostColumn {
        name: first.name.to_string(),
        dtype: first.dtype,
        layout: Layout::Invalid(String::new()),
        storage: Storage::Owned(AlignedBuf::default()),
    };
    let mut fields = Vec::with_capacity(records.len());
    for r in records {
        match r.fields.get(k).filter(|f| f.name == first.name) {
            Some(f) if f.dtype == first.dtype && f.kind == first.kind => fields.push(f),
            Some(f) => {
                column.layout = Layout::Invalid(format!(
                    "record {} holds {} {}, record {} {} {}",
                    records[0].index, first.kind, first.dtype, r.index, f.kind, f.dtype
                ));
                return column;
            }
            None => {
                column.layout =
                    Layout::Invalid(format!("record {} has no stream at position {k}", r.index));
                return column;
            }
        }
    }
    match first.kind {
        StoreKind::Dense => {
            if let Some(f) = fields.iter().find(|f| f.shape != first.shape) {
                column.layout = Layout::Invalid(format!(
                    "dense records of shapes {:?} and {:?}",
                    first.shape, f.shape
                ));
                return column;
            }
            let rb = first.bytes.as_bytes().len();
            let mut bytes = match rb.checked_mul(fields.len()).map(AlignedBuf::zeroed) {
                Some(Ok(bytes)) => bytes,
                Some(Err(e)) => {
                    column.layout = Layout::Invalid(e.to_string());
                    return column;
                }
                None => {
                    column.layout = Layout::Invalid("the batch is larger than memory".into());
                    return column;
                }
            };
            for (dst, f) in bytes
                .as_bytes_mut()
                .chunks_exact_mut(rb.max(1))
                .zip(&fields)
            {
                dst.copy_from_slice(f.bytes.as_bytes());
            }
            column.layout = Layout::Dense {
                item_shape: first.shape.clone(),
            };
            column.storage = Storage::Owned(bytes);
        }
        StoreKind::Ragged => {
            let ndim = first.shape.len();
            if let Some(f) = fields.iter().find(|f| f.shape.len() != ndim) {
                column.layout = Layout::Invalid(format!(
                    "ragged records of ranks {ndim} and {}",
                    f.shape.len()
                ));
                return column;
            }
            // Each record starts 8-byte aligned so typed views stay possible.
            let mut ranges = Vec::with_capacity(fields.len());
            let mut end = 0usize;
            for f in &fields {
                let start = end.next_multiple_of(8);
                end = start + f.bytes.as_bytes().len();
                ranges.push(start..end);
            }
            let mut bytes = match AlignedBuf::zeroed(end) {
                Ok(bytes) => bytes,
                Err(e) => {
                    column.layout = Layout::Invalid(e.to_string());
                    return column;
                }
            };
            for (range, f) in ranges.iter().zip(&fields) {
                bytes.as_bytes_mut()[range.clone()].copy_from_slice(f.bytes.as_bytes());
            }
            column.layout = Layout::Ragged {
                ndim,
                dims: fields.iter().flat_map(|f| f.shape.clone()).collect(),
                ranges,
            };
            column.storage = Storage::Owned(bytes);
        }
    }
    column
}

/// Pads rows `rows` of a column with zeros to the largest length of every
/// axis: core's one padding definition, over this column's records.
fn pad(column: &HostColumn, rows: &Range<usize>) -> Result<HostPadded> {
    let ndim = rows.clone().next().map_or(0, |i| column.record(i).0.len());
    Ok(pad_records(
        column.dtype,
        ndim,
        rows.clone().map(|i| column.record(i)),
        PadValue::ZERO,
    )?)
}
