//! `loaderx convert images` and `loaderx convert webdataset` (and their Rust
//! functions) against files the real producers wrote: an image folder of
//! PNG and JPEG files written by Pillow, WebDataset shards written by the
//! `webdataset` package's `TarWriter` (`tests/python/make_folder_fixtures.py`).
//! Decoded pixels are compared with PIL's `np.asarray(Image.open(f))`
//! (PNG exactly, by the canonical digest; JPEG within a decoder's
//! rounding), encoded stores with the files' bytes, labels with the class
//! index; parts merged with `loaderx dataset merge` with the single
//! conversion; hostile inputs with the errors that name them.
//!
//! Needs a python with `pillow`, `numpy` and `webdataset`: `LOADERX_PYTHON`,
//! else `$HOME/.cache/loaderx/venv/bin/python` (the test command installs
//! one). Without one the tests are skipped, unless `CI` is set (then they
//! fail); `LOADERX_SKIP_PYTHON=1` skips.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use support::{failed, loaderx, ok, records};

use loaderx_convert::folder::{CLASSES_FILE, ImageFolder, convert_image_folder};
use loaderx_convert::table::TableOptions;
use loaderx_convert::webdataset::{WebDataset, convert_webdataset};
use loaderx_core::{Store, StoreKind, digest};
use serde_json::Value;

struct Fixtures {
    dir: PathBuf,
    expected: Value,
}

/// Generates the fixtures once per test process.
fn fixtures() -> Option<&'static Fixtures> {
    static FIXTURES: OnceLock<Option<Fixtures>> = OnceLock::new();
    FIXTURES
        .get_or_init(|| {
            let py = support::python(&["PIL", "numpy", "webdataset"])?;
            let dir = support::write_fixtures(&py, "make_folder_fixtures.py", "folder-fixtures");
            let expected =
                serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
            Some(Fixtures { dir, expected })
        })
        .as_ref()
}

fn store_digest(path: &Path) -> String {
    digest(&Store::open(path).unwrap()).unwrap().sha256
}

#[test]
fn image_folder_decodes_like_pil_and_labels_by_class() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let text = ok(&loaderx(args![
        "convert",
        "images",
        fx.dir.join("folder").as_os_str(),
        "-o",
        out.as_os_str()
    ]));
    assert!(text.contains("train: 10 records"), "{text}");
    let classes: Vec<String> = serde_json::from_value(fx.expected["classes"].clone()).unwrap();
    for split in ["train", "test"] {
        let want = &fx.expected["folder"][split];
        let got = loaderx_core::classes(out.join(split)).unwrap();
        assert_eq!(
            got.get("label").unwrap(),
            classes,
            "{split}: every split lists every class"
        );
        let file: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join(split).join(CLASSES_FILE)).unwrap())
                .unwrap();
        assert_eq!(file, serde_json::json!({ "label": classes }));
        // Labels: the class index.
        let labels = Store::open(out.join(split).join("label")).unwrap();
        let got: Vec<i64> = records(&labels)
            .iter()
            .map(|(shape, b)| {
                assert!(shape.is_empty());
                i64::from_le_bytes(b.as_slice().try_into().unwrap())
            })
            .collect();
        let want_labels: Vec<i64> = serde_json::from_value(want["labels"].clone()).unwrap();
        assert_eq!(got, want_labels, "{split} labels");
        // Pixels: PIL's, PNG exactly, JPEG within rounding.
        let images = Store::open(out.join(split).join("image")).unwrap();
        assert_eq!(images.kind(), StoreKind::Dense, "{split}: one shape");
        let got = records(&images);
        let want_images = want["images"].as_array().unwrap();
        assert_eq!(got.len(), want_images.len());
        for ((shape, bytes), w) in got.iter().zip(want_images) {
            let what = format!("{split} {}", w["file"]);
            let pixels = std::fs::read(fx.dir.join(w["pixels"].as_str().unwrap())).unwrap();
            let want_shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
            assert_eq!(*shape, want_shape, "{what}");
            if w["exact"].as_bool().unwrap() {
                assert_eq!(*bytes, pixels, "{what}: PNG pixels differ from PIL's");
            } else {
                let max = bytes
                    .iter()
                    .zip(&pixels)
                    .map(|(a, b)| a.abs_diff(*b))
                    .max()
                    .unwrap();
                assert!(max <= 8, "{what}: JPEG pixels differ from PIL's by {max}");
            }
        }
        if let Some(d) = want.get("image_digest") {
            assert_eq!(
                store_digest(&out.join(split).join("image")),
                d.as_str().unwrap(),
                "{split}: the canonical digest of PIL's pixels"
            );
        }
    }
}

