//! The converters' defaults, without flags: a codec per store that never
//! stores small records larger than raw (Fashion-MNIST's labels), strings
//! stored as their UTF-8 bytes (parquet and JSON lines), images of several
//! sizes stored as their files' bytes (and `--decoded` for padded pixels),
//! and a folder of mixed image modes refused naming the files.
//!
//! The image and text inputs are written by Pillow and pyarrow
//! (`tests/python/make_defaults_fixtures.py`): a python with `PIL`,
//! `numpy` and `pyarrow` is needed (`LOADERX_PYTHON`, else
//! `$HOME/.cache/loaderx/venv/bin/python`); without one those tests are
//! skipped, unless `CI` is set. The IDX test needs Debian's
//! `dataset-fashion-mnist` (skipped without it).

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use loaderx_core::{Codec, Store, StoreKind};
use support::{failed, loaderx, ok, records};

const FASHION: &str = "/usr/share/datasets/fashion-mnist";

/// The fixtures, written once per test process.
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let py = support::python(&["PIL", "numpy", "pyarrow"])?;
        Some(support::write_fixtures(
            &py,
            "make_defaults_fixtures.py",
            "defaults-fixtures",
        ))
    })
    .as_deref()
}

/// The strings the fixture script writes (`TEXTS`).
const TEXTS: [&str; 5] = [
    "the first hour",
    "naïve café, déjà vu",
    "a longer line of text, a longer line of text, a longer line of text, a longer line of text, ",
    "短い文",
    "x",
];

