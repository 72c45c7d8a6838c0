//! Appending records and publishing a store.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::MAX_RECORD_LEN;
use crate::codec::{Codec, CodecState};
use crate::engine::durable::{self, Point};
use crate::engine::files;
use crate::error::{Error, ErrorKind};
use crate::format::{
    self, DICT_FILE, MAX_DATA_SHARDS, META_FILE, RECORD_LOC_LEN, RecordLoc, STATIC_PAGE_LEN,
    Schema, StaticPage,
};
use crate::options::CreateOptions;

/// Logical bytes encoded per append window before its payloads are written.
const WINDOW_BYTES: usize = 64 << 20;
/// Records per append window at most.
const WINDOW_RECORDS: usize = 1 << 16;
/// Logical bytes one worker encodes per task.
const TASK_BYTES: usize = 1 << 20;

/// Tells apart the staging directories of stores created by one process.
static STAGING_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A batch of records to append, each given as a head and a body that are
/// stored back to back (Ragged records: dimension header, then payload).
pub(crate) trait RecordSource: Sync {
    /// Number of records.
    fn len(&self) -> usize;
    /// The head and body of record `j`.
    fn record(&self, j: usize) -> (&[u8], &[u8]);
}

/// An open, exclusively locked store under construction.
pub(crate) struct StoreWriter {
    path: PathBuf,
    meta: File,
    data: Vec<File>,
    codec: CodecState,
    schema: Vec<u8>,
    length: u64,
    tails: [u64; MAX_DATA_SHARDS],
    failed: bool,
    /// Whether `close` syncs every file (see `CreateOptions::sync_on_close`).
    sync: bool,
}

/// One worker's share of a window: records `first, first + shards, ...` of one shard.
struct Task {
    shard: usize,
    first: usize,
    count: usize,
    /// Logical bytes of its records.
    bytes: usize,
}

/// What a worker produced for a task.
struct Encoded {
    bytes: Vec<u8>,
    lengths: Vec<(u32, u32)>,
}

