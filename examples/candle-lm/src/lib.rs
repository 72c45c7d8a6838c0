//! A byte-level decoder-only transformer trained with candle on real text,
//! every batch delivered by loaderx: the sequence features end to end.
//!
//! The data is a converted root holding `ROOT/{train,validation,test}/text`,
//! one record a document: Ragged `u8` stores of UTF-8 bytes (what
//! `loaderx convert hf REPO -o ROOT --text bytes` writes) or Ragged `u32`
//! token ids (`--tokenizer tokenizer.json`); `scripts/lm-demo` builds both
//! from Debian's `fortunes`. Training batches are
//!
//! - **packed** (the default): each step's records laid end to end into rows
//!   of `context` tokens by the loader's workers ([`PackOptions`]), positions
//!   restarting at every record, attention kept inside a record by a mask
//!   built from the packing's segment ids, so nothing is padded but the
//!   rows' tails;
//! - **bucketed** or **token-budget**: the same packing of batches the
//!   length-aware samplers draw ([`SamplerMode::Bucketed`],
//!   [`SamplerMode::TokenBudget`]);
//! - **padded**: the baseline every loader without packing gives — random
//!   batches, each record its own row padded to the batch's longest
//!   (records longer than `context` cut).
//!
//! The loss is the mean cross-entropy of every next token inside a record;
//! evaluation is one finite pass over a split in order, reporting the mean
//! cross-entropy per predicted token and its exponential, the perplexity.
//! [`unigram_cross_entropy`] is the honest floor to beat: byte frequencies
//! of the training split scored on the same tokens.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use candle_core::{D, DType, Device, Module, Tensor};
use candle_nn::{
    AdamW, Embedding, LayerNorm, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap, embedding,
    layer_norm, linear, linear_no_bias,
};
use loaderx_candle::CandleLoaderExt;
use loaderx_core::sequence::PackOptions;
use loaderx_core::{DataLoader, DynRagged, LoaderStats, SamplerMode, Store};

/// Any error of the example.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// What candle's adapter delivers.
type CandleBatch = loaderx_candle::TensorBatch;

/// The stream every split holds.
pub const STREAM: &str = "text";
/// The vocabulary of byte-level text.
pub const BYTE_VOCAB: usize = 256;

/// How training batches are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Batching {
    /// `Cyclic` batches of records, packed into rows.
    Packed,
    /// `Bucketed` batches (records of similar length), packed into rows.
    Bucketed,
    /// `TokenBudget` batches (as many records as fit the budget), packed.
    TokenBudget,
    /// `Cyclic` batches of records, each padded to the batch's longest.
    Padded,
}

/// The model's shape.
#[derive(Debug, Clone, Copy)]
pub struct ModelConfig {
    /// Token ids the model knows (256 for bytes; see [`vocab_of`]).
    pub vocab: usize,
    /// Tokens a row holds (and positions the model knows).
    pub context: usize,
    /// Width of the residual stream.
    pub dim: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Attention heads (dividing `dim`).
    pub heads: usize,
}

/// Training settings.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    /// Converted root (`ROOT/{train,validation,test}/text`).
    pub root: PathBuf,
    /// The model.
    pub model: ModelConfig,
    /// How batches are made.
    pub batching: Batching,
    /// Records a step (packed, bucketed and padded batching).
    pub batch_size: usize,
    /// Optimiser steps (the step count of the whole run, resumed or not).
    pub steps: u64,
    /// Stop after this many real tokens instead, when given (the padded
    /// baseline is run for the packed run's tokens).
    pub max_tokens: Option<u64>,
    /// AdamW learning rate.
    pub lr: f64,
    /// Sampler seed.
    pub seed: u64,
    /// Loader worker threads.
    pub workers: usize,
    /// Print the training loss every this many steps (0: never).
    pub log_every: u64,
    /// Evaluate on the validation split every this many steps (0: only at
    /// the end).
    pub eval_every: u64,
    /// Save the weights and the step here at the end, and resume from it
    /// when it holds a checkpoint: the weights and the data order resume
    /// exactly (the loader starts at the saved step), the optimiser's
    /// moments start afresh (candle's `AdamW` does not expose them).
    pub checkpoint: Option<PathBuf>,
}

