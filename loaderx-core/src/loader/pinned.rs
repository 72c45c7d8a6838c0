use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, StoreKind};

use super::staging::{StageRequest, StagedBuffer, Staging};

/// One pinned host allocation, owned by a [`PinnedPool`].
pub trait PinnedBlock: Send + 'static {
    /// Usable bytes of the allocation.
    fn capacity(&self) -> usize;
    /// The whole allocation, `capacity()` bytes, at least 8-byte aligned.
    fn bytes(&self) -> &[u8];
    /// The whole allocation, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
}

/// The platform calls of a [`PinnedPool`]: allocate pinned memory and follow
/// the completion of the copies that read it.
pub trait PinnedAlloc: Send + Sync + 'static {
    /// A pinned allocation.
    type Block: PinnedBlock;
    /// A completion token of a copy that reads a block (a CUDA event).
    type Fence: Send + 'static;

    /// A new block of at least `bytes` bytes.
    ///
    /// # Errors
    ///
    /// The platform's error when the memory cannot be had.
    fn allocate(&self, bytes: usize) -> Result<Self::Block, Error>;

    /// Whether the copy behind `fence` has completed (does not block).
    ///
    /// # Errors
    ///
    /// The platform's error when the query fails.
    fn is_complete(&self, fence: &Self::Fence) -> Result<bool, Error>;

    /// Blocks until the copy behind `fence` has completed.
    ///
    /// # Errors
    ///
    /// The platform's error when waiting fails.
    fn wait(&self, fence: &Self::Fence) -> Result<(), Error>;
}

/// The bounds of a [`PinnedPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PinnedPoolConfig {
    /// Most blocks alive at once: lent, pending and idle together. A loader
    /// holds up to `workers + prefetch` batches in flight plus the one the
    /// consumer holds, each with one buffer per pinned stream, so this
    /// should be at least `(workers + prefetch + 2) × streams`.
    pub max_buffers: usize,
    /// How long [`PinnedPool::take`] waits for a batch to be dropped when
    /// every block is lent out, before it returns an error.
    pub wait: Duration,
}

impl Default for PinnedPoolConfig {
    fn default() -> PinnedPoolConfig {
        PinnedPoolConfig {
            max_buffers: 64,
            wait: Duration::from_secs(60),
        }
    }
}

impl PinnedPoolConfig {
    /// Room for a loader of `workers` workers, `prefetch` extra batches and
    /// `streams` pinned streams: `(workers + prefetch + 2) × streams` blocks.
    pub fn for_loader(workers: usize, prefetch: usize, streams: usize) -> PinnedPoolConfig {
        PinnedPoolConfig {
            max_buffers: (workers + prefetch + 2).saturating_mul(streams.max(1)),
            ..PinnedPoolConfig::default()
        }
    }

    /// The same bounds with at most `max_buffers` blocks (at least 1).
    pub fn max_buffers(mut self, max_buffers: usize) -> PinnedPoolConfig {
        self.max_buffers = max_buffers.max(1);
        self
    }

    /// The same bounds with `wait` as the longest wait for a dropped batch.
    pub fn wait(mut self, wait: Duration) -> PinnedPoolConfig {
        self.wait = wait;
        self
    }
}

/// Counters of a [`PinnedPool`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PinnedPoolStats {
    /// Blocks allocated so far.
    pub allocations: u64,
    /// Requests served by an idle block.
    pub reuses: u64,
    /// Idle blocks freed to make room at the bound.
    pub evictions: u64,
    /// Times a request waited for a pending copy to complete.
    pub fence_waits: u64,
    /// Blocks alive now (lent, pending and idle).
    pub live: usize,
    /// Bytes of the blocks alive now.
    pub live_bytes: usize,
    /// Most blocks alive at once so far.
    pub peak_live: usize,
    /// Blocks lent out now (held by batches).
    pub lent: usize,
    /// Blocks waiting for their copy to complete.
    pub pending: usize,
}

struct Idle<B> {
    stream: usize,
    block: B,
}

struct Pending<B, F> {
    stream: usize,
    block: B,
    fence: F,
}

