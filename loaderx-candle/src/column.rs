//! Loader columns as candle tensors: Dense columns, and Ragged ones padded or
//! one tensor per record.

use candle_core::{Device, Tensor};
use loaderx_core::RaggedLayout;
use loaderx_core::StoreKind;
use loaderx_core::host::{HostArray, PadValue};
use loaderx_core::{Column, ColumnLayout};

use crate::error::{Error, Result};
use crate::host::{storage_from_buffer, storage_from_bytes, tensor_on};

fn kind_error(expected: StoreKind, found: StoreKind) -> Error {
    Error::Kind { expected, found }
}

/// A Dense column as a `(B, *item_shape)` tensor on `device`, copying its bytes.
///
/// # Errors
///
/// [`Error::Kind`] when the column follows the other record contract (Ragged);
/// [`Error::Core`] when widening the element type fails (a `u64` above `i64::MAX`,
/// a `bool` byte other than 0 or 1) or the type has no lossless mapping;
/// [`Error::Candle`] when candle refuses the tensor (its device, its memory).
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
///
/// # Errors
///
/// [`Error::Kind`] when the column follows the other record contract (Ragged);
/// [`Error::Core`] when widening the element type fails (a `u64` above `i64::MAX`,
/// a `bool` byte other than 0 or 1) or the type has no lossless mapping;
/// [`Error::Candle`] when candle refuses the tensor (its device, its memory).
pub fn into_dense_tensor(column: Column, device: &Device) -> Result<Tensor> {
    let shape = match column.layout() {
        ColumnLayout::Dense { shape } => shape.clone(),
        ColumnLayout::Ragged(_) => return Err(kind_error(StoreKind::Dense, StoreKind::Ragged)),
    };
    let (dtype, len) = (column.dtype(), column.bytes().len());
    #[cfg(feature = "cuda")]
    let buffer = match crate::cuda::upload_dense(dtype, column.into_buffer(), &shape, device) {
        Ok(tensor) => return tensor,
        Err(buffer) => buffer,
    };
    #[cfg(not(feature = "cuda"))]
    let buffer = column.into_buffer();
    tensor_on(storage_from_buffer(dtype, buffer, len)?, &shape, device)
}

fn ragged_layout(column: &Column) -> Result<&RaggedLayout> {
    match column.layout() {
        ColumnLayout::Ragged(layout) => Ok(layout),
        ColumnLayout::Dense { .. } => Err(kind_error(StoreKind::Ragged, StoreKind::Dense)),
    }
}

/// One tensor per record of a Ragged column, each with its own shape.
///
/// # Errors
///
/// [`Error::Kind`] when the column follows the other record contract (Dense);
/// [`Error::Core`] when widening the element type fails (a `u64` above `i64::MAX`,
/// a `bool` byte other than 0 or 1) or the type has no lossless mapping;
/// [`Error::Candle`] when candle refuses the tensor (its device, its memory).
pub fn ragged_tensors(column: &Column, device: &Device) -> Result<Vec<Tensor>> {
    ragged_layout(column)?;
    column
        .records()
        .map(|(shape, bytes)| tensor_on(storage_from_bytes(column.dtype(), bytes)?, shape, device))
        .collect()
}

/// A padded Ragged stream as candle tensors: `values` `(B, max_0, ..)` in
/// the [mapped type](crate::DTYPE_TABLE), `lengths` `(B, ndim)` `I64`, `mask` of
/// `values`' shape, `U8` (1 inside a record, 0 in padding).
pub type Padded = loaderx_core::host::Padded<Tensor>;

/// A host array as a tensor on `device` (widened where candle lacks the type).
///
/// # Errors
///
/// [`Error::Core`] when widening the element type fails (a `u64` above `i64::MAX`,
/// a `bool` byte other than 0 or 1) or the type has no lossless mapping;
/// [`Error::Candle`] when candle refuses the tensor (its device, its memory).
pub fn array_tensor(array: &HostArray, device: &Device) -> Result<Tensor> {
    tensor_on(
        storage_from_bytes(array.dtype(), array.bytes())?,
        array.shape(),
        device,
    )
}

/// A Ragged column padded with `pad` to the largest extent of every axis
/// (core's [`Column::padded`]), as tensors on `device`.
///
/// # Errors
///
/// [`Error::Core`] when `pad` is not of the column's element type or padding fails
/// (see core's `Column::padded`), or widening fails; [`Error::Candle`] when candle
/// refuses the tensor (its device, its memory).
pub fn ragged_padded_with(column: &Column, device: &Device, pad: PadValue) -> Result<Padded> {
    ragged_layout(column)?;
    column
        .padded(pad)?
        .try_map(|array| array_tensor(&array, device))
}

/// A Ragged column padded with zeros to the largest extent of every axis.
///
/// # Errors
///
/// As [`ragged_padded_with`].
pub fn ragged_padded(column: &Column, device: &Device) -> Result<Padded> {
    ragged_padded_with(column, device, PadValue::ZERO)
}
