//! Gathering straight into tch tensors: CPU storage, or pinned host memory
//! for a CUDA device.

use loaderx_core::ErrorKind;
use loaderx_core::adapter::AlignedBuf;
pub use loaderx_core::adapter::StagingStats;
use loaderx_core::adapter::{StageRequest, StagedBuffer, Staging, StagingCounter};
use tch::{Device, Tensor};

use crate::dtype::same_bytes_kind;

/// A tensor's CPU memory used as a loader buffer.
#[derive(Debug)]
pub struct TensorBuffer {
    tensor: Tensor,
    len: usize,
}

impl TensorBuffer {
    /// Wraps a contiguous CPU tensor of exactly `len` bytes.
    fn new(tensor: Tensor, len: usize) -> Option<TensorBuffer> {
        let bytes = tensor.numel() * tensor.kind().elt_size_in_bytes();
        (tensor.device() == Device::Cpu && tensor.is_contiguous() && bytes == len)
            .then_some(TensorBuffer { tensor, len })
    }

    /// The tensor, which owns the gathered bytes.
    pub fn into_tensor(self) -> Tensor {
        self.tensor
    }
}

impl StagedBuffer for TensorBuffer {
    fn as_bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `new` checked that the tensor is a contiguous CPU tensor of
        // exactly `len` bytes; its storage lives as long as `self.tensor`,
        // which this buffer owns, and no other handle to it exists.
        unsafe { std::slice::from_raw_parts(self.tensor.data_ptr() as *const u8, self.len) }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as in `as_bytes`; `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.tensor.data_ptr() as *mut u8, self.len) }
    }
}

/// A buffer of [`TchStaging`]: a libtorch tensor's memory, or core's
/// aligned host buffer for what has no tensor of its own (Ragged batches in
/// segments, element types libtorch lacks).
#[derive(Debug)]
#[non_exhaustive]
pub enum TchBuffer {
    /// A CPU (or pinned) tensor that owns the bytes.
    Tensor(TensorBuffer),
    /// Host memory, copied into a tensor when converted.
    Host(AlignedBuf),
}

impl StagedBuffer for TchBuffer {
    fn as_bytes(&self) -> &[u8] {
        match self {
            TchBuffer::Tensor(b) => b.as_bytes(),
            TchBuffer::Host(b) => b.as_bytes(),
        }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            TchBuffer::Tensor(b) => b.as_bytes_mut(),
            TchBuffer::Host(b) => b.as_bytes_mut(),
        }
    }
}

static UPLOADS: StagingCounter = StagingCounter::new();

/// The process-wide counts of [`TchStaging`]: for CUDA devices, batches
/// gathered into pinned host tensors (libtorch says so) and batches left in
/// pageable memory because pinning failed; for every device, columns copied
/// into a tensor because they were not in a tensor's own memory.
pub fn staging_stats() -> StagingStats {
    UPLOADS.stats()
}

/// Counts one column copied into a tensor.
pub(crate) fn record_copy() {
    UPLOADS.record_copy();
}

/// The loader staging of this crate.
///
/// Dense batches are gathered into a tensor allocated by libtorch: plain
/// CPU memory for a CPU device (handed over without a copy), pinned host
/// memory for a CUDA device (then copied to the device without blocking).
/// Pinned blocks are pooled by libtorch's caching host allocator, which
/// `pin_memory` goes through: a block returns to it when the batch's host
/// tensor is dropped and the copy from it has completed.
#[derive(Debug, Clone, Copy)]
pub struct TchStaging {
    device: Device,
}

impl TchStaging {
    /// The staging for batches bound to `device`.
    pub fn new(device: Device) -> TchStaging {
        TchStaging { device }
    }
}

impl Staging for TchStaging {
    type Buffer = TchBuffer;

    fn stage(&self, r: &StageRequest<'_>) -> loaderx_core::Result<TchBuffer> {
        // Dense batches and packed Ragged values: one array each.
        if let (Some(kind), Some(shape)) = (same_bytes_kind(r.dtype), r.shape) {
            let size: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            let tch_err = |e: tch::TchError| -> loaderx_core::Error {
                ErrorKind::InvalidArgument {
                    message: format!("tch staging: {e}"),
                }
                .into()
            };
            let mut tensor =
                Tensor::f_empty(size.as_slice(), (kind, Device::Cpu)).map_err(tch_err)?;
            if self.device.is_cuda() {
                // Without a usable CUDA driver pinning fails; the batch then
                // stays in pageable memory and the device copy reports the error.
                if let Ok(pinned) = tensor.f_pin_memory(self.device) {
                    tensor = pinned;
                }
                // Read back from libtorch, not assumed.
                UPLOADS.record(tensor.f_is_pinned(self.device).unwrap_or(false));
            }
            if let Some(buffer) = TensorBuffer::new(tensor, r.bytes) {
                return Ok(TchBuffer::Tensor(buffer));
            }
        }
        // What has no tensor of its own (ragged batches in segments, u16/u32): core's
        // aligned host buffer.
        Ok(TchBuffer::Host(AlignedBuf::zeroed(r.bytes)?))
    }
}