struct State<A: PinnedAlloc> {
    idle: Vec<Idle<A::Block>>,
    /// In release order: the oldest copy first.
    pending: Vec<Pending<A::Block, A::Fence>>,
    live: usize,
    live_bytes: usize,
    peak_live: usize,
    lent: usize,
}

struct Shared<A: PinnedAlloc> {
    alloc: A,
    config: PinnedPoolConfig,
    state: Mutex<State<A>>,
    returned: Condvar,
    allocations: AtomicU64,
    reuses: AtomicU64,
    evictions: AtomicU64,
    fence_waits: AtomicU64,
}

impl<A: PinnedAlloc> Shared<A> {
    fn lock(&self) -> MutexGuard<'_, State<A>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn give_back(&self, stream: usize, block: A::Block, fence: Option<A::Fence>) {
        let mut state = self.lock();
        state.lent = state.lent.saturating_sub(1);
        match fence {
            Some(fence) => state.pending.push(Pending {
                stream,
                block,
                fence,
            }),
            None => state.idle.push(Idle { stream, block }),
        }
        drop(state);
        self.returned.notify_all();
    }
}

impl<A: PinnedAlloc> Drop for Shared<A> {
    fn drop(&mut self) {
        // A pending block may still be read by a copy: free it only after
        // the copy completed (an error leaves nothing better to do).
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        for pending in state.pending.drain(..) {
            let _ = self.alloc.wait(&pending.fence);
            drop(pending.block);
        }
    }
}

/// A bounded, size-aware pool of pinned host buffers. Cloning shares the pool.
///
/// A size-aware pool of pinned (page-locked) host buffers for staging
/// batches that are uploaded to an accelerator.
///
/// Pinned memory is what makes a host → device copy asynchronous, and it is
/// expensive to allocate (a driver call that locks pages), so adapters keep
/// it in a pool. The pool is independent of any GPU API: the platform calls
/// (allocate a block, ask whether a copy has completed, wait for it) sit
/// behind the small [`PinnedAlloc`] trait, which a CUDA adapter implements
/// with its driver and the tests here implement with a fake allocator.
///
/// The rules the pool keeps:
///
/// - **Best fit by size, per stream.** A request is served by the smallest
///   idle block of the same loader stream that is large enough, so a
///   128-byte label batch never takes a 100 KB image buffer, and the handed
///   out [`PinnedBuffer`] exposes exactly the bytes asked for (an upload
///   copies [`as_bytes`](StagedBuffer::as_bytes), never the whole block).
/// - **A block returns only after the copy that reads it completed.** An
///   adapter that enqueued an upload from a buffer hands it back with
///   [`PinnedBuffer::release_after`] and the upload's completion token (an
///   event); the block stays pending until [`PinnedAlloc::is_complete`] says
///   the copy is done, and is never handed out before. A buffer dropped
///   without a token was never read by a copy and is idle at once.
/// - **Bounded.** At most [`PinnedPoolConfig::max_buffers`] blocks exist at
///   a time (lent, pending and idle together). At the bound the pool waits
///   for a pending copy from a block of the same stream that fits, else
///   frees an idle block that does not fit, else waits for the oldest
///   pending copy, or, when every block is held by a batch, waits up to
///   [`PinnedPoolConfig::wait`] for one to be dropped and then returns an
///   error instead of hanging.
///
/// ```
/// use loaderx_core::adapter::{PinnedAlloc, PinnedBlock, PinnedPool, PinnedPoolConfig, StagedBuffer};
/// use loaderx_core::adapter::AlignedBuf;
///
/// /// Host memory standing in for pinned memory; copies complete at once.
/// struct Plain;
/// struct Block(AlignedBuf);
/// impl PinnedBlock for Block {
///     fn capacity(&self) -> usize { self.0.len() }
///     fn bytes(&self) -> &[u8] { self.0.as_bytes() }
///     fn bytes_mut(&mut self) -> &mut [u8] { self.0.as_bytes_mut() }
/// }
/// impl PinnedAlloc for Plain {
///     type Block = Block;
///     type Fence = ();
///     fn allocate(&self, bytes: usize) -> loaderx_core::Result<Block> {
///         Ok(Block(AlignedBuf::zeroed(bytes)?))
///     }
///     fn is_complete(&self, _: &()) -> loaderx_core::Result<bool> { Ok(true) }
///     fn wait(&self, _: &()) -> loaderx_core::Result<()> { Ok(()) }
/// }
///
/// let pool = PinnedPool::new(Plain, PinnedPoolConfig::default());
/// let mut image = pool.take(0, 100_000)?;
/// image.as_bytes_mut().fill(7);
/// image.release_after(());           // the upload's completion token
/// let label = pool.take(1, 128)?;    // another stream: its own block
/// assert_eq!(label.as_bytes().len(), 128);
/// assert_eq!(pool.stats().allocations, 2);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
pub struct PinnedPool<A: PinnedAlloc> {
    shared: Arc<Shared<A>>,
}