/// One transformer block: pre-norm attention and MLP, residual.
struct Block {
    ln1: LayerNorm,
    qkv: Linear,
    proj: Linear,
    ln2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    heads: usize,
}

impl Block {
    fn new(vb: VarBuilder<'_>, dim: usize, heads: usize) -> candle_core::Result<Block> {
        Ok(Block {
            ln1: layer_norm(dim, 1e-5, vb.pp("ln1"))?,
            qkv: linear(dim, 3 * dim, vb.pp("qkv"))?,
            proj: linear(dim, dim, vb.pp("proj"))?,
            ln2: layer_norm(dim, 1e-5, vb.pp("ln2"))?,
            fc1: linear(dim, 4 * dim, vb.pp("fc1"))?,
            fc2: linear(4 * dim, dim, vb.pp("fc2"))?,
            heads,
        })
    }

    /// `x` `(rows, t, dim)`; `mask` `(rows, 1, t, t)`, 0 where a token may
    /// attend and a large negative number where not.
    fn forward(&self, x: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (b, t, c) = x.dims3()?;
        let dh = c / self.heads;
        let h = self.ln1.forward(x)?;
        let qkv = self
            .qkv
            .forward(&h)?
            .reshape((b, t, 3, self.heads, dh))?
            .permute((2, 0, 3, 1, 4))?;
        let q = qkv.get(0)?.contiguous()?;
        let k = qkv.get(1)?.contiguous()?;
        let v = qkv.get(2)?.contiguous()?;
        let att = (q.matmul(&k.t()?.contiguous()?)? * (1.0 / (dh as f64).sqrt()))?;
        let att = candle_nn::ops::softmax_last_dim(&att.broadcast_add(mask)?)?;
        let y = att.matmul(&v)?.transpose(1, 2)?.reshape((b, t, c))?;
        let x = (x + self.proj.forward(&y)?)?;
        let h = self
            .fc2
            .forward(&self.fc1.forward(&self.ln2.forward(&x)?)?.gelu()?)?;
        x + h
    }
}

/// A decoder-only transformer over bytes with learned positions.
pub struct Model {
    tokens: Embedding,
    positions: Embedding,
    blocks: Vec<Block>,
    ln: LayerNorm,
    head: Linear,
    context: usize,
}

impl Model {
    /// A fresh model of `config`.
    ///
    /// # Errors
    ///
    /// candle's, when a weight cannot be made.
    pub fn new(vb: VarBuilder<'_>, config: ModelConfig) -> candle_core::Result<Model> {
        let blocks = (0..config.layers)
            .map(|i| Block::new(vb.pp(format!("block{i}")), config.dim, config.heads))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Model {
            tokens: embedding(config.vocab, config.dim, vb.pp("tokens"))?,
            positions: embedding(config.context, config.dim, vb.pp("positions"))?,
            blocks,
            ln: layer_norm(config.dim, 1e-5, vb.pp("ln"))?,
            head: linear_no_bias(config.dim, config.vocab, vb.pp("head"))?,
            context: config.context,
        })
    }

    /// Next-token logits `(rows, t, vocab)`.
    ///
    /// # Errors
    ///
    /// candle's.
    pub fn forward(&self, ex: &Example) -> candle_core::Result<Tensor> {
        let mut x = self
            .tokens
            .forward(&ex.tokens)?
            .broadcast_add(&self.positions.forward(&ex.positions)?)?;
        for b in &self.blocks {
            x = b.forward(&x, &ex.mask)?;
        }
        self.head.forward(&self.ln.forward(&x)?)
    }

    /// Tokens a row holds.
    pub fn context(&self) -> usize {
        self.context
    }
}

