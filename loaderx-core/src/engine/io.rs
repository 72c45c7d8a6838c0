//! The system calls of the cold read path, and all of its `unsafe`: many
//! positional reads in flight at once (io_uring, or a pool of `pread`
//! threads where io_uring cannot be had), page residency (`mincore`) and
//! the read-ahead advice on files.
//!
//! # Ownership of the destinations
//!
//! A [`ReadReq`] borrows its destination mutably for its lifetime `'a`,
//! and [`read_all`] takes the requests by `&mut`: the destinations cannot
//! be touched, moved or freed by anyone else until `read_all` returns. The
//! ring path returns (or unwinds) only once every read it handed the
//! kernel has completed: a guard reaps the outstanding completions in its
//! `Drop`, and if the kernel refuses to report them (an `io_uring_enter`
//! error other than an interruption, which a working kernel never gives
//! for reads of regular files) the process aborts rather than free memory
//! the kernel may still write. The `pread` path is synchronous per read.
//!
//! # Backends
//!
//! Each thread that reads has a ring of its own, made on first use
//! ([`RING_ENTRIES`] entries): the loader's workers and the rayon pool's
//! threads each keep one, so no ring is shared and no lock is taken. When
//! a ring cannot be set up (`ENOSYS` on an old kernel, `EPERM` under
//! seccomp or `kernel.io_uring_disabled`, `ENOMEM` under a memlock limit)
//! io_uring is off for the process, and reads go to a pool of
//! [`PREAD_THREADS`] threads that each block in `pread`; setting
//! `LOADERX_NO_IO_URING=1` in the environment forces that fallback.

#[cfg(target_os = "linux")]
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::codec::Sink;

/// Entries of each thread's ring: the reads one thread keeps in flight.
pub(crate) const RING_ENTRIES: u32 = 256;
/// Threads of the `pread` fallback: the reads it keeps in flight.
pub(crate) const PREAD_THREADS: usize = 64;
/// Most bytes one read asks for (the kernel caps a read a little under
/// 2 GiB; a longer record is read in pieces).
const MAX_READ: usize = 1 << 30;

/// Which system calls performed a [`read_all`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// A ring of this thread.
    Uring,
    /// The pool of `pread` threads.
    Pread,
}

/// One positional read of `len` bytes at `offset` of a file into a
/// destination borrowed for `'a`.
pub(crate) struct ReadReq<'a> {
    fd: RawFd,
    offset: u64,
    ptr: *mut u8,
    len: usize,
    /// Bytes read so far (a short read is continued from here).
    done: usize,
    _borrows: PhantomData<(&'a File, &'a mut [u8])>,
}

// SAFETY: a request is a unique borrow of its destination (`&'a mut [D]`,
// `D: Send`) and a shared borrow of its file (`&'a File`, `Sync`), both of
// which may be sent to another thread; the raw pointer is that borrow.
unsafe impl Send for ReadReq<'_> {}

impl<'a> ReadReq<'a> {
    /// A read of `dst.len()` bytes of `file` from `offset` into `dst`.
    pub(crate) fn new<D: Sink>(file: &'a File, offset: u64, dst: &'a mut [D]) -> ReadReq<'a> {
        const {
            assert!(size_of::<D>() == 1 && align_of::<D>() == 1);
        }
        ReadReq {
            fd: file.as_raw_fd(),
            offset,
            ptr: dst.as_mut_ptr().cast::<u8>(),
            len: dst.len(),
            done: 0,
            _borrows: PhantomData,
        }
    }

    /// The next piece to read: `(pointer, length, file offset)`.
    fn rest(&self) -> (*mut u8, usize, u64) {
        (
            self.ptr.wrapping_add(self.done),
            (self.len - self.done).min(MAX_READ),
            self.offset + self.done as u64,
        )
    }

    /// Counts `n` more bytes read; `Err` for a read of nothing before the
    /// end (the file is shorter than it was: truncated after open).
    fn advance(&mut self, n: usize) -> io::Result<bool> {
        if n == 0 {
            return Err(short(self.done, self.len));
        }
        self.done += n;
        Ok(self.done >= self.len)
    }
}

/// The error of a read that stopped at `done` of `len` bytes.
fn short(done: usize, len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("read {done} of {len} bytes: the file ends early (truncated after open?)"),
    )
}

