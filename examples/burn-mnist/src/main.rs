//! Train an MLP on Fashion-MNIST stores with burn's Learner, reading through
//! loaderx-burn.
//!
//! ```sh
//! loaderx convert idx /usr/share/datasets/fashion-mnist -o data/fashion
//! cargo run --release -p burn-mnist -- data/fashion --compare-loaders
//! # resume after epoch 6 of an earlier run (its checkpoints are in --artifacts):
//! cargo run --release -p burn-mnist -- data/fashion --epochs 10 --start-epoch 6
//! # burn's CUDA backend, uploads staged in pinned memory:
//! cargo run --release -p burn-mnist --features cuda -- data/fashion --device cuda
//! # burn's LibTorch backend on CUDA (LIBTORCH: a CUDA libtorch), uploads
//! # pinned and non-blocking:
//! cargo run --release -p burn-mnist --features tch -- data/fashion --backend tch --device cuda
//! ```

use burn::tensor::Device;
use clap::Parser;

/// Command-line options.
#[derive(Debug, Parser)]
struct Args {
    /// Converted root holding train/{image,label} and test/{image,label}.
    root: std::path::PathBuf,
    /// Epochs to train in all (the default reaches about 88% test accuracy
    /// on Fashion-MNIST in about 20 s on two CPU cores).
    #[arg(long, default_value_t = 10)]
    epochs: usize,
    /// Resume after this many finished epochs (from the checkpoints of an
    /// earlier run with the same --artifacts).
    #[arg(long, default_value_t = 0)]
    start_epoch: usize,
    /// Records per step.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// Records per evaluation step; any size works (the test pass reads
    /// every record once, its last batch partial).
    #[arg(long, default_value_t = 1000)]
    eval_batch_size: usize,
    /// Loader worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Hidden units.
    #[arg(long, default_value_t = 256)]
    hidden: usize,
    /// Adam learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Sampler and initialisation seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// First time one epoch of this crate's loader against burn's own
    /// DataLoaderBuilder over the same stores.
    #[arg(long)]
    compare_loaders: bool,
    /// Where burn writes its logs and checkpoints.
    #[arg(long, default_value = "target/burn-mnist")]
    artifacts: std::path::PathBuf,
    /// Where to train: `cpu` or `cuda` (device 0).
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    device: DeviceArg,
    /// Which burn backend runs the device: `native` (flex on the CPU,
    /// burn's CUDA backend on CUDA, feature `cuda`) or `tch` (burn's
    /// LibTorch backend, feature `tch`).
    #[arg(long, value_enum, default_value_t = BackendArg::Native)]
    backend: BackendArg,
}

/// The `--device` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DeviceArg {
    /// The CPU.
    Cpu,
    /// CUDA device 0.
    Cuda,
}

/// The `--backend` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendArg {
    /// burn's own backends: flex (CPU) and CUDA (cubecl).
    Native,
    /// burn's LibTorch backend.
    Tch,
}

fn open_device(backend: BackendArg, device: DeviceArg) -> Result<Device, burn_mnist::Error> {
    match (backend, device) {
        (BackendArg::Native, DeviceArg::Cpu) => Ok(Device::flex()),
        #[cfg(feature = "cuda")]
        (BackendArg::Native, DeviceArg::Cuda) => probe_cuda(Device::cuda(0)),
        #[cfg(not(feature = "cuda"))]
        (BackendArg::Native, DeviceArg::Cuda) => Err(
            "--device cuda: this binary was built without CUDA; rebuild with `--features cuda`"
                .into(),
        ),
        #[cfg(feature = "tch")]
        #[allow(deprecated)] // burn-tch is deprecated upstream, still shipped in 0.22
        (BackendArg::Tch, DeviceArg::Cpu) => Ok(Device::libtorch()),
        #[cfg(feature = "tch")]
        #[allow(deprecated)]
        (BackendArg::Tch, DeviceArg::Cuda) => probe_cuda(Device::libtorch_cuda(0)),
        #[cfg(not(feature = "tch"))]
        (BackendArg::Tch, _) => Err(
            "--backend tch: this binary was built without LibTorch; rebuild with `--features tch`"
                .into(),
        ),
    }
}

