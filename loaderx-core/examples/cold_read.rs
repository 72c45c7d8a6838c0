//! Reads a raw Dense store through the `DataLoader` in each read mode, for
//! a fixed time, and prints records/s and MiB/s: a quick look at the cold
//! read path (the `cold` benchmark section is the real measurement).
//!
//! ```text
//! cargo run --release -p loaderx-core --example cold_read -- \
//!     PATH WIDTH RECORDS BATCH SECONDS [MODES] [--drop] [--workers N] [--prefetch-bytes N] [--windowed]
//! ```
//!
//! Creates the store of `RECORDS` records of `u8[WIDTH]` at `PATH` when it
//! does not exist. `MODES` is a comma list of `mapped`, `direct`, `auto`
//! (default all three). With `--drop` (as root) the page cache is dropped
//! before each mode: the store is read cold. `--windowed` draws batches in
//! the windowed order for slow media (`SamplerMode::windowed(WIDTH)`:
//! blocks of about 4 MiB, windows of 16 blocks) instead of IID.

use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, ReadMode, SamplerMode};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().any(|a| a == name);
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let pos: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            !a.starts_with("--")
                && (*i == 0 || !matches!(args[i - 1].as_str(), "--workers" | "--prefetch-bytes"))
        })
        .map(|(_, a)| a)
        .collect();
    if pos.len() < 5 {
        eprintln!(
            "usage: cold_read PATH WIDTH RECORDS BATCH SECONDS [MODES] [--drop] [--workers N] [--prefetch-bytes N] [--windowed]"
        );
        std::process::exit(2);
    }
    let path = Path::new(pos[0]);
    let width: usize = pos[1].parse()?;
    let records: u64 = pos[2].parse()?;
    let batch: usize = pos[3].parse()?;
    let secs: f64 = pos[4].parse()?;
    let modes = pos.get(5).map_or("mapped,direct,auto", |s| s.as_str());
    if !path.exists() {
        create(path, width, records)?;
    }
    for mode in modes.split(',') {
        let read_mode = match mode {
            "mapped" => ReadMode::Mapped,
            "direct" => ReadMode::Direct,
            _ => ReadMode::Auto,
        };
        if flag("--drop") {
            std::fs::write("/proc/sys/vm/drop_caches", "3")?;
        }
        let store = Dense::<u8>::open(path)?;
        let mut b = DataLoader::builder()
            .stream("x", store)
            .batch_size(batch)
            .mode(if flag("--windowed") {
                SamplerMode::windowed(width as u64)
            } else {
                SamplerMode::Iid
            })
            .seed(7)
            .read_mode(read_mode);
        if let Some(w) = opt("--workers") {
            b = b.workers(w.parse()?);
        }
        if let Some(p) = opt("--prefetch-bytes") {
            b = b.prefetch_bytes(p.parse()?);
        }
        let mut loader = b.build()?;
        let t = Instant::now();
        let mut n = 0u64;
        for batch in loader.by_ref() {
            n += batch?.len() as u64;
            if t.elapsed() > Duration::from_secs_f64(secs) {
                break;
            }
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "{mode:>6}: {:>9.0} records/s {:>8.1} MiB/s ({n} records in {s:.1} s; \
             look-ahead asked for {} MiB)",
            n as f64 / s,
            n as f64 * width as f64 / s / (1 << 20) as f64,
            loader.stats().prefetched_bytes >> 20
        );
    }
    Ok(())
}

/// Writes `records` records of `u8[width]` (distinct bytes) in chunks.
fn create(path: &Path, width: usize, records: u64) -> Result<(), Box<dyn std::error::Error>> {
    let mut w = DenseWriter::<u8>::create(path, &[width], Codec::Raw)?;
    let chunk = (64 << 20) / width;
    let mut done = 0u64;
    while done < records {
        let n = chunk.min((records - done) as usize);
        let bytes: Vec<u8> = (0..n * width)
            .map(|k| (k as u64 + done * width as u64).wrapping_mul(2_654_435_761) as u8)
            .collect();
        w.append_slice(&bytes, n)?;
        done += n as u64;
    }
    w.close()?;
    Ok(())
}
