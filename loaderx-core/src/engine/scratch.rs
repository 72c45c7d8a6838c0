//! The memory `O_DIRECT` reads land in: page-aligned buffers backed, where
//! the kernel allows, by transparent huge pages.
//!
//! A disk request carries one segment per run of physically contiguous
//! memory it reads into. Into 4 KiB pages scattered by the allocator, a
//! 64 KiB read is 16 segments and a 1 MiB read 256 (past the 254 a virtio
//! request may carry, so it is split); into a huge page, one. On the
//! virtio disk measured (interleaved with `fio`, page cache dropped), that
//! was the difference between about 0.6× and 0.8–1.2× of `fio` for 64 KiB
//! and 1 MiB records, and 0.6–0.8× against 0.7–1.0× for 9 000-byte ones.
//!
//! - A buffer of [`AlignedBuf::HUGE`] bytes or more is a mapping of its
//!   own, aligned to 2 MiB and advised `MADV_HUGEPAGE`; released, it is
//!   kept in a pool (up to [`POOL_BYTES`]) for the next read that fits.
//! - A smaller one is carved, in order, out of a 2 MiB chunk mapped the
//!   same way; a chunk goes back to the pool of chunks (up to
//!   [`CHUNK_POOL_BYTES`]) when the last buffer carved from it is released. Reads' buffers are released
//!   roughly in the order they were taken (steps are consumed in order),
//!   so chunks are freed whole and reused.
//!
//! Where transparent huge pages are off (`never` in
//! `/sys/kernel/mm/transparent_hugepage/enabled`) the advice is ignored:
//! the same buffers, in 4 KiB pages.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

/// Memory aligned for `O_DIRECT` reads (to a page at least): the scratch
/// that reads land in before their bytes are copied or decoded. Every
/// byte is initialised (zeroed when mapped, else an earlier use's bytes).
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    /// Bytes usable (`len <= cap`).
    len: usize,
    /// Bytes owned; 0 for a buffer that owns nothing.
    cap: usize,
    /// The chunk a small buffer is carved from (kept mapped while this
    /// buffer lives); `None` for a buffer mapped on its own.
    chunk: Option<Arc<Chunk>>,
}

// SAFETY: the buffer's bytes are its own (a mapping it alone owns, or a
// range of a chunk no other buffer is ever carved from), reached only
// through borrows of the buffer, like a `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only reads, as for a `Vec<u8>`.
unsafe impl Sync for AlignedBuf {}

/// Most bytes of released buffers of [`AlignedBuf::HUGE`] bytes or more
/// the pool keeps.
pub(crate) const POOL_BYTES: usize = 128 << 20;

/// Most bytes of released chunks kept for carving again.
const CHUNK_POOL_BYTES: usize = 64 << 20;

/// Released buffers of [`AlignedBuf::HUGE`] bytes or more, and their bytes.
static POOL: Mutex<(Vec<AlignedBuf>, usize)> = Mutex::new((Vec::new(), 0));

/// Released chunks (each [`AlignedBuf::HUGE`] bytes, mapped by
/// [`huge_map`]), as addresses.
static CHUNKS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// The chunk small buffers are being carved from, and the offset of its
/// first byte not carved yet.
static CARVING: Mutex<Option<(Arc<Chunk>, usize)>> = Mutex::new(None);

/// Locks `m`, whatever a thread that panicked holding it left (each of
/// these locks guards plain bookkeeping, consistent between statements).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A chunk of [`AlignedBuf::HUGE`] bytes small buffers are carved from;
/// its memory goes back to [`CHUNKS`] (or is unmapped) when the last
/// reference (the carver's, and each carved buffer's) is dropped.
struct Chunk {
    ptr: NonNull<u8>,
}

// SAFETY: the chunk only holds the address of a mapping it owns; its bytes
// are reached through the buffers carved from it (see `AlignedBuf`).
unsafe impl Send for Chunk {}
// SAFETY: as for `Send`: the chunk itself never touches its bytes.
unsafe impl Sync for Chunk {}

impl Drop for Chunk {
    fn drop(&mut self) {
        let mut chunks = lock(&CHUNKS);
        if (chunks.len() + 1) * AlignedBuf::HUGE <= CHUNK_POOL_BYTES {
            chunks.push(self.ptr.as_ptr() as usize);
            return;
        }
        drop(chunks);
        huge_unmap(self.ptr, AlignedBuf::HUGE);
    }
}