impl StoreWriter {
    /// Creates a new store directory at `path`, which must not exist.
    ///
    /// The directory is built under a hidden sibling name that nobody else
    /// knows (`.{name}.creating-{pid}-{n}`): `meta.zr` is created and
    /// exclusively locked there, its all-zero (unpublished) static page
    /// written, the payload shards and the dictionary created; only then is
    /// it renamed to `path`, refusing to replace anything. So a reader that
    /// probes `path` meanwhile finds nothing, or a locked unpublished store,
    /// and never takes a lock the writer then fails on; and a `create` that
    /// fails (a full disk, no file descriptors left, `path` taken meanwhile)
    /// removes what it made and leaves `path` as it was. A `path` that is a
    /// store URL ([`crate::is_url`]) is refused before anything is made.
    pub(crate) fn create(
        path: &Path,
        schema: &Schema,
        options: &CreateOptions,
    ) -> Result<StoreWriter, Error> {
        let (data_shards, dict) = options.validated()?;
        let (codec, sync) = (options.codec(), options.syncs_on_close());
        let codec = CodecState::new(codec, dict, true).map_err(Error::invalid)?;
        let generation = options.format_generation();
        generation.check_writable(schema.dtype())?;
        let schema = schema.encode(generation)?;
        // `s3://bkt/x` as a path would be a local directory `s3:/bkt/x`,
        // its name (perhaps a password) printed by every message.
        if crate::is_url(&path.to_string_lossy()) {
            return Err(Error::invalid(format!(
                "{}: a store is written to a local directory, not a URL: \
                 write it here, then push it",
                crate::redact_url(&path.to_string_lossy())
            )));
        }
        let exists = || -> Error {
            ErrorKind::AlreadyExists {
                path: path.to_path_buf(),
            }
            .into()
        };
        if fs::symlink_metadata(path).is_ok() {
            return Err(exists());
        }
        let Some(name) = path.file_name() else {
            return Err(Error::invalid(format!(
                "{}: a store path must end in a name",
                path.display()
            )));
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        let staged = parent.join(format!(
            ".{}.creating-{}-{}",
            name.to_string_lossy(),
            std::process::id(),
            STAGING_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&staged).map_err(|e| Error::io(&staged, e))?;
        let built = Self::populate(&staged, data_shards, dict, sync).and_then(|(meta, data)| {
            match durable::rename_noreplace(&staged, path) {
                Ok(()) => Ok((meta, data)),
                Err(e) if durable::is_exists(&e) => Err(exists()),
                Err(e) => Err(Error::io(path, e)),
            }
        });
        let (meta, data) = match built {
            Ok(files) => files,
            Err(e) => {
                // Nothing was published and nobody else knows the staged name.
                let _ = fs::remove_dir_all(&staged);
                return Err(e);
            }
        };
        Ok(StoreWriter {
            path: path.to_path_buf(),
            meta,
            data,
            codec,
            schema,
            length: 0,
            tails: [0; MAX_DATA_SHARDS],
            failed: false,
            sync,
        })
    }

    /// Creates the files of a new store in the directory `dir`, which only
    /// this writer knows: `meta.zr` locked, with an all-zero static page
    /// (the store exists but is not published), the shards and the dictionary.
    fn populate(
        dir: &Path,
        data_shards: u8,
        dict: Option<&[u8]>,
        sync: bool,
    ) -> Result<(File, Vec<File>), Error> {
        let mut created = 0;
        let mut create = |name: &str| {
            let p = dir.join(name);
            let n = created;
            created += 1;
            durable::fail_point(Point::CreateFile(n))
                .and_then(|()| {
                    OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create_new(true)
                        .open(&p)
                })
                .map_err(|e| Error::io(&p, e))
        };
        let meta = create(META_FILE)?;
        files::lock(&meta, dir, true)?;
        meta.write_all_at(&[0u8; STATIC_PAGE_LEN], 0)
            .map_err(|e| Error::io(dir.join(META_FILE), e))?;
        let data = (0..usize::from(data_shards))
            .map(|s| create(&format::data_file(s)))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(d) = dict {
            let f = create(DICT_FILE)?;
            f.write_all_at(d, 0)
                .and_then(|()| if sync { f.sync_all() } else { Ok(()) })
                .map_err(|e| Error::io(dir.join(DICT_FILE), e))?;
        }
        Ok((meta, data))
    }

    /// The store directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Records appended so far.
    pub(crate) fn len(&self) -> u64 {
        self.length
    }

    /// The store's codec.
    pub(crate) fn codec(&self) -> Codec {
        self.codec.codec()
    }

    /// Number of payload shards.
    pub(crate) fn data_shards(&self) -> usize {
        self.data.len()
    }

    /// Appends every record of `src` in order. The caller has validated them;
    /// an I/O failure poisons the writer so the store can never be published.
    pub(crate) fn append(&mut self, src: &dyn RecordSource) -> Result<(), Error> {
        if self.failed {
            return Err(ErrorKind::WriterFailed {
                path: self.path.clone(),
            }
            .into());
        }
        let n = src.len();
        if n == 0 {
            return Err(Error::invalid("append needs at least one record"));
        }
        for j in 0..n {
            let (head, body) = src.record(j);
            let len = (head.len() + body.len()) as u64;
            if len == 0 || len > MAX_RECORD_LEN {
                return Err(Error::invalid(format!(
                    "record {j} of the batch is {len} bytes; records must be 1 byte to 2 GiB"
                )));
            }
        }
        let end = self.length.checked_add(n as u64);
        if end.and_then(format::record_loc_offset).is_none() {
            return Err(Error::invalid(
                "store would exceed the addressable record count",
            ));
        }
        let mut start = 0;
        while start < n {
            let mut end = start;
            let mut bytes = 0usize;
            while end < n && end - start < WINDOW_RECORDS && (bytes < WINDOW_BYTES || end == start)
            {
                let (h, b) = src.record(end);
                bytes += h.len() + b.len();
                end += 1;
            }
            if let Err(e) = self.write_window(src, start, end) {
                self.failed = true;
                return Err(e);
            }
            start = end;
        }
        Ok(())
    }

    fn write_window(
        &mut self,
        src: &dyn RecordSource,
        start: usize,
        end: usize,
    ) -> Result<(), Error> {
        let shards = self.data.len();
        let base = self.length;
        // Plan shard-local tasks of about TASK_BYTES logical bytes each.
        let mut tasks = Vec::new();
        for shard in 0..shards {
            let first_j = (0..shards)
                .map(|k| start + k)
                .find(|&j| (base + (j - start) as u64) % shards as u64 == shard as u64);
            let Some(mut j) = first_j.filter(|&j| j < end) else {
                continue;
            };
            while j < end {
                let (mut count, mut bytes) = (0, 0);
                let first = j;
                while j < end && (count == 0 || bytes < TASK_BYTES) {
                    let (h, b) = src.record(j);
                    bytes += h.len() + b.len();
                    count += 1;
                    j += shards;
                }
                tasks.push(Task {
                    shard,
                    first,
                    count,
                    bytes,
                });
            }
        }
        let codec = &self.codec;
        let path = &self.path;
        let data = &self.data;
        let write_err =
            |shard: usize, e: io::Error| Error::io(path.join(format::data_file(shard)), e);
        let mut tails = self.tails;
        let mut locs = vec![[0u8; RECORD_LOC_LEN]; end - start];
        if codec.codec() == Codec::Raw {
            // Stored lengths are known up front, so offsets are too: each
            // worker packs a task into a buffer it reuses (warm in cache, no
            // fresh pages) and writes it at once.
            let mut at = Vec::with_capacity(tasks.len());
            for task in &tasks {
                at.push(tails[task.shard]);
                let mut offset = tails[task.shard];
                for k in 0..task.count {
                    let j = task.first + k * shards;
                    let (head, body) = src.record(j);
                    let len = (head.len() + body.len()) as u32;
                    locs[j - start] = RecordLoc {
                        offset,
                        phys_length: len,
                        logic_length: len,
                    }
                    .encode();
                    offset += u64::from(len);
                }
                tails[task.shard] = offset;
            }
            tasks
                .par_iter()
                .zip(at)
                .try_for_each_init(Vec::new, |buf, (task, at)| {
                    buf.clear();
                    for k in 0..task.count {
                        let (head, body) = src.record(task.first + k * shards);
                        buf.extend_from_slice(head);
                        buf.extend_from_slice(body);
                    }
                    data[task.shard]
                        .write_all_at(buf, at)
                        .map_err(|e| write_err(task.shard, e))
                })?;
        } else {
            let encoded: Vec<Encoded> = tasks
                .par_iter()
                .map_init(
                    || codec.encoder(),
                    |enc, task| -> io::Result<Encoded> {
                        let enc = enc
                            .as_mut()
                            .map_err(|e| io::Error::new(e.kind(), e.to_string()))?;
                        // A frame is rarely larger than half its input here.
                        let mut out = Encoded {
                            bytes: Vec::with_capacity(task.bytes / 2),
                            lengths: Vec::with_capacity(task.count),
                        };
                        for k in 0..task.count {
                            let (head, body) = src.record(task.first + k * shards);
                            let phys = enc.encode(head, body, &mut out.bytes)?;
                            let phys = u32::try_from(phys)
                                .map_err(|_| io::Error::other("encoded record exceeds 4 GiB"))?;
                            out.lengths.push((phys, (head.len() + body.len()) as u32));
                        }
                        Ok(out)
                    },
                )
                .collect::<io::Result<_>>()
                .map_err(|e| Error::io(&self.path, e))?;

            // Assign offsets in task order, so equal input gives equal files.
            let mut writes = Vec::with_capacity(tasks.len());
            for (task, enc) in tasks.iter().zip(&encoded) {
                let at = tails[task.shard];
                let mut offset = at;
                for (k, &(phys, logic)) in enc.lengths.iter().enumerate() {
                    let loc = RecordLoc {
                        offset,
                        phys_length: phys,
                        logic_length: logic,
                    };
                    locs[task.first - start + k * shards] = loc.encode();
                    offset += u64::from(phys);
                }
                tails[task.shard] = offset;
                writes.push((task.shard, at, &enc.bytes));
            }
            writes.par_iter().try_for_each(|&(shard, at, bytes)| {
                data[shard]
                    .write_all_at(bytes, at)
                    .map_err(|e| write_err(shard, e))
            })?;
        }
        let table_at = format::record_loc_offset(base)
            .ok_or_else(|| Error::invalid("record table offset overflow"))?;
        self.meta
            .write_all_at(locs.as_flattened(), table_at)
            .map_err(|e| Error::io(path.join(META_FILE), e))?;
        self.tails = tails;
        self.length = base + (end - start) as u64;
        Ok(())
    }

    /// Copies the stored bytes of `src` (a local store of the same codec
    /// and shard count, whose dictionary the caller created this store
    /// with) into this empty store: payload shards and
    /// location table verbatim, no record decoded. The records stay what
    /// they were; only the schema this writer publishes may differ.
    pub(crate) fn copy_stored(&mut self, src: &super::StoreReader) -> Result<(), Error> {
        if self.failed {
            return Err(ErrorKind::WriterFailed {
                path: self.path.clone(),
            }
            .into());
        }
        let Some((shards, table)) = src.stored_parts() else {
            return Err(Error::invalid(format!(
                "{}: only a local store's bytes can be copied",
                src.path().display()
            )));
        };
        if self.length != 0 || shards.len() != self.data.len() || src.codec() != self.codec.codec()
        {
            return Err(Error::invalid(
                "a store's bytes copy only into an empty store of its codec, shards and dictionary",
            ));
        }
        let copied = shards
            .par_iter()
            .enumerate()
            .try_for_each(|(s, bytes)| {
                self.data[s]
                    .write_all_at(bytes, 0)
                    .map_err(|e| Error::io(self.path.join(format::data_file(s)), e))
            })
            .and_then(|()| {
                self.meta
                    .write_all_at(table, STATIC_PAGE_LEN as u64)
                    .map_err(|e| Error::io(self.path.join(META_FILE), e))
            });
        if let Err(e) = copied {
            self.failed = true;
            return Err(e);
        }
        for (tail, bytes) in self.tails.iter_mut().zip(&shards) {
            *tail = bytes.len() as u64;
        }
        self.length = src.len();
        Ok(())
    }

    /// Syncs every file and publishes the static page; then releases the lock.
    ///
    /// With syncing on (the default), the order makes publication durable:
    /// payload shards, then the location table, then the store directory and
    /// its parent (the names of the files and of the store itself), and only
    /// then the published header, synced last. A header that cannot be
    /// synced is overwritten with zeros again, so a store whose `close`
    /// failed never opens as published.
    pub(crate) fn close(mut self) -> Result<(), Error> {
        if self.failed {
            return Err(ErrorKind::WriterFailed {
                path: self.path.clone(),
            }
            .into());
        }
        for (s, f) in self.data.iter().enumerate() {
            let p = || self.path.join(format::data_file(s));
            f.set_len(self.tails[s]).map_err(|e| Error::io(p(), e))?;
            if self.sync {
                f.sync_all().map_err(|e| Error::io(p(), e))?;
            }
        }
        let meta_path = self.path.join(META_FILE);
        if self.sync {
            self.meta
                .sync_data()
                .map_err(|e| Error::io(&meta_path, e))?;
            durable::sync_dir(&self.path).map_err(|e| Error::io(&self.path, e))?;
            let parent = match self.path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            durable::sync_dir(parent).map_err(|e| Error::io(parent, e))?;
        }
        let page = StaticPage::published(
            self.codec.codec(),
            self.data.len() as u8,
            self.length,
            self.tails,
            std::mem::take(&mut self.schema),
        );
        self.meta
            .write_all_at(&page.encode()[..], 0)
            .map_err(|e| Error::io(&meta_path, e))?;
        if self.sync {
            let synced =
                durable::fail_point(Point::PublishSync).and_then(|()| self.meta.sync_data());
            if let Err(e) = synced {
                // The header is in the page cache, where readers would see
                // it: take it back. (If even this write fails, the store is
                // published but was never reported so; nothing better exists.)
                let _ = self.meta.write_all_at(&[0u8; STATIC_PAGE_LEN], 0);
                self.failed = true;
                return Err(Error::io(&meta_path, e));
            }
        }
        Ok(())
    }
}

impl Drop for StoreWriter {
    /// Releases the exclusive lock explicitly rather than by closing `meta.zr`.
    ///
    /// A `flock` belongs to the open file description, which a process forked
    /// while this writer was alive (any `Command::spawn` on another thread,
    /// until its `exec`; a forked worker, for its whole life) shares. Closing
    /// our descriptor would leave the lock held through that copy, and the
    /// store `Busy` after `close` or drop; `LOCK_UN` releases it everywhere.
    fn drop(&mut self) {
        let _ = self.meta.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dense, DenseWriter, ErrorKind as Kind, Store};

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_create_that_fails_leaves_nothing_and_can_be_retried() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let opts = CreateOptions::new(Codec::Raw).data_shards(4);
        // meta.zr, four shards, then the rename: fail each in turn.
        let points = (0..5).map(Point::CreateFile).chain([Point::Rename]);
        for point in points {
            durable::arm(point);
            let e = crate::DynDenseWriter::create(&path, crate::DType::U8, &[3], &opts)
                .err()
                .unwrap_or_else(|| panic!("{point:?} did not fail"));
            assert!(matches!(e.kind(), Kind::Io { .. }), "{point:?}: {e}");
            assert!(
                leftovers(dir.path()).is_empty(),
                "{point:?}: {:?}",
                leftovers(dir.path())
            );
            assert!(matches!(
                Store::open(&path).err().unwrap().kind(),
                Kind::NotAStore { .. }
            ));
        }
        let mut w = DenseWriter::<u8>::create_with(&path, &[3], &opts).unwrap();
        w.append_slice(&[1, 2, 3], 1).unwrap();
        w.close().unwrap();
        assert_eq!(leftovers(dir.path()), ["store"]);
        assert_eq!(
            Dense::<u8>::open(&path).unwrap().get(0).unwrap().as_slice(),
            Some(&[1, 2, 3][..])
        );
    }

    #[test]
    fn a_path_taken_while_creating_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        // Someone else's directory appears between the check and the rename.
        fs::create_dir(&path).unwrap();
        fs::write(path.join("theirs"), b"x").unwrap();
        let staged = dir.path().join(".store.creating-x");
        fs::create_dir(&staged).unwrap();
        let e = durable::rename_noreplace(&staged, &path).unwrap_err();
        assert!(durable::is_exists(&e));
        assert_eq!(fs::read(path.join("theirs")).unwrap(), b"x");
        // And through `create`: refused before anything is made.
        let e = DenseWriter::<u8>::create(&path, &[1], Codec::Raw)
            .err()
            .unwrap();
        assert!(matches!(e.kind(), Kind::AlreadyExists { .. }), "{e}");
    }

