//! CUDA staging (feature `cuda`): batches for a CUDA device are gathered into
//! page-locked (pinned) host buffers and uploaded with an asynchronous copy on
//! the device's stream, so the copy overlaps the next gather and the model.
//!
//! Pinned buffers are expensive to allocate, so they are pooled: a buffer
//! returns to the pool when its batch is dropped, and cudarc's per-buffer
//! event makes the next writer wait until the previous upload from it is done.
//!
//! Element types candle holds natively are uploaded byte for byte; `i8` and
//! `u16` are widened on the host first (see [`crate::dtype`]), `u64` is checked
//! against `i64::MAX`.
//!
//! Status: this module compiles only where nvcc and the CUDA toolkit exist
//! (candle's `cuda` feature builds its kernels). It has not been run on a GPU
//! in this repository's CI.

use std::any::Any;
use std::sync::{Arc, Mutex};

use candle_core::cuda_backend::cudarc::driver::{CudaSlice, DeviceRepr, PinnedHostSlice};
use candle_core::cuda_backend::{CudaDType, CudaStorage};
use candle_core::op::BackpropOp;
use candle_core::{Device, Storage, Tensor};
use half::f16;
use loaderx_core::DType;
use loaderx_core::StagedBuffer;

use crate::error::{Error, Result};

type Pool = Arc<Mutex<Vec<PinnedHostSlice<u8>>>>;

/// Pinned host buffers for one CUDA device.
#[derive(Clone)]
pub(crate) struct PinnedPool {
    device: Device,
    free: Pool,
}

impl std::fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedPool").finish_non_exhaustive()
    }
}

fn driver(e: impl std::fmt::Display) -> Error {
    Error::Candle(candle_core::Error::Msg(format!("CUDA driver: {e}")))
}

impl PinnedPool {
    pub(crate) fn new(device: &Device) -> PinnedPool {
        PinnedPool {
            device: device.clone(),
            free: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A pinned buffer of at least `len` bytes.
    pub(crate) fn take(&self, len: usize) -> Result<PinnedBuffer> {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            free.iter()
                .position(|s| s.len() >= len)
                .map(|i| free.swap_remove(i))
        };
        let slice = match reused {
            Some(s) => s,
            None => {
                let cuda = self.device.as_cuda_device()?;
                let ctx = cuda.cuda_stream().context().clone();
                // SAFETY: the buffer is uninitialised until the loader's gather
                // writes all `len` bytes of it; nothing reads it before that.
                unsafe { ctx.alloc_pinned_with_flags::<u8>(len.max(1), 0) }.map_err(driver)?
            }
        };
        Ok(PinnedBuffer {
            slice: Some(slice),
            len,
            pool: Arc::clone(&self.free),
        })
    }
}

/// A pinned host buffer from a [`PinnedPool`]; returns to it on drop.
pub struct PinnedBuffer {
    slice: Option<PinnedHostSlice<u8>>,
    len: usize,
    pool: Pool,
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.len)
            .finish()
    }
}

impl StagedBuffer for PinnedBuffer {
    fn as_bytes(&self) -> &[u8] {
        // Waits for an earlier upload from this buffer; an error leaves an
        // empty slice, which the loader reports as a too-small buffer.
        match self.slice.as_ref().map(PinnedHostSlice::as_slice) {
            Some(Ok(s)) => &s[..self.len],
            _ => &[],
        }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match self.slice.as_mut().map(PinnedHostSlice::as_mut_slice) {
            Some(Ok(s)) => &mut s[..len],
            _ => &mut [],
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Some(s) = self.slice.take() {
            self.pool.lock().unwrap_or_else(|p| p.into_inner()).push(s);
        }
    }
}

fn upload<T: DeviceRepr + CudaDType>(
    buffer: &PinnedBuffer,
    shape: &[usize],
    device: &Device,
) -> Result<Tensor> {
    let cuda = device.as_cuda_device()?;
    let stream = cuda.cuda_stream();
    let n = buffer.len / size_of::<T>();
    let pinned = buffer
        .slice
        .as_ref()
        .ok_or_else(|| driver("buffer already returned"))?;
    // SAFETY: `dst` is fully overwritten by the copy below before any kernel
    // reads it (both are ordered on the same stream).
    let mut dst: CudaSlice<T> = unsafe { stream.alloc::<T>(n) }.map_err(driver)?;
    {
        // SAFETY: `dst` holds `n` elements of `T`, exactly `buffer.len` bytes.
        let mut bytes = unsafe { dst.transmute_mut::<u8>(buffer.len) }
            .ok_or_else(|| driver("device buffer too small"))?;
        stream.memcpy_htod(pinned, &mut bytes).map_err(driver)?;
    }
    let storage = CudaStorage::wrap_cuda_slice(dst, cuda.clone());
    Ok(Tensor::from_storage(
        Storage::Cuda(storage),
        shape,
        BackpropOp::none(),
        false,
    ))
}

/// Uploads a pinned Dense batch asynchronously; `None` when the type needs a
/// host-side conversion first (the caller then takes the copying path).
pub(crate) fn upload_dense(
    dtype: DType,
    buffer: &PinnedBuffer,
    shape: &[usize],
    device: &Device,
) -> Option<Result<Tensor>> {
    Some(match dtype {
        DType::Bool | DType::U8 => upload::<u8>(buffer, shape, device),
        DType::I16 => upload::<i16>(buffer, shape, device),
        DType::U32 => upload::<u32>(buffer, shape, device),
        DType::I32 => upload::<i32>(buffer, shape, device),
        DType::I64 => upload::<i64>(buffer, shape, device),
        DType::F16 => upload::<f16>(buffer, shape, device),
        DType::F32 => upload::<f32>(buffer, shape, device),
        DType::F64 => upload::<f64>(buffer, shape, device),
        _ => return None,
    })
}
