//! What the loader's flight recorder costs: the fastest loader workload
//! (tiny records, warm: the bench's Fashion-MNIST `u8[28,28]`, batch 256,
//! `Iid`, an identity transform, the consumer only taking batches) with
//! stage recording on and off
//! ([`record_stages`](loaderx_core::DataLoaderBuilder::record_stages)),
//! in alternating rounds: the process's CPU time per batch delivered
//! (every thread's: what the recording adds to the work, which a shared
//! machine's wall-clock rates are too noisy to show), the best round of
//! each and the median.
//!
//! ```sh
//! cargo run --release -p loaderx-core --example recorder_overhead [SECONDS_PER_ROUND] [ROUNDS]
//! ```

use std::time::{Duration, Instant};

use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, SamplerMode, Stream};

/// The process's CPU time (every thread's, user and system), nanoseconds.
fn cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map_or(Ok(0.25), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(31), |s| s.parse())?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("x");
    let n = 60_000usize;
    let mut w = DenseWriter::<u8>::create(&path, &[28, 28], Codec::Raw)?;
    let bytes: Vec<u8> = (0..n * 784).map(|k| (k * 31 + k / 784) as u8).collect();
    w.append_slice(&bytes, n)?;
    w.close()?;
    let store = Stream::from(Dense::<u8>::open(&path)?);
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
        let cpu = cpu_ns();
        let mut batches = 0u64;
        while started.elapsed() < Duration::from_secs_f64(seconds) {
            let b = loader.next().ok_or("ended")??;
            std::hint::black_box(b.column("x").map(|c| c.bytes().len()));
            batches += 1;
        }
        // The process's CPU time per batch: what the recording adds to
        // the work, whatever else the machine runs meanwhile.
        let rate = (cpu_ns() - cpu) as f64 / 1e3 / batches as f64;
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
        // The best round of each is the least disturbed by other work on
        // the machine; the median is shown beside it.
        on.sort_by(f64::total_cmp);
        off.sort_by(f64::total_cmp);
        let (on_best, off_best) = (on[0], off[0]);
        let (on_med, off_med) = (on[on.len() / 2], off[off.len() / 2]);
        println!(
            "workers {workers}: CPU per batch, best round: recording on {on_best:.2} µs, off \
             {off_best:.2} µs ({:+.2} %); median: on {on_med:.2} µs, off {off_med:.2} µs ({:+.2} %)",
            100.0 * (on_best / off_best - 1.0),
            100.0 * (on_med / off_med - 1.0),
        );
    }
    Ok(())
}