#[test]
fn idx_labels_are_never_stored_larger_than_raw_by_default() {
    let src = Path::new(FASHION);
    if !src.join("train-labels-idx1-ubyte.gz").is_file() {
        eprintln!("SKIPPED: {FASHION} is absent; install Debian's dataset-fashion-mnist");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (auto, raw, zstd) = (
        tmp.path().join("auto"),
        tmp.path().join("raw"),
        tmp.path().join("zstd"),
    );
    let text = ok(&loaderx(args![
        "convert",
        "idx",
        src.as_os_str(),
        auto.as_os_str()
    ]));
    assert!(
        text.contains("train: 60000 records of [28, 28]")
            && text.contains("  label: raw (zstd would store ")
            && text.contains("  image: zstd (0."),
        "{text}"
    );
    for (out, codec) in [(&raw, "raw"), (&zstd, "zstd")] {
        let text = ok(&loaderx(args![
            "convert",
            "idx",
            src.as_os_str(),
            out.as_os_str(),
            "--codec",
            codec
        ]));
        assert!(
            text.contains(&format!("label: {codec} (asked for)")),
            "{text}"
        );
    }
    for split in ["train", "test"] {
        let open = |root: &Path, stream: &str| Store::open(root.join(split).join(stream)).unwrap();
        let label = open(&auto, "label");
        assert_eq!(label.codec(), Codec::Raw, "{split}");
        let raw_bytes = open(&raw, "label").stored_bytes();
        assert!(
            label.stored_bytes() <= raw_bytes,
            "{split}: {} > {raw_bytes}",
            label.stored_bytes()
        );
        // What zstd made of the labels before: more than raw.
        assert!(open(&zstd, "label").stored_bytes() > raw_bytes, "{split}");
        // The images compress: zstd, and smaller than raw.
        let image = open(&auto, "image");
        assert_eq!(image.codec(), Codec::Zstd, "{split}");
        assert!(image.stored_bytes() < open(&raw, "image").stored_bytes());
        // Same records either way.
        assert_eq!(
            loaderx_core::digest(&label).unwrap(),
            loaderx_core::digest(&open(&raw, "label")).unwrap()
        );
    }
}

#[test]
fn text_columns_convert_to_their_utf8_bytes_without_a_flag() {
    let Some(dir) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for (kind, file) in [("parquet", "text.parquet"), ("jsonl", "text.jsonl")] {
        let out = tmp.path().join(kind);
        let text = ok(&loaderx(args![
            "convert",
            kind,
            dir.join(file).as_os_str(),
            "-o",
            out.as_os_str()
        ]));
        assert!(
            text.contains("text: ragged u8 (rank 1)")
                && text.contains("strings stored as their UTF-8 bytes (--tokenizer REF")
                && text.contains("  label: raw (zstd would store"),
            "{kind}: {text}"
        );
        let store = Store::open(out.join("train/text")).unwrap();
        assert_eq!(store.kind(), StoreKind::Ragged);
        let got = records(&store);
        assert_eq!(got.len(), TEXTS.len(), "{kind}");
        for ((shape, bytes), want) in got.iter().zip(TEXTS) {
            assert_eq!(*shape, [want.len()], "{kind}: {want}");
            assert_eq!(bytes, want.as_bytes(), "{kind}");
        }
        // Short labels: raw, never larger than their bytes plus the table.
        let label = Store::open(out.join("train/label")).unwrap();
        assert_eq!(label.codec(), Codec::Raw, "{kind}");
        // `--text bytes` still works, and stores the same records.
        let again = tmp.path().join(format!("{kind}-flag"));
        ok(&loaderx(args![
            "convert",
            kind,
            dir.join(file).as_os_str(),
            "-o",
            again.as_os_str(),
            "--text",
            "bytes"
        ]));
        assert_eq!(
            records(&Store::open(again.join("train/text")).unwrap()),
            got
        );
    }
}

#[test]
fn images_of_several_sizes_are_stored_encoded_unless_decoded_is_asked() {
    let Some(dir) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = dir.join("sizes");
    let out = tmp.path().join("out");
    let text = ok(&loaderx(args![
        "convert",
        "images",
        root.as_os_str(),
        "-o",
        out.as_os_str()
    ]));
    assert!(
        text.contains("image: ragged u8 (rank 1)")
            && text.contains("the images have more than one size: stored as the files' bytes")
            && text.contains("--decoded stores decoded pixels"),
        "{text}"
    );
    let images = Store::open(out.join("train/image")).unwrap();
    assert_eq!(images.kind(), StoreKind::Ragged);
    // Record order: class by class, files by name.
    let files: Vec<PathBuf> = ["cat/0", "cat/2", "cat/4", "dog/1", "dog/3", "dog/5"]
        .iter()
        .map(|f| root.join("train").join(format!("{f}.png")))
        .collect();
    let got = records(&images);
    assert_eq!(got.len(), files.len());
    for ((shape, bytes), f) in got.iter().zip(&files) {
        let want = std::fs::read(f).unwrap();
        assert_eq!(*shape, [want.len()], "{}", f.display());
        assert!(*bytes == want, "{}: not the file's bytes", f.display());
    }

    // --decoded: the old padded Ragged pixels, each image its own shape.
    let decoded = tmp.path().join("decoded");
    let text = ok(&loaderx(args![
        "convert",
        "images",
        root.as_os_str(),
        "-o",
        decoded.as_os_str(),
        "--decoded"
    ]));
    assert!(!text.contains("files' bytes"), "{text}");
    let pixels = Store::open(decoded.join("train/image")).unwrap();
    assert_eq!(pixels.kind(), StoreKind::Ragged);
    assert_eq!(pixels.as_ragged().unwrap().ndim(), 3);
    let shapes: Vec<Vec<usize>> = records(&pixels).into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        shapes,
        [
            [16, 24, 3],
            [16, 24, 3],
            [30, 20, 3],
            [16, 24, 3],
            [30, 20, 3],
            [30, 20, 3]
        ]
    );
    let e = failed(&loaderx(args![
        "convert",
        "images",
        root.as_os_str(),
        "-o",
        tmp.path().join("both").as_os_str(),
        "--decoded",
        "--encoded"
    ]));
    assert!(e.contains("cannot be used with"), "{e}");
}

#[test]
fn a_folder_of_mixed_modes_names_the_files_and_the_way_out() {
    let Some(dir) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let e = failed(&loaderx(args![
        "convert",
        "images",
        dir.join("modes").as_os_str(),
        "-o",
        tmp.path().join("out").as_os_str()
    ]));
    assert!(
        e.contains("images of different modes: file \"")
            && e.contains("train/b/0.png\" (row 2) is RGB but the first image, file \"")
            && e.contains("train/a/0.png\" (row 0), is L")
            && e.contains("--image-mode RGB converts every image to one mode"),
        "{e}"
    );
    assert!(!tmp.path().join("out").exists());
    // The way out works.
    let out = tmp.path().join("rgb");
    ok(&loaderx(args![
        "convert",
        "images",
        dir.join("modes").as_os_str(),
        "-o",
        out.as_os_str(),
        "--image-mode",
        "RGB"
    ]));
    let images = Store::open(out.join("train/image")).unwrap();
    assert_eq!(images.kind(), StoreKind::Dense);
    assert_eq!(images.len(), 4);
}
