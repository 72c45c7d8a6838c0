//! Augmented images (core's `vision` stage) through burn: the image stream
//! arrives as a `[B, C, H, W]` float tensor, aligned with the labels.

#![allow(clippy::unwrap_used)]

use burn::data::dataloader::DataLoader;
use burn::tensor::Device;
use loaderx_burn::{BurnDataLoader, BurnLoaderExt, HostBatch};
use loaderx_core::vision::{OutputType, Pipeline};
use loaderx_core::{Dense, Ragged};

#[test]
fn augmented_images_and_labels_arrive_aligned_as_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let n = 24;
    loaderx_tests::write_labelled_pngs(dir.path(), n).unwrap();

    let pipeline = Pipeline::new()
        .random_resized_crop(12, (0.08, 1.0), (0.75, 4.0 / 3.0))
        .hflip(0.5)
        .output(OutputType::F32);
    let loader = BurnDataLoader::builder()
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
        .workers(2)
        .build_burn(&Device::flex(), |b: HostBatch| {
            let x = b.float::<4>("image")?;
            let y = b.int::<1>("label")?;
            Ok::<_, loaderx_burn::Error>((x, y))
        })
        .unwrap();
    let mut batches = 0;
    for item in loader.iter() {
        let (x, y) = item.unwrap();
        assert_eq!(x.dims(), [4, 3, 12, 12]);
        let x: Vec<f32> = x.into_data().try_into_vec_as::<f32>().unwrap();
        let y: Vec<i64> = y.into_data().try_into_vec_as::<i64>().unwrap();
        for (record, label) in x.chunks_exact(3 * 12 * 12).zip(&y) {
            let red = (*label as f32 * 10.0) / 255.0;
            assert!(record[..144].iter().all(|&v| v == red), "label {label}");
            assert!(record[144..288].iter().all(|&v| v == 7.0 / 255.0));
        }
        batches += 1;
    }
    assert_eq!(batches, 6);
}
