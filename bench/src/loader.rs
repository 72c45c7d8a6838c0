//! The loader end to end (sample, gather, identity transform, hand over the
//! batch to the consumer), over one stream or two (image + label): this
//! crate's `DataLoader`, burn's
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

#[cfg(feature = "burn")]
use burn::data::dataloader::DataLoaderBuilder;
#[cfg(feature = "burn")]
use burn::data::dataloader::batcher::Batcher;
#[cfg(feature = "burn")]
use burn::data::dataset::InMemDataset;
#[cfg(feature = "burn")]
use burn::tensor::Device;
use loaderx_core::{DataLoader, SamplerMode, Store};
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
    /// Ours only: one thread gathering a batch of every stream straight
    /// into reused buffers, no loader, microseconds per batch.
    pub gather_us: Option<f64>,
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

/// True when the suite was built with the burn peer (feature `burn`).
pub const HAS_BURN: bool = cfg!(feature = "burn");

/// Concatenates burn items into one host buffer: the identity hand-over.
#[cfg(feature = "burn")]
#[derive(Clone)]
struct Concat;

#[cfg(feature = "burn")]
impl Batcher<Vec<u8>, Vec<u8>> for Concat {
    fn batch(&self, items: Vec<Vec<u8>>, _device: &Device) -> Vec<u8> {
        items.concat()
    }
}

/// Concatenates burn's (image, label) items into two host buffers.
#[cfg(feature = "burn")]
#[derive(Clone)]
struct ConcatPairs;

#[cfg(feature = "burn")]
impl Batcher<(Vec<u8>, Vec<u8>), (Vec<u8>, Vec<u8>)> for ConcatPairs {
    fn batch(&self, items: Vec<(Vec<u8>, Vec<u8>)>, _device: &Device) -> (Vec<u8>, Vec<u8>) {
        let (x, y): (Vec<_>, Vec<_>) = items.into_iter().unzip();
        (x.concat(), y.concat())
    }
}

/// Batches burn's `DataLoaderBuilder` delivers per second over `items`
/// (with `WARMUP` batches untimed first).
#[cfg(feature = "burn")]
fn time_burn<I, O, B>(items: Vec<I>, batcher: B, c: LoaderConfig) -> (u64, f64)
where
    I: Clone + Send + Sync + std::fmt::Debug + 'static,
    O: Send + Clone + std::fmt::Debug + 'static,
    B: Batcher<I, O> + Clone + Send + Sync + 'static,
{
    let loader = DataLoaderBuilder::new(batcher)
        .batch_size(c.batch)
        .shuffle(7)
        .num_workers(c.workers)
        .build(InMemDataset::new(items));
    let mut n = 0u64;
    let mut warm = 0;
    let mut started = Instant::now();
    loop {
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
                return (n, started.elapsed().as_secs_f64());
            }
        }
    }
}

/// Untimed batches before a loader's clock starts.
const WARMUP: usize = 5;

/// Every record of a store, one `Vec` each (burn's in-memory items).
#[cfg(feature = "burn")]
fn records_of(store: &Store) -> Result<Vec<Vec<u8>>> {
    let all: Vec<u64> = (0..store.len()).collect();
    Ok(match store {
        Store::Dense(d) => {
            let rb = d.record_bytes();
            let bytes = d.gather_bytes(&all)?;
            bytes.chunks_exact(rb).map(<[u8]>::to_vec).collect()
        }
        Store::Ragged(r) => {
            let batch = r.gather(&all)?;
            (0..batch.len()).map(|k| batch.bytes(k).to_vec()).collect()
        }
    })
}

/// Runs in the child: contender `which` (`ours`, `ours-packed`: Ragged
/// streams gathered packed, or `burn`) over the store at `store` (and
/// `label`, a second stream); prints one JSON line.
pub fn child(which: &str, store: &Path, label: Option<&Path>, c: LoaderConfig) -> Result<()> {
    let rss = RssSampler::start();
    let (batches, seconds, gather_us) = match which {
        "ours" | "ours-packed" => {
            let x = Store::open(store)?;
            // A Dense batch's exact size; any Ragged batch holds more than 0.
            let expect = match &x {
                Store::Dense(d) => c.batch * d.record_bytes(),
                Store::Ragged(_) => 0,
            };
            let mut streams = vec![x];
            if let Some(label) = label {
                streams.push(Store::open(label)?);
            }
            let gather_us = Some(gather_only(&streams, which == "ours-packed", c));
            let mut builder = DataLoader::builder();
            for (k, s) in streams.into_iter().enumerate() {
                builder = builder.stream(if k == 0 { "x" } else { "y" }, s);
            }
            let mut loader = builder
                .batch_size(c.batch)
                .mode(SamplerMode::Iid)
                .seed(7)
                .workers(c.workers)
                .prefetch(c.prefetch)
                .packed(which == "ours-packed")
                .build()?;
            let mut take = || -> Result<usize> {
                let batch = loader.next().ok_or("loader ended")??;
                let column = batch.column("x").ok_or("no column x")?;
                Ok(std::hint::black_box(column.bytes()).len())
            };
            for _ in 0..WARMUP {
                let got = take()?;
                if got == 0 || (expect > 0 && got != expect) {
                    return Err(format!("a batch of {got} bytes, want {expect}").into());
                }
            }
            let started = Instant::now();
            let mut n = 0u64;
            while started.elapsed() < c.min {
                take()?;
                n += 1;
            }
            (n, started.elapsed().as_secs_f64(), gather_us)
        }
        #[cfg(feature = "burn")]
        "burn" => {
            let images = records_of(&Store::open(store)?)?;
            let (n, seconds) = match label {
                None => time_burn(images, Concat, c),
                Some(label) => {
                    let labels = records_of(&Store::open(label)?)?;
                    time_burn(images.into_iter().zip(labels).collect(), ConcatPairs, c)
                }
            };
            (n, seconds, None)
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
            "gather_us": gather_us,
        })
    );
    Ok(())
}

