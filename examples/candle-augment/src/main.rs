//! Train a small CNN on Fashion-MNIST stored as encoded PNGs, with and
//! without pad-crop-flip augmentation on loaderx's workers, and compare.
//!
//! ```sh
//! cargo run --release -p candle-augment
//! ```
//!
//! The first run converts Debian's `dataset-fashion-mnist` IDX files
//! (`--idx`) into PNG stores under `--root`; later runs reuse them.

use std::path::PathBuf;

use candle_augment::{Augment, Config, Report, Schedule, prepare, train};
use candle_core::Device;
use clap::Parser;

/// Command-line options.
#[derive(Debug, Parser)]
struct Args {
    /// Fashion-MNIST's four IDX files (optionally .gz).
    #[arg(long, default_value = "/usr/share/datasets/fashion-mnist")]
    idx: PathBuf,
    /// The PNG stores (written from --idx when missing; default:
    /// $LOADERX_CACHE/data/fashion-mnist-png-<train-records>, LOADERX_CACHE
    /// defaulting to ~/.cache/loaderx).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Training records kept (the first ones of the training split): fewer
    /// records make the gain of augmentation plainer.
    #[arg(long, default_value_t = 1_000)]
    train_records: usize,
    /// Passes over the training records, the same for both runs.
    #[arg(long, default_value_t = 40)]
    epochs: u64,
    /// Records per step (32: 31 steps an epoch on 1 000 records).
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Loader worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// AdamW learning rate (at the first step).
    #[arg(long, default_value_t = 2e-3)]
    lr: f64,
    /// Learning-rate schedule: cosine (decay to zero over the run) or
    /// constant.
    #[arg(long, default_value = "cosine")]
    schedule: String,
    /// AdamW's decoupled weight decay.
    #[arg(long, default_value_t = 0.01)]
    weight_decay: f64,
    /// Zero pixels padded on every side before the random 28×28 crop of the
    /// augmented run (the largest shift, in pixels).
    #[arg(long, default_value_t = 1)]
    pad: u32,
    /// Leave out the random horizontal flip of the augmented run.
    #[arg(long)]
    no_flip: bool,
    /// Seed of the weights, the sampler and the augmentation.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Which runs: both, plain (no augmentation) or augment.
    #[arg(long, default_value = "both")]
    runs: String,
}

fn default_root(train_records: usize) -> PathBuf {
    let cache = std::env::var_os("LOADERX_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/loaderx")))
        .unwrap_or_else(|| PathBuf::from("."));
    cache
        .join("data")
        .join(format!("fashion-mnist-png-{train_records}"))
}

fn main() -> Result<(), candle_augment::Error> {
    let a = Args::parse();
    let root = a.root.unwrap_or_else(|| default_root(a.train_records));
    if !root.exists() {
        println!(
            "writing {} training and the test images as PNG records to {}",
            a.train_records,
            root.display()
        );
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent)?;
        }
        prepare(&a.idx, &root, a.train_records)?;
    }
    let augmented = Augment::PadCropFlip {
        pad: a.pad,
        flip: !a.no_flip,
    };
    let runs: &[Augment] = match a.runs.as_str() {
        "both" => &[Augment::None, augmented],
        "plain" => &[Augment::None],
        "augment" => &[augmented],
        other => return Err(format!("--runs {other}: want both, plain or augment").into()),
    };
    let schedule = match a.schedule.as_str() {
        "cosine" => Schedule::Cosine,
        "constant" => Schedule::Constant,
        other => return Err(format!("--schedule {other}: want cosine or constant").into()),
    };
    let config = Config {
        root,
        epochs: a.epochs,
        batch_size: a.batch_size,
        workers: a.workers,
        lr: a.lr,
        schedule,
        weight_decay: a.weight_decay,
        seed: a.seed,
        eval_batch_size: 1000,
    };
    let reports: Vec<Report> = runs
        .iter()
        .map(|&augment| train(&config, augment, &Device::Cpu))
        .collect::<Result<_, _>>()?;
    println!(
        "\n{} training records, batch {}, AdamW {} ({schedule:?}, weight decay {}), seed {}",
        a.train_records, config.batch_size, config.lr, config.weight_decay, config.seed
    );
    println!(
        "| augmentation | epochs | final train loss | test accuracy | train time | waited on the loader |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &reports {
        println!(
            "| {} | {} | {:.4} | {:.2}% | {:.0} s | {:.1}% |",
            r.augment,
            config.epochs,
            r.losses.last().map_or(f32::NAN, |l| l.1),
            r.test_accuracy * 100.0,
            r.elapsed.as_secs_f64(),
            r.wait_share * 100.0
        );
    }
    for r in &reports {
        println!(
            "\nwhere the training loader's time went ({}):\n{}",
            r.augment, r.loader
        );
    }
    Ok(())
}
