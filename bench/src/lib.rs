//! The loaderx benchmark suite (`loaderx-bench`). Builds the workloads, runs every
//! contender in the same run and prints markdown tables with ratio columns
//! (progress on stderr). See `bench/README.md` for the
//! method and the latest tables.
//!
//! ```text
//! loaderx-bench [--quick] [--python PY] [--sections stores,small,sampler,sequence,loader,loader2,remote,scale,cold,vision,profile,stream]
//!               [--workloads a,b,c,d,e] [--min-seconds 2] [--dir DIR]
//! ```

pub mod cold;
pub mod loader;
pub mod plot;
pub mod profile;
pub mod python;
pub mod remote;
pub mod report;
pub mod sampler;
pub mod scale;
pub mod sequence;
pub mod stores;
pub mod stream;
pub mod suite;
pub mod timing;
pub mod vision;
pub mod workload;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// The loaderx benchmark suite.
#[derive(Parser, Debug)]
#[command(version, about)]
pub struct Args {
    /// Tiny workloads and short timings: a smoke run, not a measurement.
    #[arg(long)]
    pub quick: bool,
    /// Python with loaderx==2.4.6 (default: $LOADERX_PYTHON); without one
    /// the Python columns are left out.
    #[arg(long, env = "LOADERX_PYTHON")]
    pub python: Option<PathBuf>,
    /// A folder of per-release Python loaderx installs (`2.8.19/loaderx`,
    /// as the test command makes them; default: $LOADERX_PY_RELEASES): with
    /// `--python`, the loader section also runs Python loaderx 2.8.19's
    /// `Loader` over the same records in the 2.8.19 generation.
    #[arg(long, env = "LOADERX_PY_RELEASES")]
    pub py_releases: Option<PathBuf>,
    /// Sections to run (`vision` is not among the default ones: it needs
    /// its corpus, see `bench/README.md`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "stores,small,sampler,sequence,loader,loader2,remote,scale"
    )]
    pub sections: Vec<String>,
    /// Store workloads to run.
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,d,e")]
    pub workloads: Vec<String>,
    /// Minimum accumulated time per timed measurement, seconds.
    #[arg(long)]
    pub min_seconds: Option<f64>,
    /// Where the stores are written (default: a temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// `cold` section: GiB of records per store.
    #[arg(long, default_value_t = 4.0)]
    pub cold_gib: f64,
    /// `cold` section: the memory cgroup limit of each reader, MiB.
    #[arg(long, default_value_t = 512)]
    pub cold_limit_mib: u64,
    /// `cold` section: timed seconds per reader.
    #[arg(long, default_value_t = 5.0)]
    pub cold_seconds: f64,
    /// `stream` section: rows of its corpus (1 000 000: about 2.05 GB of
    /// parquet).
    #[arg(long, default_value_t = 1_000_000)]
    pub stream_rows: usize,
    /// `stream` section: SIGKILLed runs it resumes.
    #[arg(long, default_value_t = 100)]
    pub stream_kills: usize,
    /// `profile` section: seconds each profile measures (as `loaderx
    /// profile`'s default; at 5 s the measurements themselves scatter by
    /// about ±10 % on a 2-core machine).
    #[arg(long, default_value_t = 10.0)]
    pub profile_seconds: f64,
    /// `cold` section: rounds of `fio` and loaderx's default loader, run in
    /// turn (the medians are reported: a cloud disk's bandwidth drifts by
    /// a fifth from one run to the next).
    #[arg(long, default_value_t = 3)]
    pub cold_rounds: usize,
    /// `cold` section: workloads (4k, 64k, 1m, tokens, 64k-zstd).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "4k,64k,1m,tokens,64k-zstd"
    )]
    pub cold_workloads: Vec<String>,
    /// The `vision` section's Python: PIL and NumPy make its corpus, torch
    /// and torchvision run its peer (default: $LOADERX_VISION_PYTHON, else
    /// `--python`; without torchvision its rows are left out).
    #[arg(long, env = "LOADERX_VISION_PYTHON")]
    pub vision_python: Option<PathBuf>,
    /// The `vision` section's corpus (made by `python/make_vision_data.py`
    /// when incomplete; default: `$LOADERX_CACHE/data/vision-<images>`, or
    /// under `--dir` and removed after a `--quick` run).
    #[arg(long)]
    pub vision_data: Option<PathBuf>,
    /// Images in the `vision` corpus (default 20000; `--quick` 300).
    #[arg(long)]
    pub vision_images: Option<usize>,
    /// Where the report's SVG figures are written (throughput against
    /// workers, cold reads against fio, vision against torchvision);
    /// default: `bench/plots` of the source tree, none with `--quick`.
    #[arg(long)]
    pub plots: Option<PathBuf>,
    /// The `loaderx` CLI binary the corpus is converted with (default:
    /// $LOADERX_CLI, else `loaderx` beside this binary).
    #[arg(long, env = "LOADERX_CLI")]
    pub loaderx_cli: Option<PathBuf>,
    #[command(subcommand)]
    /// An internal subcommand; none runs the suite.
    pub command: Option<Child>,
}

