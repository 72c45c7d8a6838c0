//! Every `rust` code block of README.md, docs/*.md and the published crates'
//! READMEs, compiled by the test
//! build (tests/build.rs turns each into a module) and run here, in a
//! directory holding what the docs' snippets open: stores laid out and
//! typed exactly as the converters write them.
//!
//! - `stores/{train,test}/{data,label}`: `loaderx convert npy data.npy
//!   label.npy` of `uint8 (N, 28, 28)` images and `int64` labels;
//! - `images/train/{image,label}` + `classes.json`: `loaderx convert images`
//!   of JPEGs of different sizes (encoded records, `i64` labels);
//! - `text/train/{text,label}`: a parquet text column (Ragged `u8`) and
//!   labels;
//! - `imdb-gpt2/train/{text,label}`: `loaderx convert hf stanfordnlp/imdb
//!   --tokenizer gpt2` (Ragged `u32` token ids, `i64` labels);
//! - `data.npy` and `label.npy`, the quick start's arrays.
//!
//! The converters' side of that contract (names, dtypes, encodings) is
//! checked by loaderx-cli's `readme_commands` test, which runs the
//! README's commands.

#![allow(clippy::unwrap_used)]

use std::panic::AssertUnwindSafe;
use std::path::Path;

use loaderx_core::ndarray::{Array1, Array3};
use loaderx_core::{Codec, DenseWriter, RaggedWriter};

/// One snippet: where it is and its entry point.
pub(crate) struct Snippet {
    file: &'static str,
    line: usize,
    /// `false` for `rust,no_run` blocks: compiled, never called.
    run: bool,
    main: fn() -> Result<(), Box<dyn std::error::Error>>,
}

/// What a snippet's `main` may return.
pub(crate) trait IntoResult {
    fn into_result(self) -> Result<(), Box<dyn std::error::Error>>;
}

impl IntoResult for () {
    fn into_result(self) -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }
}

impl<E: Into<Box<dyn std::error::Error>>> IntoResult for Result<(), E> {
    fn into_result(self) -> Result<(), Box<dyn std::error::Error>> {
        self.map_err(Into::into)
    }
}

pub(crate) fn into_result(r: impl IntoResult) -> Result<(), Box<dyn std::error::Error>> {
    r.into_result()
}

include!(concat!(env!("OUT_DIR"), "/snippets.rs"));

/// The `int64` label store a converter writes beside a split's data:
/// `split/label`, record `i` labelled `i % classes`.
fn write_labels(split: &Path, n: usize, classes: usize) {
    let mut w = DenseWriter::<i64>::create(split.join("label"), &[], Codec::Raw).unwrap();
    w.append(&Array1::<i64>::from_shape_fn(n, |i| (i % classes) as i64))
        .unwrap();
    w.close().unwrap();
}

/// `loaderx convert npy` of `data.npy` (`uint8 (n, 28, 28)`) and
/// `label.npy` (`int64 (n,)`) into `root/<split>/{data,label}`.
fn write_arrays(root: &Path, split: &str, n: usize) {
    let data =
        Array3::<u8>::from_shape_fn((n, 28, 28), |(i, y, x)| ((i * 7 + y * 3 + x) % 251) as u8);
    let mut w =
        DenseWriter::<u8>::create(root.join(split).join("data"), &[28, 28], Codec::Zstd).unwrap();
    w.append(&data).unwrap();
    w.close().unwrap();
    write_labels(&root.join(split), n, 10);
}

/// `loaderx convert parquet reviews.parquet` of a text column and an
/// `int64` label: `root/train/{text,label}`, the text as UTF-8 bytes.
fn write_text(root: &Path) {
    let split = root.join("train");
    let mut text = RaggedWriter::<u8>::create(split.join("text"), 1, Codec::Raw).unwrap();
    let reviews: Vec<Vec<u8>> = (0..100)
        .map(|i| format!("review {i}: {}", "good ".repeat(i % 7)).into_bytes())
        .collect();
    text.append(reviews).unwrap();
    text.close().unwrap();
    write_labels(&split, 100, 2);
}

/// `loaderx convert hf stanfordnlp/imdb --tokenizer gpt2`: token ids as
/// Ragged `u32` records of 20 to 500 tokens, `int64` labels.
fn write_tokens(root: &Path) {
    let split = root.join("train");
    let mut text = RaggedWriter::<u32>::create(split.join("text"), 1, Codec::Zstd).unwrap();
    let reviews: Vec<Vec<u32>> = (0..200u32)
        .map(|i| {
            (0..20 + (i * 37) % 481)
                .map(|t| (t * 31 + i) % 50_257)
                .collect()
        })
        .collect();
    text.append(reviews).unwrap();
    text.close().unwrap();
    write_labels(&split, 200, 2);
}

/// `loaderx convert images photos/` of JPEGs of two sizes in two classes:
/// encoded records, `i64` labels, the class names.
fn write_images(root: &Path) {
    let split = root.join("train");
    let mut images = RaggedWriter::<u8>::create(split.join("image"), 1, Codec::Raw).unwrap();
    for i in 0..256u32 {
        let (w, h) = if i % 2 == 0 { (64, 48) } else { (40, 52) };
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, (i * 20) as u8])
        });
        let mut jpeg = Vec::new();
        image::DynamicImage::ImageRgb8(img)
            .write_to(
                &mut std::io::Cursor::new(&mut jpeg),
                image::ImageFormat::Jpeg,
            )
            .unwrap();
        images.append([jpeg]).unwrap();
    }
    images.close().unwrap();
    write_labels(&split, 256, 2);
    std::fs::write(split.join("classes.json"), r#"{"label": ["cat", "dog"]}"#).unwrap();
}

#[test]
fn every_rust_snippet_of_the_readme_and_the_docs_runs() {
    let dir = tempfile::tempdir().unwrap();
    write_arrays(&dir.path().join("stores"), "train", 512);
    write_arrays(&dir.path().join("stores"), "test", 100);
    write_images(&dir.path().join("images"));
    write_text(&dir.path().join("text"));
    write_tokens(&dir.path().join("imdb-gpt2"));
    // The inputs of docs/npy.md's conversion.
    let data = vec![7u8; 64 * 28 * 28];
    loaderx_tests::write_npy(&dir.path().join("data.npy"), "|u1", &[64, 28, 28], &data).unwrap();
    let labels: Vec<u8> = (0..64i64).flat_map(|i| (i % 10).to_le_bytes()).collect();
    loaderx_tests::write_npy(&dir.path().join("label.npy"), "<i8", &[64], &labels).unwrap();
    // The snippets open paths relative to the working directory, as a
    // user's program does; this test binary holds no other test.
    std::env::set_current_dir(dir.path()).unwrap();
    let mut failures = Vec::new();
    let mut ran = 0;
    for s in SNIPPETS.iter().filter(|s| s.run) {
        eprintln!("running {}:{}", s.file, s.line);
        match std::panic::catch_unwind(AssertUnwindSafe(s.main)) {
            Ok(Ok(())) => ran += 1,
            Ok(Err(e)) => failures.push(format!("{}:{}: {e}", s.file, s.line)),
            Err(_) => failures.push(format!("{}:{}: panicked", s.file, s.line)),
        }
    }
    assert!(
        failures.is_empty(),
        "snippets that failed:\n{}",
        failures.join("\n")
    );
    assert!(
        ran >= 4,
        "only {ran} snippets ran: is the README's quick start still there?"
    );
    assert!(SNIPPETS.iter().any(|s| s.file == "README.md"));
    assert!(SNIPPETS.iter().any(|s| s.file == "loaderx-core/README.md"));
}