/// A model-ready batch: rows of tokens with their positions, the attention
/// mask, and the next-token targets with their weights (1 where the next
/// token is in the same record, else 0).
pub struct Example {
    /// `(rows, t)` `u32` token ids.
    pub tokens: Tensor,
    /// `(rows, t)` `u32` positions in the record (restarting at each).
    pub positions: Tensor,
    /// `(rows, 1, t, t)` `f32` additive attention mask.
    pub mask: Tensor,
    /// `(rows · t)` `u32` next tokens.
    pub targets: Tensor,
    /// `(rows · t)` `f32` target weights.
    pub weights: Tensor,
    /// Predicted tokens (the weights' sum).
    pub predicted: usize,
    /// Real tokens in the batch.
    pub real: usize,
    /// Token cells (`rows · t`): real ones and padding.
    pub cells: usize,
}

/// `ex` from rows of `tokens` and `segments` (each `t` wide; segment 0 is
/// padding, equal non-zero segments are one record) and `positions`.
fn example(
    tokens: Vec<u32>,
    segments: &[i32],
    positions: Vec<u32>,
    t: usize,
    device: &Device,
) -> candle_core::Result<Example> {
    let rows = tokens.len() / t;
    let mut mask = vec![-1e9f32; rows * t * t];
    let mut targets = vec![0u32; rows * t];
    let mut weights = vec![0f32; rows * t];
    let mut predicted = 0;
    for r in 0..rows {
        let seg = &segments[r * t..(r + 1) * t];
        for i in 0..t {
            let m = &mut mask[(r * t + i) * t..(r * t + i + 1) * t];
            // A padding token attends to itself only (no row of -inf).
            m[i] = 0.0;
            if seg[i] != 0 {
                for j in (0..i).rev() {
                    if seg[j] != seg[i] {
                        break;
                    }
                    m[j] = 0.0;
                }
            }
            if i + 1 < t && seg[i] != 0 && seg[i + 1] == seg[i] {
                targets[r * t + i] = tokens[r * t + i + 1];
                weights[r * t + i] = 1.0;
                predicted += 1;
            }
        }
    }
    let real = segments.iter().filter(|&&s| s != 0).count();
    Ok(Example {
        tokens: Tensor::from_vec(tokens, (rows, t), device)?,
        positions: Tensor::from_vec(positions, (rows, t), device)?,
        mask: Tensor::from_vec(mask, (rows, 1, t, t), device)?,
        targets: Tensor::from_vec(targets, rows * t, device)?,
        weights: Tensor::from_vec(weights, rows * t, device)?,
        predicted,
        real,
        cells: rows * t,
    })
}

/// [`example`] of a batch the loader packed ([`PackOptions`]).
fn from_packed(batch: &CandleBatch, t: usize) -> candle_core::Result<Example> {
    let dense = |name: &str| {
        batch
            .dense(name)
            .map_err(|e| candle_core::Error::Msg(e.to_string()))
    };
    let device = dense(STREAM)?.device().clone();
    let tokens = dense(STREAM)?
        .to_dtype(DType::U32)?
        .flatten_all()?
        .to_vec1::<u32>()?;
    let segments = dense(&format!("{STREAM}.segment_ids"))?
        .flatten_all()?
        .to_vec1::<i32>()?;
    // The pieces of a record longer than a row keep counting positions
    // from the record's start; each piece is its own segment (it cannot see
    // the piece before), so its positions restart: modulo the row.
    let positions = dense(&format!("{STREAM}.positions"))?
        .flatten_all()?
        .to_vec1::<i32>()?
        .into_iter()
        .map(|p| p.rem_euclid(t as i32) as u32)
        .collect();
    example(tokens, &segments, positions, t, &device)
}

/// [`example`] of a padded batch: each record its own row, cut to `t`.
fn from_padded(batch: &CandleBatch, t: usize) -> candle_core::Result<Example> {
    let padded = batch
        .padded(STREAM)
        .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    let device = padded.values.device().clone();
    let (rows, longest) = padded.values.dims2()?;
    let width = longest.min(t);
    let values = padded
        .values
        .narrow(1, 0, width)?
        .to_dtype(DType::U32)?
        .flatten_all()?
        .to_vec1::<u32>()?;
    let lengths = padded
        .lengths
        .flatten_all()?
        .to_dtype(DType::I64)?
        .to_vec1::<i64>()?;
    let mut segments = vec![0i32; rows * width];
    for (r, &len) in lengths.iter().enumerate() {
        for s in &mut segments[r * width..r * width + (len as usize).min(width)] {
            *s = 1;
        }
    }
    let positions = (0..rows * width).map(|i| (i % width) as u32).collect();
    example(values, &segments, positions, width, &device)
}