impl<A: PinnedAlloc> Clone for PinnedPool<A> {
    fn clone(&self) -> PinnedPool<A> {
        PinnedPool {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<A: PinnedAlloc> std::fmt::Debug for PinnedPool<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedPool")
            .field("config", &self.shared.config)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Rounds a new block's size: 64-byte granules, and an eighth of headroom
/// for streams whose batches vary in size.
fn block_size(bytes: usize, varying: bool) -> usize {
    let want = if varying {
        bytes.saturating_add(bytes / 8)
    } else {
        bytes
    };
    want.max(1).saturating_add(63) & !63
}

impl<A: PinnedAlloc> PinnedPool<A> {
    /// A pool over `alloc` with the bounds of `config`.
    pub fn new(alloc: A, config: PinnedPoolConfig) -> PinnedPool<A> {
        PinnedPool {
            shared: Arc::new(Shared {
                alloc,
                config: PinnedPoolConfig {
                    max_buffers: config.max_buffers.max(1),
                    ..config
                },
                state: Mutex::new(State {
                    idle: Vec::new(),
                    pending: Vec::new(),
                    live: 0,
                    live_bytes: 0,
                    peak_live: 0,
                    lent: 0,
                }),
                returned: Condvar::new(),
                allocations: AtomicU64::new(0),
                reuses: AtomicU64::new(0),
                evictions: AtomicU64::new(0),
                fence_waits: AtomicU64::new(0),
            }),
        }
    }

    /// The platform allocator.
    pub fn allocator(&self) -> &A {
        &self.shared.alloc
    }

    /// The pool's bounds.
    pub fn config(&self) -> PinnedPoolConfig {
        self.shared.config
    }

    /// The pool's counters now.
    pub fn stats(&self) -> PinnedPoolStats {
        let state = self.shared.lock();
        PinnedPoolStats {
            allocations: self.shared.allocations.load(Ordering::Relaxed),
            reuses: self.shared.reuses.load(Ordering::Relaxed),
            evictions: self.shared.evictions.load(Ordering::Relaxed),
            fence_waits: self.shared.fence_waits.load(Ordering::Relaxed),
            live: state.live,
            live_bytes: state.live_bytes,
            peak_live: state.peak_live,
            lent: state.lent,
            pending: state.pending.len(),
        }
    }

    /// A buffer of exactly `bytes` bytes for loader stream `stream`, in a
    /// block whose earlier copies have all completed.
    ///
    /// # Errors
    ///
    /// The allocator's error when a block cannot be allocated or a copy's
    /// completion cannot be queried; [`ErrorKind::Buffer`] when every block
    /// is lent out and none came back within [`PinnedPoolConfig::wait`].
    pub fn take(&self, stream: usize, bytes: usize) -> Result<PinnedBuffer<A>, Error> {
        self.take_sized(stream, bytes, false)
    }

    fn take_sized(
        &self,
        stream: usize,
        bytes: usize,
        varying: bool,
    ) -> Result<PinnedBuffer<A>, Error> {
        let shared = &*self.shared;
        let deadline = Instant::now() + shared.config.wait;
        let mut state = shared.lock();
        loop {
            // Copies that completed make their blocks idle.
            let mut i = 0;
            while i < state.pending.len() {
                if shared.alloc.is_complete(&state.pending[i].fence)? {
                    let p = state.pending.remove(i);
                    state.idle.push(Idle {
                        stream: p.stream,
                        block: p.block,
                    });
                } else {
                    i += 1;
                }
            }
            // Best fit among this stream's idle blocks.
            let fit = state
                .idle
                .iter()
                .enumerate()
                .filter(|(_, b)| b.stream == stream && b.block.capacity() >= bytes)
                .min_by_key(|(_, b)| b.block.capacity())
                .map(|(i, _)| i);
            if let Some(i) = fit {
                let idle = state.idle.swap_remove(i);
                state.lent += 1;
                drop(state);
                shared.reuses.fetch_add(1, Ordering::Relaxed);
                return Ok(self.lend(stream, bytes, idle.block));
            }
            let at_bound = state.live >= shared.config.max_buffers;
            // At the bound, a copy in flight from a block of this stream that
            // fits is waited for rather than freeing another block and
            // pinning a new one (slower than the copy, and it would make the
            // streams take each other's room in turn).
            let own_pending = state
                .pending
                .iter()
                .position(|p| p.stream == stream && p.block.capacity() >= bytes);
            // At the bound, an idle block that does not fit makes room:
            // this stream's largest first (it is too small and would grow),
            // else the largest of another stream.
            let mut evicted = None;
            if at_bound && own_pending.is_none() && !state.idle.is_empty() {
                let victim = state
                    .idle
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, b)| (b.stream == stream, b.block.capacity()))
                    .map(|(i, _)| i);
                if let Some(i) = victim {
                    let idle = state.idle.swap_remove(i);
                    state.live -= 1;
                    state.live_bytes -= idle.block.capacity();
                    evicted = Some(idle.block);
                }
            }
            if state.live < shared.config.max_buffers {
                let size = block_size(bytes, varying);
                // Reserve the slot, then allocate without the lock: pinning
                // pages is slow and must not stall the other workers.
                state.live += 1;
                state.lent += 1;
                state.peak_live = state.peak_live.max(state.live);
                drop(state);
                if evicted.is_some() {
                    shared.evictions.fetch_add(1, Ordering::Relaxed);
                }
                drop(evicted);
                return match shared.alloc.allocate(size) {
                    Ok(block) if block.capacity() >= bytes => {
                        shared.allocations.fetch_add(1, Ordering::Relaxed);
                        shared.lock().live_bytes += block.capacity();
                        Ok(self.lend(stream, bytes, block))
                    }
                    other => {
                        let mut state = shared.lock();
                        state.live -= 1;
                        state.lent -= 1;
                        drop(state);
                        shared.returned.notify_all();
                        match other {
                            Ok(block) => Err(ErrorKind::Buffer {
                                detail: format!(
                                    "pinned allocator returned {} bytes for a {bytes}-byte request",
                                    block.capacity()
                                ),
                            }
                            .into()),
                            Err(e) => Err(e),
                        }
                    }
                };
            }
            // Every block is lent or pending: wait for the oldest copy of
            // this stream that would fit, else the oldest copy at all.
            let oldest = own_pending.or_else(|| (!state.pending.is_empty()).then_some(0));
            if let Some(i) = oldest {
                // Wait outside the lock: take the entry out, and put it back
                // as idle once its copy completed.
                let p = state.pending.remove(i);
                drop(state);
                shared.fence_waits.fetch_add(1, Ordering::Relaxed);
                let waited = shared.alloc.wait(&p.fence);
                state = shared.lock();
                match waited {
                    Ok(()) => state.idle.push(Idle {
                        stream: p.stream,
                        block: p.block,
                    }),
                    Err(e) => {
                        // Keep the block pending: it may still be read.
                        state.pending.insert(0, p);
                        return Err(e);
                    }
                }
                continue;
            }
            // Every block is held by a batch: wait for one to be dropped.
            let now = Instant::now();
            if now >= deadline {
                return Err(ErrorKind::Buffer {
                    detail: format!(
                        "pinned staging pool exhausted: all {} buffers are held by batches \
                         not dropped within {:?}; raise max_buffers or drop batches sooner",
                        shared.config.max_buffers, shared.config.wait
                    ),
                }
                .into());
            }
            state = shared
                .returned
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn lend(&self, stream: usize, bytes: usize, block: A::Block) -> PinnedBuffer<A> {
        PinnedBuffer {
            block: Some(block),
            len: bytes,
            stream,
            pool: Arc::clone(&self.shared),
        }
    }
}

impl<A: PinnedAlloc> Staging for PinnedPool<A> {
    type Buffer = PinnedBuffer<A>;

    /// Every stream is staged in pinned memory (Ragged streams with an
    /// eighth of headroom, since their batches vary in size).
    fn stage(&self, request: &StageRequest<'_>) -> Result<PinnedBuffer<A>, Error> {
        let varying = request.kind == StoreKind::Ragged;
        self.take_sized(request.stream_index, request.bytes, varying)
    }
}

/// A pinned buffer lent by a [`PinnedPool`]: exactly the bytes asked for,
/// in a block that may be larger.
///
/// Dropped, it is idle at once; after an upload has been enqueued from it,
/// hand it back with [`release_after`](Self::release_after) instead.
pub struct PinnedBuffer<A: PinnedAlloc> {
    block: Option<A::Block>,
    len: usize,
    stream: usize,
    pool: Arc<Shared<A>>,
}

impl<A: PinnedAlloc> std::fmt::Debug for PinnedBuffer<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.len)
            .field("capacity", &self.block.as_ref().map(PinnedBlock::capacity))
            .field("stream", &self.stream)
            .finish()
    }
}

