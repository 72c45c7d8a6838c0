//! A multi-part dataset against one store of the same records: random
//! gathers of 1 024 records, both sides built here, timed in alternating
//! rounds (the median of each side is printed, with the spread of the
//! single store's rounds as the noise). Raw and zstd Dense `u32[16]`
//! records and raw Ragged `i32` token rows, cut into 1 to 10 000 parts.
//!
//! Then the record → part map alone ([`PartIndex`]) over part tables of
//! more than 2^32 records: nanoseconds a record and bytes a part.
//!
//! Run: `cargo bench -p loaderx-core --bench parts [-- DIR]` (DIR: where
//! the stores go, e.g. /dev/shm; default the system's temporary directory).

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::{
    Codec, CreateOptions, Dataset, DenseWriter, PartIndex, RaggedWriter, Sampler, SamplerMode,
    Store,
};

const RECORDS: usize = 640_000;
const WIDTH: usize = 16;
const BATCH: usize = 1024;
const ROUNDS: usize = 15;

#[derive(Clone, Copy)]
enum Kind {
    Dense(Codec),
    Ragged,
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Dense(c) => format!("Dense u32[16] {c}"),
            Kind::Ragged => "Ragged i32 rows of 1-32, raw".into(),
        }
    }
}

fn write(kind: Kind, path: &Path, first: usize, n: usize) {
    match kind {
        Kind::Dense(codec) => {
            let mut w = DenseWriter::<u32>::create_with(
                path,
                &[WIDTH],
                &CreateOptions::new(codec).data_shards(1),
            )
            .unwrap();
            let rows: Vec<u32> = (first * WIDTH..(first + n) * WIDTH)
                .map(|x| (x as u32).wrapping_mul(2_654_435_761) >> 20)
                .collect();
            w.append_slice(&rows, n).unwrap();
            w.close().unwrap();
        }
        Kind::Ragged => {
            let mut w = RaggedWriter::<i32>::create_with(
                path,
                1,
                &CreateOptions::new(Codec::Raw).data_shards(1),
            )
            .unwrap();
            let recs: Vec<Vec<i32>> = (first..first + n)
                .map(|i| (0..1 + (i * 7919) % 32).map(|t| (i + t) as i32).collect())
                .collect();
            w.append(&recs).unwrap();
            w.close().unwrap();
        }
    }
}

