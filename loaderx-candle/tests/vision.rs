//! Augmented images (core's `vision` stage) through candle: the image
//! stream arrives as a `[B, H, W, C]` tensor of the pipeline's dtype,
//! aligned with the labels.

#![allow(clippy::unwrap_used)]

use candle_core::{DType as CDType, Device};
use loaderx_candle::CandleLoaderExt;
use loaderx_core::vision::{Layout, OutputType, Pipeline};
use loaderx_core::{DataLoader, Dense, Ragged, SamplerMode};

#[test]
fn augmented_images_and_labels_arrive_aligned_as_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let n = 24u32;
    loaderx_tests::write_labelled_pngs(dir.path(), n).unwrap();

    for (output, dtype) in [
        (OutputType::U8, CDType::U8),
        (OutputType::Bf16, CDType::BF16),
    ] {
        let pipeline = Pipeline::new()
            .pad_random_crop(16, 2)
            .hflip(0.5)
            .layout(Layout::Hwc)
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
            .mode(SamplerMode::Sequential)
            .workers(2)
            .build_candle(&Device::Cpu)
            .unwrap();
        for batch in loader.take(6) {
            let batch = batch.unwrap();
            let x = batch.dense("image").unwrap();
            assert_eq!(x.dims(), &[4, 16, 16, 3]);
            assert_eq!(x.dtype(), dtype);
            let x: Vec<Vec<Vec<Vec<f32>>>> = x.to_dtype(CDType::F32).unwrap().to_vec3_4d();
            let y: Vec<i64> = batch.dense("label").unwrap().to_vec1().unwrap();
            for (record, label) in x.iter().zip(&y) {
                // Zero padding or the record's own colour, nothing else.
                let red = *label as f32 * 10.0;
                let red = match output {
                    OutputType::U8 => red,
                    _ => loaderx_core::bf16::from_f32(red / 255.0).to_f32(),
                };
                for px in record.iter().flatten() {
                    assert!(
                        px.iter().all(|&v| v == 0.0) || (px[0] == red && px[1] != 0.0),
                        "label {label}: {px:?}"
                    );
                }
            }
        }
    }
}

/// `to_vec3` for a rank-4 tensor.
trait ToVec4 {
    fn to_vec3_4d(&self) -> Vec<Vec<Vec<Vec<f32>>>>;
}

impl ToVec4 for candle_core::Tensor {
    fn to_vec3_4d(&self) -> Vec<Vec<Vec<Vec<f32>>>> {
        (0..self.dims()[0])
            .map(|i| self.get(i).unwrap().to_vec3::<f32>().unwrap())
            .collect()
    }
}
