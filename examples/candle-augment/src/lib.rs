//! A small CNN trained with candle-nn on Fashion-MNIST stored as encoded
//! PNGs, decoded (and, for one of the two runs, augmented) on loaderx's
//! workers.
//!
//! [`prepare`] turns the four IDX files of Fashion-MNIST into a root of
//! stores: `ROOT/{train,test}/image` (Ragged `u8` records, each the bytes of
//! one 28×28 grayscale PNG) and `ROOT/{train,test}/label` (Dense `u8`).
//! [`train`] then trains the same CNN twice for the same epochs from the
//! same initial weights and seed: once on the images as they are, once with
//! pad-crop-flip augmentation (zero padding of a few pixels, a random 28×28
//! crop, a random horizontal flip), drawn anew for every record of every
//! step by the loader's `vision` stage. Both are evaluated on the test
//! split (decoded, not augmented).

use std::path::Path;
use std::time::{Duration, Instant};

use candle_core::{D, DType, Device, Module, Tensor};
use candle_nn::{
    AdamW, Conv2d, Conv2dConfig, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap, conv2d,
    linear, loss,
};
use loaderx_candle::CandleLoaderExt;
use loaderx_core::vision::{ColorMode, OutputType, Pipeline};
use loaderx_core::{
    Codec, DataLoader, Dense, DenseWriter, LoaderStats, Ragged, RaggedWriter, SamplerMode,
};

/// Any error of the example.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The side of a Fashion-MNIST image.
pub const SIDE: usize = 28;
/// The classes.
pub const CLASSES: usize = 10;

/// Writes `pixels` (row-major, one byte per pixel) as an 8-bit grayscale
/// PNG.
pub fn encode_png(pixels: &[u8], width: u32, height: u32) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(pixels)?;
    writer.finish()?;
    Ok(out)
}

/// Writes one split: its images as PNG records and its labels.
pub fn write_split(
    root: &Path,
    split: &str,
    images: &[u8],
    labels: &[u8],
    records: usize,
) -> Result<(), Error> {
    let n = records.min(labels.len());
    let dir = root.join(split);
    let mut w = RaggedWriter::<u8>::create(dir.join("image"), 1, Codec::Raw)?;
    // Appended a thousand at a time: the writer validates each batch whole.
    for start in (0..n).step_by(1000) {
        let stop = (start + 1000).min(n);
        let encoded = (start..stop)
            .map(|i| {
                let px = &images[i * SIDE * SIDE..(i + 1) * SIDE * SIDE];
                encode_png(px, SIDE as u32, SIDE as u32)
            })
            .collect::<Result<Vec<_>, _>>()?;
        w.append(encoded)?;
    }
    w.close()?;
    let mut w = DenseWriter::<u8>::create(dir.join("label"), &[], Codec::Raw)?;
    w.append_slice(&labels[..n], n)?;
    w.close()?;
    Ok(())
}

/// Converts Fashion-MNIST's IDX files in `idx_dir` (`train-images-idx3-ubyte`
/// etc., optionally `.gz`) into the PNG stores under `root` (which must not
/// exist), keeping the first `train_records` training records. Written
/// under a temporary name and renamed, so a root that exists is complete.
pub fn prepare(idx_dir: &Path, root: &Path, train_records: usize) -> Result<(), Error> {
    let staging = root.with_extension("partial");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    for (split, prefix, records) in [
        ("train", "train", train_records),
        ("test", "t10k", usize::MAX),
    ] {
        let images = read_idx(idx_dir, &format!("{prefix}-images-idx3-ubyte"))?;
        let labels = read_idx(idx_dir, &format!("{prefix}-labels-idx1-ubyte"))?;
        if images.dims[1..] != [SIDE, SIDE] || labels.dims[0] != images.dims[0] {
            return Err(
                format!("{}: not 28×28 images with a label each", idx_dir.display()).into(),
            );
        }
        write_split(&staging, split, &images.data, &labels.data, records)?;
    }
    std::fs::rename(&staging, root)?;
    Ok(())
}

/// `name` or `name.gz` in `dir`.
fn read_idx(dir: &Path, name: &str) -> Result<loaderx_convert::idx::IdxArray, Error> {
    let plain = dir.join(name);
    let path = if plain.exists() {
        plain
    } else {
        dir.join(format!("{name}.gz"))
    };
    Ok(loaderx_convert::idx::read_idx(path)?)
}

/// Two 3×3 convolutions (16 and 32 channels, each followed by ReLU and a
/// 2×2 max-pool), then 128 hidden units and the classes.
pub struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    hidden: Linear,
    out: Linear,
}

impl Cnn {
    /// A fresh model.
    pub fn new(vb: VarBuilder<'_>) -> candle_core::Result<Cnn> {
        let same = Conv2dConfig {
            padding: 1,
            ..Default::default()
        };
        Ok(Cnn {
            conv1: conv2d(1, 16, 3, same, vb.pp("conv1"))?,
            conv2: conv2d(16, 32, 3, same, vb.pp("conv2"))?,
            hidden: linear(32 * 7 * 7, 128, vb.pp("hidden"))?,
            out: linear(128, CLASSES, vb.pp("out"))?,
        })
    }
}

