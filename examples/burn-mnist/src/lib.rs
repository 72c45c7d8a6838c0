//! An MLP classifier for 28×28 images, trained with burn's `Learner`
//! (`SupervisedTraining`) on batches from loaderx.
//!
//! The data is a converted root (`loaderx convert idx`):
//! `ROOT/{train,test}/{image,label}` with Dense u8 `[28, 28]` images and u8
//! scalar labels. Both splits are read by [`BurnDataLoader`]s — burn's
//! `DataLoader` trait implemented on the loaderx DataLoader — whose workers
//! gather each batch natively and build the model's [`MnistBatch`] on the
//! device the Learner asks for: the autodiff device for training, the plain
//! one for validation. Training batches follow the `Cyclic` sampler (a fresh
//! permutation per epoch, reproducible from the seed, resumable with
//! [`Config::start_epoch`]); the test split is read in order, every record
//! exactly once per epoch whatever the batch size (`drop_last(false)`: the
//! last batch is partial), so [`evaluate`] gives the same accuracy for any
//! [`Config::eval_batch_size`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::optim::lr_scheduler::constant::ConstantLr;
use burn::tensor::{Device, Int, Tensor};
use burn::train::checkpoint::KeepLastNCheckpoints;
use burn::train::logger::{EvaluationProgressLogger, MetricLogger, TrainingProgressLogger};
use burn::train::metric::store::{EpochSummary, MetricsUpdate, Split};
use burn::train::metric::{AccuracyMetric, LossMetric, MetricDefinition, MetricId, NumericEntry};
use burn::train::renderer::{
    EvaluationName, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining,
};
use burn::train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};
use loaderx_burn::{BurnDataLoader, BurnLoaderExt, HostBatch, RecordBatcher, ZrecordDataset};
use loaderx_core::{LoaderStats, SamplerMode};

/// Any error of the example.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Training settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Converted data root holding `train/` and `test/`.
    pub root: PathBuf,
    /// Where burn writes its logs (and checkpoints, if enabled).
    pub artifacts: PathBuf,
    /// Epochs to train in all (burn counts them from 1).
    pub epochs: usize,
    /// Epochs already done: resume from the checkpoint burn saved after
    /// epoch `start_epoch` (in `artifacts/checkpoint`), with the training
    /// loader continuing exactly where that epoch ended. 0 starts afresh.
    pub start_epoch: usize,
    /// Records per training step.
    pub batch_size: usize,
    /// Records per evaluation step (any size: the last batch of the test
    /// pass is partial).
    pub eval_batch_size: usize,
    /// Loader worker threads.
    pub workers: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Sampler and initialisation seed.
    pub seed: u64,
}

/// Two linear layers with a ReLU between.
#[derive(Module, Debug)]
pub struct Mlp {
    hidden: Linear,
    activation: Relu,
    output: Linear,
}

impl Mlp {
    /// A fresh model of `inputs → hidden → classes` on `device`.
    pub fn new(device: &Device, inputs: usize, hidden: usize, classes: usize) -> Mlp {
        Mlp {
            hidden: LinearConfig::new(inputs, hidden).init(device),
            activation: Relu::new(),
            output: LinearConfig::new(hidden, classes).init(device),
        }
    }

    /// Class logits for `(B, inputs)` images.
    pub fn forward(&self, images: Tensor<2>) -> Tensor<2> {
        self.output
            .forward(self.activation.forward(self.hidden.forward(images)))
    }

    /// Logits, cross-entropy loss and targets of a batch.
    pub fn forward_classification(&self, batch: MnistBatch) -> ClassificationOutput {
        let output = self.forward(batch.images);
        let loss = CrossEntropyLossConfig::new()
            .init(&output.device())
            .forward(output.clone(), batch.targets.clone());
        ClassificationOutput::new(loss, output, batch.targets)
    }
}

