//! Round trips through the store: every dtype, shape, codec, shard count and
//! way of splitting the appends reads back exactly, in any gather order.

#![allow(clippy::unwrap_used)]

use std::sync::LazyLock;

use loaderx_core::DigestBuilder;
use loaderx_core::ndarray::{Array, ArrayD, IxDyn};
use loaderx_core::{
    Codec, CreateOptions, DType, Dense, DenseWriter, DynDense, DynDenseWriter, DynRagged,
    DynRaggedWriter, Element, Ragged, RaggedWriter, Store, digest, f16, train_dict,
};
use proptest::prelude::*;

const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];

/// One dictionary for every zstd_dict case (any dictionary fits any data).
static DICT: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let recs: Vec<Vec<u8>> = (0..4000u32)
        .map(|i| (0..64).map(|j| ((i % 17) * 3 + j % 13) as u8).collect())
        .collect();
    train_dict(&recs).unwrap()
});

fn options(codec: Codec, shards: usize) -> CreateOptions {
    let o = CreateOptions::new(codec).data_shards(shards);
    if codec == Codec::ZstdDict {
        o.dict_bytes(DICT.clone())
    } else {
        o
    }
}

fn fix_bools(dtype: DType, mut bytes: Vec<u8>) -> Vec<u8> {
    if dtype == DType::Bool {
        bytes.iter_mut().for_each(|b| *b &= 1);
    }
    bytes
}

type DenseCase = (
    DType,
    Vec<usize>,
    Codec,
    usize,
    Vec<usize>,
    Vec<u8>,
    Vec<u64>,
);

