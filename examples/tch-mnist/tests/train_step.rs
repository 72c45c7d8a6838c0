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
    };
    let report = train(&config, tch::Device::Cpu).unwrap();
    let (first, last) = (report.epochs[0], *report.epochs.last().unwrap());
    assert!(last.1 < first.1, "loss did not fall: {:?}", report.epochs);
    assert!(last.2 > 0.9, "accuracy {:?}", report.epochs);
}
