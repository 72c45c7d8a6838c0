//! `loaderx profile`: the verdict on a converted split, with and without
//! augmentation, and its errors.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use loaderx_core::{Codec, DenseWriter};

fn loaderx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A folder of JPEGs of different sizes, two classes.
fn photos(root: &Path) {
    for (i, class) in ["cat", "dog"].iter().enumerate() {
        let dir = root.join(class);
        std::fs::create_dir_all(&dir).unwrap();
        for k in 0..12u32 {
            let (w, h) = (64 + 8 * k, 48 + 4 * k + i as u32);
            let img = image::RgbImage::from_fn(w, h, |x, y| {
                image::Rgb([(x * 3) as u8, (y * 5) as u8, (x + y + k) as u8])
            });
            img.save(dir.join(format!("{k}.jpg"))).unwrap();
        }
    }
}

#[test]
fn profile_of_augmented_jpegs_predicts_crop_first_and_workers() {
    let dir = tempfile::tempdir().unwrap();
    photos(&dir.path().join("photos"));
    let out = dir.path().join("out");
    ok(&loaderx(&[
        "convert",
        "images",
        dir.path().join("photos").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]));
    let svg = dir.path().join("p.svg");
    let text = ok(&loaderx(&[
        "profile",
        out.to_str().unwrap(),
        "--augment",
        "imagenet_train",
        "--size",
        "32",
        "--batch-size",
        "8",
        "--workers",
        "1",
        "--seconds",
        "0.5",
        "--svg",
        svg.to_str().unwrap(),
    ]));
    for want in [
        "(stream image augmented)",
        "rate:",
        "decode",
        "predicted records/s",
        "1 worker",
        "2 workers",
        "crop-first decoding off",
        "an image on one thread",
        "timeline:",
    ] {
        assert!(text.contains(want), "no {want:?} in:\n{text}");
    }
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("decode"),
        "{svg:.200}"
    );
}

#[test]
fn profile_of_a_split_without_augmentation() {
    let dir = tempfile::tempdir().unwrap();
    let split = dir.path().join("train");
    let mut w = DenseWriter::<f32>::create(split.join("x"), &[16], Codec::Zstd).unwrap();
    w.append_slice(&vec![1.5f32; 16 * 1000], 1000).unwrap();
    w.close().unwrap();
    let mut w = DenseWriter::<i64>::create(split.join("label"), &[], Codec::Raw).unwrap();
    w.append_slice(&vec![3i64; 1000], 1000).unwrap();
    w.close().unwrap();
    let svg = dir.path().join("p.svg");
    let text = ok(&loaderx(&[
        "profile",
        dir.path().to_str().unwrap(),
        "--seconds",
        "0.3",
        "--batch-size",
        "50",
        "--svg",
        svg.to_str().unwrap(),
    ]));
    assert!(text.contains("/train"), "the root's train split: {text}");
    assert!(text.contains("predicted records/s"), "{text}");
    assert!(!text.contains("crop-first"), "no augmentation: {text}");
    assert!(svg.exists());

    // One stream only; a stream that is not there; augmenting without images.
    let only = ok(&loaderx(&[
        "profile",
        split.to_str().unwrap(),
        "--stream",
        "label",
        "--seconds",
        "0.2",
        "--no-drive-probe",
        "--svg",
        svg.to_str().unwrap(),
    ]));
    assert!(only.contains("predicted records/s"), "{only}");
    let missing = loaderx(&["profile", split.to_str().unwrap(), "--stream", "nope"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no stream \"nope\""));
    let no_images = loaderx(&[
        "profile",
        split.to_str().unwrap(),
        "--augment",
        "imagenet_train",
    ]);
    assert!(!no_images.status.success());
    assert!(String::from_utf8_lossy(&no_images.stderr).contains("--image-stream"));
    let nothing = loaderx(&["profile", dir.path().join("nowhere").to_str().unwrap()]);
    assert!(!nothing.status.success());
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("no such file or directory"));
}
