//! Appending records and publishing a store.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::codec::{Codec, CodecState};
use crate::engine::files;
use crate::error::{Error, ErrorKind};
use crate::format::{
    self, DICT_FILE, MAX_DATA_SHARDS, MAX_RECORD_LEN, META_FILE, RECORD_LOC_LEN, RecordLoc,
    STATIC_PAGE_LEN, Schema, StaticPage,
};
use crate::options::CreateOptions;

/// Logical bytes encoded per append window before its payloads are written.
const WINDOW_BYTES: usize = 64 << 20;
/// Records per append window at most.
const WINDOW_RECORDS: usize = 1 << 16;
/// Logical bytes one worker encodes per task.
const TASK_BYTES: usize = 1 << 20;

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
    pub(crate) fn create(
        path: &Path,
        schema: &Schema,
        options: &CreateOptions,
    ) -> Result<StoreWriter, Error> {
        let (data_shards, dict) = options.validated()?;
        let (codec, sync) = (options.codec(), options.syncs_on_close());
        let codec = CodecState::new(codec, dict, true).map_err(Error::invalid)?;
        let schema = schema.encode()?;
        if fs::symlink_metadata(path).is_ok() {
            return Err(ErrorKind::AlreadyExists {
                path: path.to_path_buf(),
            }
            .into());
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        fs::create_dir(path).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists {
                path: path.to_path_buf(),
            }
            .into(),
            _ => Error::io(path, e),
        })?;
        let create = |name: &str| {
            let p = path.join(name);
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&p)
                .map_err(|e| Error::io(&p, e))
        };
        let meta = create(META_FILE)?;
        files::lock(&meta, path, true)?;
        // An all-zero static page: the store exists but is not published.
        meta.write_all_at(&[0u8; STATIC_PAGE_LEN], 0)
            .map_err(|e| Error::io(path.join(META_FILE), e))?;
        let data = (0..usize::from(data_shards))
            .map(|s| create(&format::data_file(s)))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(d) = dict {
            let f = create(DICT_FILE)?;
            f.write_all_at(d, 0)
                .and_then(|()| if sync { f.sync_all() } else { Ok(()) })
                .map_err(|e| Error::io(path.join(DICT_FILE), e))?;
        }
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

    /// Syncs every file and publishes the static page; then releases the lock.
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
            .and_then(|()| {
                if self.sync {
                    self.meta.sync_data()
                } else {
                    Ok(())
                }
            })
            .map_err(|e| Error::io(&meta_path, e))?;
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
