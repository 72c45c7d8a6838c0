use super::*;
use crate::codec::Codec;

#[test]
fn fetched_pieces_are_found_by_shard_and_offset() {
    let f = Fetched::Pieces(vec![
        (0, 10, Bytes::from_static(b"abcdef")),
        (0, 100, Bytes::from_static(b"xyz")),
        (1, 0, Bytes::from_static(b"0123")),
    ]);
    assert_eq!(f.get(0, 10, 6), Some(&b"abcdef"[..]));
    assert_eq!(f.get(0, 12, 2), Some(&b"cd"[..]));
    assert_eq!(f.get(0, 101, 2), Some(&b"yz"[..]));
    assert_eq!(f.get(1, 1, 3), Some(&b"123"[..]));
    assert_eq!(f.get(0, 14, 4), None, "runs past its piece");
    assert_eq!(f.get(0, 9, 1), None, "before every piece");
    assert_eq!(f.get(1, 2, 3), None);
    assert_eq!(f.get(2, 0, 1), None);
}

#[test]
fn the_memory_cache_evicts_least_recently_used_blocks() {
    let mut m = MemoryBlocks {
        limit: 10,
        ..MemoryBlocks::default()
    };
    // One lookup per gather, each at a tick of its own.
    let get = |m: &MemoryBlocks, b: u64| {
        let tick = m.next_tick();
        m.touch(block_key(0, b), tick)
            .map(|(bytes, _)| bytes.clone())
    };
    m.put(0, 0, Bytes::from_static(b"aaaa"));
    m.put(0, 1, Bytes::from_static(b"bbbb"));
    assert!(get(&m, 0).is_some()); // 0 is now the most recent
    m.put(0, 2, Bytes::from_static(b"cccc"));
    assert!(get(&m, 1).is_none(), "least recently used went first");
    assert!(get(&m, 0).is_some() && get(&m, 2).is_some());
    assert!(m.used <= m.limit);
    m.put(0, 3, Bytes::from(vec![0; 11]));
    assert!(get(&m, 3).is_none(), "a block over the limit is not kept");
    // A block is new to a gather once, whatever the lookups.
    let tick = m.next_tick();
    assert_eq!(m.touch(block_key(0, 0), tick).map(|h| h.1), Some(true));
    assert_eq!(m.touch(block_key(0, 0), tick).map(|h| h.1), Some(false));
    assert_eq!(m.touch(block_key(1, 0), tick).map(|h| h.1), None);
}

#[test]
fn resident_blocks_stitch_straddling_records() {
    let o = RemoteOptions::default()
        .memory_cache_bytes(1 << 20)
        .block_bytes(5000);
    let Ok(Some(cache)) = BlockCache::new(&o, "id") else {
        panic!("a memory tier");
    };
    let shard: Vec<u8> = (0..12_000u32).map(|i| (i % 251) as u8).collect();
    for b in 0..3u64 {
        let lo = b as usize * 5000;
        let hi = shard.len().min(lo + 5000);
        cache.put(1, b, &Bytes::copy_from_slice(&shard[lo..hi]));
    }
    // (record, shard, offset, length): inside, straddling two and three
    // blocks, aliased at one offset, and to the tail.
    let wanted = [
        (0, 1, 10, 100),
        (1, 1, 4990, 20),
        (2, 1, 4000, 7000),
        (3, 1, 4990, 5),
        (4, 1, 11_000, 1000),
    ];
    let (f, hits) = cache.resident(&wanted).unwrap();
    assert_eq!(hits, 3);
    for &(_, s, off, len) in &wanted {
        let (lo, hi) = (off as usize, off as usize + len as usize);
        assert_eq!(f.get(s, off, len), Some(&shard[lo..hi]), "{off}+{len}");
    }
    assert_eq!(f.get(0, 10, 1), None, "another shard");
    // A block not in memory: the general path's.
    assert!(cache.resident(&[(0, 1, 14_000, 10)]).is_none());
    assert!(cache.resident(&[(0, 2, 0, 10)]).is_none());
}

/// Deterministic bytes (splitmix64), a quarter of them repeating so
/// that zstd has something to compress.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|i| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            if i % 4 == 0 {
                b'x'
            } else {
                (z ^ (z >> 31)) as u8
            }
        })
        .collect()
}

/// `count` indices below `n`, scattered, with repeats.
fn scattered(n: u64, count: usize, seed: u64) -> Vec<u64> {
    bytes(seed, 8 * count)
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()) % n)
        .collect()
}

/// The store `name` in the in-memory object store `mem`.
fn in_memory(mem: &Arc<dyn ObjectStore>, name: &str) -> Target {
    Target {
        store: Arc::clone(mem),
        prefix: ObjPath::from(format!("stores/{name}")),
        url: format!("memory://bkt/stores/{name}"),
    }
}

/// Pushes the local store at `path` into `mem` as `name`.
fn push_in_memory(mem: &Arc<dyn ObjectStore>, path: &Path, name: &str) {
    push_to(path, in_memory(mem, name)).unwrap();
}

/// Pushes the local store at `path` to `target`.
fn push_to(path: &Path, target: Target) -> Result<PushReport, Error> {
    let p = Pending {
        path: path.to_path_buf(),
        reader: StoreReader::open(path).unwrap(),
        target,
        uploaded: Vec::new(),
    };
    push_pending(vec![p], Vec::new(), &RemoteOptions::default())
}

/// Gathers the same batches twice, remotely and locally: the bytes
/// agree, and the second pass is served from memory without a request.
fn two_passes<T: PartialEq + std::fmt::Debug>(
    remote: &dyn Fn(&[u64]) -> T,
    local: &dyn Fn(&[u64]) -> T,
    stats: &dyn Fn() -> RemoteStats,
    batches: &[Vec<u64>],
    what: &str,
) {
    for pass in 0..2 {
        let before = stats();
        for idx in batches {
            assert_eq!(remote(idx), local(idx), "{what}, pass {pass}");
        }
        let after = stats();
        if pass == 1 {
            assert_eq!(
                after.requests, before.requests,
                "{what}: warm made requests"
            );
            assert_eq!(after.misses, before.misses, "{what}");
            assert!(after.memory_hits > before.memory_hits, "{what}: {after:?}");
        }
    }
}