/// The store of `split` under `root`: Ragged `u8` bytes or `u16`/`u32`
/// token ids, rank 1.
pub fn open_split(root: &Path, split: &str) -> Result<DynRagged, Error> {
    let store = DynRagged::open(root.join(split).join(STREAM))?;
    if store.ndim() != 1 || !matches!(store.dtype().numpy_name(), "uint8" | "uint16" | "uint32") {
        return Err(format!(
            "{}: {} of rank {}, not rank-1 bytes or token ids (uint8, uint16, uint32)",
            store.path().display(),
            store.dtype(),
            store.ndim()
        )
        .into());
    }
    Ok(store)
}

/// The token ids of one record's bytes, elements of `width` bytes.
fn ids(bytes: &[u8], width: usize) -> impl Iterator<Item = u32> + '_ {
    bytes.chunks_exact(width).map(move |c| {
        let mut b = [0u8; 4];
        b[..width].copy_from_slice(c);
        u32::from_le_bytes(b)
    })
}

/// The vocabulary a model of `ROOT`'s text needs: 256 for bytes, else the
/// largest token id of any split plus one (so evaluation never meets an id
/// the model lacks).
///
/// # Errors
///
/// When a split cannot be read.
pub fn vocab_of(root: &Path) -> Result<usize, Error> {
    let mut top = 0u32;
    for split in ["train", "validation", "test"] {
        let store = open_split(root, split)?;
        let width = store.dtype().size();
        if width == 1 {
            return Ok(BYTE_VOCAB);
        }
        Store::Ragged(store).for_each_record(|_, _, bytes| {
            top = ids(bytes, width).fold(top, u32::max);
            Ok(())
        })?;
    }
    Ok(top as usize + 1)
}

/// An endless loader over `ROOT/train` of `mode` batches of `batch_size`
/// records (the token budget `batch_size × context` for `TokenBudget`),
/// packed into rows of `context` tokens or each record padded, from step
/// `start_step`.
///
/// # Errors
///
/// When the store cannot be opened or the loader not built.
#[allow(clippy::too_many_arguments, reason = "the loader's whole recipe")]
pub fn batches(
    root: &Path,
    mode: SamplerMode,
    pack: bool,
    batch_size: usize,
    context: usize,
    seed: u64,
    workers: usize,
    start_step: u64,
    device: &Device,
) -> Result<DataLoader<Example>, Error> {
    let t = context;
    let builder = DataLoader::builder()
        .stream(STREAM, open_split(root, "train")?)
        .batch_size(batch_size)
        .mode(mode)
        .seed(seed)
        .workers(workers)
        .start_step(start_step);
    Ok(if pack {
        builder
            .pack(STREAM, PackOptions::new(t))
            .build_candle_with(device, move |b| Ok(from_packed(&b, t)?))?
    } else {
        builder.build_candle_with(device, move |b| Ok(from_padded(&b, t)?))?
    })
}

/// The sampler mode of `batching`.
pub fn sampler_mode(batching: Batching, batch_size: usize, context: usize) -> SamplerMode {
    match batching {
        Batching::Packed | Batching::Padded => SamplerMode::Cyclic,
        Batching::Bucketed => SamplerMode::Bucketed { window: 16 },
        Batching::TokenBudget => SamplerMode::TokenBudget {
            max_tokens: (batch_size * context) as u64,
            buckets: 16,
        },
    }
}

