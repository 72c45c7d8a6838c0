//! Concatenated stores (`DynDense::concat`, `DynRagged::concat`): several
//! stores read end to end as one give exactly what one store holding the
//! same records in order gives — gathers (within one part and across
//! parts, packed or not), lengths, digests and loader batches — whatever
//! each part's codec and shard count.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use loaderx_core::{
    Codec, DataLoader, DynDense, DynRagged, Generation, RaggedWriter, SamplerMode, Store, digest,
};
use proptest::prelude::*;

const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];

/// A Dense `u16 [3]` store of `rows` at `path`.
fn dense(path: &Path, rows: &[[u16; 3]], codec: Codec, shards: usize) {
    let mut w = loaderx_core::DenseWriter::<u16>::create_with(
        path,
        &[3],
        &support::options(codec, shards).generation(Generation::V2_8_19),
    )
    .unwrap();
    let flat: Vec<u16> = rows.iter().flatten().copied().collect();
    if !rows.is_empty() {
        w.append_slice(&flat, rows.len()).unwrap();
    }
    w.close().unwrap();
}

/// A Ragged `i32` rank-1 store of `records` at `path`.
fn ragged(path: &Path, records: &[Vec<i32>], codec: Codec, generation: Generation) {
    let mut w = RaggedWriter::<i32>::create_with(
        path,
        1,
        &support::options(codec, 3).generation(generation),
    )
    .unwrap();
    if !records.is_empty() {
        w.append(records.iter().cloned()).unwrap();
    }
    w.close().unwrap();
}

fn rows(n: usize, from: usize) -> Vec<[u16; 3]> {
    (from..from + n)
        .map(|i| [i as u16, (i * 7) as u16, (i % 5) as u16])
        .collect()
}

fn records(n: usize, from: usize) -> Vec<Vec<i32>> {
    (from..from + n)
        .map(|i| (0..(1 + i % 6) as i32).map(|j| i as i32 * 10 + j).collect())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn dense_parts_gather_as_one_store(
        sizes in proptest::collection::vec(0usize..40, 1..5),
        picks in proptest::collection::vec(any::<u64>(), 0..60),
        codec_of in any::<u64>(),
    ) {
        prop_assume!(sizes.iter().sum::<usize>() > 0);
        let dir = tempfile::tempdir().unwrap();
        let mut parts = Vec::new();
        let mut all = Vec::new();
        for (p, &n) in sizes.iter().enumerate() {
            let path = dir.path().join(format!("part{p}"));
            let r = rows(n, all.len());
            let codec = CODECS[(codec_of >> (2 * p)) as usize % 3];
            dense(&path, &r, codec, 1 + p % 4);
            all.extend(r);
            parts.push(DynDense::open(&path).unwrap());
        }
        let whole_path = dir.path().join("whole");
        dense(&whole_path, &all, Codec::Raw, 4);
        let one = DynDense::open(&whole_path).unwrap();
        let joined = DynDense::concat(dir.path(), parts).unwrap();
        prop_assert_eq!(joined.len(), all.len() as u64);
        let n = all.len() as u64;
        let indices: Vec<u64> = picks.iter().map(|&x| x % n).collect();
        prop_assert_eq!(joined.gather_bytes(&indices).unwrap(), one.gather_bytes(&indices).unwrap());
        prop_assert_eq!(
            digest(&Store::Dense(joined)).unwrap(),
            digest(&Store::Dense(one)).unwrap()
        );
    }

    #[test]
    fn ragged_parts_gather_as_one_store(
        sizes in proptest::collection::vec(0usize..30, 1..5),
        picks in proptest::collection::vec(any::<u64>(), 0..50),
        codec_of in any::<u64>(),
        json in any::<bool>(),
    ) {
        prop_assume!(sizes.iter().sum::<usize>() > 0);
        let generation = if json { Generation::V2_8_19 } else { Generation::V2_4_6 };
        let dir = tempfile::tempdir().unwrap();
        let mut parts = Vec::new();
        let mut all = Vec::new();
        for (p, &n) in sizes.iter().enumerate() {
            let path = dir.path().join(format!("part{p}"));
            let r = records(n, all.len());
            ragged(&path, &r, CODECS[(codec_of >> (2 * p)) as usize % 3], generation);
            all.extend(r);
            parts.push(DynRagged::open(&path).unwrap());
        }
        let whole_path = dir.path().join("whole");
        ragged(&whole_path, &all, Codec::Raw, generation);
        let one = DynRagged::open(&whole_path).unwrap();
        let joined = DynRagged::concat(dir.path(), parts).unwrap();
        let n = all.len() as u64;
        let indices: Vec<u64> = picks.iter().map(|&x| x % n).collect();
        for packed in [false, true] {
            let (a, b) = if packed {
                (joined.gather_packed(&indices).unwrap(), one.gather_packed(&indices).unwrap())
            } else {
                (joined.gather(&indices).unwrap(), one.gather(&indices).unwrap())
            };
            prop_assert_eq!(a.len(), indices.len());
            for k in 0..indices.len() {
                prop_assert_eq!(a.shape(k), b.shape(k));
                prop_assert_eq!(a.bytes(k), b.bytes(k));
            }
        }
        prop_assert_eq!(joined.lengths().unwrap().lengths(), one.lengths().unwrap().lengths());
        prop_assert_eq!(joined.logical_bytes().unwrap(), one.logical_bytes().unwrap());
        prop_assert_eq!(
            digest(&Store::Ragged(joined)).unwrap(),
            digest(&Store::Ragged(one)).unwrap()
        );
    }
}