impl TrainStep for Mlp {
    type Input = MnistBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: MnistBatch) -> TrainOutput<ClassificationOutput> {
        let item = self.forward_classification(batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl InferenceStep for Mlp {
    type Input = MnistBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: MnistBatch) -> ClassificationOutput {
        self.forward_classification(batch)
    }
}

/// A model-ready batch: `(B, 784)` inputs in `[0, 1]` and `(B,)` class indices.
#[derive(Debug, Clone)]
pub struct MnistBatch {
    /// Flattened images.
    pub images: Tensor<2>,
    /// Class indices.
    pub targets: Tensor<1, Int>,
}

impl MnistBatch {
    /// Builds the batch from a loaderx batch, on the batch's device: the
    /// mapping closure of the loaders.
    pub fn from_host(b: HostBatch) -> loaderx_burn::Result<MnistBatch> {
        let images = b.float::<3>("image")?;
        let [n, h, w] = images.dims();
        Ok(MnistBatch {
            images: images.reshape([n, h * w]) / 255.0,
            targets: b.int::<1>("label")?,
        })
    }
}

/// A loader builder over every store of `ROOT/<split>` (`image`, `label`);
/// finish it with `.build_burn(device, MnistBatch::from_host)`.
pub fn split(root: &Path, split: &str) -> Result<loaderx_core::DataLoaderBuilder, Error> {
    Ok(BurnDataLoader::builder().dataset(&ZrecordDataset::open_dir(root.join(split))?))
}

/// A finite, in-order pass over `ROOT/<split>`: every record exactly once,
/// the last batch partial ([`drop_last`](loaderx_core::DataLoaderBuilder::drop_last)`(false)`).
pub fn eval_loader(
    root: &Path,
    split_name: &str,
    batch_size: usize,
    workers: usize,
    device: &Device,
) -> Result<BurnDataLoader<MnistBatch>, Error> {
    Ok(split(root, split_name)?
        .batch_size(batch_size)
        .mode(SamplerMode::Sequential)
        .drop_last(false)
        .workers(workers)
        .build_burn(device, MnistBatch::from_host)?)
}

/// Test-set accuracy of a model, counted exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluation {
    /// Records classified correctly.
    pub correct: u64,
    /// Records evaluated (every record of the split).
    pub total: u64,
}

impl Evaluation {
    /// Accuracy, percent.
    pub fn accuracy(&self) -> f64 {
        100.0 * self.correct as f64 / self.total.max(1) as f64
    }
}

/// Classifies every record of `ROOT/<split>` once, `batch_size` at a time
/// (one finite pass; the model must live on `device`).
pub fn evaluate(
    model: &Mlp,
    root: &Path,
    split_name: &str,
    batch_size: usize,
    workers: usize,
    device: &Device,
) -> Result<Evaluation, Error> {
    let loader = eval_loader(root, split_name, batch_size, workers, device)?;
    let mut result = Evaluation {
        correct: 0,
        total: 0,
    };
    for batch in loader.iter() {
        let batch = batch?;
        let n = batch.targets.dims()[0] as u64;
        let predicted = model.forward(batch.images).argmax(1).flatten::<1>(0, 1);
        let correct = predicted
            .equal(batch.targets)
            .int()
            .sum()
            .try_into_scalar::<i64>()
            .map_err(|e| format!("reading the accuracy back: {e:?}"))?;
        result.correct += u64::try_from(correct)?;
        result.total += n;
    }
    Ok(result)
}

/// One epoch's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochReport {
    /// Epoch number, from 1 (as burn counts).
    pub epoch: usize,
    /// Mean training loss.
    pub train_loss: f64,
    /// Training accuracy, percent.
    pub train_accuracy: f64,
    /// Mean test loss.
    pub test_loss: f64,
    /// Test accuracy, percent.
    pub test_accuracy: f64,
    /// Wall time of the epoch (training and evaluation).
    pub elapsed: Duration,
}

/// What a training run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Per-epoch figures.
    pub epochs: Vec<EpochReport>,
    /// What the training loader delivers on its own (one epoch read
    /// without a model, before training).
    pub loader: Throughput,
    /// Records per second trained (loader and model together).
    pub train_records_per_s: f64,
    /// Share of the training time the Learner waited for the training
    /// loader (the loader's recorder: [`LoaderStats::input_share`] of
    /// [`Report::stages`], as the table's bottleneck line says).
    pub wait_share: f64,
    /// Wall time of training.
    pub elapsed: Duration,
    /// Where the training loader's time went, per stage: every pipeline
    /// the Learner's copies of it ran, added up
    /// ([`BurnDataLoader::loader_stats`]).
    pub stages: LoaderStats,
}

/// Collects the epoch-final metric values burn logs and prints one line per epoch.
struct EpochPrinter {
    names: std::collections::HashMap<MetricId, String>,
    current: Vec<(Split, String, f64)>,
    epochs: Arc<Mutex<Vec<EpochReport>>>,
    started: Instant,
}

impl EpochPrinter {
    fn value(&self, split: &Split, name: &str) -> f64 {
        self.current
            .iter()
            .rev()
            .find(|(s, n, _)| s == split && n == name)
            .map_or(f64::NAN, |(_, _, v)| *v)
    }
}

