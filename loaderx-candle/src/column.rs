//! Loader columns as candle tensors: Dense columns, and Ragged ones padded or
//! one tensor per record.

use candle_core::{CpuStorage, DType as CDType, Device, Tensor};
use loaderx_core::StoreKind;
use loaderx_core::loader::{Column, ColumnLayout};
use loaderx_core::ragged::RaggedLayout;

use crate::error::{Error, Result};
use crate::host::{storage_from_buffer, storage_from_bytes, tensor_on};

fn kind_error(expected: StoreKind, found: StoreKind) -> Error {
    Error::Kind { expected, found }
}

/// A Dense column as a `(B, *item_shape)` tensor on `device`, copying its bytes.
pub fn dense_tensor(column: &Column, device: &Device) -> Result<Tensor> {
    let ColumnLayout::Dense { shape } = column.layout() else {
        return Err(kind_error(StoreKind::Dense, column.kind()));
    };
    tensor_on(
        storage_from_bytes(column.dtype(), column.bytes())?,
        shape,
        device,
    )
}

/// A Dense column as a tensor, moving the gathered memory into the tensor
/// when it was staged by [`CandleStaging`](crate::CandleStaging) (no copy on CPU).
pub fn into_dense_tensor(column: Column, device: &Device) -> Result<Tensor> {
    let shape = match column.layout() {
        ColumnLayout::Dense { shape } => shape.clone(),
        ColumnLayout::Ragged(_) => return Err(kind_error(StoreKind::Dense, StoreKind::Ragged)),
    };
    let (dtype, len) = (column.dtype(), column.bytes().len());
    #[cfg(feature = "cuda")]
    if let Some(pinned) = column
        .buffer()
        .as_any()
        .downcast_ref::<crate::cuda::PinnedBuffer>()
    {
        if let Some(tensor) = crate::cuda::upload_dense(dtype, pinned, &shape, device) {
            return tensor;
        }
    }
    tensor_on(
        storage_from_buffer(dtype, column.into_buffer(), len)?,
        &shape,
        device,
    )
}

fn ragged_layout(column: &Column) -> Result<&RaggedLayout> {
    match column.layout() {
        ColumnLayout::Ragged(layout) => Ok(layout),
        ColumnLayout::Dense { .. } => Err(kind_error(StoreKind::Ragged, StoreKind::Dense)),
    }
}

/// One tensor per record of a Ragged column, each with its own shape.
pub fn ragged_tensors(column: &Column, device: &Device) -> Result<Vec<Tensor>> {
    let layout = ragged_layout(column)?;
    let bytes = column.bytes();
    (0..layout.len())
        .map(|i| {
            let storage = storage_from_bytes(column.dtype(), &bytes[layout.byte_range(i)])?;
            tensor_on(storage, layout.shape(i), device)
        })
        .collect()
}

/// A Ragged column padded with zeros to the largest length of every axis.
#[derive(Debug, Clone)]
pub struct Padded {
    /// `(B, max_0, ..., max_{ndim-1})`, zeros past each record's extent.
    pub values: Tensor,
    /// `(B, ndim)` `U32`: each record's own shape.
    pub lengths: Tensor,
}

impl Padded {
    /// For rank-1 records, a `(B, max_len)` `U8` mask: 1 inside a record, 0 in padding.
    pub fn mask(&self) -> Result<Tensor> {
        let (b, max) = self.values.dims2()?;
        let device = self.values.device();
        let positions = Tensor::arange(0u32, max as u32, device)?.reshape((1, max))?;
        let lengths = self.lengths.narrow(1, 0, 1)?;
        Ok(positions
            .broadcast_as((b, max))?
            .broadcast_lt(&lengths)?
            .to_dtype(CDType::U8)?)
    }
}

/// Pads a Ragged column with zeros to the largest length of every axis.
pub fn ragged_padded(column: &Column, device: &Device) -> Result<Padded> {
    let layout = ragged_layout(column)?;
    let padded = layout.pad(column.bytes(), column.dtype().size())?;
    let lengths = padded
        .lengths
        .iter()
        .map(|&d| u32::try_from(d).unwrap_or(u32::MAX))
        .collect();
    Ok(Padded {
        values: tensor_on(
            storage_from_bytes(column.dtype(), &padded.bytes)?,
            &padded.shape,
            device,
        )?,
        lengths: tensor_on(
            CpuStorage::U32(lengths),
            &[layout.len(), layout.ndim()],
            device,
        )?,
    })
}