impl<A: PinnedAlloc> PinnedBuffer<A> {
    /// The bytes of the batch (the buffer's length, not the block's).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The loader stream the buffer serves.
    pub fn stream(&self) -> usize {
        self.stream
    }

    /// The pinned block (for the platform's copy call, which must read
    /// only the first [`len`](Self::len) bytes).
    pub fn block(&self) -> &A::Block {
        // The block is only taken out in `release_after` and `drop`, which
        // consume the buffer.
        self.block
            .as_ref()
            .unwrap_or_else(|| unreachable!("a lent buffer holds its block"))
    }

    /// Returns the buffer to its pool once the copy behind `fence` has
    /// completed: until then the block is pending and is not handed out.
    pub fn release_after(mut self, fence: A::Fence) {
        if let Some(block) = self.block.take() {
            self.pool.give_back(self.stream, block, Some(fence));
        }
    }
}

impl<A: PinnedAlloc> StagedBuffer for PinnedBuffer<A> {
    fn as_bytes(&self) -> &[u8] {
        &self.block().bytes()[..self.len]
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match self.block.as_mut() {
            Some(block) => &mut block.bytes_mut()[..len],
            None => &mut [],
        }
    }
}

impl<A: PinnedAlloc> Drop for PinnedBuffer<A> {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.pool.give_back(self.stream, block, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::AlignedBuf;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;

    type Ids = Arc<Mutex<HashSet<u64>>>;

    fn ids(set: &Ids) -> MutexGuard<'_, HashSet<u64>> {
        set.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fake platform: blocks are plain aligned memory with an id; a fence
    /// names the block its copy reads, and the fake tracks which blocks have
    /// a copy in flight.
    #[derive(Default)]
    struct FakeAlloc {
        next_id: AtomicU64,
        live: Ids,
        in_flight: Ids,
        max_live_seen: AtomicU64,
        fail_above: Option<usize>,
    }

    struct FakeBlock {
        id: u64,
        buf: AlignedBuf,
        live: Ids,
    }

    impl Drop for FakeBlock {
        fn drop(&mut self) {
            ids(&self.live).remove(&self.id);
        }
    }

    impl PinnedBlock for FakeBlock {
        fn capacity(&self) -> usize {
            self.buf.len()
        }
        fn bytes(&self) -> &[u8] {
            self.buf.as_bytes()
        }
        fn bytes_mut(&mut self) -> &mut [u8] {
            self.buf.as_bytes_mut()
        }
    }

    #[derive(Clone)]
    struct FakeFence {
        id: u64,
        done: Arc<AtomicBool>,
        in_flight: Ids,
    }

    impl FakeFence {
        /// Enqueues a fake copy from `buf`'s block.
        fn upload(alloc: &FakeAlloc, buf: &PinnedBuffer<FakeAlloc>) -> FakeFence {
            let id = buf.block().id;
            assert!(
                ids(&alloc.in_flight).insert(id),
                "two copies from one block"
            );
            FakeFence {
                id,
                done: Arc::default(),
                in_flight: Arc::clone(&alloc.in_flight),
            }
        }
        fn complete(&self) {
            // The copy is over before the fence says so.
            ids(&self.in_flight).remove(&self.id);
            self.done.store(true, Ordering::SeqCst);
        }
        fn done(&self) -> bool {
            self.done.load(Ordering::SeqCst)
        }
    }

    impl FakeAlloc {
        fn failing_above(bytes: usize) -> FakeAlloc {
            FakeAlloc {
                fail_above: Some(bytes),
                ..FakeAlloc::default()
            }
        }
        fn live_blocks(&self) -> usize {
            ids(&self.live).len()
        }
        fn copying(&self, id: u64) -> bool {
            ids(&self.in_flight).contains(&id)
        }
    }

    impl PinnedAlloc for FakeAlloc {
        type Block = FakeBlock;
        type Fence = FakeFence;

        fn allocate(&self, bytes: usize) -> Result<FakeBlock, Error> {
            if self.fail_above.is_some_and(|max| bytes > max) {
                return Err(ErrorKind::Buffer {
                    detail: format!("fake: no {bytes} bytes"),
                }
                .into());
            }
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let mut live = ids(&self.live);
            live.insert(id);
            self.max_live_seen
                .fetch_max(live.len() as u64, Ordering::Relaxed);
            drop(live);
            Ok(FakeBlock {
                id,
                buf: AlignedBuf::zeroed(bytes)?,
                live: Arc::clone(&self.live),
            })
        }

        fn is_complete(&self, fence: &FakeFence) -> Result<bool, Error> {
            Ok(fence.done())
        }

        fn wait(&self, fence: &FakeFence) -> Result<(), Error> {
            // The fake device finishes the copy when it is waited for.
            fence.complete();
            Ok(())
        }
    }

    fn pool(max: usize) -> PinnedPool<FakeAlloc> {
        PinnedPool::new(
            FakeAlloc::default(),
            PinnedPoolConfig::default()
                .max_buffers(max)
                .wait(Duration::from_millis(200)),
        )
    }

    fn upload(pool: &PinnedPool<FakeAlloc>, buf: PinnedBuffer<FakeAlloc>) -> FakeFence {
        let fence = FakeFence::upload(pool.allocator(), &buf);
        buf.release_after(fence.clone());
        fence
    }

    #[test]
    fn buffers_have_exactly_the_requested_length_and_are_aligned() {
        let pool = pool(4);
        for bytes in [0, 1, 7, 128, 100_000] {
            let b = pool.take(0, bytes).unwrap();
            assert_eq!(b.as_bytes().len(), bytes);
            assert_eq!(b.len(), bytes);
            assert_eq!(b.is_empty(), bytes == 0);
            assert_eq!(b.as_bytes().as_ptr() as usize % 8, 0);
            assert!(b.block().capacity() >= bytes);
        }
    }

    #[test]
    fn best_fit_within_a_stream() {
        let pool = pool(8);
        let small = pool.take(0, 1_000).unwrap();
        let large = pool.take(0, 50_000).unwrap();
        let (small_id, large_id) = (small.block().id, large.block().id);
        drop(large);
        drop(small);
        // The smallest block large enough, not the first free one.
        let b = pool.take(0, 900).unwrap();
        assert_eq!(b.block().id, small_id);
        let c = pool.take(0, 2_000).unwrap();
        assert_eq!(c.block().id, large_id);
        let stats = pool.stats();
        assert_eq!((stats.allocations, stats.reuses), (2, 2));
    }

    /// The candle crash: a label stream and an image stream share one pool;
    /// the label batch must never be handed the image's larger block, and
    /// its buffer must expose exactly the label bytes.
    #[test]
    fn a_label_stream_never_gets_an_image_block() {
        let pool = pool(16);
        for step in 0..50 {
            let image = pool.take(0, 100_352).unwrap();
            let label = pool.take(1, 128).unwrap();
            assert_eq!(label.as_bytes().len(), 128, "step {step}");
            assert!(label.block().capacity() < 1_000, "step {step}");
            assert_eq!(image.as_bytes().len(), 100_352);
            // The image's block is free first when the next label batch is
            // staged: the order that triggered the bug.
            drop(image);
            drop(label);
        }
        assert_eq!(pool.stats().allocations, 2);
    }

    #[test]
    fn a_pending_block_is_not_reused_before_its_copy_completes() {
        let pool = pool(8);
        let a = pool.take(0, 4_096).unwrap();
        let a_id = a.block().id;
        let fence = upload(&pool, a);
        assert_eq!(pool.stats().pending, 1);
        // The copy is in flight: another block, twice.
        let b = pool.take(0, 4_096).unwrap();
        assert_ne!(b.block().id, a_id);
        drop(b);
        let c = pool.take(0, 4_096).unwrap();
        assert_ne!(c.block().id, a_id, "reused a block whose copy is in flight");
        fence.complete();
        let d = pool.take(0, 4_096).unwrap();
        assert_eq!(d.block().id, a_id);
        let stats = pool.stats();
        assert_eq!((stats.pending, stats.fence_waits), (0, 0));
        drop((c, d));
    }

    #[test]
    fn at_the_bound_the_pool_waits_for_the_oldest_copy_instead_of_allocating() {
        let pool = pool(2);
        let a = pool.take(0, 1_000).unwrap();
        let b = pool.take(0, 1_000).unwrap();
        let (a_id, b_id) = (a.block().id, b.block().id);
        let f1 = upload(&pool, a);
        let f2 = upload(&pool, b);
        let c = pool.take(0, 1_000).unwrap();
        assert_eq!(c.block().id, a_id);
        assert!(f1.done());
        assert!(!f2.done(), "waited for more copies than needed");
        assert!(pool.allocator().copying(b_id));
        let stats = pool.stats();
        assert_eq!((stats.fence_waits, stats.allocations), (1, 2));
        assert_eq!(pool.allocator().live_blocks(), 2);
    }

    #[test]
    fn at_the_bound_an_idle_block_of_another_stream_is_freed() {
        let pool = pool(2);
        drop(pool.take(0, 100_000).unwrap());
        let _b = pool.take(1, 64).unwrap();
        // Stream 2 needs a block: stream 0's idle one is freed first.
        let c = pool.take(2, 10).unwrap();
        assert!(c.block().capacity() < 1_000);
        let stats = pool.stats();
        assert_eq!((stats.evictions, stats.live), (1, 2));
        assert_eq!(pool.allocator().live_blocks(), 2);
        assert!(stats.live_bytes < 1_000, "{stats:?}");
    }

    #[test]
    fn exhausted_pool_is_an_error_not_a_hang() {
        let pool = pool(1);
        let held = pool.take(0, 64).unwrap();
        let start = Instant::now();
        let e = pool.take(0, 64).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Buffer { .. }), "{e}");
        assert!(e.to_string().contains("exhausted"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(5));
        drop(held);
        assert_eq!(pool.take(0, 64).unwrap().len(), 64);
    }

