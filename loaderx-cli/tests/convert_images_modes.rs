//! `loaderx convert images` (and `convert parquet` of a Hugging Face `Image`
//! column) keep what the file holds, as PIL's `np.asarray(Image.open(f))`
//! gives it, for every mode a PNG opens as and for WebP: palette PNGs their
//! indices (with and without transparency, 8- and 4-bit), 1-bit PNGs 0/1,
//! 2- and 4-bit gray scaled as PIL scales it, a colour key left out of the
//! pixels, LA, RGBA, I;16, WebP (lossless and lossy: the `image` crate's
//! decoder gives libwebp's pixels exactly); a CMYK JPEG as RGB, PIL's
//! `Image.convert("RGB")`; `--image-mode RGB` as `Image.convert("RGB")`; a
//! palette PNG beside an RGB JPEG refused as two modes. The files are
//! written by Pillow and `datasets` (`tests/python/make_image_mode_fixtures.py`).
//!
//! Needs a python with `pillow`, `numpy` and `datasets`: `LOADERX_PYTHON`,
//! else `$HOME/.cache/loaderx/venv/bin/python`. Without one the tests are
//! skipped, unless `CI` is set (then they fail); `LOADERX_SKIP_PYTHON=1`
//! skips.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use support::{failed, loaderx, ok};

use loaderx_core::Store;
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
            let py = support::python(&["PIL", "numpy", "datasets"])?;
            let dir =
                support::write_fixtures(&py, "make_image_mode_fixtures.py", "image-mode-fixtures");
            let expected =
                serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
            Some(Fixtures { dir, expected })
        })
        .as_ref()
}

/// Every record of the store at `path`: its shape and bytes.
fn records(path: &Path) -> Vec<(Vec<usize>, Vec<u8>)> {
    let mut out = Vec::new();
    Store::open(path)
        .unwrap()
        .for_each_record(|_, shape, bytes| {
            out.push((shape.to_vec(), bytes.to_vec()));
            Ok(())
        })
        .unwrap();
    out
}

/// The case names of the fixtures (every `expected.json` entry that is an
/// image folder).
fn cases(fx: &Fixtures) -> Vec<String> {
    fx.expected
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.is_object())
        .map(|(k, _)| k.clone())
        .collect()
}

/// Checks the records of `store` against case `case`'s expected files
/// (`pixels`/`shape`, or `rgb_pixels`/`rgb_shape`).
fn check(fx: &Fixtures, case: &str, store: &Path, pixels: &str, shape: &str) {
    let want = &fx.expected[case];
    let got = records(store);
    let files = want["files"].as_array().unwrap();
    assert_eq!(got.len(), files.len(), "{case}");
    for ((got_shape, got), w) in got.iter().zip(files) {
        let what = format!("{case} {} ({}) {pixels}", w["file"], w["mode"]);
        let want_shape: Vec<usize> = serde_json::from_value(w[shape].clone()).unwrap();
        assert_eq!(*got_shape, want_shape, "{what}");
        let want = std::fs::read(fx.dir.join(w[pixels].as_str().unwrap())).unwrap();
        assert_eq!(*got, want, "{what}: pixels differ from PIL's");
    }
}

#[test]
fn png_and_webp_images_keep_the_mode_pil_opens_them_as() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for case in cases(fx) {
        let out = tmp.path().join(&case);
        // Decoded even where the images have several sizes (webp_lossy).
        ok(&loaderx(args![
            "convert",
            "images",
            fx.dir.join("cases").join(&case).as_os_str(),
            "-o",
            out.as_os_str(),
            "--decoded"
        ]));
        // A CMYK JPEG is stored as RGB: PIL's convert("RGB"), not its
        // np.asarray (4 channels).
        if case == "cmyk" {
            check(
                fx,
                &case,
                &out.join("train/image"),
                "rgb_pixels",
                "rgb_shape",
            );
        } else {
            check(fx, &case, &out.join("train/image"), "pixels", "shape");
        }
    }
}

#[test]
fn image_mode_rgb_converts_as_pil_convert_does() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for case in cases(fx) {
        let out = tmp.path().join(&case);
        let run = loaderx(args![
            "convert",
            "images",
            fx.dir.join("cases").join(&case).as_os_str(),
            "-o",
            out.as_os_str(),
            "--image-mode",
            "RGB"
        ]);
        if case == "i16" {
            let e = failed(&run);
            assert!(e.contains("I;16 images cannot be converted to RGB"), "{e}");
            continue;
        }
        ok(&run);
        check(
            fx,
            &case,
            &out.join("train/image"),
            "rgb_pixels",
            "rgb_shape",
        );
    }
}

#[test]
fn palette_pngs_beside_rgb_jpegs_are_two_modes() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mixed = fx.dir.join("mixed");
    let e = failed(&loaderx(args![
        "convert",
        "images",
        mixed.as_os_str(),
        "-o",
        tmp.path().join("a").as_os_str()
    ]));
    assert!(
        e.contains("(row 1) is RGB but the first image, file ")
            && e.contains("(row 0), is P")
            && e.contains("--image-mode RGB"),
        "{e}"
    );
    let out = tmp.path().join("b");
    ok(&loaderx(args![
        "convert",
        "images",
        mixed.as_os_str(),
        "-o",
        out.as_os_str(),
        "--image-mode",
        "RGB"
    ]));
    let got = records(&out.join("train/image"));
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|(shape, _)| shape == &[4, 5, 3]));
}

#[test]
fn encoded_webp_keeps_the_files_bytes() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let folder = fx.dir.join("cases/webp_lossy");
    ok(&loaderx(args![
        "convert",
        "images",
        folder.as_os_str(),
        "-o",
        out.as_os_str(),
        "--encoded"
    ]));
    let got = records(&out.join("train/image"));
    let files = fx.expected["webp_lossy"]["files"].as_array().unwrap();
    assert_eq!(got.len(), files.len());
    for ((shape, bytes), f) in got.iter().zip(files) {
        let want = std::fs::read(folder.join("c").join(f["file"].as_str().unwrap())).unwrap();
        assert_eq!(*shape, [want.len()]);
        assert_eq!(*bytes, want, "{}", f["file"]);
    }
}

#[test]
fn hub_image_columns_of_palette_pngs_and_webp_decode_like_pil() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for name in ["palette", "webp"] {
        let out = tmp.path().join(name);
        ok(&loaderx(args![
            "convert",
            "parquet",
            fx.dir
                .join("hf")
                .join(format!("{name}.parquet"))
                .as_os_str(),
            "-o",
            out.as_os_str()
        ]));
        let case = fx.expected[format!("hf_{name}")].as_str().unwrap();
        check(fx, case, &out.join("train/image"), "pixels", "shape");
        // --encoded keeps the bytes the column holds.
        let enc = tmp.path().join(format!("{name}-encoded"));
        ok(&loaderx(args![
            "convert",
            "parquet",
            fx.dir
                .join("hf")
                .join(format!("{name}.parquet"))
                .as_os_str(),
            "-o",
            enc.as_os_str(),
            "--encoded"
        ]));
        let files = fx.expected[case]["files"].as_array().unwrap();
        let got = records(&enc.join("train/image"));
        for ((_, bytes), f) in got.iter().zip(files) {
            let path = fx
                .dir
                .join("cases")
                .join(case)
                .join("c")
                .join(f["file"].as_str().unwrap());
            assert_eq!(*bytes, std::fs::read(path).unwrap(), "{name}");
        }
        assert_eq!(got.len(), files.len());
    }
}