/// True when `LOADERX_NO_IO_URING` is set (to anything but `0` or empty):
/// reads go to the `pread` pool.
fn uring_forced_off() -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    *OFF.get_or_init(|| {
        std::env::var_os("LOADERX_NO_IO_URING").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

/// Set once a ring could not be made: io_uring is off for the process.
static URING_FAILED: AtomicBool = AtomicBool::new(false);

/// Reads every request whole, many at once; returns the backend that did.
/// With `pread_only`, the `pread` pool does whatever io_uring offers.
///
/// # Errors
///
/// `(request, error)` of a request whose read failed or came back short
/// (after continuing it: a short read is retried from where it stopped,
/// and a read of nothing is the end of the file). The other requests'
/// destinations then hold unspecified bytes.
pub(crate) fn read_all(
    reqs: &mut [ReadReq<'_>],
    pread_only: bool,
) -> Result<Backend, (usize, io::Error)> {
    if reqs.is_empty() {
        return Ok(Backend::Uring);
    }
    #[cfg(target_os = "linux")]
    if !pread_only && !uring_forced_off() && !URING_FAILED.load(Ordering::Relaxed) {
        let done = RING.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.is_none() {
                match io_uring::IoUring::new(RING_ENTRIES) {
                    Ok(ring) => *cell = Some(ring),
                    Err(_) => {
                        URING_FAILED.store(true, Ordering::Relaxed);
                        return None;
                    }
                }
            }
            cell.as_mut().map(|ring| uring::read(ring, reqs))
        });
        if let Some(done) = done {
            return done.map(|()| Backend::Uring);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (pread_only, &URING_FAILED, uring_forced_off);
    pread_all(reqs).map(|()| Backend::Pread)
}

#[cfg(target_os = "linux")]
thread_local! {
    /// This thread's ring, made on its first read.
    static RING: RefCell<Option<io_uring::IoUring>> = const { RefCell::new(None) };
}

#[cfg(target_os = "linux")]
mod uring {
    use super::*;
    use io_uring::{IoUring, opcode, types};

    /// Reaps every completion still owed by the kernel when dropped, so
    /// that no destination is released while a read into it is in flight.
    struct Drain<'r> {
        ring: &'r mut IoUring,
        in_flight: usize,
    }

    impl Drain<'_> {
        /// Submits what is queued and waits for `want` completions,
        /// retrying interruptions. Any other error leaves reads the kernel
        /// owns unaccounted for: the process aborts (see the module doc).
        fn wait(&mut self, want: usize) {
            loop {
                match self.ring.submit_and_wait(want) {
                    Ok(_) => return,
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                        ) => {}
                    Err(e) => {
                        eprintln!(
                            "loaderx: io_uring_enter failed with {} reads in flight: {e}; \
                             aborting (their buffers cannot be released)",
                            self.in_flight
                        );
                        std::process::abort();
                    }
                }
            }
        }
    }

    impl Drop for Drain<'_> {
        fn drop(&mut self) {
            while self.in_flight > 0 {
                self.wait(1);
                let n = self.ring.completion().count();
                self.in_flight -= n.min(self.in_flight);
            }
        }
    }

    /// [`read_all`] on `ring`.
    pub(super) fn read(
        ring: &mut IoUring,
        reqs: &mut [ReadReq<'_>],
    ) -> Result<(), (usize, io::Error)> {
        let cap = ring.params().sq_entries() as usize;
        let mut d = Drain { ring, in_flight: 0 };
        let mut next = 0;
        // Requests read in part, to continue.
        let mut again: Vec<usize> = Vec::new();
        let mut failed: Option<(usize, io::Error)> = None;
        loop {
            {
                let mut sq = d.ring.submission();
                while d.in_flight < cap && failed.is_none() {
                    let i = match again.pop() {
                        Some(i) => i,
                        None if next < reqs.len() => {
                            next += 1;
                            next - 1
                        }
                        None => break,
                    };
                    let (ptr, len, offset) = reqs[i].rest();
                    let entry = opcode::Read::new(types::Fd(reqs[i].fd), ptr, len as u32)
                        .offset(offset)
                        .build()
                        .user_data(i as u64);
                    // SAFETY: the entry reads into `len` bytes from `ptr`,
                    // inside request `i`'s destination, which `reqs`
                    // borrows mutably until this function returns; it does
                    // not return (nor unwind: `d` drains in its `Drop`)
                    // before the entry's completion is reaped, counted by
                    // `in_flight`. The fd is the request's borrowed file's,
                    // open for as long.
                    if unsafe { sq.push(&entry) }.is_err() {
                        again.push(i);
                        break;
                    }
                    d.in_flight += 1;
                }
            }
            if d.in_flight == 0 {
                break;
            }
            d.wait(1);
            let completions: Vec<(u64, i32)> = d
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (i, res) in completions {
                d.in_flight -= 1;
                let i = i as usize;
                let step = if res == -libc::EAGAIN || res == -libc::EINTR {
                    // Asked again (a file that cannot wait; an interrupt).
                    Ok(false)
                } else if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    reqs[i].advance(res as usize)
                };
                match step {
                    Ok(true) => {}
                    Ok(false) => again.push(i),
                    Err(e) => {
                        failed.get_or_insert((i, e));
                    }
                }
            }
        }
        if failed.is_none()
            && let Some(i) = again
                .first()
                .copied()
                .or((next < reqs.len()).then_some(next))
        {
            // Nothing in flight and the queue took nothing: never with a
            // ring of `cap` entries and no other user, but no request is
            // left unread without an error.
            failed = Some((i, io::Error::other("io_uring submission queue full")));
        }
        failed.map_or(Ok(()), Err)
    }
}

