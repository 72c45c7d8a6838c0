//! An MLP classifier for 28×28 images, trained with candle-nn on batches from
//! loaderx.
//!
//! The data is a converted root (`loaderx convert idx`):
//! `ROOT/{train,test}/{image,label}` with Dense u8 `[28, 28]` images and u8
//! scalar labels. Batches are decoded, normalised to `f32` and moved to the
//! device on the loader's worker threads.

use std::path::Path;
use std::time::{Duration, Instant};

use candle_core::{D, DType, Device, Module, Tensor};
use candle_nn::{AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap, linear, loss};
use loaderx_candle::{Batcher, CandleLoaderExt};
use loaderx_core::SamplerMode;
use loaderx_core::{DataLoader, Dense, LoaderStats};

/// Any error of the example.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Training settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Converted data root.
    pub root: std::path::PathBuf,
    /// Passes over the training split.
    pub epochs: u64,
    /// Records per step.
    pub batch_size: usize,
    /// Loader worker threads.
    pub workers: usize,
    /// Hidden units.
    pub hidden: usize,
    /// AdamW learning rate.
    pub lr: f64,
    /// Sampler seed.
    pub seed: u64,
    /// Records per evaluation batch: any size, the last batch is partial.
    pub eval_batch_size: usize,
}

/// Two linear layers with a ReLU between.
pub struct Mlp {
    hidden: Linear,
    out: Linear,
}

impl Mlp {
    /// A fresh model of `inputs → hidden → classes`.
    pub fn new(
        vb: VarBuilder<'_>,
        inputs: usize,
        hidden: usize,
        classes: usize,
    ) -> candle_core::Result<Mlp> {
        Ok(Mlp {
            hidden: linear(inputs, hidden, vb.pp("hidden"))?,
            out: linear(hidden, classes, vb.pp("out"))?,
        })
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.out.forward(&self.hidden.forward(x)?.relu()?)
    }
}

/// A model-ready batch: `(B, 784)` f32 inputs in `[0, 1]`, `(B,)` u32 targets.
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
    device: &Device,
) -> Result<DataLoader<Example>, Error> {
    let images = Dense::<u8>::open(root.join(split).join("image"))?;
    let inputs: usize = images.item_shape().iter().product();
    Ok(DataLoader::builder()
        .stream("image", images)
        .stream("label", Dense::<u8>::open(root.join(split).join("label"))?)
        .batch_size(batch_size)
        .mode(mode)
        .seed(seed)
        .workers(workers)
        .build_candle_with(device, move |batch| {
            let image = batch.dense("image")?;
            let b = image.dims()[0];
            let x = (image.to_dtype(DType::F32)?.reshape((b, inputs))? / 255.0)?;
            let y = batch.dense("label")?.to_dtype(DType::U32)?;
            Ok(Example { x, y })
        })?)
}

/// One optimiser step; returns the batch loss.
pub fn train_step(model: &Mlp, opt: &mut AdamW, batch: &Example) -> candle_core::Result<f32> {
    let loss = loss::cross_entropy(&model.forward(&batch.x)?, &batch.y)?;
    opt.backward_step(&loss)?;
    loss.to_scalar::<f32>()
}

/// Correct predictions in a batch.
pub fn correct(model: &Mlp, batch: &Example) -> candle_core::Result<u64> {
    let predicted = model.forward(&batch.x)?.argmax(D::Minus1)?;
    Ok(predicted
        .eq(&batch.y)?
        .to_dtype(DType::F32)?
        .sum_all()?
        .to_scalar::<f32>()? as u64)
}

/// Accuracy over every record of a split: one finite pass in order, in
/// batches of `batch_size` (any size; the last batch is partial), through
/// [`loaderx_candle::Batcher`].
pub fn evaluate(
    model: &Mlp,
    root: &Path,
    split: &str,
    batch_size: usize,
    device: &Device,
) -> Result<f64, Error> {
    let images = Dense::<u8>::open(root.join(split).join("image"))?;
    let labels = Dense::<u8>::open(root.join(split).join("label"))?;
    let (n, inputs) = (labels.len(), images.item_shape().iter().product::<usize>());
    let (mut hits, mut seen) = (0, 0);
    for pair in Batcher::new2(images, labels)
        .batch_size(batch_size)
        .return_last_incomplete_batch(true)
        .iter(device)?
    {
        let (xs, ys) = pair?;
        let b = xs.dims()[0];
        let example = Example {
            x: (xs.to_dtype(DType::F32)?.reshape((b, inputs))? / 255.0)?,
            y: ys.to_dtype(DType::U32)?,
        };
        hits += correct(model, &example)?;
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
    pub epochs: Vec<(u64, f32, f64)>,
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
pub fn train(config: &Config, device: &Device) -> Result<(Mlp, Report), Error> {
    let root = &config.root;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
    let model = Mlp::new(vb, 28 * 28, config.hidden, 10)?;
    let mut opt = AdamW::new(
        varmap.all_vars(),
        ParamsAdamW {
            lr: config.lr,
            ..Default::default()
        },
    )?;
    let mut train = loader(
        root,
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
            let batch = train.next().ok_or("the loader ended")??;
            total += train_step(&model, &mut opt, &batch)?;
        }
        let loss = total / steps as f32;
        let accuracy = evaluate(&model, root, "test", config.eval_batch_size, device)?;
        println!(
            "epoch {epoch}: loss {loss:.4}, test accuracy {:.2}%",
            accuracy * 100.0
        );
        report.epochs.push((epoch, loss, accuracy));
    }
    report.elapsed = started.elapsed();
    let records = config.epochs * steps * config.batch_size as u64;
    report.records_per_s = records as f64 / report.elapsed.as_secs_f64();
    report.loader = train.stats();
    report.wait_share = report.loader.input_share();
    Ok((model, report))
}
