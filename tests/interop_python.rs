//! Format compatibility with the real Python loaderx 2.4.6, both ways.
//!
//! Needs `LOADERX_PYTHON` (a python with `loaderx==2.4.6`); the README's test
//! command installs one.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use loaderx_core::DigestBuilder;
use loaderx_core::{
    Codec, CreateOptions, DType, DynDenseWriter, DynRaggedWriter, ErrorKind, Generation, Store,
    StoreKind, digest, train_dict,
};
use loaderx_tests::{python, run_interop};
use serde::Deserialize;

#[path = "interop_generations.rs"]
mod generations;

#[derive(Debug, Deserialize)]
struct Entry {
    name: String,
    kind: String,
    dtype: String,
    codec: String,
    data_shards: usize,
    shape: Option<Vec<usize>>,
    ndim: usize,
    length: u64,
    digest: String,
}

#[test]
fn python_writes_rust_reads() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("py");
    run_interop(&py, &[OsStr::new("write"), out.as_os_str()]);
    let manifest: Vec<Entry> =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert!(
        manifest.len() >= 80,
        "manifest has {} stores",
        manifest.len()
    );
    let mut seen = BTreeMap::new();
    for e in &manifest {
        let store =
            Store::open(out.join(&e.name)).unwrap_or_else(|err| panic!("{}: {err}", e.name));
        assert_eq!(
            store.dtype().numpy_str(),
            Some(e.dtype.as_str()),
            "{}",
            e.name
        );
        assert_eq!(store.codec().name(), e.codec, "{}", e.name);
        assert_eq!(store.data_shards(), e.data_shards, "{}", e.name);
        assert_eq!(store.len(), e.length, "{}", e.name);
        match (&store, e.kind.as_str()) {
            (Store::Dense(s), "dense") => {
                assert_eq!(Some(s.item_shape().to_vec()), e.shape, "{}", e.name)
            }
            (Store::Ragged(s), "ragged") => assert_eq!(s.ndim(), e.ndim, "{}", e.name),
            _ => panic!("{}: kind {} but opened {:?}", e.name, e.kind, store.kind()),
        }
        let d = digest(&store).unwrap();
        assert_eq!(d.sha256, e.digest, "{}: digest differs", e.name);
        *seen.entry((e.kind.clone(), e.codec.clone())).or_insert(0) += 1;
    }
    assert!(
        manifest
            .iter()
            .any(|e| e.length > 32768 && e.kind == "dense")
    );
    assert!(
        manifest
            .iter()
            .any(|e| e.length > 32768 && e.kind == "ragged")
    );
    assert_eq!(seen.len(), 6, "{seen:?}");
}

/// Deterministic bytes (splitmix64).
fn bytes(seed: u64, n: usize, dtype: DType) -> Vec<u8> {
    let mut s = seed;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(n);
    if dtype == DType::Bool {
        out.iter_mut().for_each(|b| *b &= 1);
    }
    out
}

/// Low-entropy bytes that compress, so zstd frames are real.
fn compressible(seed: u64, n: usize, dtype: DType) -> Vec<u8> {
    let noise = bytes(seed, n, DType::U8);
    (0..n)
        .map(|i| {
            let b = if noise[i] < 40 {
                noise[i]
            } else {
                (i / 7 % 5) as u8
            };
            if dtype == DType::Bool { b & 1 } else { b }
        })
        .collect()
}

struct Written {
    path: PathBuf,
    digest: String,
    length: u64,
}

fn options(codec: Codec, shards: usize, dict: impl FnOnce() -> Vec<u8>) -> CreateOptions {
    // The 2.4.6 generation: the reader here is Python loaderx 2.4.6 (the
    // 2.8.19 generation, the default, is checked in `generations`).
    let o = CreateOptions::new(codec)
        .data_shards(shards)
        .generation(Generation::V2_4_6);
    if codec == Codec::ZstdDict {
        o.dict_bytes(dict())
    } else {
        o
    }
}

