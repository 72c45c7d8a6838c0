//! The `cold` section: stores larger than the memory their readers may hold,
//! read at random, against the drive's physical limit.
//!
//! Method, for each workload (raw Dense records of 4 KiB, 64 KiB and 1 MiB, a
//! Ragged `u32` token store, zstd records of 64 KiB):
//!
//! - the store (`--cold-gib`, default 4 GiB of records) is written once; every
//!   reader then runs in its own process inside a memory cgroup whose limit
//!   (`--cold-limit-mib`, default 512 MiB) is far below the store, and the page
//!   cache is dropped (`echo 3 > /proc/sys/vm/drop_caches`) before each one.
//!   Both need root: without it the section stops with an error rather than
//!   printing warm numbers under a cold title;
//! - `fio` reads the store's own shard files at random with `O_DIRECT` and
//!   io_uring, one job, at the workload's block size and queue depths 1, 32,
//!   64 and 128: the drive's limit, the table's denominator;
//! - loaderx's `DataLoader` (IID batches, seed 7) runs with default settings,
//!   then with 4, 8 and 16 workers (the best is reported);
//! - NumPy indexes `np.load(..., mmap_mode='r')` at the same IID batches, on
//!   a `.npy` file of the same records (written beside the store, removed
//!   after);
//! - Python loaderx 2.8.19's `Loader` (2 workers, prefetch 4) reads the same
//!   store, which loaderx writes in the 2.8.19 generation by default;
//! - a warm row: loaderx default settings with the store read into the page
//!   cache first and no cgroup (for zstd, the codec's own speed);
//! - `ReadMode::Mapped`: the page-fault path every store took before the
//!   cold path (and still takes warm);
//! - on the raw Dense stores, the windowed order (blocks of about 4 MiB of
//!   consecutive records visited in a random order, records shuffled within
//!   windows of 16 blocks) against `fio`'s sequential bandwidth (1 MiB
//!   reads, queue depth 32).
//!
//! Each reader runs `--cold-seconds` (default 5 s) after its first batch.
//! A cloud disk's bandwidth drifts by a fifth or more from one run to the
//! next (`fio` alone, 3 s runs back to back: 1 412 to 1 987 MiB/s), so
//! `fio` at every depth and loaderx's default loader run in turn
//! `--cold-rounds` times (default 3), as do `fio`'s sequential read and
//! the windowed order: each is reported as its median run, and the drive's
//! best is the best of `fio`'s medians. The other rows run once.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use loaderx_core::{
    Codec, CreateOptions, DType, DataLoader, DynDenseWriter, DynRaggedWriter, ReadMode,
    SamplerMode, Store,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::report::{Table, Target, num, ratio};
use crate::stores::Result;

/// The section's settings.
#[derive(Debug, Clone)]
pub struct ColdConfig {
    /// Logical bytes of records per store.
    pub store_bytes: u64,
    /// The memory cgroup's limit for each reader, bytes.
    pub limit_bytes: u64,
    /// Timed seconds per reader.
    pub seconds: f64,
    /// Rounds of `fio` and the default loader (and of the windowed order
    /// and `fio`'s sequential read), in turn; medians are reported.
    pub rounds: usize,
    /// Where the figure goes (`cold-vs-fio.svg`); `None`: no figure.
    pub plots: Option<PathBuf>,
}

/// One workload of the section.
#[derive(Debug, Clone, Copy)]
struct Shape {
    key: &'static str,
    /// Bytes of a Dense record; the mean bytes of a Ragged one.
    record_bytes: usize,
    ragged: bool,
    codec: Codec,
    batch: usize,
    /// `fio`'s block size for this workload.
    fio_bs: usize,
}

const SHAPES: [Shape; 5] = [
    Shape {
        key: "4k",
        record_bytes: 4096,
        ragged: false,
        codec: Codec::Raw,
        batch: 256,
        fio_bs: 4096,
    },
    Shape {
        key: "64k",
        record_bytes: 65536,
        ragged: false,
        codec: Codec::Raw,
        batch: 32,
        fio_bs: 65536,
    },
    Shape {
        key: "1m",
        record_bytes: 1 << 20,
        ragged: false,
        codec: Codec::Raw,
        batch: 8,
        fio_bs: 1 << 20,
    },
    Shape {
        key: "tokens",
        // u32 tokens, 256 to 4 096 per record: 8.7 KB on average.
        record_bytes: 4 * (256 + 4096) / 2,
        ragged: true,
        codec: Codec::Raw,
        batch: 64,
        fio_bs: 8192,
    },
    Shape {
        key: "64k-zstd",
        record_bytes: 65536,
        ragged: false,
        codec: Codec::Zstd,
        batch: 32,
        fio_bs: 65536,
    },
];

