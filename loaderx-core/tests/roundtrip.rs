//! Round trips through the store: every dtype, shape, codec, shard count and
//! way of splitting the appends reads back exactly, in any gather order.

#![allow(clippy::unwrap_used)]

use std::sync::LazyLock;

use loaderx_core::DigestBuilder;
use loaderx_core::ndarray::{Array, ArrayD, IxDyn};
use loaderx_core::{
    Codec, CreateOptions, DType, Dense, DenseWriter, DynDense, DynDenseWriter, DynRagged,
    DynRaggedWriter, Element, F8E4M3Fn, F8E4M3Fnuz, F8E5M2, F8E5M2Fnuz, F8E8M0Fnu, Generation,
    Ragged, RaggedWriter, Store, bf16, digest, f16, train_dict,
};
use proptest::prelude::*;

const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];

/// The writable generation `pick` selects, or 2.8.19 for a type 2.4.6
/// cannot express.
fn generation_for(pick: bool, dtype: DType) -> Generation {
    let g = if pick {
        Generation::V2_8_19
    } else {
        Generation::V2_4_6
    };
    if g.supports(dtype) {
        g
    } else {
        Generation::V2_8_19
    }
}

/// One dictionary for every zstd_dict case (any dictionary fits any data).
static DICT: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let recs: Vec<Vec<u8>> = (0..4000u32)
        .map(|i| (0..64).map(|j| ((i % 17) * 3 + j % 13) as u8).collect())
        .collect();
    train_dict(&recs).unwrap()
});

fn options(codec: Codec, shards: usize) -> CreateOptions {
    options_in(codec, shards, Generation::DEFAULT)
}