fn dense_case() -> impl Strategy<Value = DenseCase> {
    (
        0..DType::ALL.len(),
        prop::collection::vec(1usize..5, 0..4),
        0..3usize,
        prop_oneof![1usize..9, Just(255usize)],
        prop::collection::vec(1usize..40, 1..5),
    )
        .prop_flat_map(|(d, shape, c, shards, splits)| {
            let dtype = DType::ALL[d];
            let n: usize = splits.iter().sum();
            let width = shape.iter().product::<usize>() * dtype.size();
            (
                Just(dtype),
                Just(shape),
                Just(CODECS[c]),
                Just(shards),
                Just(splits),
                prop::collection::vec(prop_oneof![3 => 0u8..4, 1 => any::<u8>()], n * width),
                prop::collection::vec(0..n as u64, 0..60),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn dense_round_trip((dtype, shape, codec, shards, splits, data, picks) in dense_case()) {
        let data = fix_bools(dtype, data);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let width = shape.iter().product::<usize>() * dtype.size();
        let mut w = DynDenseWriter::create(&path, dtype, &shape, &options(codec, shards)).unwrap();
        let mut at = 0;
        for &k in &splits {
            w.append_bytes(&data[at * width..(at + k) * width], k).unwrap();
            at += k;
        }
        w.close().unwrap();

        let r = DynDense::open(&path).unwrap();
        let n = at as u64;
        prop_assert_eq!(r.len(), n);
        prop_assert_eq!(r.dtype(), dtype);
        prop_assert_eq!(r.item_shape(), &shape[..]);
        prop_assert_eq!(r.codec(), codec);
        prop_assert_eq!(r.data_shards(), shards);
        let all: Vec<u64> = (0..n).collect();
        prop_assert_eq!(r.gather_bytes(&all).unwrap(), data.clone());
        let got = r.gather_bytes(&picks).unwrap();
        for (k, &i) in picks.iter().enumerate() {
            let i = i as usize;
            prop_assert_eq!(&got[k * width..(k + 1) * width], &data[i * width..(i + 1) * width]);
        }
        let mut expect = DigestBuilder::new();
        data.chunks(width).for_each(|rec| expect.push(&shape, rec));
        prop_assert_eq!(digest(&Store::open(&path).unwrap()).unwrap(), expect.finish());
    }

    #[test]
    fn ragged_round_trip(
        d in 0..DType::ALL.len(),
        ndim in 1usize..4,
        c in 0..3usize,
        shards in 1usize..9,
        splits in prop::collection::vec(1usize..25, 1..4),
        seed in any::<u64>(),
        picks in prop::collection::vec(any::<u64>(), 0..40),
    ) {
        let dtype = DType::ALL[d];
        let codec = CODECS[c];
        let n: usize = splits.iter().sum();
        let mut s = seed | 1;
        let mut next = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; s };
        let shapes: Vec<Vec<usize>> = (0..n)
            .map(|_| (0..ndim).map(|_| 1 + (next() % if ndim == 1 { 70 } else { 6 }) as usize).collect())
            .collect();
        let records: Vec<Vec<u8>> = shapes
            .iter()
            .map(|sh| {
                let len = sh.iter().product::<usize>() * dtype.size();
                fix_bools(dtype, (0..len).map(|_| (next() % 5) as u8).collect())
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        let mut w = DynRaggedWriter::create(&path, dtype, ndim, &options(codec, shards)).unwrap();
        let mut at = 0;
        for &k in &splits {
            w.append_bytes((at..at + k).map(|i| (&shapes[i][..], &records[i][..]))).unwrap();
            at += k;
        }
        w.close().unwrap();

        let r = DynRagged::open(&path).unwrap();
        prop_assert_eq!(r.len(), n as u64);
        prop_assert_eq!(r.ndim(), ndim);
        let picks: Vec<u64> = picks.iter().map(|p| p % n as u64).collect();
        let batch = r.gather(&picks).unwrap();
        prop_assert_eq!(batch.len(), picks.len());
        for (k, &i) in picks.iter().enumerate() {
            prop_assert_eq!(batch.shape(k), &shapes[i as usize][..]);
            prop_assert_eq!(batch.bytes(k), &records[i as usize][..]);
        }
        let mut expect = DigestBuilder::new();
        shapes.iter().zip(&records).for_each(|(sh, rec)| expect.push(sh, rec));
        prop_assert_eq!(digest(&Store::open(&path).unwrap()).unwrap(), expect.finish());
    }
}

/// Typed API for one element type: Dense append of an ndarray batch and of a
/// slice, every read form, Ragged append of arrays, views and owned copies.
fn typed_round_trip<T: Element + PartialEq>(make: impl Fn(usize) -> T) {
    let dir = tempfile::tempdir().unwrap();
    for codec in CODECS {
        let path = dir.path().join(format!("dense_{codec}"));
        let batch = Array::from_shape_fn((10, 2, 3), |(i, j, k)| make(i * 6 + j * 3 + k));
        let mut w = DenseWriter::<T>::create_with(&path, &[2, 3], &options(codec, 3)).unwrap();
        w.append(&batch).unwrap();
        let tail: Vec<T> = (60..72).map(&make).collect();
        w.append_slice(&tail, 2).unwrap();
        assert_eq!(w.len(), 12);
        w.close().unwrap();

        let ds = Dense::<T>::open(&path).unwrap();
        assert_eq!(ds.len(), 12);
        let got = ds.gather(&[11, 0, 4]).unwrap();
        assert_eq!(got.shape(), &[3, 2, 3]);
        assert_eq!(got[[0, 1, 2]], make(71));
        assert_eq!(got[[1, 0, 0]], make(0));
        assert_eq!(got[[2, 1, 1]], make(28));
        assert_eq!(
            ds.get(3).unwrap(),
            batch
                .index_axis(loaderx_core::ndarray::Axis(0), 3)
                .into_dyn()
        );
        assert_eq!(ds.range(2..4).unwrap().shape(), &[2, 2, 3]);
        let mut into = vec![T::default(); 12];
        ds.gather_into(&[1, 10], &mut into).unwrap();
        assert_eq!(into[0], make(6));
        assert_eq!(into[6], make(60));
        assert!(ds.gather(&[]).unwrap().is_empty());

        let path = dir.path().join(format!("ragged_{codec}"));
        let recs: Vec<ArrayD<T>> = (1..8)
            .map(|n| ArrayD::from_shape_fn(IxDyn(&[n, 8 - n]), |ix| make(ix[0] * 10 + ix[1] + n)))
            .collect();
        let mut w = RaggedWriter::<T>::create_with(&path, 2, &options(codec, 2)).unwrap();
        w.append(&recs).unwrap();
        // A transposed (non-contiguous) view is appended in logical order.
        w.append([recs[0].t()]).unwrap();
        w.close().unwrap();
        let rs = Ragged::<T>::open(&path).unwrap();
        assert_eq!(rs.len(), 8);
        let b = rs.gather(&[6, 0, 7]).unwrap();
        assert_eq!(b.view(0), recs[6].view());
        assert_eq!(b.view(1), recs[0].view());
        assert_eq!(b.view(2), recs[0].t());
        assert_eq!(b.to_arrays()[0], recs[6]);
        assert_eq!(rs.get(2).unwrap(), recs[2]);
        assert_eq!(rs.range(0..3).unwrap().len(), 3);
        let idx = [5, 5];
        let mut buf = vec![0u8; rs.as_dyn().gather_len(&idx).unwrap()];
        let layout = rs.as_dyn().gather_into(&idx, &mut buf).unwrap();
        assert_eq!(layout.shape(1), recs[5].shape());
        assert_eq!(
            &buf[layout.byte_range(1)],
            T::as_bytes(recs[5].as_slice().unwrap())
        );
    }
}

#[test]
fn typed_api_every_dtype() {
    typed_round_trip(|i| i % 2 == 1);
    typed_round_trip(|i| i as u8);
    typed_round_trip(|i| -(i as i8));
    typed_round_trip(|i| (i as u16).wrapping_mul(1000));
    typed_round_trip(|i| (i as i16).wrapping_mul(-300));
    typed_round_trip(|i| i as u32 * 70_000);
    typed_round_trip(|i| -(i as i32) * 70_000);
    typed_round_trip(|i| i as u64 * (1 << 40));
    typed_round_trip(|i| -(i as i64) * (1 << 40));
    typed_round_trip(|i| f16::from_f32(i as f32 * 0.5));
    typed_round_trip(|i| i as f32 * -1.25);
    typed_round_trip(|i| i as f64 * 1e300);
}

#[test]
fn dictionaries_from_stores_and_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let rows = Array::from_shape_fn((3000, 32), |(i, j)| ((i % 11) * 5 + j % 7) as i32);
    let d1 = loaderx_core::train_dict_from_array(&rows).unwrap();
    let mut w = DenseWriter::<i32>::create_with(
        dir.path().join("a"),
        &[32],
        &CreateOptions::new(Codec::ZstdDict).dict_bytes(d1),
    )
    .unwrap();
    w.append(&rows).unwrap();
    w.close().unwrap();
    let a = Dense::<i32>::open(dir.path().join("a")).unwrap();
    assert_eq!(
        a.gather(&[2999]).unwrap().as_slice().unwrap(),
        rows.row(2999).as_slice().unwrap()
    );
    let d2 = a.train_dict().unwrap();
    assert!(d2.len() <= loaderx_core::DICT_MAX_BYTES);

    let seqs: Vec<Vec<u16>> = (0..3000u16)
        .map(|i| (0..(i % 50 + 1)).map(|j| j % 9).collect())
        .collect();
    let mut w = RaggedWriter::<u16>::create(dir.path().join("b"), 1, Codec::Zstd).unwrap();
    w.append(&seqs).unwrap();
    w.close().unwrap();
    let b = Ragged::<u16>::open(dir.path().join("b")).unwrap();
    let d3 = b.train_dict().unwrap();
    let mut w = RaggedWriter::<u16>::create_with(
        dir.path().join("c"),
        1,
        &CreateOptions::new(Codec::ZstdDict).dict_bytes(d3.clone()),
    )
    .unwrap();
    w.append(&seqs).unwrap();
    w.close().unwrap();
    let c = Ragged::<u16>::open(dir.path().join("c")).unwrap();
    assert_eq!(c.as_dyn().dict(), Some(&d3[..]));
    assert_eq!(c.gather(&[49]).unwrap().data(0), &seqs[49][..]);
    // The dictionary pays: smaller than plain zstd on these small similar records.
    assert!(c.as_dyn().stored_bytes() < b.as_dyn().stored_bytes());
}

#[test]
fn multi_window_append_keeps_ids() {
    // More records than one append window holds, and more bytes than one window.
    let dir = tempfile::tempdir().unwrap();
    let n = 150_000usize;
    let data: Vec<u32> = (0..n as u32).collect();
    let mut w =
        DenseWriter::<u32>::create_with(dir.path().join("w"), &[], &options(Codec::Zstd, 7))
            .unwrap();
    w.append_slice(&data, n).unwrap();
    w.close().unwrap();
    let r = Dense::<u32>::open(dir.path().join("w")).unwrap();
    let idx: Vec<u64> = (0..n as u64).rev().step_by(997).collect();
    let got = r.gather(&idx).unwrap();
    for (k, &i) in idx.iter().enumerate() {
        assert_eq!(got[[k]], i as u32);
    }
    let big = vec![7u8; 3 << 20];
    let mut w =
        DenseWriter::<u8>::create_with(dir.path().join("big"), &[1 << 20], &options(Codec::Raw, 2))
            .unwrap();
    for _ in 0..30 {
        w.append_slice(&big, 3).unwrap();
    }
    w.close().unwrap();
    let r = DynDense::open(dir.path().join("big")).unwrap();
    assert_eq!(r.len(), 90);
    assert_eq!(r.stored_bytes(), 90 * (1 << 20) + 4096 + 90 * 16);
}

#[test]
fn gather_bytes_small_and_large_batches() {
    // Small batches copy on the calling thread, large ones (>= 256 KiB) in
    // parallel straight into fresh memory: both must return the records.
    let dir = tempfile::tempdir().unwrap();
    const N: usize = 4096;
    const W: usize = 300;
    let data: Vec<u8> = (0..N * W).map(|k| (k * 31 / 7 % 251) as u8).collect();
    for (codec, shards) in [(Codec::Raw, 4), (Codec::Raw, 3), (Codec::Zstd, 4)] {
        let path = dir.path().join(format!("{codec}_{shards}"));
        let mut w =
            DynDenseWriter::create(&path, DType::U8, &[W], &options(codec, shards)).unwrap();
        w.append_bytes(&data, N).unwrap();
        w.close().unwrap();
        let r = DynDense::open(&path).unwrap();
        for len in [1usize, 7, 300, 2000, 4096] {
            let idx: Vec<u64> = (0..len).map(|k| ((k * 2654435761) % N) as u64).collect();
            let got = r.gather_bytes(&idx).unwrap();
            let want: Vec<u8> = idx
                .iter()
                .flat_map(|&i| data[i as usize * W..(i as usize + 1) * W].iter().copied())
                .collect();
            assert_eq!(got, want, "{codec} shards {shards} len {len}");
        }
        assert!(r.gather_bytes(&[N as u64]).is_err());
        assert_eq!(r.gather_bytes(&[]).unwrap(), Vec::<u8>::new());
    }
}

#[test]
fn bool_bytes_other_than_0_and_1_are_refused_at_append() {
    // Stored, such a byte made every later read of the record fail.
    let dir = tempfile::tempdir().unwrap();
    let opts = CreateOptions::new(Codec::Raw);
    let mut w = DynDenseWriter::create(dir.path().join("d"), DType::Bool, &[2], &opts).unwrap();
    let e = w.append_bytes(&[0, 1, 1, 2], 2).unwrap_err();
    assert!(e.to_string().contains("record 1"), "{e}");
    w.append_bytes(&[0, 1, 1, 0], 2).unwrap();
    w.close().unwrap();
    assert_eq!(Dense::<bool>::open(dir.path().join("d")).unwrap().len(), 2);

    let mut w = DynRaggedWriter::create(dir.path().join("r"), DType::Bool, 1, &opts).unwrap();
    let e = w
        .append_bytes([(&[1usize][..], &[1u8][..]), (&[2][..], &[0, 3][..])])
        .unwrap_err();
    assert!(e.to_string().contains("record 1"), "{e}");
    assert_eq!(w.len(), 0, "nothing of a refused batch is written");
    w.append_bytes([(&[2usize][..], &[1u8, 0][..])]).unwrap();
    w.close().unwrap();
}
