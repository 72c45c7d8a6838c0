//! An MLP classifier for 28×28 images, trained with tch on batches from
//! loaderx (`ROOT/{train,test}/{image,label}` from `loaderx convert idx`).
//! Batches are decoded, normalised and moved to the device on the loader's
//! worker threads; with CUDA they are staged in pinned memory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loaderx_core::SamplerMode;
use loaderx_core::{DataLoader, Dense, LoaderStats};
use loaderx_tch::{Iter2, TchLoaderExt};
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

/// Any error of the example.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Training settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Converted data root.
    pub root: PathBuf,
    /// Passes over the training split.
    pub epochs: u64,
    /// Records per step.
    pub batch_size: usize,
    /// Loader worker threads.
    pub workers: usize,
    /// Hidden units.
    pub hidden: i64,
    /// Adam learning rate.
    pub lr: f64,
    /// Sampler and weight seed.
    pub seed: u64,
    /// Records per evaluation batch: any size, the last batch is partial.
    pub eval_batch_size: usize,
}

/// A model-ready batch: `(B, 784)` float inputs in `[0, 1]`, `(B,)` int64 targets.
pub struct Example {
    /// Inputs.
    pub x: Tensor,
    /// Class indices.
    pub y: Tensor,
}

/// A loader over `ROOT/<split>` yielding [`Example`]s on `device`.
pub fn loader(
    root: &Path,
    split: &str,
    batch_size: usize,
    mode: SamplerMode,
    seed: u64,
    workers: usize,
    device: Device,
) -> Result<DataLoader<Example>, Error> {
    Ok(DataLoader::builder()
        .stream("image", Dense::<u8>::open(root.join(split).join("image"))?)
        .stream("label", Dense::<u8>::open(root.join(split).join("label"))?)
        .batch_size(batch_size)
        .mode(mode)
        .seed(seed)
        .workers(workers)
        .build_tch_with(device, |batch| {
            let image = batch.dense("image")?;
            let b = image.size()[0];
            let x = image
                .f_to_kind(Kind::Float)?
                .f_view([b, -1])?
                .f_div_scalar(255.0)?;
            let y = batch.dense("label")?.f_to_kind(Kind::Int64)?;
            Ok(Example { x, y })
        })?)
}

/// `inputs → hidden → 10` with a ReLU.
pub fn model(vs: &nn::Path<'_>, inputs: i64, hidden: i64) -> impl Module + use<> {
    nn::seq()
        .add(nn::linear(
            vs / "hidden",
            inputs,
            hidden,
            Default::default(),
        ))
        .add_fn(|x| x.relu())
        .add(nn::linear(vs / "out", hidden, 10, Default::default()))
}

/// Accuracy over every record of a split: one finite pass in order, in
/// batches of `batch_size` (any size; the last batch is partial), through
/// [`loaderx_tch::Iter2`].
pub fn evaluate(
    net: &impl Module,
    root: &Path,
    split: &str,
    batch_size: usize,
    device: Device,
) -> Result<f64, Error> {
    let labels = Dense::<u8>::open(root.join(split).join("label"))?;
    let n = labels.len();
    let images = Dense::<u8>::open(root.join(split).join("image"))?;
    let (mut hits, mut seen) = (0i64, 0u64);
    let _guard = tch::no_grad_guard();
    let mut pairs = Iter2::new(images, labels, batch_size);
    pairs.to_device(device).return_smaller_last_batch();
    for pair in pairs {
        let (xs, ys) = pair?;
        let b = xs.size()[0];
        let x = xs
            .f_to_kind(Kind::Float)?
            .f_view([b, -1])?
            .f_div_scalar(255.0)?;
        let predicted = net.forward(&x).f_argmax(-1, false)?;
        hits += predicted
            .f_eq_tensor(&ys.f_to_kind(Kind::Int64)?)?
            .f_sum(Kind::Int64)?
            .int64_value(&[]);
        seen += b as u64;
    }
    if seen != n {
        return Err(format!("evaluated {seen} of {n} records").into());
    }
    Ok(hits as f64 / n as f64)
}

/// What a training run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// `(epoch, mean loss, test accuracy)` per epoch.
    pub epochs: Vec<(u64, f64, f64)>,
    /// Records per second the loader delivered over the whole run.
    pub records_per_s: f64,
    /// Share of the run the training loop spent waiting for the loader
    /// (the loader's recorder: [`LoaderStats::input_share`]).
    pub wait_share: f64,
    /// Wall time of training.
    pub elapsed: Duration,
    /// Where the training loader's time went, per stage.
    pub loader: LoaderStats,
}

/// Trains an MLP as `config` says, printing per-epoch loss and accuracy.
pub fn train(config: &Config, device: Device) -> Result<Report, Error> {
    tch::manual_seed(config.seed as i64);
    let vs = nn::VarStore::new(device);
    let net = model(&vs.root(), 28 * 28, config.hidden);
    let mut opt = nn::Adam::default().build(&vs, config.lr)?;
    let mut train = loader(
        &config.root,
        "train",
        config.batch_size,
        SamplerMode::Cyclic,
        config.seed,
        config.workers,
        device,
    )?;
    let steps = train.steps_per_epoch();
    let started = Instant::now();
    let mut report = Report {
        epochs: Vec::new(),
        records_per_s: 0.0,
        wait_share: 0.0,
        elapsed: Duration::ZERO,
        loader: LoaderStats::default(),
    };
    for epoch in 1..=config.epochs {
        let mut total = 0.0;
        for _ in 0..steps {
            let e = train.next().ok_or("the loader ended")??;
            let loss = net
                .forward(&e.x)
                .f_log_softmax(-1, Kind::Float)?
                .f_nll_loss(&e.y, None::<Tensor>, tch::Reduction::Mean, -100)?;
            opt.backward_step(&loss);
            total += loss.double_value(&[]);
        }
        let loss = total / steps as f64;
        let accuracy = evaluate(&net, &config.root, "test", config.eval_batch_size, device)?;
        println!(
            "epoch {epoch}: loss {loss:.4}, test accuracy {:.2}%",
            accuracy * 100.0
        );
        report.epochs.push((epoch, loss, accuracy));
    }
    report.elapsed = started.elapsed();
    report.records_per_s =
        (config.epochs * steps * config.batch_size as u64) as f64 / report.elapsed.as_secs_f64();
    report.loader = train.stats();
    report.wait_share = report.loader.input_share();
    Ok(report)
}
