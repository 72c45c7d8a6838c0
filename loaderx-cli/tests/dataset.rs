//! `loaderx convert idx --part I --parts N` by four processes at once,
//! `loaderx dataset merge`, and `dataset info|digest|verify`: the merged
//! dataset's digests equal a single conversion's.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

fn loaderx(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loaderx"));
    c.args(args);
    c
}

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// An IDX file of `u8` elements with `dims`.
fn idx(path: &Path, dims: &[u32], data: &[u8]) {
    let mut bytes = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        bytes.extend_from_slice(&d.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// MNIST-format files: 1001 training and 301 test images of 4×3.
fn fixture(dir: &Path) {
    for (prefix, n) in [("train", 1001u32), ("t10k", 301)] {
        let images: Vec<u8> = (0..n * 12).map(|i| (i * 31 % 251) as u8).collect();
        let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
        idx(
            &dir.join(format!("{prefix}-images-idx3-ubyte")),
            &[n, 4, 3],
            &images,
        );
        idx(
            &dir.join(format!("{prefix}-labels-idx1-ubyte")),
            &[n],
            &labels,
        );
    }
}

#[test]
fn four_writers_at_once_then_merge_equal_one_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    fixture(&src);
    let parted = dir.path().join("parted");
    // Four processes, started together, each its quarter.
    let children: Vec<_> = (0..4)
        .map(|i| {
            loaderx(&["convert", "idx"])
                .arg(&src)
                .arg("-o")
                .arg(&parted)
                .args([
                    "--codec",
                    "zstd",
                    "--shards",
                    "2",
                    "--part",
                    &i.to_string(),
                    "--parts",
                    "4",
                ])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let single = dir.path().join("single");
    ok(loaderx(&["convert", "idx"])
        .arg(&src)
        .arg("-o")
        .arg(&single)
        .args(["--codec", "raw"])
        .output()
        .unwrap());
    for (split, n) in [("train", 1001), ("test", 301)] {
        let ds = parted.join(split);
        let merged = ok(loaderx(&["dataset", "merge"])
            .arg(&ds)
            .args(["--parts", "4"])
            .output()
            .unwrap());
        assert!(
            merged.contains(&format!("{n} records in 4 parts")),
            "{merged}"
        );
        let digests = ok(loaderx(&["dataset", "digest"]).arg(&ds).output().unwrap());
        for stream in ["image", "label"] {
            let one = ok(loaderx(&["digest"])
                .arg(single.join(split).join(stream))
                .output()
                .unwrap());
            assert!(
                digests.contains(&format!("{}  {stream}", one.trim())),
                "{digests} vs {one}"
            );
        }
        let info = ok(loaderx(&["dataset", "info"]).arg(&ds).output().unwrap());
        assert!(
            info.contains(&format!("length: {n}")) && info.contains("parts: 4"),
            "{info}"
        );
        assert!(
            info.contains("stream image: dense u8 (uint8), item_shape [4, 3]"),
            "{info}"
        );
        let verified = ok(loaderx(&["dataset", "verify"]).arg(&ds).output().unwrap());
        assert!(verified.starts_with("ok:"), "{verified}");
    }
    // A writer run twice: its part exists, the second is refused.
    let again = loaderx(&["convert", "idx"])
        .arg(&src)
        .arg("-o")
        .arg(&parted)
        .args(["--part", "1", "--parts", "4"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("part-00001"));
    // --part without --parts, or past it: refused.
    let bad = loaderx(&["convert", "idx"])
        .arg(&src)
        .arg("-o")
        .arg(dir.path().join("x"))
        .args(["--part", "1"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let bad = loaderx(&["convert", "idx"])
        .arg(&src)
        .arg("-o")
        .arg(dir.path().join("x"))
        .args(["--part", "4", "--parts", "4"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("part 4 (from --part) of 4"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn merge_refuses_missing_writers_and_leaves_no_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    fixture(&src);
    let parted = dir.path().join("parted");
    for i in [0, 1, 3] {
        ok(loaderx(&["convert", "idx"])
            .arg(&src)
            .arg("-o")
            .arg(&parted)
            .args(["--part", &i.to_string(), "--parts", "4"])
            .output()
            .unwrap());
    }
    let out = loaderx(&["dataset", "merge"])
        .arg(parted.join("train"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("part-00002 is missing"));
    assert!(!parted.join("train").join("dataset.json").exists());
    let out = loaderx(&["dataset", "info"])
        .arg(parted.join("train"))
        .output()
        .unwrap();
    assert!(!out.status.success());
}
