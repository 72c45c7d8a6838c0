//! Train a byte-level transformer with candle on a converted text root,
//! every batch from loaderx, and report what the sequence features buy.
//!
//! ```sh
//! ./scripts/lm-demo            # fortunes -> parquet -> mock Hub -> loaderx convert hf -> this
//! cargo run --release -p candle-lm -- ROOT --steps 300
//! ```
//!
//! Prints the training loss and the validation cross-entropy as they go,
//! then: test perplexity against the unigram baseline and against the same
//! model trained on padded random batches for the same number of real
//! tokens, tokens per second, the share of time spent waiting on the
//! loader, each batching's padding fraction, and sampled text.

use candle_core::Device;
use candle_lm::{
    Batching, Error, ModelConfig, Text, TrainConfig, evaluate, generate, padding_survey, train,
    unigram_cross_entropy, vocab_of,
};
use clap::Parser;

/// Command-line options.
#[derive(Debug, Parser)]
struct Args {
    /// Converted root holding {train,validation,test}/text (Ragged u8
    /// bytes, or u32 token ids).
    root: std::path::PathBuf,
    /// The tokenizer.json the token ids were converted with (to print
    /// samples as text; bytes need none).
    #[arg(long)]
    tokenizer: Option<std::path::PathBuf>,
    /// Optimiser steps.
    #[arg(long, default_value_t = 300)]
    steps: u64,
    /// How training batches are made.
    #[arg(long, value_enum, default_value_t = Batching::Packed)]
    batching: Batching,
    /// Records a step (the token budget is this × context for
    /// token-budget batching).
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Tokens a row holds.
    #[arg(long, default_value_t = 128)]
    context: usize,
    /// Width of the model.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Transformer blocks.
    #[arg(long, default_value_t = 2)]
    layers: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// AdamW learning rate.
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// Sampler seed.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Loader worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Print the training loss every this many steps.
    #[arg(long, default_value_t = 25)]
    log_every: u64,
    /// Evaluate on the validation split every this many steps (0: at the end).
    #[arg(long, default_value_t = 100)]
    eval_every: u64,
    /// Save the weights and step here, and resume from them when present.
    #[arg(long)]
    checkpoint: Option<std::path::PathBuf>,
    /// Skip the padded-batch baseline run.
    #[arg(long)]
    no_baseline: bool,
}

fn main() -> Result<(), Error> {
    let args = Args::parse();
    let device = Device::Cpu;
    let text = match &args.tokenizer {
        Some(path) => Text::tokenizer(path)?,
        None => Text::Bytes,
    };
    let tokenizer_vocab = match &text {
        Text::Tokenizer(t) => t.get_vocab_size(true),
        Text::Bytes => 0,
    };
    let model = ModelConfig {
        vocab: vocab_of(&args.root)?.max(tokenizer_vocab),
        context: args.context,
        dim: args.dim,
        layers: args.layers,
        heads: args.heads,
    };
    let config = TrainConfig {
        root: args.root.clone(),
        model,
        batching: args.batching,
        batch_size: args.batch_size,
        steps: args.steps,
        max_tokens: None,
        lr: args.lr,
        seed: args.seed,
        workers: args.workers,
        log_every: args.log_every,
        eval_every: args.eval_every,
        checkpoint: args.checkpoint.clone(),
    };
    println!(
        "== training ({:?} batches of {} records, rows of {} tokens; {} blocks of width {}, {} heads, vocabulary {})",
        config.batching,
        config.batch_size,
        model.context,
        model.layers,
        model.dim,
        model.heads,
        model.vocab
    );
    let (trained, _vars, report) = train(&config, &device)?;
    let mut validation = report.validation.iter().peekable();
    for (step, loss) in &report.train_losses {
        print!("step {step:>5}  train loss {loss:.3}");
        if let Some((_, ce)) = validation.next_if(|(s, _)| s == step) {
            print!(
                "  validation {ce:.3} nats/token (perplexity {:.2})",
                ce.exp()
            );
        }
        println!();
    }
    for (step, ce) in validation {
        println!(
            "step {step:>5}  validation {ce:.3} nats/token (perplexity {:.2})",
            ce.exp()
        );
    }
    println!(
        "{} steps, {} real tokens in {:.1} s: {:.0} tokens/s, {:.1} % of the time waiting on the loader, padding {:.1} %",
        report.steps,
        report.tokens,
        report.elapsed.as_secs_f64(),
        report.tokens_per_second(),
        100.0 * report.waited_share(),
        100.0 * report.padding_fraction()
    );
    println!("where the training loader's time went:\n{}", report.loader);

    let test = evaluate(&trained, &args.root, "test", &device)?;
    let unigram = unigram_cross_entropy(&args.root, "test")?;
    println!("== test split");
    println!(
        "model ({:?} batches):        {test:.3} nats/token, perplexity {:.2}",
        config.batching,
        test.exp()
    );
    println!(
        "unigram baseline:              {unigram:.3} nats/token, perplexity {:.2}",
        unigram.exp()
    );
    if !args.no_baseline && config.batching != Batching::Padded {
        let padded = TrainConfig {
            batching: Batching::Padded,
            max_tokens: Some(report.tokens),
            steps: u64::MAX,
            eval_every: 0,
            log_every: 0,
            checkpoint: None,
            ..config.clone()
        };
        let (baseline, _vars, b) = train(&padded, &device)?;
        let ce = evaluate(&baseline, &args.root, "test", &device)?;
        println!(
            "padded random batches, same tokens ({} steps, padding {:.1} %, {:.0} tokens/s): {ce:.3} nats/token, perplexity {:.2}",
            b.steps,
            100.0 * b.padding_fraction(),
            b.tokens_per_second(),
            ce.exp()
        );
    }
    println!(
        "== padding of each batching ({} steps of {} records, rows of {} tokens)",
        50, config.batch_size, model.context
    );
    for (what, fraction) in
        padding_survey(&args.root, config.batch_size, model.context, 50, &device)?
    {
        println!("{what:<22} {:>5.1} %", 100.0 * fraction);
    }
    println!("== samples");
    for (k, prompt) in ["The ", "A man ", "Love "].iter().enumerate() {
        let sample = generate(&trained, &text, prompt, 160, 0.8, k as u64 + 1, &device)?;
        println!("{}", sample.replace('\n', "\n  "));
        println!("--");
    }
    Ok(())
}