/// The workload keys, in the order the section runs them.
pub const KEYS: [&str; 5] = ["4k", "64k", "1m", "tokens", "64k-zstd"];

/// What one reader measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rate {
    /// Records delivered per second.
    pub records_per_s: f64,
    /// Logical bytes delivered per second.
    pub bytes_per_s: f64,
}

impl Rate {
    fn from_json(v: &Value) -> Result<Rate> {
        Ok(Rate {
            records_per_s: crate::python::num(v, "records_per_s")?,
            bytes_per_s: crate::python::num(v, "bytes_per_s")?,
        })
    }
}

/// A memory cgroup (v1 or v2) the readers run in.
struct Cgroup {
    dir: PathBuf,
    procs: PathBuf,
}

impl Cgroup {
    /// Makes a cgroup limited to `limit` bytes of memory (page cache
    /// included), under the cgroup this process is in.
    fn create(limit: u64) -> Result<Cgroup> {
        let name = format!("loaderx-bench-cold-{}", std::process::id());
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
        let (dir, limit_file) = if v2.exists() {
            let parent = Path::new("/sys/fs/cgroup");
            // Let children have a memory controller (harmless when set).
            let _ = fs::write(parent.join("cgroup.subtree_control"), "+memory");
            (parent.join(&name), "memory.max")
        } else {
            (
                Path::new("/sys/fs/cgroup/memory").join(&name),
                "memory.limit_in_bytes",
            )
        };
        fs::create_dir(&dir).map_err(|e| {
            format!(
                "cannot make the memory cgroup {} (the cold section needs root): {e}",
                dir.display()
            )
        })?;
        let cg = Cgroup {
            procs: dir.join("cgroup.procs"),
            dir,
        };
        fs::write(cg.dir.join(limit_file), limit.to_string())
            .map_err(|e| format!("cannot limit {}: {e}", cg.dir.display()))?;
        Ok(cg)
    }

    /// `program args…` run inside the cgroup: a shell moves itself in, then
    /// becomes the program.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(&self.procs)
            .arg(program);
        c
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Empties the page cache (root only).
fn drop_caches() -> Result<()> {
    Command::new("sync").status()?;
    fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        format!("cannot drop the page cache (the cold section needs root): {e}").into()
    })
}

/// Reads `files` whole, so they are in the page cache.
fn warm(files: &[PathBuf]) -> Result<()> {
    let mut buf = vec![0u8; 8 << 20];
    for f in files {
        let mut r = fs::File::open(f)?;
        while std::io::Read::read(&mut r, &mut buf)? > 0 {}
    }
    Ok(())
}

/// The payload shard files of the store at `dir` (what `fio` reads).
fn shard_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n != "meta.zr" && !n.starts_with('.'))
                && p.is_file()
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("no payload shards in {}", dir.display()).into());
    }
    Ok(files)
}

/// Fills `out` with record `i`'s bytes: random bytes (nothing to compress)
/// for a raw store, Fashion-MNIST pixels (zstd takes them to about a third)
/// for a compressed one.
fn fill(i: u64, out: &mut [u8], images: &[u8], compressible: bool) {
    if compressible {
        let start = (i as usize).wrapping_mul(7919 * 784) % (images.len() - 1);
        let mut at = start;
        for b in out.iter_mut() {
            *b = images[at];
            at += 1;
            if at == images.len() {
                at = 0;
            }
        }
    } else {
        SmallRng::seed_from_u64(i ^ 0x9e37_79b9_7f4a_7c15).fill(out);
    }
}

/// Ragged record `i`'s token count (256 to 4 096).
fn tokens_of(i: u64) -> usize {
    SmallRng::seed_from_u64(i.wrapping_mul(0x2545_f491_4f6c_dd1d)).random_range(256..=4096)
}