#[test]
fn warm_gathers_from_an_in_memory_object_store_match_the_local_store() {
    use crate::{CreateOptions, DType, DynDense, DynDenseWriter, DynRagged, DynRaggedWriter};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    for codec in [Codec::Raw, Codec::Zstd] {
        // Dense: widths from a label to records larger than a block;
        // 16 bytes x 20000 records is big enough to copy in parallel.
        for (width, n) in [(1, 3000), (8, 3000), (784, 1500), (5000, 400), (16, 20_000)] {
            let name = format!("dense-{codec:?}-{width}");
            let path = dir.path().join(&name);
            let opts = CreateOptions::new(codec).data_shards(4);
            let mut w = DynDenseWriter::create(&path, DType::U8, &[width], &opts).unwrap();
            w.append_bytes(&bytes(width as u64, n * width), n).unwrap();
            w.close().unwrap();
            push_in_memory(&mem, &path, &name);
            let local = DynDense::open(&path).unwrap();
            let mut batches: Vec<Vec<u64>> =
                (0..3).map(|seed| scattered(n as u64, 300, seed)).collect();
            batches.push((0..n as u64).rev().collect());
            for bs in [4096, 5000, 256 << 10] {
                let o = RemoteOptions::default()
                    .memory_cache_bytes(64 << 20)
                    .block_bytes(bs);
                let remote =
                    DynDense::from_engine(open_target(in_memory(&mem, &name), &o).unwrap())
                        .unwrap();
                two_passes(
                    &|idx| remote.gather_bytes(idx).unwrap(),
                    &|idx| local.gather_bytes(idx).unwrap(),
                    &|| remote.remote_stats().unwrap(),
                    &batches,
                    &format!("{name}, {bs}-byte blocks"),
                );
                // Out of range: the same error, warm as cold.
                let e = remote.gather_bytes(&[0, n as u64]).unwrap_err();
                assert!(matches!(e.kind(), ErrorKind::IndexOutOfRange { .. }), "{e}");
            }
        }
        // Ragged: records of 4 to 12,000 bytes, straddling small blocks.
        let name = format!("ragged-{codec:?}");
        let path = dir.path().join(&name);
        let recs: Vec<(Vec<usize>, Vec<u8>)> = (0..1500usize)
            .map(|i| {
                let len = 1 + (i * 7919) % 3000;
                (vec![len], bytes(i as u64, 4 * len))
            })
            .collect();
        let opts = CreateOptions::new(codec).data_shards(3);
        let mut w = DynRaggedWriter::create(&path, DType::I32, 1, &opts).unwrap();
        w.append_bytes(recs.iter().map(|(s, b)| (&s[..], &b[..])))
            .unwrap();
        w.close().unwrap();
        push_in_memory(&mem, &path, &name);
        let local = DynRagged::open(&path).unwrap();
        // Batches of 256 decode in parallel, of 16 on the calling thread
        // (raw ones then straight out of the memory tier).
        let batches: Vec<Vec<u64>> = (0..6)
            .map(|seed| scattered(1500, if seed < 3 { 256 } else { 16 }, seed))
            .collect();
        // A packed gather reads the same records (fetched the same way).
        let flat = |s: &DynRagged, idx: &[u64]| {
            let [b, p] = [s.gather(idx).unwrap(), s.gather_packed(idx).unwrap()];
            assert!(p.layout().is_packed());
            let records = |b: &crate::DynRaggedBatch| {
                (0..b.len())
                    .map(|k| (b.shape(k).to_vec(), b.bytes(k).to_vec()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(records(&p), records(&b));
            records(&b)
        };
        for bs in [4096, 5000, 256 << 10] {
            let o = RemoteOptions::default()
                .memory_cache_bytes(64 << 20)
                .block_bytes(bs);
            let remote =
                DynRagged::from_engine(open_target(in_memory(&mem, &name), &o).unwrap()).unwrap();
            two_passes(
                &|idx| flat(&remote, idx),
                &|idx| flat(&local, idx),
                &|| remote.remote_stats().unwrap(),
                &batches,
                &format!("{name}, {bs}-byte blocks"),
            );
        }
    }
}

#[test]
fn concurrent_gathers_through_a_tiny_memory_tier_agree() {
    use rayon::prelude::*;

    use crate::{CreateOptions, DType, DynDense, DynDenseWriter};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let (width, n) = (784, 2000);
    let path = dir.path().join("s");
    let opts = CreateOptions::new(Codec::Raw).data_shards(4);
    let mut w = DynDenseWriter::create(&path, DType::U8, &[width], &opts).unwrap();
    w.append_bytes(&bytes(1, n * width), n).unwrap();
    w.close().unwrap();
    push_in_memory(&mem, &path, "s");
    let local = DynDense::open(&path).unwrap();
    // 16 blocks of 4 KiB: gathers evict each other's blocks while others
    // read, and a warm copy that misses falls back and puts.
    let o = RemoteOptions::default()
        .memory_cache_bytes(64 << 10)
        .block_bytes(4096);
    let remote = DynDense::from_engine(open_target(in_memory(&mem, "s"), &o).unwrap()).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    pool.install(|| {
        (0..64u64).into_par_iter().for_each(|seed| {
            // Small batches, often all resident; some large and parallel.
            let count = if seed % 8 == 0 {
                17_000
            } else {
                1 + (seed as usize * 37) % 64
            };
            let idx = scattered(n as u64, count, seed % 5);
            assert_eq!(
                remote.gather_bytes(&idx).unwrap(),
                local.gather_bytes(&idx).unwrap()
            );
        });
    });
    let stats = remote.remote_stats().unwrap();
    assert!(stats.memory_hits > 0 && stats.misses > 0, "{stats:?}");
}

const ID: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn the_disk_cache_refetches_a_damaged_block_and_evicts_by_age() {
    let dir = tempfile::tempdir().unwrap();
    // Each block file is its bytes and a 32-byte checksum: 42 bytes.
    let d = DiskCache::new(dir.path(), ID, 100, 4096).unwrap();
    d.put(0, 0, b"0123456789");
    assert_eq!(d.get(0, 0, 10).as_deref(), Some(&b"0123456789"[..]));
    assert_eq!(d.get(0, 0, 9), None, "wrong length is a miss");
    assert_eq!(d.get(0, 0, 10), None, "and was removed");
    // A flipped byte, or a block of another place, fails its checksum.
    d.put(0, 5, b"abcdefghij");
    let p = d.file(0, 5);
    let mut raw = std::fs::read(&p).unwrap();
    raw[3] ^= 1;
    std::fs::write(&p, &raw).unwrap();
    assert_eq!(d.get(0, 5, 10), None, "damaged");
    d.put(0, 6, b"abcdefghij");
    std::fs::rename(d.file(0, 6), d.file(0, 7)).unwrap();
    assert_eq!(d.get(0, 7, 10), None, "moved to another block");
    d.put(0, 6, b"abcdefghij");
    let other = DiskCache::new(dir.path(), &ID.replace('0', "f"), 100, 4096).unwrap();
    std::fs::copy(d.file(0, 6), other.file(0, 6)).unwrap();
    assert_eq!(other.get(0, 6, 10), None, "of another store");
    assert!(d.get(0, 6, 10).is_some());
    std::fs::remove_file(d.file(0, 6)).unwrap();
    d.put(0, 1, b"aaaaaaaaaa");
    std::thread::sleep(Duration::from_millis(20));
    d.put(0, 2, b"bbbbbbbbbb");
    std::thread::sleep(Duration::from_millis(20));
    d.put(0, 3, b"cccccccccc");
    assert!(d.used.load(Ordering::Relaxed) <= 100);
    assert_eq!(d.get(0, 1, 10), None, "the oldest block was evicted");
    assert!(d.get(0, 3, 10).is_some());
    // Temporary files are gone.
    let names: Vec<String> = std::fs::read_dir(&d.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| n.ends_with(".blk")), "{names:?}");
}

/// The modification time of `p`.
fn mtime(p: &Path) -> SystemTime {
    std::fs::symlink_metadata(p).unwrap().modified().unwrap()
}

/// Sets the modification time of `p` to `secs` after the epoch.
fn set_mtime(p: &Path, secs: u64) {
    let f = std::fs::File::open(p).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

#[test]
fn a_disk_hit_reads_its_map_and_writes_recency_only_when_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let d = DiskCache::new(dir.path(), ID, 1 << 20, 4096).unwrap();
    d.put(0, 0, b"0123456789");
    let p = d.file(0, 0);
    set_mtime(&p, 1_000_000);
    let old = mtime(&p);
    for _ in 0..100 {
        assert_eq!(d.get(0, 0, 10).as_deref(), Some(&b"0123456789"[..]));
    }
    assert_eq!(mtime(&p), old, "a hit wrote the file's metadata");
    assert!(d.maps.read().unwrap().blocks.contains_key(&block_key(0, 0)));
    // Checked once, when mapped: the map is what a hit reads, even after
    // the file is gone (evicted by another process).
    std::fs::rename(&p, dir.path().join("elsewhere")).unwrap();
    assert_eq!(d.get(0, 0, 10).as_deref(), Some(&b"0123456789"[..]));
    std::fs::rename(dir.path().join("elsewhere"), &p).unwrap();
    // Recency reaches the directory when flushed (every 30 s at most, at
    // eviction, when the store is dropped), once per block.
    d.flush_recency();
    let flushed = mtime(&p);
    assert!(
        flushed > old + Duration::from_secs(1_000_000),
        "{flushed:?}"
    );
    set_mtime(&p, 1_000_000);
    d.flush_recency();
    assert_eq!(mtime(&p), old, "flushed again without a use");
    assert!(d.get(0, 0, 10).is_some());
    drop(d);
    assert!(mtime(&p) > old, "recency written when the store is dropped");
}

#[test]
fn eviction_keeps_blocks_read_from_their_maps_and_unmaps_what_it_deletes() {
    let dir = tempfile::tempdir().unwrap();
    // Each block file is 42 bytes: three fit, a fourth evicts one (to 90%).
    let d = DiskCache::new(dir.path(), ID, 140, 4096).unwrap();
    for b in 1..=3 {
        d.put(0, b, b"0123456789");
        set_mtime(&d.file(0, b), 1_000_000 + 10 * b);
    }
    for b in [1, 2] {
        assert!(d.get(0, b, 10).is_some());
    }
    d.flush_recency();
    // Block 1 is read again (in memory only); 2 and 3 are not.
    for b in 2..=3 {
        set_mtime(&d.file(0, b), 1_000_000 + 10 * b);
    }
    set_mtime(&d.file(0, 1), 1_000_000);
    assert!(d.get(0, 1, 10).is_some());
    d.put(0, 4, b"0123456789");
    assert!(d.used.load(Ordering::Relaxed) <= 140);
    let left: u64 = scan(&d.root).iter().map(|f| f.1).sum();
    assert!(left <= 140, "{left}");
    assert!(d.file(0, 1).exists(), "the block read last was kept");
    assert!(!d.file(0, 2).exists(), "the least recently used went");
    assert!(
        !d.maps.read().unwrap().blocks.contains_key(&block_key(0, 2)),
        "and was unmapped"
    );
    assert_eq!(d.get(0, 2, 10), None);
    assert!(d.get(0, 1, 10).is_some() && d.get(0, 3, 10).is_some());
}

#[test]
fn blocks_damaged_in_the_directory_before_first_use_are_fetched_again() {
    use crate::{CreateOptions, DType, DynDense, DynDenseWriter};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let path = dir.path().join("s");
    let opts = CreateOptions::new(Codec::Raw).data_shards(1);
    let mut w = DynDenseWriter::create(&path, DType::U8, &[1000], &opts).unwrap();
    w.append_bytes(&bytes(7, 40 * 1000), 40).unwrap();
    w.close().unwrap();
    push_in_memory(&mem, &path, "s");
    let local = DynDense::open(&path).unwrap();
    let all: Vec<u64> = (0..40).collect();
    let want = local.gather_bytes(&all).unwrap();
    let cache = dir.path().join("cache");
    let o = RemoteOptions::default()
        .memory_cache_bytes(0)
        .cache_dir(Some(cache.clone()))
        .block_bytes(4096);
    let open = || DynDense::from_engine(open_target(in_memory(&mem, "s"), &o).unwrap()).unwrap();
    let first = open();
    assert_eq!(first.gather_bytes(&all).unwrap(), want);
    drop(first);
    // 40 000 bytes: blocks 0 to 9. One flipped byte, one truncated file,
    // one file of another block in a block's place.
    let store = std::fs::read_dir(cache.join(CACHE_SUBDIR))
        .unwrap()
        .flatten()
        .find(|e| e.file_type().unwrap().is_dir())
        .unwrap()
        .path();
    let file = |b: u64| store.join(format!("0-{b}.blk"));
    let mut raw = std::fs::read(file(2)).unwrap();
    raw[100] ^= 1;
    std::fs::write(file(2), raw).unwrap();
    let raw = std::fs::read(file(5)).unwrap();
    std::fs::write(file(5), &raw[..raw.len() - 1]).unwrap();
    std::fs::copy(file(8), file(7)).unwrap();
    let second = open();
    for pass in 0..3 {
        assert_eq!(second.gather_bytes(&all).unwrap(), want, "pass {pass}");
    }
    let st = second.remote_stats().unwrap();
    assert_eq!(st.misses, 3, "{st:?}");
    assert!(st.disk_hits > 0 && st.memory_hits == 0, "{st:?}");
    drop(second);
    // Written again, whole: a third open finds every block.
    let third = open();
    assert_eq!(third.gather_bytes(&all).unwrap(), want);
    let st = third.remote_stats().unwrap();
    assert_eq!(st.misses, 0, "{st:?}");
}

#[test]
fn warm_gathers_from_the_cache_directory_write_no_metadata() {
    use crate::{CreateOptions, DType, DynRagged, DynRaggedWriter};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let path = dir.path().join("r");
    let opts = CreateOptions::new(Codec::Raw).data_shards(2);
    let mut w = DynRaggedWriter::create(&path, DType::U8, 1, &opts).unwrap();
    let payload = bytes(11, 300 * 200);
    let recs: Vec<(Vec<usize>, &[u8])> = (0..300)
        .map(|i| {
            let n = 20 + i % 180;
            (vec![n], &payload[i * 200..i * 200 + n])
        })
        .collect();
    w.append_bytes(recs.iter().map(|(s, b)| (&s[..], *b)))
        .unwrap();
    w.close().unwrap();
    push_in_memory(&mem, &path, "r");
    let local = DynRagged::open(&path).unwrap();
    let cache = dir.path().join("cache");
    let o = RemoteOptions::default()
        .memory_cache_bytes(0)
        .cache_dir(Some(cache.clone()))
        .block_bytes(4096);
    let batches: Vec<Vec<u64>> = (0..6).map(|k| scattered(300, 64, k)).collect();
    let flat = |b: &crate::DynRaggedBatch| -> Vec<Vec<u8>> {
        (0..b.len()).map(|k| b.bytes(k).to_vec()).collect()
    };
    let remote = DynRagged::from_engine(open_target(in_memory(&mem, "r"), &o).unwrap()).unwrap();
    for idx in &batches {
        remote.gather(idx).unwrap();
    }
    let files: Vec<PathBuf> = scan(&cache.join(CACHE_SUBDIR))
        .into_iter()
        .map(|f| f.0)
        .collect();
    assert!(!files.is_empty());
    for f in &files {
        set_mtime(f, 1_000_000);
    }
    let before = remote.remote_stats().unwrap();
    for _ in 0..3 {
        for idx in &batches {
            assert_eq!(
                flat(&remote.gather(idx).unwrap()),
                flat(&local.gather(idx).unwrap())
            );
        }
    }
    let after = remote.remote_stats().unwrap();
    assert_eq!(after.requests, before.requests);
    assert!(after.disk_hits > before.disk_hits, "{after:?}");
    assert_eq!(after.memory_hits, 0, "{after:?}");
    for f in &files {
        let t = mtime(f);
        assert_eq!(t, SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000));
    }
    drop(remote);
    assert!(
        files
            .iter()
            .all(|f| mtime(f) > SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000)),
        "recency written when the store is dropped"
    );
}

