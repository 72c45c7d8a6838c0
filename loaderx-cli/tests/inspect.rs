//! `loaderx info|digest|verify` on what the converters write: conversion
//! roots, splits, multi-part datasets and single stores, converted from
//! inputs written by numpy, `datasets` and Pillow
//! (`tests/python/make_inspect_fixtures.py`); and the class names every
//! converter writes beside a split, read back with `loaderx_core::classes`.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::path::{Path, PathBuf};

use support::{failed, loaderx, ok, python};

/// The fixtures, written once per test binary run; `None` to skip.
fn fixtures() -> Option<PathBuf> {
    let py = python(&["numpy", "PIL", "datasets"])?;
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    Some(
        DIR.get_or_init(|| {
            support::write_fixtures(&py, "make_inspect_fixtures.py", "inspect_fixtures")
        })
        .clone(),
    )
}

fn names(v: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(v.clone()).unwrap()
}

/// Every line of `loaderx digest OUT` is the digest of the store it names.
fn digest_lines_are_the_stores_digests(out: &Path, expect_streams: &[&str]) {
    let text = ok(&loaderx(args!["digest", out.as_os_str()]));
    let mut named = Vec::new();
    for line in text.lines() {
        let (digest, name) = line.rsplit_once("  ").unwrap();
        let single = ok(&loaderx(args!["digest", out.join(name).as_os_str()]));
        assert_eq!(single.trim_end(), digest, "{name}");
        named.push(name.to_owned());
    }
    assert_eq!(named, expect_streams, "{text}");
}

#[test]
fn a_numpy_root_is_told_apart_from_its_split_and_its_stores() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    ok(&loaderx(args![
        "convert",
        "npy",
        fx.join("npy/x.npy").as_os_str(),
        fx.join("npy/y.npy").as_os_str(),
        "-o",
        out.as_os_str()
    ]));

    let info = ok(&loaderx(args!["info", out.as_os_str()]));
    let first = info.lines().next().unwrap();
    assert_eq!(
        first,
        format!("{}: a conversion root of 1 split: train", out.display())
    );
    let row = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row {name}:\n{info}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    // stream, kind, records, dtype, shape, codec, payload, raw, ratio, index.
    let x = row("train/x");
    assert_eq!(
        &x[..6],
        ["train/x", "dense", "12", "f32", "[4]", "raw"],
        "{info}"
    );
    assert_eq!(&x[8..10], ["192", "B"], "{info}");
    let y = row("train/y");
    assert_eq!(
        &y[..5],
        ["train/y", "dense", "12", "i64", "scalar"],
        "{info}"
    );
    assert!(!info.contains("class names"), "{info}");
    assert!(
        info.contains("index: meta.zr"),
        "the index column is explained:\n{info}"
    );

    let split = ok(&loaderx(args!["info", out.join("train").as_os_str()]));
    assert!(
        split.starts_with(&format!(
            "{}: a split of 2 stores (x, y)",
            out.join("train").display()
        )),
        "{split}"
    );
    let store = ok(&loaderx(args!["info", out.join("train/x").as_os_str()]));
    assert!(store.starts_with(&format!("{}: a store\n", out.join("train/x").display())));
    assert!(store.contains("item_shape: [4]"), "{store}");

    let verify = ok(&loaderx(args!["verify", out.as_os_str()]));
    assert!(
        verify.contains("train/x: 12 records read and decoded"),
        "{verify}"
    );
    assert!(
        verify.ends_with("ok: 24 records in 2 stores verified\n"),
        "{verify}"
    );
    digest_lines_are_the_stores_digests(&out, &["train/x", "train/y"]);

    // A missing path, a file, a directory of something else.
    let missing = tmp.path().join("missing");
    for command in ["info", "digest", "verify"] {
        let err = failed(&loaderx(args![command, missing.as_os_str()]));
        assert_eq!(
            err,
            format!(
                "loaderx: {}: no such file or directory\n",
                missing.display()
            )
        );
    }
    let err = failed(&loaderx(args!["info", fx.join("npy").as_os_str()]));
    assert!(
        err.contains("nothing loaderx reads is here") && err.contains("dataset.json"),
        "{err}"
    );
}

