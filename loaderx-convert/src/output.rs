//! Building a converter's output root atomically.
//!
//! A root is built in a hidden sibling `.{name}.tmp-{pid}-{n}` (`n` counts
//! the roots this process started, so two conversions to one target never
//! share a directory), made durable (every directory of the tree synced),
//! and renamed into place without ever replacing an existing target: on
//! Linux with `renameat2(RENAME_NOREPLACE)`, elsewhere (or on a file system
//! without it) after a check that the target is absent. The parent
//! directory is synced after the rename, so a published root survives a
//! crash.
//!
//! Its writer holds an advisory lock on the file `.{name}.tmp-{pid}-{n}.lock`
//! beside it for as long as the directory exists (made before it, removed
//! after it; the system lets go of the lock when the process dies). A
//! conversion to `name` first removes what dead writers of `name` left
//! (a process killed with `SIGKILL` runs no cleanup): every staging
//! directory (`.{name}.tmp-…`, and `.{name}.spool-…` of
//! [`convert_record_batches`](crate::table::convert_record_batches)) whose
//! lock file it can lock, and one without a lock file (an earlier version's)
//! whose process no longer runs on this machine. A live writer's staging,
//! whose lock is held, is never touched, also across machines sharing the
//! directory where the file system's locks are shared (NFSv4, CephFS,
//! Lustre).

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;

/// A converter output under construction: a hidden sibling directory of the
/// final root, renamed into place by [`StagedRoot::publish`]. Dropping it
/// unpublished removes it.
#[derive(Debug)]
pub struct StagedRoot {
    temp: PathBuf,
    target: PathBuf,
    _staging: Staging,
}

/// The kinds of staging directory a writer of a root makes beside it:
/// `.{name}.{kind}-{pid}-…`.
const STAGING_KINDS: [&str; 2] = ["tmp", "spool"];

/// A hidden working directory beside an output root,
/// `.{name}.{kind}-{pid}-{n}`, held by its writer through an advisory lock
/// on the file beside it with `.lock` appended (see the [module
/// documentation](self)); removed, with its lock file, when dropped.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: PathBuf,
    lock: PathBuf,
    _file: fs::File,
}

impl Staging {
    /// Removes the staging that dead writers of `target` left beside it,
    /// then makes a fresh `.{name}.{kind}-{pid}-{n}` and its lock.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOption`] when `target` has no final name;
    /// [`Error::Io`] when the parent, the lock or the directory cannot be
    /// made.
    pub(crate) fn create(target: &Path, kind: &str) -> Result<Staging, Error> {
        let name = target
            .file_name()
            .ok_or_else(|| Error::invalid(format!("{} has no final name", target.display())))?
            .to_string_lossy()
            .into_owned();
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        remove_dead_staging(parent, &name);
        // A fresh name per directory (`n` counts those this process made):
        // a name taken (a writer with the same pid on another machine, a
        // dead one's leftovers) is skipped, never reused.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = parent.join(format!(".{name}.{kind}-{}-{n}", std::process::id()));
            let lock = lock_path(&dir);
            let file = match fs::OpenOptions::new()
                .create_new(true)
                .write(true)
                .open(&lock)
            {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&lock, e)),
            };
            // Locked before the directory exists; a cleaner that locked the
            // new file first (and unlinked it) leaves a lock on no file.
            match file.try_lock() {
                Ok(()) if same_file(&file, &lock) => {}
                Ok(()) | Err(fs::TryLockError::WouldBlock) => continue,
                Err(fs::TryLockError::Error(e)) => {
                    let _ = fs::remove_file(&lock);
                    return Err(Error::io(&lock, e));
                }
            }
            match fs::create_dir(&dir) {
                Ok(()) => {
                    return Ok(Staging {
                        dir,
                        lock,
                        _file: file,
                    });
                }
                Err(e) => {
                    let _ = fs::remove_file(&lock);
                    if e.kind() != io::ErrorKind::AlreadyExists {
                        return Err(Error::io(&dir, e));
                    }
                }
            }
        }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Gone already when it was renamed into place. The lock file goes
        // last, while still held.
        let _ = fs::remove_dir_all(&self.dir);
        let _ = fs::remove_file(&self.lock);
    }
}

