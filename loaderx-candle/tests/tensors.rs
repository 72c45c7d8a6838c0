//! Store → loader → candle tensors: every dtype, alignment, ragged helpers,
//! zero-copy hand-over.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use candle_core::{CpuStorage, DType as CDType, Device, Storage, Tensor};
use loaderx_candle::{
    CandleConverter, CandleLoaderExt, CandleStaging, ColumnConverter, Error, PadValue, RaggedMode,
    candle_dtype,
};
use loaderx_core::SamplerMode;
use loaderx_core::{
    Codec, CreateOptions, DType, DataLoader, DynDenseWriter, DynRaggedWriter, Element, f16,
};

/// Values of every dtype as f64, for comparing with tensors.
fn as_f64(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    fn conv<T: Element>(b: &[u8], f: impl Fn(T) -> f64) -> Vec<f64> {
        T::try_from_bytes(b)
            .unwrap()
            .iter()
            .map(|&v| f(v))
            .collect()
    }
    match dtype {
        DType::Bool => conv::<bool>(bytes, |v| v as u8 as f64),
        DType::U8 => conv::<u8>(bytes, f64::from),
        DType::I8 => conv::<i8>(bytes, f64::from),
        DType::U16 => conv::<u16>(bytes, f64::from),
        DType::I16 => conv::<i16>(bytes, f64::from),
        DType::U32 => conv::<u32>(bytes, f64::from),
        DType::I32 => conv::<i32>(bytes, f64::from),
        DType::U64 => conv::<u64>(bytes, |v| v as f64),
        DType::I64 => conv::<i64>(bytes, |v| v as f64),
        DType::F16 => conv::<f16>(bytes, f64::from),
        DType::F32 => conv::<f32>(bytes, f64::from),
        _ => conv::<f64>(bytes, |v| v),
    }
}

/// Extreme but representable values per dtype, as little-endian bytes.
fn values(dtype: DType, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let k = i as i64 - (n as i64) / 2;
        match dtype {
            DType::Bool => out.push((i % 2) as u8),
            DType::U8 => out.push([0, 1, 255, 128][i % 4]),
            DType::I8 => out.push([i8::MIN, -1, 0, i8::MAX][i % 4] as u8),
            DType::U16 => out.extend([0u16, 1, u16::MAX, 40_000][i % 4].to_le_bytes()),
            DType::I16 => out.extend([i16::MIN, -1, 0, i16::MAX][i % 4].to_le_bytes()),
            DType::U32 => out.extend([0u32, 1, u32::MAX, 3_000_000_000][i % 4].to_le_bytes()),
            DType::I32 => out.extend([i32::MIN, -1, 0, i32::MAX][i % 4].to_le_bytes()),
            DType::U64 => out.extend([0u64, 1, i64::MAX as u64, 1 << 40][i % 4].to_le_bytes()),
            DType::I64 => out.extend([i64::MIN + 1, -1, k, 1 << 50][i % 4].to_le_bytes()),
            DType::F16 => out.extend(f16::from_f32(k as f32 * 0.5).to_le_bytes()),
            DType::F32 => out.extend((k as f32 * 1.5e10).to_le_bytes()),
            _ => out.extend((k as f64 * 1e-300).to_le_bytes()),
        }
    }
    out
}

fn tensor_f64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(CDType::F64)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
}

fn write_dense(path: &Path, dtype: DType, shape: &[usize], n: usize) -> Vec<u8> {
    let width: usize = shape.iter().product();
    let data = values(dtype, n * width);
    let mut w =
        DynDenseWriter::create(path, dtype, shape, &CreateOptions::new(Codec::Zstd)).unwrap();
    w.append_bytes(&data, n).unwrap();
    w.close().unwrap();
    data
}

