//! The `remote` section: workloads (b) and (d) read from the local store,
//! and from an S3-compatible server on loopback (moto, from the Python venv)
//! with the cache disabled, cold with a cache large enough for the store,
//! and warm from that cache (memory, then the directory alone).
//!
//! Self-contained but for `crate::report` and `crate::workload`, so that
//! `loaderx-tests`'s `remote_bench` example runs the same section without
//! building the whole suite (whose burn peer takes long to build).

use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::{
    Codec, CreateOptions, DynDense, DynDenseWriter, DynRagged, DynRaggedWriter, RemoteOptions,
    RemoteStats,
};
use loaderx_core::{Sampler, SamplerMode};
use loaderx_tests::S3Server;

use crate::report::{Table, Target, num, ratio};
use crate::workload::Workload;

/// Any error of the section.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
/// The section's result.
pub type Result<T> = std::result::Result<T, Error>;

/// Writes `w` as a raw store at the new path `path`.
fn write_raw(w: &Workload, path: &Path) -> Result<()> {
    // The 2.4.6 generation, as the other bench stores (the Python peer's).
    let opts = CreateOptions::new(Codec::Raw).generation(loaderx_core::Generation::V2_4_6);
    match &w.dense {
        Some(shape) => {
            let mut s = DynDenseWriter::create(path, w.dtype, shape, &opts)?;
            s.append_bytes(&w.flat, w.len())?;
            s.close()?;
        }
        None => {
            let mut s = DynRaggedWriter::create(path, w.dtype, w.ndim, &opts)?;
            for chunk in (0..w.len()).collect::<Vec<_>>().chunks(8192) {
                s.append_bytes(chunk.iter().map(|&i| (w.shape(i), w.record(i))))?;
            }
            s.close()?;
        }
    }
    Ok(())
}

/// A store opened one way, gathering one batch at a time.
enum Reader {
    Dense(DynDense),
    Ragged(DynRagged),
}

impl Reader {
    fn open(w: &Workload, at: &str, o: Option<&RemoteOptions>) -> Result<Reader> {
        Ok(match (w.dense.is_some(), o) {
            (true, None) => Reader::Dense(DynDense::open(at)?),
            (true, Some(o)) => Reader::Dense(DynDense::open_url(at, o)?),
            (false, None) => Reader::Ragged(DynRagged::open(at)?),
            (false, Some(o)) => Reader::Ragged(DynRagged::open_url(at, o)?),
        })
    }

    /// Gathers `idx`; returns the bytes delivered.
    fn gather(&self, idx: &[u64]) -> Result<u64> {
        Ok(match self {
            Reader::Dense(s) => s.gather_bytes(idx)?.len() as u64,
            Reader::Ragged(s) => {
                let b = s.gather(idx)?;
                (0..b.len()).map(|k| b.bytes(k).len() as u64).sum()
            }
        })
    }

    fn stats(&self) -> RemoteStats {
        match self {
            Reader::Dense(s) => s.remote_stats(),
            Reader::Ragged(s) => s.remote_stats(),
        }
        .unwrap_or_default()
    }
}

/// One timed pass: records/s, requests per batch, bytes fetched, bytes delivered.
struct Pass {
    records_s: f64,
    requests_per_batch: f64,
    fetched: u64,
    delivered: u64,
}

/// How a pass over the epoch's batches is timed.
#[derive(Clone, Copy, PartialEq)]
enum Timing {
    /// Stop once `min` has passed, even mid-epoch (the slow uncached reads).
    Partial,
    /// Exactly one whole epoch (the cold pass, whose fetched bytes count).
    Once,
    /// Whole epochs again and again until `min` has passed (local and warm
    /// reads: one epoch of (b) takes tens of milliseconds).
    Repeat,
}

