//! The example on tiny stores: PNG records decode back to their pixels
//! through the loader, both runs train, and augmentation changes what the
//! model sees.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use candle_augment::{Augment, Config, SIDE, Schedule, pipeline, prepare, train, write_split};
use candle_core::Device;
use loaderx_core::vision::{ColorMode, Pipeline};
use loaderx_core::{DataLoader, Ragged, SamplerMode};

/// Class c images are of brightness about 22c (10 classes), with a
/// texture: what tells them apart survives shifts and flips.
fn images(n: usize, shift: usize) -> (Vec<u8>, Vec<u8>) {
    let mut images = Vec::with_capacity(n * SIDE * SIDE);
    let mut labels = Vec::with_capacity(n);
    for i in 0..n {
        let c = (i * 7 + shift) % 10;
        labels.push(c as u8);
        for y in 0..SIDE {
            for x in 0..SIDE {
                images.push((22 * c + (i + x * 3 + y) % 16) as u8);
            }
        }
    }
    (images, labels)
}

fn write_root(root: &Path, n: usize) {
    for (split, shift) in [("train", 0), ("test", 1)] {
        let (x, y) = images(n, shift);
        write_split(root, split, &x, &y, n).unwrap();
    }
}

#[test]
fn png_records_decode_to_their_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = images(64, 0);
    write_split(dir.path(), "train", &x, &y, 64).unwrap();
    let decode = Pipeline::new()
        .mode(ColorMode::Gray)
        .center_crop(SIDE as u32);
    let mut loader = DataLoader::builder()
        .stream(
            "image",
            Ragged::<u8>::open(dir.path().join("train/image")).unwrap(),
        )
        .augment("image", decode)
        .batch_size(16)
        .mode(SamplerMode::Sequential)
        .epochs(1)
        .build()
        .unwrap();
    let mut seen = 0;
    for batch in &mut loader {
        let batch = batch.unwrap();
        let got = batch.column("image").unwrap().bytes().to_vec();
        let want = &x[seen * SIDE * SIDE..(seen + 16) * SIDE * SIDE];
        assert_eq!(got, want, "records {seen}..{}", seen + 16);
        seen += 16;
    }
    assert_eq!(seen, 64);
}

#[test]
fn the_pipelines_have_the_model_input_shape() {
    for a in [
        Augment::None,
        Augment::PadCropFlip { pad: 2, flip: true },
        Augment::PadCropFlip {
            pad: 4,
            flip: false,
        },
    ] {
        assert_eq!(pipeline(a).record_shape().unwrap(), vec![1, SIDE, SIDE]);
    }
}

#[test]
fn the_cosine_schedule_decays_from_the_base_rate_to_zero() {
    let lr = |step| Schedule::Cosine.lr(2e-3, step, 100);
    assert_eq!(lr(0), 2e-3);
    assert!((lr(50) - 1e-3).abs() < 1e-12);
    assert!(lr(99) > 0.0 && lr(99) < 1e-5);
    assert!((1..100).all(|s| lr(s) < lr(s - 1)));
    assert_eq!(Schedule::Constant.lr(2e-3, 99, 100), 2e-3);
}

#[test]
fn trains_with_and_without_augmentation() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path(), 400);
    let config = Config {
        root: dir.path().to_path_buf(),
        epochs: 3,
        batch_size: 40,
        workers: 2,
        lr: 5e-3,
        // The smoke test's bound on accuracy was measured at a constant rate.
        schedule: Schedule::Constant,
        weight_decay: 0.01,
        seed: 1,
        eval_batch_size: 64,
    };
    let plain = train(&config, Augment::None, &Device::Cpu).unwrap();
    let augment = Augment::PadCropFlip { pad: 2, flip: true };
    let augmented = train(&config, augment, &Device::Cpu).unwrap();
    for r in [&plain, &augmented] {
        let (first, last) = (r.losses.first().unwrap().1, r.losses.last().unwrap().1);
        assert!(
            last < first,
            "{:?}: loss did not fall: {:?}",
            r.augment,
            r.losses
        );
        assert!(
            r.test_accuracy > 0.2,
            "{:?}: accuracy {}",
            r.augment,
            r.test_accuracy
        );
        assert!((0.0..=1.0).contains(&r.wait_share));
    }
    // Same weights, same order: only the augmentation differs.
    assert_ne!(plain.losses, augmented.losses);
}

#[test]
fn prepare_writes_fashion_mnist_as_png_records() {
    let idx = Path::new("/usr/share/datasets/fashion-mnist");
    if !idx.join("train-images-idx3-ubyte.gz").exists() {
        eprintln!("skipped: no Debian dataset-fashion-mnist (scripts/test installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("png");
    prepare(idx, &root, 300).unwrap();
    let train = Ragged::<u8>::open(root.join("train/image")).unwrap();
    let test = Ragged::<u8>::open(root.join("test/image")).unwrap();
    assert_eq!((train.len(), test.len()), (300, 10_000));
    let png = train.get(0).unwrap();
    assert_eq!(&png.as_slice().unwrap()[..8], b"\x89PNG\r\n\x1a\n");
}