#[test]
fn every_dtype_round_trips_to_tensors() {
    let dir = tempfile::tempdir().unwrap();
    // The classic types; bf16, float8 and complex are refused by name
    // until the adapters map them.
    for dtype in DType::CLASSIC {
        let path = dir.path().join(dtype.name());
        let data = write_dense(&path, dtype, &[2, 3], 8);
        let mut loader = DataLoader::builder()
            .stream("x", loaderx_core::DynDense::open(&path).unwrap())
            .batch_size(8)
            .mode(SamplerMode::Sequential)
            .build_candle(&Device::Cpu)
            .unwrap();
        let batch = loader.next().unwrap().unwrap();
        let t = batch.dense("x").unwrap();
        assert_eq!(t.dims(), &[8, 2, 3], "{dtype}");
        assert_eq!(t.dtype(), candle_dtype(dtype).unwrap(), "{dtype}");
        assert_eq!(tensor_f64(t), as_f64(dtype, &data), "{dtype}");
    }
}

#[test]
fn u64_above_i64_max_is_refused_not_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    let mut w =
        DynDenseWriter::create(&path, DType::U64, &[], &CreateOptions::new(Codec::Raw)).unwrap();
    w.append_bytes(
        &[(1u64 << 63).to_le_bytes(), 5u64.to_le_bytes()].concat(),
        2,
    )
    .unwrap();
    w.close().unwrap();
    let mut loader = DataLoader::builder()
        .stream("x", loaderx_core::DynDense::open(&path).unwrap())
        .batch_size(2)
        .mode(SamplerMode::Sequential)
        .build_candle(&Device::Cpu)
        .unwrap();
    let e = loader.next().unwrap().unwrap_err();
    // The adapter's error is the transform's, a field of the loader's error.
    let loaderx_core::ErrorKind::Transform { error, .. } = e.kind() else {
        panic!("{e}");
    };
    assert!(
        matches!(
            error.downcast_ref::<Error>(),
            Some(Error::Core(c)) if matches!(c.kind(), loaderx_core::ErrorKind::OutOfRange { .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("9223372036854775808"), "{e}");
}

#[test]
fn streams_align_and_ragged_helpers_work() {
    let dir = tempfile::tempdir().unwrap();
    let n = 50u32;
    let x: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut w = DynDenseWriter::create(
        dir.path().join("x"),
        DType::F32,
        &[],
        &CreateOptions::new(Codec::Raw),
    )
    .unwrap();
    w.append_bytes(&x, n as usize).unwrap();
    w.close().unwrap();
    // Ragged rank 2: record i is (1 + i % 3, 2) of u16 value i.
    let shapes: Vec<Vec<usize>> = (0..n).map(|i| vec![1 + i as usize % 3, 2]).collect();
    let recs: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let count = (1 + i as usize % 3) * 2;
            (0..count).flat_map(|_| (i as u16).to_le_bytes()).collect()
        })
        .collect();
    let mut w = DynRaggedWriter::create(
        dir.path().join("r"),
        DType::U16,
        2,
        &CreateOptions::new(Codec::Zstd),
    )
    .unwrap();
    w.append_bytes(shapes.iter().zip(&recs).map(|(s, r)| (&s[..], &r[..])))
        .unwrap();
    w.close().unwrap();

    let builder = || {
        DataLoader::builder()
            .stream(
                "x",
                loaderx_core::DynDense::open(dir.path().join("x")).unwrap(),
            )
            .stream(
                "r",
                loaderx_core::DynRagged::open(dir.path().join("r")).unwrap(),
            )
            .batch_size(10)
            .seed(3)
            .workers(2)
    };
    let mut padded = builder().build_candle(&Device::Cpu).unwrap();
    let mut per_record = builder()
        .build_candle_ragged(&Device::Cpu, RaggedMode::PerRecord)
        .unwrap();
    for _ in 0..5 {
        let a = padded.next().unwrap().unwrap();
        let b = per_record.next().unwrap().unwrap();
        assert_eq!(a.indices, b.indices);
        let x = tensor_f64(a.dense("x").unwrap());
        let p = a.padded("r").unwrap();
        assert_eq!(p.values.dtype(), CDType::U32); // u16 widened
        let max_rows = a.indices.iter().map(|&i| 1 + i as usize % 3).max().unwrap();
        assert_eq!(p.values.dims(), &[10, max_rows, 2]);
        let lengths = p.lengths.to_vec2::<i64>().unwrap();
        let values = p
            .values
            .to_dtype(CDType::F64)
            .unwrap()
            .to_vec3::<f64>()
            .unwrap();
        for (k, &i) in a.indices.iter().enumerate() {
            assert_eq!(x[k], i as f64);
            let rows = 1 + i as usize % 3;
            assert_eq!(lengths[k], vec![rows as i64, 2]);
            for (r, row) in values[k].iter().enumerate() {
                let want = if r < rows { i as f64 } else { 0.0 };
                assert_eq!(row, &vec![want, want]);
            }
            let rec = &b.records("r").unwrap()[k];
            assert_eq!(rec.dims(), &[rows, 2]);
            assert!(tensor_f64(rec).iter().all(|&v| v == i as f64));
        }
    }
}