/// `device` once it has run one upload and read-back: burn's backends
/// create the CUDA context on first use and panic when there is none
/// (cubecl on its runtime thread, which the caller sees as a closed
/// channel; libtorch through tch), so the probe turns a machine without a
/// usable GPU into one error line with the first panic's message, e.g. the
/// driver's `CUDA_ERROR_NO_DEVICE` (the panics' own reports are silenced
/// while probing).
#[cfg(any(feature = "cuda", feature = "tch"))]
fn probe_cuda(device: Device) -> Result<Device, burn_mnist::Error> {
    use burn::tensor::{Tensor, TensorData};
    use std::sync::{Arc, Mutex};
    let first: Arc<Mutex<Option<String>>> = Arc::default();
    let seen = Arc::clone(&first);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| info.to_string());
        if let Ok(mut first) = seen.lock() {
            first.get_or_insert(message);
        }
    }));
    let probe = std::panic::catch_unwind(|| {
        Tensor::<1>::from_data(TensorData::new(vec![1.0f32], [1]), &device).into_data()
    });
    std::panic::set_hook(hook);
    match probe {
        Ok(_) => Ok(device),
        Err(_) => {
            let why = first
                .lock()
                .ok()
                .and_then(|m| m.clone())
                .unwrap_or_else(|| "the CUDA runtime failed".to_owned());
            Err(format!("--device cuda: no usable CUDA device: {why}").into())
        }
    }
}

fn main() -> Result<(), burn_mnist::Error> {
    let a = Args::parse();
    let config = burn_mnist::Config {
        root: a.root,
        artifacts: a.artifacts,
        epochs: a.epochs,
        start_epoch: a.start_epoch,
        batch_size: a.batch_size,
        eval_batch_size: a.eval_batch_size,
        workers: a.workers,
        hidden: a.hidden,
        lr: a.lr,
        seed: a.seed,
    };
    let device = open_device(a.backend, a.device)?;
    if a.compare_loaders {
        let (ours, burns) = burn_mnist::compare_loaders(&config, &device)?;
        println!(
            "one training epoch as tensors: loaderx-burn {ours:.0} records/s, \
             burn's DataLoaderBuilder over the same stores {burns:.0} records/s ({:.1}x)",
            ours / burns
        );
    }
    let (model, report) = burn_mnist::train(&config, &device)?;
    let eval = burn_mnist::evaluate(
        &model,
        &config.root,
        "test",
        config.eval_batch_size,
        config.workers,
        &device,
    )?;
    println!(
        "test set, batches of {}: accuracy {:.2}% ({} of {} records)",
        config.eval_batch_size,
        eval.accuracy(),
        eval.correct,
        eval.total
    );
    let accuracy = report.epochs.last().map_or(0.0, |e| e.test_accuracy);
    println!(
        "trained {} epochs in {:.1}s: test accuracy {:.2}%; loader alone {:.0} records/s \
         ({:.1} MB/s to the device), training {:.0} records/s, the Learner waited on the \
         loader {:.1}% of the time",
        report.epochs.len(),
        report.elapsed.as_secs_f64(),
        accuracy,
        report.loader.records_per_s,
        report.loader.bytes_per_s / 1e6,
        report.train_records_per_s,
        report.wait_share * 100.0
    );
    println!("where the training loader's time went:\n{}", report.stages);
    if a.device == DeviceArg::Cuda {
        // Read back from the uploaded batches' bytes, not assumed.
        let s = loaderx_burn::staging_stats();
        if s.pinned == 0 {
            return Err(format!(
                "pinned staging: no ({} tensors uploaded from pageable memory)",
                s.pageable
            )
            .into());
        }
        println!(
            "pinned staging: yes ({} tensors uploaded from pinned memory, {} from pageable)",
            s.pinned, s.pageable
        );
    }
    Ok(())
}
