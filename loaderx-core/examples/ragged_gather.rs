//! Throughput of Ragged gathers on token-like data (workload (d)): 200 000
//! records of `u32` tokens, lengths 16 to 511, in a `raw` and a `zstd` store;
//! random batches of 256 gathered
//!
//! - (a) with [`DynRagged::gather`], on the calling thread (which fans out
//!   over rayon's pool), and
//! - (b) through a [`DataLoader`] with that one Ragged stream, 2 workers,
//!   prefetch 4 and no transform.
//!
//! Each measurement runs for at least 2 s and prints records per second of
//! wall time and, less sensitive to other load on the machine, per second
//! of this process's CPU time (user and system, all threads).
//! Run: `cargo run -p loaderx-core --release --example ragged_gather`
//! (`LOADERX_SECONDS` sets the seconds per measurement, `LOADERX_RECORDS`
//! the store size).

use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::{Codec, DataLoader, DynRagged, RaggedWriter, SamplerMode};

const BATCH: usize = 256;

fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Writes `n` token records, lengths uniform in 16..512, tokens drawn from a
/// skewed 32 000-word vocabulary (so zstd has something to do).
fn write_store(path: &Path, n: usize, codec: Codec) -> Result<(), Box<dyn Error>> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut w = RaggedWriter::<u32>::create(path, 1, codec)?;
    let mut chunk: Vec<Vec<u32>> = Vec::with_capacity(4096);
    for i in 0..n {
        let len = 16 + (xorshift(&mut seed) % 496) as usize;
        let rec: Vec<u32> = (0..len)
            .map(|_| {
                let r = xorshift(&mut seed);
                // Small ids are far more frequent, as in real token streams.
                ((r % 32_000) * ((r >> 32) % 32_000) / 32_000) as u32
            })
            .collect();
        chunk.push(rec);
        if chunk.len() == 4096 || i + 1 == n {
            w.append(&chunk)?;
            chunk.clear();
        }
    }
    w.close()?;
    Ok(())
}

/// CPU time this process used so far (user and system, all threads).
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is valid memory for one `rusage`, which `getrusage`
    // fills; all-zero bytes are a valid `rusage` had it failed.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Records per second of wall time and of CPU time, since `start`.
struct Rate {
    wall: f64,
    cpu: f64,
}

fn rate(records: usize, start: (Instant, Duration)) -> Rate {
    Rate {
        wall: records as f64 / start.0.elapsed().as_secs_f64(),
        cpu: records as f64 / (cpu_time() - start.1).as_secs_f64(),
    }
}

fn seconds() -> Duration {
    let s = std::env::var("LOADERX_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(2.0);
    Duration::from_secs_f64(s)
}

/// (a): random batches through `DynRagged::gather`; records per second.
fn direct(store: &DynRagged, budget: Duration) -> Result<Rate, Box<dyn Error>> {
    let n = store.len();
    let mut seed = 42u64;
    let mut idx = vec![0u64; BATCH];
    let mut records = 0usize;
    let mut bytes = 0usize;
    let start = (Instant::now(), cpu_time());
    while start.0.elapsed() < budget {
        for i in idx.iter_mut() {
            *i = xorshift(&mut seed) % n;
        }
        let batch = store.gather(&idx)?;
        records += batch.len();
        bytes += batch.bytes(batch.len() - 1).len();
    }
    std::hint::black_box(bytes);
    Ok(rate(records, start))
}

/// (b): a loader with one Ragged stream, 2 workers, prefetch 4, no
/// transform; records per second.
fn loader(store: DynRagged, budget: Duration) -> Result<Rate, Box<dyn Error>> {
    let mut loader = DataLoader::builder()
        .stream("tokens", store)
        .batch_size(BATCH)
        .mode(SamplerMode::Iid)
        .seed(7)
        .workers(2)
        .prefetch(4)
        .build()?;
    let mut records = 0usize;
    let start = (Instant::now(), cpu_time());
    for batch in loader.by_ref() {
        let batch = batch?;
        records += batch.len();
        std::hint::black_box(batch.columns()[0].bytes().len());
        if start.0.elapsed() >= budget {
            break;
        }
    }
    // Counted before the loader is dropped, which stops its workers.
    let rate = rate(records, start);
    drop(loader);
    Ok(rate)
}

fn main() -> Result<(), Box<dyn Error>> {
    let n: usize = std::env::var("LOADERX_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let budget = seconds();
    let dir = tempfile::tempdir()?;
    println!("{n} u32 token records, lengths 16..512, batches of {BATCH}");
    for codec in [Codec::Raw, Codec::Zstd] {
        let path = dir.path().join(codec.name());
        write_store(&path, n, codec)?;
        let store = DynRagged::open(&path)?;
        // Warm the page cache and the store's first-use state.
        let _ = direct(&store, Duration::from_millis(300))?;
        let a = direct(&store, budget)?;
        let b = loader(DynRagged::open(&path)?, budget)?;
        println!(
            "{:<5} (a) DynRagged::gather {:>9.0} records/s ({:>9.0}/CPU-s)   \
             (b) DataLoader, 2 workers {:>9.0} records/s ({:>9.0}/CPU-s)   ({:.0} MB stored)",
            codec.name(),
            a.wall,
            a.cpu,
            b.wall,
            b.cpu,
            store.stored_bytes() as f64 / 1e6
        );
    }
    Ok(())
}
