//! Bad API input: wrong element types and contracts at open, wrong shapes
//! at append, out-of-range indices and wrong buffers at gather, and bad
//! create options. Each is a typed error, never a panic.

#![allow(clippy::unwrap_used)]

mod support;

use std::fs;

use loaderx_core::ndarray::{Array1, Array2, Array3};
use loaderx_core::{
    Codec, CreateOptions, DType, Dense, DenseWriter, DynDense, DynRagged, DynRaggedWriter,
    ErrorKind, Ragged, RaggedWriter, StoreKind,
};
use support::*;

// ---------------------------------------------------------------------------
// Bad API input.
// ---------------------------------------------------------------------------

#[test]
fn typed_open_checks_dtype_and_contract() {
    let dense = Fixture::new(Kind::Dense, Codec::Raw);
    let ragged = Fixture::new(Kind::Ragged, Codec::Zstd);

    assert_err!(
        Dense::<f32>::open(&dense.pristine),
        ErrorKind::DTypeMismatch {
            expected: DType::F32,
            found: DType::U32,
            ..
        }
    );
    assert_err!(
        Dense::<i32>::open(&dense.pristine),
        ErrorKind::DTypeMismatch { .. }
    );
    assert_err!(
        DynDense::open(&dense.pristine).unwrap().typed::<u8>(),
        ErrorKind::DTypeMismatch { .. }
    );
    assert_err!(
        Ragged::<i16>::open(&ragged.pristine),
        ErrorKind::DTypeMismatch {
            expected: DType::I16,
            found: DType::U16,
            ..
        }
    );

    assert_err!(
        Dense::<u16>::open(&ragged.pristine),
        ErrorKind::KindMismatch {
            expected: StoreKind::Dense,
            found: StoreKind::Ragged,
            ..
        }
    );
    assert_err!(
        DynDense::open(&ragged.pristine),
        ErrorKind::KindMismatch { .. }
    );
    assert_err!(
        Ragged::<u32>::open(&dense.pristine),
        ErrorKind::KindMismatch {
            expected: StoreKind::Ragged,
            found: StoreKind::Dense,
            ..
        }
    );
    assert_err!(
        DynRagged::open(&dense.pristine),
        ErrorKind::KindMismatch { .. }
    );
}

#[test]
fn dense_append_rejects_wrong_shapes_and_empty_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense");
    let mut w = DenseWriter::<u32>::create_with(&path, &[2, 3], &options(Codec::Zstd, 2)).unwrap();

    let bad_shapes = [
        Array3::<u32>::zeros((4, 3, 2)).into_dyn(),
        Array3::<u32>::zeros((4, 2, 4)).into_dyn(),
        Array2::<u32>::zeros((2, 3)).into_dyn(),
        Array2::<u32>::zeros((4, 6)).into_dyn(),
        Array1::<u32>::zeros(6).into_dyn(),
        loaderx_core::ndarray::arr0(1u32).into_dyn(),
    ];
    for batch in &bad_shapes {
        assert_err!(
            w.append(batch),
            ErrorKind::ShapeMismatch { .. },
            "{:?}",
            batch.shape()
        );
    }
    assert_err!(
        w.append(&Array3::<u32>::zeros((0, 2, 3))),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(w.append_slice(&[], 0), ErrorKind::InvalidArgument { .. });
    assert_err!(
        w.append_slice(&[1, 2, 3, 4, 5], 1),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(
        w.append_slice(&[0; 12], 1),
        ErrorKind::InvalidArgument { .. }
    );
    assert_eq!(w.len(), 0);

    // Rejected input never poisons the writer.
    let good = Array3::from_shape_fn((5, 2, 3), |(i, a, b)| (i * 6 + a * 3 + b) as u32);
    w.append(&good).unwrap();
    w.close().unwrap();
    let r = Dense::<u32>::open(&path).unwrap();
    assert_eq!(r.len(), 5);
    assert_eq!(r.range(0..5).unwrap(), good.into_dyn());
}

#[test]
fn ragged_append_rejects_wrong_rank_and_empty_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ragged");
    let mut w = RaggedWriter::<u16>::create_with(&path, 2, &options(Codec::Raw, 2)).unwrap();

    assert_err!(
        w.append([vec![1u16, 2, 3]]),
        ErrorKind::ShapeMismatch { index: 0, .. }
    );
    let good = Array2::<u16>::ones((2, 3));
    assert_err!(
        w.append([
            good.view().into_dyn(),
            Array1::<u16>::ones(3).view().into_dyn()
        ]),
        ErrorKind::ShapeMismatch { index: 1, .. }
    );
    assert_err!(
        w.append([Array3::<u16>::ones((1, 2, 3))]),
        ErrorKind::ShapeMismatch { index: 0, .. }
    );
    assert_err!(
        w.append([good.clone(), Array2::<u16>::zeros((3, 0))]),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(
        w.append(Vec::<Array2<u16>>::new()),
        ErrorKind::InvalidArgument { .. }
    );
    assert_eq!(w.len(), 0, "a rejected batch writes nothing");

    let mut dynw = w.into_dyn();
    let two: &[usize] = &[1, 2];
    assert_err!(
        dynw.append_bytes([(two, &[1u8, 2, 3][..])]),
        ErrorKind::ShapeMismatch { index: 0, .. }
    );
    dynw.append_bytes([(two, &[1u8, 0, 2, 0][..])]).unwrap();
    dynw.close().unwrap();
    let r = Ragged::<u16>::open(&path).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r.gather(&[0]).unwrap().data(0), &[1, 2]);

    // Rank 1: an empty record is refused too.
    let mut w = RaggedWriter::<u16>::create(dir.path().join("r1"), 1, Codec::Zstd).unwrap();
    assert_err!(
        w.append([vec![1u16], vec![]]),
        ErrorKind::InvalidArgument { .. }
    );
}

