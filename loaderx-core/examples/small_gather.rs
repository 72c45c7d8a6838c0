//! Where the time of a small-record gather goes: raw Dense stores of
//! 1 000 000 records of 1 (`u8`) and 8 (`i64`) bytes, IID batches of 1024
//! (the `small` section of `loaderx-bench`), timed
//!
//! - through [`DynDense::gather_bytes`] (a fresh output each call, as the
//!   benchmark does), each call timed on its own with fresh indices, alone
//!   and with the bookkeeping `loaderx-bench`'s harness used to do between
//!   calls (1024 random reads of an 8 MB offset table, which empties the
//!   caches the next call would use);
//! - through [`DynDense::gather_bytes`], [`DynDense::gather_into`] (one
//!   reused output) and [`Dense::gather`], over pre-drawn batches;
//! - against loops over the same bytes in one flat memory-mapped file:
//!   `extend_from_slice` per record (the benchmark's flat-file peer) and a
//!   fixed-width copy into a reused output (the least any gather can do);
//! - against the same fixed-width loop over the store's own shard files,
//!   picking the shard by a mask (the store's layout, with nothing else).
//!
//! Each row runs for at least `LOADERX_SECONDS` (default 1) and prints
//! nanoseconds per record; the rows alternate twice so that drift on a
//! shared machine shows. Run:
//! `cargo run -p loaderx-core --release --example small_gather [DIR]`
//! (DIR defaults to a temporary directory; `/dev/shm` keeps it in memory).

use std::error::Error;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::{Codec, Dense, DenseWriter, DynDense, Element};
use memmap2::Mmap;
use ndarray::Array1;

const RECORDS: usize = 1_000_000;
const BATCH: usize = 1024;

fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Batches of IID indices, drawn before any timing.
fn batches(count: usize) -> Vec<Vec<u64>> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .map(|_| {
            (0..BATCH)
                .map(|_| xorshift(&mut seed) % RECORDS as u64)
                .collect()
        })
        .collect()
}

/// Nanoseconds per record of `f` over `idx`, run for at least `min`.
fn time(
    min: Duration,
    idx: &[Vec<u64>],
    mut f: impl FnMut(&[u64]) -> Result<(), loaderx_core::Error>,
) -> Result<f64, loaderx_core::Error> {
    let mut records = 0usize;
    let started = Instant::now();
    let mut k = 0;
    while started.elapsed() < min {
        for b in idx.iter().skip(k % idx.len()).take(64) {
            f(b)?;
            records += b.len();
        }
        k += 64;
    }
    Ok(started.elapsed().as_secs_f64() * 1e9 / records as f64)
}

/// Nanoseconds per record of `gather` on fresh IID batches, each call
/// timed on its own (as loaderx-bench times it), with `between` run after
/// every call outside the timer.
fn per_call(
    min: Duration,
    seed: &mut u64,
    mut gather: impl FnMut(&[u64]) -> Result<(), loaderx_core::Error>,
    mut between: impl FnMut(&[u64]),
) -> Result<f64, loaderx_core::Error> {
    let (mut spent, mut n) = (Duration::ZERO, 0usize);
    while spent < min {
        let b: Vec<u64> = (0..BATCH)
            .map(|_| xorshift(seed) % RECORDS as u64)
            .collect();
        let started = Instant::now();
        gather(&b)?;
        spent += started.elapsed();
        between(&b);
        n += b.len();
    }
    Ok(spent.as_secs_f64() * 1e9 / n as f64)
}

fn map(path: &Path) -> Result<Mmap, Box<dyn Error>> {
    // SAFETY: the files are written by this program and not modified while
    // mapped.
    Ok(unsafe { Mmap::map(&File::open(path)?)? })
}

