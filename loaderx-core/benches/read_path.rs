//! Which read path should gather use? Measures, on the same store files and
//! the same random IID batches:
//!
//! - `loaderx` — this crate: location table and shards memory-mapped, records
//!   copied or decompressed straight into the destination;
//! - `pread-table` — location table read once at open, one `pread` per record;
//! - `pread-2x` — the Python original's path: one `pread` for the location,
//!   one for the payload, per record;
//! - `memcpy` — copying the same bytes out of an in-memory array (the limit);
//! - with `LOADERX_PYTHON` set, Python loaderx 2.4.6 and NumPy mmap fancy
//!   indexing on the same data, in a child process.
//!
//! All Rust paths fan out over the same rayon pool. Run:
//! `cargo bench -p loaderx-core --bench read_path`

#![allow(clippy::unwrap_used, missing_docs)]

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::format::{RECORD_LOC_LEN, RecordLoc, STATIC_PAGE_LEN, data_file};
use loaderx_core::{Codec, CreateOptions, DType, DynDense, DynDenseWriter};
use rayon::prelude::*;

struct Workload {
    name: &'static str,
    shape: &'static [usize],
    records: usize,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "dense small u8[28,28]",
        shape: &[28, 28],
        records: 60_000,
    },
    Workload {
        name: "dense tokens i32[512]",
        shape: &[512],
        records: 40_000,
    },
    Workload {
        name: "dense vision u8[3,224,224]",
        shape: &[3, 224, 224],
        records: 2_000,
    },
];
const BATCH: usize = 256;

fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Image-like bytes: smooth with noise, so zstd has something to do.
fn source(n: usize, width: usize) -> Vec<u8> {
    let mut s = 0x1234_5678u64;
    (0..n * width)
        .map(|i| ((i % width) as u64 / 7 + xorshift(&mut s) % 16) as u8)
        .collect()
}

/// Runs `f` on fresh IID batches until 1.5 s pass; returns records per second.
fn time(n: usize, mut f: impl FnMut(&[u64])) -> f64 {
    let mut seed = 42u64;
    let mut idx = vec![0u64; BATCH];
    let mut draw = |idx: &mut Vec<u64>| {
        idx.iter_mut()
            .for_each(|i| *i = xorshift(&mut seed) % n as u64)
    };
    draw(&mut idx);
    f(&idx); // warm
    let (mut spent, mut batches) = (Duration::ZERO, 0u64);
    while spent < Duration::from_millis(1500) {
        draw(&mut idx);
        let t = Instant::now();
        f(&idx);
        spent += t.elapsed();
        batches += 1;
    }
    (batches * BATCH as u64) as f64 / spent.as_secs_f64()
}

struct Pread {
    meta: File,
    shards: Vec<File>,
    table: Vec<RecordLoc>,
}

impl Pread {
    fn open(path: &Path, shards: usize, n: usize) -> Pread {
        let meta = File::open(path.join("meta.zr")).unwrap();
        let mut raw = vec![0u8; n * RECORD_LOC_LEN];
        meta.read_exact_at(&mut raw, STATIC_PAGE_LEN as u64)
            .unwrap();
        let table = raw
            .chunks_exact(RECORD_LOC_LEN)
            .map(|c| RecordLoc::decode(c.try_into().unwrap()))
            .collect();
        let shards = (0..shards)
            .map(|s| File::open(path.join(data_file(s))).unwrap())
            .collect();
        Pread {
            meta,
            shards,
            table,
        }
    }

    fn gather(&self, idx: &[u64], width: usize, dst: &mut [u8], per_record_loc: bool) {
        let n = self.shards.len() as u64;
        dst.par_chunks_mut(width)
            .zip(idx)
            .with_min_len(16)
            .for_each(|(d, &i)| {
                let loc = if per_record_loc {
                    let mut b = [0u8; RECORD_LOC_LEN];
                    self.meta
                        .read_exact_at(&mut b, STATIC_PAGE_LEN as u64 + i * 16)
                        .unwrap();
                    RecordLoc::decode(&b)
                } else {
                    self.table[i as usize]
                };
                self.shards[(i % n) as usize]
                    .read_exact_at(d, loc.offset)
                    .unwrap();
            });
    }
}