#[test]
fn image_folder_encoded_keeps_the_files_bytes() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let source =
        ImageFolder::new(fx.dir.join("folder")).options(TableOptions::new().encoded_images(true));
    let summary = convert_image_folder(&source, &out).unwrap();
    assert_eq!(summary.splits.len(), 2);
    for split in ["train", "test"] {
        let files: Vec<String> =
            serde_json::from_value(fx.expected["folder"][split]["files"].clone()).unwrap();
        let images = Store::open(out.join(split).join("image")).unwrap();
        assert_eq!(images.kind(), StoreKind::Ragged);
        let got = records(&images);
        assert_eq!(got.len(), files.len());
        for ((shape, bytes), f) in got.iter().zip(&files) {
            let want = std::fs::read(fx.dir.join("folder").join(split).join(f)).unwrap();
            assert_eq!(*shape, [want.len()], "{split}/{f}");
            assert!(*bytes == want, "{split}/{f}: not the file's bytes");
        }
    }
}

/// Converts `args` (a source and its flags) whole into `single`, and in
/// three parts into `parts`, merges each split, and compares the merged
/// streams' digests with the single conversion's stores.
fn parts_merge_into_the_single_conversion(
    source: &[&std::ffi::OsStr],
    tmp: &Path,
    splits: &[&str],
) {
    let single = tmp.join("single");
    let parts = tmp.join("parts");
    let mut a: Vec<&std::ffi::OsStr> = source.to_vec();
    a.extend(args!["-o", single.as_os_str()]);
    ok(&loaderx(&a));
    for i in 0..3 {
        let index = i.to_string();
        let mut a: Vec<&std::ffi::OsStr> = source.to_vec();
        a.extend(args![
            "-o",
            parts.as_os_str(),
            "--part",
            index.as_str(),
            "--parts",
            "3"
        ]);
        ok(&loaderx(&a));
    }
    for split in splits {
        let dir = parts.join(split);
        ok(&loaderx(args![
            "dataset",
            "merge",
            dir.as_os_str(),
            "--parts",
            "3"
        ]));
        let merged = ok(&loaderx(args!["dataset", "digest", dir.as_os_str()]));
        let mut n = 0;
        for line in merged.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [sha, _len, stream] = fields.as_slice() else {
                panic!("{line}")
            };
            assert_eq!(
                *sha,
                store_digest(&single.join(split).join(stream)),
                "{split}/{stream}: parts merged differ from the single conversion"
            );
            n += 1;
        }
        assert!(n >= 2, "{merged}");
    }
}

#[test]
fn image_folder_parts_merge_into_the_single_conversion() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = fx.dir.join("folder");
    parts_merge_into_the_single_conversion(
        args!["convert", "images", root.as_os_str()],
        tmp.path(),
        &["train", "test"],
    );
    // Every part lists every class.
    let classes = std::fs::read(tmp.path().join("parts/test/part-00002").join(CLASSES_FILE));
    assert!(
        classes
            .unwrap()
            .starts_with(b"{\n  \"label\": [\n    \"cat\"")
    );
}

