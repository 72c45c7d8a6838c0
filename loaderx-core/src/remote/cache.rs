//! The block cache: fixed-size payload blocks in memory and in a shared
//! directory, keyed by the store's identity; a block file is checked
//! (length and checksum) when an open store first maps it, and read out of
//! its map from then on.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The block cache of one open store: memory, then directory.
pub(super) struct BlockCache {
    pub(super) geometry: Geometry,
    /// Read-locked by lookups (gathers run side by side), write-locked by puts.
    pub(super) memory: Option<RwLock<MemoryBlocks>>,
    pub(super) disk: Option<DiskCache>,
    /// Blocks being fetched (by a gather or a prefetch), `(shard, block)`:
    /// another gather that needs one waits for it instead of fetching it
    /// again, and a prefetch leaves it alone.
    pub(super) pending: Mutex<HashSet<(usize, u64)>>,
    /// Signalled when blocks leave `pending`.
    pub(super) fetched: Condvar,
}

/// A block and a record that reads it (for messages): `(shard, block,
/// record)`.
pub(super) type BlockRef = (usize, u64, u64);

/// Blocks one fetcher claimed in [`BlockCache::pending`]; released (and
/// the waiters woken) when dropped, whether the fetch succeeded or not.
pub(super) struct Claim<'c> {
    cache: &'c BlockCache,
    keys: Vec<(usize, u64)>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let mut p = self.cache.pending.lock().unwrap_or_else(|e| e.into_inner());
        for k in &self.keys {
            p.remove(k);
        }
        drop(p);
        self.cache.fetched.notify_all();
    }
}

impl BlockCache {
    pub(super) fn new(o: &RemoteOptions, identity: &str) -> Result<Option<BlockCache>, Error> {
        let memory = (o.memory_cache_bytes > 0).then(|| {
            RwLock::new(MemoryBlocks {
                limit: o.memory_cache_bytes,
                ..MemoryBlocks::default()
            })
        });
        let disk = match &o.cache_dir {
            Some(root) => Some(DiskCache::new(
                root,
                identity,
                o.cache_bytes,
                o.block_bytes,
            )?),
            None => None,
        };
        if memory.is_none() && disk.is_none() {
            return Ok(None);
        }
        Ok(Some(BlockCache {
            geometry: Geometry::new(o.block_bytes),
            memory,
            disk,
            pending: Mutex::new(HashSet::new()),
            fetched: Condvar::new(),
        }))
    }

    /// Claims the blocks of `blocks` (`(shard, block, record)`) that nobody
    /// is fetching: `(claim, claimed, busy)`, the busy ones being fetched by
    /// another gather or prefetch.
    pub(super) fn claim(
        &self,
        blocks: &[(usize, u64, u64)],
    ) -> (Claim<'_>, Vec<BlockRef>, Vec<BlockRef>) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let (mut mine, mut busy): (Vec<_>, Vec<_>) =
            blocks.iter().partition(|&&(s, b, _)| p.insert((s, b)));
        // Fetched and released since the caller looked: cached now, so
        // not fetched again (the caller looks it up as a busy one).
        mine.retain(|&(s, b, r)| {
            let cached = self.contains(s, b);
            if cached {
                p.remove(&(s, b));
                busy.push((s, b, r));
            }
            !cached
        });
        drop(p);
        let claim = Claim {
            cache: self,
            keys: mine.iter().map(|&(s, b, _)| (s, b)).collect(),
        };
        (claim, mine, busy)
    }