#[test]
fn eviction_deletes_only_in_the_owned_subdirectory() {
    let dir = tempfile::tempdir().unwrap();
    // What a misconfigured LOADERX_CACHE_DIR=$HOME/data holds.
    let mine = dir.path().join("experiment");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("0-1.blk"), b"precious").unwrap();
    std::fs::write(dir.path().join("top.blk"), b"precious").unwrap();
    let named = dir.path().join(ID);
    std::fs::create_dir(&named).unwrap();
    std::fs::write(named.join("0-0.blk"), b"precious").unwrap();
    let d = DiskCache::new(dir.path(), ID, 50, 4096).unwrap();
    assert!(dir.path().join(CACHE_SUBDIR).join(CACHE_MARKER).is_file());
    assert!(d.dir.starts_with(dir.path().join(CACHE_SUBDIR)));
    for b in 0..8 {
        d.put(0, b, b"0123456789");
    }
    assert!(d.used.load(Ordering::Relaxed) <= 50);
    for p in [
        mine.join("0-1.blk"),
        dir.path().join("top.blk"),
        named.join("0-0.blk"),
    ] {
        assert_eq!(std::fs::read(&p).unwrap(), b"precious", "{}", p.display());
    }
    // A link in place of a block is not followed, and a put replaces
    // the link, never its target.
    let outside = dir.path().join("outside");
    std::fs::write(&outside, b"keep").unwrap();
    let _ = std::fs::remove_file(d.file(0, 7));
    std::os::unix::fs::symlink(&outside, d.file(0, 7)).unwrap();
    assert_eq!(d.get(0, 7, 10), None);
    d.put(0, 7, b"0123456789");
    assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    assert!(d.get(0, 7, 10).is_some());
    // A link in place of the owned subdirectory is refused.
    let other = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(dir.path(), other.path().join(CACHE_SUBDIR)).unwrap();
    assert!(DiskCache::new(other.path(), ID, 50, 4096).is_err());
}

#[test]
fn the_runtime_cell_is_built_once_however_many_threads_race() {
    let cell: OnceLock<u64> = OnceLock::new();
    let lock = Mutex::new(());
    let builds = AtomicU64::new(0);
    let barrier = std::sync::Barrier::new(8);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                barrier.wait();
                let v = init_once(&cell, &lock, || {
                    std::thread::sleep(Duration::from_millis(20));
                    Ok(builds.fetch_add(1, Ordering::SeqCst))
                })
                .unwrap();
                assert_eq!(*v, 0);
            });
        }
    });
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    // A failed build leaves the cell empty for the next caller.
    let cell: OnceLock<u64> = OnceLock::new();
    assert!(init_once(&cell, &lock, || Err(Error::invalid("no"))).is_err());
    assert_eq!(*init_once(&cell, &lock, || Ok(7)).unwrap(), 7);
    // And the real runtime, first used from inside other runtimes.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async { runtime().map(|r| r as *const _ as usize).unwrap() })
            });
        }
    });
}

#[test]
fn debug_of_the_options_prints_keys_and_redacts_secrets() {
    let o = RemoteOptions::default()
        .config("aws_access_key_id", "AKIDSECRET1")
        .config("aws_secret_access_key", "SECRET2")
        .config("aws_session_token", "SECRET3")
        .config("azure_storage_sas_key", "sv=1&sig=SECRET4")
        .config("azure_storage_account_key", "SECRET5")
        .config("google_service_account_key", "SECRET6")
        .config("aws_region", "eu-west-1")
        .config(
            "aws_endpoint",
            "http://user:SECRET7@127.0.0.1:9000/?tok=SECRET8",
        )
        .config("AWS_ALLOW_HTTP", "true");
    let d = format!("{o:?}");
    assert!(!d.contains("SECRET"), "{d}");
    for shown in [
        "aws_secret_access_key",
        "aws_session_token",
        "azure_storage_sas_key",
        "eu-west-1",
        "http://127.0.0.1:9000/",
        "\"true\"",
        "<redacted>",
        "block_bytes",
    ] {
        assert!(d.contains(shown), "{shown}: {d}");
    }
}

