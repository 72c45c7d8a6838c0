//! Augmented images (core's `vision` stage) through tch: the image stream
//! arrives as a `[B, C, H, W]` tensor of the pipeline's kind, aligned with
//! the labels, handed over from the loader's staging without a copy.

#![allow(clippy::unwrap_used)]

use loaderx_core::vision::{OutputType, Pipeline};
use loaderx_core::{DataLoader, Dense, Ragged, SamplerMode};
use loaderx_tch::{TchLoaderExt, staging_stats};
use tch::{Device, Kind};

#[test]
fn augmented_images_and_labels_arrive_aligned_as_tensors() {
    let dir = tempfile::tempdir().unwrap();
    loaderx_tests::write_labelled_pngs(dir.path(), 24).unwrap();
    for (output, kind) in [
        (OutputType::F32, Kind::Float),
        (OutputType::F16, Kind::Half),
        (OutputType::U8, Kind::Uint8),
    ] {
        let pipeline = Pipeline::new()
            .random_resized_crop(12, (0.08, 1.0), (0.75, 4.0 / 3.0))
            .hflip(0.5)
            .output(output);
        let loader = DataLoader::builder()
            .stream(
                "image",
                Ragged::<u8>::open(dir.path().join("image")).unwrap(),
            )
            .stream(
                "label",
                Dense::<i64>::open(dir.path().join("label")).unwrap(),
            )
            .augment("image", pipeline)
            .batch_size(4)
            .mode(SamplerMode::Iid)
            .workers(2)
            .build_tch(Device::Cpu)
            .unwrap();
        let copied = staging_stats().copied;
        for batch in loader.take(6) {
            let batch = batch.unwrap();
            let x = batch.dense("image").unwrap();
            assert_eq!(x.size(), [4, 3, 12, 12], "{output:?}");
            assert_eq!(x.kind(), kind, "{output:?}");
            let y = Vec::<i64>::try_from(batch.dense("label").unwrap()).unwrap();
            let x = x.to_kind(Kind::Float);
            for (r, label) in y.iter().enumerate() {
                // Every pixel of a record is its own colour: red 10 x label,
                // green 7 (in [0, 1] unless the output is u8).
                let unit = if output == OutputType::U8 { 1.0 } else { 255.0 };
                let want = [*label as f64 * 10.0 / unit, 7.0 / unit];
                for (c, want) in want.iter().enumerate() {
                    let plane = x.get(r as i64).get(c as i64);
                    let (lo, hi) = (plane.min().double_value(&[]), plane.max().double_value(&[]));
                    // f16 holds 10 x label / 255 to within 2^-11 of it.
                    let tol = if output == OutputType::F16 {
                        1e-3
                    } else {
                        1e-6
                    };
                    assert!(
                        (lo - want).abs() <= tol && (hi - want).abs() <= tol,
                        "{output:?} label {label} channel {c}: {lo}..{hi}, want {want}"
                    );
                }
            }
        }
        // The augmented column was written into tch's staging, and became
        // the tensor without another copy.
        assert_eq!(staging_stats().copied, copied, "{output:?}");
    }
}