    #[test]
    fn close_syncs_the_store_directory_and_its_parent_before_publishing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let mut w = DenseWriter::<u8>::create(&path, &[1], Codec::Zstd).unwrap();
        w.append_slice(&[7], 1).unwrap();
        durable::take_synced_dirs();
        w.close().unwrap();
        assert_eq!(
            durable::take_synced_dirs(),
            [path.clone(), dir.path().to_path_buf()]
        );
        // Without syncing, none.
        let path2 = dir.path().join("store2");
        let opts = CreateOptions::new(Codec::Raw).sync_on_close(false);
        let mut w = DenseWriter::<u8>::create_with(&path2, &[1], &opts).unwrap();
        w.append_slice(&[7], 1).unwrap();
        w.close().unwrap();
        assert!(durable::take_synced_dirs().is_empty());
    }

    #[test]
    fn a_header_that_cannot_be_synced_is_not_published() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let mut w = DenseWriter::<u8>::create(&path, &[1], Codec::Raw).unwrap();
        w.append_slice(&[7, 8], 2).unwrap();
        durable::arm(Point::PublishSync);
        let e = w.close().unwrap_err();
        assert!(matches!(e.kind(), Kind::Io { .. }), "{e}");
        let e = Store::open(&path).err().unwrap();
        assert!(matches!(e.kind(), Kind::NotPublished { .. }), "{e}");
    }
}
