//! Loader columns as tch tensors.

use loaderx_core::RaggedLayout;
use loaderx_core::host::{HostArray, PadValue, check_values};
use loaderx_core::{Column, ColumnLayout, StagedBuffer, downcast_staged};
use loaderx_core::{DType, StoreKind};
use tch::{Device, Tensor};

use crate::dtype::{DTYPE_TABLE, tch_kind};
use crate::error::{Error, Result};
use crate::staging::TensorBuffer;

fn kind_error(expected: StoreKind, found: StoreKind) -> Error {
    Error::Kind { expected, found }
}

/// A tensor of `shape` on `device`, copied from element bytes of `dtype`
/// (any alignment), widened by core's table where libtorch lacks the type.
///
/// # Errors
///
/// [`Error::Core`] for a value that does not fit its kind (a `u64` above
/// `i64::MAX`, a `bool` byte other than 0 and 1); [`Error::Tch`] when
/// libtorch fails.
pub fn tensor_from_bytes(
    dtype: DType,
    bytes: &[u8],
    shape: &[usize],
    device: Device,
) -> Result<Tensor> {
    let size: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let wide = DTYPE_TABLE.widen(dtype, bytes)?;
    let n = (wide.as_bytes().len() / wide.dtype().size().max(1)) as i64;
    let cpu = Tensor::f_from_data_size(wide.as_bytes(), &[n], tch_kind(wide.dtype())?)?
        .f_reshape(size.as_slice())?;
    Ok(if device == Device::Cpu {
        cpu
    } else {
        cpu.f_to_device(device)?
    })
}

/// A Dense column as a `(B, *item_shape)` tensor on `device`, copying its bytes.
///
/// # Errors
///
/// [`Error::Kind`] when the column follows the other record contract (Ragged);
/// [`Error::Core`] when widening the element type fails (a `u64` above `i64::MAX`,
/// a `bool` byte other than 0 or 1) or the type has no lossless mapping;
/// [`Error::Tch`] when tch refuses the tensor (its device, its memory).
pub fn dense_tensor(column: &Column, device: Device) -> Result<Tensor> {
    let ColumnLayout::Dense { shape } = column.layout() else {
        return Err(kind_error(StoreKind::Dense, column.kind()));
    };
    tensor_from_bytes(column.dtype(), column.bytes(), shape, device)
}

/// A Dense column as a tensor on `device`. When the column was staged by
/// [`TchStaging`](crate::TchStaging), the gathered tensor itself is handed
/// over: no copy on the CPU, a non-blocking copy from pinned memory to CUDA.
///
/// # Errors
///
/// [`Error::Kind`] when the column follows the other record contract (Ragged);
/// [`Error::Core`] when widening the element type fails (a `u64` above `i64::MAX`,
/// a `bool` byte other than 0 or 1) or the type has no lossless mapping;
/// [`Error::Tch`] when tch refuses the tensor (its device, its memory).
pub fn into_tensor(column: Column, device: Device) -> Result<Tensor> {
    let shape = match column.layout() {
        ColumnLayout::Dense { shape } => shape.clone(),
        ColumnLayout::Ragged(_) => return Err(kind_error(StoreKind::Dense, StoreKind::Ragged)),
    };
    let (dtype, len) = (column.dtype(), column.bytes().len());
    let buffer = match downcast_staged::<TensorBuffer>(column.into_buffer())? {
        Ok(buffer) => buffer,
        Err(other) => return tensor_from_bytes(dtype, &other.as_bytes()[..len], &shape, device),
    };
    // Range-checks the values a kind holds as the same bytes but not every
    // bit pattern of (`u64` above `i64::MAX`, `bool` bytes above 1).
    check_values(dtype, &buffer.as_bytes()[..len], DTYPE_TABLE.target(dtype)?)?;
    let tensor = buffer.into_tensor();
    Ok(if device == Device::Cpu {
        tensor
    } else {
        let kind = tensor.kind();
        tensor.f_to_device_(device, kind, true, false)?
    })
}

fn ragged_layout(column: &Column) -> Result<&RaggedLayout> {
    match column.layout() {
        ColumnLayout::Ragged(layout) => Ok(layout),
        ColumnLayout::Dense { .. } => Err(kind_error(StoreKind::Ragged, StoreKind::Dense)),
    }
}

/// One tensor per record of a Ragged column.
///
/// # Errors
///
/// [`Error::Kind`] when the column follows the other record contract (Dense);
/// [`Error::Core`] when widening the element type fails (a `u64` above `i64::MAX`,
/// a `bool` byte other than 0 or 1) or the type has no lossless mapping;
/// [`Error::Tch`] when tch refuses the tensor (its device, its memory).
pub fn ragged_tensors(column: &Column, device: Device) -> Result<Vec<Tensor>> {
    ragged_layout(column)?;
    column
        .records()
        .map(|(shape, bytes)| tensor_from_bytes(column.dtype(), bytes, shape, device))
        .collect()
}

/// A padded Ragged stream as tch tensors: `values` `(B, max_0, ..)` of the
/// [mapped kind](crate::DTYPE_TABLE), `lengths` `(B, ndim)` `Int64`, `mask` of
/// `values`' shape, `Bool` (true inside a record).
pub type Padded = loaderx_core::host::Padded<Tensor>;

/// A host array as a tensor on `device` (widened where libtorch lacks the type).
///
/// # Errors
///
/// [`Error::Core`] when widening the element type fails (a `u64` above `i64::MAX`,
/// a `bool` byte other than 0 or 1) or the type has no lossless mapping;
/// [`Error::Tch`] when tch refuses the tensor (its device, its memory).
pub fn array_tensor(array: &HostArray, device: Device) -> Result<Tensor> {
    tensor_from_bytes(array.dtype(), array.bytes(), array.shape(), device)
}

/// A Ragged column padded with `pad` to the largest extent of every axis
/// (core's [`Column::padded`]), as tensors on `device`.
///
/// # Errors
///
/// [`Error::Core`] when `pad` is not of the column's element type or padding fails
/// (see core's `Column::padded`), or widening fails; [`Error::Tch`] when tch
/// refuses the tensor (its device, its memory).
pub fn ragged_padded_with(column: &Column, device: Device, pad: PadValue) -> Result<Padded> {
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
pub fn ragged_padded(column: &Column, device: Device) -> Result<Padded> {
    ragged_padded_with(column, device, PadValue::ZERO)
}