#[test]
fn gather_rejects_out_of_range_indices_and_wrong_buffers() {
    let dense = Fixture::new(Kind::Dense, Codec::Zstd);
    let ragged = Fixture::new(Kind::Ragged, Codec::ZstdDict);
    let d = Dense::<u32>::open(&dense.pristine).unwrap();
    let r = Ragged::<u16>::open(&ragged.pristine).unwrap();

    for bad in [RECORDS, RECORDS + 1, u64::MAX / 16, u64::MAX] {
        assert_err!(
            d.gather(&[0, bad]),
            ErrorKind::IndexOutOfRange { index, len: RECORDS, .. } if *index == bad
        );
        assert_err!(d.get(bad), ErrorKind::IndexOutOfRange { .. });
        assert_err!(
            d.as_dyn().gather_bytes(&[bad]),
            ErrorKind::IndexOutOfRange { .. }
        );
        assert_err!(
            r.gather(&[bad, 0]),
            ErrorKind::IndexOutOfRange { index, .. } if *index == bad
        );
        assert_err!(
            r.as_dyn().gather_len(&[bad]),
            ErrorKind::IndexOutOfRange { .. }
        );
    }
    assert_err!(d.range(0..RECORDS + 1), ErrorKind::IndexOutOfRange { .. });
    assert!(d.gather(&[]).unwrap().is_empty());

    for len in [0, 2 * WIDTH - 1, 2 * WIDTH + 1, 3 * WIDTH] {
        let mut buf = vec![0u32; len];
        assert_err!(
            d.gather_into(&[0, 1], &mut buf),
            ErrorKind::Buffer { .. },
            "{len}"
        );
    }
    let mut bytes = vec![0u8; 4 * WIDTH + 3];
    assert_err!(
        d.as_dyn().gather_into(&[0], &mut bytes),
        ErrorKind::Buffer { .. }
    );

    let need = r.as_dyn().gather_len(&[1, 2, 3]).unwrap();
    let mut small = vec![0u8; need - 1];
    assert_err!(
        r.as_dyn().gather_into(&[1, 2, 3], &mut small),
        ErrorKind::Buffer { .. }
    );
    let mut exact = vec![0u8; need];
    let layout = r.as_dyn().gather_into(&[1, 2, 3], &mut exact).unwrap();
    assert_eq!(layout.shape(2), &[ragged_len(3)]);
}

#[test]
fn create_refuses_existing_paths() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    build_dense(&store, Codec::Raw, 4, WIDTH, 1);
    let empty_dir = dir.path().join("empty_dir");
    fs::create_dir(&empty_dir).unwrap();
    let file = dir.path().join("file");
    fs::write(&file, b"precious").unwrap();

    for path in [&store, &empty_dir, &file] {
        assert_err!(
            DenseWriter::<u32>::create(path, &[WIDTH], Codec::Zstd),
            ErrorKind::AlreadyExists { path: p } if p == path
        );
        assert_err!(
            RaggedWriter::<u16>::create(path, 1, Codec::Raw),
            ErrorKind::AlreadyExists { .. }
        );
        assert_err!(
            DynRaggedWriter::create(path, DType::F32, 2, &options(Codec::ZstdDict, 3)),
            ErrorKind::AlreadyExists { .. }
        );
    }
    // Nothing was touched.
    assert_eq!(fs::read(&file).unwrap(), b"precious");
    assert_eq!(fs::read_dir(&empty_dir).unwrap().count(), 0);
    assert_eq!(Dense::<u32>::open(&store).unwrap().len(), 4);
}

