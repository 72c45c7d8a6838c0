//! The `stream` section: a Hub-layout parquet corpus (≥ 2 GB) served by
//! the mock Hub (`tests/python/hf_mock_server.py`) behind a throttled link
//! (`tests/python/throttle_proxy.py`), trained on where it lives
//! (`loaderx_convert::lazy`) against `convert hf` + open and against
//! Hugging Face `datasets` streaming on the same link: time to the first
//! batch, epoch 1 and epoch 2 rates, shuffle quality, and exact resume
//! after SIGKILL.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use loaderx_convert::lazy::{OpenOptions, open};
use loaderx_core::lazy::LazyStats;
use loaderx_core::{DataLoader, Dataset, Sampler, SamplerMode, Store, Stream};
use loaderx_tests::ThrottledLink;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::report::{Table, Target, num};
use crate::stores::Result;

/// The section's sizes.
#[derive(Debug, Clone)]
pub struct Config {
    /// Rows of the corpus.
    pub rows: usize,
    /// Parquet files.
    pub files: usize,
    /// Rows of a row group.
    pub group: usize,
    /// The links: (one-way latency ms, Mbit/s); the first carries the
    /// epochs, every one a time to first batch.
    pub links: Vec<(u32, u32)>,
    /// Records per batch.
    pub batch: usize,
    /// Loader workers.
    pub workers: usize,
    /// SIGKILLed runs resumed.
    pub kills: usize,
    /// A python with `datasets`, `aiohttp`, `pyarrow`.
    pub python: PathBuf,
}

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// The corpus under `root`, written once (its arguments name its folder).
fn corpus(cfg: &Config, root: &Path) -> Result<(PathBuf, Vec<String>)> {
    let dir = root.join(format!(
        "stream-corpus-{}-{}-{}",
        cfg.rows, cfg.files, cfg.group
    ));
    let listing = dir.join("listing.json");
    if !listing.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new(&cfg.python)
            .arg(repo_file("bench/python/make_stream_corpus.py"))
            .arg(&dir)
            .arg(cfg.rows.to_string())
            .arg(cfg.files.to_string())
            .arg(cfg.group.to_string())
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "make_stream_corpus.py: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        std::fs::write(&listing, &out.stdout)?;
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&listing)?)?;
    let files = v["files"]
        .as_array()
        .ok_or("listing.json: no files")?
        .iter()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect();
    Ok((dir, files))
}

/// The mock Hub serving `dir`, killed when dropped.
struct Mock {
    child: std::process::Child,
    port: u16,
}

impl Mock {
    fn start(python: &Path, dir: &Path) -> Result<Mock> {
        let mut child = Command::new(python)
            .arg(repo_file("tests/python/hf_mock_server.py"))
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().ok_or("mock stdout")?).read_line(&mut line)?;
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("the mock Hub said {line:?}"))?;
        Ok(Mock { child, port })
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a lazy run measured.
struct Run {
    /// Seconds the open took (footers, the first row group), when timed.
    opened: f64,
    first_batch: f64,
    /// Seconds from the open to the end of each epoch.
    epochs: Vec<f64>,
    /// Epoch 0's records in delivered order.
    order: Vec<u64>,
    stats: Option<LazyStats>,
    records: u64,
    starts: Vec<u64>,
}

