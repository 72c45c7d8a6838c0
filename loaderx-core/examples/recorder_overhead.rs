//! What the loader's flight recorder costs: the fastest loader workload
//! (tiny records, warm: the bench's Fashion-MNIST `u8[28,28]`, batch 256,
//! `Iid`, an identity transform, the consumer only taking batches) with
//! stage recording on and off
//! ([`record_stages`](loaderx_core::DataLoaderBuilder::record_stages)),
//! in alternating rounds, the median of each.
//!
//! ```sh
//! cargo run --release -p loaderx-core --example recorder_overhead [SECONDS_PER_ROUND] [ROUNDS]
//! ```

use std::time::{Duration, Instant};

use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, SamplerMode};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map_or(Ok(1.0), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(7), |s| s.parse())?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("x");
    let n = 60_000usize;
    let mut w = DenseWriter::<u8>::create(&path, &[28, 28], Codec::Raw)?;
    let bytes: Vec<u8> = (0..n * 784).map(|k| (k * 31 + k / 784) as u8).collect();
    w.append_slice(&bytes, n)?;
    w.close()?;
    let store = Dense::<u8>::open(&path)?;
    let run = |workers: usize, record: bool| -> Result<f64, Box<dyn std::error::Error>> {
        let mut loader = DataLoader::builder()
            .stream("x", store.clone())
            .batch_size(256)
            .mode(SamplerMode::Iid)
            .seed(7)
            .workers(workers)
            .prefetch(4)
            .record_stages(record)
            .build()?;
        // Warm: the pool's buffers, the page cache.
        for b in loader.by_ref().take(50) {
            std::hint::black_box(b?.column("x").map(|c| c.bytes().len()));
        }
        let started = Instant::now();
        let mut batches = 0u64;
        while started.elapsed() < Duration::from_secs_f64(seconds) {
            let b = loader.next().ok_or("ended")??;
            std::hint::black_box(b.column("x").map(|c| c.bytes().len()));
            batches += 1;
        }
        let rate = batches as f64 / started.elapsed().as_secs_f64();
        if record && workers == 2 && std::env::var_os("SHOW_TABLE").is_some() {
            println!("{}", loader.stats());
        }
        Ok(rate)
    };
    for workers in [2usize, 0] {
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which goes first, against drift.
            if round % 2 == 0 {
                on.push(run(workers, true)?);
                off.push(run(workers, false)?);
            } else {
                off.push(run(workers, false)?);
                on.push(run(workers, true)?);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (on_m, off_m) = (median(&mut on), median(&mut off));
        println!(
            "workers {workers}: recording on {on_m:.0} batches/s, off {off_m:.0} batches/s, \
             on/off {:.4} ({:+.2} %); rounds on {:?} off {:?}",
            on_m / off_m,
            100.0 * (on_m / off_m - 1.0),
            on.iter().map(|r| r.round() as u64).collect::<Vec<_>>(),
            off.iter().map(|r| r.round() as u64).collect::<Vec<_>>(),
        );
    }
    Ok(())
}