#[test]
fn blocks_of_two_block_sizes_in_one_directory_never_mix() {
    use crate::{CreateOptions, DType, DynDense, DynDenseWriter};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    // One raw shard of 12288 bytes: block 1 of 8192-byte blocks is 4096
    // bytes long, as is block 1 of 4096-byte blocks (other bytes).
    let path = dir.path().join("s");
    let opts = CreateOptions::new(Codec::Raw).data_shards(1);
    let mut w = DynDenseWriter::create(&path, DType::U8, &[1024], &opts).unwrap();
    w.append_bytes(&bytes(3, 12 * 1024), 12).unwrap();
    w.close().unwrap();
    assert_eq!(StoreReader::open(&path).unwrap().tails(), [12288]);
    push_in_memory(&mem, &path, "s");
    let local = DynDense::open(&path).unwrap();
    let all: Vec<u64> = (0..12).collect();
    let cache = dir.path().join("cache");
    for bs in [4096, 8192, 4096] {
        let o = RemoteOptions::default()
            .memory_cache_bytes(0)
            .cache_dir(Some(cache.clone()))
            .block_bytes(bs);
        let remote = DynDense::from_engine(open_target(in_memory(&mem, "s"), &o).unwrap()).unwrap();
        assert_eq!(
            remote.gather_bytes(&all).unwrap(),
            local.gather_bytes(&all).unwrap(),
            "{bs}-byte blocks"
        );
    }
}

#[test]
fn a_stale_dict_from_an_aborted_push_does_not_spoil_a_later_push() {
    use crate::{CreateOptions, DType, DynDense, DynDenseWriter};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let t = in_memory(&mem, "s");
    block_on(mem.put(
        &t.object(DICT_FILE),
        PutPayload::from_static(b"old dictionary"),
    ))
    .unwrap()
    .unwrap();
    let path = dir.path().join("s");
    let mut w =
        DynDenseWriter::create(&path, DType::U8, &[8], &CreateOptions::new(Codec::Zstd)).unwrap();
    w.append_bytes(&bytes(1, 800), 100).unwrap();
    w.close().unwrap();
    push_in_memory(&mem, &path, "s");
    let o = RemoteOptions::default();
    let remote = DynDense::from_engine(open_target(in_memory(&mem, "s"), &o).unwrap()).unwrap();
    let local = DynDense::open(&path).unwrap();
    assert_eq!(
        remote.gather_bytes(&[0, 99]).unwrap(),
        local.gather_bytes(&[0, 99]).unwrap()
    );
    // The store id was written beside it.
    assert!(
        block_on(mem.head(&t.object(STORE_ID_FILE)))
            .unwrap()
            .is_ok()
    );
}

#[test]
fn a_set_push_checks_every_target_before_uploading_anything() {
    use crate::{CreateOptions, DType, DynDenseWriter};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let mut pending = Vec::new();
    for name in ["a", "b"] {
        let path = dir.path().join(name);
        let mut w = DynDenseWriter::create(&path, DType::U8, &[4], &CreateOptions::new(Codec::Raw))
            .unwrap();
        w.append_bytes(&bytes(2, 40), 10).unwrap();
        w.close().unwrap();
        pending.push(path);
    }
    push_in_memory(&mem, &pending[1], "b");
    let list = |prefix: &str| -> Vec<String> {
        block_on(
            mem.list(Some(&ObjPath::from(prefix)))
                .map_ok(|m| m.location.to_string())
                .try_collect::<Vec<_>>(),
        )
        .unwrap()
        .unwrap()
    };
    let before = list("stores/b");
    let set = pending
        .iter()
        .zip(["a", "b"])
        .map(|(p, n)| Pending {
            path: p.clone(),
            reader: StoreReader::open(p).unwrap(),
            target: in_memory(&mem, n),
            uploaded: Vec::new(),
        })
        .collect();
    let e = push_pending(set, Vec::new(), &RemoteOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::AlreadyExists { .. }), "{e}");
    assert!(list("stores/a").is_empty(), "nothing of a was uploaded");
    assert_eq!(list("stores/b"), before);
}

/// A small HTTP object server on 127.0.0.1 for tests: GET (of one
/// range or whole), HEAD, PUT and DELETE of objects held in memory,
/// one response per connection, without ETag or Last-Modified (as a
/// plain web server), with injected faults.
mod faulty {
    use std::collections::HashMap;
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// What the server does wrong.
    #[derive(Clone, Debug)]
    pub(super) enum Fault {
        None,
        /// Every `n`-th GET sends half its body, then closes.
        Truncate(u32),
        /// Every `n`-th GET claims one byte fewer in Content-Length.
        ShortLength(u32),
        /// Every `n`-th GET sends half its body, then resets.
        Reset(u32),
        /// The first `n` requests fail with 503.
        Unavailable(u32),
        /// HEAD of a payload shard claims this many bytes more (or fewer).
        HeadLies(i64),
        /// HEAD of meta.zr claims 2^62 bytes, and its page a matching table.
        Huge,
        /// PUT of an object whose path ends so fails with 403.
        RefusePut(String),
        /// No fault, but HEAD and GET send an ETag (of the object's
        /// bytes), weak (`W/"…"`) or strong.
        ETags {
            weak: bool,
        },
    }

    pub(super) struct Server {
        addr: SocketAddr,
        pub(super) objects: Arc<Mutex<HashMap<String, Vec<u8>>>>,
        fault: Arc<Mutex<(Fault, u32)>>,
    }

    impl Server {
        pub(super) fn start() -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let objects = Arc::new(Mutex::new(HashMap::new()));
            let fault = Arc::new(Mutex::new((Fault::None, 0)));
            let (o, f) = (Arc::clone(&objects), Arc::clone(&fault));
            // Runs until the test process ends.
            std::thread::spawn(move || {
                for c in listener.incoming().flatten() {
                    let (o, f) = (Arc::clone(&o), Arc::clone(&f));
                    std::thread::spawn(move || {
                        let _ = handle(c, &o, &f);
                    });
                }
            });
            Server {
                addr,
                objects,
                fault,
            }
        }

        pub(super) fn set(&self, f: Fault) {
            *self.fault.lock().unwrap() = (f, 0);
        }

        pub(super) fn url(&self, name: &str) -> String {
            format!("http://{}/s/{name}", self.addr)
        }

        /// Serves the files of the local store at `path` as store `name`
        /// (as a copy onto a web server would: no store id), replacing
        /// what was there.
        pub(super) fn serve_files(&self, name: &str, path: &std::path::Path) {
            self.delete_store(name);
            let mut objects = self.objects.lock().unwrap();
            for f in std::fs::read_dir(path).unwrap().flatten() {
                let file = f.file_name().into_string().unwrap();
                if file.ends_with(".zr") {
                    let bytes = std::fs::read(f.path()).unwrap();
                    objects.insert(format!("s/{name}/{file}"), bytes);
                }
            }
        }