    /// Waits until none of `blocks` is being fetched.
    pub(super) fn wait_for(&self, blocks: &[(usize, u64, u64)]) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        while blocks.iter().any(|&(s, b, _)| p.contains(&(s, b))) {
            p = self.fetched.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Whether block `b` of shard `s` is cached (in memory, mapped, or a
    /// file in the directory, unchecked): what a prefetch leaves alone.
    pub(super) fn contains(&self, s: usize, b: u64) -> bool {
        let in_memory = self
            .memory
            .as_ref()
            .and_then(|m| m.read().ok())
            .is_some_and(|m| m.blocks.contains_key(&block_key(s, b)));
        in_memory || self.disk.as_ref().is_some_and(|d| d.contains(s, b))
    }

    /// The tier a gather copies straight out of: the memory tier, or
    /// without one the directory's mapped blocks (`true`: those).
    pub(super) fn resident_tier(&self) -> Option<(&RwLock<MemoryBlocks>, bool)> {
        match (&self.memory, &self.disk) {
            (Some(m), _) => Some((m, false)),
            (None, Some(d)) => Some((&d.maps, true)),
            (None, None) => None,
        }
    }

    /// Blocks `(s, b, len)` (block `b` of shard `s`, `len` bytes long), in
    /// order, `None` where not cached. The memory tier is read-locked once
    /// for the whole list. From the directory a block comes out of its map
    /// (mapped and checked when first asked for), and is copied into the
    /// memory tier when there is one.
    pub(super) fn get_many(&self, keys: &[(usize, u64, u64)]) -> Vec<Option<Hit>> {
        let mut hits: Vec<Option<Hit>> = match self.memory.as_ref().and_then(|m| m.read().ok()) {
            Some(m) => {
                let tick = m.next_tick();
                keys.iter()
                    .map(|&(s, b, _)| {
                        m.touch(block_key(s, b), tick)
                            .map(|(bytes, _)| Hit::Memory(bytes.clone()))
                    })
                    .collect()
            }
            None => keys.iter().map(|_| None).collect(),
        };
        let Some(disk) = &self.disk else {
            return hits;
        };
        for (hit, &(s, b, len)) in hits.iter_mut().zip(keys) {
            if hit.is_some() {
                continue;
            }
            *hit = disk.get(s, b, len).map(|bytes| {
                if let Some(m) = &self.memory
                    && let Ok(mut m) = m.write()
                {
                    // A copy: the memory tier holds memory, not maps.
                    m.put(s, b, Bytes::copy_from_slice(&bytes));
                }
                Hit::Disk(bytes)
            });
        }
        hits
    }

    /// The resident tier's blocks ([`Self::resident_tier`]) holding every
    /// `(record, shard, offset, length)` of `wanted`, with how many blocks
    /// that is (the hits); `None` when one is not resident (the general
    /// path then fetches what is missing). The tier is read-locked while
    /// the blocks are looked up
    /// (each once, however many records it holds), not while the gather
    /// decodes. The stored bytes of a record straddling blocks are copied
    /// into a piece of their own (a fraction of a percent of records with
    /// the default 256 KiB blocks).
    pub(super) fn resident(&self, wanted: &[(u64, usize, u64, u32)]) -> Option<(Fetched, u64)> {
        let g = self.geometry;
        let m = self.resident_tier()?.0.read().ok()?;
        let tick = m.next_tick();
        let mut blocks: HashMap<u64, Bytes, FastKeys> = HashMap::with_capacity_and_hasher(
            wanted.len().min(m.blocks.len()),
            FastKeys::default(),
        );
        let mut straddling: Vec<(usize, u64, u32)> = Vec::new();
        for &(_, s, offset, len) in wanted {
            let (b0, _) = g.split(offset);
            let (b1, last) = g.split(offset.checked_add(u64::from(len).max(1) - 1)?);
            for b in b0..=b1 {
                let key = block_key(s, b);
                let block = match blocks.entry(key) {
                    Entry::Occupied(o) => o.into_mut(),
                    Entry::Vacant(v) => v.insert(m.touch(key, tick)?.0.clone()),
                };
                // Past the end of a shard's last block: the general path's.
                if b == b1 && block.len() <= last {
                    return None;
                }
            }
            if b1 != b0 {
                straddling.push((s, offset, len));
            }
        }
        drop(m);
        // Sorted by shard, start and length, as `pieces_get` finds them: of
        // aliased records at one offset, the longest comes last.
        straddling.sort_unstable();
        straddling.dedup();
        let mut stitched = Vec::with_capacity(straddling.len());
        for (s, offset, len) in straddling {
            let len = len as usize;
            let mut buf = BytesMut::with_capacity(len);
            let (mut b, mut at) = g.split(offset);
            while buf.len() < len {
                let block = blocks.get(&block_key(s, b))?;
                let n = block.len().saturating_sub(at).min(len - buf.len());
                // A block short of the record: the general path decides.
                let src = block.get(at..at + n).filter(|src| !src.is_empty())?;
                buf.extend_from_slice(src);
                b += 1;
                at = 0;
            }
            stitched.push((s, offset, buf.freeze()));
        }
        let hits = blocks.len() as u64;
        Some((
            Fetched::Blocks {
                geometry: g,
                blocks,
                stitched,
            },
            hits,
        ))
    }

    pub(super) fn put(&self, s: usize, b: u64, bytes: &Bytes) {
        if let Some(m) = &self.memory
            && let Ok(mut m) = m.write()
        {
            m.put(s, b, bytes.clone());
        }
        if let Some(d) = &self.disk {
            d.put(s, b, bytes);
        }
    }
}

/// A cached block.
pub(super) enum Hit {
    /// From the memory tier.
    Memory(Bytes),
    /// From the directory: out of the block's map, checked when mapped.
    Disk(Bytes),
}

impl Hit {
    pub(super) fn bytes(&self) -> &Bytes {
        match self {
            Hit::Memory(b) | Hit::Disk(b) => b,
        }
    }
}

/// The subdirectory of a cache directory that loaderx owns: eviction
/// deletes only in it.
pub const CACHE_SUBDIR: &str = "loaderx-blocks-v1";

/// The marker file in [`CACHE_SUBDIR`] that says whose it is.
pub(super) const CACHE_MARKER: &str = "LOADERX-BLOCK-CACHE";

/// Bytes of the checksum that follows each block in its file.
pub(super) const CHECKSUM_LEN: usize = 32;

/// The most block files one open store keeps mapped (each is one mapping
/// of the process's `vm.max_map_count`, 65530 by default on Linux).
pub(super) const MAX_MAPPED_BLOCKS: u64 = 8192;

/// How often, at most, the blocks an open store read from its maps are
/// marked recently used in the directory (their modification time, which
/// eviction goes by); also done at eviction and when the store is dropped.
pub(super) const RECENCY_INTERVAL: Duration = Duration::from_secs(30);

/// Blocks in a directory shared by processes:
/// `ROOT/loaderx-blocks-v1/IDENTITY/S-B.blk`, each a block's bytes and
/// their checksum.
///
/// A block is read through a map of its file, checked (length and
/// checksum) once, when this open store first maps it, and then kept in
/// [`DiskCache::maps`], a bounded table of mapped blocks that a hit reads
/// straight out of: only the bytes a gather asks for are touched, and a hit
/// makes no system call. Recency is kept in that table and written to the
/// directory (as the files' modification times) at most every
/// [`RECENCY_INTERVAL`], before this process evicts, and when the store is
/// dropped, never per read.
pub(super) struct DiskCache {
    /// `ROOT/loaderx-blocks-v1`.
    pub(super) root: PathBuf,
    pub(super) dir: PathBuf,
    /// The store's identity, part of every block's checksum.
    pub(super) identity: String,
    pub(super) limit: u64,
    /// This process's estimate of the directory's size, all stores.
    pub(super) used: AtomicU64,
    pub(super) evicting: Mutex<()>,
    /// The blocks this open store has mapped and checked, by [`block_key`],
    /// least recently used unmapped first beyond its limit (at most
    /// [`MAX_MAPPED_BLOCKS`] blocks, and at most the directory's limit).
    /// Its stamps are the blocks' recency in this process.
    pub(super) maps: RwLock<MemoryBlocks>,
    /// The tick of [`DiskCache::maps`] up to which recency was written to
    /// the directory.
    pub(super) flushed_tick: AtomicU64,
    /// Seconds since `born` when recency was last written.
    pub(super) flushed_at: AtomicU64,
    pub(super) born: Instant,
    /// Held while recency is written.
    pub(super) flushing: Mutex<()>,
}

/// Creates directory `dir` if absent and checks that it is a directory, not
/// a symbolic link to one.
pub(super) fn own_dir(dir: &Path) -> Result<(), Error> {
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(dir, e)),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !m.file_type().is_dir() {
        return Err(Error::io(
            dir,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the block cache needs a directory here, and this is not one (a link?)",
            ),
        ));
    }
    Ok(())
}

