//! Stores on object storage, against a real S3-compatible server (moto,
//! from the test venv) that each test starts on 127.0.0.1 and stops.
//!
//! Every client is pointed at that server by explicit options (endpoint,
//! dummy credentials, region): no test reaches any other address.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::{
    Codec, CreateOptions, DType, DataLoader, DynDense, DynDenseWriter, DynRagged, DynRaggedWriter,
    ErrorKind, RemoteOptions, SamplerMode, Store, digest, push,
};
use loaderx_tests::{S3Server, ThrottledLink, run_interop};
use serde::Deserialize;

/// Deterministic bytes (splitmix64).
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u8
        })
        .collect()
}

/// Compressible bytes: words of a small vocabulary, as text is.
fn compressible(seed: u64, n: usize) -> Vec<u8> {
    const WORDS: [&[u8]; 8] = [
        b"loaderx ",
        b"record ",
        b"shard ",
        b"object ",
        b"bucket ",
        b"tensor ",
        b"batch ",
        b"epoch ",
    ];
    let mut out = Vec::with_capacity(n + 8);
    for b in bytes(seed, n) {
        if out.len() >= n {
            break;
        }
        out.extend_from_slice(WORDS[usize::from(b % 8)]);
    }
    out.truncate(n);
    out
}

fn dense_store(path: &Path, codec: Codec, n: usize, width: usize, shards: usize) {
    let data = compressible(n as u64, n * width);
    let mut opts = CreateOptions::new(codec).data_shards(shards);
    if codec == Codec::ZstdDict {
        opts = opts.dict_bytes(train(&data, width));
    }
    let mut w = DynDenseWriter::create(path, DType::U8, &[width], &opts).unwrap();
    w.append_bytes(&data, n).unwrap();
    w.close().unwrap();
}

fn train(data: &[u8], width: usize) -> Vec<u8> {
    let records: Vec<Vec<u8>> = data.chunks(width).map(<[u8]>::to_vec).collect();
    loaderx_core::train_dict(&records).unwrap()
}

/// Ragged `i32` tokens, lengths 1..=max_len.
fn ragged_store(path: &Path, codec: Codec, n: usize, max_len: usize, shards: usize) {
    let recs: Vec<(Vec<usize>, Vec<u8>)> = (0..n)
        .map(|i| {
            let len = 1 + (i * 7919) % max_len;
            (vec![len], compressible(i as u64, 4 * len))
        })
        .collect();
    let mut opts = CreateOptions::new(codec).data_shards(shards);
    if codec == Codec::ZstdDict {
        let bodies: Vec<&Vec<u8>> = recs.iter().map(|r| &r.1).collect();
        opts = opts.dict_bytes(loaderx_core::train_dict(bodies).unwrap());
    }
    let mut w = DynRaggedWriter::create(path, DType::I32, 1, &opts).unwrap();
    w.append_bytes(recs.iter().map(|(s, b)| (&s[..], &b[..])))
        .unwrap();
    w.close().unwrap();
}

fn url(bucket: &str, name: &str) -> String {
    format!("s3://{bucket}/stores/{name}")
}

#[derive(Debug, Deserialize)]
struct Entry {
    name: String,
    digest: String,
    length: u64,
}

#[test]
fn stores_of_every_class_and_codec_read_back_with_identical_digests() {
    let Some(py) = loaderx_tests::python() else {
        return;
    };
    let server = S3Server::start().unwrap();
    server.create_bucket("bkt");
    let o = server.options();
    let dir = tempfile::tempdir().unwrap();
    // Written by Python loaderx 2.4.6: every kind, dtype, codec, shard count.
    let py_dir = dir.path().join("py");
    run_interop(
        &py,
        &[
            OsStr::new("write"),
            py_dir.as_os_str(),
            OsStr::new("--quick"),
        ],
    );
    let manifest: Vec<Entry> =
        serde_json::from_slice(&std::fs::read(py_dir.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest.len() >= 40, "{} stores", manifest.len());
    for e in &manifest {
        let u = url("bkt", &format!("py/{}", e.name));
        push(py_dir.join(&e.name), &u, &o).unwrap();
        let remote = Store::open_url(&u, &o).unwrap_or_else(|err| panic!("{u}: {err}"));
        let local = Store::open(py_dir.join(&e.name)).unwrap();
        assert_eq!(remote.len(), e.length);
        assert_eq!(remote.kind(), local.kind());
        assert_eq!(remote.codec(), local.codec());
        assert_eq!(remote.stored_bytes(), local.stored_bytes());
        assert_eq!(digest(&remote).unwrap().sha256, e.digest, "{u}");
    }
    // Written here, large enough for multipart uploads (5 MiB parts).
    let o = o.part_bytes(5 << 20);
    for (name, codec) in [
        ("raw", Codec::Raw),
        ("zstd", Codec::Zstd),
        ("dict", Codec::ZstdDict),
    ] {
        let p = dir.path().join(name);
        let n = if codec == Codec::Raw { 12_000 } else { 3_000 };
        dense_store(&p, codec, n, 1024, 2);
        let rp = dir.path().join(format!("{name}-ragged"));
        ragged_store(&rp, codec, 2_000, 300, 3);
        for p in [p, rp] {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            let u = url("bkt", &format!("rs/{name}"));
            let report = push(&p, &u, &o).unwrap();
            let local = Store::open(&p).unwrap();
            assert_eq!(report.bytes, local.stored_bytes());
            let remote = Store::open_url(&u, &o).unwrap();
            assert_eq!(digest(&remote).unwrap(), digest(&local).unwrap(), "{u}");
            // A published store is immutable: a second push is refused.
            let again = push(&p, &u, &o).unwrap_err();
            assert!(
                matches!(again.kind(), ErrorKind::AlreadyExists { .. }),
                "{again}"
            );
        }
    }
}

/// Indices that hit every shard in no particular order, with repeats.
fn scattered(n: u64, count: usize, seed: u64) -> Vec<u64> {
    bytes(seed, 8 * count)
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()) % n)
        .collect()
}

