//! Train an MLP on Fashion-MNIST stores with candle, reading through loaderx.
//!
//! ```sh
//! loaderx convert idx /usr/share/datasets/fashion-mnist data/fashion
//! cargo run --release -p candle-mnist -- data/fashion
//! ```

use candle_core::Device;
use clap::Parser;

/// Command-line options.
#[derive(Debug, Parser)]
struct Args {
    /// Converted root holding train/{image,label} and test/{image,label}.
    root: std::path::PathBuf,
    /// Passes over the training split.
    #[arg(long, default_value_t = 5)]
    epochs: u64,
    /// Records per step.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// Loader worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Hidden units.
    #[arg(long, default_value_t = 256)]
    hidden: usize,
    /// AdamW learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Sampler seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Records per evaluation batch (any size: every test record is used once).
    #[arg(long, default_value_t = 1000)]
    eval_batch_size: usize,
    /// Use CUDA device 0 when available.
    #[arg(long)]
    cuda: bool,
}

fn main() -> Result<(), candle_mnist::Error> {
    let a = Args::parse();
    let device = if a.cuda {
        Device::cuda_if_available(0)?
    } else {
        Device::Cpu
    };
    let config = candle_mnist::Config {
        root: a.root,
        epochs: a.epochs,
        batch_size: a.batch_size,
        workers: a.workers,
        hidden: a.hidden,
        lr: a.lr,
        seed: a.seed,
        eval_batch_size: a.eval_batch_size,
    };
    let (_, report) = candle_mnist::train(&config, &device)?;
    let (_, _, accuracy) = report.epochs.last().copied().unwrap_or((0, 0.0, 0.0));
    println!(
        "trained {} epochs in {:.1}s: test accuracy {:.2}%, loader delivered {:.0} records/s, training waited on it {:.1}% of the time",
        config.epochs,
        report.elapsed.as_secs_f64(),
        accuracy * 100.0,
        report.records_per_s,
        report.wait_share * 100.0
    );
    Ok(())
}