/// Internal subcommands.
#[derive(Subcommand, Debug)]
pub enum Child {
    /// Internal: one loader contender in its own process.
    #[command(hide = true)]
    LoaderChild {
        /// `ours`, `ours-packed` (Ragged streams gathered packed) or `burn`.
        which: String,
        /// The Dense store to load.
        store: PathBuf,
        /// Records per batch.
        batch: usize,
        /// Worker threads.
        workers: usize,
        /// Prefetched batches.
        prefetch: usize,
        /// Minimum timed seconds.
        seconds: f64,
        /// A second Dense store (labels) loaded beside the first.
        #[arg(long)]
        label: Option<PathBuf>,
    },
    /// Internal: the loaderx reader of the `cold` section.
    #[command(hide = true)]
    ColdChild {
        /// The store to read.
        store: PathBuf,
        /// Records per batch.
        #[arg(long)]
        batch: usize,
        /// Worker threads (default: the loader's).
        #[arg(long)]
        workers: Option<usize>,
        /// A sampler mode: `iid`, `windowed:BLOCK:WINDOW`, ….
        #[arg(long, default_value = "iid")]
        order: String,
        /// `auto`, `mapped` or `direct` (default: the store's).
        #[arg(long)]
        read_mode: Option<String>,
        /// The look-ahead's bound, bytes (default: the loader's).
        #[arg(long)]
        prefetch_bytes: Option<u64>,
        /// Timed seconds.
        #[arg(long)]
        seconds: f64,
    },
    /// Internal: the `stream` section's resumable loader run.
    #[command(hide = true)]
    StreamChild {
        /// Parquet files where they live.
        location: String,
        /// The cache directory.
        cache: PathBuf,
        /// The first step.
        start: u64,
        /// Steps to run.
        steps: u64,
        /// Records per batch.
        batch: usize,
        /// Row groups per window.
        window: u32,
    },
    /// Internal: one `vision` contender in its own process.
    #[command(hide = true)]
    VisionChild {
        /// `ours`, `ours-full-decode`, `pixels` or `pixels-normalise`.
        which: String,
        /// The split directory (`image` and `label` stores).
        split: PathBuf,
        /// `train` or `eval`.
        pipeline: String,
        /// Worker threads.
        workers: usize,
        /// Minimum timed seconds.
        seconds: f64,
    },
}

impl Args {
    /// The directory the figures go to ([`plots`](Args::plots)), made;
    /// `None` for a `--quick` run without `--plots`.
    pub fn plot_dir(&self) -> std::io::Result<Option<PathBuf>> {
        let dir = match (&self.plots, self.quick) {
            (Some(d), _) => d.clone(),
            (None, true) => return Ok(None),
            (None, false) => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plots"),
        };
        std::fs::create_dir_all(&dir)?;
        Ok(Some(dir))
    }
}