/// Asserts that gathering `idx` from `a` and from `b` gives the same
/// records: count, and each record's shape and bytes.
fn assert_same_ragged_gathers(a: &DynRagged, b: &DynRagged, idx: &[u64]) {
    let (x, y) = (a.gather(idx).unwrap(), b.gather(idx).unwrap());
    assert_eq!(x.len(), y.len());
    for k in 0..x.len() {
        assert_eq!(x.shape(k), y.shape(k));
        assert_eq!(x.bytes(k), y.bytes(k));
    }
}

/// The first `steps` batches of a 3-worker cyclic loader over an `img`
/// and a `tok` stream: each batch's record indices and its bytes.
fn loader_batches(
    img: DynDense,
    tok: DynRagged,
    seed: u64,
    steps: usize,
) -> Vec<(Vec<u64>, Vec<u8>)> {
    DataLoader::builder()
        .stream("img", img)
        .stream("tok", tok)
        .batch_size(64)
        .mode(SamplerMode::Cyclic)
        .seed(seed)
        .workers(3)
        .build()
        .unwrap()
        .take(steps)
        .map(|b| {
            let b = b.unwrap();
            let mut bytes = b.column("img").unwrap().bytes().to_vec();
            bytes.extend_from_slice(b.column("tok").unwrap().bytes());
            (b.indices().to_vec(), bytes)
        })
        .collect()
}

#[test]
fn gathers_and_the_loader_over_a_url_match_the_local_store() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let raw = dir.path().join("raw");
    let tok = dir.path().join("tok");
    dense_store(&img, Codec::Zstd, 3_000, 784, 4);
    // Raw Dense records copy straight out of the cached blocks when warm.
    dense_store(&raw, Codec::Raw, 3_000, 784, 4);
    ragged_store(&tok, Codec::Raw, 3_000, 200, 4);
    let o = server.options();
    push(&img, &url("bkt", "img"), &o).unwrap();
    push(&raw, &url("bkt", "raw"), &o).unwrap();
    push(&tok, &url("bkt", "tok"), &o).unwrap();
    // 4096-byte blocks: about a fifth of the 784-byte records straddle two;
    // 5000 is not a power of two (blocks found by division).
    for o in [
        o.clone(),
        o.clone().no_cache(),
        o.clone().block_bytes(4096),
        o.clone().block_bytes(5000),
    ] {
        let ri = DynDense::open_url(&url("bkt", "img"), &o).unwrap();
        let rr = DynDense::open_url(&url("bkt", "raw"), &o).unwrap();
        let rt = DynRagged::open_url(&url("bkt", "tok"), &o).unwrap();
        let li = DynDense::open(&img).unwrap();
        let lr = DynDense::open(&raw).unwrap();
        let lt = DynRagged::open(&tok).unwrap();
        // Seeds 1.. are warm for the cached options; the last gathers 1024
        // records (over 256 KiB of destination).
        for seed in 0..5 {
            let count = if seed == 4 { 1024 } else { 300 };
            let idx = scattered(3_000, count, seed);
            assert_eq!(
                ri.gather_bytes(&idx).unwrap(),
                li.gather_bytes(&idx).unwrap()
            );
            assert_eq!(
                rr.gather_bytes(&idx).unwrap(),
                lr.gather_bytes(&idx).unwrap()
            );
            assert_same_ragged_gathers(&rt, &lt, &idx);
        }
        // An index out of range is the same error as locally.
        let e = ri.gather_bytes(&[3_000]).unwrap_err();
        assert!(matches!(
            e.kind(),
            ErrorKind::IndexOutOfRange { index: 3000, .. }
        ));
        let e = rr.gather_bytes(&[0, 3_000]).unwrap_err();
        assert!(matches!(
            e.kind(),
            ErrorKind::IndexOutOfRange { index: 3000, .. }
        ));
        let stats = ri.remote_stats().unwrap();
        assert!(stats.requests > 0 && stats.bytes_fetched > 0, "{stats:?}");
        assert!(li.remote_stats().is_none());
        // A warm pass over what was gathered: no request, memory hits.
        let before = rr.remote_stats().unwrap();
        let idx = scattered(3_000, 1024, 4);
        assert_eq!(
            rr.gather_bytes(&idx).unwrap(),
            lr.gather_bytes(&idx).unwrap()
        );
        let after = rr.remote_stats().unwrap();
        if before.misses > 0 {
            assert_eq!(after.requests, before.requests, "{after:?}");
            assert!(after.memory_hits > before.memory_hits, "{after:?}");
        }
    }
    // The loader, unchanged, over URLs and over the local stores.
    let remote = loader_batches(
        DynDense::open_url(&url("bkt", "img"), &o).unwrap(),
        DynRagged::open_url(&url("bkt", "tok"), &o).unwrap(),
        3,
        40,
    );
    let local = loader_batches(
        DynDense::open(&img).unwrap(),
        DynRagged::open(&tok).unwrap(),
        3,
        40,
    );
    assert_eq!(remote, local);
}