/// The endless training loader `config` describes, from step
/// `start_step` (so a resumed run reads exactly the batches it would have).
///
/// # Errors
///
/// When the store cannot be opened or the loader not built.
pub fn train_loader(
    config: &TrainConfig,
    start_step: u64,
    device: &Device,
) -> Result<DataLoader<Example>, Error> {
    let t = config.model.context;
    batches(
        &config.root,
        sampler_mode(config.batching, config.batch_size, t),
        config.batching != Batching::Padded,
        config.batch_size,
        t,
        config.seed,
        config.workers,
        start_step,
        device,
    )
}

/// The padding fraction of every way of batching the training split, over
/// `steps` batches of `batch_size` records and rows of `context` tokens:
/// each sampler mode with its records packed and with each record padded
/// to its batch's longest (records longer than `context` cut).
///
/// # Errors
///
/// As [`batches`].
pub fn padding_survey(
    root: &Path,
    batch_size: usize,
    context: usize,
    steps: usize,
    device: &Device,
) -> Result<Vec<(String, f64)>, Error> {
    let mut out = Vec::new();
    for batching in [Batching::Packed, Batching::Bucketed, Batching::TokenBudget] {
        for pack in [true, false] {
            let mode = sampler_mode(batching, batch_size, context);
            let loader = batches(root, mode, pack, batch_size, context, 1, 2, 0, device)?;
            let (mut real, mut cells) = (0usize, 0usize);
            for ex in loader.take(steps) {
                let ex = ex?;
                real += ex.real;
                cells += ex.cells;
            }
            let name = match batching {
                Batching::Packed | Batching::Padded => "Cyclic",
                Batching::Bucketed => "Bucketed",
                Batching::TokenBudget => "TokenBudget",
            };
            let how = if pack { "packed" } else { "padded" };
            out.push((
                format!("{name}, {how}"),
                1.0 - real as f64 / cells.max(1) as f64,
            ));
        }
    }
    Ok(out)
}

/// Summed negative log-likelihood of the batch's predicted tokens (a
/// scalar tensor, for the gradient) .
fn nll_sum(model: &Model, ex: &Example) -> candle_core::Result<Tensor> {
    let logits = model.forward(ex)?;
    let (rows, t, v) = logits.dims3()?;
    let logp = candle_nn::ops::log_softmax(&logits.reshape((rows * t, v))?, D::Minus1)?;
    let picked = logp.gather(&ex.targets.unsqueeze(1)?, 1)?.squeeze(1)?;
    (picked * &ex.weights)?.sum_all()?.neg()
}

/// Mean cross-entropy per predicted token over every record of `split`,
/// one pass in order, packed into rows of the model's context (nats).
///
/// # Errors
///
/// When the store cannot be read or candle fails.
pub fn evaluate(model: &Model, root: &Path, split: &str, device: &Device) -> Result<f64, Error> {
    let t = model.context();
    let store = open_split(root, split)?;
    let loader = DataLoader::builder()
        .stream(STREAM, store)
        .batch_size(64)
        .mode(SamplerMode::Sequential)
        .drop_last(false)
        .epochs(1)
        .workers(2)
        .pack(STREAM, PackOptions::new(t))
        .build_candle_with(device, move |b| Ok(from_packed(&b, t)?))?;
    let (mut sum, mut n) = (0f64, 0usize);
    for ex in loader {
        let ex = ex?;
        sum += f64::from(nll_sum(model, &ex)?.to_scalar::<f32>()?);
        n += ex.predicted;
    }
    Ok(sum / n.max(1) as f64)
}

/// The unigram baseline: token frequencies of `ROOT/train` (add-one
/// smoothed) scoring the tokens [`evaluate`] predicts on `split` (every
/// token of a record but its first), in nats per token.
///
/// # Errors
///
/// When a store cannot be read.
pub fn unigram_cross_entropy(root: &Path, split: &str) -> Result<f64, Error> {
    let train = open_split(root, "train")?;
    let width = train.dtype().size();
    let mut counts = vec![1u64; vocab_of(root)?];
    Store::Ragged(train).for_each_record(|_, _, bytes| {
        for id in ids(bytes, width) {
            if let Some(c) = counts.get_mut(id as usize) {
                *c += 1;
            }
        }
        Ok(())
    })?;
    let total: u64 = counts.iter().sum();
    let (mut sum, mut n) = (0f64, 0u64);
    Store::Ragged(open_split(root, split)?).for_each_record(|_, _, bytes| {
        for id in ids(bytes, width).skip(1) {
            let c = counts.get(id as usize).copied().unwrap_or(1);
            sum -= (c as f64 / total as f64).ln();
            n += 1;
        }
        Ok(())
    })?;
    Ok(sum / n.max(1) as f64)
}