#[test]
fn rank1_mask_and_column_helpers() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DynRaggedWriter::create(
        dir.path().join("t"),
        DType::I8,
        1,
        &CreateOptions::new(Codec::Raw),
    )
    .unwrap();
    let recs: Vec<Vec<u8>> = vec![vec![1], vec![2, 2, 2], vec![0xff, 0xff]];
    let shapes: Vec<Vec<usize>> = recs.iter().map(|r| vec![r.len()]).collect();
    w.append_bytes(shapes.iter().zip(&recs).map(|(s, r)| (&s[..], &r[..])))
        .unwrap();
    w.close().unwrap();
    let mut loader = DataLoader::builder()
        .stream(
            "t",
            loaderx_core::DynRagged::open(dir.path().join("t")).unwrap(),
        )
        .batch_size(3)
        .mode(SamplerMode::Sequential)
        .build()
        .unwrap();
    let batch = loader.next().unwrap().unwrap();
    let col = batch.column("t").unwrap();
    let cpu = CandleConverter::new(&Device::Cpu);
    let p = cpu.padded(col, PadValue::ZERO).unwrap();
    assert_eq!(
        p.values.to_vec2::<i16>().unwrap(),
        vec![vec![1, 0, 0], vec![2, 2, 2], vec![-1, -1, 0]]
    );
    assert_eq!(
        p.mask.to_vec2::<u8>().unwrap(),
        vec![vec![1, 0, 0], vec![1, 1, 1], vec![1, 1, 0]]
    );
    assert_eq!(
        cpu.records(col).unwrap()[2].to_vec1::<i16>().unwrap(),
        vec![-1, -1]
    );
    let e = cpu.copy_dense(col).unwrap_err();
    assert!(
        matches!(&e, Error::Core(c) if matches!(c.kind(), loaderx_core::ErrorKind::ColumnKind { .. })),
        "{e}"
    );
}

#[test]
fn cpu_hand_over_does_not_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    write_dense(&path, DType::F32, &[16], 32);
    let mut loader = DataLoader::builder()
        .stream("x", loaderx_core::DynDense::open(&path).unwrap())
        .batch_size(32)
        .staging(CandleStaging::default())
        .build()
        .unwrap();
    let batch = loader.next().unwrap().unwrap();
    let (_, column) = batch.into_columns().pop().unwrap();
    let gathered_at = column.bytes().as_ptr() as usize;
    let t = CandleConverter::new(&Device::Cpu).dense(column).unwrap();
    let (storage, _) = t.storage_and_layout();
    let Storage::Cpu(CpuStorage::F32(v)) = &*storage else {
        panic!("not f32 cpu storage")
    };
    assert_eq!(
        v.as_ptr() as usize,
        gathered_at,
        "the tensor should own the gathered memory"
    );
}

