//! CUDA staging (feature `cuda`): Dense batches for a CUDA device are gathered
//! into page-locked (pinned) host buffers from core's
//! [`PinnedPool`](loaderx_core::adapter::PinnedPool) and uploaded with an
//! asynchronous copy on a **dedicated transfer stream**, so the copy of batch
//! `k + 1` overlaps the model's work on batch `k` on candle's compute stream.
//!
//! - The copy reads exactly the batch's bytes (the pinned block may be
//!   larger), into a device slice of exactly that size.
//! - The device slice belongs to the transfer stream; cudarc records its
//!   write event after the copy, and candle's compute stream waits on that
//!   event when a kernel first reads the tensor (cudarc's event tracking, on
//!   because the transfer stream makes the context multi-stream).
//! - An event recorded on the transfer stream after the copy is the pinned
//!   buffer's completion token: the pool hands the buffer out again only
//!   once that event completed.
//! - One pool and one transfer stream per CUDA device, shared by every
//!   loader of the process; [`pinned_stats`] reads its counters.
//!
//! Element types candle holds natively are uploaded byte for byte; `i8`,
//! `u16` and `u64` need a host-side conversion and take the copying path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::cuda_backend::cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, result,
};
use candle_core::cuda_backend::{CudaDType, CudaDevice, CudaStorage, DeviceId};
use candle_core::op::BackpropOp;
use candle_core::{Device, Storage, Tensor};
use half::f16;
use loaderx_core::DType;
use loaderx_core::adapter::{
    ColumnBuffer, PinnedAlloc, PinnedBlock, PinnedBuffer, PinnedPool, PinnedPoolConfig,
    PinnedPoolStats, StagedBuffer,
};

use crate::error::{Error, Result};
use crate::host::CandleBuffer;

fn driver(e: impl std::fmt::Display) -> Error {
    Error::Candle(candle_core::Error::Msg(format!("CUDA driver: {e}")))
}

fn core_driver(what: &str, e: impl std::fmt::Display) -> loaderx_core::Error {
    loaderx_core::ErrorKind::Buffer {
        detail: format!("CUDA pinned staging: {what}: {e}"),
    }
    .into()
}

/// cudarc's driver calls for core's pinned pool.
#[derive(Debug)]
pub struct CudaPinnedAlloc {
    ctx: Arc<CudaContext>,
}

/// One page-locked host allocation (`cuMemHostAlloc`).
#[derive(Debug)]
pub struct CudaPinnedBlock {
    ptr: *mut u8,
    len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: the block owns its allocation exclusively; pinned host memory may
// be used and freed from any thread of the process.
unsafe impl Send for CudaPinnedBlock {}

impl PinnedBlock for CudaPinnedBlock {
    fn capacity(&self) -> usize {
        self.len
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `len` bytes owned by this
        // block (page aligned, non-null); the pool lends a block to one
        // buffer at a time and never while a copy reads it.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for CudaPinnedBlock {
    fn drop(&mut self) {
        // A failure here only leaks the block: there is nowhere to report it.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from `malloc_host` and is freed once; the
            // pool frees only idle blocks, whose copies have completed.
            let _ = unsafe { result::free_host(self.ptr.cast()) };
        }
    }
}

impl PinnedAlloc for CudaPinnedAlloc {
    type Block = CudaPinnedBlock;
    type Fence = CudaEvent;

    fn allocate(&self, bytes: usize) -> loaderx_core::Result<CudaPinnedBlock> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| core_driver("bind context", e))?;
        // SAFETY: a plain page-locked allocation (flags 0: not write-combined,
        // since the loader writes it and tests may read it back).
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }
            .map_err(|e| core_driver(&format!("cuMemHostAlloc({bytes})"), e))?;
        if ptr.is_null() {
            return Err(core_driver("cuMemHostAlloc", "null pointer"));
        }
        Ok(CudaPinnedBlock {
            ptr: ptr.cast(),
            len: bytes,
            ctx: Arc::clone(&self.ctx),
        })
    }

    fn is_complete(&self, fence: &CudaEvent) -> loaderx_core::Result<bool> {
        fence
            .try_is_complete()
            .map_err(|e| core_driver("cuEventQuery", e))
    }

    fn wait(&self, fence: &CudaEvent) -> loaderx_core::Result<()> {
        fence
            .synchronize()
            .map_err(|e| core_driver("cuEventSynchronize", e))
    }
}

/// The pinned pool and transfer stream of one CUDA device.
pub(crate) struct Uploader {
    device: CudaDevice,
    transfer: Arc<CudaStream>,
    pub(crate) pool: PinnedPool<CudaPinnedAlloc>,
}

impl std::fmt::Debug for Uploader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uploader")
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

type Registry = Mutex<HashMap<DeviceId, Arc<Uploader>>>;

fn registry() -> &'static Registry {
    static UPLOADERS: OnceLock<Registry> = OnceLock::new();
    UPLOADERS.get_or_init(Registry::default)
}