/// Reads `batches` (one shuffled epoch) through `r` as `timing` says.
fn pass(r: &Reader, batches: &[Vec<u64>], min: Duration, timing: Timing) -> Result<Pass> {
    let before = r.stats();
    let start = Instant::now();
    let (mut records, mut delivered, mut calls) = (0u64, 0u64, 0u64);
    'epochs: loop {
        for idx in batches {
            delivered += r.gather(idx)?;
            records += idx.len() as u64;
            calls += 1;
            if timing == Timing::Partial && start.elapsed() >= min {
                break 'epochs;
            }
        }
        if timing != Timing::Repeat || start.elapsed() >= min {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let after = r.stats();
    Ok(Pass {
        records_s: records as f64 / secs,
        requests_per_batch: (after.requests - before.requests) as f64 / calls.max(1) as f64,
        fetched: after.bytes_fetched - before.bytes_fetched,
        delivered,
    })
}

/// Runs the section over `workloads`, writing under `root`; `progress`
/// hears what is being measured. Without `python` (no LOADERX_PYTHON to
/// start the server with) it says so and measures nothing.
pub fn section(
    python: bool,
    workloads: &[Workload],
    root: &Path,
    min: Duration,
    targets: &mut Vec<Target>,
    progress: &dyn Fn(String),
) -> Result<String> {
    let mut out = String::from("#### Object storage (S3 on loopback)\n\n");
    if !python {
        out.push_str("Not run: needs LOADERX_PYTHON (moto starts the S3 server).\n\n");
        return Ok(out);
    }
    // `S3Server` takes the interpreter from LOADERX_PYTHON.
    let server = S3Server::start().ok_or("LOADERX_SKIP_PYTHON is set")?;
    server.create_bucket("bench");
    let base = server
        .options()
        .retries(4)
        .timeouts(Duration::from_secs(60), Duration::from_secs(5));
    let mut t = Table::new(&[
        "workload",
        "read from",
        "records/s>",
        "vs local>",
        "requests/batch>",
        "fetched/delivered>",
        "fetched/stored>",
    ]);
    for w in workloads {
        progress(format!("remote: {}: write + push", w.key));
        let dir = root.join(format!("remote-{}", w.key));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let local = dir.join("store");
        write_raw(w, &local)?;
        let url = format!("s3://bench/{}", w.key);
        loaderx_core::push(&local, &url, &base)?;
        let stored = loaderx_core::Store::open(&local)?.stored_bytes();
        let mut sampler = Sampler::new(w.len() as u64, w.batch, SamplerMode::Cyclic, 5)?;
        let epoch: Vec<Vec<u64>> = (0..sampler.steps_per_epoch())
            .map(|_| sampler.next_batch().to_vec())
            .collect();
        let local_path = local.to_string_lossy().into_owned();
        progress(format!("remote: {}: local", w.key));
        let l = pass(
            &Reader::open(w, &local_path, None)?,
            &epoch,
            min,
            Timing::Repeat,
        )?;
        let mut row = |from: &str, p: &Pass, whole: bool| {
            let remote = !from.starts_with("local");
            t.row(vec![
                w.title.split(" × ").next().unwrap_or(&w.title).to_string(),
                from.to_string(),
                num(Some(p.records_s), 0),
                ratio(Some(p.records_s), Some(l.records_s)),
                if remote {
                    format!("{:.1}", p.requests_per_batch)
                } else {
                    "-".into()
                },
                if remote {
                    format!("{:.2}", p.fetched as f64 / p.delivered.max(1) as f64)
                } else {
                    "-".into()
                },
                if whole && remote {
                    format!("{:.2}", p.fetched as f64 / stored.max(1) as f64)
                } else {
                    "-".into()
                },
            ]);
        };
        row("local store (mmap)", &l, true);
        progress(format!("remote: {}: S3, no cache", w.key));
        let nc = Reader::open(w, &url, Some(&base.clone().no_cache()))?;
        let p = pass(&nc, &epoch, min, Timing::Partial)?;
        row("S3, cache disabled", &p, false);
        if w.key == "d" {
            targets.push(Target {
                what: "(d) S3 without cache: delivered / fetched bytes (fetched ≤ 2× delivered)"
                    .into(),
                wanted: 0.5,
                measured: Some(p.delivered as f64 / p.fetched.max(1) as f64),
            });
        }
        let cache = dir.join("cache");
        let cached = base
            .clone()
            .cache_dir(Some(cache.clone()))
            .memory_cache_bytes(2 * stored + (64 << 20));
        progress(format!("remote: {}: S3, cold", w.key));
        let c = Reader::open(w, &url, Some(&cached))?;
        let cold = pass(&c, &epoch, min, Timing::Once)?;
        row("S3 cold, cache ≥ store", &cold, true);
        targets.push(Target {
            what: format!(
                "({}) S3 cold pass: stored / fetched bytes (fetched ≤ 1.2× the store)",
                w.key
            ),
            wanted: 1.0 / 1.2,
            measured: Some(stored as f64 / cold.fetched.max(1) as f64),
        });
        progress(format!("remote: {}: S3, warm", w.key));
        let warm = pass(&c, &epoch, min, Timing::Repeat)?;
        row("S3 warm, memory cache", &warm, true);
        targets.push(Target {
            what: format!("({}) S3 warm from the cache vs local records/s", w.key),
            wanted: 0.8,
            measured: Some(warm.records_s / l.records_s),
        });
        let d = Reader::open(w, &url, Some(&cached.clone().memory_cache_bytes(0)))?;
        let disk = pass(&d, &epoch, min, Timing::Repeat)?;
        row("S3 warm, cache directory only", &disk, true);
        targets.push(Target {
            what: format!(
                "({}) S3 warm from the cache directory only vs local records/s",
                w.key
            ),
            wanted: 0.8,
            measured: Some(disk.records_s / l.records_s),
        });
        drop((c, d, nc));
        std::fs::remove_dir_all(&dir)?;
    }
    out.push_str(&t.render());
    out.push_str(
        "\nrecords/s over shuffled epochs of B-record batches: the local and warm rows repeat \
         the epoch for the timing, the cold row reads it once, the no-cache row as much of it \
         as fits the timing; requests/batch counts ranged GETs; fetched/delivered is bytes \
         fetched per byte returned (raw stores: stored = logical); fetched/stored is bytes \
         fetched over the pass per stored byte. The server is moto (Python) on 127.0.0.1.\n\n",
    );
    Ok(out)
}
