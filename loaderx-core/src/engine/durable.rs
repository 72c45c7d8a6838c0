//! Durability primitives: syncing files and directories, and renaming a
//! directory into place without replacing anything.
//!
//! Every call goes through [`fail_point`], which tests arm to make one
//! operation fail (as ENOSPC, EIO or EMFILE would) on the calling thread.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Named places where a test can inject a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// Creating file number `n` of a new store (0 is `meta.zr`).
    CreateFile(usize),
    /// Renaming the staged store directory to its name.
    Rename,
    /// The last sync of `meta.zr`, after the published header was written.
    PublishSync,
}

#[cfg(test)]
thread_local! {
    static ARMED: std::cell::RefCell<Vec<Point>> = const { std::cell::RefCell::new(Vec::new()) };
    static SYNCED: std::cell::RefCell<Vec<std::path::PathBuf>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Makes `point` fail once on this thread (tests only).
#[cfg(test)]
pub(crate) fn arm(point: Point) {
    ARMED.with(|a| a.borrow_mut().push(point));
}

/// Directories synced on this thread since the last call (tests only).
#[cfg(test)]
pub(crate) fn take_synced_dirs() -> Vec<std::path::PathBuf> {
    SYNCED.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// Fails when a test armed `point`; a no-op otherwise.
pub(crate) fn fail_point(point: Point) -> io::Result<()> {
    #[cfg(test)]
    {
        let hit = ARMED.with(|a| {
            let mut a = a.borrow_mut();
            a.iter().position(|&p| p == point).map(|i| a.remove(i))
        });
        if hit.is_some() {
            return Err(io::Error::other(format!("injected failure at {point:?}")));
        }
    }
    let _ = point;
    Ok(())
}

/// `fsync` of a directory, so the names created in it survive a power loss.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(test)]
    SYNCED.with(|s| s.borrow_mut().push(dir.to_path_buf()));
    File::open(dir)?.sync_all()
}

/// Renames `from` to `to` only if `to` does not exist (`EEXIST` otherwise),
/// atomically where the file system supports `RENAME_NOREPLACE` (ext4, xfs,
/// btrfs, tmpfs and most others on Linux), else after a check.
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    fail_point(Point::Rename)?;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
    };
    let (cfrom, cto) = (c(from)?, c(to)?);
    // SAFETY: both pointers are NUL-terminated strings that live across the
    // call; renameat2 reads them and keeps nothing.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            cfrom.as_ptr(),
            libc::AT_FDCWD,
            cto.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // The file system (or kernel) has no RENAME_NOREPLACE: check, then
        // rename (which still refuses a non-empty target directory).
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
            if std::fs::symlink_metadata(to).is_ok() {
                return Err(io::Error::from_raw_os_error(libc::EEXIST));
            }
            std::fs::rename(from, to)
        }
        _ => Err(e),
    }
}

/// Whether `e` says the target of a rename or create already exists.
pub(crate) fn is_exists(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AlreadyExists
        || e.kind() == io::ErrorKind::DirectoryNotEmpty
        || e.raw_os_error() == Some(libc::ENOTEMPTY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let e = rename_noreplace(&a, &b).unwrap_err();
        assert!(is_exists(&e), "{e}");
        std::fs::remove_dir(&b).unwrap();
        rename_noreplace(&a, &b).unwrap();
        assert!(b.is_dir() && !a.exists());
    }
}
