//! Where a batch is gathered: the staging hook and the default buffer pool.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::adapter::AlignedBuf;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, StoreKind};

/// What a [`Staging`] hook is asked for: room for one stream's batch.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StageRequest<'a> {
    /// The step being produced.
    pub step: u64,
    /// The stream's name.
    pub stream: &'a str,
    /// The stream's position among the loader's streams.
    pub stream_index: usize,
    /// The placement view the batch is for (`0` unless the loader splits
    /// its batches into [views](crate::DataLoaderBuilder::build_views)).
    pub view: usize,
    /// The stream's contract.
    pub kind: StoreKind,
    /// The stream's element type.
    pub dtype: DType,
    /// Bytes needed.
    pub bytes: usize,
    /// The batch's shape as one array: `(B, *item_shape)` for a Dense
    /// stream, `[elements]` for a Ragged stream gathered
    /// [`packed`](crate::DataLoaderBuilder::packed) (its values, 1-D);
    /// `None` for a Ragged stream in segments (headers and padding between
    /// records).
    pub shape: Option<&'a [usize]>,
}

/// A buffer one stream's batch is gathered into.
///
/// It must start 8-byte aligned, so that typed views of the batch are
/// possible, and either be at least the requested size
/// ([`as_bytes_mut`](Self::as_bytes_mut)) or give the loader that much
/// uninitialised room ([`uninit_mut`](Self::uninit_mut)).
///
/// A buffer fresh from [`Staging::stage`] may hold anything: uninitialised
/// from the framework's point of view (a recycled block, an `empty` tensor),
/// so it is write-only until the loader has gathered into it; the loader
/// writes every byte of the requested size before any read. An adapter gets
/// its own buffer type back from a [`Column`](super::Column) with
/// [`into_buffer`](super::Column::into_buffer): the staging's
/// [`Buffer`](Staging::Buffer) type, no cast involved.
pub trait StagedBuffer: Send + 'static {
    /// The buffer's bytes.
    fn as_bytes(&self) -> &[u8];
    /// The buffer's bytes, writable.
    fn as_bytes_mut(&mut self) -> &mut [u8];
    /// Room for exactly `len` bytes that the loader fills without zeroing
    /// them first, or `None` (the default) for a buffer the loader writes
    /// through [`as_bytes_mut`](Self::as_bytes_mut). After filling every
    /// byte the loader calls [`assume_init`](Self::assume_init).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`] when the room cannot be had.
    fn uninit_mut(&mut self, len: usize) -> Option<Result<&mut [MaybeUninit<u8>], Error>> {
        let _ = len;
        None
    }
    /// Marks the `len` bytes of [`uninit_mut`](Self::uninit_mut)'s room as
    /// the buffer's contents.
    ///
    /// # Safety
    ///
    /// `uninit_mut(len)` was the buffer's last call and returned room, and
    /// every byte of that room has been written since.
    unsafe fn assume_init(&mut self, len: usize) {
        let _ = len;
    }
}

/// Where a column's bytes live: the buffer its staging gathered them into,
/// or host memory core made itself (a column built by
/// [`Column::stack`](super::Column::stack), packing, a
/// one-off [`Stream::gather`](super::Stream::gather)), which an adapter
/// can only copy.
#[derive(Debug)]
pub enum ColumnBuffer<B> {
    /// The staging's own buffer.
    Staged(B),
    /// Host memory core allocated.
    Host(AlignedBuf),
}

impl<B: StagedBuffer> ColumnBuffer<B> {
    /// The buffer's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            ColumnBuffer::Staged(b) => b.as_bytes(),
            ColumnBuffer::Host(b) => b.as_bytes(),
        }
    }
}