impl AlignedBuf {
    /// Alignment of every buffer: a page (the strictest `O_DIRECT`
    /// alignment of memory in practice).
    pub(crate) const ALIGN: usize = 4096;

    /// A buffer of at least this many bytes is mapped on its own (aligned
    /// to it, advised to huge pages); a smaller one is carved from a chunk
    /// of this many bytes.
    pub(crate) const HUGE: usize = 2 << 20;

    /// A buffer of `len` bytes (initialised: zeroed when mapped, or
    /// holding an earlier use's bytes). `None` when memory cannot be had.
    pub(crate) fn take(len: usize) -> Option<AlignedBuf> {
        let cap = len.max(1).checked_next_multiple_of(Self::ALIGN)?;
        if cap < Self::HUGE {
            return Self::carve(len, cap);
        }
        {
            let mut pool = lock(&POOL);
            let best = pool
                .0
                .iter()
                .enumerate()
                .filter(|(_, b)| b.cap >= cap && b.cap <= cap.saturating_mul(2))
                .min_by_key(|(_, b)| b.cap)
                .map(|(i, _)| i);
            if let Some(i) = best {
                let mut b = pool.0.swap_remove(i);
                pool.1 -= b.cap;
                b.len = len;
                return Some(b);
            }
        }
        Some(AlignedBuf {
            ptr: huge_map(cap)?,
            len,
            cap,
            chunk: None,
        })
    }

    /// `cap` bytes (a multiple of [`Self::ALIGN`], under [`Self::HUGE`])
    /// carved from the chunk being carved, or from a new one when they do
    /// not fit in what is left of it.
    fn carve(len: usize, cap: usize) -> Option<AlignedBuf> {
        let mut carving = lock(&CARVING);
        if carving.as_ref().is_none_or(|(_, at)| at + cap > Self::HUGE) {
            let reused = lock(&CHUNKS).pop().and_then(|a| NonNull::new(a as *mut u8));
            let ptr = match reused {
                Some(p) => p,
                None => huge_map(Self::HUGE)?,
            };
            // The old chunk lives on in the buffers carved from it.
            *carving = Some((Arc::new(Chunk { ptr }), 0));
        }
        let (chunk, at) = carving.as_mut()?;
        // `at + cap <= HUGE`: within the chunk, past every buffer carved
        // from it before (offsets only grow), so no two buffers overlap.
        let ptr = NonNull::new(chunk.ptr.as_ptr().wrapping_add(*at))?;
        *at += cap;
        Some(AlignedBuf {
            ptr,
            len,
            cap,
            chunk: Some(Arc::clone(chunk)),
        })
    }

    /// Bytes usable.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first byte, for a read the kernel makes into the buffer while
    /// its owner keeps it (and no borrow of its bytes) alive.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The buffer's bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is the start of `cap >= len` bytes this buffer
        // alone owns (see `take` and `carve`), kept mapped while it lives
        // (its own mapping, or its chunk's, which its `Arc` holds), all
        // initialised (zeroed when mapped, written only through
        // `&mut self` or by reads its owner waited for since).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The buffer's bytes, to read into.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`, borrowed uniquely through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // A carved buffer hands its bytes back with its chunk reference.
        if self.chunk.take().is_some() || self.cap == 0 {
            return;
        }
        // The mapping moves to `mine`; `self` owns nothing from here.
        let mine = AlignedBuf {
            ptr: self.ptr,
            len: 0,
            cap: std::mem::take(&mut self.cap),
            chunk: None,
        };
        let mut pool = lock(&POOL);
        if pool.1 + mine.cap <= POOL_BYTES {
            pool.1 += mine.cap;
            pool.0.push(mine);
            return;
        }
        drop(pool);
        let mine = std::mem::ManuallyDrop::new(mine);
        huge_unmap(mine.ptr, mine.cap);
    }
}