#[test]
fn a_loader_reads_parts_as_it_reads_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let (mut x_parts, mut t_parts) = (Vec::new(), Vec::new());
    let (mut x_all, mut t_all) = (Vec::new(), Vec::new());
    for (p, n) in [300usize, 1, 0, 250].into_iter().enumerate() {
        let (xp, tp) = (
            dir.path().join(format!("x{p}")),
            dir.path().join(format!("t{p}")),
        );
        let (x, t) = (rows(n, x_all.len()), records(n, t_all.len()));
        dense(&xp, &x, CODECS[p % 3], 2);
        ragged(&tp, &t, CODECS[(p + 1) % 3], Generation::V2_8_19);
        x_all.extend(x);
        t_all.extend(t);
        x_parts.push(DynDense::open(&xp).unwrap());
        t_parts.push(DynRagged::open(&tp).unwrap());
    }
    dense(&dir.path().join("x"), &x_all, Codec::Zstd, 4);
    ragged(
        &dir.path().join("t"),
        &t_all,
        Codec::Raw,
        Generation::V2_8_19,
    );
    let run = |x: loaderx_core::Stream, t: loaderx_core::Stream, packed: bool| {
        DataLoader::builder()
            .stream("x", x)
            .stream("t", t)
            .batch_size(64)
            .mode(SamplerMode::Cyclic)
            .seed(3)
            .drop_last(false)
            .epochs(2)
            .packed(packed)
            .workers(2)
            .build()
            .unwrap()
            .map(|b| {
                let b = b.unwrap();
                let x = b.column("x").unwrap().bytes().to_vec();
                let t = b.column("t").unwrap().bytes().to_vec();
                (b.indices().to_vec(), x, t)
            })
            .collect::<Vec<_>>()
    };
    for packed in [false, true] {
        let joined = run(
            DynDense::concat(
                dir.path(),
                x_parts
                    .iter()
                    .map(|p| DynDense::open(p.path()).unwrap())
                    .collect(),
            )
            .unwrap()
            .into(),
            DynRagged::concat(
                dir.path(),
                t_parts
                    .iter()
                    .map(|p| DynRagged::open(p.path()).unwrap())
                    .collect(),
            )
            .unwrap()
            .into(),
            packed,
        );
        let one = run(
            DynDense::open(dir.path().join("x")).unwrap().into(),
            DynRagged::open(dir.path().join("t")).unwrap().into(),
            packed,
        );
        assert_eq!(joined.len(), 18);
        assert_eq!(joined, one);
    }
}

#[test]
fn parts_that_differ_are_refused_and_name_the_part() {
    let dir = tempfile::tempdir().unwrap();
    dense(&dir.path().join("a"), &rows(3, 0), Codec::Raw, 1);
    let mut w =
        loaderx_core::DenseWriter::<u16>::create(dir.path().join("b"), &[4], Codec::Raw).unwrap();
    w.append_slice(&[1, 2, 3, 4], 1).unwrap();
    w.close().unwrap();
    let err = DynDense::concat(
        dir.path(),
        vec![
            DynDense::open(dir.path().join("a")).unwrap(),
            DynDense::open(dir.path().join("b")).unwrap(),
        ],
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("/b"), "{err}");
    let err = DynDense::concat(dir.path(), Vec::new()).err().unwrap();
    assert!(err.to_string().contains("at least one part"), "{err}");
    // u64 dims (2.4.6) beside u32 dims (2.8.19): another header width.
    ragged(
        &dir.path().join("r1"),
        &records(2, 0),
        Codec::Raw,
        Generation::V2_4_6,
    );
    ragged(
        &dir.path().join("r2"),
        &records(2, 0),
        Codec::Raw,
        Generation::V2_8_19,
    );
    let err = DynRagged::concat(
        dir.path(),
        vec![
            DynRagged::open(dir.path().join("r1")).unwrap(),
            DynRagged::open(dir.path().join("r2")).unwrap(),
        ],
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("dims"), "{err}");
    // An index past the whole names the whole.
    let joined = DynDense::concat(
        dir.path(),
        vec![DynDense::open(dir.path().join("a")).unwrap()],
    )
    .unwrap();
    let err = joined.gather_bytes(&[3]).unwrap_err();
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
    assert_eq!(joined.part_starts(), [0, 3]);
}