/// Records of `shape` in `bytes` logical bytes.
fn record_count(shape: &Shape, bytes: u64) -> u64 {
    (bytes / shape.record_bytes as u64).max(64)
}

/// Writes the workload's store at `dir`.
fn write_store(shape: &Shape, n: u64, dir: &Path, images: &[u8]) -> Result<()> {
    let opts = CreateOptions::new(shape.codec);
    let chunk_bytes = 64 << 20;
    if shape.ragged {
        let mut w = DynRaggedWriter::create(dir, DType::U32, 1, &opts)?;
        let mut i = 0u64;
        while i < n {
            let mut recs: Vec<([usize; 1], Vec<u8>)> = Vec::new();
            let mut bytes = 0;
            while i < n && bytes < chunk_bytes {
                let t = tokens_of(i);
                let mut b = vec![0u8; 4 * t];
                fill(i, &mut b, images, false);
                bytes += b.len();
                recs.push(([t], b));
                i += 1;
            }
            w.append_bytes(recs.iter().map(|(s, b)| (&s[..], &b[..])))?;
        }
        w.close()?;
    } else {
        let width = shape.record_bytes;
        let mut w = DynDenseWriter::create(dir, DType::U8, &[width], &opts)?;
        let per = (chunk_bytes / width).max(1) as u64;
        let mut buf = Vec::new();
        let mut i = 0u64;
        while i < n {
            let k = per.min(n - i);
            buf.resize(k as usize * width, 0);
            for (j, rec) in buf.chunks_exact_mut(width).enumerate() {
                fill(i + j as u64, rec, images, shape.codec != Codec::Raw);
            }
            w.append_bytes(&buf, k as usize)?;
            i += k;
        }
        w.close()?;
    }
    Ok(())
}

/// Writes the same records as a `.npy` for NumPy: `data.npy` (`u8`, records ×
/// width) for a Dense workload, `flat.npy` (`u32`) + `offsets.npy` (`i64`,
/// `n + 1` token offsets) for the Ragged one. Returns the files written.
fn write_npy(shape: &Shape, n: u64, dir: &Path, images: &[u8]) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    if shape.ragged {
        let total: usize = (0..n).map(tokens_of).sum();
        let flat = dir.join("flat.npy");
        let mut f = std::io::BufWriter::with_capacity(8 << 20, fs::File::create(&flat)?);
        npy_header(&mut f, "<u4", &[total])?;
        let mut offsets = Vec::with_capacity(n as usize + 1);
        let mut at = 0i64;
        offsets.push(0);
        for i in 0..n {
            let t = tokens_of(i);
            let mut b = vec![0u8; 4 * t];
            fill(i, &mut b, images, false);
            f.write_all(&b)?;
            at += t as i64;
            offsets.push(at);
        }
        f.flush()?;
        let off = dir.join("offsets.npy");
        let mut g = fs::File::create(&off)?;
        npy_header(&mut g, "<i8", &[offsets.len()])?;
        for o in offsets {
            g.write_all(&o.to_le_bytes())?;
        }
        Ok(vec![flat, off])
    } else {
        let width = shape.record_bytes;
        let path = dir.join("data.npy");
        let mut f = std::io::BufWriter::with_capacity(8 << 20, fs::File::create(&path)?);
        npy_header(&mut f, "|u1", &[n as usize, width])?;
        let mut rec = vec![0u8; width];
        for i in 0..n {
            fill(i, &mut rec, images, shape.codec != Codec::Raw);
            f.write_all(&rec)?;
        }
        f.flush()?;
        Ok(vec![path])
    }
}

/// A `.npy` version 1.0 header for a C-order array.
fn npy_header(w: &mut impl std::io::Write, descr: &str, shape: &[usize]) -> Result<()> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + length (2) + dict + '\n', padded to 64.
    let pad = (64 - (10 + dict.len() + 1) % 64) % 64;
    dict.push_str(&" ".repeat(pad));
    dict.push('\n');
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&(dict.len() as u16).to_le_bytes())?;
    w.write_all(dict.as_bytes())?;
    Ok(())
}

/// The result of one `fio` run.
#[derive(Debug, Clone, Copy)]
struct Fio {
    iops: f64,
    bytes_per_s: f64,
}