/// Maps `cap` bytes (a multiple of the page) of zeroed memory aligned to
/// [`AlignedBuf::HUGE`], advised to be backed by huge pages (where the
/// kernel has none, or transparent huge pages are off, they are 4 KiB
/// pages as any). `None` when the memory cannot be had.
fn huge_map(cap: usize) -> Option<NonNull<u8>> {
    let align = AlignedBuf::HUGE;
    let whole = cap.checked_add(align)?;
    // SAFETY: a fresh private anonymous mapping; nothing else is affected.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            whole,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let head = (base as usize).next_multiple_of(align) - base as usize;
    let tail = whole - head - cap;
    let start = base.cast::<u8>().wrapping_add(head);
    // SAFETY: `[base, base + head)` and `[start + cap, base + whole)` lie
    // in the mapping just made (`head + cap + tail == whole`), unused; what
    // stays mapped is `[start, start + cap)`. The advice only asks for huge
    // pages on memory of this mapping (an error leaves small pages).
    unsafe {
        if head > 0 {
            libc::munmap(base, head);
        }
        if tail > 0 {
            libc::munmap(start.add(cap).cast(), tail);
        }
        #[cfg(target_os = "linux")]
        libc::madvise(start.cast(), cap, libc::MADV_HUGEPAGE);
    }
    NonNull::new(start)
}

/// Unmaps `cap` bytes at `ptr`, a mapping [`huge_map`] made that nothing
/// uses any more.
fn huge_unmap(ptr: NonNull<u8>, cap: usize) {
    // SAFETY: `ptr` and `cap` are a mapping `huge_map` made, unmapped once:
    // its one owner (a buffer being freed, or a chunk whose every buffer
    // is gone) is letting it go.
    unsafe { libc::munmap(ptr.as_ptr().cast(), cap) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_are_carved_apart_aligned_and_their_chunk_reused() {
        let mut a = AlignedBuf::take(10_000).unwrap();
        let mut b = AlignedBuf::take(5_000).unwrap();
        for buf in [&a, &b] {
            assert_eq!(buf.as_slice().as_ptr() as usize % AlignedBuf::ALIGN, 0);
        }
        assert_eq!((a.as_slice().len(), b.as_slice().len()), (10_000, 5_000));
        // Carved apart: writing one leaves the other as it was.
        a.as_mut_slice().fill(7);
        b.as_mut_slice().fill(8);
        assert!(a.as_slice().iter().all(|&x| x == 7));
        assert!(b.as_slice().iter().all(|&x| x == 8));
        let (pa, pb) = (
            a.as_slice().as_ptr() as usize,
            b.as_slice().as_ptr() as usize,
        );
        assert!(pa + 12_288 <= pb || pb + 8_192 <= pa, "overlap");
        // Many more than a chunk holds: each whole, none overlapping.
        let mut many: Vec<AlignedBuf> = (0..40)
            .map(|_| AlignedBuf::take(100_000).unwrap())
            .collect();
        for (k, m) in many.iter_mut().enumerate() {
            m.as_mut_slice().fill(k as u8);
        }
        for (k, m) in many.iter().enumerate() {
            assert!(m.as_slice().iter().all(|&x| x == k as u8), "buffer {k}");
        }
        drop((a, b, many));
        // Chunks whose buffers are all gone serve the next ones.
        let c = AlignedBuf::take(3_000).unwrap();
        assert_eq!(c.as_slice().as_ptr() as usize % AlignedBuf::ALIGN, 0);
    }

    #[test]
    fn buffers_of_megabytes_are_mapped_apart_zeroed_and_reused() {
        let len = 2 * AlignedBuf::HUGE + 5000;
        let mut a = AlignedBuf::take(len).unwrap();
        assert_eq!(a.as_slice().as_ptr() as usize % AlignedBuf::HUGE, 0);
        assert_eq!(a.as_slice().len(), len);
        a.as_mut_slice().fill(9);
        let p = a.as_slice().as_ptr();
        drop(a);
        let b = AlignedBuf::take(len - 4096).unwrap();
        assert_eq!(b.as_slice().as_ptr() as usize % AlignedBuf::HUGE, 0);
        if b.as_slice().as_ptr() == p {
            assert!(b.as_slice().iter().all(|&x| x == 9));
        }
        // Larger than the pool keeps: mapped fresh (zeroed), unmapped after.
        let big = AlignedBuf::take(POOL_BYTES + AlignedBuf::HUGE).unwrap();
        assert!(big.as_slice().iter().step_by(4096).all(|&x| x == 0));
        drop(big);
        drop(b);
    }
}