fn write_dense(
    root: &Path,
    dtype: DType,
    shape: &[usize],
    codec: Codec,
    shards: usize,
    splits: &[usize],
    seed: u64,
) -> Written {
    let width = shape.iter().product::<usize>() * dtype.size();
    let n: usize = splits.iter().sum();
    let data = if seed.is_multiple_of(2) {
        compressible(seed, n * width, dtype)
    } else {
        bytes(seed, n * width, dtype)
    };
    let name = format!("dense_{}_{shape:?}_{codec}_s{shards}_n{n}", dtype.name());
    let path = root.join(name.replace([' ', '[', ']', ','], ""));
    let opts = options(codec, shards, || {
        train_dict(data.chunks(width.max(8)))
            .or_else(|_| train_dict(compressible(1, 1 << 16, DType::U8).chunks(64)))
            .unwrap()
    });
    let mut w = DynDenseWriter::create(&path, dtype, shape, &opts).unwrap();
    let mut at = 0;
    for &k in splits {
        w.append_bytes(&data[at * width..(at + k) * width], k)
            .unwrap();
        at += k;
    }
    w.close().unwrap();
    let mut d = DigestBuilder::new();
    for rec in data.chunks(width) {
        d.push(shape, rec);
    }
    Written {
        path,
        digest: d.finish().sha256,
        length: n as u64,
    }
}

fn write_ragged(
    root: &Path,
    dtype: DType,
    ndim: usize,
    codec: Codec,
    shards: usize,
    splits: &[usize],
    seed: u64,
) -> Written {
    let n: usize = splits.iter().sum();
    let shapes: Vec<Vec<usize>> = (0..n)
        .map(|i| {
            let r = bytes(seed ^ i as u64, ndim, DType::U8);
            r.iter()
                .map(|&b| 1 + b as usize % if ndim == 1 { 40 } else { 6 })
                .collect()
        })
        .collect();
    let records: Vec<Vec<u8>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let len = s.iter().product::<usize>() * dtype.size();
            if seed.is_multiple_of(2) {
                compressible(seed + i as u64, len, dtype)
            } else {
                bytes(seed + i as u64, len, dtype)
            }
        })
        .collect();
    let name = format!("ragged_{}_nd{ndim}_{codec}_s{shards}_n{n}", dtype.name());
    let path = root.join(name);
    let opts = options(codec, shards, || {
        train_dict(&records)
            .or_else(|_| train_dict(compressible(1, 1 << 16, DType::U8).chunks(64)))
            .unwrap()
    });
    let mut w = DynRaggedWriter::create(&path, dtype, ndim, &opts).unwrap();
    let mut at = 0;
    for &k in splits {
        w.append_bytes((at..at + k).map(|i| (&shapes[i][..], &records[i][..])))
            .unwrap();
        at += k;
    }
    w.close().unwrap();
    let mut d = DigestBuilder::new();
    for (s, r) in shapes.iter().zip(&records) {
        d.push(s, r);
    }
    Written {
        path,
        digest: d.finish().sha256,
        length: n as u64,
    }
}