        /// Deletes every object of store `name`.
        pub(super) fn delete_store(&self, name: &str) {
            let prefix = format!("s/{name}/");
            self.objects
                .lock()
                .unwrap()
                .retain(|k, _| !k.starts_with(&prefix));
        }
    }

    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| w == needle)
    }

    /// A chunked body decoded, once it is complete.
    fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let line = find(b, b"\r\n")?;
            let text = std::str::from_utf8(&b[..line]).ok()?;
            let n = usize::from_str_radix(text.split(';').next()?.trim(), 16).ok()?;
            b = &b[line + 2..];
            if n == 0 {
                return Some(out);
            }
            out.extend_from_slice(b.get(..n)?);
            b = b.get(n + 2..)?;
        }
    }

    fn respond(c: &mut TcpStream, status: &str, headers: &[String], body: &[u8]) {
        let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
        for h in headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        if !headers.iter().any(|h| h.starts_with("Content-Length")) {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let _ = c.write_all(head.as_bytes());
        let _ = c.write_all(body);
    }

    /// Closes `c` with a reset (SO_LINGER of zero).
    fn reset(c: TcpStream) {
        use std::os::fd::AsRawFd;
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket descriptor owned by `c`, and a
        // `linger` of the size passed.
        unsafe {
            libc::setsockopt(
                c.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
        drop(c);
    }

    fn handle(
        mut c: TcpStream,
        objects: &Mutex<HashMap<String, Vec<u8>>>,
        fault: &Mutex<(Fault, u32)>,
    ) -> std::io::Result<()> {
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut buf = Vec::new();
        let mut tmp = [0u8; 16384];
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i;
            }
            let n = c.read(&mut tmp)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&tmp[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("").to_string();
        let path = first
            .next()
            .unwrap_or("")
            .split('?')
            .next()
            .unwrap_or("")
            .trim_start_matches('/')
            .to_string();
        let headers: HashMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let mut body = buf[head_end + 4..].to_vec();
        if headers
            .get("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
        {
            loop {
                if let Some(d) = dechunk(&body) {
                    body = d;
                    break;
                }
                let n = c.read(&mut tmp)?;
                if n == 0 {
                    return Ok(());
                }
                body.extend_from_slice(&tmp[..n]);
            }
        } else {
            let len: usize = headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while body.len() < len {
                let n = c.read(&mut tmp)?;
                if n == 0 {
                    return Ok(());
                }
                body.extend_from_slice(&tmp[..n]);
            }
            body.truncate(len);
        }
        let (fault, count) = {
            let mut f = fault.lock().unwrap();
            f.1 += 1;
            f.clone()
        };
        if let Fault::Unavailable(n) = fault
            && count <= n
        {
            respond(&mut c, "503 Service Unavailable", &[], b"busy");
            return Ok(());
        }
        match method.as_str() {
            "PUT" => {
                if let Fault::RefusePut(suffix) = &fault
                    && path.ends_with(suffix.as_str())
                {
                    respond(&mut c, "403 Forbidden", &[], b"refused");
                    return Ok(());
                }
                objects.lock().unwrap().insert(path, body);
                respond(&mut c, "201 Created", &[], b"");
            }
            "DELETE" => match objects.lock().unwrap().remove(&path) {
                Some(_) => respond(&mut c, "204 No Content", &[], b""),
                None => respond(&mut c, "404 Not Found", &[], b""),
            },
            "HEAD" | "GET" => {
                let Some(mut data) = objects.lock().unwrap().get(&path).cloned() else {
                    respond(&mut c, "404 Not Found", &[], b"");
                    return Ok(());
                };
                let huge = matches!(fault, Fault::Huge) && path.ends_with("/meta.zr");
                let mut total = data.len() as u64;
                if huge {
                    total = 1 << 62;
                    let records = (total - 4096) / 16;
                    data[..8].copy_from_slice(&records.to_le_bytes());
                }
                let e_tag = match fault {
                    Fault::ETags { weak } => {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::collections::hash_map::DefaultHasher::new();
                        data.hash(&mut h);
                        let w = if weak { "W/" } else { "" };
                        Some(format!("ETag: {w}\"{:016x}\"", h.finish()))
                    }
                    _ => None,
                };
                if method == "HEAD" {
                    if let Fault::HeadLies(d) = fault
                        && path.contains("/data_")
                    {
                        total = total.saturating_add_signed(d);
                    }
                    let mut h = vec![format!("Content-Length: {total}")];
                    h.extend(e_tag);
                    respond(&mut c, "200 OK", &h, b"");
                    return Ok(());
                }
                let range = headers
                    .get("range")
                    .and_then(|r| r.strip_prefix("bytes="))
                    .and_then(|r| r.split_once('-'))
                    .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok())));
                let (status, lo, hi) = match range {
                    None => ("200 OK", 0, data.len() as u64),
                    Some((a, b)) => {
                        let hi = b.map_or(total, |b| b + 1).min(data.len() as u64);
                        if a >= hi {
                            respond(&mut c, "416 Range Not Satisfiable", &[], b"");
                            return Ok(());
                        }
                        ("206 Partial Content", a, hi)
                    }
                };
                let part = &data[lo as usize..hi as usize];
                let mut h: Vec<String> = e_tag.into_iter().collect();
                if range.is_some() {
                    h.push(format!("Content-Range: bytes {lo}-{}/{total}", hi - 1));
                }
                let nth = |n: u32| n > 0 && count % n == 0;
                match fault {
                    Fault::Truncate(n) if nth(n) => {
                        h.push(format!("Content-Length: {}", part.len()));
                        respond(&mut c, status, &h, &part[..part.len() / 2]);
                    }
                    Fault::ShortLength(n) if nth(n) => {
                        h.push(format!("Content-Length: {}", part.len().saturating_sub(1)));
                        respond(&mut c, status, &h, part);
                    }
                    Fault::Reset(n) if nth(n) => {
                        h.push(format!("Content-Length: {}", part.len()));
                        respond(&mut c, status, &h, &part[..part.len() / 2]);
                        let _ = c.flush();
                        reset(c);
                    }
                    _ => respond(&mut c, status, &h, part),
                }
            }
            _ => respond(&mut c, "405 Method Not Allowed", &[], b""),
        }
        Ok(())
    }
}

/// Options for the fault server: small retries and timeouts.
fn quick(o: RemoteOptions) -> RemoteOptions {
    o.retries(2)
        .backoff(Duration::from_millis(1))
        .retry_timeout(Duration::from_secs(2))
        .timeouts(Duration::from_secs(3), Duration::from_secs(1))
}

/// Runs `f` on a thread of its own and panics when it takes longer than
/// a generous bound (a hang) or panics.
fn within_30_s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("finished within 30 s without panicking")
}

/// A raw Dense store of `n` records of 512 bytes, from `seed`, in 3 shards.
fn raw_store(path: &Path, n: usize, seed: u64) {
    use crate::{CreateOptions, DType, DynDenseWriter};
    let opts = CreateOptions::new(Codec::Raw).data_shards(3);
    let mut w = DynDenseWriter::create(path, DType::U8, &[512], &opts).unwrap();
    w.append_bytes(&bytes(seed, n * 512), n).unwrap();
    w.close().unwrap();
}

#[test]
fn every_gather_from_a_faulty_server_is_right_or_a_typed_error_in_bounded_time() {
    use crate::DynDense;
    use faulty::{Fault, Server};
    let server = Arc::new(Server::start());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    raw_store(&path, 600, 1);
    push(&path, &server.url("s"), &quick(RemoteOptions::default())).unwrap();
    let want = DynDense::open(&path)
        .unwrap()
        .gather_bytes(&(0..600).collect::<Vec<_>>())
        .unwrap();
    let mut right = 0;
    for fault in [
        Fault::None,
        Fault::Truncate(2),
        Fault::Truncate(1),
        Fault::ShortLength(2),
        Fault::ShortLength(1),
        Fault::Reset(2),
        Fault::Reset(1),
        Fault::Unavailable(2),
        Fault::Unavailable(1000),
        Fault::HeadLies(100),
        Fault::HeadLies(-100),
    ] {
        for cached in [false, true] {
            server.set(fault.clone());
            let (server, want) = (Arc::clone(&server), want.clone());
            let cache = dir.path().join(format!("cache-{fault:?}-{cached}"));
            let what = format!("{fault:?}, cached {cached}");
            let got = within_30_s(move || {
                let mut o = quick(RemoteOptions::default()).max_request_bytes(64 << 10);
                o = if cached {
                    o.block_bytes(16 << 10).cache_dir(Some(cache))
                } else {
                    o.no_cache()
                };
                let s = DynDense::from_engine(crate::remote::open(&server.url("s"), &o)?)?;
                // Three gathers: scattered, reversed, then all again.
                for idx in [
                    scattered(600, 200, 3),
                    (0..600).rev().collect(),
                    (0..600).collect(),
                ] {
                    let got = s.gather_bytes(&idx)?;
                    let rows: Vec<&[u8]> = idx
                        .iter()
                        .map(|&i| &want[i as usize * 512..(i as usize + 1) * 512])
                        .collect();
                    assert_eq!(got, rows.concat(), "wrong bytes");
                }
                Ok::<_, Error>(())
            });
            match got {
                Ok(()) => right += 1,
                Err(e) => assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::Remote { .. } | ErrorKind::Corrupt { .. }
                    ),
                    "{what}: {e}"
                ),
            }
        }
    }
    // No fault, a lying HEAD that claims more, and a short burst of 503s
    // are served right.
    assert!(right >= 6, "{right}");
}

#[test]
fn a_server_claiming_an_enormous_meta_zr_is_refused_before_any_allocation() {
    use faulty::{Fault, Server};
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    raw_store(&path, 10, 1);
    let o = quick(RemoteOptions::default());
    push(&path, &server.url("s"), &o).unwrap();
    server.set(Fault::Huge);
    let url = server.url("s");
    let e = within_30_s(move || crate::remote::open(&url, &o).map(|_| ()).unwrap_err());
    assert!(matches!(e.kind(), ErrorKind::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("max_table_bytes"), "{e}");
    // The bound is an option: a real table over it is refused too.
    server.set(Fault::None);
    let o = quick(RemoteOptions::default()).max_table_bytes(100);
    let e = crate::remote::open(&server.url("s"), &o)
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("160 bytes (10 records)"), "{e}");
    assert!(crate::remote::open(&server.url("s"), &o.max_table_bytes(160)).is_ok());
}