    #[test]
    fn a_dropped_batch_wakes_a_waiting_take() {
        let pool = PinnedPool::new(
            FakeAlloc::default(),
            PinnedPoolConfig::default()
                .max_buffers(1)
                .wait(Duration::from_secs(30)),
        );
        let held = pool.take(0, 64).unwrap();
        let id = held.block().id;
        let p = pool.clone();
        let waiter = std::thread::spawn(move || p.take(0, 32).map(|b| b.block().id));
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        assert_eq!(waiter.join().unwrap().unwrap(), id);
    }

    #[test]
    fn allocation_errors_are_returned_and_free_the_slot() {
        let pool = PinnedPool::new(
            FakeAlloc::failing_above(1 << 20),
            PinnedPoolConfig::default().max_buffers(1),
        );
        let e = pool.take(0, 2 << 20).unwrap_err();
        assert!(e.to_string().contains("fake"), "{e}");
        assert_eq!(pool.stats().live, 0);
        assert_eq!(pool.take(0, 1 << 10).unwrap().len(), 1 << 10);
    }

    #[test]
    fn dropping_the_pool_waits_for_copies_in_flight() {
        let pool = pool(4);
        let a = pool.take(0, 100).unwrap();
        let fence = upload(&pool, a);
        drop(pool);
        assert!(
            fence.done(),
            "a pending block was freed before its copy completed"
        );
    }

