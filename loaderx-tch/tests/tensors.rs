//! Store → loader → tch tensors: every dtype, alignment, ragged helpers,
//! zero-copy hand-over on the CPU.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use loaderx_core::SamplerMode;
use loaderx_core::{
    Codec, CreateOptions, DType, DataLoader, DynDense, DynDenseWriter, DynRagged, DynRaggedWriter,
    f16,
};
use loaderx_tch::{
    ColumnConverter, Error, PadValue, RaggedMode, TchConverter, TchLoaderExt, TchStaging, tch_kind,
};
use tch::{Device, Kind, Tensor};

fn values(dtype: DType, n: usize) -> (Vec<u8>, Vec<f64>) {
    let mut bytes = Vec::new();
    let mut expect = Vec::new();
    for i in 0..n {
        let k = i as i64 - (n as i64) / 2;
        let v: f64 = match dtype {
            DType::Bool => {
                bytes.push((i % 2) as u8);
                (i % 2) as f64
            }
            DType::U8 => {
                let v = [0u8, 1, 255, 128][i % 4];
                bytes.push(v);
                v.into()
            }
            DType::I8 => {
                let v = [i8::MIN, -1, 0, i8::MAX][i % 4];
                bytes.push(v as u8);
                v.into()
            }
            DType::U16 => {
                let v = [0u16, 1, u16::MAX, 40_000][i % 4];
                bytes.extend(v.to_le_bytes());
                v.into()
            }
            DType::I16 => {
                let v = [i16::MIN, -1, 0, i16::MAX][i % 4];
                bytes.extend(v.to_le_bytes());
                v.into()
            }
            DType::U32 => {
                let v = [0u32, 1, u32::MAX, 3_000_000_000][i % 4];
                bytes.extend(v.to_le_bytes());
                v.into()
            }
            DType::I32 => {
                let v = [i32::MIN, -1, 0, i32::MAX][i % 4];
                bytes.extend(v.to_le_bytes());
                v.into()
            }
            DType::U64 => {
                let v = [0u64, 1, 1 << 52, 1 << 40][i % 4];
                bytes.extend(v.to_le_bytes());
                v as f64
            }
            DType::I64 => {
                let v = [-(1i64 << 52), -1, k, 1 << 50][i % 4];
                bytes.extend(v.to_le_bytes());
                v as f64
            }
            DType::F16 => {
                let v = f16::from_f32(k as f32 * 0.5);
                bytes.extend(v.to_le_bytes());
                v.into()
            }
            DType::F32 => {
                let v = k as f32 * 1.5e10;
                bytes.extend(v.to_le_bytes());
                v.into()
            }
            _ => {
                let v = k as f64 * 1e-300;
                bytes.extend(v.to_le_bytes());
                v
            }
        };
        expect.push(v);
    }
    (bytes, expect)
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    let flat = t.to_kind(Kind::Double).flatten(0, -1);
    Vec::<f64>::try_from(&flat).unwrap()
}

fn dense_store(path: &Path, dtype: DType, n: usize, bytes: &[u8]) {
    let mut w =
        DynDenseWriter::create(path, dtype, &[2, 3], &CreateOptions::new(Codec::Zstd)).unwrap();
    w.append_bytes(bytes, n).unwrap();
    w.close().unwrap();
}

#[test]
fn every_dtype_round_trips_to_tensors() {
    let dir = tempfile::tempdir().unwrap();
    // The classic types; bf16, float8 and complex are refused by name
    // until the adapters map them.
    for dtype in DType::CLASSIC {
        let path = dir.path().join(dtype.name());
        let (bytes, expect) = values(dtype, 8 * 6);
        dense_store(&path, dtype, 8, &bytes);
        let mut loader = DataLoader::builder()
            .stream("x", DynDense::open(&path).unwrap())
            .batch_size(8)
            .mode(SamplerMode::Sequential)
            .build_tch(Device::Cpu)
            .unwrap();
        let batch = loader.next().unwrap().unwrap();
        let t = batch.dense("x").unwrap();
        assert_eq!(t.size(), [8, 2, 3], "{dtype}");
        assert_eq!(t.kind(), tch_kind(dtype).unwrap(), "{dtype}");
        assert_eq!(as_f64(t), expect, "{dtype}");
    }
}