/// Runs the loader over `dataset` (opened from `t0` on) for `epochs` passes
/// in `mode`, or to its first batch only with `epochs` 0.
fn run_loader(
    t0: Instant,
    dataset: Dataset,
    mode: SamplerMode,
    batch: usize,
    workers: usize,
    epochs: u64,
) -> Result<Run> {
    let records = dataset.len();
    let starts = dataset.part_starts();
    let streams: Vec<(String, Stream)> = dataset
        .into_streams()
        .into_iter()
        .map(|(n, s)| (n, Stream::from(s)))
        .collect();
    let first = streams[0].1.clone();
    let mut b = DataLoader::builder()
        .batch_size(batch)
        .mode(mode)
        .seed(1)
        .workers(workers);
    if epochs > 0 {
        b = b.epochs(epochs);
    }
    for (name, stream) in streams {
        b = b.stream(name, stream);
    }
    let per_epoch = (records / batch as u64).max(1);
    let mut run = Run {
        opened: 0.0,
        first_batch: 0.0,
        epochs: Vec::new(),
        order: Vec::new(),
        stats: None,
        records,
        starts,
    };
    let steps = if epochs > 0 { usize::MAX } else { 1 };
    for (k, batch) in b.build()?.take(steps).enumerate() {
        let batch = batch?;
        if k == 0 {
            run.first_batch = t0.elapsed().as_secs_f64();
        }
        if (k as u64) < per_epoch {
            run.order.extend_from_slice(batch.indices());
        }
        if (k as u64 + 1).is_multiple_of(per_epoch) {
            run.epochs.push(t0.elapsed().as_secs_f64());
        }
    }
    run.stats = first.store().lazy_stats();
    Ok(run)
}

fn lazy_options(endpoint: &str, hub: &Path, cache: &Path, bytes: u64) -> OpenOptions {
    OpenOptions::new()
        .endpoint(endpoint)
        .hub_cache(hub)
        .cache_dir(cache)
        .cache_bytes(bytes)
}