fn options_in(codec: Codec, shards: usize, generation: Generation) -> CreateOptions {
    let o = CreateOptions::new(codec)
        .data_shards(shards)
        .generation(generation);
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
    fn dense_round_trip(
        (dtype, shape, codec, shards, splits, data, picks) in dense_case(),
        pick in any::<bool>(),
    ) {
        let data = fix_bools(dtype, data);
        let generation = generation_for(pick, dtype);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let width = shape.iter().product::<usize>() * dtype.size();
        let opts = options_in(codec, shards, generation);
        let mut w = DynDenseWriter::create(&path, dtype, &shape, &opts).unwrap();
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
        prop_assert_eq!(r.generation(), generation);
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
        pick in any::<bool>(),
    ) {
        let dtype = DType::ALL[d];
        let codec = CODECS[c];
        let generation = generation_for(pick, dtype);
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
        let opts = options_in(codec, shards, generation);
        let mut w = DynRaggedWriter::create(&path, dtype, ndim, &opts).unwrap();
        let mut at = 0;
        for &k in &splits {
            w.append_bytes((at..at + k).map(|i| (&shapes[i][..], &records[i][..]))).unwrap();
            at += k;
        }
        w.close().unwrap();

        let r = DynRagged::open(&path).unwrap();
        prop_assert_eq!(r.len(), n as u64);
        prop_assert_eq!(r.ndim(), ndim);
        prop_assert_eq!(r.generation(), generation);
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
    for (codec, generation) in CODECS
        .into_iter()
        .flat_map(|c| Generation::WRITABLE.map(|g| (c, g)))
        .filter(|&(_, g)| g.supports(T::DTYPE))
    {
        let options = |codec, shards| options_in(codec, shards, generation);
        let path = dir.path().join(format!("dense_{codec}_{generation}"));
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

        let path = dir.path().join(format!("ragged_{codec}_{generation}"));
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
    typed_round_trip(|i| bf16::from_f32(i as f32 * -0.75));
    typed_round_trip(|i| F8E4M3Fn::from_bits(i as u8));
    typed_round_trip(|i| F8E4M3Fnuz::from_bits(i as u8 ^ 0x55));
    typed_round_trip(|i| F8E5M2::from_bits(i as u8));
    typed_round_trip(|i| F8E5M2Fnuz::from_bits(!(i as u8)));
    typed_round_trip(|i| F8E8M0Fnu::from_bits(i as u8));
    typed_round_trip(|i| loaderx_core::Complex32::new(i as f32, -(i as f32)));
    typed_round_trip(|i| loaderx_core::Complex64::new(i as f64 * 1e300, 0.5));
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

// ---------------------------------------------------------------- generations

/// Every file of a store directory, by name.
fn files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn stores_match_python_2_8_19_byte_for_byte() {
    // Written by Python loaderx 2.8.19: DenseWriter(uint8, (4, 3), raw, 1
    // shard) of arange(24); RaggedWriter(int32, ndim=2, raw, 1 shard) of
    // arange(6).reshape(2, 3) and arange(4).reshape(1, 4).
    let dir = tempfile::tempdir().unwrap();
    let opts = options_in(Codec::Raw, 1, Generation::V2_8_19);
    let d = dir.path().join("d");
    let mut w = DynDenseWriter::create(&d, DType::U8, &[4, 3], &opts).unwrap();
    w.append_bytes(&(0..24).collect::<Vec<u8>>(), 2).unwrap();
    w.close().unwrap();
    let r = dir.path().join("r");
    let mut w = RaggedWriter::<i32>::create_with(&r, 2, &opts).unwrap();
    w.append([
        Array::from_shape_vec((2, 3), (0..6).collect()).unwrap(),
        Array::from_shape_vec((1, 4), (0..4).collect()).unwrap(),
    ])
    .unwrap();
    w.close().unwrap();

    let page = |length: u64, tail: u64, schema: &[u8]| {
        let mut m = vec![0u8; 4096];
        m[..8].copy_from_slice(&length.to_le_bytes());
        m[8..10].copy_from_slice(&(schema.len() as u16).to_le_bytes());
        m[10] = 1;
        m[16..24].copy_from_slice(&tail.to_le_bytes());
        m[2056..2056 + schema.len()].copy_from_slice(schema);
        m
    };
    let mut meta = page(2, 24, br#"{"dtype": "uint8", "item_shape": [4, 3]}"#);
    meta.extend(hex(
        "00000000000000000c0000000c0000000c000000000000000c0000000c000000",
    ));
    assert_eq!(std::fs::read(d.join("meta.zr")).unwrap(), meta);
    let mut meta = page(2, 56, br#"{"dtype": "int32", "ndim": 2}"#);
    meta.extend(hex(
        "0000000000000000200000002000000020000000000000001800000018000000",
    ));
    assert_eq!(std::fs::read(r.join("meta.zr")).unwrap(), meta);
    assert_eq!(
        std::fs::read(r.join("data_0.zr")).unwrap(),
        hex(
            "0200000003000000000000000100000002000000030000000400000005000000\
             010000000400000000000000010000000200000003000000"
        )
    );
    assert_eq!(Store::open(&d).unwrap().generation(), Generation::V2_8_19);
    assert_eq!(Store::open(&r).unwrap().generation(), Generation::V2_8_19);
}

#[test]
fn json_ragged_stores_tell_2_8_18_from_2_8_19_by_their_dims() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("u64");
    let mut w =
        RaggedWriter::<i16>::create_with(&old, 1, &options_in(Codec::Zstd, 1, Generation::V2_4_6))
            .unwrap();
    w.append([vec![1i16, 2, 3], vec![4]]).unwrap();
    w.close().unwrap();
    // The same records under 2.8.18's JSON schema: u64 dims, as before.
    let mut meta = std::fs::read(old.join("meta.zr")).unwrap();
    let schema = br#"{"dtype": "int16", "ndim": 1}"#;
    meta[8..10].copy_from_slice(&(schema.len() as u16).to_le_bytes());
    meta[2056..4096].fill(0);
    meta[2056..2056 + schema.len()].copy_from_slice(schema);
    std::fs::write(old.join("meta.zr"), &meta).unwrap();
    let r = Ragged::<i16>::open(&old).unwrap();
    assert_eq!(r.as_dyn().generation(), Generation::V2_8_18);
    assert_eq!(r.gather(&[1, 0]).unwrap().data(1), &[1, 2, 3]);

    // Read as the other JSON generation on request: its records do not fit.
    let forced = DynRagged::open_as(&old, Generation::V2_8_19).unwrap();
    let err = forced.gather(&[0]).unwrap_err();
    assert!(
        matches!(err.kind(), loaderx_core::ErrorKind::CorruptRecord { .. }),
        "{err}"
    );
    let err = DynRagged::open_as(&old, Generation::V2_4_6).err().unwrap();
    assert!(
        matches!(err.kind(), loaderx_core::ErrorKind::InvalidArgument { .. }),
        "{err}"
    );

    // A record whose dims read neither way is named.
    let mut w = DynRaggedWriter::create(
        dir.path().join("bad"),
        DType::U8,
        1,
        &options_in(Codec::Raw, 1, Generation::V2_8_19),
    )
    .unwrap();
    w.append_bytes([(&[3usize][..], &[1u8, 2, 3][..])]).unwrap();
    w.close().unwrap();
    let data = dir.path().join("bad/data_0.zr");
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[0] = 9; // claims 9 elements, holds 3
    std::fs::write(&data, bytes).unwrap();
    let err = DynRagged::open(dir.path().join("bad")).err().unwrap();
    assert!(
        matches!(
            err.kind(),
            loaderx_core::ErrorKind::CorruptRecord { index: 0, .. }
        ),
        "{err}"
    );
}

#[test]
fn u32_dims_keep_elements_aligned() {
    // Odd ranks put 4 bytes of dims before the elements; the gather pads
    // in front so that every record's elements stay 8-byte aligned.
    let dir = tempfile::tempdir().unwrap();
    for ndim in [1usize, 3] {
        let path = dir.path().join(format!("f64_{ndim}"));
        let opts = options_in(Codec::Zstd, 3, Generation::V2_8_19);
        let mut w = RaggedWriter::<f64>::create_with(&path, ndim, &opts).unwrap();
        let recs: Vec<ArrayD<f64>> = (1..9)
            .map(|n| {
                let mut shape = vec![1; ndim];
                shape[0] = n;
                ArrayD::from_shape_fn(IxDyn(&shape), |ix| ix[0] as f64 * 0.5 + n as f64)
            })
            .collect();
        w.append(&recs).unwrap();
        w.close().unwrap();
        let r = Ragged::<f64>::open(&path).unwrap();
        let b = r.gather(&[7, 2, 2, 5, 0]).unwrap();
        for (k, &i) in [7usize, 2, 2, 5, 0].iter().enumerate() {
            assert_eq!(b.view(k), recs[i].view(), "ndim {ndim}, record {i}");
            assert_eq!(b.layout().byte_range(k).start % 8, 0);
        }
        assert_eq!(r.as_dyn().shape_header_len(), 4 * ndim);
        let lengths = r.as_dyn().lengths().unwrap();
        assert_eq!(lengths.lengths(), &[1, 2, 3, 4, 5, 6, 7, 8]);
    }
    // Dims past u32 are refused by the 2.8.19 writer, before anything is written.
    let mut w = DynRaggedWriter::create(
        dir.path().join("wide"),
        DType::U8,
        2,
        &options_in(Codec::Raw, 1, Generation::V2_8_19),
    )
    .unwrap();
    let shape = [1usize << 32, 0];
    assert!(w.append_bytes([(&shape[..], &[][..])]).is_err());
}

#[test]
fn migrate_round_trips_between_generations() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut stores = Vec::new();
    for codec in CODECS {
        let d = root.join(format!("dense_{codec}"));
        let g = Generation::V2_4_6;
        let mut w = DenseWriter::<u16>::create_with(&d, &[3], &options_in(codec, 3, g)).unwrap();
        w.append_slice(&(0..300u16).collect::<Vec<_>>(), 100)
            .unwrap();
        w.close().unwrap();
        let r = root.join(format!("ragged_{codec}"));
        let mut w = RaggedWriter::<i32>::create_with(&r, 3, &options_in(codec, 4, g)).unwrap();
        let recs: Vec<ArrayD<i32>> = (0..50)
            .map(|n| {
                ArrayD::from_shape_fn(IxDyn(&[1 + n % 3, 2, 1 + n % 5]), |ix| {
                    ix[2] as i32 - n as i32
                })
            })
            .collect();
        w.append(&recs).unwrap();
        w.close().unwrap();
        stores.push(d);
        stores.push(r);
    }
    for src in &stores {
        let name = src.file_name().unwrap().to_string_lossy();
        let want = digest(&Store::open(src).unwrap()).unwrap();
        let new = root.join(format!("{name}.2819"));
        loaderx_core::migrate(src, &new, Generation::V2_8_19).unwrap();
        let store = Store::open(&new).unwrap();
        assert_eq!(store.generation(), Generation::V2_8_19, "{name}");
        assert_eq!(store.codec(), Store::open(src).unwrap().codec());
        assert_eq!(store.data_shards(), Store::open(src).unwrap().data_shards());
        assert_eq!(digest(&store).unwrap(), want, "{name}");
        let back = root.join(format!("{name}.246"));
        loaderx_core::migrate(&new, &back, Generation::V2_4_6).unwrap();
        // The same codec at the same level: every file is as it was.
        assert_eq!(files(&back), files(src), "{name}");
    }
    // Refusals: an existing destination; a type 2.4.6 cannot express.
    let err = loaderx_core::migrate(&stores[0], &stores[1], Generation::V2_8_19).unwrap_err();
    assert!(
        matches!(err.kind(), loaderx_core::ErrorKind::AlreadyExists { .. }),
        "{err}"
    );
    let b = root.join("bf16");
    let mut w =
        DenseWriter::<bf16>::create_with(&b, &[2], &options_in(Codec::Raw, 1, Generation::V2_8_19))
            .unwrap();
    w.append_slice(&[bf16::ONE, bf16::NAN], 1).unwrap();
    w.close().unwrap();
    let err = loaderx_core::migrate(&b, root.join("bf16.246"), Generation::V2_4_6).unwrap_err();
    assert!(err.to_string().contains("2.8.19"), "{err}");
    assert!(!root.join("bf16.246").exists());
    let err = DenseWriter::<bf16>::create_with(
        root.join("x"),
        &[2],
        &options_in(Codec::Raw, 1, Generation::V2_4_6),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("2.8.19"), "{err}");
}