fn write_npy(path: &Path, shape: &[usize], data: &[u8]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '|u1', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    std::fs::write(path, out).unwrap();
}

const PY_PEERS: &str = r#"
import sys, time, numpy as np
from loaderx.zrecord import Dense
store, npy, n, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(42)
def rate(f):
    f(rng.integers(0, n, batch, dtype=np.uint64))
    spent, batches = 0.0, 0
    while spent < 1.5:
        idx = rng.integers(0, n, batch, dtype=np.uint64)
        t = time.perf_counter(); f(idx); spent += time.perf_counter() - t; batches += 1
    return batches * batch / spent
ds = Dense.open(store)
arr = np.load(npy, mmap_mode="r")
print(rate(lambda idx: ds[idx]), rate(lambda idx: arr[idx.astype(np.int64)]))
"#;

fn main() {
    let python = std::env::var_os("LOADERX_PYTHON");
    let dir = tempfile::tempdir().unwrap();
    println!(
        "read paths, random IID batches of {BATCH}, rayon threads: {}",
        rayon::current_num_threads()
    );
    println!("| workload | codec | path | krecords/s | vs memcpy | vs pread-2x |");
    println!("|---|---|---|---:|---:|---:|");
    for w in &WORKLOADS {
        let width: usize = w.shape.iter().product();
        let data = source(w.records, width);
        let npy = dir.path().join(format!("{}.npy", w.records));
        let mut full_shape = vec![w.records];
        full_shape.extend_from_slice(w.shape);
        write_npy(&npy, &full_shape, &data);
        for codec in [Codec::Raw, Codec::Zstd] {
            let path = dir.path().join(format!("{}_{codec}", w.records));
            let mut wr =
                DynDenseWriter::create(&path, DType::U8, w.shape, &CreateOptions::new(codec))
                    .unwrap();
            wr.append_bytes(&data, w.records).unwrap();
            wr.close().unwrap();
            let store = DynDense::open(&path).unwrap();
            let mut dst = vec![0u8; BATCH * width];
            let ours = time(w.records, |idx| store.gather_into(idx, &mut dst).unwrap());
            let memcpy = time(w.records, |idx| {
                dst.par_chunks_mut(width)
                    .zip(idx)
                    .with_min_len(16)
                    .for_each(|(d, &i)| {
                        let i = i as usize;
                        d.copy_from_slice(&data[i * width..(i + 1) * width]);
                    })
            });
            let mut rows = vec![("loaderx (mmap)", ours), ("memcpy", memcpy)];
            if codec == Codec::Raw {
                let p = Pread::open(&path, store.data_shards(), w.records);
                rows.push((
                    "pread-table",
                    time(w.records, |idx| p.gather(idx, width, &mut dst, false)),
                ));
                rows.push((
                    "pread-2x",
                    time(w.records, |idx| p.gather(idx, width, &mut dst, true)),
                ));
            }
            if let Some(py) = &python {
                let out = std::process::Command::new(py)
                    .args(["-c", PY_PEERS])
                    .arg(&path)
                    .arg(&npy)
                    .args([w.records.to_string(), BATCH.to_string()])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                let v: Vec<f64> = text
                    .split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect();
                if let [loaderx_py, numpy] = v[..] {
                    rows.push(("python loaderx 2.4.6", loaderx_py));
                    if codec == Codec::Raw {
                        rows.push(("numpy mmap fancy index", numpy));
                    }
                }
            }
            let pread2 = rows.iter().find(|r| r.0 == "pread-2x").map(|r| r.1);
            for (name, rate) in rows {
                let vs_pread = pread2.map_or("-".to_string(), |p| format!("{:.2}x", rate / p));
                println!(
                    "| {} | {codec} | {name} | {:.1} | {:.2}x | {vs_pread} |",
                    w.name,
                    rate / 1e3,
                    rate / memcpy
                );
            }
        }
    }
}