#[test]
fn rust_writes_python_reads() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let codecs = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];
    let mut written = Vec::new();
    let mut seed = 1u64;
    // The twelve types Python 2.4.6 reads; the 2.8 types go through the
    // 2.8.19 generation.
    for (k, dtype) in DType::CLASSIC.into_iter().enumerate() {
        for (c, codec) in codecs.into_iter().enumerate() {
            let shards = [1, 4, 7][(k + c) % 3];
            let shape: &[usize] = [&[][..], &[3], &[2, 3, 2], &[17, 5]][(k + c) % 4];
            seed += 1;
            written.push(write_dense(
                root,
                dtype,
                shape,
                codec,
                shards,
                &[1, 50, 29],
                seed,
            ));
            let ndim = 1 + (k + c) % 3;
            seed += 1;
            written.push(write_ragged(
                root,
                dtype,
                ndim,
                codec,
                shards,
                &[3, 40],
                seed,
            ));
        }
    }
    for codec in codecs {
        for shards in [1, 4, 7] {
            seed += 1;
            written.push(write_dense(
                root,
                DType::U16,
                &[4],
                codec,
                shards,
                &[10, 20],
                seed,
            ));
        }
    }
    // Multi-window appends: more than 32768 records in several appends.
    written.push(write_dense(
        root,
        DType::U8,
        &[28, 28],
        Codec::Zstd,
        7,
        &[1, 40_000, 9_999],
        10,
    ));
    written.push(write_ragged(
        root,
        DType::I32,
        2,
        Codec::ZstdDict,
        4,
        &[33_000, 7_001],
        12,
    ));
    written.push(write_ragged(
        root,
        DType::F32,
        1,
        Codec::Raw,
        1,
        &[70_000],
        13,
    ));

    let mut args: Vec<&OsStr> = vec![OsStr::new("digest")];
    args.extend(written.iter().map(|w| w.path.as_os_str()));
    let out = run_interop(&py, &args);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), written.len());
    for (w, line) in written.iter().zip(lines) {
        assert_eq!(
            line,
            format!("{}  {}", w.digest, w.length),
            "{}",
            w.path.display()
        );
        // Our own reader agrees with the source digest too.
        assert_eq!(
            digest(&Store::open(&w.path).unwrap()).unwrap().sha256,
            w.digest
        );
    }
}

#[test]
fn unpublished_and_busy_stores_across_implementations() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut w =
        DynDenseWriter::create(&path, DType::U8, &[4], &options(Codec::Zstd, 1, Vec::new)).unwrap();
    w.append_bytes(&[1; 40], 10).unwrap();
    // While our writer holds the exclusive lock, Python is refused.
    let busy = run_interop(&py, &[OsStr::new("check-empty-open"), path.as_os_str()]);
    assert!(busy.contains("busy"), "{busy}");
    drop(w); // never closed: not published
    let refused = run_interop(&py, &[OsStr::new("check-empty-open"), path.as_os_str()]);
    assert!(
        refused.starts_with("error"),
        "Python opened an unpublished store: {refused}"
    );
    let e = Store::open(&path).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::NotPublished { .. }), "{e}");

    // Two processes read one store at once: Python holds a shared lock.
    let path = dir.path().join("t");
    let mut w =
        DynRaggedWriter::create(&path, DType::U8, 1, &options(Codec::Raw, 1, Vec::new)).unwrap();
    w.append_bytes([(&[3usize][..], &b"abc"[..])]).unwrap();
    w.close().unwrap();
    let mut child = Command::new(&py)
        .arg(loaderx_tests::interop_script())
        .args([OsStr::new("hold"), path.as_os_str(), OsStr::new("30")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    let s = Store::open(&path).unwrap();
    assert_eq!(s.kind(), StoreKind::Ragged);
    assert_eq!(digest(&s).unwrap().length, 1);
    child.kill().unwrap();
    child.wait().unwrap();
}

fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) {
    loaderx_tests::write_npy(path, descr, shape, data).unwrap();
}

