//! Train an MLP on Fashion-MNIST stores with tch, reading through loaderx.
//!
//! ```sh
//! loaderx convert idx /usr/share/datasets/fashion-mnist -o data/fashion
//! LIBTORCH=$(scripts/libtorch) cargo run --release -p tch-mnist -- data/fashion
//! # with a CUDA libtorch (scripts/libtorch --cuda, or PyTorch's) and a GPU:
//! cargo run --release -p tch-mnist -- data/fashion --device cuda
//! ```

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
    hidden: i64,
    /// Adam learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Sampler and weight seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Records per evaluation batch (any size: every test record is used once).
    #[arg(long, default_value_t = 1000)]
    eval_batch_size: usize,
    /// Where to train: `cpu`, or `cuda` (CUDA device 0; an error when the
    /// libtorch in use has no CUDA or no GPU is present).
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    device: DeviceArg,
}

/// The `--device` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DeviceArg {
    /// The CPU.
    Cpu,
    /// CUDA device 0.
    Cuda,
}

fn main() -> Result<(), tch_mnist::Error> {
    let a = Args::parse();
    let device = match a.device {
        DeviceArg::Cpu => tch::Device::Cpu,
        DeviceArg::Cuda if !tch::Cuda::is_available() => {
            return Err(format!(
                "--device cuda: CUDA is not available to libtorch ({} CUDA devices; \
                 a CPU-only libtorch, or no GPU and driver)",
                tch::Cuda::device_count()
            )
            .into());
        }
        DeviceArg::Cuda => tch::Device::Cuda(0),
    };
    println!("device: {device:?}");
    let config = tch_mnist::Config {
        root: a.root,
        epochs: a.epochs,
        batch_size: a.batch_size,
        workers: a.workers,
        hidden: a.hidden,
        lr: a.lr,
        seed: a.seed,
        eval_batch_size: a.eval_batch_size,
    };
    let report = tch_mnist::train(&config, device)?;
    let accuracy = report.epochs.last().map_or(0.0, |e| e.2);
    println!(
        "trained {} epochs in {:.1}s: test accuracy {:.2}%, loader delivered {:.0} records/s, training waited on it {:.1}% of the time",
        config.epochs,
        report.elapsed.as_secs_f64(),
        accuracy * 100.0,
        report.records_per_s,
        report.wait_share * 100.0
    );
    println!("where the training loader's time went:\n{}", report.loader);
    if device.is_cuda() {
        let s = loaderx_tch::staging_stats();
        if s.pinned == 0 {
            return Err(format!(
                "pinned staging: no ({} batches left in pageable memory)",
                s.pageable
            )
            .into());
        }
        println!(
            "pinned staging: yes ({} batches gathered into pinned host tensors, {} pageable)",
            s.pinned, s.pageable
        );
    }
    Ok(())
}
