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
pub(crate) use crate::engine::scratch::AlignedBuf;

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
    /// Bytes that must be read: `len`, or less for an `O_DIRECT` read
    /// rounded up past the end of the file ([`Self::direct`]).
    need: usize,
    /// The alignment of `O_DIRECT` reads (1 for buffered ones): a short
    /// read that leaves `done` unaligned met the end of the file.
    align: usize,
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
            need: dst.len(),
            align: 1,
            _borrows: PhantomData,
        }
    }

    /// An `O_DIRECT` read of `dst.len()` bytes (a multiple of `align`,
    /// as `offset` and `dst`'s address are) of `file` from `offset`, of
    /// which the first `need` must be read: the rest may lie past the end
    /// of the file.
    pub(crate) fn direct(
        file: &'a File,
        offset: u64,
        dst: &'a mut [u8],
        need: usize,
        align: usize,
    ) -> ReadReq<'a> {
        ReadReq {
            need: need.min(dst.len()),
            align: align.max(1),
            ..ReadReq::new(file, offset, dst)
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

    /// Counts `n` more bytes read ([`progress`]).
    fn advance(&mut self, n: usize) -> io::Result<bool> {
        progress(&mut self.done, n, self.len, self.need, self.align)
    }
}

/// Counts `n` more bytes of a read of `len` bytes, `done` so far, of which
/// `need` must be read: `Ok(true)` once it is whole (or met the end of the
/// file past `need`), `Ok(false)` to continue it. A read of nothing, or an
/// `O_DIRECT` read (`align` > 1) that stopped at an unaligned length, met
/// the end of the file: `Err` when that is before `need` (the file is
/// shorter than it was: truncated after open).
fn progress(done: &mut usize, n: usize, len: usize, need: usize, align: usize) -> io::Result<bool> {
    *done += n;
    if n == 0 || !done.is_multiple_of(align.max(1)) {
        return if *done >= need {
            Ok(true)
        } else {
            Err(short(*done, need))
        };
    }
    Ok(*done >= len)
}

/// What a ring's completion `res` means for its read: `Ok(false)` to ask
/// again (`EAGAIN` from a file that cannot wait, an interrupt), an error,
/// or `advance` of the bytes read.
#[cfg(target_os = "linux")]
fn completion(res: i32, advance: impl FnOnce(usize) -> io::Result<bool>) -> io::Result<bool> {
    if res == -libc::EAGAIN || res == -libc::EINTR {
        Ok(false)
    } else if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        advance(res as usize)
    }
}

/// The error of a read that stopped at `done` of `len` bytes.
fn short(done: usize, len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("read {done} of {len} bytes: the file ends early (truncated after open?)"),
    )
}

/// Whether the environment variable `name` is set to anything but `0` or
/// empty (the switches `LOADERX_NO_IO_URING`, `LOADERX_NO_O_DIRECT`).
pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// True when `LOADERX_NO_IO_URING` is set: reads go to the `pread` pool.
fn uring_forced_off() -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    *OFF.get_or_init(|| env_flag("LOADERX_NO_IO_URING"))
}

/// Whether a ring may be used: not `pread_only`, not forced off, and no
/// ring failed to be made in this process.
fn uring_allowed(pread_only: bool) -> bool {
    !pread_only && !uring_forced_off() && !URING_FAILED.load(Ordering::Relaxed)
}

/// A new ring of [`RING_ENTRIES`]; `None` when one cannot be made
/// (`ENOSYS`, `EPERM`, `ENOMEM`: io_uring is then off for the process).
#[cfg(target_os = "linux")]
fn new_ring() -> Option<io_uring::IoUring> {
    let ring = io_uring::IoUring::new(RING_ENTRIES).ok();
    if ring.is_none() {
        URING_FAILED.store(true, Ordering::Relaxed);
    }
    ring
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
    if uring_allowed(pread_only) {
        let done = RING.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.is_none() {
                *cell = Some(new_ring()?);
            }
            cell.as_mut().map(|ring| uring::read(ring, reqs))
        });
        if let Some(done) = done {
            return done.map(|()| Backend::Uring);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (pread_only, uring_allowed);
    pread_all(reqs).map(|()| Backend::Pread)
}

