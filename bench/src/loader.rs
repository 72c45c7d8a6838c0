//! The loader end to end (sample, gather, identity transform, hand over the
//! batch to the consumer): this crate's `DataLoader`, burn's
//! `DataLoaderBuilder` over an `InMemDataset` (burn's own fastest path: the
//! records already in memory) and Python loaderx's `DataLoader`.
//!
//! Each contender runs in its own child process (this binary re-executed
//! with `loader-child`, or `peers.py loader`), so its peak memory is its own:
//! a thread samples `RssAnon` in `/proc/self/status` every 5 ms, and the
//! child also reports `VmHWM` (which counts the store's file-backed pages).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::InMemDataset;
use burn::tensor::Device;
use loaderx_core::sampler::SamplerMode;
use loaderx_core::{DataLoader, DynDense};
use serde_json::json;

use crate::stores::Result;

/// What one loader run measured.
#[derive(Debug, Clone, Copy)]
pub struct LoaderRun {
    /// Batches delivered per second.
    pub batches_per_s: f64,
    /// Peak anonymous resident memory, bytes.
    pub peak_anon: u64,
    /// Peak resident memory incl. file-backed pages, bytes.
    pub vm_hwm: u64,
}

/// One field (in kB) of `/proc/self/status`, in bytes.
fn status_bytes(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| {
            rest.trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .map_or(0, |kb: u64| kb * 1024)
}

/// Samples the peak of `RssAnon` until dropped.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start() -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(status_bytes("RssAnon")));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peak));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(status_bytes("RssAnon"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        RssSampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// Settings shared by every contender.
#[derive(Debug, Clone, Copy)]
pub struct LoaderConfig {
    /// Records per batch.
    pub batch: usize,
    /// Worker threads.
    pub workers: usize,
    /// Batches prefetched beyond the workers'.
    pub prefetch: usize,
    /// Minimum timed run.
    pub min: Duration,
}

/// Concatenates burn items into one host buffer: the identity hand-over.
#[derive(Clone)]
struct Concat;

impl Batcher<Vec<u8>, Vec<u8>> for Concat {
    fn batch(&self, items: Vec<Vec<u8>>, _device: &Device) -> Vec<u8> {
        items.concat()
    }
}

/// Runs in the child: contender `which` (`ours` or `burn`) over the Dense
/// store at `store`; prints one JSON line.
pub fn child(which: &str, store: &Path, c: LoaderConfig) -> Result<()> {
    const WARMUP: usize = 5;
    let rss = RssSampler::start();
    let (batches, seconds) = match which {
        "ours" => {
            let x = DynDense::open(store)?;
            let expect = c.batch * x.record_bytes();
            let mut loader = DataLoader::builder()
                .stream("x", x)
                .batch_size(c.batch)
                .mode(SamplerMode::Iid)
                .seed(7)
                .workers(c.workers)
                .prefetch(c.prefetch)
                .build()?;
            let mut take = || -> Result<usize> {
                let batch = loader.next().ok_or("loader ended")??;
                let column = batch.column("x").ok_or("no column x")?;
                Ok(std::hint::black_box(column.bytes()).len())
            };
            for _ in 0..WARMUP {
                if take()? != expect {
                    return Err("short batch".into());
                }
            }
            let started = Instant::now();
            let mut n = 0u64;
            while started.elapsed() < c.min {
                take()?;
                n += 1;
            }
            (n, started.elapsed().as_secs_f64())
        }
        "burn" => {
            let store = DynDense::open(store)?;
            let rb = store.record_bytes();
            let all = store.gather_bytes(&(0..store.len()).collect::<Vec<_>>())?;
            let items: Vec<Vec<u8>> = all.chunks_exact(rb).map(<[u8]>::to_vec).collect();
            drop(all);
            let loader = DataLoaderBuilder::new(Concat)
                .batch_size(c.batch)
                .shuffle(7)
                .num_workers(c.workers)
                .build(InMemDataset::new(items));
            let mut n = 0u64;
            let mut warm = 0;
            let mut started = Instant::now();
            'epochs: loop {
                for batch in loader.iter() {
                    std::hint::black_box(&batch);
                    if warm < WARMUP {
                        warm += 1;
                        if warm == WARMUP {
                            started = Instant::now();
                        }
                        continue;
                    }
                    n += 1;
                    if started.elapsed() >= c.min {
                        break 'epochs;
                    }
                }
            }
            (n, started.elapsed().as_secs_f64())
        }
        other => return Err(format!("unknown loader contender {other}").into()),
    };
    let peak = rss.finish();
    println!(
        "{}",
        json!({
            "batches_per_s": batches as f64 / seconds,
            "peak_rss_anon_bytes": peak,
            "vm_hwm_bytes": status_bytes("VmHWM"),
        })
    );
    Ok(())
}

fn parse(v: &serde_json::Value) -> Result<LoaderRun> {
    Ok(LoaderRun {
        batches_per_s: crate::python::num(v, "batches_per_s")?,
        peak_anon: crate::python::num(v, "peak_rss_anon_bytes")? as u64,
        vm_hwm: crate::python::num(v, "vm_hwm_bytes")? as u64,
    })
}

/// Runs contender `which` in a child process of this binary.
pub fn run_child(which: &str, store: &Path, c: LoaderConfig) -> Result<LoaderRun> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["loader-child", which])
        .arg(store)
        .args([
            c.batch.to_string(),
            c.workers.to_string(),
            c.prefetch.to_string(),
            c.min.as_secs_f64().to_string(),
        ])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "loader child {which} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .ok_or("loader child printed nothing")?;
    parse(&serde_json::from_str(line)?)
}

/// Runs the Python loaderx `DataLoader` over `store`.
pub fn run_python(python: &Path, store: &Path, c: LoaderConfig) -> Result<LoaderRun> {
    let args = [
        "loader".to_string(),
        "--stream".into(),
        format!("x={}", store.display()),
        "--batch".into(),
        c.batch.to_string(),
        "--workers".into(),
        c.workers.to_string(),
        "--prefetch".into(),
        c.prefetch.to_string(),
        "--seed".into(),
        "7".into(),
        "--min-seconds".into(),
        c.min.as_secs_f64().to_string(),
    ];
    let out = crate::python::run(python, &args)?;
    parse(out.first().ok_or("peers.py loader printed nothing")?)
}
