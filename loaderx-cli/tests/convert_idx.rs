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
        .arg("-o")
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
        .arg("-o")
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
        .arg("-o")
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

/// Two pods of an Indexed Job: `--parts 2` with the index from
/// `JOB_COMPLETION_INDEX`; merged, the single conversion's digests.
#[test]
fn parts_take_their_index_from_job_completion_index() {
    let Some(src) = fashion() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (whole, parts) = (dir.path().join("whole"), dir.path().join("parts"));
    let run = |args: &[&str], index: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_loaderx"));
        cmd.args(["convert", "idx"]).arg(src).arg("-o").args(args);
        match index {
            Some(i) => cmd.env("JOB_COMPLETION_INDEX", i),
            None => cmd.env_remove("JOB_COMPLETION_INDEX"),
        };
        cmd.output().unwrap()
    };
    assert!(
        run(&[whole.to_str().unwrap(), "--codec", "raw"], None)
            .status
            .success()
    );
    for index in ["0", "1"] {
        let out = run(
            &[parts.to_str().unwrap(), "--codec", "raw", "--parts", "2"],
            Some(index),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Without the variable, --parts alone is refused by name.
    let out = run(
        &[dir.path().join("x").to_str().unwrap(), "--parts", "2"],
        None,
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("JOB_COMPLETION_INDEX"));
    for split in ["train", "test"] {
        let merged = loaderx_core::Dataset::merge(parts.join(split), Some(2)).unwrap();
        for (name, joined) in merged.streams() {
            let single = Store::open(whole.join(split).join(name)).unwrap();
            assert_eq!(
                digest(joined).unwrap(),
                digest(&single).unwrap(),
                "{split}/{name}"
            );
        }
    }
}
