//! Host memory a batch is gathered into, and its conversion to tensors.

use std::any::Any;

use candle_core::op::BackpropOp;
use candle_core::{CpuStorage, Device, Storage, Tensor};
use half::f16;
use loaderx_core::{DType, StoreKind};
use loaderx_core::{StageRequest, StagedBuffer, Staging, downcast_staged};

use crate::dtype::{DTYPE_TABLE, candle_dtype};
use crate::error::Result;

/// A typed host vector holding one stream's batch in the store's own type.
#[derive(Debug)]
pub(crate) enum HostVec {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

macro_rules! each_vec {
    ($v:expr, $x:ident => $body:expr) => {
        match $v {
            HostVec::U8($x) => $body,
            HostVec::I8($x) => $body,
            HostVec::U16($x) => $body,
            HostVec::I16($x) => $body,
            HostVec::U32($x) => $body,
            HostVec::I32($x) => $body,
            HostVec::U64($x) => $body,
            HostVec::I64($x) => $body,
            HostVec::F16($x) => $body,
            HostVec::F32($x) => $body,
            HostVec::F64($x) => $body,
        }
    };
}

impl HostVec {
    /// Zeroed storage for `bytes` bytes of `dtype` (ragged batches: `u64` words).
    fn new(dtype: DType, kind: StoreKind, bytes: usize) -> HostVec {
        if kind == StoreKind::Ragged {
            return HostVec::U64(vec![0; bytes.div_ceil(8)]);
        }
        let n = bytes / dtype.size().max(1);
        match dtype {
            DType::I8 => HostVec::I8(vec![0; n]),
            DType::U16 => HostVec::U16(vec![0; n]),
            DType::I16 => HostVec::I16(vec![0; n]),
            DType::U32 => HostVec::U32(vec![0; n]),
            DType::I32 => HostVec::I32(vec![0; n]),
            DType::U64 => HostVec::U64(vec![0; n]),
            DType::I64 => HostVec::I64(vec![0; n]),
            DType::F16 => HostVec::F16(vec![f16::ZERO; n]),
            DType::F32 => HostVec::F32(vec![0.0; n]),
            DType::F64 => HostVec::F64(vec![0.0; n]),
            _ => HostVec::U8(vec![0; bytes]),
        }
    }

