//! The example's training step on a tiny synthetic store: loss falls and the
//! model learns a separable toy problem.

#![allow(clippy::unwrap_used)]

use candle_core::Device;
use candle_mnist::{Config, evaluate, train};
use loaderx_core::{Codec, DenseWriter};

/// Class c images are bright in row band c (10 classes, 28x28).
fn write_root(root: &std::path::Path, n: usize) {
    for split in ["train", "test"] {
        let mut images = Vec::with_capacity(n * 784);
        let mut labels = Vec::with_capacity(n);
        for i in 0..n {
            let c = (i * 7 + usize::from(split == "test")) % 10;
            labels.push(c as u8);
            for y in 0..28 {
                for x in 0..28 {
                    let on = y / 3 == c;
                    images.push(if on {
                        200 + (x % 50) as u8
                    } else {
                        (i + x + y) as u8 % 40
                    });
                }
            }
        }
        let mut w =
            DenseWriter::<u8>::create(root.join(split).join("image"), &[28, 28], Codec::Zstd)
                .unwrap();
        w.append_slice(&images, n).unwrap();
        w.close().unwrap();
        let mut w =
            DenseWriter::<u8>::create(root.join(split).join("label"), &[], Codec::Raw).unwrap();
        w.append_slice(&labels, n).unwrap();
        w.close().unwrap();
    }
}

#[test]
fn trains_on_a_tiny_store() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path(), 500);
    let config = Config {
        root: dir.path().to_path_buf(),
        epochs: 3,
        batch_size: 50,
        workers: 2,
        hidden: 32,
        lr: 1e-2,
        seed: 1,
        eval_batch_size: 1000,
    };
    let (_, report) = train(&config, &Device::Cpu).unwrap();
    let first = report.epochs.first().unwrap();
    let last = report.epochs.last().unwrap();
    assert!(last.1 < first.1, "loss did not fall: {:?}", report.epochs);
    assert!(last.2 > 0.9, "accuracy {:?}", report.epochs);
    assert!(report.records_per_s > 0.0);
}

#[test]
fn evaluation_sees_every_record_whatever_the_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    // 503 is prime: no batch size but 1 and 503 divides it.
    write_root(dir.path(), 503);
    let config = Config {
        root: dir.path().to_path_buf(),
        epochs: 1,
        batch_size: 50,
        workers: 2,
        hidden: 16,
        lr: 1e-2,
        seed: 3,
        eval_batch_size: 7,
    };
    let (model, _) = train(&config, &Device::Cpu).unwrap();
    let accuracies: Vec<f64> = [1000, 999, 10_000, 7, 50, 1]
        .into_iter()
        .map(|b| evaluate(&model, dir.path(), "test", b, &Device::Cpu).unwrap())
        .collect();
    // Counted over all 503 records each time: the same number of hits.
    assert!(
        accuracies.iter().all(|&a| a == accuracies[0]),
        "{accuracies:?}"
    );
    let hits = accuracies[0] * 503.0;
    assert!((hits - hits.round()).abs() < 1e-9, "{accuracies:?}");
}
