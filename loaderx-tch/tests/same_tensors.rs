//! The shared host layer gives the same padded tensors in all three
//! adapters: for the same Ragged batch (ranks 1–3, random shapes), burn's,
//! candle's and tch's `values`, `lengths` and `mask` hold the same numbers,
//! and those are core's `Column::padded`.
//!
//! It lives in this crate because only this crate's build script links
//! libtorch into test binaries; candle and burn (flex backend) are plain
//! dev-dependencies.

#![allow(clippy::unwrap_used)]

use burn::tensor::{Bool, Device as BurnDevice, Int, Tensor as BurnTensor};
use loaderx_core::SamplerMode;
use loaderx_core::adapter::{ColumnConverter, PadValue};
use loaderx_core::{Codec, DataLoader, Ragged, RaggedWriter};
use ndarray::ArrayD;
use proptest::prelude::*;

/// Core's padded arrays as plain vectors: values, lengths, mask.
type Flat = (Vec<f64>, Vec<i64>, Vec<bool>, Vec<usize>);

fn from_tch(p: &loaderx_tch::Padded) -> Flat {
    let values = Vec::<f64>::try_from(&p.values.flatten(0, -1).to_kind(tch::Kind::Double)).unwrap();
    let lengths = Vec::<i64>::try_from(&p.lengths.flatten(0, -1)).unwrap();
    let mask = Vec::<i64>::try_from(&p.mask.flatten(0, -1).to_kind(tch::Kind::Int64))
        .unwrap()
        .into_iter()
        .map(|m| m == 1)
        .collect();
    let shape = p.values.size().into_iter().map(|d| d as usize).collect();
    (values, lengths, mask, shape)
}

fn from_candle(p: &loaderx_candle::Padded) -> Flat {
    let values = p
        .values
        .flatten_all()
        .unwrap()
        .to_dtype(candle_core::DType::F64)
        .unwrap()
        .to_vec1::<f64>()
        .unwrap();
    let lengths = p.lengths.flatten_all().unwrap().to_vec1::<i64>().unwrap();
    let mask = p
        .mask
        .flatten_all()
        .unwrap()
        .to_vec1::<u8>()
        .unwrap()
        .into_iter()
        .map(|m| m == 1)
        .collect();
    (values, lengths, mask, p.values.dims().to_vec())
}

fn from_burn<const D: usize>(
    b: &loaderx_burn::HostBatch<loaderx_core::adapter::PooledBuffer>,
) -> Flat {
    let p = b.padded::<D, Int>("seq").unwrap();
    let shape = p.values.dims().to_vec();
    let values: BurnTensor<D, Int> = p.values;
    let lengths: BurnTensor<2, Int> = p.lengths;
    let mask: BurnTensor<D, Bool> = p.mask;
    (
        values
            .into_data()
            .try_into_vec_as::<i64>()
            .unwrap()
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        lengths.into_data().try_into_vec_as::<i64>().unwrap(),
        mask.into_data().try_into_vec::<bool>().unwrap(),
        shape,
    )
}

