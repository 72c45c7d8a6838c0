//! Train an MLP on Fashion-MNIST stores with candle, reading through loaderx.
//!
//! ```sh
//! loaderx convert idx /usr/share/datasets/fashion-mnist -o data/fashion
//! cargo run --release -p candle-mnist -- data/fashion
//! cargo run --release -p candle-mnist --features cuda -- data/fashion --device cuda
//! ```
//!
//! `--device cuda` fails with a message when the binary was built without
//! the `cuda` feature or no CUDA device can be opened; on CUDA it checks that
//! the batches were staged in pinned memory and prints the pool's counters.

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
    /// Where to train: `cpu`, or `cuda` (CUDA device 0; an error when
    /// CUDA is not compiled in or not present).
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

fn open_device(arg: DeviceArg) -> Result<Device, candle_mnist::Error> {
    match arg {
        DeviceArg::Cpu => Ok(Device::Cpu),
        DeviceArg::Cuda if !candle_core::utils::cuda_is_available() => Err(
            "--device cuda: this binary was built without CUDA; rebuild with `--features cuda`"
                .into(),
        ),
        // candle's message carries a backtrace after its first line.
        DeviceArg::Cuda => Device::new_cuda(0).map_err(|e| {
            let e = e.to_string();
            let first = e.lines().next().unwrap_or_default();
            format!("--device cuda: no usable CUDA device: {first}").into()
        }),
    }
}

#[cfg(feature = "cuda")]
fn check_pinned(device: &Device) -> Result<(), candle_mnist::Error> {
    if !device.is_cuda() {
        return Ok(());
    }
    match loaderx_candle::pinned_stats(device) {
        Some(s) if s.allocations > 0 => {
            println!(
                "pinned staging: yes ({} pinned buffers allocated, {} batches in recycled ones, {} waits on an upload, peak {} buffers / {} bytes live)",
                s.allocations, s.reuses, s.fence_waits, s.peak_live, s.live_bytes
            );
            Ok(())
        }
        _ => Err("pinned staging: no (no batch was gathered into pinned memory)".into()),
    }
}

#[cfg(not(feature = "cuda"))]
fn check_pinned(_: &Device) -> Result<(), candle_mnist::Error> {
    Ok(())
}

fn main() -> Result<(), candle_mnist::Error> {
    let a = Args::parse();
    let device = open_device(a.device)?;
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
    println!("where the training loader's time went:\n{}", report.loader);
    check_pinned(&device)
}