#[test]
fn the_cache_serves_a_second_pass_without_requests() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    ragged_store(&p, Codec::Zstd, 4_000, 300, 4);
    let u = url("bkt", "s");
    push(&p, &u, &server.options()).unwrap();
    let cache = dir.path().join("cache");
    let all: Vec<u64> = (0..4_000).collect();
    let pass = |s: &DynRagged| {
        for chunk in scattered(4_000, 4_000, 9).chunks(256) {
            s.gather(chunk).unwrap();
        }
        s.gather(&all).unwrap()
    };
    let local = pass(&DynRagged::open(&p).unwrap());
    // Directory cache only, so that the second handle must use the disk.
    let o = server
        .options()
        .memory_cache_bytes(0)
        .cache_dir(Some(cache.clone()))
        .block_bytes(64 << 10);
    let s = DynRagged::open_url(&u, &o).unwrap();
    let first = pass(&s);
    let cold = s.remote_stats().unwrap();
    assert!(cold.requests > 0 && cold.misses > 0, "{cold:?}");
    // Each stored byte was fetched about once over the pass.
    let stored = Store::open(&p).unwrap().stored_bytes();
    assert!(
        cold.bytes_fetched <= stored + stored / 5,
        "{cold:?}, {stored}"
    );
    let second = pass(&s);
    let warm = s.remote_stats().unwrap();
    assert_eq!(warm.requests, cold.requests, "second pass made requests");
    assert_eq!(warm.misses, cold.misses);
    assert!(warm.disk_hits > cold.disk_hits);
    // Another handle (another process would do the same) shares the directory.
    let again = DynRagged::open_url(&u, &o).unwrap();
    let third = pass(&again);
    assert_eq!(again.remote_stats().unwrap().requests, 0);
    for batch in [&first, &second, &third] {
        assert_eq!(batch.len(), local.len());
        for k in 0..local.len() {
            assert_eq!(batch.bytes(k), local.bytes(k));
        }
    }
    // Memory only: the same, within one handle.
    let m = DynRagged::open_url(&u, &server.options().memory_cache_bytes(64 << 20)).unwrap();
    pass(&m);
    let cold = m.remote_stats().unwrap();
    pass(&m);
    let warm = m.remote_stats().unwrap();
    assert_eq!(warm.requests, cold.requests);
    assert!(warm.memory_hits > cold.memory_hits);
    // A cache too small for the store still gives the right bytes.
    let tiny = DynRagged::open_url(&u, &server.options().memory_cache_bytes(100 << 10)).unwrap();
    let t = pass(&tiny);
    for k in 0..local.len() {
        assert_eq!(t.bytes(k), local.bytes(k));
    }
}

#[test]
fn coalescing_without_a_cache_fetches_at_most_twice_the_wanted_bytes() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    ragged_store(&p, Codec::Raw, 5_000, 400, 4);
    let u = url("bkt", "s");
    push(&p, &u, &server.options()).unwrap();
    let local = DynRagged::open(&p).unwrap();
    for (gap, max_request) in [(0, 1 << 20), (64 << 10, 1 << 20), (4 << 20, 8 << 10)] {
        let o = server
            .options()
            .no_cache()
            .gap_bytes(gap)
            .max_request_bytes(max_request);
        let s = DynRagged::open_url(&u, &o).unwrap();
        let mut wanted = 0u64;
        for seed in 0..10 {
            let idx = scattered(5_000, 256, seed);
            let mut unique = idx.clone();
            unique.sort_unstable();
            unique.dedup();
            let b = s.gather(&idx).unwrap();
            let l = local.gather(&idx).unwrap();
            for k in 0..b.len() {
                assert_eq!(b.bytes(k), l.bytes(k));
            }
            wanted += unique
                .iter()
                .map(|&i| {
                    let k = idx.iter().position(|&x| x == i).unwrap();
                    (b.bytes(k).len() + s.shape_header_len()) as u64
                })
                .sum::<u64>();
        }
        let st = s.remote_stats().unwrap();
        assert!(
            st.bytes_fetched <= 2 * wanted,
            "gap {gap}: fetched {} for {wanted} wanted",
            st.bytes_fetched
        );
        assert!(st.bytes_fetched >= wanted);
        if gap == 0 {
            assert!(st.requests >= 10, "{st:?}");
        }
        if gap == 4 << 20 {
            // Coalesced, but no request over 8 KiB unless one record is.
            assert!(st.requests as f64 >= st.bytes_fetched as f64 / (8 << 10) as f64);
        }
    }
}