fn check(shapes: &[Vec<usize>], batch: usize) {
    let dir = tempfile::tempdir().unwrap();
    let ndim = shapes[0].len();
    let mut w = RaggedWriter::<i16>::create(dir.path().join("seq"), ndim, Codec::Zstd).unwrap();
    let mut next = -500i16;
    let records: Vec<ArrayD<i16>> = shapes
        .iter()
        .map(|s| {
            ArrayD::from_shape_fn(s.clone(), |_| {
                next = next.wrapping_add(7);
                next
            })
        })
        .collect();
    w.append(records.iter()).unwrap();
    w.close().unwrap();
    let mut loader = DataLoader::builder()
        .stream("seq", Ragged::<i16>::open(dir.path().join("seq")).unwrap())
        .batch_size(batch)
        .mode(SamplerMode::Cyclic)
        .seed(3)
        .build()
        .unwrap();
    for _ in 0..3 {
        let b = loader.next().unwrap().unwrap();
        let column = b.column("seq").unwrap();
        let core = column.padded(PadValue::ZERO).unwrap();
        let want: Flat = (
            core.values
                .as_slice::<i16>()
                .unwrap()
                .iter()
                .map(|&v| f64::from(v))
                .collect(),
            core.lengths.as_slice::<i64>().unwrap().to_vec(),
            core.mask.as_slice::<bool>().unwrap().to_vec(),
            core.values.shape().to_vec(),
        );
        let (to_tch, to_candle) = (
            loaderx_tch::TchConverter::new(tch::Device::Cpu),
            loaderx_candle::CandleConverter::new(&candle_core::Device::Cpu),
        );
        let tch = from_tch(&to_tch.padded(column, PadValue::ZERO).unwrap());
        let candle = from_candle(&to_candle.padded(column, PadValue::ZERO).unwrap());
        assert_eq!(tch, want, "tch");
        assert_eq!(candle, want, "candle");
        let host = loaderx_burn::HostBatch::from_batch(b, &BurnDevice::flex());
        let burn = match ndim {
            1 => from_burn::<2>(&host),
            2 => from_burn::<3>(&host),
            _ => from_burn::<4>(&host),
        };
        assert_eq!(burn, want, "burn");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_adapter_pads_like_core(
        ndim in 1usize..4,
        raw in proptest::collection::vec(proptest::collection::vec(1usize..5, 3), 4..12),
        batch in 1usize..4,
    ) {
        let shapes: Vec<Vec<usize>> = raw.iter().map(|s| s[..ndim].to_vec()).collect();
        check(&shapes, batch);
    }
}

/// The packed streams of one step (`tok`, `tok.segment_ids`,
/// `tok.positions`, `tok.segments`) are the same numbers in all three
/// adapters, and those are core's packing.
#[test]
fn every_adapter_gets_the_same_packed_rows() {
    use loaderx_core::sequence::PackOptions;
    let dir = tempfile::tempdir().unwrap();
    let mut w = RaggedWriter::<i32>::create(dir.path().join("tok"), 1, Codec::Zstd).unwrap();
    w.append((0..200i32).map(|i| {
        (0..1 + (i * 37) % 70)
            .map(|j| i * 100 + j)
            .collect::<Vec<_>>()
    }))
    .unwrap();
    w.close().unwrap();
    let loader = DataLoader::builder()
        .stream("tok", Ragged::<i32>::open(dir.path().join("tok")).unwrap())
        .batch_size(24)
        .mode(SamplerMode::Bucketed { window: 3 })
        .pack("tok", PackOptions::new(48))
        .seed(5)
        .build()
        .unwrap();
    let names = ["tok", "tok.segment_ids", "tok.positions", "tok.segments"];
    for b in loader.take(4) {
        let b = b.unwrap();
        let mut core = Vec::new();
        for name in names {
            let c = b.column(name).unwrap();
            let v: Vec<i64> = match c.dtype() {
                loaderx_core::DType::I32 => c
                    .dense::<i32>()
                    .unwrap()
                    .iter()
                    .map(|&x| i64::from(x))
                    .collect(),
                _ => c.dense::<i64>().unwrap().iter().copied().collect(),
            };
            core.push((v, c.shape().unwrap().to_vec()));
            let t = loaderx_tch::TchConverter::new(tch::Device::Cpu)
                .copy_dense(c)
                .unwrap();
            let tv = Vec::<i64>::try_from(&t.flatten(0, -1).to_kind(tch::Kind::Int64)).unwrap();
            let ts: Vec<usize> = t.size().into_iter().map(|d| d as usize).collect();
            assert_eq!(
                (&tv, &ts),
                (&core.last().unwrap().0, &core.last().unwrap().1),
                "tch {name}"
            );
            let ct = loaderx_candle::CandleConverter::new(&candle_core::Device::Cpu)
                .copy_dense(c)
                .unwrap();
            let cv = ct
                .flatten_all()
                .unwrap()
                .to_dtype(candle_core::DType::I64)
                .unwrap()
                .to_vec1::<i64>()
                .unwrap();
            assert_eq!(
                (&cv, &ct.dims().to_vec()),
                (&core.last().unwrap().0, &core.last().unwrap().1),
                "candle {name}"
            );
        }
        let host = loaderx_burn::HostBatch::from_batch(b, &BurnDevice::flex());
        for (name, (want, shape)) in names.iter().zip(&core) {
            let t = host.int::<2>(name).unwrap();
            assert_eq!(&t.dims().to_vec(), shape, "burn {name}");
            assert_eq!(
                &t.into_data().try_into_vec_as::<i64>().unwrap(),
                want,
                "burn {name}"
            );
        }
    }
}