/// Microseconds one thread takes to gather a batch of every stream at the
/// same IID indices into buffers it reuses (Ragged ones in segments, or
/// packed): the gathers alone, no loader.
fn gather_only(streams: &[Store], packed: bool, c: LoaderConfig) -> f64 {
    let n = streams.first().map_or(0, |s| s.len() as usize);
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); streams.len()];
    let stats = crate::timing::time_gather(
        n,
        c.batch,
        7,
        c.min / 4,
        |idx| {
            for (s, buf) in streams.iter().zip(bufs.iter_mut()) {
                let ok = match s {
                    Store::Dense(d) => {
                        buf.resize(c.batch * d.record_bytes(), 0);
                        d.gather_into(idx, buf).is_ok()
                    }
                    Store::Ragged(r) => r.plan_gather(idx).is_ok_and(|plan| {
                        let len = if packed {
                            plan.packed_len()
                        } else {
                            plan.len()
                        };
                        buf.resize(len, 0);
                        if packed {
                            r.gather_planned_packed(&plan, buf).is_ok()
                        } else {
                            r.gather_planned(&plan, buf).is_ok()
                        }
                    }),
                };
                std::hint::black_box(ok);
            }
        },
        |_| 0,
    );
    stats.seconds * 1e6 / stats.calls as f64
}

fn parse(v: &serde_json::Value) -> Result<LoaderRun> {
    Ok(LoaderRun {
        batches_per_s: crate::python::num(v, "batches_per_s")?,
        peak_anon: crate::python::num(v, "peak_rss_anon_bytes")? as u64,
        vm_hwm: crate::python::num(v, "vm_hwm_bytes")? as u64,
        gather_us: v.get("gather_us").and_then(serde_json::Value::as_f64),
    })
}

/// Runs contender `which` in a child process of this binary, over `store`
/// (and `label`, a second stream).
pub fn run_child(
    which: &str,
    store: &Path,
    label: Option<&Path>,
    c: LoaderConfig,
) -> Result<LoaderRun> {
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.args(["loader-child", which]).arg(store).args([
        c.batch.to_string(),
        c.workers.to_string(),
        c.prefetch.to_string(),
        c.min.as_secs_f64().to_string(),
    ]);
    if let Some(label) = label {
        cmd.arg("--label").arg(label);
    }
    let out = cmd.output()?;
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

/// Runs the Python loaderx `DataLoader` over `store` (and `label`, a second stream).
pub fn run_python(
    python: &Path,
    store: &Path,
    label: Option<&Path>,
    c: LoaderConfig,
) -> Result<LoaderRun> {
    let out = crate::python::run(python, &loader_args(store, label, c))?;
    parse(out.first().ok_or("peers.py loader printed nothing")?)
}

/// The `loader` command line of the Python peers: streams `x` (`store`)
/// and `y` (`label`), batch, workers, prefetch, seed 7 and the time.
pub(crate) fn loader_args(store: &Path, label: Option<&Path>, c: LoaderConfig) -> Vec<String> {
    let mut args = vec![
        "loader".to_string(),
        "--stream".into(),
        format!("x={}", store.display()),
    ];
    if let Some(label) = label {
        args.extend(["--stream".into(), format!("y={}", label.display())]);
    }
    args.extend([
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
    ]);
    args
}

/// Runs Python loaderx `release`'s own `Loader` (`python/peer_2_8_19.py
/// loader`, with `PYTHONPATH=releases/<release>`) over `store`, which must
/// be of that release's format generation.
pub fn run_python_release(
    python: &Path,
    releases: &Path,
    release: &str,
    store: &Path,
    c: LoaderConfig,
) -> Result<LoaderRun> {
    let out = crate::python::run_release(python, releases, release, &loader_args(store, None, c))?;
    parse(out.first().ok_or("peer_2_8_19.py loader printed nothing")?)
}