/// The kind of an error and its message without the store's location, for
/// comparing a remote store's errors with a local copy's.
fn shape_of(e: &loaderx_core::Error, local: &Path, remote: &str) -> String {
    let kind = format!("{:?}", std::mem::discriminant(e.kind()));
    let msg = e.to_string().replace(&*local.to_string_lossy(), "STORE");
    let msg = msg.replace(remote, "STORE");
    format!("{kind} {msg} record={:?}", e.record())
}

#[test]
fn damaged_remote_objects_give_the_same_typed_errors_as_local_ones() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let o = server.options();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    dense_store(&good, Codec::Zstd, 500, 256, 2);
    let files = |p: &Path| -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(p)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect()
    };
    let base = files(&good);
    let table_at = |i: usize| 4096 + 16 * i;
    type Damage = Box<dyn Fn(&mut BTreeMap<String, Vec<u8>>)>;
    let cases: Vec<(&str, Damage)> = vec![
        (
            "truncated shard",
            Box::new(|f| {
                let d = f.get_mut("data_1.zr").unwrap();
                d.truncate(d.len() / 2);
            }),
        ),
        (
            "missing shard",
            Box::new(|f| {
                f.remove("data_0.zr");
            }),
        ),
        (
            "missing meta",
            Box::new(|f| {
                f.remove("meta.zr");
            }),
        ),
        (
            "empty meta",
            Box::new(|f| {
                f.insert("meta.zr".into(), Vec::new());
            }),
        ),
        (
            "short meta",
            Box::new(|f| {
                f.get_mut("meta.zr").unwrap().truncate(100);
            }),
        ),
        (
            "truncated table",
            Box::new(|f| {
                f.get_mut("meta.zr").unwrap().truncate(4096 + 16 * 100);
            }),
        ),
        (
            "unknown codec",
            Box::new(|f| {
                // The codec tag's byte in the header.
                let m = f.get_mut("meta.zr").unwrap();
                m[11] = 9;
            }),
        ),
        (
            "unexpected dict",
            Box::new(|f| {
                f.insert("dict.zr".into(), vec![1, 2, 3]);
            }),
        ),
        (
            "garbage payload",
            Box::new(move |f| {
                let d = f.get_mut("data_1.zr").unwrap();
                for b in d.iter_mut().take(600) {
                    *b ^= 0x5a;
                }
            }),
        ),
        (
            "location past tail",
            Box::new(move |f| {
                let m = f.get_mut("meta.zr").unwrap();
                let at = table_at(7);
                m[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
            }),
        ),
    ];
    for (k, (name, damage)) in cases.into_iter().enumerate() {
        let mut f = base.clone();
        damage(&mut f);
        let local = dir.path().join(format!("case{k}"));
        std::fs::create_dir(&local).unwrap();
        let prefix = format!("damaged/case{k}");
        for (file, body) in &f {
            std::fs::write(local.join(file), body).unwrap();
            server.put_object("bkt", &format!("{prefix}/{file}"), body);
        }
        let u = format!("s3://bkt/{prefix}");
        // Records are read in order, and the lowest bad one is reported.
        let outcome = |r: Result<loaderx_core::StoreDigest, loaderx_core::Error>, at: &str| match r
        {
            Ok(d) => format!("ok {}", d.sha256),
            Err(e) => shape_of(&e, &local, at),
        };
        let l = outcome(Store::open(&local).and_then(|s| digest(&s)), &u);
        assert!(
            l.starts_with("Discriminant"),
            "{name}: local store read: {l}"
        );
        for o in [o.clone(), o.clone().no_cache()] {
            let r = outcome(Store::open_url(&u, &o).and_then(|s| digest(&s)), &u);
            assert_eq!(r, l, "{name}");
        }
    }
}