#[test]
fn u64_above_i64_max_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u");
    let mut w =
        DynDenseWriter::create(&path, DType::U64, &[], &CreateOptions::new(Codec::Raw)).unwrap();
    w.append_bytes(
        &[(1u64 << 63).to_le_bytes(), 3u64.to_le_bytes()].concat(),
        2,
    )
    .unwrap();
    w.close().unwrap();
    let mut loader = DataLoader::builder()
        .stream("x", DynDense::open(&path).unwrap())
        .batch_size(2)
        .mode(SamplerMode::Sequential)
        .build_tch(Device::Cpu)
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
}

#[test]
fn streams_align_and_ragged_helpers_work() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40u32;
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
    let recs: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 1 + i as usize % 4]).collect();
    let shapes: Vec<Vec<usize>> = recs.iter().map(|r| vec![r.len()]).collect();
    let mut w = DynRaggedWriter::create(
        dir.path().join("r"),
        DType::U8,
        1,
        &CreateOptions::new(Codec::Zstd),
    )
    .unwrap();
    w.append_bytes(shapes.iter().zip(&recs).map(|(s, r)| (&s[..], &r[..])))
        .unwrap();
    w.close().unwrap();
    let builder = || {
        DataLoader::builder()
            .stream("x", DynDense::open(dir.path().join("x")).unwrap())
            .stream("r", DynRagged::open(dir.path().join("r")).unwrap())
            .batch_size(8)
            .seed(5)
            .workers(2)
    };
    let mut padded = builder().build_tch(Device::Cpu).unwrap();
    let mut records = builder()
        .build_tch_ragged(Device::Cpu, RaggedMode::PerRecord)
        .unwrap();
    for _ in 0..5 {
        let a = padded.next().unwrap().unwrap();
        let b = records.next().unwrap().unwrap();
        assert_eq!(a.indices, b.indices);
        let x = as_f64(a.dense("x").unwrap());
        let p = a.padded("r").unwrap();
        let lengths = Vec::<i64>::try_from(&p.lengths.flatten(0, -1)).unwrap();
        let mask = as_f64(&p.mask.to_kind(Kind::Double));
        let values = as_f64(&p.values);
        let max = p.values.size()[1] as usize;
        for (k, &i) in a.indices.iter().enumerate() {
            assert_eq!(x[k], i as f64);
            let len = 1 + i as usize % 4;
            assert_eq!(lengths[k], len as i64);
            for j in 0..max {
                let inside = j < len;
                assert_eq!(mask[k * max + j], if inside { 1.0 } else { 0.0 });
                assert_eq!(values[k * max + j], if inside { i as f64 } else { 0.0 });
            }
            assert_eq!(as_f64(&b.records("r").unwrap()[k]), vec![i as f64; len]);
        }
    }
}

#[test]
fn cpu_hand_over_does_not_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    let (bytes, _) = values(DType::F32, 16 * 6);
    dense_store(&path, DType::F32, 16, &bytes);
    let mut loader = DataLoader::builder()
        .stream("x", DynDense::open(&path).unwrap())
        .batch_size(16)
        .staging(TchStaging::new(Device::Cpu))
        .build()
        .unwrap();
    let batch = loader.next().unwrap().unwrap();
    let (_, column) = batch.into_columns().pop().unwrap();
    let gathered_at = column.bytes().as_ptr() as usize;
    let t = TchConverter::new(Device::Cpu).dense(column).unwrap();
    assert_eq!(
        t.data_ptr() as usize,
        gathered_at,
        "the tensor should be the gathered memory"
    );
    // And ragged helpers refuse dense columns.
    let mut loader = DataLoader::builder()
        .stream("x", DynDense::open(&path).unwrap())
        .batch_size(4)
        .build()
        .unwrap();
    let batch = loader.next().unwrap().unwrap();
    let e = TchConverter::new(Device::Cpu)
        .padded(batch.column("x").unwrap(), PadValue::ZERO)
        .unwrap_err();
    assert!(
        matches!(&e, Error::Core(c) if matches!(c.kind(), loaderx_core::ErrorKind::ColumnKind { .. })),
        "{e}"
    );
}