fn rows<T: Element + bytemuck::Pod, const W: usize>(
    dir: &Path,
    name: &str,
    values: impl Fn(usize) -> T,
    min: Duration,
) -> Result<(), Box<dyn Error>> {
    let store = dir.join(name);
    let _ = std::fs::remove_dir_all(&store);
    let data: Array1<T> = (0..RECORDS).map(&values).collect();
    let mut w = DenseWriter::<T>::create(&store, &[], Codec::Raw)?;
    w.append(&data)?;
    w.close()?;
    let d = Dense::<T>::open(&store)?;
    let dyn_d = DynDense::open(&store)?;
    let flat_path = dir.join(format!("{name}.flat"));
    std::fs::write(
        &flat_path,
        bytemuck::cast_slice::<T, u8>(data.as_slice().ok_or("not contiguous")?),
    )?;
    let flat = map(&flat_path)?;
    let shards: Vec<Mmap> = (0..dyn_d.data_shards())
        .map(|s| map(&store.join(format!("data_{s}.zr"))))
        .collect::<Result<_, _>>()?;
    let mask = shards.len() as u64 - 1;
    let shift = shards.len().trailing_zeros();
    assert!(shards.len().is_power_of_two());
    let idx = batches(4096);
    let mut out = vec![0u8; BATCH * W];
    let mut sink = 0u64;
    println!(
        "{name}: {W}-byte records, {} shards, batches of {BATCH}",
        shards.len()
    );
    // Between calls, what loaderx-bench's harness did until now: the
    // logical bytes of the batch summed from the workload's record offsets
    // (an 8 MB table read at random).
    let offsets: Vec<usize> = (0..=RECORDS).map(|i| i * W).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut bytes = 0usize;
    for round in 0..2 {
        let a = time(min, &idx, |b| {
            let v = dyn_d.gather_bytes(b)?;
            sink = sink.wrapping_add(v.len() as u64);
            Ok(())
        })?;
        let b = time(min, &idx, |b| {
            dyn_d.gather_into(b, &mut out)?;
            sink = sink.wrapping_add(u64::from(out[0]));
            Ok(())
        })?;
        let c = time(min, &idx, |b| {
            let mut v = Vec::with_capacity(b.len() * W);
            for &i in b {
                let at = i as usize * W;
                v.extend_from_slice(&flat[at..at + W]);
            }
            sink = sink.wrapping_add(v.len() as u64);
            Ok(())
        })?;
        let e = time(min, &idx, |b| {
            for (&i, o) in b.iter().zip(out.chunks_exact_mut(W)) {
                let at = i as usize * W;
                o.copy_from_slice(&flat[at..at + W]);
            }
            sink = sink.wrapping_add(u64::from(out[0]));
            Ok(())
        })?;
        let s: Vec<&[u8]> = shards.iter().map(|m| &m[..]).collect();
        let f = time(min, &idx, |b| {
            for (&i, o) in b.iter().zip(out.chunks_exact_mut(W)) {
                let at = (i >> shift) as usize * W;
                o.copy_from_slice(&s[(i & mask) as usize][at..at + W]);
            }
            sink = sink.wrapping_add(u64::from(out[0]));
            Ok(())
        })?;
        let g = time(min, &idx, |b| {
            let v = d.gather(b)?;
            sink = sink.wrapping_add(v.len() as u64);
            Ok(())
        })?;
        let mut fresh = |b: &[u64]| {
            let v = dyn_d.gather_bytes(b)?;
            sink = sink.wrapping_add(v.len() as u64);
            Ok(())
        };
        let h = per_call(min, &mut seed, &mut fresh, |_| {})?;
        let p = per_call(min, &mut seed, &mut fresh, |b| {
            bytes += b
                .iter()
                .map(|&i| offsets[i as usize + 1] - offsets[i as usize])
                .sum::<usize>();
        })?;
        println!(
            "  round {round}: polluted {p:6.2} ns | timed per call {h:6.2} ns | gather_bytes {a:6.2} ns | gather_into {b:6.2} | Dense<T>::gather {g:6.2} | \
             flat extend {c:6.2} | flat fixed copy {e:6.2} | shards fixed copy {f:6.2}"
        );
    }
    std::hint::black_box((sink, bytes));
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let tmp;
    let dir = match std::env::args_os().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let dir = dir.join("small_gather");
    std::fs::create_dir_all(&dir)?;
    let secs: f64 = std::env::var("LOADERX_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let min = Duration::from_secs_f64(secs);
    rows::<u8, 1>(&dir, "u8", |i| (i * 31 % 251) as u8, min)?;
    rows::<i64, 8>(&dir, "i64", |i| i as i64 * 7919, min)?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