#[test]
fn a_server_gone_mid_run_is_a_typed_error_after_bounded_retries() {
    let Some(mut server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    dense_store(&p, Codec::Raw, 4_000, 512, 4);
    let u = url("bkt", "s");
    let o = server.options().no_cache();
    push(&p, &u, &o).unwrap();
    let s = DynDense::open_url(&u, &o).unwrap();
    let loader = DataLoader::builder()
        .stream("x", DynDense::open_url(&u, &o).unwrap())
        .batch_size(32)
        .workers(2)
        .build()
        .unwrap();
    s.gather_bytes(&[1, 2, 3]).unwrap();
    server.kill();
    let start = Instant::now();
    let e = s.gather_bytes(&[5, 3_999]).unwrap_err();
    let took = start.elapsed();
    match e.kind() {
        ErrorKind::Remote { path, record, .. } => {
            assert!(path.to_string_lossy().starts_with(&u), "{e}");
            assert!(matches!(record, Some(5 | 3_999)), "{e}");
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // Retried with backoff (2 retries from 50 ms) before giving up.
    assert!(took >= Duration::from_millis(100), "took {took:?}");
    // The loader reports it too, then ends; it never hangs.
    let start = Instant::now();
    let errors: Vec<_> = loader.take(50).filter_map(Result::err).collect();
    assert!(!errors.is_empty());
    assert!(
        errors.iter().all(|e| matches!(
            e.kind(),
            ErrorKind::Gather { .. } | ErrorKind::Remote { .. }
        )),
        "{errors:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(120));
    // Opening is the same error.
    let e = DynDense::open_url(&u, &o).err().unwrap();
    assert!(
        matches!(e.kind(), ErrorKind::Remote { record: None, .. }),
        "{e}"
    );
}

#[test]
fn reads_through_a_throttled_link_match_direct_reads() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    // 20 ms each way, 400 Mbit/s shared by every connection, in front of
    // the same server.
    let link = ThrottledLink::start(server.port(), 20, 400).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let tok = dir.path().join("tok");
    dense_store(&img, Codec::Zstd, 2_000, 784, 2);
    ragged_store(&tok, Codec::Raw, 2_000, 200, 3);
    let direct = server.options();
    push(&img, &url("bkt", "img"), &direct).unwrap();
    push(&tok, &url("bkt", "tok"), &direct).unwrap();
    // The same options with the link as the endpoint (the last value of a
    // key wins); 64 KiB blocks, so that a read is many requests.
    let slow = server
        .options()
        .config("aws_endpoint", link.endpoint())
        .block_bytes(64 << 10);
    for name in ["img", "tok"] {
        let u = url("bkt", name);
        let through = Store::open_url(&u, &slow).unwrap();
        let straight = Store::open_url(&u, &direct).unwrap();
        let local = Store::open(dir.path().join(name)).unwrap();
        let d = digest(&through).unwrap();
        assert_eq!(d, digest(&straight).unwrap(), "{u}");
        assert_eq!(d, digest(&local).unwrap(), "{u}");
        let stats = through.remote_stats().unwrap();
        assert!(stats.requests > 0 && stats.bytes_fetched > 0, "{stats:?}");
    }
    // Scattered gathers: many ranged GETs in flight on the link at once.
    let ri = DynDense::open_url(&url("bkt", "img"), &slow).unwrap();
    let di = DynDense::open_url(&url("bkt", "img"), &direct).unwrap();
    let rt = DynRagged::open_url(&url("bkt", "tok"), &slow).unwrap();
    let dt = DynRagged::open_url(&url("bkt", "tok"), &direct).unwrap();
    for seed in 0..3 {
        let idx = scattered(2_000, 300, seed);
        assert_eq!(
            ri.gather_bytes(&idx).unwrap(),
            di.gather_bytes(&idx).unwrap()
        );
        assert_same_ragged_gathers(&rt, &dt, &idx);
    }
    // The loader, unchanged, through the link and straight to the server.
    let run = |o: &RemoteOptions| {
        loader_batches(
            DynDense::open_url(&url("bkt", "img"), o).unwrap(),
            DynRagged::open_url(&url("bkt", "tok"), o).unwrap(),
            5,
            20,
        )
    };
    assert_eq!(run(&slow), run(&direct));
    // All of it went through the link: without it, the options reach nothing.
    drop(link);
    let e = DynDense::open_url(&url("bkt", "img"), &slow).err().unwrap();
    assert!(
        matches!(e.kind(), ErrorKind::Remote { record: None, .. }),
        "{e}"
    );
}

#[test]
fn a_store_being_written_is_not_published_remotely_either() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("open");
    let mut w =
        DynDenseWriter::create(&p, DType::U8, &[4], &CreateOptions::new(Codec::Raw)).unwrap();
    w.append_bytes(&[1; 40], 10).unwrap();
    // The writer holds the store: upload its files as they are now.
    for e in std::fs::read_dir(&p).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        server.put_object(
            "bkt",
            &format!("open/{name}"),
            &std::fs::read(e.path()).unwrap(),
        );
    }
    let e = Store::open_url("s3://bkt/open", &server.options())
        .err()
        .unwrap();
    assert!(matches!(e.kind(), ErrorKind::NotPublished { .. }), "{e}");
    // And push refuses it as open does.
    let e = push(&p, "s3://bkt/pushed", &server.options()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Busy { .. }), "{e}");
    w.close().unwrap();
    push(&p, "s3://bkt/pushed", &server.options()).unwrap();
    assert_eq!(
        Store::open_url("s3://bkt/pushed", &server.options())
            .unwrap()
            .len(),
        10
    );
}