/// The run of median bandwidth (the upper one of an even count).
fn median_rate(mut runs: Vec<Rate>) -> Rate {
    runs.sort_by(|a, b| a.bytes_per_s.total_cmp(&b.bytes_per_s));
    runs.get(runs.len() / 2).copied().unwrap_or_default()
}

/// [`median_rate`] of `fio` runs.
fn median_fio(mut runs: Vec<Fio>) -> Fio {
    runs.sort_by(|a, b| a.bytes_per_s.total_cmp(&b.bytes_per_s));
    runs.get(runs.len() / 2).copied().unwrap_or(Fio {
        iops: 0.0,
        bytes_per_s: 0.0,
    })
}

/// Runs `fio` over `files` (`rw`: `randread` or `read`) in `cg`.
fn run_fio(
    cg: &Cgroup,
    files: &[PathBuf],
    rw: &str,
    bs: usize,
    depth: usize,
    seconds: f64,
) -> Result<Fio> {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    if names.iter().any(|n| n.contains(':')) {
        return Err("fio cannot read a path holding ':'".into());
    }
    drop_caches()?;
    let out = cg
        .command(Path::new("fio"))
        .args([
            "--name=cold",
            &format!("--filename={}", names.join(":")),
            &format!("--rw={rw}"),
            &format!("--bs={bs}"),
            "--direct=1",
            "--ioengine=io_uring",
            &format!("--iodepth={depth}"),
            "--numjobs=1",
            "--time_based",
            &format!("--runtime={}", seconds.ceil() as u64),
            "--readonly",
            "--output-format=json",
        ])
        .output()?;
    if !out.status.success() {
        return Err(format!("fio failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    let read = &v["jobs"][0]["read"];
    Ok(Fio {
        iops: read["iops"].as_f64().ok_or("fio printed no iops")?,
        bytes_per_s: read["bw_bytes"].as_f64().ok_or("fio printed no bw_bytes")?,
    })
}

/// What the loaderx child is asked to do.
#[derive(Debug, Clone)]
pub struct ChildConfig {
    /// Records per batch.
    pub batch: usize,
    /// Worker threads; `None`: the loader's default.
    pub workers: Option<usize>,
    /// A sampler mode as `SamplerMode` parses it (`iid`,
    /// `windowed:BLOCK:WINDOW`).
    pub order: String,
    /// The read mode; `None`: the store's default.
    pub read_mode: Option<ReadMode>,
    /// The look-ahead's bound, bytes; `None`: the loader's default.
    pub prefetch_bytes: Option<u64>,
    /// Timed seconds.
    pub seconds: f64,
}

/// The loaderx contender, in its own process: `DataLoader` over `store`,
/// printing one JSON line (records/s, bytes/s).
pub fn child(store: &Path, c: &ChildConfig) -> Result<()> {
    let s = Store::open(store)?;
    let mode: SamplerMode = c.order.parse()?;
    let mut b = DataLoader::builder()
        .stream("x", s)
        .batch_size(c.batch)
        .mode(mode)
        .seed(7);
    if let Some(w) = c.workers {
        b = b.workers(w);
    }
    if let Some(m) = c.read_mode {
        b = b.read_mode(m);
    }
    if let Some(p) = c.prefetch_bytes {
        b = b.prefetch_bytes(p);
    }
    let mut loader = b.build()?;
    let mut take = || -> Result<usize> {
        let batch = loader.next().ok_or("loader ended")??;
        let col = batch.column("x").ok_or("no column x")?;
        Ok(std::hint::black_box(col.bytes()).len())
    };
    take()?;
    let started = Instant::now();
    let (mut batches, mut bytes) = (0u64, 0u64);
    while started.elapsed() < Duration::from_secs_f64(c.seconds) {
        bytes += take()? as u64;
        batches += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "records_per_s": (batches * c.batch as u64) as f64 / secs,
            "bytes_per_s": bytes as f64 / secs,
        })
    );
    Ok(())
}

/// Runs the loaderx child over `store` (in `cg`, or not).
fn run_ours(cg: Option<&Cgroup>, store: &Path, c: &ChildConfig) -> Result<Rate> {
    let exe = std::env::current_exe()?;
    let mut cmd = match cg {
        Some(cg) => cg.command(&exe),
        None => Command::new(&exe),
    };
    cmd.arg("cold-child").arg(store).args([
        "--batch",
        &c.batch.to_string(),
        "--order",
        &c.order,
        "--seconds",
        &c.seconds.to_string(),
    ]);
    if let Some(w) = c.workers {
        cmd.args(["--workers", &w.to_string()]);
    }
    if let Some(m) = c.read_mode {
        cmd.args(["--read-mode", read_mode_name(m)]);
    }
    if let Some(p) = c.prefetch_bytes {
        cmd.args(["--prefetch-bytes", &p.to_string()]);
    }
    json_line(cmd, "loaderx cold child")
}

/// The `--read-mode` spelling of `m`.
fn read_mode_name(m: ReadMode) -> &'static str {
    match m {
        ReadMode::Mapped => "mapped",
        ReadMode::Direct => "direct",
        _ => "auto",
    }
}