/// Gathers per second of `f` over `batches`: one round.
fn round(batches: &[Vec<u64>], f: &mut dyn FnMut(&[u64])) -> f64 {
    let started = Instant::now();
    let mut n = 0usize;
    while started.elapsed() < Duration::from_millis(200) {
        for b in batches {
            f(b);
            n += 1;
        }
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per located record and index bytes per part, for equal parts of
/// several counts and a skewed table, every total above 2^32.
fn mapping() {
    let mut x = 0x243F_6A88_85A3_08D3u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let skewed: Vec<u64> = (0..100_000)
        .map(|_| (1 + next() % (1u64 << (next() % 21))) * 2048)
        .collect();
    println!();
    println!("| record → part | parts | records | ns per record | index bytes per part |");
    println!("|---|---:|---:|---:|---:|");
    for (what, lengths) in [
        ("equal parts of 2^20", vec![1u64 << 20; 10_000]),
        ("equal parts of 2^13", vec![1u64 << 13; 1_000_000]),
        ("skewed parts of 2^11 to 2^31", skewed),
    ] {
        let index = PartIndex::new(lengths.iter().copied()).unwrap();
        let probes: Vec<u64> = (0..4096).map(|_| next() % index.len()).collect();
        for &r in &probes[..64] {
            let want = index.starts().partition_point(|&s| s <= r) - 1;
            assert_eq!(index.locate(r).unwrap().0, want);
        }
        let started = Instant::now();
        let mut sink = 0usize;
        let mut n = 0usize;
        while started.elapsed() < Duration::from_millis(500) {
            for &r in &probes {
                sink = sink.wrapping_add(index.locate(r).map_or(0, |(p, _)| p));
            }
            n += probes.len();
        }
        std::hint::black_box(sink);
        println!(
            "| {what} | {} | {} | {:.1} | {:.1} |",
            index.parts(),
            index.len(),
            started.elapsed().as_secs_f64() * 1e9 / n as f64,
            index.memory_bytes() as f64 / index.parts() as f64
        );
    }
}

fn main() {
    let base = std::env::args()
        .nth(1)
        .filter(|a| !a.starts_with('-'))
        .map_or_else(std::env::temp_dir, Into::into);
    let tmp = tempfile::tempdir_in(base).unwrap();
    println!(
        "| records | parts | gathers/s, dataset | gathers/s, one store | dataset vs one store | one store's spread |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    // `LOADERX_BENCH_PARTS=10` (say): only that part count, raw Dense only
    // (for a profiler).
    let only: Option<usize> = std::env::var("LOADERX_BENCH_PARTS")
        .ok()
        .and_then(|v| v.parse().ok());
    let kinds: &[Kind] = if only.is_some() {
        &[Kind::Dense(Codec::Raw)]
    } else {
        &[
            Kind::Dense(Codec::Raw),
            Kind::Dense(Codec::Zstd),
            Kind::Ragged,
        ]
    };
    for &kind in kinds {
        let one = tmp.path().join("one");
        write(kind, &one, 0, RECORDS);
        let single = Store::open(&one).unwrap();
        let mut sampler = Sampler::new(RECORDS as u64, BATCH, SamplerMode::Iid, 3).unwrap();
        let batches: Vec<Vec<u64>> = (0..64).map(|_| sampler.next_batch().to_vec()).collect();
        for parts in [10_000usize, 1_000, 100, 10, 1] {
            if only.is_some_and(|o| o != parts) {
                continue;
            }
            let dir = tmp.path().join(format!("ds-{parts}"));
            for p in 0..parts {
                let r = Dataset::part_range(RECORDS as u64, p as u64, parts as u64);
                write(
                    kind,
                    &dir.join(Dataset::part_name(p as u64)).join("x"),
                    r.start as usize,
                    (r.end - r.start) as usize,
                );
            }
            Dataset::merge(&dir, Some(parts as u64)).unwrap();
            let dataset = Dataset::open(&dir).unwrap();
            let joined = &dataset.streams()[0].1;
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            match (joined, &single) {
                (Store::Dense(d), Store::Dense(s)) => {
                    let mut out = vec![0u8; BATCH * WIDTH * 4];
                    let mut check = vec![0u8; BATCH * WIDTH * 4];
                    d.gather_into(&batches[0], &mut out).unwrap();
                    s.gather_into(&batches[0], &mut check).unwrap();
                    assert!(out == check, "the dataset's gather differs");
                    for _ in 0..ROUNDS {
                        ours.push(round(&batches, &mut |b| {
                            d.gather_into(b, &mut out).unwrap()
                        }));
                        theirs.push(round(&batches, &mut |b| {
                            s.gather_into(b, &mut out).unwrap();
                        }));
                    }
                }
                (Store::Ragged(d), Store::Ragged(s)) => {
                    let len = s.gather_len(&batches[0]).unwrap();
                    let mut out = vec![0u8; len.max(BATCH * 33 * 4 + BATCH * 8)];
                    let mut check = out.clone();
                    let a = d.gather_into(&batches[0], &mut out).unwrap();
                    let b = s.gather_into(&batches[0], &mut check).unwrap();
                    assert!(out == check && format!("{a:?}") == format!("{b:?}"));
                    for _ in 0..ROUNDS {
                        ours.push(round(&batches, &mut |b| {
                            d.gather_into(b, &mut out).unwrap();
                        }));
                        theirs.push(round(&batches, &mut |b| {
                            s.gather_into(b, &mut out).unwrap();
                        }));
                    }
                }
                _ => unreachable!("both sides are written alike"),
            }
            let spread = {
                let mut t = theirs.clone();
                t.sort_by(f64::total_cmp);
                // The middle half of the single store's rounds, relative.
                (t[3 * t.len() / 4] - t[t.len() / 4]) / median(theirs.clone())
            };
            let (a, b) = (median(ours), median(theirs));
            println!(
                "| {} | {parts} | {a:.0} | {b:.0} | {:.2}× | ±{:.0} % |",
                kind.name(),
                a / b,
                50.0 * spread
            );
            drop(dataset);
            std::fs::remove_dir_all(&dir).unwrap();
        }
        std::fs::remove_dir_all(&one).unwrap();
    }
    if only.is_none() {
        mapping();
    }
}