/// The lock file of staging directory `dir`.
fn lock_path(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// True when process `pid` runs on this machine (`/proc/<pid>` exists on
/// Linux; elsewhere every process is taken to run, so nothing is removed).
fn process_runs(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// Removes, in `parent`, the staging of dead writers of the root `name`
/// (see the [module documentation](self)); best effort: what cannot be
/// removed stays, as it did before.
fn remove_dead_staging(parent: &Path, name: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let prefixes: Vec<String> = STAGING_KINDS
        .iter()
        .map(|kind| format!(".{name}.{kind}-"))
        .collect();
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = prefixes
            .iter()
            .find_map(|p| file_name.strip_prefix(p.as_str()))
        else {
            continue;
        };
        let path = entry.path();
        if let Some(dir) = file_name.strip_suffix(".lock") {
            let dir = parent.join(dir);
            let Ok(file) = fs::OpenOptions::new().write(true).open(&path) else {
                continue;
            };
            // Held: a live writer. Else its writer died: the directory,
            // then (still locked) its lock file.
            if file.try_lock().is_ok() && same_file(&file, &path) {
                let removed = match fs::remove_dir_all(&dir) {
                    Ok(()) => true,
                    Err(e) => e.kind() == io::ErrorKind::NotFound,
                };
                if removed {
                    let _ = fs::remove_file(&path);
                }
            }
        } else if !lock_path(&path).exists() {
            // No lock file: an earlier version's, or one whose writer died
            // between making its lock and its directory (a live writer's
            // directory always has its lock file).
            // `{pid}-{n}` (a spool's: `{pid}-{hex}-{k}`), not another
            // root's staging whose name begins like this one's.
            let ours = rest.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
            let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
            if ours
                && pid.is_some_and(|pid| !process_runs(pid))
                && entry.file_type().is_ok_and(|t| t.is_dir())
            {
                let _ = fs::remove_dir_all(&path);
            }
        }
    }
}

/// Checks that a name taken from source data (split, config, column) is one
/// plain path component: not empty, `.` or `..`, without separators, NUL or
/// a leading dot, so it can never escape the output root.
///
/// # Errors
///
/// [`Error::UnsafeName`] for any other name.
pub fn safe_component(kind: &'static str, name: &str) -> Result<(), Error> {
    let mut components = Path::new(name).components();
    let plain =
        matches!(components.next(), Some(Component::Normal(_))) && components.next().is_none();
    if !plain || name.contains(['/', '\\', '\0']) || name.starts_with('.') {
        return Err(Error::UnsafeName {
            kind,
            name: name.to_owned(),
        });
    }
    Ok(())
}

impl StagedRoot {
    /// Starts building `target`, which must not exist yet.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] when `target` exists; [`Error::InvalidOption`] when it
    /// has no final name or is a store URL (`s3://…`: convert into a local
    /// directory, then push it); [`Error::Io`] when the hidden sibling cannot be made.
    pub fn new(target: impl AsRef<Path>) -> Result<StagedRoot, Error> {
        let target = target.as_ref().to_path_buf();
        // Never a local directory `s3:/…` named after a URL (and its password).
        if loaderx_core::is_url(&target.to_string_lossy()) {
            return Err(Error::invalid(format!(
                "{}: stores are converted into a local directory, not a URL: \
                 convert here, then push it",
                loaderx_core::redact_url(&target.to_string_lossy())
            )));
        }
        if fs::symlink_metadata(&target).is_ok() {
            return Err(Error::AlreadyExists { path: target });
        }
        let staging = Staging::create(&target, "tmp")?;
        Ok(StagedRoot {
            temp: staging.path().to_path_buf(),
            target,
            _staging: staging,
        })
    }

    /// Where store `split/column` is built (both names checked with [`safe_component`]).
    ///
    /// # Errors
    ///
    /// [`Error::UnsafeName`] for a name that is not one plain path component.
    pub fn store_path(&self, split: &str, column: &str) -> Result<PathBuf, Error> {
        safe_component("split", split)?;
        safe_component("column", column)?;
        Ok(self.temp.join(split).join(column))
    }

    /// The temporary directory.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Publishes the finished root of part writer `part` (a
    /// [`Dataset::part_name`](loaderx_core::Dataset::part_name)): every
    /// `temp/<split>` in `splits` is made durable and renamed to
    /// `out/<split>/<part>`, none ever replacing an existing one. When one
    /// cannot be (another writer published that part meanwhile), those
    /// already renamed are renamed back and the staged tree is removed:
    /// the part is published for every split or for none. Hold the part's
    /// [`PartLock`] while calling this.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] when `out/<split>/<part>` exists;
    /// [`Error::Io`] when syncing or renaming fails.
    pub fn publish_part(self, out: &Path, part: &str, splits: &[String]) -> Result<(), Error> {
        sync_tree(&self.temp)?;
        let mut moved: Vec<(PathBuf, PathBuf)> = Vec::new();
        for split in splits {
            let from = self.temp.join(split);
            let dir = out.join(split);
            let to = dir.join(part);
            let result = fs::create_dir_all(&dir)
                .map_err(|e| Error::io(&dir, e))
                .and_then(|()| rename_noreplace(&from, &to))
                .and_then(|()| sync_dir(&dir));
            if let Err(e) = result {
                // Renamed back: only the lock holder writes this part.
                for (from, to) in moved.iter().rev() {
                    if fs::symlink_metadata(from).is_err() {
                        let _ = fs::rename(to, from);
                    }
                }
                return Err(e);
            }
            moved.push((from, to));
        }
        // Now empty; `Drop` removes it.
        Ok(())
    }

    /// Makes the finished root durable and renames it into place. Fails
    /// with [`Error::AlreadyExists`] (and leaves the target alone) when
    /// something appeared at the target meanwhile.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] as above; [`Error::Io`] when syncing or renaming fails.
    pub fn publish(self) -> Result<PathBuf, Error> {
        sync_tree(&self.temp)?;
        rename_noreplace(&self.temp, &self.target)?;
        let parent = self
            .target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_dir(parent)?;
        Ok(self.target.clone())
    }
}

/// The environment variable that names a part writer's index when it runs
/// as a pod of a Kubernetes Indexed Job.
pub const PART_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// Resolves a converter's `--part I --parts N` options: `Some((I, N))` for
/// a part writer, `None` for a whole conversion. When `parts` is given
/// without `part`, `I` comes from the environment variable
/// `JOB_COMPLETION_INDEX` ([`PART_INDEX_ENV`]), which Kubernetes sets in
/// every pod of an Indexed Job, so `N` pods convert their parts with one
/// command line and no wrapper. The variable alone (without `parts`) is
/// ignored: a pod that runs a whole conversion stays one.
///
/// ```
/// use loaderx_convert::output::part_from_env;
/// assert_eq!(part_from_env(Some(1), Some(3))?, Some((1, 3)));
/// assert_eq!(part_from_env(None, None)?, None);
/// assert!(part_from_env(Some(3), Some(3)).is_err());
/// # Ok::<(), loaderx_convert::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::InvalidOption`] for `part` without `parts`, `parts` of 0, a
/// part index not below `parts`, `parts` without `part` and without the
/// variable, or a variable that is not a decimal part index.
pub fn part_from_env(part: Option<u64>, parts: Option<u64>) -> Result<Option<(u64, u64)>, Error> {
    let env = if part.is_none() && parts.is_some() {
        std::env::var_os(PART_INDEX_ENV)
    } else {
        None
    };
    resolve_part(part, parts, env.as_deref())
}

/// [`part_from_env`] with the variable's value given.
fn resolve_part(
    part: Option<u64>,
    parts: Option<u64>,
    env: Option<&std::ffi::OsStr>,
) -> Result<Option<(u64, u64)>, Error> {
    let Some(parts) = parts else {
        return match part {
            Some(_) => Err(Error::invalid(
                "--part needs --parts (the number of writers)",
            )),
            None => Ok(None),
        };
    };
    if parts == 0 {
        return Err(Error::invalid("--parts must be at least 1"));
    }
    let (part, from) = match (part, env) {
        (Some(part), _) => (part, "--part"),
        (None, Some(value)) => {
            let text = value.to_str().unwrap_or("");
            let part = text.trim().parse::<u64>().map_err(|_| {
                Error::invalid(format!(
                    "{PART_INDEX_ENV}={:?} is not a part index (a decimal number below --parts {parts})",
                    value.to_string_lossy()
                ))
            })?;
            (part, PART_INDEX_ENV)
        }
        (None, None) => {
            return Err(Error::invalid(format!(
                "--parts {parts} needs --part (or the environment variable {PART_INDEX_ENV}, \
                 as a Kubernetes Indexed Job sets it)"
            )));
        }
    };
    if part >= parts {
        return Err(Error::invalid(format!(
            "part {part} (from {from}) of {parts}: a part index runs from 0 to {}",
            parts - 1
        )));
    }
    Ok(Some((part, parts)))
}

/// Renames the finished directory `from` to `to`, which must not exist,
/// and syncs `to`'s parent: how a multi-part writer's staged split becomes
/// its part.
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `to` exists (another writer of the same
/// part); [`Error::Io`] when renaming or syncing fails.
pub fn move_into_place(from: &Path, to: &Path) -> Result<(), Error> {
    rename_noreplace(from, to)?;
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(())
}

/// The name of part `part`'s lock file in a part writer's output root.
fn part_lock_name(part: &str) -> String {
    format!(".{part}.lock")
}

/// True when `name` (an entry of `dir`, the output root when `in_root`)
/// is a staging directory a writer of part `part` made: `.{part}.tmp-…`
/// ([`StagedRoot`]'s, in the root or a split directory), or, in the root,
/// `.{part}.staged` and `..{part}.staged.tmp-…` (earlier versions').
fn is_part_staging(name: &str, part: &str, in_root: bool) -> bool {
    let tmp = format!(".{part}.tmp-");
    let staged = format!(".{part}.staged");
    let staged_tmp = format!("..{part}.staged.tmp-");
    name.starts_with(&tmp) || (in_root && (name == staged || name.starts_with(&staged_tmp)))
}

/// A part writer's exclusive hold on part `part` of every split under an
/// output root: an advisory lock on the file `OUT/.part-<index>.lock`
/// (released when this is dropped, or when the process dies). While a
/// writer holds it, a second writer of the same part (a retry started
/// while the first still runs) is refused with [`Error::PartBusy`] before
/// it reads anything; once it is held, staging directories another writer
/// of this part left behind (one that was killed) are removed, so a
/// killed writer never blocks a later run of its part.
#[derive(Debug)]
pub struct PartLock {
    _file: fs::File,
    out: PathBuf,
    part: String,
}

impl PartLock {
    /// Takes part `part`'s lock under `out` (created if absent) without
    /// waiting, then removes the stale staging directories of that part in
    /// `out` and in its directories (`out/<split>/`).
    ///
    /// # Errors
    ///
    /// [`Error::PartBusy`] while another writer of the part holds the lock;
    /// [`Error::Io`] when `out` or the lock file cannot be made or a stale
    /// staging directory cannot be removed.
    pub fn acquire(out: &Path, part: &str) -> Result<PartLock, Error> {
        fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
        let path = out.join(part_lock_name(part));
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(Error::PartBusy {
                    path,
                    part: part.to_owned(),
                });
            }
            Err(fs::TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        // The holder before us removes the file as it lets go: a lock on a
        // file no longer at `path` is no lock; take the new one.
        if !same_file(&file, &path) {
            return PartLock::acquire(out, part);
        }
        let lock = PartLock {
            _file: file,
            out: out.to_path_buf(),
            part: part.to_owned(),
        };
        lock.remove_stale()?;
        Ok(lock)
    }

    /// Removes what writers of this part left behind (see [`PartLock`]).
    fn remove_stale(&self) -> Result<(), Error> {
        let mut dirs = vec![(self.out.clone(), true)];
        for entry in fs::read_dir(&self.out).map_err(|e| Error::io(&self.out, e))? {
            let entry = entry.map_err(|e| Error::io(&self.out, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.')
                && entry
                    .file_type()
                    .map_err(|e| Error::io(entry.path(), e))?
                    .is_dir()
            {
                dirs.push((entry.path(), false));
            }
        }
        for (dir, in_root) in dirs {
            for entry in fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
                let entry = entry.map_err(|e| Error::io(&dir, e))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if is_part_staging(&name, &self.part, in_root) {
                    let path = entry.path();
                    let is_dir = entry.file_type().map_err(|e| Error::io(&path, e))?.is_dir();
                    if is_dir {
                        fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
                    } else {
                        // A staging directory's lock file.
                        fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Fails when part `part` is already published for one of `splits`
    /// (`out/<split>/<part>` exists): a part is written once, and a retry
    /// of a published part changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] naming the first published part found.
    pub fn check_unpublished<S: AsRef<str>>(&self, splits: &[S]) -> Result<(), Error> {
        for split in splits {
            let path = self.out.join(split.as_ref()).join(&self.part);
            if fs::symlink_metadata(&path).is_ok() {
                return Err(Error::AlreadyExists { path });
            }
        }
        Ok(())
    }
}

impl Drop for PartLock {
    fn drop(&mut self) {
        // Removed while still held (a writer that opened it meanwhile sees
        // it gone once it holds it, and takes a new one); on systems where
        // that cannot be checked the empty file stays.
        if cfg!(unix) {
            let _ = fs::remove_file(self.out.join(part_lock_name(&self.part)));
        }
    }
}

/// True when the open `file` is the file at `path`.
fn same_file(file: &fs::File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

/// Syncs a directory, so the entries created in it are durable.
fn sync_dir(dir: &Path) -> Result<(), Error> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Syncs `root` and every directory below it (the stores' own files are
/// synced by their writers' `close`).
fn sync_tree(root: &Path) -> Result<(), Error> {
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            if entry
                .file_type()
                .map_err(|e| Error::io(entry.path(), e))?
                .is_dir()
            {
                pending.push(entry.path());
            }
        }
        sync_dir(&dir)?;
    }
    Ok(())
}

/// Renames `from` to `to` unless `to` exists, atomically where the system
/// allows it.
fn rename_noreplace(from: &Path, to: &Path) -> Result<(), Error> {
    let exists = || Error::AlreadyExists {
        path: to.to_path_buf(),
    };
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::EXIST) => return Err(exists()),
            // The file system (or an old kernel) lacks RENAME_NOREPLACE:
            // fall back to check-then-rename below.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {}
            Err(e) => return Err(Error::io(to, e.into())),
        }
    }
    if fs::symlink_metadata(to).is_ok() {
        return Err(exists());
    }
    fs::rename(from, to).map_err(|e| Error::io(to, e))
}

/// Every store under `root` (a directory holding `meta.zr`), with its path
/// relative to `root` in `/` form, sorted. Hidden directories (`.`-prefixed:
/// a writer's staging, such as a crashed converter's `.part-00003.staged`
/// or a store's `.x.creating-…`) are not searched.
///
/// # Errors
///
/// [`Error::Io`] when a directory cannot be read; [`Error::InvalidOption`]
/// for a path that is not UTF-8.
pub fn stores_under(root: &Path) -> Result<Vec<(PathBuf, String)>, Error> {
    let mut stores = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        if loaderx_core::Store::is_store_dir(&d) {
            let rel = d.strip_prefix(root).unwrap_or(&d);
            let rel = rel
                .to_str()
                .ok_or_else(|| Error::invalid(format!("{}: not UTF-8", rel.display())))?
                .to_string();
            stores.push((d, rel));
            continue;
        }
        for e in fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let e = e.map_err(|e| Error::io(&d, e))?;
            if !e.file_name().to_string_lossy().starts_with('.')
                && e.file_type()
                    .map_err(|err| Error::io(e.path(), err))?
                    .is_dir()
            {
                dirs.push(e.path());
            }
        }
    }
    stores.sort();
    Ok(stores)
}

/// Publishes the finished local root `root` (a converter's output, built
/// in a staging directory) at `url`: store `split/column` at
/// `url/split/column`, all of them as one publication with
/// [`loaderx_core::push_stores`] (every target checked first, every shard
/// before any `meta.zr`, and on failure no new `meta.zr` left; the error
/// says what remains). A multi-part dataset among them (a directory with a
/// `dataset.json` above its `part-*` directories) then gets its manifest at
/// its URL, written by [`loaderx_core::Dataset::merge_url`] over the parts
/// just pushed (so it is checked there as a local merge checks). The
/// sidecar files a converter writes beside the stores ([`SIDECAR_FILES`]:
/// `.source_columns.json`, `classes.json`) are published with them, each
/// at `url/<its path>`, before any `meta.zr`. Returns how many stores
/// were pushed.
///
/// # Errors
///
/// [`Error::Store`] with the push's error; as [`stores_under`].
#[cfg(feature = "remote")]
pub fn push_root(
    root: &Path,
    url: &str,
    options: &loaderx_core::RemoteOptions,
) -> Result<usize, Error> {
    let base = url.trim_end_matches('/');
    let set: Vec<(PathBuf, String)> = stores_under(root)?
        .into_iter()
        .map(|(path, rel)| Ok((path, url_under(base, &rel)?)))
        .collect::<Result<_, Error>>()?;
    let files: Vec<(PathBuf, String)> = sidecars_under(root)?
        .into_iter()
        .map(|(path, rel)| Ok((path, url_under(base, &rel)?)))
        .collect::<Result<_, Error>>()?;
    loaderx_core::push_stores_with_files(&set, &files, options)?;
    for rel in dataset_dirs(root, &set)? {
        let local = root.join(&rel);
        let parts = loaderx_core::Dataset::open(&local)?.parts().len() as u64;
        loaderx_core::Dataset::merge_url(&url_under(base, &rel)?, Some(parts), options)?;
    }
    Ok(set.len())
}

/// The URL of `rel` (a `/` path under a pushed root; empty: the root) under
/// `base`. A path with `?`, `#` or `%` is refused: in a URL they start a
/// query, a fragment or an escape, so the object would be written under
/// another key than its path (`a#1/image` as `a`).
#[cfg(feature = "remote")]
fn url_under(base: &str, rel: &str) -> Result<String, Error> {
    if rel.contains(['?', '#', '%']) {
        return Err(Error::invalid(format!(
            "{rel}: a path with '?', '#' or '%' cannot be pushed (in a URL it names another \
             object); rename it"
        )));
    }
    Ok(if rel.is_empty() {
        base.to_owned()
    } else {
        format!("{base}/{rel}")
    })
}

/// The files a converter writes beside the stores of a split (or a
/// part), which a reader of the root needs: the mapping of store names to
/// source column names and the class names of labelled stores
/// ([`loaderx_core::CLASSES_FILE`]: an image folder's classes, `ClassLabel`
/// columns' names).
/// [`push_root`] publishes them with the stores. (A multi-part dataset's
/// `dataset.json` is not among them: [`push_root`] writes it by a merge.)
/// (The names of `table::convert::SOURCE_COLUMNS_FILE` and
/// `folder::CLASSES_FILE`, modules of the feature `arrow`; a test checks
/// that they agree.)
pub const SIDECAR_FILES: [&str; 2] = [".source_columns.json", "classes.json"];

/// Every [`SIDECAR_FILES`] file under `root` that is not inside a store,
/// with its path relative to `root` in `/` form, sorted; as
/// [`stores_under`], hidden directories (a writer's staging) are not
/// searched.
///
/// # Errors
///
/// [`Error::Io`] when a directory cannot be read; [`Error::InvalidOption`]
/// for a path that is not UTF-8.
#[cfg(feature = "remote")]
fn sidecars_under(root: &Path) -> Result<Vec<(PathBuf, String)>, Error> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        if loaderx_core::Store::is_store_dir(&d) {
            continue;
        }
        for e in fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let e = e.map_err(|e| Error::io(&d, e))?;
            let kind = e.file_type().map_err(|err| Error::io(e.path(), err))?;
            let name = e.file_name();
            if kind.is_file() && SIDECAR_FILES.iter().any(|f| name == *f) {
                let path = e.path();
                let rel = path.strip_prefix(root).unwrap_or(&path);
                let rel = rel
                    .to_str()
                    .ok_or_else(|| Error::invalid(format!("{}: not UTF-8", rel.display())))?
                    .to_string();
                files.push((path, rel));
            } else if kind.is_dir() && !name.to_string_lossy().starts_with('.') {
                dirs.push(e.path());
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The directories (relative to `root`, `/` form) of the multi-part
/// datasets whose stores are among `set`: those holding a manifest two
/// levels above a store.
#[cfg(feature = "remote")]
fn dataset_dirs(root: &Path, set: &[(PathBuf, String)]) -> Result<Vec<String>, Error> {
    let mut dirs: Vec<String> = Vec::new();
    for (path, _) in set {
        let Some(dataset) = path.parent().and_then(Path::parent) else {
            continue;
        };
        if !loaderx_core::Dataset::is_dataset_dir(dataset) {
            continue;
        }
        let rel = dataset.strip_prefix(root).unwrap_or(dataset);
        let rel = rel
            .to_str()
            .ok_or_else(|| Error::invalid(format!("{}: not UTF-8", rel.display())))?
            .to_string();
        if !dirs.contains(&rel) {
            dirs.push(rel);
        }
    }
    Ok(dirs)
}

#[cfg(all(test, feature = "remote"))]
mod push_tests {
    use super::*;

    #[cfg(feature = "arrow")]
    #[test]
    fn the_sidecar_files_are_those_the_converters_write() {
        assert_eq!(
            SIDECAR_FILES,
            [
                crate::table::convert::SOURCE_COLUMNS_FILE,
                crate::folder::CLASSES_FILE
            ]
        );
    }

    #[test]
    fn paths_a_url_cannot_address_are_refused() {
        assert_eq!(url_under("s3://b/x", "").unwrap(), "s3://b/x");
        let spaced = url_under("s3://b/x", "my split/é").unwrap();
        assert_eq!(spaced, "s3://b/x/my split/é");
        for bad in ["a#1/image", "what?/image", "100%/image", "a%41/x"] {
            let e = url_under("s3://b/x", bad).unwrap_err();
            assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
            assert!(e.to_string().starts_with(bad), "{e}");
        }
    }

    #[test]
    fn sidecar_files_are_found_beside_stores_never_in_them_or_in_staging() {
        use loaderx_core::{Codec, CreateOptions, DType, DynDenseWriter};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for rel in ["train/image", "parts/train/part-00001/label"] {
            let mut w = DynDenseWriter::create(
                root.join(rel),
                DType::U8,
                &[2],
                &CreateOptions::new(Codec::Raw),
            )
            .unwrap();
            w.append_bytes(&[1, 2], 1).unwrap();
            w.close().unwrap();
        }
        for rel in [
            "classes.json",
            "train/.source_columns.json",
            "train/classes.json",
            "parts/train/part-00001/.source_columns.json",
            // Not found: inside a store, in a writer's staging, other names.
            "train/image/classes.json",
            ".part-00003.staged/train/classes.json",
            "train/notes.txt",
            "parts/train/dataset.json",
        ] {
            fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
            fs::write(root.join(rel), rel).unwrap();
        }
        let found: Vec<String> = sidecars_under(root)
            .unwrap()
            .into_iter()
            .map(|(p, rel)| {
                assert_eq!(p, root.join(&rel));
                rel
            })
            .collect();
        assert_eq!(
            found,
            [
                "classes.json",
                "parts/train/part-00001/.source_columns.json",
                "train/.source_columns.json",
                "train/classes.json"
            ]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_under_a_root_are_found_with_their_relative_paths() {
        use loaderx_core::{Codec, CreateOptions, DType, DynDenseWriter};
        let dir = tempfile::tempdir().unwrap();
        for rel in ["train/image", "train/label", "test/image"] {
            let p = dir.path().join(rel);
            let mut w =
                DynDenseWriter::create(&p, DType::U8, &[2], &CreateOptions::new(Codec::Raw))
                    .unwrap();
            w.append_bytes(&[1, 2, 3, 4], 2).unwrap();
            w.close().unwrap();
        }
        fs::create_dir_all(dir.path().join("empty/dir")).unwrap();
        // A crashed writer's staging: never found, so never pushed.
        for rel in [
            ".part-00003.staged/train/image",
            "train/.label.creating-1-0",
        ] {
            let p = dir.path().join(rel);
            let mut w =
                DynDenseWriter::create(&p, DType::U8, &[2], &CreateOptions::new(Codec::Raw))
                    .unwrap();
            w.append_bytes(&[1, 2], 1).unwrap();
            w.close().unwrap();
        }
        let found: Vec<String> = stores_under(dir.path())
            .unwrap()
            .into_iter()
            .map(|(p, rel)| {
                assert_eq!(p, dir.path().join(&rel));
                rel
            })
            .collect();
        assert_eq!(found, ["test/image", "train/image", "train/label"]);
    }

    #[test]
    fn a_part_index_comes_from_the_options_or_the_job_index() {
        use std::ffi::OsStr;
        assert_eq!(resolve_part(None, None, None).unwrap(), None);
        assert_eq!(resolve_part(Some(2), Some(3), None).unwrap(), Some((2, 3)));
        // --part wins over the variable.
        assert_eq!(
            resolve_part(Some(0), Some(3), Some(OsStr::new("2"))).unwrap(),
            Some((0, 3))
        );
        assert_eq!(
            resolve_part(None, Some(3), Some(OsStr::new("2"))).unwrap(),
            Some((2, 3))
        );
        for (part, parts, env, why) in [
            (Some(1), None, None, "--part needs --parts"),
            (
                None,
                Some(3),
                None,
                "needs --part (or the environment variable JOB_COMPLETION_INDEX",
            ),
            (
                None,
                Some(3),
                Some("x1"),
                "JOB_COMPLETION_INDEX=\"x1\" is not a part index",
            ),
            (None, Some(3), Some("-1"), "is not a part index"),
            (
                None,
                Some(3),
                Some("3"),
                "part 3 (from JOB_COMPLETION_INDEX) of 3",
            ),
            (Some(5), Some(3), None, "part 5 (from --part) of 3"),
            (Some(0), Some(0), None, "--parts must be at least 1"),
        ] {
            let e = resolve_part(part, parts, env.map(OsStr::new)).unwrap_err();
            assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
            assert!(e.to_string().contains(why), "{e} (expected {why})");
        }
    }

    #[test]
    fn names_cannot_escape() {
        for bad in ["", ".", "..", "a/b", "/abs", "a\\b", ".hidden", "x\0y"] {
            assert!(safe_component("split", bad).is_err(), "{bad:?}");
        }
        for good in ["train", "image", "test-2", "label_0"] {
            assert!(safe_component("split", good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn a_url_is_never_staged_as_a_local_directory() {
        let url = "s3://reader:SECRET1@loaderx-output-test/x?sig=SECRET2";
        let e = StagedRoot::new(url).map(|_| ()).unwrap_err();
        assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
        let m = e.to_string();
        assert!(m.contains("s3://loaderx-output-test/x"), "{m}");
        assert!(!m.contains("SECRET") && !m.contains("reader"), "{m}");
        assert!(!Path::new("s3:").exists());
    }

    #[test]
    fn unpublished_roots_vanish() {
        let dir = tempfile::tempdir().unwrap();
        let root = StagedRoot::new(dir.path().join("out")).unwrap();
        let temp = root.temp_path().to_path_buf();
        std::fs::create_dir_all(root.store_path("train", "x").unwrap()).unwrap();
        assert!(temp.exists());
        drop(root);
        assert!(!temp.exists());
        assert!(!dir.path().join("out").exists());
        let root = StagedRoot::new(dir.path().join("out")).unwrap();
        assert_eq!(root.publish().unwrap(), dir.path().join("out"));
        assert!(StagedRoot::new(dir.path().join("out")).is_err());
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn dead_writers_staging_is_removed_and_live_writers_kept() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let target = d.join("out");
        // No process has a pid above the kernel's largest (4194304).
        let dead = 4_194_305u32;
        let me = std::process::id();
        // A live writer of the same root: its lock is held.
        let live = StagedRoot::new(&target).unwrap();
        fs::write(live.temp_path().join("records"), b"live").unwrap();
        // What writers killed with SIGKILL leave: a directory beside its
        // lock file, which nobody holds (of a root, of a spool), a lock
        // file alone (killed after removing its directory), a directory
        // without a lock file (an earlier version's) of a dead process.
        for (name, is_dir) in [
            (format!(".out.tmp-{me}-900"), true),
            (format!(".out.tmp-{me}-900.lock"), false),
            (format!(".out.spool-{dead}-1-0"), true),
            (format!(".out.spool-{dead}-1-0.lock"), false),
            (format!(".out.tmp-{dead}-3.lock"), false),
            (format!(".out.tmp-{dead}-4"), true),
        ] {
            let p = d.join(name);
            if is_dir {
                fs::create_dir_all(p.join("train/x")).unwrap();
                fs::write(p.join("train/x/shard"), vec![0u8; 4096]).unwrap();
            } else {
                fs::write(p, b"").unwrap();
            }
        }
        // Kept: a lockless directory of a running process (this one), and
        // the staging of another root.
        let kept = [
            format!(".out.tmp-{me}-901"),
            format!(".other.tmp-{dead}-0"),
            format!(".other.tmp-{dead}-0.lock"),
        ];
        fs::create_dir(d.join(&kept[0])).unwrap();
        fs::create_dir(d.join(&kept[1])).unwrap();
        fs::write(d.join(&kept[2]), b"").unwrap();

        let next = StagedRoot::new(&target).unwrap();
        let mut want: Vec<String> = kept.to_vec();
        for root in [&live, &next] {
            let name = root.temp_path().file_name().unwrap().to_string_lossy();
            want.push(name.to_string());
            want.push(format!("{name}.lock"));
        }
        want.sort();
        assert_eq!(names(d), want);
        assert_eq!(fs::read(live.temp_path().join("records")).unwrap(), b"live");
        // Each goes with its lock file, published or not.
        drop(next);
        assert_eq!(live.publish().unwrap(), target);
        let mut want = kept.to_vec();
        want.push("out".to_owned());
        want.sort();
        assert_eq!(names(d), want);
    }

    #[test]
    fn two_roots_for_one_target_in_one_process_never_share_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let a = StagedRoot::new(&target).unwrap();
        let b = StagedRoot::new(&target).unwrap();
        assert_ne!(a.temp_path(), b.temp_path());
        fs::create_dir_all(a.store_path("train", "x").unwrap()).unwrap();
        fs::create_dir_all(b.store_path("test", "y").unwrap()).unwrap();
        assert_eq!(a.publish().unwrap(), target);
        // The second finds the target taken, and leaves the winner alone.
        let e = b.publish().unwrap_err();
        assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
        assert_eq!(names(&target), ["train"]);
        assert_eq!(names(dir.path()), ["out"]);
    }

    #[test]
    fn concurrent_stagings_publish_exactly_one_root() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let barrier = std::sync::Barrier::new(8);
        let results: Vec<(usize, Result<PathBuf, Error>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|k| {
                    let (target, barrier) = (&target, &barrier);
                    s.spawn(move || {
                        let root = StagedRoot::new(target).unwrap();
                        fs::write(root.temp_path().join(format!("winner-{k}")), b"").unwrap();
                        barrier.wait();
                        (k, root.publish())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<usize> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        for (_, r) in &results {
            if let Err(e) = r {
                assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
            }
        }
        assert_eq!(names(&target), [format!("winner-{}", winners[0])]);
        assert_eq!(names(dir.path()), ["out"]);
    }

    #[test]
    fn publishing_onto_an_existing_target_is_refused() {
        // An empty directory is what a plain rename(2) would replace.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let root = StagedRoot::new(&target).unwrap();
        fs::create_dir_all(root.store_path("train", "x").unwrap()).unwrap();
        fs::create_dir(&target).unwrap();
        let e = root.publish().unwrap_err();
        assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
        assert!(names(&target).is_empty());
        assert_eq!(names(dir.path()), ["out"]);
        // A file, too.
        fs::remove_dir(&target).unwrap();
        fs::write(&target, b"keep").unwrap();
        let root = StagedRoot::new(dir.path().join("other")).unwrap();
        let e = rename_noreplace(root.temp_path(), &target).unwrap_err();
        assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
        assert_eq!(fs::read(&target).unwrap(), b"keep");
    }
}