/// Parses a `--read-mode` argument.
pub fn parse_read_mode(s: &str) -> Result<ReadMode> {
    match s {
        "auto" => Ok(ReadMode::Auto),
        "mapped" => Ok(ReadMode::Mapped),
        "direct" => Ok(ReadMode::Direct),
        other => Err(format!("unknown read mode {other} (auto, mapped, direct)").into()),
    }
}

/// Runs `cmd` and parses the first JSON line it printed.
fn json_line(mut cmd: Command, what: &str) -> Result<Rate> {
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("{what} printed nothing"))?;
    Rate::from_json(&serde_json::from_str(line)?)
}

/// The Python script of the NumPy contender.
fn numpy_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/cold_numpy.py")
}

/// The Python peers the section runs, when it has them.
pub struct Peers<'a> {
    /// A Python with NumPy.
    pub python: Option<&'a Path>,
    /// Per-release Python loaderx installs (`2.8.19/loaderx`).
    pub releases: Option<&'a Path>,
}

/// Runs the section over the workloads `keys` under `root`.
pub fn section(
    keys: &[String],
    cfg: ColdConfig,
    peers: &Peers<'_>,
    images: &[u8],
    root: &Path,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    // Per workload: each reader's bandwidth over fio's best (the figure).
    let mut figure: Vec<(String, [Option<f64>; 4])> = Vec::new();
    let version = Command::new("fio")
        .arg("--version")
        .output()
        .map_err(|e| format!("the cold section needs fio (apt-get install fio): {e}"))?;
    let fio_version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    drop_caches()?;
    let cg = Cgroup::create(cfg.limit_bytes)?;
    let has_2819 = peers
        .releases
        .is_some_and(|r| crate::python::has_release(r, "2.8.19"));
    let mut out = format!(
        "#### Cold: stores of {:.1} GiB read at random by processes limited to {} MiB of memory \
         (a memory cgroup), page cache dropped before each; {fio_version}, O_DIRECT, io_uring\n\n",
        cfg.store_bytes as f64 / (1u64 << 30) as f64,
        cfg.limit_bytes >> 20
    );
    for shape in SHAPES.iter().filter(|s| keys.iter().any(|k| k == s.key)) {
        let dir = root.join(format!("cold-{}", shape.key));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir)?;
        let n = record_count(shape, cfg.store_bytes);
        let store = dir.join("store");
        let mut t = Table::new(&[
            "reader",
            "records/s>",
            "MiB/s>",
            "vs fio best>",
            "vs Python 2.8.19>",
        ]);

        // NumPy first, on its own copy of the records, removed before the
        // store is written (the disk need not hold both).
        let numpy = match peers.python {
            Some(py) => {
                say(bar, format!("cold {}: writing the .npy", shape.key));
                let npy = write_npy(shape, n, &dir.join("npy"), images)?;
                drop_caches()?;
                say(bar, format!("cold {}: NumPy", shape.key));
                let mut cmd = cg.command(py);
                cmd.arg(numpy_script()).args([
                    "--batch",
                    &shape.batch.to_string(),
                    "--seconds",
                    &cfg.seconds.to_string(),
                    "--seed",
                    "7",
                ]);
                cmd.args(&npy);
                let r = json_line(cmd, "cold_numpy.py")?;
                fs::remove_dir_all(dir.join("npy"))?;
                Some(r)
            }
            None => None,
        };

        say(bar, format!("cold {}: writing the store", shape.key));
        write_store(shape, n, &store, images)?;
        let shards = shard_files(&store)?;
        let stored: u64 = shards
            .iter()
            .map(|f| fs::metadata(f).map(|m| m.len()))
            .sum::<std::io::Result<u64>>()?;

        let child = |workers: Option<usize>, order: &str| ChildConfig {
            batch: shape.batch,
            workers,
            order: order.to_string(),
            read_mode: None,
            prefetch_bytes: None,
            seconds: cfg.seconds,
        };
        // `fio` at each depth and the default loader in turn, `rounds`
        // times: the drive's bandwidth drifts between runs, and each reader
        // is then compared with `fio` measured around it.
        const DEPTHS: [usize; 4] = [1, 32, 64, 128];
        let mut fio_runs: Vec<Vec<Fio>> = vec![Vec::new(); DEPTHS.len()];
        let mut default_runs = Vec::new();
        for round in 0..cfg.rounds {
            for (k, depth) in DEPTHS.into_iter().enumerate() {
                say(
                    bar,
                    format!("cold {}: fio QD {depth} (round {})", shape.key, round + 1),
                );
                fio_runs[k].push(run_fio(
                    &cg,
                    &shards,
                    "randread",
                    shape.fio_bs,
                    depth,
                    cfg.seconds,
                )?);
            }
            drop_caches()?;
            say(
                bar,
                format!("cold {}: loaderx default (round {})", shape.key, round + 1),
            );
            default_runs.push(run_ours(Some(&cg), &store, &child(None, "iid"))?);
        }
        let fio: Vec<(usize, Fio)> = DEPTHS
            .into_iter()
            .zip(fio_runs)
            .map(|(d, runs)| (d, median_fio(runs)))
            .collect();
        let default = median_rate(default_runs);
        let best = fio
            .iter()
            .map(|(_, f)| f.bytes_per_s)
            .fold(0.0f64, f64::max);
        // Bytes per second over the drive's best: stored bytes for fio,
        // logical ones for readers, scaled to stored bytes by the ratio.
        let expansion = (n as f64 * shape.record_bytes as f64) / stored as f64;
        let vs_fio = |bytes_per_s: f64| Some(bytes_per_s / expansion / best);

        let mut best_workers = (0, Rate::default());
        for w in [4, 8, 16] {
            drop_caches()?;
            say(bar, format!("cold {}: loaderx {w} workers", shape.key));
            let r = run_ours(Some(&cg), &store, &child(Some(w), "iid"))?;
            if r.records_per_s > best_workers.1.records_per_s {
                best_workers = (w, r);
            }
        }
        drop_caches()?;
        say(bar, format!("cold {}: loaderx mapped", shape.key));
        let mapped = run_ours(
            Some(&cg),
            &store,
            &ChildConfig {
                read_mode: Some(ReadMode::Mapped),
                prefetch_bytes: None,
                ..child(None, "iid")
            },
        )?;
        // The windowed order against the drive's sequential bandwidth:
        // blocks of about 4 MiB, windows of 16 blocks.
        let windowed = if shape.ragged || shape.codec != Codec::Raw {
            None
        } else {
            let block = ((4 << 20) / shape.record_bytes).max(1);
            let order = format!("windowed:{block}:16");
            let (mut seqs, mut ws) = (Vec::new(), Vec::new());
            for round in 0..cfg.rounds {
                say(
                    bar,
                    format!("cold {}: fio sequential (round {})", shape.key, round + 1),
                );
                seqs.push(run_fio(&cg, &shards, "read", 1 << 20, 32, cfg.seconds)?);
                drop_caches()?;
                say(
                    bar,
                    format!("cold {}: loaderx windowed (round {})", shape.key, round + 1),
                );
                ws.push(run_ours(Some(&cg), &store, &child(None, &order))?);
            }
            Some((block, median_fio(seqs), median_rate(ws)))
        };
        let python = match (peers.python, peers.releases) {
            (Some(py), Some(rel)) if has_2819 => {
                drop_caches()?;
                say(bar, format!("cold {}: Python loaderx 2.8.19", shape.key));
                Some(run_python_2819(&cg, py, rel, &store, shape, cfg.seconds)?)
            }
            _ => None,
        };
        say(bar, format!("cold {}: warm", shape.key));
        warm(&shards)?;
        let warm_rate = run_ours(None, &store, &child(None, "iid"))?;

        let py_rate = python.map(|p| p.records_per_s);
        let mut row = |name: String, r: Rate, fio_frac: Option<f64>| {
            t.row(vec![
                name,
                num(Some(r.records_per_s), 0),
                num(Some(r.bytes_per_s / (1 << 20) as f64), 0),
                fio_frac.map_or("-".into(), |f| format!("{f:.2}×")),
                ratio(Some(r.records_per_s), py_rate),
            ]);
        };
        for (depth, f) in &fio {
            row(
                format!("fio randread {} QD {depth}", human(shape.fio_bs)),
                Rate {
                    records_per_s: f.iops,
                    bytes_per_s: f.bytes_per_s,
                },
                Some(f.bytes_per_s / best),
            );
        }
        row(
            "**loaderx, default settings**".into(),
            default,
            vs_fio(default.bytes_per_s),
        );
        row(
            format!("loaderx, {} workers (best of 4/8/16)", best_workers.0),
            best_workers.1,
            vs_fio(best_workers.1.bytes_per_s),
        );
        if let Some(np) = numpy {
            row(
                "NumPy `np.load(mmap_mode='r')[idx]`".into(),
                np,
                vs_fio(np.bytes_per_s),
            );
        }
        if let Some(p) = python {
            row(
                "Python loaderx 2.8.19 `Loader`, 2 workers".into(),
                p,
                vs_fio(p.bytes_per_s),
            );
        }
        row(
            "loaderx, mapped (`ReadMode::Mapped`: page faults on the map)".into(),
            mapped,
            vs_fio(mapped.bytes_per_s),
        );
        row(
            "loaderx, default settings, warm (page cache)".into(),
            warm_rate,
            None,
        );
        let what = if shape.ragged {
            format!(
                "Ragged `u32` tokens, 256–4 096 per record ({} on average), {n} records, batch {}",
                human(shape.record_bytes),
                shape.batch
            )
        } else {
            format!(
                "Dense `u8[{}]`, {}, {n} records, batch {}",
                shape.record_bytes,
                match shape.codec {
                    Codec::Raw => "raw".to_string(),
                    c => format!("{c:?} ({:.2}× smaller)", expansion),
                },
                shape.batch
            )
        };
        figure.push((
            shape.key.to_string(),
            [
                vs_fio(default.bytes_per_s),
                vs_fio(best_workers.1.bytes_per_s),
                numpy.and_then(|np| vs_fio(np.bytes_per_s)),
                python.and_then(|p| vs_fio(p.bytes_per_s)),
            ],
        ));
        out.push_str(&format!("##### {}: {what}\n\n{}\n", shape.key, t.render()));
        if let Some((block, seq, w)) = windowed {
            let mut tw = Table::new(&["reader", "records/s>", "MiB/s>", "vs fio sequential>"]);
            tw.row(vec![
                "fio read (sequential) 1 MiB QD 32".into(),
                "-".into(),
                num(Some(seq.bytes_per_s / (1 << 20) as f64), 0),
                "1.00×".into(),
            ]);
            tw.row(vec![
                format!(
                    "**loaderx, windowed order** (blocks of {block} records, windows of 16), default settings"
                ),
                num(Some(w.records_per_s), 0),
                num(Some(w.bytes_per_s / (1 << 20) as f64), 0),
                ratio(Some(w.bytes_per_s), Some(seq.bytes_per_s)),
            ]);
            out.push_str(&format!("{}\n", tw.render()));
            targets.push(Target {
                what: format!("cold {}: windowed order vs fio sequential", shape.key),
                wanted: 0.8,
                measured: Some(w.bytes_per_s / seq.bytes_per_s),
            });
        }
        let frac = vs_fio(default.bytes_per_s).unwrap_or(0.0);
        if shape.codec == Codec::Raw {
            targets.push(Target {
                what: format!("cold {}: loaderx default vs fio's best", shape.key),
                wanted: 0.8,
                measured: Some(frac),
            });
        } else {
            // The codec's speed (warm) or the drive's, whichever is lower.
            let limit = (warm_rate.bytes_per_s).min(best * expansion);
            targets.push(Target {
                what: format!(
                    "cold {}: loaderx default vs min(codec warm, drive)",
                    shape.key
                ),
                wanted: 0.8,
                measured: Some(default.bytes_per_s / limit),
            });
        }
        if let Some(p) = python {
            targets.push(Target {
                what: format!("cold {}: loaderx default vs Python 2.8.19", shape.key),
                wanted: 1.0,
                measured: Some(default.records_per_s / p.records_per_s),
            });
        }
        fs::remove_dir_all(&dir)?;
    }
    if let Some(dir) = &cfg.plots
        && !figure.is_empty()
    {
        let path = dir.join("cold-vs-fio.svg");
        let names = [
            "loaderx, default",
            "loaderx, best worker count",
            "NumPy mmap",
            "Python loaderx 2.8.19",
        ];
        let series: Vec<(String, Vec<Option<f64>>)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (
                    n.to_string(),
                    figure.iter().map(|(_, v)| v[i]).collect::<Vec<_>>(),
                )
            })
            .filter(|(_, v)| v.iter().any(Option::is_some))
            .collect();
        let keys: Vec<String> = figure.iter().map(|(k, _)| k.clone()).collect();
        crate::plot::bars(
            &path,
            "Cold random reads: bandwidth over fio's best (1.0 = the drive)",
            "share of fio's best",
            &keys,
            &series,
        )?;
        out.push_str(&format!(
            "\n![cold reads against fio]({})\n",
            crate::plot::shown(&path)
        ));
    }
    Ok(out)
}