impl MetricLogger for EpochPrinter {
    fn log(&mut self, update: MetricsUpdate, _epoch: usize, split: &Split) {
        for numeric in update.entries_numeric {
            if let (Some(NumericEntry::Final(v)), Some(name)) = (
                numeric.numeric_entry,
                self.names.get(&numeric.entry.metric_id),
            ) {
                self.current.push((split.clone(), name.clone(), v));
            }
        }
    }

    fn read_numeric(
        &mut self,
        _name: &str,
        _epoch: usize,
        _split: &Split,
    ) -> Result<Vec<NumericEntry>, String> {
        Err("not recorded".into())
    }

    fn log_metric_definition(&mut self, definition: MetricDefinition) {
        self.names
            .insert(definition.metric_id, definition.name.to_string());
    }

    fn log_epoch_summary(&mut self, summary: EpochSummary) {
        if summary.split != Split::Valid {
            return;
        }
        let report = EpochReport {
            epoch: summary.epoch_number,
            train_loss: self.value(&Split::Train, "Loss"),
            train_accuracy: self.value(&Split::Train, "Accuracy"),
            test_loss: self.value(&Split::Valid, "Loss"),
            test_accuracy: self.value(&Split::Valid, "Accuracy"),
            elapsed: self.started.elapsed(),
        };
        println!(
            "epoch {}: train loss {:.4}, accuracy {:.2}% | test loss {:.4}, accuracy {:.2}% | {:.1}s",
            report.epoch,
            report.train_loss,
            report.train_accuracy,
            report.test_loss,
            report.test_accuracy,
            report.elapsed.as_secs_f64()
        );
        self.current.clear();
        self.started = Instant::now();
        if let Ok(mut epochs) = self.epochs.lock() {
            epochs.push(report);
        }
    }
}

/// A renderer that prints nothing: [`EpochPrinter`] reports per epoch, and
/// burn's CLI renderer would print a line per batch.
struct Quiet;

impl MetricsRendererTraining for Quiet {
    fn update_train(&mut self, _state: MetricState) {}
    fn update_valid(&mut self, _state: MetricState) {}
}

impl MetricsRendererEvaluation for Quiet {
    fn update_test(&mut self, _name: EvaluationName, _state: MetricState) {}
}

impl TrainingProgressLogger for Quiet {
    fn start(&mut self, _: usize, _: usize, _: Option<usize>, _: Option<&str>) {}
    fn update_epoch(&mut self, _epoch: usize) {}
    fn start_split(&mut self, _split: &str, _total_items: usize) {}
    fn update_split(&mut self, _items_processed: usize) {}
    fn end_split(&mut self) {}
    fn end(&mut self) {}
    fn log_event_training(&mut self, _event: String) {}
}

impl EvaluationProgressLogger for Quiet {
    fn start_global_progress(&mut self, _total_tests: usize) {}
    fn start_test(&mut self, _name: &str, _total_items: usize) {}
    fn update_test_progress(&mut self, _items_processed: usize) {}
    fn end_test(&mut self) {}
    fn end_global_progress(&mut self) {}
    fn log_event_evaluation(&mut self, _event: String) {}
}

impl MetricsRenderer for Quiet {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, _definition: MetricDefinition) {}
}

/// What a loader delivered on the device: records and bytes of tensor
/// data per second.
#[derive(Debug, Clone, Copy, Default)]
pub struct Throughput {
    /// Records per second.
    pub records_per_s: f64,
    /// Bytes of the batches' tensors (images and targets, in the dtypes
    /// they have on the device) per second.
    pub bytes_per_s: f64,
}