#[test]
fn a_store_republished_with_the_same_shape_is_never_served_from_old_blocks() {
    use crate::DynDense;
    use faulty::Server;
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let o = quick(RemoteOptions::default())
        .memory_cache_bytes(0)
        .block_bytes(4096)
        .cache_dir(Some(cache.clone()));
    let all: Vec<u64> = (0..50).collect();
    for seed in [1, 2] {
        let path = dir.path().join(format!("s{seed}"));
        raw_store(&path, 50, seed);
        server.delete_store("s");
        push(&path, &server.url("s"), &o).unwrap();
        let local = DynDense::open(&path).unwrap().gather_bytes(&all).unwrap();
        for pass in 0..2 {
            let remote = DynDense::open_url(&server.url("s"), &o).unwrap();
            assert_eq!(
                remote.gather_bytes(&all).unwrap(),
                local,
                "store {seed}, pass {pass}"
            );
            if pass == 1 {
                let st = remote.remote_stats().unwrap();
                assert!(st.disk_hits > 0 && st.misses == 0, "{st:?}");
            }
        }
    }
    // A damaged block in the directory is a miss, not data.
    let mut files = Vec::new();
    for d in std::fs::read_dir(cache.join(CACHE_SUBDIR))
        .unwrap()
        .flatten()
    {
        if d.file_type().unwrap().is_dir() {
            files.extend(
                std::fs::read_dir(d.path())
                    .unwrap()
                    .flatten()
                    .map(|f| f.path()),
            );
        }
    }
    assert!(!files.is_empty());
    for f in &files {
        let mut raw = std::fs::read(f).unwrap();
        raw[0] ^= 0xff;
        std::fs::write(f, raw).unwrap();
    }
    let path = dir.path().join("s2");
    let local = DynDense::open(&path).unwrap().gather_bytes(&all).unwrap();
    let remote = DynDense::open_url(&server.url("s"), &o).unwrap();
    assert_eq!(remote.gather_bytes(&all).unwrap(), local);
    assert_eq!(remote.remote_stats().unwrap().disk_hits, 0);
}

/// Stores copied onto a web server (no store id), deleted and re-written at
/// the same URL with the same shape: `meta.zr` is byte-identical, so without
/// a validator nothing tells them apart, and the directory's blocks must not
/// outlive the open; a weak ETag proves nothing either. With strong ETags
/// the blocks are served across opens, and a shard re-written under an open
/// store is refused, never read as the old store's.
#[test]
fn a_store_rewritten_without_validators_is_never_served_from_old_blocks() {
    use crate::DynDense;
    use faulty::{Fault, Server};
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<u64> = (0..50).collect();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    raw_store(&a, 50, 1);
    raw_store(&b, 50, 2);
    assert_eq!(
        std::fs::read(a.join(META_FILE)).unwrap(),
        std::fs::read(b.join(META_FILE)).unwrap(),
        "the two stores differ only in their payload"
    );
    let local = |p: &Path| DynDense::open(p).unwrap().gather_bytes(&all).unwrap();
    let (want_a, want_b) = (local(&a), local(&b));
    assert_ne!(want_a, want_b);
    for (case, fault, cached_across_opens) in [
        ("no validator", Fault::None, false),
        ("weak ETags", Fault::ETags { weak: true }, false),
        ("strong ETags", Fault::ETags { weak: false }, true),
    ] {
        server.set(fault);
        let cache = dir
            .path()
            .join(format!("cache-{cached_across_opens}-{case}"));
        let o = quick(RemoteOptions::default())
            .memory_cache_bytes(0)
            .block_bytes(4096)
            .cache_dir(Some(cache));
        let mut stats = Vec::new();
        for (store, want) in [(&a, &want_a), (&b, &want_b), (&a, &want_a)] {
            server.serve_files("s", store);
            for pass in 0..2 {
                let remote = DynDense::open_url(&server.url("s"), &o).unwrap();
                let got = remote.gather_bytes(&all).unwrap();
                assert!(
                    got == *want,
                    "{case}: {} served wrong bytes",
                    store.display()
                );
                stats.push((pass, remote.remote_stats().unwrap()));
            }
        }
        for (pass, st) in stats {
            if !cached_across_opens {
                assert_eq!(st.disk_hits, 0, "{case}: {st:?}");
            } else if pass == 1 {
                assert!(st.disk_hits > 0 && st.misses == 0, "{case}: {st:?}");
            }
        }
    }
    // Strong ETags: a store opened, then its shards re-written under it,
    // is refused on the next read that reaches the server.
    let o = quick(RemoteOptions::default()).no_cache();
    server.serve_files("s", &a);
    let remote = DynDense::open_url(&server.url("s"), &o).unwrap();
    assert_eq!(remote.gather_bytes(&[0]).unwrap(), want_a[..512]);
    server.serve_files("s", &b);
    let e = remote.gather_bytes(&all).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Remote { .. }), "{e}");
    assert!(e.to_string().contains("re-written since"), "{e}");
}

#[test]
fn a_set_push_that_fails_part_way_publishes_nothing_and_says_what_remains() {
    use faulty::{Fault, Server};
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    raw_store(&a, 20, 1);
    raw_store(&b, 20, 2);
    let o = quick(RemoteOptions::default());
    // The second store's meta.zr is refused: the first one's, written
    // before it, is deleted again.
    server.set(Fault::RefusePut("b/meta.zr".into()));
    let set = [(&a, server.url("set/a")), (&b, server.url("set/b"))];
    let e = push_stores(&set, &o).unwrap_err();
    let ErrorKind::PushFailed { path, remains, .. } = e.kind() else {
        panic!("{e}");
    };
    assert!(path.ends_with("set/b"), "{}", path.display());
    assert!(
        remains.contains("meta.zr written and deleted again"),
        "{remains}"
    );
    assert!(
        remains.contains("no meta.zr of this push is left"),
        "{remains}"
    );
    assert!(remains.contains("data_2.zr"), "{remains}");
    let objects: Vec<String> = server.objects.lock().unwrap().keys().cloned().collect();
    assert!(
        !objects.iter().any(|k| k.ends_with("meta.zr")),
        "{objects:?}"
    );
    assert!(crate::remote::open(&server.url("set/a"), &o).is_err());
    // A shard refused: nothing of a later store is uploaded, no meta.zr.
    server.set(Fault::RefusePut("a/data_1.zr".into()));
    let e = push_stores(&set, &o).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::PushFailed { .. }), "{e}");
    assert!(
        e.to_string().contains("no meta.zr of this push is left"),
        "{e}"
    );
    // Then the set goes up whole.
    server.set(Fault::None);
    let r = push_stores(&set, &o).unwrap();
    assert_eq!(r.objects, 2 * 5);
    for u in [server.url("set/a"), server.url("set/b")] {
        assert!(crate::remote::open(&u, &o).is_ok(), "{u}");
    }
}

#[test]
fn credentials_and_queries_in_a_url_never_reach_a_message() {
    use faulty::{Fault, Server};
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    raw_store(&path, 10, 1);
    let o = quick(RemoteOptions::default());
    push(&path, &server.url("s"), &o).unwrap();
    let secret = |u: String| u.replace("http://", "http://user:SECRET1@") + "?sig=SECRET2";
    let e = crate::remote::open(&secret(server.url("none")), &o)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::NotAStore { .. }), "{e}");
    let r = crate::remote::open(&secret(server.url("s")), &o).unwrap();
    server.set(Fault::Unavailable(1000));
    let e2 = crate::remote::open(&secret(server.url("s")), &o)
        .map(|_| ())
        .unwrap_err();
    let e3 = target("ftp://u:SECRET3@h/x?k=SECRET4", &o)
        .map(|_| ())
        .unwrap_err();
    // A URL as push's local source: refused by name, never opened as a path.
    let e4 = push(secret(server.url("s")), &server.url("t"), &o).unwrap_err();
    assert!(
        matches!(e4.kind(), ErrorKind::InvalidArgument { .. }),
        "{e4}"
    );
    for m in [
        e.to_string(),
        e2.to_string(),
        e3.to_string(),
        e4.to_string(),
        format!("{:?}", r.path()),
    ] {
        assert!(!m.contains("SECRET") && !m.contains("user"), "{m}");
    }
}

/// An object store whose multipart uploads fail at part `fail_at` (0
/// based) and remember whether they were aborted; everything else is
/// the in-memory store's.
#[derive(Debug)]
struct FailingParts {
    inner: object_store::memory::InMemory,
    fail_at: usize,
    aborted: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Display for FailingParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FailingParts({})", self.inner)
    }
}

#[derive(Debug)]
struct FailingUpload {
    inner: Box<dyn object_store::MultipartUpload>,
    parts: usize,
    fail_at: usize,
    aborted: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait::async_trait]
impl object_store::MultipartUpload for FailingUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        let k = self.parts;
        self.parts += 1;
        if k == self.fail_at {
            return Box::pin(async move {
                Err(object_store::Error::Generic {
                    store: "FailingParts",
                    source: format!("part {k} refused").into(),
                })
            });
        }
        self.inner.put_part(data)
    }
    async fn complete(&mut self) -> object_store::Result<object_store::PutResult> {
        self.inner.complete().await
    }
    async fn abort(&mut self) -> object_store::Result<()> {
        self.aborted.store(true, Ordering::SeqCst);
        self.inner.abort().await
    }
}