    #[test]
    fn block_sizes() {
        assert_eq!(block_size(1_000, false), 1_024);
        assert_eq!(block_size(1_000, true), 1_152);
        assert_eq!(block_size(0, false), 64);
    }

    #[test]
    fn staging_hook_serves_loader_requests() {
        use crate::dtype::DType;
        let pool = pool(4);
        let shape = [2usize, 3];
        let request = StageRequest {
            step: 0,
            stream: "x",
            stream_index: 1,
            view: 0,
            kind: StoreKind::Dense,
            dtype: DType::F32,
            bytes: 24,
            shape: Some(&shape),
        };
        let buf = pool.stage(&request).unwrap();
        assert_eq!(buf.as_bytes().len(), 24);
        assert_eq!(buf.stream(), 1);
    }

    /// 8 workers, four streams of very different sizes, uploads completed
    /// by a fake device thread a few copies behind. Every block a worker
    /// gets must have no copy in flight; the pool stays within its bound.
    #[test]
    fn eight_workers_many_streams_no_reuse_in_flight_and_bounded() {
        use std::sync::mpsc;

        const SIZES: [usize; 4] = [128, 100_352, 3_000, 1 << 20];
        const STEPS: usize = 150;
        let max = 40;
        let pool = PinnedPool::new(
            FakeAlloc::default(),
            PinnedPoolConfig::default()
                .max_buffers(max)
                .wait(Duration::from_secs(30)),
        );
        let (tx, rx) = mpsc::channel::<FakeFence>();
        let device = std::thread::spawn(move || {
            let mut in_flight = std::collections::VecDeque::new();
            let mut copies = 0usize;
            for fence in rx {
                in_flight.push_back(fence);
                if in_flight.len() > 6
                    && let Some(f) = in_flight.pop_front()
                {
                    f.complete();
                    copies += 1;
                }
            }
            copies + in_flight.into_iter().map(|f| f.complete()).count()
        });
        let workers: Vec<_> = (0..8)
            .map(|w| {
                let pool = pool.clone();
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for step in 0..STEPS {
                        for (stream, &size) in SIZES.iter().enumerate() {
                            let bytes = size - (step % 3) * 8;
                            let mut buf = pool.take(stream, bytes).unwrap();
                            assert!(
                                !pool.allocator().copying(buf.block().id),
                                "handed out a block whose copy is in flight"
                            );
                            assert_eq!((buf.len(), buf.stream()), (bytes, stream));
                            buf.as_bytes_mut().fill((w + step + stream) as u8);
                            // Some batches are dropped without an upload.
                            if (w + step) % 5 == 0 {
                                drop(buf);
                            } else {
                                tx.send(upload(&pool, buf)).unwrap();
                            }
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        for w in workers {
            w.join().unwrap();
        }
        let copies = device.join().unwrap();
        assert_eq!(copies, 8 * STEPS * SIZES.len() * 4 / 5);
        let stats = pool.stats();
        assert!(stats.peak_live <= max, "{stats:?}");
        let seen = pool.allocator().max_live_seen.load(Ordering::Relaxed);
        assert!(seen as usize <= max, "{seen} blocks alive at once");
        // Reuse dominates: far fewer allocations than batches (4 800).
        assert!(stats.allocations < 200, "{stats:?}");
        assert!(stats.reuses > 4_000, "{stats:?}");
        assert_eq!(stats.lent, 0);
    }
}