/// One pass of `loader` without a model, timed until the device has finished every upload
/// (burn's backends copy asynchronously).
pub fn loader_throughput(loader: &dyn DataLoader<MnistBatch>) -> Result<Throughput, Error> {
    let started = Instant::now();
    let (mut records, mut bytes) = (0usize, 0usize);
    let mut device = None;
    for batch in loader.iter() {
        let batch = batch?;
        records += batch.targets.dims()[0];
        bytes += batch.images.shape().num_elements() * batch.images.dtype().size()
            + batch.targets.shape().num_elements() * batch.targets.dtype().size();
        device.get_or_insert_with(|| batch.targets.device());
    }
    if let Some(device) = device {
        device
            .sync()
            .map_err(|e| format!("waiting for the device: {e:?}"))?;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(Throughput {
        records_per_s: records as f64 / seconds,
        bytes_per_s: bytes as f64 / seconds,
    })
}

/// One training epoch delivered as [`MnistBatch`]es (the same mapping,
/// [`MnistBatch::from_host`]) by this crate's loader and by burn's own
/// `DataLoaderBuilder` over the same stores ([`ZrecordDataset`] records
/// stacked by a [`RecordBatcher`], shuffled), with the same batch size and
/// workers; records per second of each.
pub fn compare_loaders(config: &Config, device: &Device) -> Result<(f64, f64), Error> {
    let root = config.root.join("train");
    let ours = BurnDataLoader::builder()
        .dataset(&ZrecordDataset::open_dir(&root)?)
        .batch_size(config.batch_size)
        .seed(config.seed)
        .workers(config.workers)
        .build_burn(device, MnistBatch::from_host)?;
    // burn's batchers cannot fail: a batch that does not convert panics here.
    let batcher = RecordBatcher::new(|b| MnistBatch::from_host(b).expect("an MNIST batch"));
    let burns = DataLoaderBuilder::new(batcher)
        .batch_size(config.batch_size)
        .shuffle(config.seed)
        .num_workers(config.workers)
        .set_device(device.clone())
        .build(ZrecordDataset::open_dir(&root)?);
    Ok((
        loader_throughput(&ours)?.records_per_s,
        loader_throughput(&*burns)?.records_per_s,
    ))
}

/// Trains an MLP as `config` says with burn's `Learner`, printing per-epoch
/// loss and accuracy; returns the trained model and what was measured.
pub fn train(config: &Config, device: &Device) -> Result<(Mlp, Report), Error> {
    device.seed(config.seed);
    let root = &config.root;
    let start_epoch = config.start_epoch as u64;
    let train_loader = || -> Result<BurnDataLoader<MnistBatch>, Error> {
        Ok(split(root, "train")?
            .batch_size(config.batch_size)
            .mode(SamplerMode::Cyclic)
            .seed(config.seed)
            .workers(config.workers)
            .build_burn(device, MnistBatch::from_host)?
            .start_epoch(start_epoch)?)
    };
    // The loader alone, on a loader of its own (same data order), so the
    // training loader still starts at `start_epoch` and its counters and
    // stage times are the training's only.
    let loader = loader_throughput(&train_loader()?)?;
    let train_loader = train_loader()?;
    // In order, every record once per epoch, the last batch partial.
    let test_loader = eval_loader(root, "test", config.eval_batch_size, config.workers, device)?;
    println!(
        "train: {} records per epoch in {} steps of {}; test: {} records; loader alone: {:.0} records/s",
        train_loader.num_items(),
        train_loader.steps_per_epoch(),
        config.batch_size,
        test_loader.num_items(),
        loader.records_per_s
    );

    let train_loader = Arc::new(train_loader);
    let epochs = Arc::new(Mutex::new(Vec::new()));
    let printer = EpochPrinter {
        names: Default::default(),
        current: Vec::new(),
        epochs: Arc::clone(&epochs),
        started: Instant::now(),
    };
    // Parameters are created on the autodiff device so they track gradients;
    // the Learner hands the loaders that device (training) and the plain one
    // (validation) through `to_device`.
    let model = Mlp::new(&device.clone().autodiff(), 28 * 28, config.hidden, 10);
    let learner = Learner::new(model, AdamConfig::new().init(), ConstantLr::new(config.lr));
    let mut training = SupervisedTraining::new(
        &config.artifacts,
        Arc::clone(&train_loader) as Arc<dyn DataLoader<MnistBatch>>,
        Arc::new(test_loader) as Arc<dyn DataLoader<MnistBatch>>,
    )
    .metrics((AccuracyMetric::new(), LossMetric::new()))
    .with_metric_logger(printer)
    .renderer(Box::new(Quiet))
    .with_application_logger(None)
    .with_default_checkpointers()
    .with_checkpointing_strategy(KeepLastNCheckpoints::new(2))
    .num_epochs(config.epochs);
    if config.start_epoch > 0 {
        // Model, optimiser and scheduler from the checkpoint of epoch
        // `start_epoch`; the loader continues with that epoch's data order.
        training = training.checkpoint(config.start_epoch);
    }
    let started = Instant::now();
    let result = training.launch(learner);
    let elapsed = started.elapsed();
    if let Some(error) = result.error {
        return Err(format!("training failed: {error}").into());
    }
    // The Learner's copies of the loader are dropped: their pipelines'
    // times are the original's now.
    let stages = train_loader.loader_stats();
    let trained = train_loader.stats().items;
    let epochs = epochs.lock().map(|e| e.clone()).unwrap_or_default();
    Ok((
        result.model,
        Report {
            epochs,
            loader,
            train_records_per_s: trained as f64 / elapsed.as_secs_f64(),
            wait_share: stages.input_share(),
            elapsed,
            stages,
        },
    ))
}
