//! The example's training loop on a tiny synthetic store.

#![allow(clippy::unwrap_used)]

use loaderx_core::{Codec, DenseWriter};
use tch_mnist::{Config, train};

fn write_root(root: &std::path::Path, n: usize) {
    for split in ["train", "test"] {
        let mut images = Vec::with_capacity(n * 784);
        let mut labels = Vec::with_capacity(n);
        for i in 0..n {
            let c = (i * 3 + usize::from(split == "test")) % 10;
            labels.push(c as u8);
            for y in 0..28 {
                for x in 0..28 {
                    images.push(if y / 3 == c {
                        220 - (x % 30) as u8
                    } else {
                        ((i + x * y) % 30) as u8
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
    let report = train(&config, tch::Device::Cpu).unwrap();
    let (first, last) = (report.epochs[0], *report.epochs.last().unwrap());
    assert!(last.1 < first.1, "loss did not fall: {:?}", report.epochs);
    assert!(last.2 > 0.9, "accuracy {:?}", report.epochs);
}

#[test]
fn evaluation_sees_every_record_whatever_the_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    // 503 is prime: no batch size but 1 and 503 divides it.
    write_root(dir.path(), 503);
    tch::manual_seed(5);
    let vs = tch::nn::VarStore::new(tch::Device::Cpu);
    let net = tch_mnist::model(&vs.root(), 28 * 28, 16);
    let accuracies: Vec<f64> = [1000, 999, 10_000, 7, 50, 1]
        .into_iter()
        .map(|b| tch_mnist::evaluate(&net, dir.path(), "test", b, tch::Device::Cpu).unwrap())
        .collect();
    assert!(
        accuracies.iter().all(|&a| a == accuracies[0]),
        "{accuracies:?}"
    );
    let hits = accuracies[0] * 503.0;
    assert!((hits - hits.round()).abs() < 1e-9, "{accuracies:?}");
}