/// Decides where each stream's batch is gathered: pinned host memory, a
/// framework tensor's storage, or (by default) a reusable [`BufferPool`].
/// Its [`Buffer`](Self::Buffer) type is what the batches hold and what an
/// adapter gets back from them.
pub trait Staging: Send + Sync + 'static {
    /// The buffers batches are gathered into.
    type Buffer: StagedBuffer;

    /// A buffer for `request.bytes` bytes (see [`StagedBuffer`]).
    ///
    /// # Errors
    ///
    /// When the memory cannot be had
    /// ([`ErrorKind::Buffer`](crate::ErrorKind::Buffer)), or the
    /// framework's own errors.
    fn stage(&self, request: &StageRequest<'_>) -> Result<Self::Buffer, Error>;

    /// Called once when a loader starts with this staging: at most
    /// `buffers` of its buffers are alive at once (every stream of every
    /// batch in flight). A pool sizes its idle list by it; the default does
    /// nothing.
    fn expect_buffers(&self, buffers: usize) {
        let _ = buffers;
    }

    /// Buffers allocated or grown so far, for
    /// [`LoaderStats::pool_allocations`](crate::LoaderStats::pool_allocations)
    /// (0 when the staging does not count them).
    fn allocations(&self) -> u64 {
        0
    }
}

/// How the uploads an adapter staged were held: pinned or pageable.
///
/// Read from the memory itself (the framework says whether a buffer is
/// page-locked), not assumed from the configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StagingStats {
    /// Uploads whose host data was in pinned memory.
    pub pinned: u64,
    /// Uploads from pageable host memory (host devices, or pinning that
    /// was declined or failed).
    pub pageable: u64,
    /// Columns that were not in the adapter's own staged memory (a column
    /// core built on the host, a buffer of a size the tensor cannot take)
    /// and were copied into a tensor.
    pub copied: u64,
}

/// Process-wide counters behind an adapter's `staging_stats()`: one
/// `static` per adapter, one [`record`](Self::record) per staged upload.
///
/// ```
/// use loaderx_core::adapter::StagingCounter;
///
/// static UPLOADS: StagingCounter = StagingCounter::new();
/// UPLOADS.record(true);
/// UPLOADS.record(false);
/// UPLOADS.record(false);
/// let s = UPLOADS.stats();
/// assert_eq!((s.pinned, s.pageable), (1, 2));
/// ```
#[derive(Debug, Default)]
pub struct StagingCounter {
    pinned: AtomicU64,
    pageable: AtomicU64,
    copied: AtomicU64,
}

impl StagingCounter {
    /// Both counts at zero (usable in a `static`).
    pub const fn new() -> StagingCounter {
        StagingCounter {
            pinned: AtomicU64::new(0),
            pageable: AtomicU64::new(0),
            copied: AtomicU64::new(0),
        }
    }

