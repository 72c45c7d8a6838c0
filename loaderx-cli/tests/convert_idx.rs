//! `loaderx convert idx` on the real Fashion-MNIST files from Debian's
//! `dataset-fashion-mnist` package (the test command installs it).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use loaderx_convert::idx::read_idx;
use loaderx_core::{Codec, Dense, DigestBuilder, Store, StoreKind, digest};

const FASHION: &str = "/usr/share/datasets/fashion-mnist";

fn fashion() -> Option<&'static Path> {
    let p = Path::new(FASHION);
    if p.join("train-images-idx3-ubyte.gz").is_file() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: {FASHION} is absent; install Debian's dataset-fashion-mnist (./scripts/test does)"
        );
        None
    }
}

#[test]
fn cli_converts_fashion_mnist_losslessly() {
    let Some(src) = fashion() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fashion");
    let status = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["convert", "idx"])
        .arg(src)
        .arg(&out)
        .args(["--codec", "zstd", "--shards", "3"])
        .status()
        .unwrap();
    assert!(status.success());
    // Nothing but the published root is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["fashion"]);

    for (split, n, prefix) in [("train", 60_000u64, "train"), ("test", 10_000, "t10k")] {
        let images = Dense::<u8>::open(out.join(split).join("image")).unwrap();
        let labels = Dense::<u8>::open(out.join(split).join("label")).unwrap();
        assert_eq!(images.len(), n);
        assert_eq!(labels.len(), n);
        assert_eq!(images.item_shape(), &[28, 28]);
        assert_eq!(labels.item_shape(), &[] as &[usize]);
        assert_eq!(images.as_dyn().codec(), Codec::Zstd);
        assert_eq!(images.as_dyn().data_shards(), 3);
        // Store digests equal digests of the source files' contents.
        let raw = read_idx(src.join(format!("{prefix}-images-idx3-ubyte.gz"))).unwrap();
        let mut expect = DigestBuilder::new();
        raw.data.chunks(784).for_each(|r| expect.push(&[28, 28], r));
        let store = Store::open(out.join(split).join("image")).unwrap();
        assert_eq!(store.kind(), StoreKind::Dense);
        assert_eq!(digest(&store).unwrap(), expect.finish());
        let raw = read_idx(src.join(format!("{prefix}-labels-idx1-ubyte.gz"))).unwrap();
        assert!(raw.data.iter().all(|&l| l < 10));
        let all: Vec<u64> = (0..n).collect();
        assert_eq!(
            labels.gather(&all).unwrap().as_slice().unwrap(),
            &raw.data[..]
        );
    }

    // Refuses to overwrite, and a bad source leaves nothing behind.
    let again = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["convert", "idx"])
        .arg(src)
        .arg(&out)
        .output()
        .unwrap();
    assert!(!again.status.success());
    let bad_src = dir.path().join("bad");
    std::fs::create_dir(&bad_src).unwrap();
    for name in [
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
    ] {
        std::fs::copy(
            src.join(format!("{name}.gz")),
            bad_src.join(format!("{name}.gz")),
        )
        .unwrap();
    }
    // Test labels: the train labels file, so counts disagree (60000 vs 10000 images).
    std::fs::copy(
        src.join("train-labels-idx1-ubyte.gz"),
        bad_src.join("t10k-labels-idx1-ubyte.gz"),
    )
    .unwrap();
    let failed = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["convert", "idx"])
        .arg(&bad_src)
        .arg(dir.path().join("bad_out"))
        .output()
        .unwrap();
    assert!(!failed.status.success());
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(err.contains("10000 images but 60000 labels"), "{err}");
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["bad", "fashion"]);
}