/// Batches large enough to be read in parallel, over parts of every codec
/// (dictionary parts each with their own dictionary, which the workers'
/// shared decoders switch between): Dense and Ragged, packed or not, equal
/// one store's.
#[test]
fn large_gathers_over_mixed_codec_parts_match_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [3000usize, 2500, 1, 2800, 0, 3100];
    let (mut dense_parts, mut ragged_parts) = (Vec::new(), Vec::new());
    let (mut all_rows, mut all_records) = (Vec::new(), Vec::new());
    for (p, &n) in sizes.iter().enumerate() {
        let codec = [Codec::ZstdDict, Codec::Zstd, Codec::Raw, Codec::ZstdDict][p % 4];
        let d = dir.path().join(format!("d{p}"));
        let r = rows(n, all_rows.len());
        dense(&d, &r, codec, 1 + p % 3);
        all_rows.extend(r);
        dense_parts.push(DynDense::open(&d).unwrap());
        let g = dir.path().join(format!("g{p}"));
        let recs = records(n, all_records.len());
        ragged(&g, &recs, codec, Generation::V2_8_19);
        all_records.extend(recs);
        ragged_parts.push(DynRagged::open(&g).unwrap());
    }
    dense(&dir.path().join("d-one"), &all_rows, Codec::Raw, 2);
    ragged(
        &dir.path().join("g-one"),
        &all_records,
        Codec::Zstd,
        Generation::V2_8_19,
    );
    let one_d = DynDense::open(dir.path().join("d-one")).unwrap();
    let one_g = DynRagged::open(dir.path().join("g-one")).unwrap();
    let joined_d = DynDense::concat(dir.path(), dense_parts).unwrap();
    let joined_g = DynRagged::concat(dir.path(), ragged_parts).unwrap();
    let n = all_rows.len() as u64;
    let indices: Vec<u64> = (0..8000u64).map(|i| (i * 2_654_435_761) % n).collect();
    assert_eq!(
        joined_d.gather_bytes(&indices).unwrap(),
        one_d.gather_bytes(&indices).unwrap()
    );
    for packed in [false, true] {
        let (a, b) = if packed {
            (
                joined_g.gather_packed(&indices).unwrap(),
                one_g.gather_packed(&indices).unwrap(),
            )
        } else {
            (
                joined_g.gather(&indices).unwrap(),
                one_g.gather(&indices).unwrap(),
            )
        };
        for (k, index) in indices.iter().enumerate() {
            assert_eq!(a.shape(k), b.shape(k));
            assert_eq!(a.bytes(k), b.bytes(k), "record {index}");
        }
    }
}

/// A damaged record in one part is a `CorruptRecord` naming that part's
/// store and the record's index in it, through every gather path.
#[test]
fn a_damaged_record_in_a_part_names_the_part_and_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut parts = Vec::new();
    for p in 0..3 {
        let path = dir.path().join(format!("part{p}"));
        dense(&path, &rows(500, 500 * p), Codec::Zstd, 1);
        parts.push(path);
    }
    // Overwrite part 1's payload with bytes no zstd frame starts with.
    let shard = parts[1].join("data_0.zr");
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::write(&shard, vec![0xA5u8; len as usize]).unwrap();
    let joined = DynDense::concat(
        dir.path(),
        parts.iter().map(|p| DynDense::open(p).unwrap()).collect(),
    )
    .unwrap();
    // Records of parts 0 and 2 still read; any batch touching part 1 fails.
    let fine: Vec<u64> = (0..500).chain(1000..1500).collect();
    assert_eq!(joined.gather_bytes(&fine).unwrap().len(), 1000 * 6);
    for batch in [vec![0u64, 1200, 742], (0..1500).rev().collect::<Vec<u64>>()] {
        let e = joined.gather_bytes(&batch).unwrap_err();
        match e.kind() {
            loaderx_core::ErrorKind::CorruptRecord { path, index, .. } => {
                assert!(path.ends_with("part1"), "{e}");
                assert!(*index < 500, "{e}");
            }
            _ => panic!("{e}"),
        }
    }
}