#[cfg(target_os = "linux")]
thread_local! {
    /// This thread's ring, made on its first read.
    static RING: RefCell<Option<io_uring::IoUring>> = const { RefCell::new(None) };
}

/// Submits what `ring` has queued and waits for `want` completions,
/// retrying interruptions. Any other error leaves `in_flight` reads (of
/// `what`) that the kernel owns unaccounted for: their buffers cannot be
/// released, and the process aborts (see the module doc).
#[cfg(target_os = "linux")]
fn enter_or_abort(ring: &mut io_uring::IoUring, want: usize, in_flight: usize, what: &str) {
    loop {
        match ring.submit_and_wait(want) {
            Ok(_) => return,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) => {}
            Err(e) => {
                eprintln!(
                    "loaderx: io_uring_enter failed with {in_flight} {what} in flight: {e}; \
                     aborting (their buffers cannot be released)"
                );
                std::process::abort();
            }
        }
    }
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
            super::enter_or_abort(self.ring, want, self.in_flight, "reads");
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
                let step = completion(res, |n| reqs[i].advance(n));
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

/// One read of an [`OwnedReads`]: `len` bytes (a multiple of `align`) of
/// `file` from `offset` into the group's buffer at `at`, of which the first
/// `need` must be read (the rest may lie past the end of the file).
pub(crate) struct OwnedRead {
    pub(crate) file: std::sync::Arc<File>,
    pub(crate) offset: u64,
    pub(crate) at: usize,
    pub(crate) len: usize,
    pub(crate) need: usize,
    pub(crate) align: usize,
}

/// What [`OwnedReads::on_done`] is told: the buffer, and the first failed
/// read's index and error, if one failed.
pub(crate) type OwnedDone = Box<dyn FnOnce(AlignedBuf, Option<(usize, io::Error)>) + Send>;

/// Reads that own their buffer and files: the look-ahead's, which the
/// calling thread's ring keeps in flight after [`submit_owned`] returns.
/// Every read lies within `buf` (`at + len <= buf.len()`); `on_done` runs
/// on the submitting thread once all of them are done (or one failed and
/// the others finished), with the buffer.
pub(crate) struct OwnedReads {
    pub(crate) buf: AlignedBuf,
    pub(crate) reads: Vec<OwnedRead>,
    pub(crate) on_done: OwnedDone,
}

impl OwnedReads {
    /// Reads every read now, on this thread ([`read_all`]), and runs
    /// `on_done`: where no ring is to be had.
    fn run_now(mut self, pread_only: bool) {
        let failed = {
            let OwnedReads { buf, reads, .. } = &mut self;
            let mut pieces: Vec<(&OwnedRead, &mut [u8])> = Vec::with_capacity(reads.len());
            let mut order: Vec<usize> = (0..reads.len()).collect();
            order.sort_unstable_by_key(|&i| reads[i].at);
            let mut rest = buf.as_mut_slice();
            let mut at = 0usize;
            let mut bad = None;
            for &i in &order {
                let r = &reads[i];
                let Some(skip) = r.at.checked_sub(at) else {
                    bad = Some(i);
                    break;
                };
                if skip.checked_add(r.len).is_none_or(|n| n > rest.len()) {
                    bad = Some(i);
                    break;
                }
                let (_, tail) = std::mem::take(&mut rest).split_at_mut(skip);
                let (d, tail) = tail.split_at_mut(r.len);
                rest = tail;
                at = r.at + r.len;
                pieces.push((r, d));
            }
            if let Some(i) = bad {
                Some((i, io::Error::other("overlapping or out-of-buffer reads")))
            } else {
                let mut reqs: Vec<ReadReq<'_>> = pieces
                    .into_iter()
                    .map(|(r, d)| ReadReq::direct(&r.file, r.offset, d, r.need, r.align))
                    .collect();
                read_all(&mut reqs, pread_only)
                    .err()
                    .map(|(k, e)| (order[k], e))
            }
        };
        (self.on_done)(self.buf, failed);
    }
}