#[async_trait::async_trait]
impl ObjectStore for FailingParts {
    async fn put_opts(
        &self,
        location: &ObjPath,
        payload: PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &ObjPath,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        Ok(Box::new(FailingUpload {
            inner: self.inner.put_multipart_opts(location, opts).await?,
            parts: 0,
            fail_at: self.fail_at,
            aborted: Arc::clone(&self.aborted),
        }))
    }
    async fn get_opts(
        &self,
        location: &ObjPath,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<ObjPath>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<ObjPath>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&ObjPath>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjPath>,
    ) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &ObjPath,
        to: &ObjPath,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[test]
fn a_failed_multipart_upload_is_aborted_and_leaves_no_object() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard");
    std::fs::write(&path, bytes(5, 10_000)).unwrap();
    let o = RemoteOptions {
        part_bytes: 1000,
        ..RemoteOptions::default()
    };
    for fail_at in [0, 3, 9] {
        let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mem: Arc<dyn ObjectStore> = Arc::new(FailingParts {
            inner: object_store::memory::InMemory::new(),
            fail_at,
            aborted: Arc::clone(&aborted),
        });
        let t = in_memory(&mem, "s");
        let e = upload(&t, &o, &path, "data_0.zr", 10_000).unwrap_err();
        assert!(e.to_string().contains("data_0.zr"), "{e}");
        assert!(
            aborted.load(Ordering::SeqCst),
            "part {fail_at} failed and the upload was not aborted"
        );
        assert!(
            block_on(mem.head(&t.object("data_0.zr"))).unwrap().is_err(),
            "a failed upload left the object"
        );
    }
    // With no part failing, the same upload completes and is not aborted.
    let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mem: Arc<dyn ObjectStore> = Arc::new(FailingParts {
        inner: object_store::memory::InMemory::new(),
        fail_at: usize::MAX,
        aborted: Arc::clone(&aborted),
    });
    let t = in_memory(&mem, "s");
    upload(&t, &o, &path, "data_0.zr", 10_000).unwrap();
    assert!(!aborted.load(Ordering::SeqCst));
    let got = block_on(async { mem.get(&t.object("data_0.zr")).await?.bytes().await })
        .unwrap()
        .unwrap();
    assert_eq!(&got[..], &bytes(5, 10_000)[..]);
}

/// A dataset of `parts` parts (streams `x`, Dense u32, and `t`, Ragged
/// u16) written locally under `dir` and pushed into `mem` as `ds`.
fn dataset_in_memory(mem: &Arc<dyn ObjectStore>, dir: &Path, parts: u64) {
    use crate::{CreateOptions, Dataset, DenseWriter, RaggedWriter};
    for p in 0..parts {
        let part = dir.join(Dataset::part_name(p));
        let o = CreateOptions::new(Codec::Zstd);
        let mut w = DenseWriter::<u32>::create_with(part.join("x"), &[], &o).unwrap();
        let rows: Vec<u32> = (0..10).map(|i| p as u32 * 100 + i).collect();
        w.append_slice(&rows, 10).unwrap();
        w.close().unwrap();
        let mut w = RaggedWriter::<u16>::create_with(part.join("t"), 1, &o).unwrap();
        w.append((0..10u16).map(|i| vec![i; 1 + usize::from(i % 3)]))
            .unwrap();
        w.close().unwrap();
        for s in ["x", "t"] {
            let name = format!("ds/{}/{s}", Dataset::part_name(p));
            push_in_memory(mem, &part.join(s), &name);
        }
    }
}

#[test]
fn a_remote_merge_agrees_with_the_local_one_on_every_directory_of_a_part() {
    use crate::Dataset;
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    dataset_in_memory(&mem, dir.path(), 3);
    let o = RemoteOptions::default();
    let remote = RemoteDir::of_target(in_memory(&mem, "ds"));
    // A crashed writer's hidden staging prefix: ignored, as locally.
    let put = |key: &str| {
        block_on(mem.put(
            &ObjPath::from(format!("stores/ds/{key}")),
            PutPayload::from_static(b"junk"),
        ))
        .unwrap()
        .unwrap();
    };
    put("part-00001/.x.creating-1-0/data_0.zr");
    std::fs::create_dir_all(dir.path().join("part-00001/.x.creating-1-0")).unwrap();
    let merged = Dataset::merge_remote(&remote, Some(3), &o).unwrap();
    assert_eq!(merged.len(), 30);
    // The same manifest as a local merge of the same parts, byte for byte
    // (the parts' table digests included).
    let local = Dataset::merge(dir.path(), Some(3)).unwrap();
    assert_eq!(local.len(), 30);
    let (bytes, _) = remote
        .read_small(crate::MANIFEST_FILE, 1 << 20)
        .unwrap()
        .unwrap();
    assert_eq!(
        bytes,
        std::fs::read(dir.path().join(crate::MANIFEST_FILE)).unwrap()
    );
    // A directory that is no store: refused, by both, as not published.
    put("part-00002/notes/readme");
    std::fs::create_dir_all(dir.path().join("part-00002/notes")).unwrap();
    let e = Dataset::merge_remote(&remote, Some(3), &o).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::NotPublished { path } if path.ends_with("part-00002/notes")),
        "{e}"
    );
    let e = Dataset::merge(dir.path(), Some(3)).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::NotPublished { path } if path.ends_with("part-00002/notes")),
        "{e}"
    );
    // A stream name the manifest cannot hold: refused by both, before
    // anything is written.
    block_on(mem.delete(&ObjPath::from("stores/ds/part-00002/notes/readme")))
        .unwrap()
        .unwrap();
    block_on(mem.delete(&ObjPath::from("stores/ds/dataset.json")))
        .unwrap()
        .unwrap();
    push_in_memory(
        &mem,
        &dir.path().join("part-00000/x"),
        "ds/part-00000/my col",
    );
    let e = Dataset::merge_remote(&remote, Some(3), &o).unwrap_err();
    assert!(e.to_string().contains("ASCII letters"), "{e}");
    assert!(
        remote
            .read_small(crate::MANIFEST_FILE, 1 << 20)
            .unwrap()
            .is_none()
    );
}

#[test]
fn prefetched_blocks_are_fetched_before_their_gather_and_never_twice() {
    use crate::{CreateOptions, DType, DataLoader, DynDense, DynDenseWriter, SamplerMode};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let (width, n) = (784, 2000);
    let path = dir.path().join("s");
    let opts = CreateOptions::new(Codec::Raw).data_shards(4);
    let mut w = DynDenseWriter::create(&path, DType::U8, &[width], &opts).unwrap();
    w.append_bytes(&bytes(3, n * width), n).unwrap();
    w.close().unwrap();
    push_in_memory(&mem, &path, "s");
    let local = DynDense::open(&path).unwrap();
    let o = RemoteOptions::default()
        .memory_cache_bytes(64 << 20)
        .block_bytes(4096);
    let open = || DynDense::from_engine(open_target(in_memory(&mem, "s"), &o).unwrap()).unwrap();

    // The next step's blocks, asked for ahead: fetched then, not by the gather.
    let remote = open();
    let next = scattered(n as u64, 64, 9);
    let asked = remote.engine().prefetch(&next);
    let after = remote.remote_stats().unwrap();
    assert!(
        asked > 0 && after.requests > 0 && after.misses > 0,
        "{after:?}"
    );
    assert_eq!(
        remote.gather_bytes(&next).unwrap(),
        local.gather_bytes(&next).unwrap()
    );
    let gathered = remote.remote_stats().unwrap();
    assert_eq!(gathered.requests, after.requests, "nothing fetched again");
    assert_eq!(gathered.misses, after.misses);
    assert_eq!(remote.engine().prefetch(&next), 0, "cached: nothing asked");

    // A loader's epoch: its look-ahead and its workers fetch every block of
    // the store exactly once between them.
    let remote = crate::Stream::from(open());
    let tails = remote.as_dense().unwrap().engine().stores()[0].tails();
    let blocks: u64 = tails.iter().map(|t| t.div_ceil(4096)).sum();
    let loader = DataLoader::builder()
        .stream("x", remote.clone())
        .batch_size(50)
        .mode(SamplerMode::Cyclic)
        .epochs(1)
        .workers(3)
        .prefetch_bytes(256 << 10)
        .build()
        .unwrap();
    let mut seen = 0;
    for batch in loader {
        let batch = batch.unwrap();
        let want = local.gather_bytes(batch.indices()).unwrap();
        assert_eq!(batch.column("x").unwrap().bytes(), &want[..]);
        seen += batch.indices().len();
    }
    assert_eq!(seen, n);
    let stats = remote.remote_stats().unwrap();
    assert_eq!(stats.misses, blocks, "{stats:?}");
    assert_eq!(stats.bytes_fetched, tails.iter().sum::<u64>(), "{stats:?}");
}