    fn bytes(&self) -> &[u8] {
        each_vec!(self, v => bytemuck::cast_slice(v))
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        each_vec!(self, v => bytemuck::cast_slice_mut(v))
    }
}

/// A [`StagedBuffer`] of host memory that becomes a tensor's storage.
#[derive(Debug)]
pub struct HostBuffer {
    vec: HostVec,
    len: usize,
}

impl StagedBuffer for HostBuffer {
    fn as_bytes(&self) -> &[u8] {
        &self.vec.bytes()[..self.len]
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.vec.bytes_mut()[..len]
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// The loader staging of this crate. On the CPU, each Dense batch is
/// gathered straight into the typed vector that becomes the tensor's
/// storage, so a batch is never copied after the gather. With the `cuda`
/// feature and a CUDA device, Dense batches are gathered into pooled pinned
/// host memory (core's `PinnedPool`, one per device, best fit per stream)
/// and uploaded asynchronously on a transfer stream (see
/// `pinned_stats` (feature `cuda`)).
#[derive(Debug, Clone, Default)]
pub struct CandleStaging {
    #[cfg(feature = "cuda")]
    pinned: Option<std::sync::Arc<crate::cuda::Uploader>>,
}

impl CandleStaging {
    /// The staging for batches bound to `device`.
    pub fn for_device(device: &Device) -> CandleStaging {
        #[cfg(feature = "cuda")]
        {
            CandleStaging {
                // Without a usable device the batches stay on the host and
                // the upload reports the device's error.
                pinned: device
                    .is_cuda()
                    .then(|| crate::cuda::Uploader::for_device(device).ok())
                    .flatten(),
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = device;
            CandleStaging::default()
        }
    }
}

impl Staging for CandleStaging {
    fn stage(&self, r: &StageRequest<'_>) -> loaderx_core::Result<Box<dyn StagedBuffer>> {
        #[cfg(feature = "cuda")]
        if let (Some(uploader), StoreKind::Dense) = (&self.pinned, r.kind) {
            if crate::cuda::uploads_natively(r.dtype) {
                return Ok(Box::new(uploader.pool.take(r.stream_index, r.bytes)?));
            }
        }
        Ok(Box::new(HostBuffer {
            vec: HostVec::new(r.dtype, r.kind, r.bytes),
            len: r.bytes,
        }))
    }
}

/// Owned CPU storage in candle's type for `vec` (no copy where the types
/// agree; otherwise through core's widening table).
pub(crate) fn storage_from_host(dtype: DType, vec: HostVec) -> Result<CpuStorage> {
    Ok(match vec {
        HostVec::U8(v) if dtype == DType::U8 => CpuStorage::U8(v),
        HostVec::I16(v) => CpuStorage::I16(v),
        HostVec::U32(v) => CpuStorage::U32(v),
        HostVec::I32(v) => CpuStorage::I32(v),
        HostVec::U64(v) if dtype == DType::U64 => {
            // Range-checks every value; the bytes stay as they are.
            DTYPE_TABLE.check(dtype, bytemuck::cast_slice(&v))?;
            CpuStorage::I64(bytemuck::allocation::cast_vec(v))
        }
        HostVec::I64(v) => CpuStorage::I64(v),
        HostVec::F16(v) => CpuStorage::F16(v),
        HostVec::F32(v) => CpuStorage::F32(v),
        HostVec::F64(v) => CpuStorage::F64(v),
        other => return storage_from_bytes(dtype, other.bytes()),
    })
}

/// CPU storage in candle's type, copied from element bytes of `dtype` (any
/// alignment), widened by core's table where candle lacks the type.
pub(crate) fn storage_from_bytes(dtype: DType, bytes: &[u8]) -> Result<CpuStorage> {
    let wide = DTYPE_TABLE.widen(dtype, bytes)?;
    Ok(match wide.dtype() {
        DType::U8 => CpuStorage::U8(wide.as_bytes().to_vec()),
        DType::I16 => CpuStorage::I16(wide.as_slice::<i16>()?.to_vec()),
        DType::U32 => CpuStorage::U32(wide.as_slice::<u32>()?.to_vec()),
        DType::I32 => CpuStorage::I32(wide.as_slice::<i32>()?.to_vec()),
        DType::F16 => CpuStorage::F16(wide.as_slice::<f16>()?.to_vec()),
        DType::F32 => CpuStorage::F32(wide.as_slice::<f32>()?.to_vec()),
        DType::F64 => CpuStorage::F64(wide.as_slice::<f64>()?.to_vec()),
        _ => CpuStorage::I64(wide.as_slice::<i64>()?.to_vec()),
    })
}

/// A tensor of `shape` on `device` from owned CPU storage.
pub(crate) fn tensor_on(storage: CpuStorage, shape: &[usize], device: &Device) -> Result<Tensor> {
    let cpu = Tensor::from_storage(Storage::Cpu(storage), shape, BackpropOp::none(), false);
    Ok(if device.is_cpu() {
        cpu
    } else {
        cpu.to_device(device)?
    })
}

/// CPU storage for a column's bytes: our own [`HostBuffer`] moves into the
/// tensor without a copy, any other staging buffer is copied.
pub(crate) fn storage_from_buffer(
    dtype: DType,
    buffer: Box<dyn StagedBuffer>,
    len: usize,
) -> Result<CpuStorage> {
    candle_dtype(dtype)?;
    let other: Box<dyn StagedBuffer> = match downcast_staged::<HostBuffer>(buffer)? {
        Ok(host) if host.len == len && host.vec.bytes().len() == len => {
            return storage_from_host(dtype, host.vec);
        }
        Ok(host) => host,
        Err(other) => other,
    };
    storage_from_bytes(dtype, &other.as_bytes()[..len])
}