impl Module for Cnn {
    /// `(B, 1, 28, 28)` f32 → `(B, 10)` logits.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let x = self.conv1.forward(x)?.relu()?.max_pool2d(2)?;
        let x = self.conv2.forward(&x)?.relu()?.max_pool2d(2)?;
        let x = self.hidden.forward(&x.flatten_from(1)?)?.relu()?;
        self.out.forward(&x)
    }
}

/// A model-ready batch: `(B, 1, 28, 28)` f32 inputs, `(B,)` u32 targets.
pub struct Example {
    /// Inputs.
    pub x: Tensor,
    /// Class indices.
    pub y: Tensor,
}

/// What the loader does to the images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Augment {
    /// Decode only.
    None,
    /// Decode, pad `pad` pixels (zeros) on every side, a random 28×28 crop
    /// (a shift of up to `pad` pixels each way), then, when `flip`, a
    /// horizontal flip with probability 0.5.
    PadCropFlip {
        /// Zero pixels added on every side before the crop.
        pad: u32,
        /// Whether to flip left to right half of the time.
        flip: bool,
    },
}

impl std::fmt::Display for Augment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Augment::None => f.write_str("none"),
            Augment::PadCropFlip { pad, flip } => {
                write!(f, "pad {pad} + random crop {SIDE}")?;
                if flip {
                    f.write_str(" + hflip")?;
                }
                Ok(())
            }
        }
    }
}

/// The `vision` stage for `augment`: decode the PNG (grayscale), augment,
/// scale to `[0, 1]` `f32`, `[1, 28, 28]` (CHW).
pub fn pipeline(augment: Augment) -> Pipeline {
    let p = Pipeline::new().mode(ColorMode::Gray);
    let p = match augment {
        // Fixes the output size; a 28×28 image is left as it is.
        Augment::None => p.center_crop(SIDE as u32),
        Augment::PadCropFlip { pad, flip } => {
            let p = p.pad_random_crop(SIDE as u32, pad);
            if flip { p.hflip(0.5) } else { p }
        }
    };
    p.output(OutputType::F32)
}

/// How the learning rate moves over the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// The base rate throughout.
    Constant,
    /// Cosine decay from the base rate at the first step to zero after the
    /// last one.
    Cosine,
}

impl Schedule {
    /// The learning rate of step `step` (from 0) of `total`.
    pub fn lr(self, base: f64, step: u64, total: u64) -> f64 {
        match self {
            Schedule::Constant => base,
            Schedule::Cosine => {
                let t = step as f64 / total.max(1) as f64;
                base * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
            }
        }
    }
}

/// A loader over `ROOT/<split>` yielding [`Example`]s on `device`, the
/// images decoded (and augmented as `augment` says) on the workers.
#[allow(clippy::too_many_arguments)]
pub fn loader(
    root: &Path,
    split: &str,
    augment: Augment,
    batch_size: usize,
    mode: SamplerMode,
    seed: u64,
    workers: usize,
    device: &Device,
) -> Result<DataLoader<Example>, Error> {
    Ok(DataLoader::builder()
        .stream("image", Ragged::<u8>::open(root.join(split).join("image"))?)
        .stream("label", Dense::<u8>::open(root.join(split).join("label"))?)
        .augment("image", pipeline(augment))
        .batch_size(batch_size)
        .mode(mode)
        .seed(seed)
        .workers(workers)
        .build_candle_with(device, move |batch| {
            let x = batch.dense("image")?.clone();
            let y = batch.dense("label")?.to_dtype(DType::U32)?;
            Ok(Example { x, y })
        })?)
}

/// Correct predictions in a batch.
pub fn correct(model: &Cnn, batch: &Example) -> candle_core::Result<u64> {
    let predicted = model.forward(&batch.x)?.argmax(D::Minus1)?;
    Ok(predicted
        .eq(&batch.y)?
        .to_dtype(DType::F32)?
        .sum_all()?
        .to_scalar::<f32>()? as u64)
}

/// Accuracy over every record of `ROOT/<split>`: one pass in order
/// (decoded, not augmented), in batches of `batch_size` (the last one
/// partial).
pub fn evaluate(
    model: &Cnn,
    root: &Path,
    split: &str,
    batch_size: usize,
    workers: usize,
    device: &Device,
) -> Result<f64, Error> {
    let n = Dense::<u8>::open(root.join(split).join("label"))?.len();
    let mut loader = DataLoader::builder()
        .stream("image", Ragged::<u8>::open(root.join(split).join("image"))?)
        .stream("label", Dense::<u8>::open(root.join(split).join("label"))?)
        .augment("image", pipeline(Augment::None))
        .batch_size(batch_size)
        .mode(SamplerMode::Sequential)
        .drop_last(false)
        .epochs(1)
        .workers(workers)
        .build_candle_with(device, move |batch| {
            let x = batch.dense("image")?.clone();
            let y = batch.dense("label")?.to_dtype(DType::U32)?;
            Ok(Example { x, y })
        })?;
    let (mut hits, mut seen) = (0, 0u64);
    for batch in &mut loader {
        let batch = batch?;
        hits += correct(model, &batch)?;
        seen += batch.y.dims()[0] as u64;
    }
    if seen != n {
        return Err(format!("evaluated {seen} of {n} records").into());
    }
    Ok(hits as f64 / n as f64)
}