/// A store URL given as a writer's path is refused by name, its password
/// and query never printed; it is never written as a local directory
/// `s3:/…` (relative to the working directory, here the crate's).
#[test]
fn create_and_migrate_refuse_a_url_as_a_local_path() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    build_dense(&src, Codec::Raw, 4, WIDTH, 1);
    for url in [
        "s3://reader:SECRET1@loaderx-bad-input/x?X-Amz-Signature=SECRET2",
        "http://reader:SECRET1@127.0.0.1:9/loaderx-bad-input/x",
    ] {
        let results = [
            DenseWriter::<u32>::create(url, &[WIDTH], Codec::Raw).map(|_| ()),
            RaggedWriter::<u8>::create(url, 1, Codec::Zstd).map(|_| ()),
            DynRaggedWriter::create(url, DType::F32, 2, &options(Codec::Raw, 2)).map(|_| ()),
            loaderx_core::migrate(&src, url, loaderx_core::Generation::V2_4_6),
        ];
        for r in results {
            let e = r.unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::InvalidArgument { .. }),
                "{url}: {e}"
            );
            let m = e.to_string();
            assert!(!m.contains("SECRET") && !m.contains("reader"), "{m}");
            assert!(m.contains("loaderx-bad-input/x"), "{m}");
        }
        let scheme = url.split_once("//").unwrap().0;
        assert!(!std::path::Path::new(scheme).exists(), "{scheme} written");
    }
}

/// Without the `remote` feature a URL is refused, naming it redacted.
#[cfg(not(feature = "remote"))]
#[test]
fn a_url_without_the_remote_feature_is_refused_redacted() {
    let Err(e) = loaderx_core::Store::open("https://reader:SECRET1@host/x?sig=SECRET2") else {
        panic!("a URL opened without the remote feature");
    };
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
    let m = e.to_string();
    assert!(m.starts_with("https://host/x: "), "{m}");
    assert!(!m.contains("SECRET") && !m.contains("reader"), "{m}");
}

#[test]
fn create_rejects_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("0 shards", CreateOptions::new(Codec::Raw).data_shards(0)),
        (
            "256 shards",
            CreateOptions::new(Codec::Zstd).data_shards(256),
        ),
        (
            "huge shards",
            CreateOptions::new(Codec::Zstd).data_shards(usize::MAX),
        ),
        (
            "zstd_dict without dict",
            CreateOptions::new(Codec::ZstdDict),
        ),
        (
            "zstd_dict with empty dict",
            CreateOptions::new(Codec::ZstdDict).dict_bytes(Vec::new()),
        ),
        (
            "raw with dict",
            CreateOptions::new(Codec::Raw).dict_bytes(test_dict()),
        ),
        (
            "zstd with dict",
            CreateOptions::new(Codec::Zstd).dict_bytes(test_dict()),
        ),
    ];
    for (name, opts) in &cases {
        let path = dir.path().join(name.replace(' ', "_"));
        assert_err!(
            DenseWriter::<u32>::create_with(&path, &[WIDTH], opts),
            ErrorKind::InvalidArgument { .. },
            "{name}"
        );
        assert_err!(
            RaggedWriter::<u8>::create_with(&path, 1, opts),
            ErrorKind::InvalidArgument { .. },
            "{name}"
        );
        assert!(!path.exists(), "{name}: a refused create left {path:?}");
    }
    // Shapes and ranks the format cannot hold.
    let path = dir.path().join("bad_shape");
    assert_err!(
        DenseWriter::<u32>::create(&path, &[4, 0], Codec::Raw),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(
        RaggedWriter::<u32>::create(&path, 0, Codec::Raw),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(
        RaggedWriter::<u32>::create(&path, 65, Codec::Raw),
        ErrorKind::InvalidArgument { .. }
    );
    assert!(!path.exists());

    // The shard-count bounds themselves are accepted.
    for shards in [1, 255] {
        let path = dir.path().join(format!("shards_{shards}"));
        build_dense(&path, Codec::Zstd, 300, 2, shards);
        let r = Dense::<u32>::open(&path).unwrap();
        assert_eq!(r.as_dyn().data_shards(), shards);
        assert_eq!(
            r.gather(&[299]).unwrap().into_raw_vec_and_offset().0,
            [dense_value(299, 0), dense_value(299, 1)]
        );
    }
}
