//! Trains a tiny configuration on real text (Debian's `fortunes`, which the
//! README's test command installs) for a few dozen steps on a fixed seed:
//! the validation cross-entropy must fall below the unigram baseline's.
//! Also: a run resumed from its checkpoint reads exactly the batches the
//! uninterrupted run reads from that step, and packing pads far less than
//! padded batches.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use candle_core::Device;
use candle_lm::{
    Batching, ModelConfig, STREAM, TrainConfig, train, train_loader, unigram_cross_entropy,
};
use loaderx_core::{Codec, CreateOptions, RaggedWriter};

const FORTUNES: &str = "/usr/share/games/fortunes";

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// The corpus `examples/candle-lm/data/make_corpus.py` builds, written as
/// stores directly: quotations of every file but the two ASCII art ones,
/// duplicates dropped, split by FNV-1a % 20.
fn corpus(root: &Path) {
    let dir = Path::new(FORTUNES);
    assert!(
        dir.is_dir(),
        "{FORTUNES} is missing: install Debian's `fortunes` (the README's test command does)"
    );
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.contains('.') && n != "art" && n != "ascii-art")
        .collect();
    names.sort();
    let mut seen = std::collections::HashSet::new();
    let mut splits: [Vec<Vec<u8>>; 3] = Default::default();
    for name in names {
        let path = dir.join(&name);
        if !path.is_file() {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        for q in text.split("\n%\n") {
            let q = q.trim_matches('\n').trim_end();
            if q.is_empty() || q == "%" || !seen.insert(q.to_owned()) {
                continue;
            }
            let k = match fnv1a(q.as_bytes()) % 20 {
                0 => 2,
                1 => 1,
                _ => 0,
            };
            splits[k].push(q.as_bytes().to_vec());
        }
    }
    for (split, records) in ["train", "validation", "test"].iter().zip(splits) {
        let mut w = RaggedWriter::<u8>::create_with(
            root.join(split).join(STREAM),
            1,
            &CreateOptions::new(Codec::Zstd),
        )
        .unwrap();
        w.append(records).unwrap();
        w.close().unwrap();
    }
}

fn tiny(root: &Path, steps: u64, batching: Batching) -> TrainConfig {
    TrainConfig {
        root: root.to_path_buf(),
        model: ModelConfig {
            vocab: candle_lm::BYTE_VOCAB,
            context: 64,
            dim: 64,
            layers: 1,
            heads: 2,
        },
        batching,
        batch_size: 16,
        steps,
        max_tokens: None,
        lr: 1e-2,
        seed: 7,
        workers: 2,
        log_every: 10,
        eval_every: 0,
        checkpoint: None,
    }
}

#[test]
fn a_tiny_model_beats_the_unigram_baseline_and_resumes_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("fortunes");
    corpus(&root);
    let device = Device::Cpu;
    let unigram = unigram_cross_entropy(&root, "validation").unwrap();
    assert!(unigram > 2.5 && unigram < 4.5, "unigram {unigram}");

    // 30 steps, checkpointed; then resumed to 60.
    let checkpoint = tmp.path().join("checkpoint");
    let mut first = tiny(&root, 30, Batching::Packed);
    first.checkpoint = Some(checkpoint.clone());
    let (_, _, a) = train(&first, &device).unwrap();
    assert_eq!((a.steps, a.end_step), (30, 30));
    let mut rest = first.clone();
    rest.steps = 60;
    let (_, _, b) = train(&rest, &device).unwrap();
    assert_eq!((b.steps, b.end_step), (30, 60), "resumed at step 30");
    let (start_ce, end_ce) = (a.validation[0].1, b.validation[0].1);
    assert!(
        end_ce < unigram && end_ce < start_ce,
        "validation {start_ce:.3} at step 30, {end_ce:.3} at 60; unigram {unigram:.3}"
    );
    // The losses logged fall.
    let losses: Vec<f64> = a
        .train_losses
        .iter()
        .chain(&b.train_losses)
        .map(|l| l.1)
        .collect();
    assert!(
        losses.last().unwrap() < losses.first().unwrap(),
        "{losses:?}"
    );

    // The resumed loader's batches are the uninterrupted run's from step 30.
    let whole = tiny(&root, 60, Batching::Packed);
    let mut from_zero = train_loader(&whole, 0, &device).unwrap().skip(30);
    let mut resumed = train_loader(&whole, 30, &device).unwrap();
    for _ in 0..3 {
        let (x, y) = (
            from_zero.next().unwrap().unwrap(),
            resumed.next().unwrap().unwrap(),
        );
        assert_eq!(
            x.tokens.to_vec2::<u32>().unwrap(),
            y.tokens.to_vec2::<u32>().unwrap()
        );
        assert_eq!(x.predicted, y.predicted);
    }

    // Packing pads a few per cent; padded random batches more (at this
    // short context most records fill their row and are cut).
    let (_, _, padded) = train(&tiny(&root, 5, Batching::Padded), &device).unwrap();
    assert!(
        a.padding_fraction() < 0.1 && padded.padding_fraction() > a.padding_fraction(),
        "packed {:.3}, padded {:.3}",
        a.padding_fraction(),
        padded.padding_fraction()
    );
    assert!(a.tokens > 0 && a.tokens_per_second() > 0.0);
}

/// Token-id stores (what `convert hf --tokenizer` writes, Ragged `u32`)
/// train the same way: the vocabulary is the largest id plus one, the
/// unigram baseline counts ids, a few steps run and evaluate.
#[test]
fn token_id_stores_train_with_their_vocabulary() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for (split, n) in [("train", 400usize), ("validation", 40), ("test", 40)] {
        let mut w = RaggedWriter::<u32>::create_with(
            root.join(split).join(STREAM),
            1,
            &CreateOptions::new(Codec::Zstd),
        )
        .unwrap();
        // Repeating phrases of ids below 300, so there is something to learn.
        let recs: Vec<Vec<u32>> = (0..n)
            .map(|i| {
                (0..5 + i % 40)
                    .map(|k| ((i % 7) * 40 + k % 9) as u32)
                    .collect()
            })
            .collect();
        w.append(recs).unwrap();
        w.close().unwrap();
    }
    let vocab = candle_lm::vocab_of(root).unwrap();
    assert_eq!(vocab, 6 * 40 + 8 + 1);
    let unigram = unigram_cross_entropy(root, "validation").unwrap();
    let mut config = tiny(root, 20, Batching::TokenBudget);
    config.model.vocab = vocab;
    let (_, _, report) = train(&config, &Device::Cpu).unwrap();
    assert_eq!(report.steps, 20);
    let ce = report.validation[0].1;
    assert!(ce.is_finite() && ce < unigram, "{ce} vs unigram {unigram}");
}