/// Training settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The root [`prepare`] wrote.
    pub root: std::path::PathBuf,
    /// Passes over the training split.
    pub epochs: u64,
    /// Records per step.
    pub batch_size: usize,
    /// Loader worker threads.
    pub workers: usize,
    /// AdamW learning rate (at the first step).
    pub lr: f64,
    /// How the learning rate moves over the steps.
    pub schedule: Schedule,
    /// AdamW's decoupled weight decay.
    pub weight_decay: f64,
    /// Sampler (and augmentation) seed; the weights are drawn from it too.
    pub seed: u64,
    /// Records per evaluation batch.
    pub eval_batch_size: usize,
}

/// What one training run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// The augmentation of the run.
    pub augment: Augment,
    /// `(epoch, mean training loss)`.
    pub losses: Vec<(u64, f32)>,
    /// Test accuracy after the last epoch.
    pub test_accuracy: f64,
    /// Wall time of the training steps (evaluation not included).
    pub elapsed: Duration,
    /// Share of the training loader's life the loop spent waiting for its
    /// next batch (the loader's recorder: [`LoaderStats::input_share`]).
    pub wait_share: f64,
    /// Records per second through the training loop.
    pub records_per_s: f64,
    /// Where the training loader's time went, per stage (decoding and each
    /// augmentation step among them).
    pub loader: LoaderStats,
}

/// Sets every weight of `varmap` from `seed` alone (candle's CPU device
/// cannot be seeded): weights uniform in `±1/sqrt(fan_in)` (PyTorch's
/// default bound), biases zero, drawn by SplitMix64 in the order of the
/// variables' names, so that both runs start from the same model.
pub fn seed_weights(varmap: &VarMap, seed: u64, device: &Device) -> Result<(), Error> {
    let vars = varmap
        .data()
        .lock()
        .map_err(|_| "the variable map is poisoned")?;
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
    };
    for name in names {
        let var = &vars[name];
        let dims = var.dims().to_vec();
        let n: usize = dims.iter().product();
        let values: Vec<f32> = if dims.len() < 2 {
            vec![0.0; n]
        } else {
            let bound = 1.0 / (dims[1..].iter().product::<usize>() as f32).sqrt();
            (0..n).map(|_| (next() * 2.0 - 1.0) * bound).collect()
        };
        var.set(&Tensor::from_vec(values, dims, device)?)?;
    }
    Ok(())
}

/// Trains the CNN on `config.root` with `augment`, then evaluates it on the
/// test split.
pub fn train(config: &Config, augment: Augment, device: &Device) -> Result<Report, Error> {
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
    let model = Cnn::new(vb)?;
    seed_weights(&varmap, config.seed, device)?;
    let mut opt = AdamW::new(
        varmap.all_vars(),
        ParamsAdamW {
            lr: config.lr,
            weight_decay: config.weight_decay,
            ..Default::default()
        },
    )?;
    let mut train = loader(
        &config.root,
        "train",
        augment,
        config.batch_size,
        SamplerMode::Cyclic,
        config.seed,
        config.workers,
        device,
    )?;
    let steps = train.steps_per_epoch();
    let total_steps = steps * config.epochs;
    let mut losses = Vec::new();
    let started = Instant::now();
    for epoch in 1..=config.epochs {
        let mut total = 0.0;
        for s in 0..steps {
            let step = (epoch - 1) * steps + s;
            opt.set_learning_rate(config.schedule.lr(config.lr, step, total_steps));
            let batch = train.next().ok_or("the loader ended")??;
            let loss = loss::cross_entropy(&model.forward(&batch.x)?, &batch.y)?;
            opt.backward_step(&loss)?;
            total += loss.to_scalar::<f32>()?;
        }
        let mean = total / steps as f32;
        println!("{augment}: epoch {epoch}: loss {mean:.4}");
        losses.push((epoch, mean));
    }
    let elapsed = started.elapsed();
    let stats = train.stats();
    drop(train);
    let test_accuracy = evaluate(
        &model,
        &config.root,
        "test",
        config.eval_batch_size,
        config.workers,
        device,
    )?;
    Ok(Report {
        augment,
        losses,
        test_accuracy,
        elapsed,
        wait_share: stats.input_share(),
        records_per_s: (config.epochs * steps * config.batch_size as u64) as f64
            / elapsed.as_secs_f64(),
        loader: stats,
    })
}
