//! This crate's Zrecord stores.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loaderx_core::format::{self, RecordLoc};
use loaderx_core::{
    Codec, CreateOptions, DynDense, DynDenseWriter, DynRagged, DynRaggedWriter, Generation,
};

use super::{Backend, Gathered, Result, Strided, allocated};
use crate::workload::Workload;

/// A Zrecord Dense or Ragged store.
pub struct Zrecord {
    codec: Codec,
    sync: bool,
    dict: Option<Vec<u8>>,
    /// Rewrite a raw Dense store's shards in reversed runs of this many records.
    runs: Option<usize>,
    /// The format generation written.
    generation: Generation,
    /// Ragged gathers packed (values end to end) rather than in segments.
    packed: bool,
    /// The store is written by Python loaderx with many writer lanes.
    by_python: Option<PythonWriter>,
    /// Runs of consecutive records found in the written store's shards.
    runs_found: Option<u64>,
    path: PathBuf,
    reader: Option<Reader>,
}

/// Python loaderx writing a raw store with `lanes` writer lanes
/// (`bench/python/write_lanes.py`): 2.4.6 from `python`'s own install, or
/// the release folder `release` first on `PYTHONPATH`.
struct PythonWriter {
    python: PathBuf,
    release: Option<PathBuf>,
    lanes: usize,
}

enum Reader {
    Dense(DynDense),
    Ragged(DynRagged),
}

struct RaggedOut(loaderx_core::DynRaggedBatch);

impl Gathered for RaggedOut {
    fn record(&self, k: usize) -> &[u8] {
        self.0.bytes(k)
    }

    fn bytes(&self) -> usize {
        (0..self.0.len()).map(|k| self.0.bytes(k).len()).sum()
    }
}

impl Zrecord {
    /// A contender writing with `codec` (and `dict` for `zstd_dict`),
    /// without syncing on close (as every contender: no fsync).
    pub fn new(codec: Codec, dict: Option<Vec<u8>>) -> Zrecord {
        Zrecord {
            codec,
            sync: false,
            dict,
            runs: None,
            generation: Generation::V2_4_6,
            packed: false,
            by_python: None,
            runs_found: None,
            path: PathBuf::new(),
            reader: None,
        }
    }

    /// A raw store written by Python loaderx (2.4.6 from `python`'s
    /// install, or the release folder `release`, e.g. `.../2.8.19`) as a
    /// machine with `lanes` writer lanes would lay it out, read by this
    /// crate. The row's name says how many runs of consecutive records its
    /// shards hold.
    pub fn written_by_python(python: &Path, release: Option<&Path>, lanes: usize) -> Zrecord {
        let mut z = Zrecord::new(Codec::Raw, None);
        z.by_python = Some(PythonWriter {
            python: python.to_path_buf(),
            release: release.map(Path::to_path_buf),
            lanes,
        });
        z
    }

    /// After writing (raw Dense only), rewrites every shard with its records
    /// in runs of `run` stored in reverse order, and the location table to
    /// match, as a writer whose workers finished in reverse order would:
    /// the same records out of order (read through a block table, or, for
    /// small records, copied in record order at open).
    pub fn relaid(mut self, run: usize) -> Zrecord {
        self.runs = Some(run.max(1));
        self
    }

    /// Writes the 2.8.19 generation (the one Python loaderx 2.8.19 reads)
    /// instead of the 2.4.6 one, and gathers Ragged records packed: the
    /// layout of 2.8.19's `RaggedBatch`.
    pub fn as_2_8_19_packed(mut self) -> Zrecord {
        self.generation = Generation::V2_8_19;
        self.packed = true;
        self
    }

    /// The library's default: `close` syncs every file before and after
    /// publishing the header.
    pub fn synced(mut self) -> Zrecord {
        self.sync = true;
        self
    }

    /// Where the store was written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Backend for Zrecord {
    fn name(&self) -> String {
        if let Some(p) = &self.by_python {
            let release = p
                .release
                .as_deref()
                .and_then(Path::file_name)
                .map_or("2.4.6".into(), |r| r.to_string_lossy().into_owned());
            let runs = self
                .runs_found
                .map_or(String::new(), |r| format!(": {r} runs"));
            format!(
                "loaderx-rs zrecord {} over Python {release}'s store ({} lanes{runs})",
                self.codec, p.lanes
            )
        } else if let Some(run) = self.runs {
            let how = if run == 1 {
                "every record moved".to_string()
            } else {
                format!("reversed runs of {run}")
            };
            format!("loaderx-rs zrecord {}, {how}", self.codec)
        } else if self.packed {
            format!("loaderx-rs zrecord {}, 2.8.19 store, packed", self.codec)
        } else if self.sync {
            format!(
                "loaderx-rs zrecord {}, synced close (the default)",
                self.codec
            )
        } else {
            format!("loaderx-rs zrecord {}", self.codec)
        }
    }