/// Stores Python loaderx writes the way a many-core machine lays them out
/// (24 writer lanes, `bench/python/write_lanes.py`: 2.4.6 places its
/// 512 KiB shard chunks in the order the lanes finish) read back exactly
/// what was written, on every gather path: Dense records large enough for
/// several chunks a shard (the block-table layout) and small ones, and a
/// Ragged store. Both releases' writers.
#[test]
fn many_lane_python_stores_read_like_their_source() {
    let Some(py) = python() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/python/write_lanes.py");
    let dir = tempfile::tempdir().unwrap();
    // Sources: u8[4096] × 3000 (about 6 chunks a shard), i32[4] × 200000
    // (2 chunks a shard), Ragged i32 of 16..512 elements × 20000.
    let big = bytes(41, 3000 * 4096, DType::U8);
    let small = bytes(42, 200_000 * 16, DType::I32);
    let lengths: Vec<usize> = bytes(43, 20_000 * 2, DType::U8)
        .chunks_exact(2)
        .map(|b| 16 + usize::from(u16::from_le_bytes([b[0], b[1]])) % 497)
        .collect();
    let flat = bytes(44, lengths.iter().sum::<usize>() * 4, DType::I32);
    let sources = dir.path().join("src");
    for (name, descr, shape, data) in [
        ("big", "|u1", vec![3000, 4096], &big),
        ("small", "<i4", vec![200_000, 4], &small),
    ] {
        std::fs::create_dir_all(sources.join(name)).unwrap();
        write_npy(&sources.join(name).join("data.npy"), descr, &shape, data);
    }
    let ragged_src = sources.join("ragged");
    std::fs::create_dir_all(&ragged_src).unwrap();
    write_npy(
        &ragged_src.join("flat.npy"),
        "<i4",
        &[flat.len() / 4],
        &flat,
    );
    let shapes: Vec<u8> = lengths
        .iter()
        .flat_map(|&l| (l as u64).to_le_bytes())
        .collect();
    write_npy(
        &ragged_src.join("shapes.npy"),
        "<u8",
        &[lengths.len(), 1],
        &shapes,
    );
    let mut starts = vec![0usize];
    for l in &lengths {
        starts.push(starts.last().unwrap() + l * 4);
    }

    let releases = loaderx_tests::py_releases()
        .map(|r| r.join("2.8.19"))
        .filter(|r| r.join("loaderx").is_dir());
    for release in [None, releases.as_deref()] {
        let label = release.map_or("2.4.6", |_| "2.8.19");
        for name in ["big", "small", "ragged"] {
            let out = dir.path().join(format!("{label}-{name}"));
            let mut cmd = Command::new(&py);
            if let Some(r) = release {
                cmd.env("PYTHONPATH", r);
            }
            let kind = if name == "ragged" { "ragged" } else { "dense" };
            let status = cmd
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .arg(&script)
                .args(["--lanes", "24", "--kind", kind, "--source"])
                .arg(sources.join(name))
                .arg("--out")
                .arg(&out)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "{label} {name}: write_lanes.py failed");
            let store = Store::open(&out).unwrap_or_else(|e| panic!("{label} {name}: {e}"));
            let n = store.len();
            // Every record once in a scattered order, and a sequential slice.
            let scattered: Vec<u64> = (0..n).map(|i| (i * 7919 + 13) % n).collect();
            let slice: Vec<u64> = (n / 3..n / 3 + 500.min(n / 2)).collect();
            for idx in [&scattered, &slice] {
                match &store {
                    Store::Dense(d) => {
                        let width = d.record_bytes();
                        let src = if name == "big" { &big } else { &small };
                        let want: Vec<u8> = idx
                            .iter()
                            .flat_map(|&i| &src[i as usize * width..(i as usize + 1) * width])
                            .copied()
                            .collect();
                        assert!(d.gather_bytes(idx).unwrap() == want, "{label} {name}");
                    }
                    Store::Ragged(r) => {
                        let batch = r.gather(idx).unwrap();
                        for (k, &i) in idx.iter().enumerate() {
                            let i = i as usize;
                            assert_eq!(
                                batch.bytes(k),
                                &flat[starts[i]..starts[i + 1]],
                                "{label} {name}: record {i}"
                            );
                        }
                    }
                }
            }
            // Past the end is refused, not read.
            let past = match &store {
                Store::Dense(d) => d.gather_bytes(&[n]).map(drop),
                Store::Ragged(r) => r.gather(&[n]).map(drop),
            };
            assert!(
                matches!(
                    past.as_ref().map_err(|e| e.kind()),
                    Err(ErrorKind::IndexOutOfRange { .. })
                ),
                "{label} {name}"
            );
        }
    }
}