impl Uploader {
    /// The device's uploader, created on first use.
    pub(crate) fn for_device(device: &Device) -> Result<Arc<Uploader>> {
        let cuda = device.as_cuda_device()?;
        let mut map = registry().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(u) = map.get(&cuda.id()) {
            return Ok(Arc::clone(u));
        }
        let ctx = cuda.cuda_stream().context().clone();
        let transfer = ctx.new_stream().map_err(driver)?;
        let uploader = Arc::new(Uploader {
            device: cuda.clone(),
            transfer,
            pool: PinnedPool::new(
                CudaPinnedAlloc { ctx },
                PinnedPoolConfig::default().max_buffers(96),
            ),
        });
        map.insert(cuda.id(), Arc::clone(&uploader));
        Ok(uploader)
    }

    fn upload<T: DeviceRepr + CudaDType>(
        &self,
        buffer: PinnedBuffer<CudaPinnedAlloc>,
        shape: &[usize],
    ) -> Result<Tensor> {
        let bytes = buffer.len();
        if !bytes.is_multiple_of(size_of::<T>()) {
            return Err(driver(format!(
                "{bytes}-byte batch is not a whole number of {}-byte elements",
                size_of::<T>()
            )));
        }
        let n = bytes / size_of::<T>();
        let stream = &self.transfer;
        stream.context().bind_to_thread().map_err(driver)?;
        // SAFETY: `dst` is fully overwritten by the copy below before any
        // kernel reads it: readers on other streams wait on its write event,
        // recorded after the copy.
        let mut dst: CudaSlice<T> = unsafe { stream.alloc::<T>(n) }.map_err(driver)?;
        {
            let (dst_ptr, _record_write) = dst.device_ptr_mut(stream);
            let src = buffer.as_bytes();
            debug_assert_eq!(src.len(), n * size_of::<T>());
            // SAFETY: `src` is pinned host memory of exactly `bytes` bytes and
            // `dst_ptr` a device allocation of `n * size_of::<T>() == bytes`
            // bytes. The host bytes stay untouched until the copy completes:
            // the buffer goes back to its pool only with the event below.
            unsafe { result::memcpy_htod_async(dst_ptr, src, stream.cu_stream()) }
                .map_err(driver)?;
        }
        let copied = stream.record_event(None).map_err(driver)?;
        buffer.release_after(copied);
        let storage = CudaStorage::wrap_cuda_slice(dst, self.device.clone());
        Ok(Tensor::from_storage(
            Storage::Cuda(storage),
            shape,
            BackpropOp::none(),
            false,
        ))
    }
}

/// Whether Dense batches of `dtype` upload byte for byte (and so are worth
/// staging in pinned memory).
pub(crate) fn uploads_natively(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Bool
            | DType::U8
            | DType::I16
            | DType::U32
            | DType::I32
            | DType::I64
            | DType::F16
            | DType::F32
            | DType::F64
    )
}

/// Uploads a pinned Dense batch asynchronously on the device's transfer
/// stream; gives the buffer back when it is not pinned (or the type needs a
/// host-side conversion), for the copying path.
pub(crate) fn upload_dense(
    dtype: DType,
    buffer: ColumnBuffer<CandleBuffer>,
    shape: &[usize],
    device: &Device,
) -> std::result::Result<Result<Tensor>, ColumnBuffer<CandleBuffer>> {
    if !device.is_cuda() || !uploads_natively(dtype) {
        return Err(buffer);
    }
    let pinned = match buffer {
        ColumnBuffer::Staged(CandleBuffer::Pinned(pinned)) => pinned,
        other => return Err(other),
    };
    let uploader = match Uploader::for_device(device) {
        Ok(u) => u,
        Err(e) => return Ok(Err(e)),
    };
    Ok(loaderx_core::Stage::Transfer.time(|| match dtype {
        DType::Bool | DType::U8 => uploader.upload::<u8>(pinned, shape),
        DType::I16 => uploader.upload::<i16>(pinned, shape),
        DType::U32 => uploader.upload::<u32>(pinned, shape),
        DType::I32 => uploader.upload::<i32>(pinned, shape),
        DType::I64 => uploader.upload::<i64>(pinned, shape),
        DType::F16 => uploader.upload::<f16>(pinned, shape),
        DType::F32 => uploader.upload::<f32>(pinned, shape),
        _ => uploader.upload::<f64>(pinned, shape),
    }))
}

/// The counters of `device`'s pinned staging pool: `None` when `device` is
/// not a CUDA device or no loader has staged a batch for it yet.
///
/// `allocations > 0` means batches were gathered into pinned memory;
/// `reuses` counts batches served by a recycled pinned buffer.
pub fn pinned_stats(device: &Device) -> Option<PinnedPoolStats> {
    let cuda = device.as_cuda_device().ok()?;
    let map = registry().lock().unwrap_or_else(|p| p.into_inner());
    map.get(&cuda.id()).map(|u| u.pool.stats())
}