/// `datasets` streaming's first batch (and, with `records` 0, its epoch)
/// through `endpoint`: (first batch s, records, s, delivered ids).
fn datasets_run(
    cfg: &Config,
    endpoint: &str,
    files: &[String],
    records: usize,
    scratch: &Path,
) -> Result<(f64, u64, f64, Vec<u64>)> {
    let urls: Vec<String> = files
        .iter()
        .map(|f| format!("{endpoint}/datasets/bench/stream/resolve/main/{f}"))
        .collect();
    let list = scratch.join("urls.json");
    std::fs::write(&list, serde_json::to_vec(&urls)?)?;
    let ids = scratch.join("ids.bin");
    let out = Command::new(&cfg.python)
        .arg(repo_file("bench/python/stream_peer.py"))
        .arg(&list)
        .arg(cfg.batch.to_string())
        .arg("1")
        .arg("10000")
        .arg(records.to_string())
        .arg(&ids)
        .env("HF_DATASETS_CACHE", scratch.join("hf-datasets"))
        .env("HF_HOME", scratch.join("hf-home"))
        .output()?;
    if !out.status.success() {
        return Err(format!("stream_peer.py: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(line.lines().last().unwrap_or(""))?;
    let bytes = std::fs::read(&ids)?;
    let order = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    Ok((
        v["first_batch"].as_f64().unwrap_or(f64::NAN),
        v["records"].as_u64().unwrap_or(0),
        v["seconds"].as_f64().unwrap_or(f64::NAN),
        order,
    ))
}

/// Mean |position − record| / n of an order of `0..n` (a uniform
/// permutation gives about 1/3, records in place 0), and the mean number of
/// distinct parts (`starts`) a batch of `batch` consecutive positions draws
/// from.
fn shuffle_quality(order: &[u64], n: u64, starts: &[u64], batch: usize) -> (f64, f64) {
    if order.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let displacement = order
        .iter()
        .enumerate()
        .map(|(t, &r)| (t as f64 - r as f64).abs())
        .sum::<f64>()
        / order.len() as f64
        / n as f64;
    let mut parts = 0usize;
    let mut batches = 0usize;
    for b in order.chunks_exact(batch) {
        let mut p: Vec<usize> = b
            .iter()
            .map(|&r| starts.partition_point(|&s| s <= r) - 1)
            .collect();
        p.sort_unstable();
        p.dedup();
        parts += p.len();
        batches += 1;
    }
    (displacement, parts as f64 / batches.max(1) as f64)
}

/// The order a sampler draws for one epoch.
fn sampler_order(n: u64, batch: usize, mode: SamplerMode, starts: &[u64]) -> Result<Vec<u64>> {
    let s = Sampler::builder(n, batch)
        .mode(mode)
        .parts(starts.to_vec())
        .seed(1)
        .build()?;
    Ok((0..s.steps_per_epoch())
        .flat_map(|k| s.indices(k))
        .collect())
}

/// `loaderx-bench stream-child`: the loader over the parquet files at
/// `location` (a cache at `cache`), steps `start ..start + steps`, one line
/// `STEP SHA256` a batch (indices and every stream's bytes) written and
/// flushed as it arrives.
pub fn child(
    location: &str,
    cache: &Path,
    start: u64,
    steps: u64,
    batch: usize,
    window: u32,
) -> Result<()> {
    let dataset = open(location, &OpenOptions::new().cache_dir(cache))?;
    let names: Vec<String> = dataset
        .stream_names()
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut b = DataLoader::builder()
        .batch_size(batch)
        .mode(SamplerMode::PartWindowed { window })
        .seed(3)
        .workers(2)
        .start_step(start);
    for (name, store) in dataset.into_streams() {
        b = b.stream(name, store);
    }
    let mut out = std::io::stdout().lock();
    for (k, batch) in b.build()?.take(steps as usize).enumerate() {
        let batch = batch?;
        let mut h = Sha256::new();
        for i in batch.indices() {
            h.update(i.to_le_bytes());
        }
        for name in &names {
            h.update(
                batch
                    .column(name)
                    .ok_or("a stream missing from a batch")?
                    .bytes(),
            );
        }
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        writeln!(out, "{} {hex}", start + k as u64)?;
        out.flush()?;
    }
    Ok(())
}

/// One child run from `start`: its lines, killed with SIGKILL after
/// `kill_after` when given.
fn child_run(
    exe: &Path,
    location: &str,
    cache: &Path,
    start: u64,
    steps: u64,
    batch: usize,
    kill_after: Option<Duration>,
) -> Result<Vec<(u64, String)>> {
    let mut child = Command::new(exe)
        .args(["stream-child", location])
        .arg(cache)
        .args([
            start.to_string(),
            steps.to_string(),
            batch.to_string(),
            "16".to_owned(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("child stdout")?;
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(std::result::Result::ok)
            .filter_map(|l| {
                let (s, h) = l.split_once(' ')?;
                Some((s.parse::<u64>().ok()?, h.to_owned()))
            })
            .collect::<Vec<_>>()
    });
    if let Some(after) = kill_after {
        std::thread::sleep(after);
        // SIGKILL: no destructor, no flush beyond what was written.
        let _ = child.kill();
    }
    let _ = child.wait()?;
    reader
        .join()
        .map_err(|_| "the child's reader panicked".into())
}

/// Runs the section.
pub fn section(
    cfg: &Config,
    exe: &Path,
    root: &Path,
    targets: &mut Vec<Target>,
    progress: &dyn Fn(String),
) -> Result<String> {
    progress("stream: writing the corpus".into());
    let (dir, files) = corpus(cfg, root)?;
    let parquet_bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(dir.join("files").join(f)).map_or(0, |m| m.len()))
        .sum();
    let scratch = root.join("stream-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let mock = Mock::start(&cfg.python, &dir)?;
    let location = "hf://datasets/bench/stream";
    let mut out = String::from("### stream: training where the data lives\n\n");
    out.push_str(&format!(
        "A Hub-layout corpus of {} rows ({} parquet files, row groups of {} rows, {:.2} GB: \
         `id`, `label`, `tokens` of 256–768 random int32) served by the mock Hub behind \
         `throttle_proxy.py`; batches of {}, {} workers, `PartWindowed` windows of 16 row groups \
         (ramping up from 1), a fresh cache per run.\n\n",
        cfg.rows,
        cfg.files,
        cfg.group,
        parquet_bytes as f64 / 1e9,
        cfg.batch,
        cfg.workers
    ));
    let rg_bytes = parquet_bytes as f64 / (cfg.rows as f64 / cfg.group as f64);

    // Time to first batch on every link, lazy and `datasets`.
    let mut ttfb = Table::new(&[
        "link",
        "one row group's fetch, s",
        "loaderx lazy: open (footers, row group 0), s",
        "loaderx lazy: first batch, s",
        "datasets streaming (buffer 10 000): first batch, s",
        "datasets / loaderx",
    ]);
    let mut epoch_rows = None;
    for (i, &(latency, mbit)) in cfg.links.iter().enumerate() {
        let link = ThrottledLink::start(mock.port, latency, mbit).ok_or("LOADERX_PYTHON unset")?;
        let endpoint = link.endpoint();
        let label = format!("{latency} ms, {mbit} Mbit/s");
        let fetch = rg_bytes * 8.0 / (f64::from(mbit) * 1e6) + 4.0 * f64::from(latency) / 1e3;
        progress(format!("stream: {label}: loaderx lazy"));
        let cache = scratch.join(format!("lazy-{i}"));
        let t0 = Instant::now();
        let epochs = if i == 0 { 2 } else { 0 };
        let d = open(
            location,
            &lazy_options(&endpoint, &scratch.join("hub"), &cache, u64::MAX),
        )?;
        let opened = t0.elapsed().as_secs_f64();
        let mut run = run_loader(
            t0,
            d,
            SamplerMode::PartWindowed { window: 16 },
            cfg.batch,
            cfg.workers,
            epochs,
        )?;
        run.opened = opened;
        progress(format!("stream: {label}: datasets streaming"));
        let want = if i == 0 { 0 } else { cfg.batch };
        let ds = datasets_run(cfg, &endpoint, &files, want, &scratch)?;
        ttfb.row(vec![
            label.clone(),
            format!("{fetch:.2}"),
            format!("{:.2}", run.opened),
            format!("{:.2}", run.first_batch),
            format!("{:.2}", ds.0),
            format!("{:.2}×", ds.0 / run.first_batch),
        ]);
        targets.push(Target {
            what: format!("stream ({label}): first batch ≤ one row group's fetch + 1 s"),
            wanted: 1.0,
            measured: Some((fetch + 1.0) / run.first_batch),
        });
        targets.push(Target {
            what: format!("stream ({label}): first batch ahead of datasets streaming"),
            wanted: 1.0,
            measured: Some(ds.0 / run.first_batch),
        });
        if i == 0 {
            epoch_rows = Some((label, mbit, endpoint.clone(), run, ds, cache, link));
        }
    }
    out.push_str("#### Time to first batch (a fresh process and cache)\n\n");
    out.push_str(&ttfb.render());
    out.push('\n');

    let Some((label, mbit, endpoint, lazy, ds, cache, link)) = epoch_rows else {
        return Ok(out);
    };
    let n = lazy.records;
    let link_rate = n as f64 / (parquet_bytes as f64 * 8.0 / (f64::from(mbit) * 1e6));
    let e1 = lazy.epochs.first().copied().unwrap_or(f64::NAN);
    let e2 = lazy.epochs.get(1).copied().unwrap_or(f64::NAN) - e1;
    let lazy_e1 = n as f64 / e1;
    let lazy_e2 = n as f64 / e2;
    let ds_rate = ds.1 as f64 / ds.2;

    // Epoch 2 against the same records converted and local: the cache
    // frozen into a dataset.
    progress("stream: the local converted dataset".into());
    let frozen_dir = scratch.join("frozen");
    {
        let d = open(
            location,
            &lazy_options(&endpoint, &scratch.join("hub"), &cache, u64::MAX),
        )?;
        d.freeze(&frozen_dir)?;
    }
    drop(link);
    let t0 = Instant::now();
    let local = run_loader(
        t0,
        Dataset::open(&frozen_dir)?,
        SamplerMode::PartWindowed { window: 16 },
        cfg.batch,
        cfg.workers,
        2,
    )?;
    let local_e2 = n as f64 / (local.epochs[1] - local.epochs[0]);

    // A cache a quarter of the data.
    let link = ThrottledLink::start(mock.port, cfg.links[0].0, mbit).ok_or("no proxy")?;
    let endpoint = link.endpoint();
    let converted_bytes = lazy.stats.map_or(parquet_bytes, |s| s.cached_bytes);
    progress("stream: a cache of a quarter of the data".into());
    let t0 = Instant::now();
    let quarter = run_loader(
        t0,
        open(
            location,
            &lazy_options(
                &endpoint,
                &scratch.join("hub"),
                &scratch.join("quarter"),
                converted_bytes / 4,
            ),
        )?,
        SamplerMode::PartWindowed { window: 16 },
        cfg.batch,
        cfg.workers,
        2,
    )?;
    let q_e1 = n as f64 / quarter.epochs[0];
    let q_e2 = n as f64 / (quarter.epochs[1] - quarter.epochs[0]);

    // `convert hf` (the whole download and conversion), then the first
    // batch of the converted split.
    progress("stream: convert hf, then open".into());
    let t0 = Instant::now();
    let converted = scratch.join("converted");
    loaderx_convert::hf::convert_hf(
        &loaderx_convert::hf::HfSource::new("bench/stream")
            .endpoint(&endpoint)
            .cache_dir(scratch.join("hub-download")),
        &converted,
    )?;
    let mut b = DataLoader::builder()
        .batch_size(cfg.batch)
        .mode(SamplerMode::Cyclic)
        .workers(cfg.workers);
    for (name, store) in Store::open_dir(converted.join("train"))? {
        b = b.stream(name, store);
    }
    b.build()?.next().ok_or("no batch")??;
    let convert_first = t0.elapsed().as_secs_f64();
    drop(link);

    let mut t = Table::new(&[
        &format!("{label}, {:.2} GB of parquet", parquet_bytes as f64 / 1e9),
        "first batch, s",
        "epoch 1, records/s",
        "epoch 2, records/s",
        "row groups converted (evicted)",
    ]);
    let stats =
        |s: Option<LazyStats>| s.map_or("-".into(), |s| format!("{} ({})", s.converted, s.evicted));
    t.row(vec![
        "what the link carries (parquet bytes / bandwidth)".into(),
        "-".into(),
        format!("{link_rate:.0}"),
        "-".into(),
        "-".into(),
    ]);
    t.row(vec![
        "loaderx lazy, cache ≥ the data".into(),
        format!("{:.2}", lazy.first_batch),
        format!("{lazy_e1:.0}"),
        format!("{lazy_e2:.0}"),
        stats(lazy.stats),
    ]);
    t.row(vec![
        "loaderx lazy, cache = ¼ of the data".into(),
        format!("{:.2}", quarter.first_batch),
        format!("{q_e1:.0}"),
        format!("{q_e2:.0}"),
        stats(quarter.stats),
    ]);
    t.row(vec![
        "`convert hf`, then open (local)".into(),
        format!("{convert_first:.2}"),
        "-".into(),
        format!("{local_e2:.0}"),
        "-".into(),
    ]);
    t.row(vec![
        "datasets streaming, shuffle(buffer_size=10 000)".into(),
        format!("{:.2}", ds.0),
        format!("{ds_rate:.0}"),
        "-".into(),
        "-".into(),
    ]);
    out.push_str("#### Epochs through the link\n\n");
    out.push_str(&t.render());
    out.push_str(&format!(
        "\nEpoch 2 with the cache ≥ the data reads local files: {:.2}× the frozen cache read as \
         a local dataset. With a quarter of it, each window's row groups are fetched again every \
         pass (they were evicted by the pass's other windows), so epoch 2 runs at the link's speed \
         like epoch 1.\n\n",
        lazy_e2 / local_e2
    ));
    targets.push(Target {
        what: format!("stream ({label}): epoch 1 ≥ 0.8× what the link carries"),
        wanted: 0.8,
        measured: Some(lazy_e1 / link_rate),
    });
    targets.push(Target {
        what: format!("stream ({label}): epoch 1 ahead of datasets streaming"),
        wanted: 1.0,
        measured: Some(lazy_e1 / ds_rate),
    });
    targets.push(Target {
        what: "stream: epoch 2 (cache ≥ the data) ≥ 0.8× the local dataset".into(),
        wanted: 0.8,
        measured: Some(lazy_e2 / local_e2),
    });

    // Shuffle quality.
    let starts = &lazy.starts;
    let mut q = Table::new(&[
        "order (one epoch)",
        "mean |position − record| / N",
        "row groups a batch draws from",
    ]);
    let uniform = sampler_order(n, cfg.batch, SamplerMode::Cyclic, starts)?;
    let rows: Vec<(String, Vec<u64>)> = vec![
        ("uniform permutation (Cyclic)".into(), uniform),
        (
            "loaderx PartWindowed, window 4".into(),
            sampler_order(
                n,
                cfg.batch,
                SamplerMode::PartWindowed { window: 4 },
                starts,
            )?,
        ),
        (
            "loaderx PartWindowed, window 16 (delivered)".into(),
            lazy.order.clone(),
        ),
        (
            "datasets streaming, buffer 10 000 (delivered)".into(),
            ds.3.clone(),
        ),
        (
            "records in order".into(),
            (0..n - n % cfg.batch as u64).collect(),
        ),
    ];
    for (name, order) in rows {
        let (d, p) = shuffle_quality(&order, n, starts, cfg.batch);
        q.row(vec![name, num(Some(d), 3), num(Some(p), 1)]);
    }
    out.push_str("#### Shuffle quality\n\n");
    out.push_str(&q.render());
    out.push('\n');

    // Exact resume: SIGKILL at random times, resumed at the next step.
    progress("stream: SIGKILL and resume".into());
    let files_glob = dir.join("files/data/*.parquet");
    let files_glob = files_glob.to_str().ok_or("corpus path")?;
    let steps = 400u64;
    let reference = child_run(
        exe,
        files_glob,
        &scratch.join("resume-reference"),
        0,
        steps,
        64,
        None,
    )?;
    if reference.len() as u64 != steps {
        return Err(format!(
            "the reference run gave {} of {steps} steps",
            reference.len()
        )
        .into());
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(58);
    let (mut kills, mut checked, mut wrong, mut at) = (0usize, 0u64, 0u64, 0u64);
    let resume_cache = scratch.join("resume-cache");
    while kills < cfg.kills {
        let after = Duration::from_millis(rng.random_range(150..1500));
        let lines = child_run(
            exe,
            files_glob,
            &resume_cache,
            at,
            steps - at,
            64,
            Some(after),
        )?;
        kills += 1;
        for (step, hash) in &lines {
            checked += 1;
            if reference.get(*step as usize).map(|r| &r.1) != Some(hash) {
                wrong += 1;
            }
        }
        at = lines.last().map_or(at, |l| l.0 + 1);
        if at >= steps {
            at = 0;
        }
        progress(format!(
            "stream: {kills} runs killed, {checked} batches checked"
        ));
    }
    out.push_str(&format!(
        "#### Exact resume\n\n{kills} runs of the loader (local files, `PartWindowed`, batches of 64, \
         one cache shared by the runs) killed with SIGKILL after 0.15–1.5 s, each resumed at the \
         step after the last it delivered: {checked} batches checked against an uninterrupted \
         run's SHA-256s, {wrong} differed.\n\n"
    ));
    targets.push(Target {
        what: format!("stream: batches after {kills} SIGKILLs equal the uninterrupted run's"),
        wanted: 1.0,
        measured: Some(if checked == 0 {
            0.0
        } else {
            (checked - wrong) as f64 / checked as f64
        }),
    });
    drop(mock);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(out)
}