#[test]
fn pinned_path_falls_back_cleanly_without_cuda() {
    if tch::Cuda::is_available() {
        eprintln!("CUDA present: the fallback path is not exercised here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    let (bytes, _) = values(DType::F32, 4 * 6);
    dense_store(&path, DType::F32, 4, &bytes);
    // Staging for CUDA still gathers (into pageable memory) ...
    let mut loader = DataLoader::builder()
        .stream("x", DynDense::open(&path).unwrap())
        .batch_size(4)
        .mode(SamplerMode::Sequential)
        .staging(TchStaging::new(Device::Cuda(0)))
        .build()
        .unwrap();
    let batch = loader.next().unwrap().unwrap();
    assert_eq!(batch.column("x").unwrap().bytes(), &bytes[..]);
    // ... and asking for CUDA tensors is an error, not a panic or a hang.
    let mut loader = DataLoader::builder()
        .stream("x", DynDense::open(&path).unwrap())
        .batch_size(4)
        .build_tch(Device::Cuda(0))
        .unwrap();
    assert!(loader.next().unwrap().is_err());
    assert!(loader.next().is_none());
}

#[test]
fn bool_bytes_other_than_0_and_1_are_refused() {
    // A Kind::Bool tensor holding 2 is undefined behaviour when read back.
    let cpu = TchConverter::new(Device::Cpu);
    let e = cpu
        .tensor_from_bytes(DType::Bool, &[0, 1, 2], &[3])
        .unwrap_err();
    assert!(
        matches!(&e, Error::Core(c) if matches!(c.kind(), loaderx_core::ErrorKind::OutOfRange { .. })),
        "{e}"
    );
    let t = cpu
        .tensor_from_bytes(DType::Bool, &[0, 1, 1], &[3])
        .unwrap();
    assert_eq!(t.kind(), Kind::Bool);

    // Through the loader and the zero-copy staging: a store damaged on disk.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b");
    let opts = CreateOptions::new(Codec::Raw).data_shards(1);
    let mut w = DynDenseWriter::create(&path, DType::Bool, &[], &opts).unwrap();
    w.append_bytes(&[0, 1, 1, 0], 4).unwrap();
    w.close().unwrap();
    let shard = path.join("data_0.zr");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[2] = 2;
    std::fs::write(&shard, bytes).unwrap();
    let mut loader = DataLoader::builder()
        .stream("b", DynDense::open(&path).unwrap())
        .batch_size(4)
        .mode(SamplerMode::Sequential)
        .build_tch(Device::Cpu)
        .unwrap();
    let e = loader.next().unwrap().unwrap_err();
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
}

#[test]
fn iter2_is_one_pass_with_or_without_the_smaller_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let n = 101usize; // prime
    let x: Vec<f32> = (0..n).flat_map(|i| [i as f32, -(i as f32)]).collect();
    let mut w =
        loaderx_core::DenseWriter::<f32>::create(dir.path().join("x"), &[2], Codec::Raw).unwrap();
    w.append_slice(&x, n).unwrap();
    w.close().unwrap();
    let y: Vec<u32> = (0..n as u32).collect();
    let mut w =
        loaderx_core::DenseWriter::<u32>::create(dir.path().join("y"), &[], Codec::Zstd).unwrap();
    w.append_slice(&y, n).unwrap();
    w.close().unwrap();
    let x: loaderx_core::Stream = loaderx_core::Dense::<f32>::open(dir.path().join("x"))
        .unwrap()
        .into();
    let y: loaderx_core::Stream = loaderx_core::Dense::<u32>::open(dir.path().join("y"))
        .unwrap()
        .into();
    let run = |keep: bool, shuffle: bool| {
        let mut it = loaderx_tch::Iter2::new(x.clone(), y.clone(), 10);
        if keep {
            it.return_smaller_last_batch();
        }
        if shuffle {
            it.seed(7);
        }
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        for pair in it {
            let (xs, ys) = pair.unwrap();
            assert_eq!(ys.kind(), Kind::Int64); // u32 widened
            let ys = Vec::<i64>::try_from(&ys).unwrap();
            let xs = Vec::<f32>::try_from(&xs.flatten(0, -1)).unwrap();
            for (k, &i) in ys.iter().enumerate() {
                assert_eq!(&xs[2 * k..2 * k + 2], &[i as f32, -(i as f32)]);
            }
            sizes.push(ys.len());
            seen.extend(ys);
        }
        (sizes, seen)
    };
    let (sizes, seen) = run(true, false);
    assert_eq!(sizes, [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 1]);
    assert_eq!(seen, (0..101).collect::<Vec<i64>>());
    let (sizes, seen) = run(false, false);
    assert_eq!(sizes, [10; 10]);
    assert_eq!(seen, (0..100).collect::<Vec<i64>>());
    let (_, mut shuffled) = run(true, true);
    assert_ne!(shuffled, (0..101).collect::<Vec<i64>>());
    shuffled.sort_unstable();
    assert_eq!(shuffled, (0..101).collect::<Vec<i64>>());
    // A refused configuration is the first item's error, then the end.
    let mut it = loaderx_tch::Iter2::new(x, y, 500);
    assert!(it.next().unwrap().is_err());
    assert!(it.next().is_none());
}

/// The raw bytes of a tensor on the CPU.
fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    let n = t.numel();
    let mut out = vec![0u8; n * t.kind().elt_size_in_bytes()];
    t.copy_data_u8(&mut out, n);
    out
}