/// Dense `x` (f32 `[2]` = `[i, -i]`) and `y` (u32 = i) of `n` records.
fn pair_stores(dir: &Path, n: usize) -> (loaderx_core::Stream, loaderx_core::Stream) {
    let x: Vec<f32> = (0..n).flat_map(|i| [i as f32, -(i as f32)]).collect();
    let mut w = loaderx_core::DenseWriter::<f32>::create(dir.join("x"), &[2], Codec::Raw).unwrap();
    w.append_slice(&x, n).unwrap();
    w.close().unwrap();
    let y: Vec<u32> = (0..n as u32).collect();
    let mut w = loaderx_core::DenseWriter::<u32>::create(dir.join("y"), &[], Codec::Zstd).unwrap();
    w.append_slice(&y, n).unwrap();
    w.close().unwrap();
    (
        loaderx_core::Dense::<f32>::open(dir.join("x"))
            .unwrap()
            .into(),
        loaderx_core::Dense::<u32>::open(dir.join("y"))
            .unwrap()
            .into(),
    )
}

#[test]
fn the_batcher_is_one_pass_with_or_without_the_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = pair_stores(dir.path(), 101); // prime
    let run = |keep: bool, shuffle: Option<u64>| {
        let mut b = loaderx_candle::Batcher::new2(x.clone(), y.clone())
            .batch_size(10)
            .return_last_incomplete_batch(keep);
        if let Some(seed) = shuffle {
            b = b.shuffle(seed);
        }
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        for pair in b.iter(&Device::Cpu).unwrap() {
            let (xs, ys) = pair.unwrap();
            let ys = ys.to_vec1::<u32>().unwrap();
            let xs = xs.to_vec2::<f32>().unwrap();
            for (row, &i) in xs.iter().zip(&ys) {
                assert_eq!(row, &vec![i as f32, -(i as f32)]);
            }
            sizes.push(ys.len());
            seen.extend(ys);
        }
        (sizes, seen)
    };
    let (sizes, seen) = run(true, None);
    assert_eq!(sizes, [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 1]);
    assert_eq!(seen, (0..101).collect::<Vec<u32>>());
    let (sizes, seen) = run(false, None);
    assert_eq!(sizes, [10; 10]);
    assert_eq!(seen, (0..100).collect::<Vec<u32>>());
    let (_, mut shuffled) = run(true, Some(7));
    assert_ne!(shuffled, (0..101).collect::<Vec<u32>>());
    shuffled.sort_unstable();
    assert_eq!(shuffled, (0..101).collect::<Vec<u32>>());
    // A batch larger than the data needs the last incomplete batch.
    let b = loaderx_candle::Batcher::new2(x, y).batch_size(500);
    assert!(b.iter(&Device::Cpu).is_err());
    let mut once = b
        .return_last_incomplete_batch(true)
        .iter(&Device::Cpu)
        .unwrap();
    assert_eq!(once.next().unwrap().unwrap().0.dims(), &[101, 2]);
    assert!(once.next().is_none());
}

/// Every bit pattern of a one- or two-byte type, as a Dense store of
/// 2.8.19's generation (the one that writes bf16 and float8).
fn all_patterns(dir: &Path, dtype: DType) -> (Vec<u8>, usize) {
    let data = patterns(dtype);
    let n = data.len() / dtype.size() / 16;
    let options = CreateOptions::new(Codec::Zstd).generation(loaderx_core::Generation::V2_8_19);
    let mut w = DynDenseWriter::create(dir.join(dtype.name()), dtype, &[16], &options).unwrap();
    w.append_bytes(&data, n).unwrap();
    w.close().unwrap();
    (data, n)
}

/// Every bit pattern of a one- or two-byte type, in order.
fn patterns(dtype: DType) -> Vec<u8> {
    match dtype.size() {
        1 => (0..=255u8).collect(),
        _ => (0..=u16::MAX).flat_map(u16::to_le_bytes).collect(),
    }
}

/// The bytes of a CPU tensor's storage, whatever its type.
fn storage_bytes(t: &Tensor) -> Vec<u8> {
    let (storage, layout) = t.storage_and_layout();
    assert!(layout.is_contiguous());
    let Storage::Cpu(cpu) = &*storage else {
        panic!("not on the CPU")
    };
    match cpu {
        CpuStorage::BF16(v) => bytemuck::cast_slice(v).to_vec(),
        CpuStorage::F8E4M3(v) => v.iter().map(|x| x.to_bits()).collect(),
        CpuStorage::F8E8M0(v) => v.clone(),
        _ => panic!("unexpected storage of {:?}", t.dtype()),
    }
}