/// What a training run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Steps taken by this run (after a resume, only the new ones).
    pub steps: u64,
    /// The last step's number + 1 (the checkpoint's step).
    pub end_step: u64,
    /// Real tokens trained on.
    pub tokens: u64,
    /// Token cells, real and padding.
    pub cells: u64,
    /// Wall time of the training loop.
    pub elapsed: Duration,
    /// Time spent waiting for the loader (its recorder's
    /// [`LoaderStats::input_wait`]).
    pub waited: Duration,
    /// Where the training loader's time went, per stage.
    pub loader: LoaderStats,
    /// `(step, training loss)` every `log_every` steps.
    pub train_losses: Vec<(u64, f64)>,
    /// `(step, validation cross-entropy)` every `eval_every` steps and at
    /// the end.
    pub validation: Vec<(u64, f64)>,
}

impl Report {
    /// Padding cells over all cells.
    pub fn padding_fraction(&self) -> f64 {
        1.0 - self.tokens as f64 / self.cells.max(1) as f64
    }

    /// Real tokens per second of the training loop.
    pub fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The share of the loop spent waiting on the loader.
    pub fn waited_share(&self) -> f64 {
        self.waited.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9)
    }
}

const CHECKPOINT_WEIGHTS: &str = "model.safetensors";
const CHECKPOINT_STEP: &str = "step";

/// Trains a model as `config` says (resuming from its checkpoint when one
/// is there), evaluating on the validation split; returns it with what was
/// measured.
///
/// # Errors
///
/// When the data cannot be read, candle fails, or the checkpoint cannot
/// be read or written.
pub fn train(config: &TrainConfig, device: &Device) -> Result<(Model, VarMap, Report), Error> {
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
    let model = Model::new(vb, config.model)?;
    let mut start = 0u64;
    if let Some(dir) = &config.checkpoint
        && dir.join(CHECKPOINT_STEP).is_file()
    {
        let mut varmap = varmap.clone();
        varmap.load(dir.join(CHECKPOINT_WEIGHTS))?;
        start = std::fs::read_to_string(dir.join(CHECKPOINT_STEP))?
            .trim()
            .parse()?;
    }
    let mut opt = AdamW::new(
        varmap.all_vars(),
        ParamsAdamW {
            lr: config.lr,
            weight_decay: 0.01,
            ..Default::default()
        },
    )?;
    let mut loader = train_loader(config, start, device)?;
    let mut report = Report {
        steps: 0,
        end_step: start,
        tokens: 0,
        cells: 0,
        elapsed: Duration::ZERO,
        waited: Duration::ZERO,
        loader: LoaderStats::default(),
        train_losses: Vec::new(),
        validation: Vec::new(),
    };
    let began = Instant::now();
    let mut evaluating = Duration::ZERO;
    let mut window = (0f64, 0usize);
    for step in start..config.steps {
        if config.max_tokens.is_some_and(|m| report.tokens >= m) {
            break;
        }
        let ex = loader.next().ok_or("the loader ended")??;
        let sum = nll_sum(&model, &ex)?;
        let loss = (sum / ex.predicted.max(1) as f64)?;
        opt.backward_step(&loss)?;
        let loss = f64::from(loss.to_scalar::<f32>()?);
        window = (window.0 + loss, window.1 + 1);
        report.tokens += ex.real as u64;
        report.cells += ex.cells as u64;
        report.steps += 1;
        report.end_step = step + 1;
        if config.log_every > 0 && (step + 1) % config.log_every == 0 {
            report
                .train_losses
                .push((step + 1, window.0 / window.1 as f64));
            window = (0.0, 0);
        }
        if config.eval_every > 0 && (step + 1) % config.eval_every == 0 {
            let paused = Instant::now();
            let ce = evaluate(&model, &config.root, "validation", device)?;
            report.validation.push((step + 1, ce));
            evaluating += paused.elapsed();
        }
    }
    // Evaluation is not training time.
    report.elapsed = began.elapsed().saturating_sub(evaluating);
    report.loader = loader.stats();
    report.waited = report.loader.input_wait();
    if report.validation.last().map(|v| v.0) != Some(report.end_step) {
        let ce = evaluate(&model, &config.root, "validation", device)?;
        report.validation.push((report.end_step, ce));
    }
    if let Some(dir) = &config.checkpoint {
        // Each file written beside and renamed over the old one, the weights
        // first, so a crash leaves the last checkpoint's step with weights
        // at least that trained (never a step ahead of its weights).
        std::fs::create_dir_all(dir)?;
        let weights = dir.join(format!("{CHECKPOINT_WEIGHTS}.tmp"));
        varmap.save(&weights)?;
        std::fs::rename(&weights, dir.join(CHECKPOINT_WEIGHTS))?;
        let step = dir.join(format!("{CHECKPOINT_STEP}.tmp"));
        std::fs::write(&step, format!("{}\n", report.end_step))?;
        std::fs::rename(&step, dir.join(CHECKPOINT_STEP))?;
    }
    Ok((model, varmap, report))
}