/// A loaderx value as f32, per 2.8.19 element type.
fn decode(dtype: DType, b: &[u8]) -> f32 {
    use loaderx_core::{F8E4M3Fn, F8E4M3Fnuz, F8E5M2, F8E5M2Fnuz, bf16};
    match dtype {
        DType::BF16 => bf16::from_le_bytes([b[0], b[1]]).to_f32(),
        DType::F8E4M3Fn => F8E4M3Fn::from_bits(b[0]).to_f32(),
        DType::F8E4M3Fnuz => F8E4M3Fnuz::from_bits(b[0]).to_f32(),
        DType::F8E5M2 => F8E5M2::from_bits(b[0]).to_f32(),
        _ => F8E5M2Fnuz::from_bits(b[0]).to_f32(),
    }
}

#[test]
fn bf16_float8_and_complex_stores_become_tch_tensors_of_their_own_kind() {
    let dir = tempfile::tempdir().unwrap();
    let options = CreateOptions::new(Codec::Zstd).generation(loaderx_core::Generation::V2_8_19);
    for (dtype, kind) in [
        (DType::BF16, Kind::BFloat16),
        (DType::F8E4M3Fn, Kind::Float8e4m3fn),
        (DType::F8E4M3Fnuz, Kind::Float8e4m3fnuz),
        (DType::F8E5M2, Kind::Float8e5m2),
        (DType::F8E5M2Fnuz, Kind::Float8e5m2fnuz),
        (DType::C64, Kind::ComplexFloat),
        (DType::C128, Kind::ComplexDouble),
    ] {
        // Every bit pattern of the one- and two-byte types; complex
        // numbers from distinct real and imaginary parts.
        let data: Vec<u8> = match dtype {
            DType::BF16 => (0..=u16::MAX).flat_map(u16::to_le_bytes).collect(),
            DType::C64 => (0..512)
                .flat_map(|i| (i as f32 * 0.25 - 7.0).to_le_bytes())
                .collect(),
            DType::C128 => (0..512)
                .flat_map(|i| (i as f64 * -1.5e100 + 3.0).to_le_bytes())
                .collect(),
            _ => (0..=255u8).collect(),
        };
        let n = data.len() / dtype.size() / 16;
        let path = dir.path().join(dtype.name());
        let mut w = DynDenseWriter::create(&path, dtype, &[16], &options).unwrap();
        w.append_bytes(&data, n).unwrap();
        w.close().unwrap();
        let mut loader = DataLoader::builder()
            .stream("x", DynDense::open(&path).unwrap())
            .batch_size(n)
            .mode(SamplerMode::Sequential)
            .build_tch(Device::Cpu)
            .unwrap();
        let batch = loader.next().unwrap().unwrap();
        let t = batch.dense("x").unwrap();
        assert_eq!((t.kind(), t.size()), (kind, vec![n as i64, 16]), "{dtype}");
        assert_eq!(tensor_bytes(t), data, "{dtype}: loader");
        let from_bytes = TchConverter::new(Device::Cpu)
            .tensor_from_bytes(dtype, &data, &[n, 16])
            .unwrap();
        assert_eq!(tensor_bytes(&from_bytes), data, "{dtype}: converter");
        // libtorch reads the values as loaderx does.
        match dtype {
            DType::C64 | DType::C128 => {
                let parts = as_f64(&t.view_as_real());
                let want: Vec<f64> = match dtype {
                    DType::C64 => (0..512).map(|i| f64::from(i as f32 * 0.25 - 7.0)).collect(),
                    _ => (0..512).map(|i| i as f64 * -1.5e100 + 3.0).collect(),
                };
                assert_eq!(parts, want, "{dtype}");
            }
            _ => {
                let got = Vec::<f32>::try_from(&t.to_kind(Kind::Float).flatten(0, -1)).unwrap();
                for (b, g) in data.chunks_exact(dtype.size()).zip(got) {
                    let want = decode(dtype, b);
                    assert!(
                        want.to_bits() == g.to_bits() || (want.is_nan() && g.is_nan()),
                        "{dtype} {b:?}: loaderx {want}, libtorch {g}"
                    );
                }
            }
        }
    }
    // float8_e8m0fnu has no kind in tch 0.22: refused by name.
    let path = dir.path().join("e8m0");
    let mut w = DynDenseWriter::create(&path, DType::F8E8M0Fnu, &[2], &options).unwrap();
    w.append_bytes(&[127; 8], 4).unwrap();
    w.close().unwrap();
    let mut loader = DataLoader::builder()
        .stream("x", DynDense::open(&path).unwrap())
        .batch_size(4)
        .mode(SamplerMode::Sequential)
        .build_tch(Device::Cpu)
        .unwrap();
    let e = loader.next().unwrap().unwrap_err();
    assert!(e.to_string().contains("f8e8m0fnu"), "{e}");
}