    fn write(&mut self, w: &Workload, dir: &Path) -> Result<Duration> {
        self.path = dir.join(format!("zrecord_{}", self.codec));
        if let Some(p) = &self.by_python {
            let src = dir.join("source");
            crate::python::write_source(w, &src)?;
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/write_lanes.py");
            let mut cmd = std::process::Command::new(&p.python);
            if let Some(release) = &p.release {
                cmd.env("PYTHONPATH", release);
            }
            let out = cmd
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .arg(script)
                .args(["--lanes", &p.lanes.to_string(), "--kind"])
                .arg(if w.dense.is_some() { "dense" } else { "ragged" })
                .arg("--source")
                .arg(&src)
                .arg("--out")
                .arg(&self.path)
                .output()?;
            if !out.status.success() {
                return Err(format!(
                    "write_lanes.py failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let _ = std::fs::remove_dir_all(&src);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let v: serde_json::Value = serde_json::from_str(stdout.trim())?;
            let took = Duration::from_secs_f64(crate::python::num(&v, "write_s")?);
            self.runs_found = Some(count_runs(&self.path)?);
            self.reader = Some(match &w.dense {
                Some(_) => Reader::Dense(DynDense::open(&self.path)?),
                None => Reader::Ragged(DynRagged::open(&self.path)?),
            });
            return Ok(took);
        }
        // The 2.4.6 generation unless asked: the Python peer (loaderx
        // 2.4.6) reads these stores too.
        let mut opts = CreateOptions::new(self.codec)
            .sync_on_close(self.sync)
            .generation(self.generation);
        if let Some(d) = &self.dict {
            opts = opts.dict_bytes(d.clone());
        }
        let took = match &w.dense {
            Some(shape) => {
                let mut wr = DynDenseWriter::create(&self.path, w.dtype, shape, &opts)?;
                let started = Instant::now();
                wr.append_bytes(&w.flat, w.len())?;
                wr.close()?;
                started.elapsed()
            }
            None => {
                let mut wr = DynRaggedWriter::create(&self.path, w.dtype, w.ndim, &opts)?;
                let started = Instant::now();
                wr.append_bytes((0..w.len()).map(|i| (w.shape(i), w.record(i))))?;
                wr.close()?;
                started.elapsed()
            }
        };
        if let (Some(run), Some(_)) = (self.runs, &w.dense) {
            relayout(&self.path, w.range(0).len(), run)?;
        }
        self.reader = Some(match &w.dense {
            Some(_) => Reader::Dense(DynDense::open(&self.path)?),
            None => Reader::Ragged(DynRagged::open(&self.path)?),
        });
        Ok(took)
    }

    fn disk_bytes(&self) -> u64 {
        allocated(&self.path)
    }

    fn gather(&self, idx: &[u64]) -> Result<Box<dyn Gathered + Send>> {
        match &self.reader {
            Some(Reader::Dense(d)) => Ok(Box::new(Strided {
                buf: d.gather_bytes(idx)?,
                stride: d.record_bytes(),
            })),
            Some(Reader::Ragged(r)) if self.packed => {
                Ok(Box::new(RaggedOut(r.gather_packed(idx)?)))
            }
            Some(Reader::Ragged(r)) => Ok(Box::new(RaggedOut(r.gather(idx)?))),
            None => Err("gather before write".into()),
        }
    }
}

/// Runs of consecutive records in the store at `path`: per shard, 1 plus
/// the records not stored right after the shard's previous record.
pub fn count_runs(path: &Path) -> Result<u64> {
    let meta = std::fs::read(path.join(format::META_FILE))?;
    let head: [u8; format::HEADER_LEN] = meta
        .get(..format::HEADER_LEN)
        .ok_or("meta.zr too short")?
        .try_into()?;
    let header = format::Header::decode(&head);
    let shards = usize::from(header.data_shards).max(1);
    let n = usize::try_from(header.length)?;
    let table = meta
        .get(format::STATIC_PAGE_LEN..format::STATIC_PAGE_LEN + n * format::RECORD_LOC_LEN)
        .ok_or("location table too short")?;
    let loc = |id: usize| {
        let mut b = [0u8; format::RECORD_LOC_LEN];
        b.copy_from_slice(&table[id * format::RECORD_LOC_LEN..(id + 1) * format::RECORD_LOC_LEN]);
        RecordLoc::decode(&b)
    };
    let mut runs = shards.min(n) as u64;
    for id in shards..n {
        let (prev, this) = (loc(id - shards), loc(id));
        if prev.offset + u64::from(prev.phys_length) != this.offset {
            runs += 1;
        }
    }
    Ok(runs)
}

/// Rewrites the raw Dense store at `path` (records of `width` bytes, as the
/// writer laid them out) with each shard's runs of `run` records in reverse
/// order; see [`Zrecord::relaid`].
pub fn relayout(path: &Path, width: usize, run: usize) -> Result<()> {
    let meta = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path.join(format::META_FILE))?;
    let mut head = [0u8; format::HEADER_LEN];
    meta.read_exact_at(&mut head, 0)?;
    let header = format::Header::decode(&head);
    let shards = usize::from(header.data_shards);
    let n = usize::try_from(header.length)?;
    let mut table = vec![0u8; n * format::RECORD_LOC_LEN];
    for s in 0..shards {
        let file = path.join(format::data_file(s));
        let old = std::fs::read(&file)?;
        let count = (n + shards - 1 - s.min(n)) / shards;
        let mut new = Vec::with_capacity(old.len());
        for r in (0..count.div_ceil(run)).rev() {
            let first = r * run;
            let last = (first + run).min(count);
            for k in first..last {
                let loc = RecordLoc {
                    offset: new.len() as u64,
                    phys_length: width as u32,
                    logic_length: width as u32,
                };
                let id = k * shards + s;
                table[id * format::RECORD_LOC_LEN..(id + 1) * format::RECORD_LOC_LEN]
                    .copy_from_slice(&loc.encode());
                new.extend_from_slice(&old[k * width..(k + 1) * width]);
            }
        }
        File::create(&file)?.write_all_at(&new, 0)?;
    }
    meta.write_all_at(&table, format::STATIC_PAGE_LEN as u64)?;
    Ok(())
}