/// Re-runs this test binary as a child running only test `name`, with `env`.
fn child(name: &str, env: &[(&str, String)]) -> std::process::Command {
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([name, "--exact", "--nocapture", "--test-threads", "1"]);
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Child side of the killed-upload test: pushes the store it is given.
#[test]
fn push_child() {
    let (Ok(store), Ok(u), Ok(endpoint)) = (
        std::env::var("LOADERX_TEST_PUSH_STORE"),
        std::env::var("LOADERX_TEST_PUSH_URL"),
        std::env::var("LOADERX_TEST_ENDPOINT"),
    ) else {
        return; // only meaningful as the child of `a_killed_upload_leaves_nothing_that_opens`
    };
    push(store, &u, &options_for(&endpoint).part_bytes(5 << 20)).unwrap();
}

fn options_for(endpoint: &str) -> RemoteOptions {
    RemoteOptions::default()
        .config("aws_endpoint", endpoint)
        .config("aws_access_key_id", "testing")
        .config("aws_secret_access_key", "testing")
        .config("aws_region", "us-east-1")
        .config("aws_allow_http", "true")
        .retries(1)
}

#[test]
fn a_killed_upload_leaves_nothing_that_opens() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big");
    dense_store(&p, Codec::Raw, 24_000, 4096, 4); // 4 shards of 24 MiB
    for attempt in 0..3 {
        let u = format!("s3://bkt/killed{attempt}");
        let mut c = child(
            "push_child",
            &[
                ("LOADERX_TEST_PUSH_STORE", p.to_string_lossy().into_owned()),
                ("LOADERX_TEST_PUSH_URL", u.clone()),
                ("LOADERX_TEST_ENDPOINT", server.endpoint()),
            ],
        )
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !server.exists("bkt", &format!("killed{attempt}/data_0.zr")) {
            assert!(Instant::now() < deadline, "the upload never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        let running = c.try_wait().unwrap().is_none();
        c.kill().unwrap();
        c.wait().unwrap();
        if !running {
            continue; // finished before the kill: try again
        }
        assert!(!server.exists("bkt", &format!("killed{attempt}/meta.zr")));
        let e = Store::open_url(&u, &server.options()).err().unwrap();
        assert!(matches!(e.kind(), ErrorKind::NotAStore { .. }), "{e}");
        return;
    }
    panic!("every upload finished before it could be killed");
}

/// FNV-1a over a record's shape and bytes.
fn record_hash(shape: &[usize], bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in shape
        .iter()
        .flat_map(|d| (*d as u64).to_le_bytes())
        .chain(bytes.iter().copied())
    {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One delivered step: its indices and a hash of each record of each stream.
type Step = (Vec<u64>, Vec<u64>, Vec<u64>);

fn deliveries(loader: DataLoader<loaderx_core::Batch>, steps: usize) -> Vec<Step> {
    loader
        .take(steps)
        .map(|b| {
            let b = b.unwrap();
            let hashes = |name: &str| -> Vec<u64> {
                b.column(name)
                    .unwrap()
                    .records()
                    .map(|(s, r)| record_hash(s, r))
                    .collect()
            };
            (b.indices().to_vec(), hashes("img"), hashes("tok"))
        })
        .collect()
}

const RANK_BATCH: usize = 16;
const WORLD: usize = 4;
const STEPS: usize = 30;

fn rank_loader(img: DynDense, tok: DynRagged, batch: usize) -> loaderx_core::DataLoaderBuilder {
    DataLoader::builder()
        .stream("img", img)
        .stream("tok", tok)
        .batch_size(batch)
        .mode(SamplerMode::Cyclic)
        .seed(11)
        .workers(2)
}

/// Child side of the multi-host test: rank `LOADERX_TEST_RANK` of 4 reads
/// its share of every step from the S3 store and prints it as JSON lines.
#[test]
fn rank_child() {
    let (Ok(rank), Ok(endpoint), Ok(cache)) = (
        std::env::var("LOADERX_TEST_RANK"),
        std::env::var("LOADERX_TEST_ENDPOINT"),
        std::env::var("LOADERX_TEST_CACHE"),
    ) else {
        return; // only meaningful as a child of `four_ranks_on_one_s3_store_deliver_a_single_process_run`
    };
    let rank: usize = rank.parse().unwrap();
    // All ranks share one cache directory, as processes on one host would.
    let o = options_for(&endpoint).cache_dir(Some(cache.into()));
    let img = DynDense::open_url("s3://bkt/mh/img", &o).unwrap();
    let tok = DynRagged::open_url("s3://bkt/mh/tok", &o).unwrap();
    let loader = rank_loader(img, tok, RANK_BATCH)
        .shard(rank, WORLD)
        .build()
        .unwrap();
    for (indices, img, tok) in deliveries(loader, STEPS) {
        println!(
            "STEP {}",
            serde_json::json!({"indices": indices, "img": img, "tok": tok})
        );
    }
}

#[test]
fn four_ranks_on_one_s3_store_deliver_a_single_process_run() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let tok = dir.path().join("tok");
    dense_store(&img, Codec::ZstdDict, 1_000, 784, 4);
    ragged_store(&tok, Codec::Zstd, 1_000, 100, 3);
    let o = server.options();
    push(&img, "s3://bkt/mh/img", &o).unwrap();
    push(&tok, "s3://bkt/mh/tok", &o).unwrap();
    let cache = dir.path().join("cache");
    let children: Vec<_> = (0..WORLD)
        .map(|rank| {
            child(
                "rank_child",
                &[
                    ("LOADERX_TEST_RANK", rank.to_string()),
                    ("LOADERX_TEST_ENDPOINT", server.endpoint()),
                    ("LOADERX_TEST_CACHE", cache.to_string_lossy().into_owned()),
                ],
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let ranks: Vec<Vec<Step>> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "a rank failed");
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                // libtest may print "test rank_child ... " before the first line.
                .filter_map(|l| l.split_once("STEP ").map(|(_, json)| json))
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    let list = |k: &str| -> Vec<u64> {
                        v[k].as_array()
                            .unwrap()
                            .iter()
                            .map(|x| x.as_u64().unwrap())
                            .collect()
                    };
                    (list("indices"), list("img"), list("tok"))
                })
                .collect()
        })
        .collect();
    // One process reading the global batch of the same steps, locally.
    let single = deliveries(
        rank_loader(
            DynDense::open(&img).unwrap(),
            DynRagged::open(&tok).unwrap(),
            RANK_BATCH * WORLD,
        )
        .build()
        .unwrap(),
        STEPS,
    );
    for (step, global) in single.iter().enumerate() {
        let mut seen = std::collections::HashSet::new();
        let (mut idx, mut im, mut tk) = (Vec::new(), Vec::new(), Vec::new());
        for r in &ranks {
            assert_eq!(r.len(), STEPS, "a rank delivered {} steps", r.len());
            let (i, a, t) = &r[step];
            for x in i {
                assert!(seen.insert(*x), "step {step}: record {x} went to two ranks");
            }
            idx.extend_from_slice(i);
            im.extend_from_slice(a);
            tk.extend_from_slice(t);
        }
        assert_eq!(&idx, &global.0, "step {step}: indices");
        assert_eq!(&im, &global.1, "step {step}: image bytes");
        assert_eq!(&tk, &global.2, "step {step}: token bytes");
    }
}

/// Part `p` of a two-stream dataset (Dense `u8[12]` images, Ragged `i32`
/// tokens) of `n` records, under `dir/part-…`; parts differ in codec and
/// shard count (the schema is what must agree).
fn dataset_part(dir: &Path, p: u64, n: usize) -> std::path::PathBuf {
    let part = dir.join(loaderx_core::Dataset::part_name(p));
    let codec = [Codec::Raw, Codec::Zstd][p as usize % 2];
    dense_store(&part.join("image"), codec, n, 12, 1 + p as usize % 3);
    ragged_store(&part.join("tokens"), codec, n, 40, 2);
    part
}

/// Pushes local part `p` under `base` as one publication (what a writer on
/// another machine does with `loaderx push DIR/part-… URL/part-…`).
fn push_part(local: &Path, base: &str, p: u64, o: &RemoteOptions) {
    let name = loaderx_core::Dataset::part_name(p);
    let set: Vec<(std::path::PathBuf, String)> = ["image", "tokens"]
        .iter()
        .map(|s| (local.join(&name).join(s), format!("{base}/{name}/{s}")))
        .collect();
    loaderx_core::push_stores(&set, o).unwrap();
}

fn stream_digests(d: &loaderx_core::Dataset) -> Vec<String> {
    d.streams()
        .iter()
        .map(|(n, s)| format!("{n} {}", digest(s).unwrap()))
        .collect()
}

/// A dataset whose parts were pushed independently (four writers at once)
/// is merged on S3 and reads back as the local one: digests, gathers that
/// span parts, a loader. Unpublished parts, a manifest that lies, a part
/// lost after the merge and merges racing are clear errors that write
/// nothing; a merge after a new part extends the dataset.
#[test]
fn a_dataset_pushed_part_by_part_is_merged_and_read_on_s3() {
    use loaderx_core::Dataset;
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let o = server.options();
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("local");
    let sizes = [300usize, 257, 1, 411, 90];
    for (p, n) in sizes.iter().enumerate() {
        dataset_part(&local, p as u64, *n);
    }
    let base = "s3://bkt/datasets/mix";
    // Parts 0..4 pushed at once by four writers, except the tokens of
    // part 3, whose push has not published it yet (no meta.zr).
    std::thread::scope(|s| {
        for p in 0..3u64 {
            let (local, o) = (&local, &o);
            s.spawn(move || push_part(local, base, p, o));
        }
    });
    let part3 = Dataset::part_name(3);
    loaderx_core::push(
        local.join(&part3).join("image"),
        &format!("{base}/{part3}/image"),
        &o,
    )
    .unwrap();
    loaderx_core::push(
        local.join(&part3).join("tokens"),
        &format!("{base}/{part3}/tokens"),
        &o,
    )
    .unwrap();
    server.delete_object("bkt", &format!("datasets/mix/{part3}/tokens/meta.zr"));
    let e = Dataset::merge_url(base, None, &o).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::NotPublished { .. })
            && e.to_string().contains("part-00003/tokens"),
        "{e}"
    );
    assert!(!server.exists("bkt", "datasets/mix/dataset.json"));
    // The part's writer pushes again (a push over an unpublished one
    // replaces it) and finishes.
    loaderx_core::push(
        local.join(&part3).join("tokens"),
        &format!("{base}/{part3}/tokens"),
        &o,
    )
    .unwrap();
    // Another part count than the writers were told: refused.
    let e = Dataset::merge_url(base, Some(5), &o).unwrap_err();
    assert!(e.to_string().contains("4 parts found, 5 expected"), "{e}");

    // Merges racing: each is merged or Busy, none half-written.
    let results: Vec<Result<Dataset, loaderx_core::Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..6)
            .map(|_| s.spawn(|| Dataset::merge_url(base, Some(4), &o)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!(
        "racing merges: {} merged, {} busy",
        results.iter().filter(|r| r.is_ok()).count(),
        results.iter().filter(|r| r.is_err()).count()
    );
    assert!(results.iter().any(Result::is_ok));
    for r in &results {
        if let Err(e) = r {
            assert!(matches!(e.kind(), ErrorKind::Busy { .. }), "{e}");
        }
    }

    // The same parts merged locally: one dataset, the same records.
    let four = tmp.path().join("four");
    std::fs::create_dir(&four).unwrap();
    for p in 0..4 {
        let name = Dataset::part_name(p);
        copy_dir(&local.join(&name), &four.join(&name));
    }
    let local_ds = Dataset::merge(&four, Some(4)).unwrap();
    let remote = Dataset::open_url(base, &o).unwrap();
    assert_eq!(remote.len(), 300 + 257 + 1 + 411);
    assert_eq!(remote.part_starts(), local_ds.part_starts());
    assert_eq!(stream_digests(&remote), stream_digests(&local_ds));
    // Gathers spanning every part, in any order, repeats included.
    let n = remote.len();
    let idx: Vec<u64> = (0..500u64).map(|i| (i * 7919 + 13) % n).collect();
    let (Store::Dense(ri), Store::Dense(li)) = (&remote.streams()[0].1, &local_ds.streams()[0].1)
    else {
        panic!("image is Dense");
    };
    assert_eq!(
        ri.gather_bytes(&idx).unwrap(),
        li.gather_bytes(&idx).unwrap()
    );
    let (Store::Ragged(rt), Store::Ragged(lt)) = (&remote.streams()[1].1, &local_ds.streams()[1].1)
    else {
        panic!("tokens is Ragged");
    };
    assert_eq!(
        format!("{:?}", rt.gather(&idx).unwrap()),
        format!("{:?}", lt.gather(&idx).unwrap())
    );
    // A loader over the URL's streams delivers what one over the local
    // dataset does.
    let loader = |d: Dataset| {
        let mut b = DataLoader::builder()
            .batch_size(64)
            .seed(5)
            .mode(SamplerMode::Iid);
        for (name, s) in d.into_streams() {
            b = b.stream(if name == "image" { "img" } else { "tok" }, s);
        }
        deliveries(b.build().unwrap(), 6)
    };
    assert_eq!(
        loader(Dataset::open_url(base, &o).unwrap()),
        loader(Dataset::open(&four).unwrap())
    );

    // A fifth part pushed later; merging again extends: old ids keep
    // their records.
    push_part(&local, base, 4, &o);
    let extended = Dataset::merge_url(base, None, &o).unwrap();
    assert_eq!(extended.len(), remote.len() + 90);
    let (Store::Dense(ei), _) = (&extended.streams()[0].1, ()) else {
        panic!("image is Dense");
    };
    assert_eq!(
        ei.gather_bytes(&idx).unwrap(),
        li.gather_bytes(&idx).unwrap()
    );

    // A manifest that lies about a part's length: an error naming it.
    let manifest = tmp.path().join("lie.json");
    std::fs::write(
        &manifest,
        std::fs::read_to_string(four.join("dataset.json"))
            .unwrap()
            .replacen("\"records\": 300", "\"records\": 299", 1)
            .replacen("\"records\": 969", "\"records\": 968", 1),
    )
    .unwrap();
    server.put_object(
        "bkt",
        "datasets/lie/dataset.json",
        &std::fs::read(&manifest).unwrap(),
    );
    for p in 0..4 {
        push_part(&local, "s3://bkt/datasets/lie", p, &o);
    }
    let e = Dataset::open_url("s3://bkt/datasets/lie", &o).unwrap_err();
    assert!(
        e.to_string()
            .contains("part-00000/image: holds 300 records, the manifest says 299"),
        "{e}"
    );
    // A part lost after the merge: the open names it.
    server.delete_object("bkt", "datasets/mix/part-00002/tokens/meta.zr");
    let e = Dataset::open_url(base, &o).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::NotAStore { .. })
            && e.to_string().contains("part-00002/tokens"),
        "{e}"
    );
    // And a merge now refuses (the part is unpublished), leaving the
    // manifest of the last merge as it was.
    let before = server.exists("bkt", "datasets/mix/dataset.json");
    assert!(Dataset::merge_url(base, None, &o).is_err());
    assert!(before && server.exists("bkt", "datasets/mix/dataset.json"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