#[test]
fn packed_ragged_batches_are_tch_tensors_and_the_values_are_the_gathered_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r");
    // i32 records of shape (1 + i % 3, 2).
    let mut w =
        DynRaggedWriter::create(&path, DType::I32, 2, &CreateOptions::new(Codec::Zstd)).unwrap();
    let recs: Vec<(Vec<usize>, Vec<u8>)> = (0..100i32)
        .map(|i| {
            let rows = 1 + i as usize % 3;
            let v: Vec<u8> = (0..rows as i32 * 2)
                .flat_map(|k| (i * 10 + k).to_le_bytes())
                .collect();
            (vec![rows, 2], v)
        })
        .collect();
    w.append_bytes(recs.iter().map(|(s, b)| (&s[..], &b[..])))
        .unwrap();
    w.close().unwrap();
    let store = DynRagged::open(&path).unwrap();
    let mut loader = DataLoader::builder()
        .stream("r", DynRagged::open(&path).unwrap())
        .batch_size(8)
        .build_tch_ragged(Device::Cpu, RaggedMode::Packed)
        .unwrap();
    for _ in 0..5 {
        let batch = loader.next().unwrap().unwrap();
        let p = batch.packed("r").unwrap();
        let want = store
            .gather_packed(&batch.indices)
            .unwrap()
            .packed()
            .unwrap();
        assert_eq!(p.values.kind(), Kind::Int);
        assert_eq!(p.values.size(), [want.values.len() as i64]);
        assert_eq!(tensor_bytes(&p.values), want.values.bytes());
        assert_eq!(p.cu_seqlens.kind(), Kind::Int);
        assert_eq!(tensor_bytes(&p.cu_seqlens), want.cu_seqlens.bytes());
        // libtorch has no u32: shapes are Int64.
        assert_eq!(p.shapes.kind(), Kind::Int64);
        assert_eq!(p.shapes.size(), [8, 2]);
        let shapes: Vec<i64> = Vec::try_from(p.shapes.flatten(0, -1)).unwrap();
        let rows: Vec<i64> = batch
            .indices
            .iter()
            .flat_map(|&i| [1 + i as i64 % 3, 2])
            .collect();
        assert_eq!(shapes, rows);
    }
    // The values tensor is the one the loader gathered into.
    let mut loader = DataLoader::builder()
        .stream("r", DynRagged::open(&path).unwrap())
        .batch_size(8)
        .packed(true)
        .staging(TchStaging::new(Device::Cpu))
        .build()
        .unwrap();
    let (_, column) = loader
        .next()
        .unwrap()
        .unwrap()
        .into_columns()
        .pop()
        .unwrap();
    let gathered_at = column.bytes().as_ptr() as usize;
    let p = TchConverter::new(Device::Cpu).packed(column).unwrap();
    assert_eq!(p.values.data_ptr() as usize, gathered_at);
}