/// The pool of `pread` threads; `None` when it cannot be started (reads
/// then run one by one on the calling thread).
fn pread_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(PREAD_THREADS)
            .thread_name(|i| format!("loaderx-pread-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// [`read_all`] with `pread`, up to [`PREAD_THREADS`] at once.
fn pread_all(reqs: &mut [ReadReq<'_>]) -> Result<(), (usize, io::Error)> {
    let one = |(i, r): (usize, &mut ReadReq<'_>)| pread_one(r).map_err(|e| (i, e));
    match pread_pool() {
        Some(pool) if reqs.len() > 1 => pool.install(|| {
            reqs.par_iter_mut()
                .enumerate()
                .with_max_len(1)
                .try_for_each(one)
        }),
        _ => reqs.iter_mut().enumerate().try_for_each(one),
    }
}

/// Reads one request whole with `pread`, continuing short reads.
fn pread_one(r: &mut ReadReq<'_>) -> io::Result<()> {
    while r.done < r.len {
        let (ptr, len, offset) = r.rest();
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset past off_t"))?;
        // SAFETY: `ptr..ptr + len` lies in the request's destination, which
        // it borrows mutably (nothing else reads or writes it meanwhile);
        // the fd is its borrowed file's, open for as long.
        let n = unsafe { libc::pread(r.fd, ptr.cast(), len, offset) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        r.advance(n as usize)?;
    }
    Ok(())
}

/// The system's page size.
pub(crate) fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: `sysconf` reads a configuration value; no memory is passed.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(n).unwrap_or(4096).max(1)
    })
}

/// Whether the pages holding `region[offset..offset + len]` are in the
/// page cache: all of them for a range of up to 64 pages, else its first
/// and last 32. `None` when `mincore` fails (or the range is outside the
/// region): the caller then does not know.
pub(crate) fn resident(region: &[u8], offset: usize, len: usize) -> Option<bool> {
    const PAGES: usize = 64;
    let end = offset.checked_add(len.max(1))?;
    if end > region.len() {
        return None;
    }
    let page = page_size();
    let base = region.as_ptr() as usize;
    let first = (base + offset) / page * page;
    let last = (base + end - 1) / page * page;
    let pages = (last - first) / page + 1;
    let mut vec = [0u8; PAGES];
    let check = |at: usize, n: usize, vec: &mut [u8]| -> Option<bool> {
        // SAFETY: `at` is page-aligned, and the `n` pages from it overlap
        // `region` (a live mapping of this process, or memory it owns):
        // `mincore` only reports on them, writing one byte a page into
        // `vec`, which holds at least `n`.
        let rc =
            unsafe { libc::mincore(at as *mut libc::c_void, n * page, vec.as_mut_ptr().cast()) };
        (rc == 0).then(|| vec[..n].iter().all(|&b| b & 1 == 1))
    };
    if pages <= PAGES {
        check(first, pages, &mut vec)
    } else {
        Some(
            check(first, PAGES / 2, &mut vec)?
                && check(last + page - PAGES / 2 * page, PAGES / 2, &mut vec)?,
        )
    }
}

/// Clears `O_NONBLOCK` on `file` (opened with it so that a FIFO planted
/// under a shard's name cannot block the open): io_uring would otherwise
/// return `EAGAIN` for a read that has to wait for the drive.
pub(crate) fn clear_nonblock(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: `fcntl` on an open fd with integer arguments; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel not to read ahead of the reads of `file` (each read
/// then brings in only the pages it asks for). Advice only: an error is
/// ignored.
pub(crate) fn advise_random(file: &File) {
    #[cfg(target_os = "linux")]
    // SAFETY: advice on an open fd; no memory is passed.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// Bytes of one `POSIX_FADV_WILLNEED` of [`will_need`]: the kernel reads at
/// most the larger of the file's read-ahead and the device's largest
/// request per advice (often 128 KiB and 512 KiB–1 MiB) and drops the rest,
/// so a longer range is advised in pieces of this size.
pub(crate) const WILL_NEED_CHUNK: u64 = 512 << 10;

/// Asks the kernel to start reading `len` bytes of `file` at `offset` into
/// the page cache, without waiting for them (a prefetch), in pieces of
/// [`WILL_NEED_CHUNK`]. Advice only: an error is ignored.
pub(crate) fn will_need(file: &File, offset: u64, len: u64) {
    let end = offset.saturating_add(len);
    let mut at = offset;
    while at < end {
        let n = (end - at).min(WILL_NEED_CHUNK);
        #[cfg(target_os = "linux")]
        if let (Ok(o), Ok(l)) = (libc::off_t::try_from(at), libc::off_t::try_from(n)) {
            // SAFETY: advice on an open fd; no memory is passed.
            unsafe {
                libc::posix_fadvise(file.as_raw_fd(), o, l, libc::POSIX_FADV_WILLNEED);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = file;
        at += n;
    }
}

/// Whether io_uring has not failed in this process (tests).
#[cfg(test)]
pub(crate) fn uring_usable() -> bool {
    cfg!(target_os = "linux") && !uring_forced_off() && !URING_FAILED.load(Ordering::Relaxed)
}

/// Drops the clean cached pages of `file` (tests of cold reads); whether
/// the advice was taken.
#[cfg(test)]
pub(crate) fn evict(file: &File) -> bool {
    // SAFETY: advice on an open fd; no memory is passed.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn file_of(bytes: &[u8]) -> (tempfile::NamedTempFile, File) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f.flush().unwrap();
        let file = File::open(f.path()).unwrap();
        (f, file)
    }

    #[test]
    fn both_backends_read_every_request_whole() {
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let (_keep, file) = file_of(&bytes);
        // More requests than a ring holds, of many sizes, some repeated.
        let spans: Vec<(usize, usize)> = (0..700)
            .map(|k| ((k * 4099) % 290_000, 1 + (k * 37) % 9000))
            .map(|(at, len)| (at, len.min(bytes.len() - at)))
            .collect();
        for pread_only in [false, true] {
            let mut bufs: Vec<Vec<u8>> = spans.iter().map(|&(_, l)| vec![0; l]).collect();
            let mut reqs: Vec<ReadReq<'_>> = spans
                .iter()
                .zip(bufs.iter_mut())
                .map(|(&(at, _), b)| ReadReq::new(&file, at as u64, b))
                .collect();
            let backend = read_all(&mut reqs, pread_only).unwrap();
            if pread_only {
                assert_eq!(backend, Backend::Pread);
            }
            drop(reqs);
            for (b, &(at, len)) in bufs.iter().zip(&spans) {
                assert_eq!(&b[..], &bytes[at..at + len]);
            }
        }
    }

    #[test]
    fn a_read_past_the_end_is_refused_naming_its_request() {
        let (_keep, file) = file_of(&[7u8; 10_000]);
        for pread_only in [false, true] {
            let mut a = vec![0u8; 100];
            let mut b = vec![0u8; 100];
            let mut reqs = vec![
                ReadReq::new(&file, 0, &mut a),
                ReadReq::new(&file, 9_950, &mut b),
            ];
            let (i, e) = read_all(&mut reqs, pread_only).unwrap_err();
            assert_eq!(i, 1);
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        }
    }

    #[test]
    fn residency_of_owned_memory_is_known() {
        let v = vec![1u8; 1 << 20];
        // Written pages of the heap are resident.
        assert_eq!(resident(&v, 4096, 8192), Some(true));
        assert_eq!(resident(&v, 0, v.len()), Some(true));
        assert_eq!(resident(&v, v.len(), 1), None);
    }
}
