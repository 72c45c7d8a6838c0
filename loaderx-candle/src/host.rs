//! Host memory a batch is gathered into, and its conversion to tensors.

use candle_core::op::BackpropOp;
use candle_core::{CpuStorage, Device, Storage, Tensor};
use half::{bf16, f16};
use loaderx_core::DType;
use loaderx_core::adapter::{ColumnBuffer, StageRequest, StagedBuffer, Staging, StagingCounter};
use loaderx_core::adapter::{TypedVec, VecBuffer};

use crate::dtype::{DTYPE_TABLE, candle_dtype};
use crate::error::Result;

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

/// A buffer of [`CandleStaging`]: a typed vector that becomes a CPU
/// tensor's storage as it is, or (feature `cuda`) pinned host memory that
/// is uploaded asynchronously.
#[derive(Debug)]
#[non_exhaustive]
pub enum CandleBuffer {
    /// Host memory in candle's element type.
    Host(VecBuffer),
    /// Pinned host memory for a CUDA device.
    #[cfg(feature = "cuda")]
    Pinned(loaderx_core::adapter::PinnedBuffer<crate::cuda::CudaPinnedAlloc>),
}

impl StagedBuffer for CandleBuffer {
    fn as_bytes(&self) -> &[u8] {
        match self {
            CandleBuffer::Host(b) => b.as_bytes(),
            #[cfg(feature = "cuda")]
            CandleBuffer::Pinned(b) => b.as_bytes(),
        }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            CandleBuffer::Host(b) => b.as_bytes_mut(),
            #[cfg(feature = "cuda")]
            CandleBuffer::Pinned(b) => b.as_bytes_mut(),
        }
    }
}

impl Staging for CandleStaging {
    type Buffer = CandleBuffer;

    fn stage(&self, r: &StageRequest<'_>) -> loaderx_core::Result<CandleBuffer> {
        #[cfg(feature = "cuda")]
        // Dense batches and packed Ragged values: one array each.
        if let (Some(uploader), Some(_)) = (&self.pinned, r.shape)
            && crate::cuda::uploads_natively(r.dtype)
        {
            return Ok(CandleBuffer::Pinned(
                uploader.pool.take(r.stream_index, r.bytes)?,
            ));
        }
        // Reserved fallibly: a batch a damaged store makes huge is core's
        // `ErrorKind::Buffer`, as with core's own pool.
        Ok(CandleBuffer::Host(VecBuffer::for_request(r)?))
    }
}

static COPIES: StagingCounter = StagingCounter::new();

/// The process-wide counts of this crate's staging: columns copied into a
/// tensor because they were not in [`CandleStaging`]'s memory as the
/// tensor needs it (a column core built, Ragged records in segments, a
/// type candle widens). With the `cuda` feature, `pinned_stats` tells how
/// pinned uploads went.
pub fn staging_stats() -> loaderx_core::adapter::StagingStats {
    COPIES.stats()
}

/// Owned CPU storage in candle's type for `vec` (no copy where the types
/// agree; otherwise through core's widening table).
fn storage_from_vec(dtype: DType, vec: TypedVec) -> Result<CpuStorage> {
    Ok(match vec {
        TypedVec::U8(v) if dtype == DType::U8 => CpuStorage::U8(v),
        TypedVec::I16(v) => CpuStorage::I16(v),
        TypedVec::U32(v) => CpuStorage::U32(v),
        TypedVec::I32(v) => CpuStorage::I32(v),
        TypedVec::U64(v) if dtype == DType::U64 => {
            // Range-checks every value; the bytes stay as they are.
            DTYPE_TABLE.check(dtype, bytemuck::cast_slice(&v))?;
            CpuStorage::I64(bytemuck::allocation::cast_vec(v))
        }
        TypedVec::I64(v) => CpuStorage::I64(v),
        TypedVec::F16(v) => CpuStorage::F16(v),
        TypedVec::F32(v) => CpuStorage::F32(v),
        TypedVec::F64(v) => CpuStorage::F64(v),
        TypedVec::BF16(v) => CpuStorage::BF16(v),
        // Both are one byte over the same bits (E4M3FN); moved, not copied.
        TypedVec::F8E4M3Fn(v) => CpuStorage::F8E4M3(bytemuck::allocation::cast_vec(v)),
        TypedVec::F8E8M0Fnu(v) => CpuStorage::F8E8M0(bytemuck::allocation::cast_vec(v)),
        other => {
            // Widened to a type candle has: a copy.
            COPIES.record_copy();
            return storage_from_bytes(dtype, other.as_bytes());
        }
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
        DType::BF16 => CpuStorage::BF16(wide.as_slice::<bf16>()?.to_vec()),
        DType::F8E4M3Fn => CpuStorage::F8E4M3(
            wide.as_bytes()
                .iter()
                .map(|&b| float8::F8E4M3::from_bits(b))
                .collect(),
        ),
        DType::F8E8M0Fnu => CpuStorage::F8E8M0(wide.as_bytes().to_vec()),
        _ => CpuStorage::I64(wide.as_slice::<i64>()?.to_vec()),
    })
}

/// A tensor of `shape` on `device` from owned CPU storage.
pub(crate) fn tensor_on(storage: CpuStorage, shape: &[usize], device: &Device) -> Result<Tensor> {
    let cpu = Tensor::from_storage(Storage::Cpu(storage), shape, BackpropOp::none(), false);
    Ok(if device.is_cpu() {
        cpu
    } else {
        loaderx_core::Stage::Transfer.time(|| cpu.to_device(device))?
    })
}

/// CPU storage for a column's first `len` bytes: a vector of candle's
/// type holding exactly them moves into the tensor without a copy; any
/// other buffer is copied (and counted in [`staging_stats`]).
pub(crate) fn storage_from_buffer(
    dtype: DType,
    buffer: ColumnBuffer<CandleBuffer>,
    len: usize,
) -> Result<CpuStorage> {
    candle_dtype(dtype)?;
    if let ColumnBuffer::Staged(CandleBuffer::Host(host)) = buffer {
        if host.len() != len {
            COPIES.record_copy();
            return storage_from_bytes(dtype, &host.as_bytes()[..len]);
        }
        return match host.into_vec() {
            Ok(vec) => storage_from_vec(dtype, vec),
            Err(host) => {
                COPIES.record_copy();
                storage_from_bytes(dtype, &host.as_bytes()[..len])
            }
        };
    }
    COPIES.record_copy();
    storage_from_bytes(dtype, &buffer.as_bytes()[..len])
}
