//! Loader columns as tch tensors.

use loaderx_core::loader::{Column, ColumnLayout};
use loaderx_core::ragged::RaggedLayout;
use loaderx_core::{DType, Element, StoreKind};
use tch::{Device, Kind, Tensor};

use crate::dtype::tch_kind;
use crate::error::{Error, Result};
use crate::staging::TensorBuffer;

fn kind_error(expected: StoreKind, found: StoreKind) -> Error {
    Error::Kind { expected, found }
}

fn check_u64(bytes: &[u8]) -> Result<()> {
    for c in bytes.chunks_exact(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        let v = u64::from_le_bytes(b);
        if v > i64::MAX as u64 {
            return Err(Error::OutOfRange {
                dtype: DType::U64,
                value: v.to_string(),
                target: Kind::Int64,
            });
        }
    }
    Ok(())
}

/// Checks that `bool` bytes are 0 or 1: any other byte in a `Kind::Bool`
/// tensor is undefined behaviour in libtorch when read back.
fn check_bool(bytes: &[u8]) -> Result<()> {
    match bytes.iter().find(|&&b| b > 1) {
        Some(&b) => Err(Error::OutOfRange {
            dtype: DType::Bool,
            value: b.to_string(),
            target: Kind::Bool,
        }),
        None => Ok(()),
    }
}

/// Checks the values of `dtype` that the tensor kind holds as the same bytes
/// but not every bit pattern of (`u64` above `i64::MAX`, `bool` bytes other
/// than 0 and 1).
fn check_values(dtype: DType, bytes: &[u8]) -> Result<()> {
    match dtype {
        DType::U64 => check_u64(bytes),
        DType::Bool => check_bool(bytes),
        _ => Ok(()),
    }
}

fn widened<S: Element, D: tch::kind::Element>(bytes: &[u8], f: impl Fn(S) -> D) -> Vec<D> {
    bytes
        .chunks_exact(size_of::<S>())
        .map(|c| {
            let mut one = [S::default()];
            let _ = S::fill_slice(&mut one, |b| {
                b.copy_from_slice(c);
                Ok::<(), ()>(())
            });
            f(one[0])
        })
        .collect()
}

/// A tensor of `shape` on `device`, copied from element bytes of `dtype`.
pub fn tensor_from_bytes(
    dtype: DType,
    bytes: &[u8],
    shape: &[usize],
    device: Device,
) -> Result<Tensor> {
    let size: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let cpu = match dtype {
        DType::U16 => Tensor::f_from_slice(&widened::<u16, i32>(bytes, i32::from))?,
        DType::U32 => Tensor::f_from_slice(&widened::<u32, i64>(bytes, i64::from))?,
        other => {
            check_values(other, bytes)?;
            Tensor::f_from_data_size(
                bytes,
                &[bytes.len() as i64 / other.size() as i64],
                tch_kind(other)?,
            )?
        }
    };
    let cpu = cpu.f_reshape(size.as_slice())?;
    Ok(if device == Device::Cpu {
        cpu
    } else {
        cpu.f_to_device(device)?
    })
}

/// A Dense column as a `(B, *item_shape)` tensor on `device`, copying its bytes.
pub fn dense_tensor(column: &Column, device: Device) -> Result<Tensor> {
    let ColumnLayout::Dense { shape } = column.layout() else {
        return Err(kind_error(StoreKind::Dense, column.kind()));
    };
    tensor_from_bytes(column.dtype(), column.bytes(), shape, device)
}

/// A Dense column as a tensor on `device`. When the column was staged by
/// [`TchStaging`](crate::TchStaging), the gathered tensor itself is handed
/// over: no copy on the CPU, a non-blocking copy from pinned memory to CUDA.
pub fn into_tensor(column: Column, device: Device) -> Result<Tensor> {
    let shape = match column.layout() {
        ColumnLayout::Dense { shape } => shape.clone(),
        ColumnLayout::Ragged(_) => return Err(kind_error(StoreKind::Dense, StoreKind::Ragged)),
    };
    let dtype = column.dtype();
    if column
        .buffer()
        .as_any()
        .downcast_ref::<TensorBuffer>()
        .is_none()
    {
        return tensor_from_bytes(dtype, column.bytes(), &shape, device);
    }
    check_values(dtype, column.bytes())?;
    let tensor = match column.into_buffer().into_any().downcast::<TensorBuffer>() {
        Ok(buffer) => buffer.into_tensor(),
        Err(_) => return Err(Error::MissingStream("staged tensor".into())),
    };
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
pub fn ragged_tensors(column: &Column, device: Device) -> Result<Vec<Tensor>> {
    let layout = ragged_layout(column)?;
    (0..layout.len())
        .map(|i| {
            tensor_from_bytes(
                column.dtype(),
                &column.bytes()[layout.byte_range(i)],
                layout.shape(i),
                device,
            )
        })
        .collect()
}

/// A Ragged column padded with zeros to the largest length of every axis.
#[derive(Debug)]
pub struct Padded {
    /// `(B, max_0, ..., max_{ndim-1})`, zeros past each record's extent.
    pub values: Tensor,
    /// `(B, ndim)` `Int64`: each record's own shape.
    pub lengths: Tensor,
}

impl Padded {
    /// For rank-1 records, a `(B, max_len)` `Bool` mask: true inside a record.
    pub fn mask(&self) -> Result<Tensor> {
        let size = self.values.size();
        let max = size.get(1).copied().unwrap_or(0);
        let positions =
            Tensor::f_arange(max, (Kind::Int64, self.values.device()))?.f_unsqueeze(0)?;
        let lengths = self.lengths.f_narrow(1, 0, 1)?;
        Ok(positions.f_lt_tensor(&lengths)?)
    }
}

/// Pads a Ragged column with zeros to the largest length of every axis.
pub fn ragged_padded(column: &Column, device: Device) -> Result<Padded> {
    let layout = ragged_layout(column)?;
    let padded = layout.pad(column.bytes(), column.dtype().size())?;
    let lengths: Vec<i64> = padded.lengths.iter().map(|&d| d as i64).collect();
    let lengths =
        Tensor::f_from_slice(&lengths)?.f_reshape([layout.len() as i64, layout.ndim() as i64])?;
    Ok(Padded {
        values: tensor_from_bytes(column.dtype(), &padded.bytes, &padded.shape, device)?,
        lengths: if device == Device::Cpu {
            lengths
        } else {
            lengths.f_to_device(device)?
        },
    })
}