    /// Counts one upload, pinned or not.
    pub fn record(&self, pinned: bool) {
        let c = if pinned { &self.pinned } else { &self.pageable };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one column copied into a tensor (see [`StagingStats::copied`]).
    pub fn record_copy(&self) {
        self.copied.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn stats(&self) -> StagingStats {
        StagingStats {
            pinned: self.pinned.load(Ordering::Relaxed),
            pageable: self.pageable.load(Ordering::Relaxed),
            copied: self.copied.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug)]
struct PoolInner {
    /// Idle buffers with the stream they last served.
    free: Mutex<Vec<(usize, AlignedBuf)>>,
    max_free: AtomicUsize,
    allocations: AtomicU64,
}

/// The default staging: [`AlignedBuf`]s that return to the pool
/// when their batch is dropped, so a steady-state loader allocates nothing.
///
/// As a loader's staging (the default, or given to
/// [`staging`](crate::DataLoaderBuilder::staging)), the pool hands each
/// batch's buffer to the gather empty, through
/// [`uninit_mut`](StagedBuffer::uninit_mut), without zeroing it first, even
/// when it grows: the gather writes every byte (records, and zeros in a
/// Ragged batch's alignment padding) before anything reads it.
/// [`take`](Self::take) zeroes what it grows. A loader raises the number of
/// idle buffers kept to what it can have alive at once
/// ([`Staging::expect_buffers`]).
#[derive(Debug, Clone)]
pub struct BufferPool {
    inner: Arc<PoolInner>,
}

impl BufferPool {
    /// A pool that keeps at most `max_free` idle buffers.
    pub fn new(max_free: usize) -> BufferPool {
        BufferPool {
            inner: Arc::new(PoolInner {
                free: Mutex::new(Vec::new()),
                max_free: AtomicUsize::new(max_free),
                allocations: AtomicU64::new(0),
            }),
        }
    }

    /// How many times the pool allocated or grew a buffer.
    pub fn allocations(&self) -> u64 {
        self.inner.allocations.load(Ordering::Relaxed)
    }

    /// A buffer of `bytes` bytes, 8-byte aligned.
    ///
    /// Reuses the best-fitting idle buffer (the smallest one large enough);
    /// otherwise grows the largest idle one to the size asked plus an eighth
    /// (batches of a stream that vary in size then rarely grow it again), or
    /// allocates exactly the size asked (rounded up to 8 bytes) — never to a
    /// power of two, which would take up to twice the memory a batch needs.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`](crate::ErrorKind::Buffer) when the memory cannot be
    /// had: sizes come from stores, and a batch too large for this machine
    /// must be an error rather than an abort.
    pub fn take(&self, bytes: usize) -> Result<PooledBuffer, Error> {
        self.take_for(0, bytes, false)
    }

    /// [`take`](Self::take) for stream `stream`: buffers that served the
    /// same stream come first, so streams of different sizes do not keep
    /// growing each other's buffers. A `varying` stream (Ragged: every
    /// batch has its own size) gets an eighth of headroom from the start.
    fn take_for(&self, stream: usize, bytes: usize, varying: bool) -> Result<PooledBuffer, Error> {
        let mut storage = self.checkout(stream, bytes, varying);
        storage.resize(bytes).map_err(|_| ErrorKind::Buffer {
            detail: format!("cannot allocate a {bytes}-byte staging buffer"),
        })?;
        Ok(self.wrap(storage, stream))
    }

    /// [`take_for`](Self::take_for) without the bytes: a buffer for a
    /// gather to write its `bytes` bytes into with
    /// [`PooledBuffer::uninit_mut`] (which empties it and reserves the
    /// room, once) and [`PooledBuffer::assume_init`], so that growing it
    /// zeroes nothing the gather then overwrites.
    pub(crate) fn take_empty(&self, stream: usize, bytes: usize, varying: bool) -> PooledBuffer {
        self.wrap(self.checkout(stream, bytes, varying), stream)
    }

    /// The best idle buffer for `bytes` bytes of stream `stream` (or a new
    /// empty one), its allocation grown with headroom when it must grow
    /// (the growth itself is left to the caller when that fails).
    fn checkout(&self, stream: usize, bytes: usize, varying: bool) -> AlignedBuf {
        let reused = {
            let mut free = self.inner.free.lock().unwrap_or_else(|p| p.into_inner());
            let best = |same: bool| {
                let candidates = free
                    .iter()
                    .enumerate()
                    .filter(|(_, (s, _))| !same || *s == stream);
                let fit = candidates
                    .clone()
                    .filter(|(_, (_, v))| v.capacity() >= bytes)
                    .min_by_key(|(_, (_, v))| v.capacity());
                fit.or_else(|| candidates.max_by_key(|(_, (_, v))| v.capacity()))
                    .map(|(i, _)| i)
            };
            best(true)
                .or_else(|| best(false))
                .map(|i| free.swap_remove(i).1)
        };
        let mut storage = reused.unwrap_or_default();
        if storage.capacity() < bytes {
            self.inner.allocations.fetch_add(1, Ordering::Relaxed);
            // A buffer that has to grow serves batches of varying size: an
            // eighth of headroom keeps it from growing again at every new
            // largest batch. A fixed-size stream's first allocation is exact.
            if varying || storage.capacity() > 0 {
                let _ = storage.reserve(bytes.saturating_add(bytes / 8));
            }
        }
        storage
    }

    fn wrap(&self, storage: AlignedBuf, stream: usize) -> PooledBuffer {
        PooledBuffer {
            storage,
            stream,
            pool: Arc::clone(&self.inner),
        }
    }
}

impl<S: Staging> Staging for Arc<S> {
    type Buffer = S::Buffer;

    fn stage(&self, request: &StageRequest<'_>) -> Result<S::Buffer, Error> {
        (**self).stage(request)
    }

    fn expect_buffers(&self, buffers: usize) {
        (**self).expect_buffers(buffers);
    }

    fn allocations(&self) -> u64 {
        (**self).allocations()
    }
}

/// The loader's default staging. A staged buffer is empty, with room
/// reserved: the gather writes its bytes through
/// [`uninit_mut`](StagedBuffer::uninit_mut) without zeroing them first,
/// even where the buffer grows.
impl Staging for BufferPool {
    type Buffer = PooledBuffer;

    fn stage(&self, request: &StageRequest<'_>) -> Result<PooledBuffer, Error> {
        let varying = request.kind == StoreKind::Ragged;
        // Buffers are recycled per stream and view.
        let key = request
            .stream_index
            .wrapping_mul(64)
            .wrapping_add(request.view);
        Ok(self.take_empty(key, request.bytes, varying))
    }

    fn expect_buffers(&self, buffers: usize) {
        self.inner.max_free.fetch_max(buffers, Ordering::Relaxed);
    }

    fn allocations(&self) -> u64 {
        BufferPool::allocations(self)
    }
}

/// An [`AlignedBuf`] from a [`BufferPool`]; goes back to the pool on drop.
#[derive(Debug)]
pub struct PooledBuffer {
    storage: AlignedBuf,
    stream: usize,
    pool: Arc<PoolInner>,
}

impl PooledBuffer {
    /// The buffer.
    pub fn buf(&self) -> &AlignedBuf {
        &self.storage
    }
}

impl StagedBuffer for PooledBuffer {
    fn as_bytes(&self) -> &[u8] {
        self.storage.as_bytes()
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.storage.as_bytes_mut()
    }

    /// Empties the buffer and reserves the room, once (growing it zeroes
    /// nothing).
    fn uninit_mut(&mut self, len: usize) -> Option<Result<&mut [MaybeUninit<u8>], Error>> {
        Some(self.storage.uninit_mut(len).map_err(|_| {
            ErrorKind::Buffer {
                detail: format!("cannot allocate a {len}-byte staging buffer"),
            }
            .into()
        }))
    }

    unsafe fn assume_init(&mut self, len: usize) {
        // SAFETY: the caller upholds `AlignedBuf::assume_init`'s contract,
        // which `StagedBuffer::assume_init`'s is.
        unsafe { self.storage.assume_init(len) }
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        let mut free = self.pool.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < self.pool.max_free.load(Ordering::Relaxed) {
            free.push((self.stream, std::mem::take(&mut self.storage)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reuses_buffers() {
        let pool = BufferPool::new(2);
        let a = pool.take(100).unwrap();
        assert_eq!(a.as_bytes().len(), 100);
        assert_eq!(a.as_bytes().as_ptr() as usize % 8, 0);
        drop(a);
        let b = pool.take(64).unwrap();
        assert_eq!(b.as_bytes().len(), 64);
        assert_eq!(pool.allocations(), 1);
        drop(b);
        let c = pool.take(1000).unwrap();
        assert_eq!(pool.allocations(), 2);
        // Grown to the size asked plus an eighth, not to a power of two.
        assert_eq!(c.storage.capacity(), 1128); // 1000 + 1000 / 8, in words
    }

    #[test]
    fn a_buffer_larger_than_memory_is_an_error() {
        let pool = BufferPool::new(2);
        let e = pool.take(usize::MAX / 2).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Buffer { .. }), "{e}");
        // The pool still works afterwards.
        assert_eq!(pool.take(16).unwrap().as_bytes().len(), 16);
    }
}