/// Opens `path` for reading without following a symbolic link (and without
/// waiting on a FIFO put in a block's place).
pub(super) fn open_nofollow(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Shard and block of a block file's name (`S-B.blk`).
fn block_of_name(name: &str) -> Option<(usize, u64)> {
    let (s, b) = name.strip_suffix(".blk")?.split_once('-')?;
    // Shards number at most 255: another name is none of this store's.
    Some((usize::from(s.parse::<u8>().ok()?), b.parse().ok()?))
}

impl DiskCache {
    /// The cache of the store `identity` in directory `base`, which holds
    /// at most `limit` bytes of blocks of at most `block_bytes` bytes each.
    pub(super) fn new(
        base: &Path,
        identity: &str,
        limit: u64,
        block_bytes: u64,
    ) -> Result<DiskCache, Error> {
        std::fs::create_dir_all(base).map_err(|e| Error::io(base, e))?;
        let root = base.join(CACHE_SUBDIR);
        own_dir(&root)?;
        let marker = root.join(CACHE_MARKER);
        {
            use std::os::unix::fs::OpenOptionsExt;
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&marker)
            {
                Ok(mut f) => {
                    let _ = f.write_all(
                        b"loaderx block cache: blocks of remote stores, evicted by loaderx; \
                          safe to delete when no loaderx process runs\n",
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io(&marker, e)),
            }
        }
        let dir = root.join(identity);
        own_dir(&dir)?;
        let used = scan(&root).iter().map(|f| f.1).sum();
        let maps = MemoryBlocks {
            limit: limit.min(MAX_MAPPED_BLOCKS.saturating_mul(block_bytes)),
            ..MemoryBlocks::default()
        };
        Ok(DiskCache {
            root,
            dir,
            identity: identity.to_string(),
            limit,
            used: AtomicU64::new(used),
            evicting: Mutex::new(()),
            maps: RwLock::new(maps),
            flushed_tick: AtomicU64::new(0),
            flushed_at: AtomicU64::new(0),
            born: Instant::now(),
            flushing: Mutex::new(()),
        })
    }

    pub(super) fn file(&self, s: usize, b: u64) -> PathBuf {
        self.dir.join(format!("{s}-{b}.blk"))
    }

    /// The checksum of block `b` of shard `s` holding `bytes`: bound to the
    /// store's identity and the block's place, so that a damaged block, or
    /// one of another store or block size, is a miss.
    pub(super) fn checksum(&self, s: usize, b: u64, bytes: &[u8]) -> [u8; CHECKSUM_LEN] {
        let mut h = Sha256::new();
        h.update(self.identity.as_bytes());
        h.update((s as u64).to_le_bytes());
        h.update(b.to_le_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
        h.finalize().into()
    }

    /// Whether block `b` of shard `s` is mapped, or has a file (unchecked).
    pub(super) fn contains(&self, s: usize, b: u64) -> bool {
        let mapped = self
            .maps
            .read()
            .is_ok_and(|m| m.blocks.contains_key(&block_key(s, b)));
        mapped || self.file(s, b).exists()
    }

    /// Block `b` of shard `s`, `len` bytes long: out of its map when this
    /// open store has mapped it, else mapped now if its file holds `len`
    /// bytes and their checksum (else the file is removed, to be fetched
    /// again). Marks it recently used, in memory.
    pub(super) fn get(&self, s: usize, b: u64, len: u64) -> Option<Bytes> {
        let key = block_key(s, b);
        let mapped_len = {
            let m = self.maps.read().unwrap_or_else(|e| e.into_inner());
            let tick = m.next_tick();
            match m.touch(key, tick) {
                Some((bytes, _)) if bytes.len() as u64 == len => return Some(bytes.clone()),
                Some(_) => true,
                None => false,
            }
        };
        if mapped_len {
            // Asked for at another length: not this block (as for a file).
            self.forget(key);
            let _ = std::fs::remove_file(self.file(s, b));
            return None;
        }
        let bytes = self.open(s, b, len)?;
        self.maps
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .put(s, b, bytes.clone());
        Some(bytes)
    }

    /// Maps block `b` of shard `s` and checks it (`len` bytes and their
    /// checksum); a file that fails is removed.
    fn open(&self, s: usize, b: u64, len: u64) -> Option<Bytes> {
        let p = self.file(s, b);
        let f = open_nofollow(&p).ok()?;
        let want = len.checked_add(CHECKSUM_LEN as u64)?;
        let whole = match f.metadata() {
            Ok(m) if m.is_file() && m.len() == want => self.map_or_read(&f, want),
            Ok(m) if !m.is_file() => return None,
            _ => None,
        };
        let ok = whole.filter(|whole| {
            let (block, sum) = whole.split_at(len as usize);
            self.checksum(s, b, block)[..] == *sum
        });
        match ok {
            Some(whole) => Some(whole.slice(..len as usize)),
            None => {
                let _ = std::fs::remove_file(&p);
                None
            }
        }
    }

    /// The `len` bytes of block file `f` (its size): mapped, or read into
    /// memory where the map fails (no mappings left).
    fn map_or_read(&self, f: &File, len: u64) -> Option<Bytes> {
        let n = usize::try_from(len).ok()?;
        // SAFETY: memmap2 requires that the mapped file is not modified or
        // truncated while mapped. Block files are immutable: loaderx writes
        // each to a fresh temporary file and renames it into place, never
        // writes to a block file again, and deletes it by unlinking (the
        // map stays valid). A foreign process truncating a file in the
        // cache directory is outside that contract and documented as such
        // (it would raise SIGBUS, as for a local store's shards); one
        // changing bytes in place is as trusted as the directory is.
        let map = unsafe { memmap2::MmapOptions::new().len(n).map(f) };
        match map {
            Ok(map) => Some(Bytes::from_owner(map)),
            Err(_) => {
                let mut buf = Vec::with_capacity(n);
                // One byte more than expected tells a file that grew.
                f.take(len + 1).read_to_end(&mut buf).ok()?;
                (buf.len() == n).then(|| Bytes::from(buf))
            }
        }
    }

    /// Drops block `key` from the maps.
    fn forget(&self, key: u64) {
        self.maps
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    pub(super) fn put(&self, s: usize, b: u64, bytes: &[u8]) {
        // A fresh name, created with O_EXCL (never an existing file or link).
        let written = tempfile::Builder::new()
            .prefix(".blk-")
            .suffix(".tmp")
            .tempfile_in(&self.dir)
            .and_then(|mut tmp| {
                tmp.write_all(bytes)?;
                tmp.write_all(&self.checksum(s, b, bytes))?;
                tmp.persist(self.file(s, b)).map_err(|e| e.error)?;
                Ok(())
            });
        if written.is_err() {
            // A full or read-only disk makes the cache a no-op, never an
            // error (the temporary file is removed when dropped).
            return;
        }
        let n = (bytes.len() + CHECKSUM_LEN) as u64;
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        if used > self.limit {
            self.evict();
        }
    }

    /// Writes recency to the directory when [`RECENCY_INTERVAL`] has passed
    /// since it last was: what a gather calls (a clock read otherwise).
    pub(super) fn note_use(&self) {
        let now = self.born.elapsed().as_secs();
        let last = self.flushed_at.load(Ordering::Relaxed);
        if now >= last + RECENCY_INTERVAL.as_secs()
            && self
                .flushed_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.flush_recency();
        }
    }

    /// Marks the blocks read out of the maps since the last call recently
    /// used in the directory (their files' modification time, which
    /// eviction goes by, in every process sharing the directory).
    pub(super) fn flush_recency(&self) {
        let Ok(_guard) = self.flushing.try_lock() else {
            return;
        };
        let used: Vec<u64> = {
            let m = self.maps.read().unwrap_or_else(|e| e.into_inner());
            let since = self.flushed_tick.load(Ordering::Relaxed);
            self.flushed_tick
                .store(m.tick.load(Ordering::Relaxed), Ordering::Relaxed);
            m.blocks
                .iter()
                .filter(|(_, c)| c.stamp.load(Ordering::Relaxed) > since)
                .map(|(&k, _)| k)
                .collect()
        };
        let now = SystemTime::now();
        for key in used {
            let (s, b) = block_of_key(key);
            // Evicted by another process meanwhile: nothing to mark.
            if let Ok(f) = open_nofollow(&self.file(s, b)) {
                let _ = f.set_modified(now);
            }
        }
    }

    /// Deletes the least recently used blocks of every store in the
    /// directory until it is under 90% of its limit (this store's recency
    /// written first; its blocks deleted are unmapped).
    pub(super) fn evict(&self) {
        let Ok(_guard) = self.evicting.try_lock() else {
            return;
        };
        self.flush_recency();
        let mut files = scan(&self.root);
        files.sort_unstable_by_key(|f| f.2);
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        let target = self.limit / 10 * 9;
        for (p, len, _) in files {
            if total <= target {
                break;
            }
            // Another process may have removed it first.
            let _ = std::fs::remove_file(&p);
            total = total.saturating_sub(len);
            if p.parent() == Some(self.dir.as_path())
                && let Some((s, b)) = p.file_name().and_then(|n| block_of_name(n.to_str()?))
            {
                self.forget(block_key(s, b));
            }
        }
        self.used.store(total, Ordering::Relaxed);
    }
}

impl Drop for DiskCache {
    /// Writes this open store's recency to the directory.
    fn drop(&mut self) {
        self.flush_recency();
    }
}

/// True for a name that loaderx gives a store's directory in the cache
/// (32 lowercase hex digits).
pub(super) fn is_identity_name(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// True for a name that loaderx gives a block file (`S-B.blk`).
pub(super) fn is_block_name(name: &str) -> bool {
    name.strip_suffix(".blk")
        .and_then(|n| n.split_once('-'))
        .is_some_and(|(s, b)| {
            !s.is_empty() && !b.is_empty() && s.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
        })
}

/// Every block file that loaderx wrote under `root` (its own
/// [`CACHE_SUBDIR`]): regular files named as blocks, in directories named
/// as identities, links never followed. Path, size, modification time.
pub(super) fn scan(root: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let Ok(stores) = std::fs::read_dir(root) else {
        return out;
    };
    for store in stores.flatten() {
        if !store.file_type().is_ok_and(|t| t.is_dir())
            || !store.file_name().to_str().is_some_and(is_identity_name)
        {
            continue;
        }
        let Ok(blocks) = std::fs::read_dir(store.path()) else {
            continue;
        };
        for block in blocks.flatten() {
            if block.file_type().is_ok_and(|t| t.is_file())
                && block.file_name().to_str().is_some_and(is_block_name)
                && let Ok(m) = block.metadata()
            {
                out.push((
                    block.path(),
                    m.len(),
                    m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                ));
            }
        }
    }
    out
}
