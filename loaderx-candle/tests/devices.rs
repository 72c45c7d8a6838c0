//! Placement views in candle: one global batch per step, split over the
//! devices in contiguous parts, each part's tensors on its device, equal
//! to the whole batch's when put back together.

#![allow(clippy::unwrap_used)]

use candle_core::{Device, Tensor};
use loaderx_candle::CandleLoaderExt;
use loaderx_core::adapter::RaggedMode;
use loaderx_core::{
    Codec, DataLoader, DataLoaderBuilder, Dense, DenseWriter, Ragged, RaggedWriter,
};

fn builder(dir: &std::path::Path) -> DataLoaderBuilder {
    let (x, t) = (dir.join("x"), dir.join("t"));
    if !x.exists() {
        let mut w = DenseWriter::<f32>::create(&x, &[3], Codec::Raw).unwrap();
        w.append_slice(&(0..300).map(|v| v as f32).collect::<Vec<_>>(), 100)
            .unwrap();
        w.close().unwrap();
        let mut w = RaggedWriter::<u32>::create(&t, 1, Codec::Zstd).unwrap();
        w.append((0..100u32).map(|i| vec![i; 1 + i as usize % 9]))
            .unwrap();
        w.close().unwrap();
    }
    DataLoader::builder()
        .stream("x", Dense::<f32>::open(&x).unwrap())
        .stream("t", Ragged::<u32>::open(&t).unwrap())
        .batch_size(12)
        .seed(3)
        .workers(2)
}

#[test]
fn device_views_put_back_together_are_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let devices = [Device::Cpu, Device::Cpu, Device::Cpu];
    let whole = builder(dir.path())
        .build_candle_ragged(&Device::Cpu, RaggedMode::Packed)
        .unwrap();
    let split = builder(dir.path())
        .build_candle_devices(&devices, RaggedMode::Packed)
        .unwrap();
    for (w, s) in whole.zip(split).take(10) {
        let (w, s) = (w.unwrap(), s.unwrap());
        assert_eq!(s.len(), 3);
        let mut indices = Vec::new();
        for view in &s {
            assert_eq!((view.step, view.len()), (w.step, 4));
            assert_eq!(view.dense("x").unwrap().dims(), &[4, 3]);
            let p = view.packed("t").unwrap();
            assert_eq!(p.cu_seqlens.to_vec1::<i32>().unwrap()[0], 0);
            assert_eq!(p.shapes.dims(), &[4, 1]);
            indices.extend_from_slice(&view.indices);
        }
        assert_eq!(indices, w.indices);
        let xs: Vec<&Tensor> = s.iter().map(|v| v.dense("x").unwrap()).collect();
        let x = Tensor::cat(&xs, 0).unwrap();
        let want = w.dense("x").unwrap();
        assert_eq!(x.to_vec2::<f32>().unwrap(), want.to_vec2::<f32>().unwrap());
        let ts: Vec<&Tensor> = s.iter().map(|v| &v.packed("t").unwrap().values).collect();
        let t = Tensor::cat(&ts, 0).unwrap();
        let want = &w.packed("t").unwrap().values;
        assert_eq!(t.to_vec1::<u32>().unwrap(), want.to_vec1::<u32>().unwrap());
    }
}

#[test]
fn a_batch_that_does_not_split_over_the_devices_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = builder(dir.path())
        .build_candle_devices(&vec![Device::Cpu; 5], RaggedMode::Padded)
        .unwrap_err();
    assert!(e.to_string().contains("5 equal views"), "{e}");
}
