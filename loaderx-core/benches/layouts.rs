//! Raw Dense gathers of small records (and 784-byte images, as workload
//! (b)) on every layout a store can have,
//! against a plain loop over the same bytes in memory: the writer's regular
//! layout, shard chunks of 512 KiB in a shuffled order (how Python loaderx
//! 2.4.6 lays a store out on a many-core machine), reversed runs of 64
//! records, and every record moved (each shard's records reversed). All
//! rounds alternate between the contenders; the median time a record of
//! each is printed, with the regular layout's interquartile spread as the
//! noise.
//!
//! Run: `cargo bench -p loaderx-core --bench layouts [-- DIR]` (DIR: where
//! the stores go, e.g. /dev/shm; default the system's temporary directory).

#![allow(clippy::unwrap_used, missing_docs)]

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use loaderx_core::format::{self, RecordLoc};
use loaderx_core::{Codec, CreateOptions, DType, DynDense, DynDenseWriter, Sampler, SamplerMode};

const RECORDS: usize = 1_000_000;
const BATCH: usize = 1024;
const ROUNDS: usize = 21;
const BATCHES: usize = 200;

/// Rewrites the raw store at `path` (records of `width` bytes over
/// `shards` shards, regular) so that each shard's records lie in runs of
/// `run` records, the runs stored in the order `order(runs)` gives.
fn relayout(
    path: &Path,
    n: usize,
    width: usize,
    shards: usize,
    run: usize,
    order: &dyn Fn(usize) -> Vec<usize>,
) {
    let meta = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path.join(format::META_FILE))
        .unwrap();
    let mut table = vec![0u8; n * format::RECORD_LOC_LEN];
    for s in 0..shards {
        let file = path.join(format::data_file(s));
        let old = std::fs::read(&file).unwrap();
        let count = (n + shards - 1 - s) / shards;
        let mut new = Vec::with_capacity(old.len());
        for r in order(count.div_ceil(run)) {
            for k in r * run..((r + 1) * run).min(count) {
                let loc = RecordLoc {
                    offset: new.len() as u64,
                    phys_length: width as u32,
                    logic_length: width as u32,
                };
                let id = k * shards + s;
                table[id * format::RECORD_LOC_LEN..(id + 1) * format::RECORD_LOC_LEN]
                    .copy_from_slice(&loc.encode());
                new.extend_from_slice(&old[k * width..(k + 1) * width]);
            }
        }
        File::create(&file).unwrap().write_all_at(&new, 0).unwrap();
    }
    meta.write_all_at(&table, format::STATIC_PAGE_LEN as u64)
        .unwrap();
}

/// The order in which a shard's runs are stored, given their count.
type Order = dyn Fn(usize) -> Vec<usize>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let root = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(root).unwrap();
    let shards = 4;
    println!("| record | layout | ns/record | vs regular | vs in-memory loop |");
    println!("|---|---|---:|---:|---:|");
    for width in [1usize, 2, 4, 8, 16, 64, 784] {
        // A million records, or 64 MiB of them (784: Fashion-MNIST images).
        let n = RECORDS.min((64 << 20) / width);
        let data: Vec<u8> = (0..n * width)
            .map(|x| (x as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3])
            .collect();
        let chunk = (512 << 10) / width;
        // A fixed shuffle of the runs (a multiplicative permutation).
        let shuffled = |runs: usize| -> Vec<usize> {
            let mut v: Vec<usize> = (0..runs).collect();
            let mut x = 0x2545_F491_4F6C_DD1Du64;
            for i in (1..runs).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.swap(i, (x % (i as u64 + 1)) as usize);
            }
            v
        };
        let reversed = |runs: usize| -> Vec<usize> { (0..runs).rev().collect() };
        let layouts: Vec<(&str, Option<(usize, &Order)>)> = vec![
            ("regular (this crate's writer)", None),
            (
                "512 KiB chunks shuffled (Python 2.4.6, many lanes)",
                Some((chunk, &shuffled)),
            ),
            ("reversed runs of 64", Some((64, &reversed))),
            ("every record moved", Some((1, &reversed))),
        ];
        let mut stores = Vec::new();
        for (k, (_, relaid)) in layouts.iter().enumerate() {
            let path = dir.path().join(format!("w{width}-{k}"));
            let opts = CreateOptions::new(Codec::Raw).data_shards(shards);
            let mut w = DynDenseWriter::create(&path, DType::U8, &[width], &opts).unwrap();
            w.append_bytes(&data, n).unwrap();
            w.close().unwrap();
            if let Some((run, order)) = relaid {
                relayout(&path, n, width, shards, *run, *order);
            }
            stores.push(DynDense::open(&path).unwrap());
        }
        // Batches of 256 images, as workload (b) draws them.
        let batch = if width >= 256 { 256 } else { BATCH };
        let mut sampler = Sampler::new(n as u64, batch, SamplerMode::Iid, 3).unwrap();
        let batches: Vec<Vec<u64>> = (0..BATCHES)
            .map(|_| sampler.next_batch().to_vec())
            .collect();
        for (s, store) in stores.iter().enumerate() {
            for b in batches.iter().take(3) {
                let want: Vec<u8> = b
                    .iter()
                    .flat_map(|&i| &data[i as usize * width..(i as usize + 1) * width])
                    .copied()
                    .collect();
                assert_eq!(store.gather_bytes(b).unwrap(), want, "layout {s}");
            }
        }
        // Contenders: each store, then the loop over `data` in memory.
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); stores.len() + 1];
        for _ in 0..ROUNDS {
            for (c, t) in times.iter_mut().enumerate() {
                let started = Instant::now();
                for b in &batches {
                    if let Some(store) = stores.get(c) {
                        std::hint::black_box(store.gather_bytes(b).unwrap());
                    } else {
                        let mut out = Vec::with_capacity(b.len() * width);
                        for &i in b {
                            let at = i as usize * width;
                            out.extend_from_slice(&data[at..at + width]);
                        }
                        std::hint::black_box(out);
                    }
                }
                t.push(started.elapsed().as_secs_f64() * 1e9 / (BATCHES * batch) as f64);
            }
        }
        let regular = median(times[0].clone());
        let memory = median(times[stores.len()].clone());
        let mut sorted = times[0].clone();
        sorted.sort_by(f64::total_cmp);
        let noise = (sorted[3 * ROUNDS / 4] - sorted[ROUNDS / 4]) / regular;
        for (c, t) in times.iter().enumerate() {
            let name = layouts
                .get(c)
                .map_or("in-memory loop (index × width)", |l| l.0);
            let m = median(t.clone());
            println!(
                "| u8[{width}] | {name} | {m:.2} | {:.2}× | {:.2}× |",
                regular / m,
                memory / m
            );
        }
        println!(
            "| u8[{width}] | (regular layout's spread: ±{:.0} %) | | | |",
            noise * 50.0
        );
    }
}