/// Runs Python loaderx 2.8.19's `Loader` over `store` in `cg`.
fn run_python_2819(
    cg: &Cgroup,
    python: &Path,
    releases: &Path,
    store: &Path,
    shape: &Shape,
    seconds: f64,
) -> Result<Rate> {
    let c = crate::loader::LoaderConfig {
        batch: shape.batch,
        workers: 2,
        prefetch: 4,
        min: Duration::from_secs_f64(seconds),
    };
    let args = crate::loader::loader_args(store, None, c);
    let out = crate::python::run_release_in(cg.command(python), releases, "2.8.19", &args)?;
    let v = out.first().ok_or("peer_2_8_19.py loader printed nothing")?;
    let records = crate::python::num(v, "batches_per_s")? * shape.batch as f64;
    Ok(Rate {
        records_per_s: records,
        bytes_per_s: records * shape.record_bytes as f64,
    })
}

/// Shows `msg` on the spinner, or on stderr when the spinner is hidden
/// (the section runs for minutes).
fn say(bar: &ProgressBar, msg: String) {
    if bar.is_hidden() {
        eprintln!("[cold {:>7.1?}] {msg}", started().elapsed());
    }
    bar.set_message(msg);
}

/// When the section first spoke.
fn started() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// `4 KiB`, `64 KiB`, `1 MiB`, `8.7 KB`.
fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{:.1} KB", bytes as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_headers_are_64_byte_aligned_and_parse() {
        for shape in [&[3usize, 4096][..], &[10][..]] {
            let mut v = Vec::new();
            npy_header(&mut v, "|u1", shape).unwrap();
            assert_eq!(v.len() % 64, 0);
            let len = u16::from_le_bytes([v[8], v[9]]) as usize;
            assert_eq!(10 + len, v.len());
            assert!(v.ends_with(b"\n"));
        }
    }

    #[test]
    fn records_are_the_same_in_the_store_and_the_npy() {
        let images: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        for shape in SHAPES.iter() {
            let n = 70;
            let d = dir.path().join(shape.key);
            write_store(shape, n, &d.join("store"), &images).unwrap();
            let npy = write_npy(shape, n, &d.join("npy"), &images).unwrap();
            let s = Store::open(d.join("store")).unwrap();
            assert_eq!(s.len(), n);
            let data = fs::read(&npy[0]).unwrap();
            let body = &data[u16::from_le_bytes([data[8], data[9]]) as usize + 10..];
            match &s {
                Store::Dense(d) => {
                    let got = d.gather_bytes(&[0, 69]).unwrap();
                    let w = shape.record_bytes;
                    assert_eq!(&got[..w], &body[..w]);
                    assert_eq!(&got[w..], &body[69 * w..70 * w]);
                }
                Store::Ragged(r) => {
                    let b = r.gather(&[0]).unwrap();
                    assert_eq!(b.bytes(0), &body[..4 * tokens_of(0)]);
                }
            }
        }
    }
}