#[test]
fn image_folder_refuses_links_and_non_images_by_name() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("folder");
    let src = fx.dir.join("folder/test");
    for class in ["cat", "emu"] {
        std::fs::create_dir_all(root.join(class)).unwrap();
        for f in std::fs::read_dir(src.join(class)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, root.join(class).join(f.file_name().unwrap())).unwrap();
        }
    }
    let out = tmp.path().join("out");
    let link = root.join("cat/link.png");
    std::os::unix::fs::symlink(root.join("emu/emu-00.png"), &link).unwrap();
    let e = failed(&loaderx(args![
        "convert",
        "images",
        root.as_os_str(),
        "-o",
        out.as_os_str()
    ]));
    assert!(
        e.contains(&link.display().to_string()) && e.contains("symbolic link"),
        "{e}"
    );
    std::fs::remove_file(&link).unwrap();

    let fake = root.join("emu/fake.png");
    std::fs::write(&fake, b"plain text, not a PNG").unwrap();
    let e = failed(&loaderx(args![
        "convert",
        "images",
        root.as_os_str(),
        "-o",
        out.as_os_str()
    ]));
    assert!(
        e.contains(&fake.display().to_string()) && e.contains("not a PNG, JPEG or WebP"),
        "{e}"
    );
    // A PNG cut short fails in the decoder: the error names the file too.
    let png = std::fs::read(root.join("emu/emu-00.png")).unwrap();
    std::fs::write(&fake, &png[..png.len() - 20]).unwrap();
    let e = failed(&loaderx(args![
        "convert",
        "images",
        root.as_os_str(),
        "-o",
        out.as_os_str()
    ]));
    assert!(e.contains(&fake.display().to_string()), "{e}");
    std::fs::remove_file(&fake).unwrap();

    let notes = root.join("cat/notes.txt");
    std::fs::write(&notes, b"hello").unwrap();
    let e = failed(&loaderx(args![
        "convert",
        "images",
        root.as_os_str(),
        "-o",
        out.as_os_str()
    ]));
    assert!(
        e.contains(&notes.display().to_string()) && e.contains("not an image file"),
        "{e}"
    );
    assert!(!out.exists(), "a failed conversion leaves nothing");
}

#[test]
fn webdataset_shards_convert_every_member_kind() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // A glob, as a user quotes it.
    let glob = fx.dir.join("shards/shard-*.tar");
    let text = ok(&loaderx(args![
        "convert",
        "webdataset",
        glob.as_os_str(),
        "-o",
        out.as_os_str(),
        "--text",
        "bytes"
    ]));
    assert!(text.contains("train: 10 records"), "{text}");
    let w = &fx.expected["webdataset"];
    for column in ["png", "cls", "txt", "json", "npy", "arr.npy"] {
        assert_eq!(
            store_digest(&out.join("train").join(column)),
            w[column].as_str().unwrap(),
            "{column}: differs from what TarWriter was given"
        );
    }
    let kind = |c: &str| Store::open(out.join("train").join(c)).unwrap().kind();
    assert_eq!(kind("png"), StoreKind::Dense);
    assert_eq!(kind("arr.npy"), StoreKind::Dense);
    assert_eq!(kind("npy"), StoreKind::Ragged);

    // Encoded: the members' bytes; the Rust API, with a named split.
    let encoded = tmp.path().join("encoded");
    let source = WebDataset::new(Vec::<PathBuf>::new())
        .split_glob("valid", glob.to_str().unwrap())
        .options(
            TableOptions::new()
                .encoded_images(true)
                .columns(["png", "cls"]),
        );
    let summary = convert_webdataset(&source, &encoded).unwrap();
    assert_eq!(summary.splits[0].name, "valid");
    assert_eq!(
        store_digest(&encoded.join("valid/png")),
        w["png_encoded"].as_str().unwrap(),
        "encoded: not the members' bytes"
    );
    assert!(!encoded.join("valid/txt").exists(), "--columns png,cls");
}

#[test]
fn webdataset_parts_merge_into_the_single_conversion() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = fx.dir.join("shards/shard-000000.tar");
    let b = fx.dir.join("shards/shard-000001.tar");
    parts_merge_into_the_single_conversion(
        args![
            "convert",
            "webdataset",
            a.as_os_str(),
            b.as_os_str(),
            "--text",
            "bytes"
        ],
        tmp.path(),
        &["train"],
    );
}

#[test]
fn webdataset_refuses_hostile_shards_by_name() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let convert = |shard: &Path| {
        failed(&loaderx(args![
            "convert",
            "webdataset",
            shard.as_os_str(),
            "-o",
            out.as_os_str(),
            "--text",
            "bytes"
        ]))
    };
    let escape = fx.dir.join("hostile/escape.tar");
    let e = convert(&escape);
    assert!(
        e.contains(&escape.display().to_string()) && e.contains("\"../x.cls\""),
        "{e}"
    );
    let truncated = fx.dir.join("hostile/truncated.tar");
    let e = convert(&truncated);
    assert!(
        e.contains(&truncated.display().to_string()) && e.contains("truncated"),
        "{e}"
    );
    let missing = fx.dir.join("hostile/missing.tar");
    let e = convert(&missing);
    assert!(
        e.contains(&missing.display().to_string())
            && e.contains("\"a001\"")
            && e.contains("a001.txt"),
        "{e}"
    );
    assert!(!out.exists(), "a failed conversion leaves nothing");
}