#[test]
fn bf16_and_float8_stores_become_candle_tensors_of_their_own_type() {
    let dir = tempfile::tempdir().unwrap();
    for (dtype, cdtype) in [
        (DType::BF16, CDType::BF16),
        (DType::F8E4M3Fn, CDType::F8E4M3),
        (DType::F8E8M0Fnu, CDType::F8E8M0),
    ] {
        let (data, n) = all_patterns(dir.path(), dtype);
        let store = loaderx_core::DynDense::open(dir.path().join(dtype.name())).unwrap();
        // Through the loader (the gathered vector becomes the storage) and
        // through the converter (copied from bytes): the same bits.
        let mut loader = DataLoader::builder()
            .stream("x", store)
            .batch_size(n)
            .mode(SamplerMode::Sequential)
            .build_candle(&Device::Cpu)
            .unwrap();
        let batch = loader.next().unwrap().unwrap();
        let t = batch.dense("x").unwrap();
        assert_eq!((t.dtype(), t.dims()), (cdtype, &[n, 16][..]), "{dtype}");
        assert_eq!(storage_bytes(t), data, "{dtype}: loader");
        if dtype.size() > 1 {
            let c = CandleConverter::new(&Device::Cpu)
                .tensor_from_bytes(dtype, &data[1..], &[(data.len() - 1) / 2])
                .err();
            assert!(c.is_some(), "{dtype}: a partial element is refused");
        }
        let from_bytes = CandleConverter::new(&Device::Cpu)
            .tensor_from_bytes(dtype, &data, &[n, 16])
            .unwrap();
        assert_eq!(storage_bytes(&from_bytes), data, "{dtype}: converter");
    }
    // candle reads the values as loaderx does (bf16 and E4M3FN arithmetic).
    let data = patterns(DType::F8E4M3Fn);
    let t = CandleConverter::new(&Device::Cpu)
        .tensor_from_bytes(DType::F8E4M3Fn, &data, &[256])
        .unwrap();
    let got = t.to_dtype(CDType::F32).unwrap().to_vec1::<f32>().unwrap();
    for (b, g) in data.iter().zip(got) {
        let want = loaderx_core::F8E4M3Fn::from_bits(*b).to_f32();
        assert!(
            want == g || (want.is_nan() && g.is_nan()),
            "{b:#04x}: {want} vs {g}"
        );
    }
    let data = patterns(DType::BF16);
    let t = CandleConverter::new(&Device::Cpu)
        .tensor_from_bytes(DType::BF16, &data, &[1 << 16])
        .unwrap();
    let got = t.to_dtype(CDType::F32).unwrap().to_vec1::<f32>().unwrap();
    for (bits, g) in data.chunks_exact(2).zip(got) {
        let want = loaderx_core::bf16::from_le_bytes([bits[0], bits[1]]).to_f32();
        assert!(want.to_bits() == g.to_bits() || (want.is_nan() && g.is_nan()));
    }
}

#[test]
fn float8_and_complex_types_candle_lacks_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for dtype in [
        DType::F8E4M3Fnuz,
        DType::F8E5M2,
        DType::F8E5M2Fnuz,
        DType::C64,
        DType::C128,
    ] {
        let path = dir.path().join(dtype.name());
        let options = CreateOptions::new(Codec::Raw).generation(loaderx_core::Generation::V2_8_19);
        let mut w = DynDenseWriter::create(&path, dtype, &[2], &options).unwrap();
        w.append_bytes(&vec![0u8; 8 * dtype.size()], 4).unwrap();
        w.close().unwrap();
        let mut loader = DataLoader::builder()
            .stream("x", loaderx_core::DynDense::open(&path).unwrap())
            .batch_size(4)
            .mode(SamplerMode::Sequential)
            .build_candle(&Device::Cpu)
            .unwrap();
        let e = loader.next().unwrap().unwrap_err();
        assert!(e.to_string().contains(dtype.name()), "{dtype}: {e}");
    }
}