/// What [`Swapping`] replaces before a request: called with the object's
/// path, whether the request is a HEAD, and how many requests of that kind
/// for that object came before; returns the objects to write first.
type SwapHook = dyn Fn(&str, bool, usize) -> Vec<(String, Bytes)> + Send + Sync;

/// An in-memory object store whose objects are replaced between the
/// requests of one open, as a re-publication racing it would.
struct Swapping {
    inner: object_store::memory::InMemory,
    seen: Mutex<HashMap<(String, bool), usize>>,
    hook: Box<SwapHook>,
}

impl std::fmt::Debug for Swapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Swapping({:?})", self.inner)
    }
}

impl std::fmt::Display for Swapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Swapping({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Swapping {
    async fn put_opts(
        &self,
        location: &ObjPath,
        payload: PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &ObjPath,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &ObjPath,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        let key = (location.to_string(), options.head);
        let n = {
            let mut seen = self.seen.lock().unwrap();
            let n = seen.entry(key).or_default();
            *n += 1;
            *n - 1
        };
        for (path, bytes) in (self.hook)(location.as_ref(), options.head, n) {
            self.inner
                .put(&ObjPath::from(path), PutPayload::from(bytes))
                .await?;
        }
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<ObjPath>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<ObjPath>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&ObjPath>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjPath>,
    ) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &ObjPath,
        to: &ObjPath,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// The files of the local store at `path`, as objects under `prefix`.
fn store_objects(path: &Path, prefix: &str) -> Vec<(String, Bytes)> {
    let mut out: Vec<(String, Bytes)> = std::fs::read_dir(path)
        .unwrap()
        .flatten()
        .map(|f| f.file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".zr"))
        .map(|name| {
            let bytes = Bytes::from(std::fs::read(path.join(&name)).unwrap());
            (format!("{prefix}/{name}"), bytes)
        })
        .collect();
    out.sort();
    out
}

/// A `zstd_dict` Dense store of 300 records of 64 bytes from `seed`, in 2
/// shards: two seeds give two stores of one shape and other bytes.
fn dict_store(path: &Path, seed: u64) {
    use crate::{CreateOptions, DType, DynDenseWriter};
    let data = bytes(seed, 300 * 64);
    let records: Vec<Vec<u8>> = data.chunks(64).map(<[u8]>::to_vec).collect();
    let opts = CreateOptions::new(Codec::ZstdDict)
        .data_shards(2)
        .dict_bytes(crate::train_dict(&records).unwrap());
    let mut w = DynDenseWriter::create(path, DType::U8, &[64], &opts).unwrap();
    w.append_bytes(&data, 300).unwrap();
    w.close().unwrap();
}

/// Every object one open reads is read at the version it first saw: a
/// store replaced between the open's requests (its `meta.zr` between the
/// HEAD and the static page, or between the page and the location table;
/// its `dict.zr` between its HEAD and its read; the whole store once
/// `meta.zr` was read) is a typed error naming the object, never a store
/// of one version's metadata and another's dictionary or shards.
#[test]
fn a_store_replaced_while_it_is_being_opened_is_refused_naming_the_object() {
    use crate::DynDense;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    dict_store(&a, 1);
    dict_store(&b, 2);
    assert!(a.join(DICT_FILE).exists());
    let all: Vec<u64> = (0..300).collect();
    let want = DynDense::open(&a).unwrap().gather_bytes(&all).unwrap();
    let prefix = "stores/s";
    let b_objects = store_objects(&b, prefix);
    let b_object = |name: &str| -> Vec<(String, Bytes)> {
        b_objects
            .iter()
            .filter(|(p, _)| p.ends_with(&format!("/{name}")))
            .cloned()
            .collect()
    };
    // A hook that puts `objects` in place at the `n`-th request (a HEAD
    // when `head`) for `file`.
    let swap_at = |file: &'static str, head: bool, n: usize, objects: Vec<(String, Bytes)>| {
        Box::new(move |p: &str, h: bool, k: usize| {
            if p.ends_with(file) && h == head && k == n {
                objects.clone()
            } else {
                Vec::new()
            }
        }) as Box<SwapHook>
    };
    type Case = (&'static str, &'static str, Box<SwapHook>);
    let cases: Vec<Case> = vec![
        ("unchanged", "", Box::new(|_: &str, _, _| Vec::new())),
        (
            "meta.zr between its HEAD and its static page",
            META_FILE,
            swap_at(META_FILE, false, 0, b_object(META_FILE)),
        ),
        (
            "meta.zr between its static page and its location table",
            META_FILE,
            swap_at(META_FILE, false, 1, b_object(META_FILE)),
        ),
        (
            "dict.zr between its HEAD and its read",
            DICT_FILE,
            swap_at(DICT_FILE, false, 0, b_object(DICT_FILE)),
        ),
        (
            "the whole store once meta.zr was read",
            META_FILE,
            swap_at(DICT_FILE, true, 0, b_objects.clone()),
        ),
    ];
    for (case, object, hook) in cases {
        let inner = object_store::memory::InMemory::new();
        for (p, bytes) in store_objects(&a, prefix) {
            block_on(inner.put(&ObjPath::from(p), PutPayload::from(bytes)))
                .unwrap()
                .unwrap();
        }
        let mem: Arc<dyn ObjectStore> = Arc::new(Swapping {
            inner,
            seen: Mutex::new(HashMap::new()),
            hook,
        });
        let o = RemoteOptions::default().no_cache();
        let opened = open_target(in_memory(&mem, "s"), &o);
        if object.is_empty() {
            let remote = DynDense::from_engine(opened.unwrap()).unwrap();
            assert_eq!(remote.gather_bytes(&all).unwrap(), want, "{case}");
            continue;
        }
        let e = match opened {
            Ok(r) => {
                let got = DynDense::from_engine(r).unwrap().gather_bytes(&all);
                panic!("{case}: opened (gather: {:?})", got.map(|g| g == want));
            }
            Err(e) => e,
        };
        assert!(matches!(e.kind(), ErrorKind::Remote { .. }), "{case}: {e}");
        assert_eq!(
            e.path().unwrap(),
            Path::new(&format!("memory://bkt/stores/s/{object}")),
            "{case}: {e}"
        );
        assert!(
            e.to_string().contains("changed while it was being read"),
            "{case}: {e}"
        );
    }
}

/// A zero-length `dict.zr` is the local open's typed error ("dict.zr is
/// empty"), not a failed request for its zero bytes.
#[test]
fn an_empty_dictionary_is_the_local_corrupt_error_remotely_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    dict_store(&path, 1);
    std::fs::write(path.join(DICT_FILE), b"").unwrap();
    let local = StoreReader::open(&path).map(|_| ()).unwrap_err();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    for (p, bytes) in store_objects(&path, "stores/s") {
        block_on(mem.put(&ObjPath::from(p), PutPayload::from(bytes)))
            .unwrap()
            .unwrap();
    }
    let o = RemoteOptions::default().no_cache();
    let e = open_target(in_memory(&mem, "s"), &o)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Corrupt { .. }), "{e}");
    assert_eq!(
        e.to_string().replace("memory://bkt/stores/s", "S"),
        local.to_string().replace(path.to_str().unwrap(), "S")
    );
}

#[test]
fn a_loaders_stats_count_its_remote_streams_fetches_and_cache_hits() {
    use crate::{CreateOptions, DType, DataLoader, DynDense, DynDenseWriter};
    let dir = tempfile::tempdir().unwrap();
    let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let path = dir.path().join("x");
    let mut w =
        DynDenseWriter::create(&path, DType::U8, &[64], &CreateOptions::new(Codec::Raw)).unwrap();
    w.append_bytes(&bytes(7, 64 * 2000), 2000).unwrap();
    w.close().unwrap();
    push_in_memory(&mem, &path, "x");
    let o = RemoteOptions::default()
        .memory_cache_bytes(64 << 20)
        .block_bytes(4096);
    let remote = DynDense::from_engine(open_target(in_memory(&mem, "x"), &o).unwrap()).unwrap();
    let local = DynDense::open(&path).unwrap();
    // Two epochs: the first fetches every block, the second hits memory.
    let stats = |store: DynDense| {
        let mut loader = DataLoader::builder()
            .stream("x", store)
            .batch_size(100)
            .workers(2)
            .build()
            .unwrap();
        for b in loader.by_ref().take(40) {
            b.unwrap();
        }
        loader.stats()
    };
    let s = stats(remote);
    let r = s.remote.expect("a remote stream");
    assert!(r.requests > 0 && r.misses > 0, "{r:?}");
    assert!(r.memory_hits > 0, "the second epoch hits memory: {r:?}");
    assert!(s.to_string().contains("block cache:"), "{s}");
    assert_eq!(stats(local).remote, None);
}