#[test]
fn class_label_names_survive_parquet_save_to_disk_and_parts() {
    let Some(fx) = fixtures() else { return };
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.join("expected.json")).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let parquet = fx.join("labelled.parquet");
    for (format, input, out) in [
        (
            "parquet",
            fx.join("labelled.parquet"),
            tmp.path().join("pq"),
        ),
        ("arrow", fx.join("saved"), tmp.path().join("saved")),
    ] {
        ok(&loaderx(args![
            "convert",
            format,
            input.as_os_str(),
            "-o",
            out.as_os_str()
        ]));
        let text = std::fs::read_to_string(out.join("train/classes.json")).unwrap();
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            file,
            serde_json::json!({"label": expected["label"], "tags": expected["tags"]}),
            "{format}"
        );
        let classes = loaderx_core::classes(out.join("train")).unwrap();
        assert_eq!(classes.get("label").unwrap(), names(&expected["label"]));
        assert_eq!(classes.name("tags", 1), Some("green"));
        assert_eq!(classes.get("x"), None);

        let info = ok(&loaderx(args!["info", out.as_os_str()]));
        assert!(
            info.contains("train/label: 3 classes: cat, dog, emu"),
            "{info}"
        );
        assert!(info.contains("train/tags: 2 classes: red, green"), "{info}");
        let verify = ok(&loaderx(args!["verify", out.as_os_str()]));
        assert!(
            verify.contains("train/label: 10 records read and decoded; 10 labels checked"),
            "{verify}"
        );
        digest_lines_are_the_stores_digests(&out, &["train/label", "train/tags", "train/x"]);
    }

    // Two part writers: each part holds the names; the merged dataset is
    // inspected as a split of a root and on its own.
    let parts = tmp.path().join("parts");
    for i in ["0", "1"] {
        ok(&loaderx(args![
            "convert",
            "parquet",
            parquet.as_os_str(),
            "-o",
            parts.as_os_str(),
            "--part",
            i,
            "--parts",
            "2"
        ]));
    }
    let err = failed(&loaderx(args!["info", parts.as_os_str()]));
    assert!(
        err.contains("no dataset.json") && err.contains("dataset merge"),
        "{err}"
    );
    ok(&loaderx(args![
        "dataset",
        "merge",
        parts.join("train").as_os_str()
    ]));
    let classes = loaderx_core::classes(parts.join("train")).unwrap();
    assert_eq!(classes.get("label").unwrap(), names(&expected["label"]));
    let info = ok(&loaderx(args!["info", parts.join("train").as_os_str()]));
    assert!(
        info.starts_with(&format!(
            "{}: a multi-part dataset of 10 records in 2 parts, streams label, tags, x",
            parts.join("train").display()
        )),
        "{info}"
    );
    let verify = ok(&loaderx(args!["verify", parts.as_os_str()]));
    assert!(
        verify.contains("train/classes.json: the same class names in its 2 parts"),
        "{verify}"
    );
    // The dataset's digests are the single conversion's.
    let whole = ok(&loaderx(args!["digest", tmp.path().join("pq").as_os_str()]));
    assert_eq!(ok(&loaderx(args!["digest", parts.as_os_str()])), whole);
    // `loaderx dataset ...` works as before.
    let old = ok(&loaderx(args![
        "dataset",
        "digest",
        parts.join("train").as_os_str()
    ]));
    let new = ok(&loaderx(args!["digest", parts.join("train").as_os_str()]));
    assert_eq!(old, new);
}

#[test]
fn an_image_folders_classes_and_ragged_images_are_shown() {
    let Some(fx) = fixtures() else { return };
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.join("expected.json")).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    ok(&loaderx(args![
        "convert",
        "images",
        fx.join("folder").as_os_str(),
        "-o",
        out.as_os_str(),
        "--decoded"
    ]));
    for split in ["train", "test"] {
        let classes = loaderx_core::classes(out.join(split)).unwrap();
        assert_eq!(classes.get("label").unwrap(), names(&expected["folder"]));
    }
    let info = ok(&loaderx(args!["info", out.as_os_str()]));
    assert_eq!(
        info.lines().next().unwrap(),
        format!(
            "{}: a conversion root of 2 splits: test, train",
            out.display()
        )
    );
    // Decoded pixels: one shape in test (Dense), two in train (Ragged,
    // each dimension's range).
    let row = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row {name}:\n{info}"))
            .to_owned()
    };
    let test = row("test/image");
    let words: Vec<&str> = test.split_whitespace().take(4).collect();
    assert_eq!(words, ["test/image", "dense", "4", "u8"], "{info}");
    assert!(test.contains("  [4, 6, 3]  "), "{info}");
    let train = row("train/image");
    assert!(
        train.contains("ragged") && train.contains("[4..7, 5..6, 3]"),
        "{info}"
    );
    assert!(info.contains("test/label: 2 classes: cat, dog"), "{info}");

    let verify = ok(&loaderx(args!["verify", out.as_os_str()]));
    assert!(
        verify.contains("train/label: 6 records read and decoded; 6 labels checked against 2"),
        "{verify}"
    );
    digest_lines_are_the_stores_digests(
        &out,
        &["test/image", "test/label", "train/image", "train/label"],
    );

    // A label without a name fails verify, naming the store and record.
    std::fs::write(out.join("train/classes.json"), r#"{"label": ["cat"]}"#).unwrap();
    let err = failed(&loaderx(args!["verify", out.as_os_str()]));
    assert!(err.contains("label 1 has no class name"), "{err}");
    // A malformed file fails, naming it, its line and column.
    std::fs::write(out.join("train/classes.json"), "{\"label\": [\"cat\",\n").unwrap();
    let err = failed(&loaderx(args!["info", out.as_os_str()]));
    assert!(
        err.starts_with(&format!(
            "loaderx: {}:2:",
            out.join("train/classes.json").display()
        )),
        "{err}"
    );
}
