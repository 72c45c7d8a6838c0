//! File naming, locks and memory maps.
//!
//! Locks are `flock`s on `meta.zr`, exactly as Python loaderx takes them, so
//! the two implementations exclude each other: a writer holds
//! `LOCK_EX | LOCK_NB`, readers hold `LOCK_SH | LOCK_NB`; a busy lock is an
//! [`ErrorKind::Busy`] error, never a wait.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use memmap2::{Mmap, MmapOptions};

use crate::error::{Error, ErrorKind};

/// Takes the lifetime lock of a store on its open `meta.zr`.
pub(crate) fn lock(meta: &File, store: &Path, exclusive: bool) -> Result<(), Error> {
    let result = if exclusive {
        meta.try_lock()
    } else {
        meta.try_lock_shared()
    };
    match result {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(ErrorKind::Busy {
            path: store.to_path_buf(),
        }
        .into()),
        Err(TryLockError::Error(e)) => Err(Error::io(store.join(crate::format::META_FILE), e)),
    }
}

/// Opens one file of a store read-only, refusing anything but a regular
/// file: `O_NONBLOCK` keeps a FIFO (or a device) planted under a store's
/// name from blocking the open, and the type is checked on the open file.
/// Returns the file and its length; `Ok(None)` when the file does not exist.
pub(crate) fn open_regular(path: &Path) -> Result<Option<(File, u64)>, Error> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_file() {
        return Err(Error::corrupt(path, "not a regular file"));
    }
    Ok(Some((file, meta.len())))
}

/// Maps the first `len` bytes of `file` read-only; `None` when `len` is zero.
///
/// The caller has checked that the file is at least `len` bytes long.
pub(crate) fn map(file: &File, len: u64, path: &Path) -> Result<Option<Mmap>, Error> {
    if len == 0 {
        return Ok(None);
    }
    let len = usize::try_from(len)
        .map_err(|_| Error::corrupt(path, "file too large to map on this platform"))?;
    // SAFETY: memmap2 requires that the mapped file is not modified or truncated
    // while mapped. Published stores are immutable: loaderx (this crate and the
    // Python package) never writes to a published store, creators refuse
    // existing paths, and every reader holds a shared flock on meta.zr for the
    // whole life of the map, which keeps loaderx writers out. A foreign process
    // truncating the files behind loaderx's back is outside that contract and
    // documented as such (it would raise SIGBUS, as with NumPy's mmap_mode).
    let map = unsafe { MmapOptions::new().len(len).map(file) };
    map.map(Some)
        .map_err(|e| Error::io(path, map_error(e, len)))
}

/// The error of a map of `len` bytes that failed with `e`: `ENOMEM` from
/// `mmap` is no shortage of memory (nothing is read) but of mappings or
/// address space, and says which limits those are.
fn map_error(e: std::io::Error, len: usize) -> std::io::Error {
    if e.raw_os_error() != Some(libc::ENOMEM) {
        return e;
    }
    let max_maps = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned());
    std::io::Error::new(
        std::io::ErrorKind::OutOfMemory,
        format!(
            "cannot map {len} bytes: the process has used up its memory maps (each open store \
             maps its location table and every payload shard; the limit is vm.max_map_count, \
             {max_maps} here) or its address space (RLIMIT_AS, `ulimit -v`); open fewer stores \
             or parts, or raise the limit ({e})"
        ),
    )
}