/// How text becomes token ids and back: bytes, or a tokenizer (the one the
/// stores were converted with).
pub enum Text {
    /// One token a byte.
    Bytes,
    /// A Hugging Face `tokenizer.json`.
    Tokenizer(Box<tokenizers::Tokenizer>),
}

impl Text {
    /// The tokenizer in `path`.
    ///
    /// # Errors
    ///
    /// When it cannot be read.
    pub fn tokenizer(path: &Path) -> Result<Text, Error> {
        Ok(Text::Tokenizer(Box::new(tokenizers::Tokenizer::from_file(
            path,
        )?)))
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>, Error> {
        match self {
            Text::Bytes => Ok(text.bytes().map(u32::from).collect()),
            Text::Tokenizer(t) => Ok(t.encode(text, false)?.get_ids().to_vec()),
        }
    }

    fn decode(&self, ids: &[u32]) -> Result<String, Error> {
        match self {
            Text::Bytes => Ok(String::from_utf8_lossy(
                &ids.iter().map(|&i| i as u8).collect::<Vec<u8>>(),
            )
            .into_owned()),
            Text::Tokenizer(t) => Ok(t.decode(ids, true)?),
        }
    }
}

/// `len` tokens sampled after `prompt` (temperature `temperature`, a fixed
/// seed), as text.
///
/// # Errors
///
/// candle's, or the tokenizer's.
pub fn generate(
    model: &Model,
    text: &Text,
    prompt: &str,
    len: usize,
    temperature: f64,
    seed: u64,
    device: &Device,
) -> Result<String, Error> {
    let mut tokens = text.encode(prompt)?;
    if tokens.is_empty() || temperature.is_nan() || temperature <= 0.0 {
        return Err(format!(
            "generate: the prompt must give a token and the temperature be positive \
             (prompt {prompt:?}, temperature {temperature})"
        )
        .into());
    }
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..len {
        let t = model.context();
        let window = tokens[tokens.len().saturating_sub(t)..].to_vec();
        let n = window.len();
        let ex = example(window, &vec![1i32; n], (0..n as u32).collect(), n, device)?;
        let logits = model.forward(&ex)?.get(0)?.get(n - 1)?;
        let probs = candle_nn::ops::softmax_last_dim(&(logits / temperature)?)?.to_vec1::<f32>()?;
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut u = (state >> 11) as f32 / (1u64 << 53) as f32;
        let mut next = probs.len() - 1;
        for (i, p) in probs.iter().enumerate() {
            if u < *p {
                next = i;
                break;
            }
            u -= p;
        }
        tokens.push(next as u32);
    }
    text.decode(&tokens)
}