/// Starts `group`'s reads on this thread's look-ahead ring and returns
/// once they are all handed to the kernel (waiting for earlier reads to
/// complete while the ring is full); their completions are taken by later
/// calls of this function or of [`reap_owned`] on this thread. Where no
/// ring is to be had (or with `pread_only`) the reads are made now.
pub(crate) fn submit_owned(group: OwnedReads, pread_only: bool) {
    #[cfg(target_os = "linux")]
    if uring_allowed(pread_only) {
        let group = OWNED.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.is_none() {
                match new_ring() {
                    Some(ring) => *cell = Some(owned::Ring::new(ring)),
                    None => return Some(group),
                }
            }
            match cell.as_mut() {
                Some(ring) => {
                    ring.submit(group);
                    None
                }
                None => Some(group),
            }
        });
        match group {
            None => return,
            Some(g) => return g.run_now(true),
        }
    }
    group.run_now(pread_only);
}

/// Takes the completions of this thread's look-ahead reads that are done;
/// with `all`, waits for every one still in flight. Groups done have run
/// their `on_done`.
pub(crate) fn reap_owned(all: bool) {
    #[cfg(target_os = "linux")]
    {
        // Taken out of its cell while reaping: an `on_done` that submits
        // again on this thread finds none, and reads at once.
        let Ok(Some(mut ring)) = OWNED.try_with(|c| c.borrow_mut().take()) else {
            return;
        };
        ring.reap(all);
        let _ = OWNED.try_with(|c| {
            let mut c = c.borrow_mut();
            if c.is_none() {
                *c = Some(ring);
            }
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = all;
}

/// Whether this thread has look-ahead reads in flight.
pub(crate) fn owned_in_flight() -> bool {
    #[cfg(target_os = "linux")]
    {
        OWNED
            .try_with(|c| {
                c.try_borrow()
                    .is_ok_and(|r| r.as_ref().is_some_and(owned::Ring::busy))
            })
            .unwrap_or(false)
    }
    #[cfg(not(target_os = "linux"))]
    false
}

#[cfg(target_os = "linux")]
thread_local! {
    /// This thread's ring for the look-ahead's owned reads.
    static OWNED: RefCell<Option<owned::Ring>> = const { RefCell::new(None) };
}

/// Most owned reads one thread keeps in flight: small records reach the
/// drive's best IOPS at 128 (`fio`'s best at 4 KiB and 8 KiB; the
/// look-ahead's interleaved runs at 4 KiB and 8 KiB records gave 1.0–1.2×
/// their rate at 64), and [`OWNED_BYTES`] bounds larger ones (64 KiB
/// records: 128 in flight, within the rate at 64).
pub(crate) const OWNED_IN_FLIGHT: usize = 128;

/// Most bytes one thread's owned reads in flight ask for (a read larger
/// than this goes alone): what large records need to keep the drive busy
/// (`fio`: 1 MiB reads at depth 4 to 32), and memory the look-ahead's
/// bound (`prefetch_bytes`) counts before it is read.
pub(crate) const OWNED_BYTES: usize = 8 << 20;

#[cfg(target_os = "linux")]
mod owned {
    use super::*;
    use io_uring::{IoUring, opcode, types};
    use std::collections::VecDeque;

    /// A group in flight: its reads' progress, and what to do when done.
    struct Group {
        reads: OwnedReads,
        done: Vec<usize>,
        /// Bytes each read's submission in flight asks for.
        asked: Vec<usize>,
        /// Reads not finished (read whole, or failed).
        left: usize,
        failed: Option<(usize, io::Error)>,
    }

    /// A thread's ring of owned reads. Every buffer and file a read in
    /// flight uses is owned by a group of `groups` until its completion is
    /// taken, and the ring is not dropped before every completion is
    /// (`Drop` waits for them).
    pub(super) struct Ring {
        ring: IoUring,
        groups: Vec<Option<Group>>,
        free: Vec<usize>,
        /// `(group, read)` to submit.
        queue: VecDeque<(usize, usize)>,
        in_flight: usize,
        /// Bytes the reads in flight ask for.
        bytes_in_flight: usize,
    }

    impl Ring {
        pub(super) fn new(ring: IoUring) -> Ring {
            Ring {
                ring,
                groups: Vec::new(),
                free: Vec::new(),
                queue: VecDeque::new(),
                in_flight: 0,
                bytes_in_flight: 0,
            }
        }

        pub(super) fn busy(&self) -> bool {
            self.in_flight > 0 || !self.queue.is_empty()
        }

        /// Queues `group`'s reads and submits until every one is in flight.
        pub(super) fn submit(&mut self, group: OwnedReads) {
            let n = group.reads.len();
            let bad = group
                .reads
                .iter()
                .position(|r| r.at.checked_add(r.len).is_none_or(|e| e > group.buf.len()));
            let g = Group {
                done: vec![0; n],
                asked: vec![0; n],
                left: n,
                failed: bad.map(|i| (i, io::Error::other("a read outside its buffer"))),
                reads: group,
            };
            if n == 0 || bad.is_some() {
                return finish(g);
            }
            let id = match self.free.pop() {
                Some(id) => {
                    self.groups[id] = Some(g);
                    id
                }
                None => {
                    self.groups.push(Some(g));
                    self.groups.len() - 1
                }
            };
            self.queue.extend((0..n).map(|k| (id, k)));
            self.pump();
            while !self.queue.is_empty() {
                self.wait(1);
                self.take_completions();
                self.pump();
            }
            self.take_completions();
        }

        /// Takes what has completed; with `all`, until nothing is in flight.
        pub(super) fn reap(&mut self, all: bool) {
            loop {
                self.pump();
                self.take_completions();
                if !all || !self.busy() {
                    return;
                }
                self.wait(1);
            }
        }

        /// Submits queued reads while fewer than [`OWNED_IN_FLIGHT`] are
        /// in flight and the submission queue has room.
        fn pump(&mut self) {
            let mut pushed = false;
            {
                let mut sq = self.ring.submission();
                while self.in_flight < OWNED_IN_FLIGHT
                    && (self.in_flight == 0 || self.bytes_in_flight < OWNED_BYTES)
                {
                    let Some((id, k)) = self.queue.pop_front() else {
                        break;
                    };
                    let Some(g) = self.groups[id].as_mut() else {
                        continue;
                    };
                    let r = &g.reads.reads[k];
                    let done = g.done[k];
                    let len = (r.len - done).min(MAX_READ);
                    let ptr = g.reads.buf.as_mut_ptr().wrapping_add(r.at + done);
                    let entry = opcode::Read::new(types::Fd(r.file.as_raw_fd()), ptr, len as u32)
                        .offset(r.offset + done as u64)
                        .build()
                        .user_data(((id as u64) << 32) | k as u64);
                    // SAFETY: the entry reads `len` bytes into the group's
                    // buffer at `at + done` (within it: checked in
                    // `submit`), memory the group owns; the group stays in
                    // `groups`, its buffer unmoved (a heap allocation) and
                    // its file open (an `Arc` it holds), until this read's
                    // completion is taken (`left` counts it), and the ring
                    // is not dropped before (`Drop` waits).
                    if unsafe { sq.push(&entry) }.is_err() {
                        self.queue.push_front((id, k));
                        break;
                    }
                    self.in_flight += 1;
                    self.bytes_in_flight += len;
                    g.asked[k] = len;
                    pushed = true;
                }
            }
            if pushed {
                self.enter(0);
            }
        }

        /// Submits what is queued and waits for `want` completions,
        /// retrying interruptions; any other error leaves reads the kernel
        /// owns unaccounted for, and the process aborts.
        fn enter(&mut self, want: usize) {
            super::enter_or_abort(&mut self.ring, want, self.in_flight, "look-ahead reads");
        }

        fn wait(&mut self, want: usize) {
            if self.in_flight > 0 {
                self.enter(want);
            }
        }

        /// Accounts every completion in the queue; runs the `on_done` of
        /// the groups that finished.
        fn take_completions(&mut self) {
            let completions: Vec<(u64, i32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (data, res) in completions {
                self.in_flight -= 1;
                let (id, k) = ((data >> 32) as usize, (data & 0xffff_ffff) as usize);
                let Some(g) = self.groups.get_mut(id).and_then(Option::as_mut) else {
                    continue;
                };
                self.bytes_in_flight -= g.asked[k].min(self.bytes_in_flight);
                let r = &g.reads.reads[k];
                let done = &mut g.done[k];
                let step = completion(res, |n| progress(done, n, r.len, r.need, r.align));
                match step {
                    Ok(false) if g.failed.is_none() => self.queue.push_back((id, k)),
                    Ok(false) | Ok(true) => g.left -= 1,
                    Err(e) => {
                        g.failed.get_or_insert((k, e));
                        g.left -= 1;
                    }
                }
                if g.left == 0
                    && let Some(g) = self.groups[id].take()
                {
                    self.free.push(id);
                    finish(g);
                }
            }
        }
    }

    /// Runs a finished group's `on_done`.
    fn finish(g: Group) {
        let OwnedReads { buf, on_done, .. } = g.reads;
        on_done(buf, g.failed);
    }

    impl Drop for Ring {
        fn drop(&mut self) {
            // Nothing queued is submitted any more; what is in flight is
            // waited for before the groups (and their buffers) go.
            self.queue.clear();
            while self.in_flight > 0 {
                self.enter(1);
                self.take_completions();
            }
            for mut g in self.groups.iter_mut().filter_map(Option::take) {
                g.failed
                    .get_or_insert((0, io::Error::other("the reading thread ended")));
                finish(g);
            }
        }
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
        if r.advance(n as usize)? {
            // Whole, or an `O_DIRECT` read that met the end of the file
            // past what it needs.
            break;
        }
    }
    Ok(())
}

/// Opens `path` for `O_DIRECT` reads when its file system allows them:
/// `Some((file, align))` with the alignment reads need (of their offset,
/// length and memory; from `statx`'s `STATX_DIOALIGN`, else 4096), `None`
/// when `O_DIRECT` is refused (tmpfs, some network file systems) or the
/// file is not `id` (`(device, inode)`: replaced since the store opened).
pub(crate) fn open_direct(path: &std::path::Path, id: (u64, u64)) -> Option<(File, usize)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT | libc::O_NONBLOCK)
            .open(path)
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() || (meta.dev(), meta.ino()) != id {
            return None;
        }
        clear_nonblock(&file).ok()?;
        let align = dio_align(&file).unwrap_or(4096);
        (align > 0 && align <= AlignedBuf::ALIGN && align.is_power_of_two())
            .then_some((file, align))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (path, id);
        None
    }
}

/// The offset alignment of `O_DIRECT` reads of `file` (`statx`'s
/// `STATX_DIOALIGN`): `Some(0)` when the file system refuses them, `None`
/// when the kernel does not say.
#[cfg(target_os = "linux")]
fn dio_align(file: &File) -> Option<usize> {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `statx` on an open fd with an empty path (`AT_EMPTY_PATH`)
    // writes one `struct statx` into `stx`, which is that large.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            stx.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: zeroed, then written by a successful `statx`.
    let stx = unsafe { stx.assume_init() };
    if stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    let (mem, off) = (
        stx.stx_dio_mem_align as usize,
        stx.stx_dio_offset_align as usize,
    );
    if mem == 0 || off == 0 {
        return Some(0);
    }
    Some(mem.max(off))
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
    cfg!(target_os = "linux") && uring_allowed(false)
}

/// Drops the clean cached pages of `file` (tests of cold reads); whether
/// the advice was taken.
#[cfg(test)]
pub(crate) fn evict(file: &File) -> bool {
    // SAFETY: advice on an open fd; no memory is passed.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) == 0 }
}

/// The CPU time every thread of this process has used so far
/// (`CLOCK_PROCESS_CPUTIME_ID`); `None` where the clock cannot be read.
pub(crate) fn process_cpu() -> Option<std::time::Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` into `ts`, which is one.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| {
        std::time::Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        )
    })
}

/// `(resident, total)`: how many of the pages of `file` (its current
/// length) are in the page cache (`mincore` on a read-only map of it);
/// `None` when it cannot be mapped or `mincore` fails. An empty file is
/// `(0, 0)`.
pub(crate) fn resident_pages(file: &File) -> Option<(u64, u64)> {
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len == 0 {
        return Some((0, 0));
    }
    // SAFETY: a read-only map that is never read through: only `mincore`
    // looks at its pages' residency, so a file changed or truncated by
    // another process cannot fault this one.
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    let page = page_size();
    let pages = len.div_ceil(page);
    const CHUNK: usize = 1 << 16;
    let mut vec = vec![0u8; CHUNK.min(pages)];
    let mut resident = 0u64;
    let base = map.as_ptr() as usize;
    let mut at = 0;
    while at < pages {
        let n = CHUNK.min(pages - at);
        // SAFETY: `base + at * page` is page-aligned (a map starts on a
        // page) and the `n` pages from it lie inside the live map `map`;
        // `mincore` writes one byte a page into `vec`, which holds `n`.
        let rc = unsafe {
            libc::mincore(
                (base + at * page) as *mut libc::c_void,
                n * page,
                vec.as_mut_ptr().cast(),
            )
        };
        if rc != 0 {
            return None;
        }
        resident += vec[..n].iter().filter(|&&b| b & 1 == 1).count() as u64;
        at += n;
    }
    Some((resident, pages as u64))
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
    fn owned_reads_complete_whole_or_report_the_read_that_failed() {
        use std::sync::{Arc, Mutex};
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 13 + i / 97) as u8).collect();
        let (_keep, file) = file_of(&bytes);
        let file = Arc::new(file);
        for pread_only in [false, true] {
            // Each group's bytes, and the index of its read that failed.
            type Done = Vec<(Vec<u8>, Option<usize>)>;
            let got: Arc<Mutex<Done>> = Arc::default();
            // Many groups (more reads than a ring keeps in flight), the last
            // with a read past the end of the file.
            for g in 0..40usize {
                let spans: Vec<(u64, usize)> = (0..9)
                    .map(|k| {
                        (
                            ((g * 9 + k) * 4099 % 190_000) as u64,
                            1 + (g * 31 + k * 7) % 9000,
                        )
                    })
                    .map(|(at, len)| (at, len.min(bytes.len() - at as usize)))
                    .collect();
                let mut spans = spans;
                if g == 39 {
                    spans.push((199_990, 100));
                }
                let total: usize = spans.iter().map(|s| s.1).sum();
                let mut at = 0;
                let reads: Vec<OwnedRead> = spans
                    .iter()
                    .map(|&(offset, len)| {
                        let r = OwnedRead {
                            file: Arc::clone(&file),
                            offset,
                            at,
                            len,
                            need: len,
                            align: 1,
                        };
                        at += len;
                        r
                    })
                    .collect();
                let sink = Arc::clone(&got);
                submit_owned(
                    OwnedReads {
                        buf: AlignedBuf::take(total).unwrap(),
                        reads,
                        on_done: Box::new(move |buf, failed| {
                            let bytes = buf.as_slice().to_vec();
                            sink.lock().unwrap().push((bytes, failed.map(|f| f.0)));
                        }),
                    },
                    pread_only,
                );
                let want: Vec<u8> = spans
                    .iter()
                    .flat_map(|&(o, l)| {
                        bytes[(o as usize).min(bytes.len())..(o as usize + l).min(bytes.len())]
                            .to_vec()
                    })
                    .collect();
                reap_owned(true);
                assert!(!owned_in_flight());
                let (read, failed) = got.lock().unwrap().pop().expect("done once reaped");
                if g == 39 {
                    assert_eq!(failed, Some(9), "the read past the end");
                } else {
                    assert_eq!(failed, None);
                    assert_eq!(read, want, "group {g}");
                }
            }
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
