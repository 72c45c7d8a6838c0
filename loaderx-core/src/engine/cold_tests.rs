//! Every read path returns the bytes written: mapped, direct (`O_DIRECT`
//! and through the page cache, each by io_uring and by the `pread`
//! fallback) and auto; Dense and Ragged, raw and compressed, one store and
//! parts; serial, parallel and from several threads; read by the gathers
//! or ahead of them by the look-ahead, each record once. Reads that fail
//! or come back short are refused with the record named.

use std::path::Path;

use proptest::prelude::*;

use super::ReadMode;
use crate::engine::{Engine, io};
use crate::{
    Codec, CreateOptions, DType, DynDense, DynDenseWriter, DynRagged, DynRaggedWriter, ErrorKind,
    format,
};

/// Deterministic record bytes, half of them repeating (for zstd).
fn record(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| {
            if j % 2 == 0 {
                (i % 7) as u8
            } else {
                (i.wrapping_mul(131) ^ j.wrapping_mul(29) ^ (j >> 8)) as u8
            }
        })
        .collect()
}

fn options(codec: Codec, shards: usize, sample: &[Vec<u8>]) -> CreateOptions {
    let o = CreateOptions::new(codec).data_shards(shards);
    match codec {
        Codec::ZstdDict => o.dict_bytes(crate::train_dict(sample).unwrap()),
        _ => o,
    }
}

/// A Dense `u8[width]` store of `n` records; the records.
fn dense(path: &Path, codec: Codec, width: usize, n: usize, shards: usize) -> Vec<Vec<u8>> {
    let recs: Vec<Vec<u8>> = (0..n).map(|i| record(i, width)).collect();
    let opts = options(codec, shards, &recs);
    let mut w = DynDenseWriter::create(path, DType::U8, &[width], &opts).unwrap();
    w.append_bytes(&recs.concat(), n).unwrap();
    w.close().unwrap();
    recs
}

/// A Ragged `u8` store of `n` records of 1 to `max` bytes; the records.
fn ragged(path: &Path, codec: Codec, n: usize, max: usize, shards: usize) -> Vec<Vec<u8>> {
    let recs: Vec<Vec<u8>> = (0..n).map(|i| record(i, 1 + (i * 7919) % max)).collect();
    let shapes: Vec<[usize; 1]> = recs.iter().map(|r| [r.len()]).collect();
    let opts = options(codec, shards, &recs);
    let mut w = DynRaggedWriter::create(path, DType::U8, 1, &opts).unwrap();
    w.append_bytes(shapes.iter().zip(&recs).map(|(s, r)| (&s[..], &r[..])))
        .unwrap();
    w.close().unwrap();
    recs
}

/// The ways a store is read: a mode, whether the `pread` pool is forced,
/// and whether direct reads go through the page cache (as where `O_DIRECT`
/// is refused).
const WAYS: [(ReadMode, bool, bool); 7] = [
    (ReadMode::Mapped, false, false),
    (ReadMode::Direct, false, false),
    (ReadMode::Direct, true, false),
    (ReadMode::Direct, false, true),
    (ReadMode::Direct, true, true),
    (ReadMode::Auto, false, false),
    (ReadMode::Auto, true, true),
];

fn set_way(engine: &Engine, (mode, pread, buffered): (ReadMode, bool, bool)) {
    engine.set_read_mode(mode);
    for r in engine.stores() {
        r.force_pread(pread);
        r.force_buffered(buffered);
    }
}

/// Batches: scattered with repeats, and everything backwards (large
/// enough to decode in parallel).
fn batches(n: usize) -> Vec<Vec<u64>> {
    let mut b: Vec<Vec<u64>> = (1..4u64)
        .map(|seed| {
            (0..97u64)
                .map(|k| (k * 7919 + seed * 104_729) % n as u64)
                .collect()
        })
        .collect();
    b.push((0..n as u64).rev().collect());
    b.push(vec![3 % n as u64]);
    b
}

/// (direct gathers, uring batches, pread batches, `O_DIRECT` gathers) of
/// every store read.
fn counted(engine: &Engine) -> (u64, u64, u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    engine
        .stores()
        .iter()
        .fold((0, 0, 0, 0), |(d, u, p, o), r| {
            let c = r.cold_counters();
            (
                d + c.direct_gathers.load(Relaxed),
                u + c.uring_batches.load(Relaxed),
                p + c.pread_batches.load(Relaxed),
                o + c.o_direct_gathers.load(Relaxed),
            )
        })
}

/// (records the look-ahead read, records gathers took from it, records
/// gathers read themselves `O_DIRECT`) of every store read.
fn ahead_counted(engine: &Engine) -> (u64, u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    engine.stores().iter().fold((0, 0, 0), |(a, h, o), r| {
        let c = r.cold_counters();
        (
            a + c.ahead_records.load(Relaxed),
            h + c.ahead_hits.load(Relaxed),
            o + c.own_reads.load(Relaxed),
        )
    })
}

/// Whether every store of `engine` can be read `O_DIRECT` here.
fn o_direct_here(engine: &Engine) -> bool {
    engine.stores().iter().all(|r| r.o_direct_usable())
}

/// The bytes a Dense gather of `idx` returns: its records, in order.
fn records_of(recs: &[Vec<u8>], idx: &[u64]) -> Vec<u8> {
    idx.iter().flat_map(|&i| recs[i as usize].clone()).collect()
}

/// Checks that both Ragged gathers of `idx` (per record and packed) return
/// the records written.
fn check_ragged(store: &DynRagged, idx: &[u64], recs: &[Vec<u8>], what: &str) {
    for b in [
        store.gather(idx).unwrap(),
        store.gather_packed(idx).unwrap(),
    ] {
        assert_eq!(b.len(), idx.len(), "{what}");
        for (k, &i) in idx.iter().enumerate() {
            assert_eq!(b.bytes(k), &recs[i as usize][..], "{what} {i}");
        }
    }
}

/// Checks that `way` read directly when it must, through the backend it
/// must, `O_DIRECT` or not as it must.
fn check_backend(engine: &Engine, way: (ReadMode, bool, bool), before: (u64, u64, u64, u64)) {
    let (d, u, p, o) = counted(engine);
    match way {
        (ReadMode::Mapped, ..) => assert_eq!(d, before.0, "mapped reads nothing directly"),
        (ReadMode::Direct, pread, buffered) => {
            assert!(d > before.0, "direct gathers read directly");
            if pread {
                assert!(p > before.2 && u == before.1, "forced to the pread pool");
            } else if io::uring_usable() {
                assert!(u > before.1, "read through io_uring");
            }
            if buffered {
                assert_eq!(o, before.3, "forced through the page cache");
            } else if o_direct_here(engine) {
                assert!(o > before.3, "read O_DIRECT");
            }
        }
        _ => {}
    }
}

#[test]
fn dense_gathers_return_the_records_written_every_way() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
        for (width, n, shards) in [(1, 300, 4), (100, 700, 3), (4096, 200, 4)] {
            let path = dir.path().join(format!("{codec:?}-{width}"));
            let recs = dense(&path, codec, width, n, shards);
            let store = DynDense::open(&path).unwrap();
            for way in WAYS {
                set_way(store.engine(), way);
                let before = counted(store.engine());
                for idx in batches(n) {
                    assert_eq!(
                        store.gather_bytes(&idx).unwrap(),
                        records_of(&recs, &idx),
                        "{codec:?} {width} {way:?}"
                    );
                }
                check_backend(store.engine(), way, before);
            }
        }
    }
}

#[test]
fn ragged_gathers_return_the_records_written_every_way() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
        let n = 600;
        let path = dir.path().join(format!("{codec:?}"));
        let recs = ragged(&path, codec, n, 3000, 3);
        let store = DynRagged::open(&path).unwrap();
        for way in WAYS {
            set_way(store.engine(), way);
            let before = counted(store.engine());
            for idx in batches(n) {
                check_ragged(&store, &idx, &recs, &format!("{codec:?} {way:?}"));
            }
            check_backend(store.engine(), way, before);
        }
    }
}

#[test]
fn gathers_over_parts_return_the_records_written_every_way() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        let mut dense_recs = Vec::new();
        let mut ragged_recs = Vec::new();
        let (mut dparts, mut rparts) = (Vec::new(), Vec::new());
        for (k, n) in [150usize, 1, 260].into_iter().enumerate() {
            let p = dir.path().join(format!("d-{codec:?}-{k}"));
            dense_recs.extend(dense(&p, codec, 64, n, 2));
            dparts.push(DynDense::open(&p).unwrap());
            let p = dir.path().join(format!("r-{codec:?}-{k}"));
            ragged_recs.extend(ragged(&p, codec, n, 900, 3));
            rparts.push(DynRagged::open(&p).unwrap());
        }
        let d = DynDense::concat(dir.path(), dparts).unwrap();
        let r = DynRagged::concat(dir.path(), rparts).unwrap();
        let n = dense_recs.len();
        for way in WAYS {
            set_way(d.engine(), way);
            set_way(r.engine(), way);
            let before = counted(d.engine());
            for idx in batches(n) {
                let what = format!("{codec:?} {way:?}");
                assert_eq!(
                    d.gather_bytes(&idx).unwrap(),
                    records_of(&dense_recs, &idx),
                    "{what}"
                );
                // (Ragged records renumbered: part k's records follow part k-1's.)
                check_ragged(&r, &idx, &ragged_recs, &what);
            }
            check_backend(d.engine(), way, before);
        }
    }
}

#[test]
fn direct_gathers_from_many_threads_at_once_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let recs = dense(&path, Codec::Raw, 512, 3000, 4);
    let store = DynDense::open(&path)
        .unwrap()
        .with_read_mode(ReadMode::Direct);
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let (store, recs) = (&store, &recs);
            s.spawn(move || {
                for b in 0..20u64 {
                    let idx: Vec<u64> = (0..300u64)
                        .map(|k| (k * 7919 + t * 31 + b * 104_729) % 3000)
                        .collect();
                    assert_eq!(store.gather_bytes(&idx).unwrap(), records_of(recs, &idx));
                }
            });
        }
    });
}

#[test]
fn a_shard_truncated_after_open_is_refused_with_the_record_named() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        for (pread, buffered) in [(false, false), (true, false), (false, true), (true, true)] {
            let path = dir.path().join(format!("{codec:?}-{pread}-{buffered}"));
            let n = 400;
            dense(&path, codec, 256, n, 1);
            let store = DynDense::open(&path)
                .unwrap()
                .with_read_mode(ReadMode::Direct);
            set_way(store.engine(), (ReadMode::Direct, pread, buffered));
            let shard = path.join(format::data_file(0));
            let len = std::fs::metadata(&shard).unwrap().len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&shard)
                .unwrap()
                .set_len(len / 2)
                .unwrap();
            // The first record still reads; the last is past the end.
            assert_eq!(store.gather_bytes(&[0]).unwrap(), record(0, 256));
            let last = n as u64 - 1;
            let e = store.gather_bytes(&[0, last]).unwrap_err();
            match e.kind() {
                ErrorKind::CorruptRecord { path: p, index, .. } => {
                    assert_eq!((p.as_path(), *index), (path.as_path(), last), "{e}");
                }
                _ => panic!("{codec:?} pread={pread} buffered={buffered}: {e}"),
            }
            // Read ahead by the look-ahead (which fails): its gather reads
            // it again and refuses it.
            assert!(store.engine().prefetch(&[0, last]) > 0);
            crate::engine::finish_look_ahead();
            let e = store.gather_bytes(&[last, 0]).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::CorruptRecord { index, .. } if *index == last),
                "{e}"
            );
            // The Ragged gathers refuse it as well.
            let rpath = dir.path().join(format!("r-{codec:?}-{pread}-{buffered}"));
            ragged(&rpath, codec, n, 2000, 1);
            let r = DynRagged::open(&rpath).unwrap();
            set_way(r.engine(), (ReadMode::Direct, pread, buffered));
            let shard = rpath.join(format::data_file(0));
            std::fs::OpenOptions::new()
                .write(true)
                .open(&shard)
                .unwrap()
                .set_len(10)
                .unwrap();
            let e = r.gather(&[last]).expect_err("a truncated record");
            assert!(
                matches!(e.kind(), ErrorKind::CorruptRecord { index, .. } if *index == last),
                "{e}"
            );
        }
    }
}

#[test]
fn auto_maps_a_warm_store_and_reads_a_cold_one_directly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let n = 2000;
    let recs = dense(&path, Codec::Raw, 4096, n, 2);
    let store = DynDense::open(&path)
        .unwrap()
        .with_read_mode(ReadMode::Auto);
    let reader = &store.engine().stores()[0];
    let idx: Vec<u64> = (0..64u64).map(|k| (k * 7919) % n as u64).collect();
    let want = records_of(&recs, &idx);
    if idx.iter().all(|&i| reader.record_resident(i) == Some(true)) {
        assert_eq!(store.gather_bytes(&idx).unwrap(), want);
        assert_eq!(counted(store.engine()).0, 0, "a warm store is mapped");
    }
    // Evicted (where the file system lets its clean pages go).
    for s in 0..2 {
        let f = std::fs::File::open(path.join(format::data_file(s))).unwrap();
        io::evict(&f);
    }
    if idx
        .iter()
        .any(|&i| reader.record_resident(i) == Some(false))
    {
        store.set_read_mode(ReadMode::Auto); // a new verdict now
        assert_eq!(store.gather_bytes(&idx).unwrap(), want);
        assert!(
            counted(store.engine()).0 > 0,
            "a cold store is read directly"
        );
    }
}

#[test]
fn prefetch_reads_a_cold_store_into_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let n = 500;
    dense(&path, Codec::Raw, 4096, n, 2);
    let store = DynDense::open(&path).unwrap();
    let idx: Vec<u64> = (0..40u64).map(|k| (k * 37) % n as u64).collect();
    // Mapped: never read ahead.
    store.set_read_mode(ReadMode::Mapped);
    assert_eq!(store.engine().prefetch(&idx), 0);
    // Direct: every record asked for (repeats once).
    store.set_read_mode(ReadMode::Direct);
    let mut unique = idx.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(store.engine().prefetch(&idx), 4096 * unique.len() as u64);
}

/// Runs of bytes advised `WILLNEED` by the look-ahead, every store read.
fn will_need_runs(engine: &Engine) -> u64 {
    use std::sync::atomic::Ordering::Relaxed;
    engine
        .stores()
        .iter()
        .map(|r| r.cold_counters().will_need_runs.load(Relaxed))
        .sum()
}

#[test]
fn prefetching_ranges_advises_one_run_a_shard() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let (n, width, shards) = (1000usize, 64u64, 3usize);
    dense(&path, Codec::Raw, width as usize, n, shards);
    let store = DynDense::open(&path).unwrap();
    let e = store.engine();
    store.set_read_mode(ReadMode::Mapped);
    assert_eq!(
        e.prefetch_ranges(&[0..50, 60..100]),
        0,
        "mapped: nothing ahead"
    );
    store.set_read_mode(ReadMode::Direct);
    // Two blocks, the second running past the end (clipped).
    let before = will_need_runs(e);
    assert_eq!(
        e.prefetch_ranges(&[100..200, 900..1100]),
        (100 + 100) * width
    );
    // Records alternate shards: each range is one run in each shard.
    assert_eq!(will_need_runs(e) - before, 2 * shards as u64);
    // Record by record, the same 200 records are 2 runs a shard too (the
    // look-ahead's older path coalesces neighbours): the counts agree.
    let before = will_need_runs(e);
    let idx: Vec<u64> = (100..200).chain(900..1000).collect();
    assert_eq!(e.prefetch(&idx), 200 * width);
    assert_eq!(will_need_runs(e) - before, 2 * shards as u64);

    // Parts: a range across the boundary is cut there, each part reading
    // its own records.
    let mut parts = Vec::new();
    for (k, n) in [150usize, 1, 260].into_iter().enumerate() {
        let p = dir.path().join(format!("p{k}"));
        dense(&p, Codec::Raw, 64, n, 2);
        parts.push(DynDense::open(&p).unwrap());
    }
    let d = DynDense::concat(dir.path(), parts).unwrap();
    d.set_read_mode(ReadMode::Direct);
    let before = will_need_runs(d.engine());
    assert_eq!(d.engine().prefetch_ranges(&[100..200, 400..500]), 111 * 64);
    // 100..150 in part 0, 150 in part 1 (one shard holds it), 151..200
    // and 400..411 in part 2: 2 + 1 + 2 + 2 runs.
    assert_eq!(will_need_runs(d.engine()) - before, 7);
}

#[test]
fn auto_reads_directly_while_the_look_ahead_finds_the_store_cold() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let n = 2000;
    let recs = dense(&path, Codec::Raw, 4096, n, 2);
    let store = DynDense::open(&path)
        .unwrap()
        .with_read_mode(ReadMode::Auto);
    let reader = &store.engine().stores()[0];
    let idx: Vec<u64> = (0..64u64).map(|k| (k * 7919) % n as u64).collect();
    let want = records_of(&recs, &idx);
    let files: Vec<std::fs::File> = (0..2)
        .map(|s| std::fs::File::open(path.join(format::data_file(s))).unwrap())
        .collect();
    for f in &files {
        io::evict(f);
    }
    if !idx
        .iter()
        .any(|&i| reader.record_resident(i) == Some(false))
    {
        return; // the file system keeps its pages: nothing to see
    }
    // The look-ahead finds the records cold and asks for them.
    assert!(store.engine().prefetch(&idx) > 0);
    // Read into the page cache (by the look-ahead's reads, or anything
    // else): a sample of the gather's records is resident now, and still
    // the gather reads directly, as the look-ahead found the store cold.
    for f in &files {
        std::io::copy(&mut &*f, &mut std::io::sink()).unwrap();
    }
    if !idx.iter().all(|&i| reader.record_resident(i) == Some(true)) {
        return; // no room in the page cache
    }
    assert_eq!(store.gather_bytes(&idx).unwrap(), want);
    assert_eq!(counted(store.engine()).0, 1, "read directly");
    // Once the look-ahead finds the records ahead warm, gathers map again.
    std::thread::sleep(std::time::Duration::from_millis(3));
    assert_eq!(store.engine().prefetch(&idx), 0);
    std::thread::sleep(std::time::Duration::from_millis(3));
    assert_eq!(store.gather_bytes(&idx).unwrap(), want);
    assert_eq!(counted(store.engine()).0, 1, "a warm store is mapped");
}

type SmallCase = (Codec, usize, usize, usize, Vec<u64>, (bool, bool, bool));

/// A store's shape, a gather, and how it is read: `pread` forced, through
/// the page cache, and read ahead first by the look-ahead.
fn small_case() -> impl Strategy<Value = SmallCase> {
    (
        prop_oneof![Just(Codec::Raw), Just(Codec::Zstd)],
        prop::sample::select(vec![1usize, 3, 64, 777, 4096, 9000]),
        1usize..300,
        1usize..=4,
        (any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_flat_map(|(codec, width, n, shards, way)| {
            (
                Just(codec),
                Just(width),
                Just(n),
                Just(shards),
                prop::collection::vec(0..n as u64, 0..200),
                Just(way),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn direct_and_mapped_gathers_agree(
        (codec, width, n, shards, idx, (pread, buffered, ahead)) in small_case()
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        dense(&path, codec, width, n, shards);
        let mapped = DynDense::open(&path).unwrap().with_read_mode(ReadMode::Mapped);
        let direct = DynDense::open(&path).unwrap();
        set_way(direct.engine(), (ReadMode::Direct, pread, buffered));
        if ahead {
            direct.engine().prefetch(&idx);
        }
        prop_assert_eq!(direct.gather_bytes(&idx).unwrap(), mapped.gather_bytes(&idx).unwrap());
        let rpath = dir.path().join("r");
        ragged(&rpath, codec, n, width, shards);
        let mapped = DynRagged::open(&rpath).unwrap().with_read_mode(ReadMode::Mapped);
        let direct = DynRagged::open(&rpath).unwrap();
        set_way(direct.engine(), (ReadMode::Direct, pread, buffered));
        if ahead {
            direct.engine().prefetch(&idx);
        }
        let (a, b) = (direct.gather(&idx).unwrap(), mapped.gather(&idx).unwrap());
        prop_assert_eq!(a.layout(), b.layout());
        for k in 0..idx.len() {
            prop_assert_eq!(a.bytes(k), b.bytes(k));
        }
    }
}

#[test]
fn the_look_ahead_reads_records_into_memory_and_each_gather_takes_them_once() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        for pread in [false, true] {
            let n = 500;
            let dpath = dir.path().join(format!("d-{codec:?}-{pread}"));
            let drecs = dense(&dpath, codec, 3000, n, 3);
            let rpath = dir.path().join(format!("r-{codec:?}-{pread}"));
            let rrecs = ragged(&rpath, codec, n, 5000, 2);
            let d = DynDense::open(&dpath).unwrap();
            let r = DynRagged::open(&rpath).unwrap();
            set_way(d.engine(), (ReadMode::Direct, pread, false));
            set_way(r.engine(), (ReadMode::Direct, pread, false));
            if !o_direct_here(d.engine()) {
                return; // a file system without O_DIRECT: the page cache path
            }
            // Two steps drawing the same records (one twice within a step).
            let mut idx: Vec<u64> = (0..60u64).map(|k| (k * 7919) % n as u64).collect();
            idx.push(idx[0]);
            let unique = {
                let mut u = idx.clone();
                u.sort_unstable();
                u.dedup();
                u.len() as u64
            };
            let bytes = 3000 * unique;
            for step in 0..2 {
                // Stored bytes: the records' own for raw ones.
                let asked = d.engine().prefetch(&idx);
                assert!(asked > 0 && asked <= bytes, "step {step}");
                if codec == Codec::Raw {
                    assert_eq!(asked, bytes, "step {step}");
                }
                r.engine().prefetch(&idx);
            }
            // Read once, served to both steps' gathers without a read.
            let want = records_of(&drecs, &idx);
            for step in 0..2u64 {
                assert_eq!(d.gather_bytes(&idx).unwrap(), want, "{codec:?} {step}");
                check_ragged_once(&r, &idx, &rrecs, step);
                assert_eq!(
                    ahead_counted(d.engine()),
                    (unique, unique * (step + 1), 0),
                    "{codec:?} pread={pread}"
                );
            }
            // Both uses taken: a third gather reads for itself.
            assert_eq!(d.gather_bytes(&idx).unwrap(), want);
            assert_eq!(ahead_counted(d.engine()).2, unique);
            let (a, h, o) = ahead_counted(r.engine());
            assert_eq!((a, h, o), (unique, 2 * unique, 0), "{codec:?} ragged");
            // What a stopping loader leaves behind is dropped.
            d.engine().prefetch(&idx);
            crate::engine::finish_look_ahead();
            d.engine().forget_ahead();
            assert_eq!(d.gather_bytes(&idx).unwrap(), want);
            assert_eq!(ahead_counted(d.engine()).2, 2 * unique, "forgotten");
        }
    }
}

/// Gathers of 2 MiB or more read into huge-page buffers in 1 MiB pieces:
/// runs of adjacent records longer than a piece (and records not on the
/// alignment) come back whole, read by the gathers and by the look-ahead,
/// raw and compressed, by io_uring and by the `pread` pool.
#[test]
fn gathers_of_megabytes_read_in_pieces_return_the_records_written() {
    let dir = tempfile::tempdir().unwrap();
    // 100 000-byte records: offsets off any alignment; 64 of them, 6.1 MB.
    let (width, n) = (100_000, 64);
    for codec in [Codec::Raw, Codec::Zstd] {
        let path = dir.path().join(format!("big-{codec:?}"));
        let recs = dense(&path, codec, width, n, 2);
        let store = DynDense::open(&path).unwrap();
        let adjacent: Vec<u64> = (3..n as u64 - 2).collect();
        let scattered: Vec<u64> = (0..40u64).map(|k| (k * 37) % n as u64).collect();
        for pread in [false, true] {
            set_way(store.engine(), (ReadMode::Direct, pread, false));
            let direct = o_direct_here(store.engine());
            for idx in [&adjacent, &scattered] {
                let want = records_of(&recs, idx);
                let before = counted(store.engine()).3;
                assert_eq!(store.gather_bytes(idx).unwrap(), want, "{codec:?} {pread}");
                if direct {
                    assert!(counted(store.engine()).3 > before, "read O_DIRECT");
                    // Ahead of the gather: read once into memory, then taken.
                    let (a, h, o) = ahead_counted(store.engine());
                    assert!(store.engine().prefetch(idx) > 0);
                    crate::engine::finish_look_ahead();
                    assert_eq!(store.gather_bytes(idx).unwrap(), want, "{codec:?} ahead");
                    let k = idx.len() as u64; // distinct records
                    assert_eq!(ahead_counted(store.engine()), (a + k, h + k, o));
                }
            }
        }
    }
}

/// Checks one Ragged gather of `idx` (per record) returns the records
/// written.
fn check_ragged_once(store: &DynRagged, idx: &[u64], recs: &[Vec<u8>], step: u64) {
    let b = store.gather(idx).unwrap();
    for (k, &i) in idx.iter().enumerate() {
        assert_eq!(b.bytes(k), &recs[i as usize][..], "step {step}: record {i}");
    }
}

#[test]
fn gathers_wait_for_records_the_look_ahead_is_reading_on_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let n = 3000;
    let recs = dense(&path, Codec::Raw, 4096, n, 4);
    let store = DynDense::open(&path)
        .unwrap()
        .with_read_mode(ReadMode::Direct);
    if !o_direct_here(store.engine()) {
        return;
    }
    let steps: Vec<Vec<u64>> = (0..40u64)
        .map(|s| {
            (0..64u64)
                .map(|k| (k * 7919 + s * 104_729) % n as u64)
                .collect()
        })
        .collect();
    std::thread::scope(|scope| {
        // The look-ahead: every step, then what it has in flight.
        let (store, steps) = (&store, &steps);
        scope.spawn(move || {
            for idx in steps {
                store.engine().prefetch(idx);
            }
            crate::engine::finish_look_ahead();
        });
        for idx in steps {
            assert_eq!(store.gather_bytes(idx).unwrap(), records_of(&recs, idx));
        }
    });
    // Every gathered record was read once: by the look-ahead, or by its
    // gather (one that came first).
    let (_, hits, own) = ahead_counted(store.engine());
    let gathered: u64 = steps.iter().map(|s| s.len() as u64).sum();
    assert_eq!(hits + own, gathered);
}

#[test]
fn a_loader_reads_a_direct_store_ahead_once_and_delivers_the_same_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let n = 4000;
    dense(&path, Codec::Raw, 1024, n, 4);
    let batches = |mode: ReadMode| -> (Vec<Vec<u8>>, std::sync::Arc<crate::Store>) {
        let store = std::sync::Arc::new(crate::Store::Dense(DynDense::open(&path).unwrap()));
        let loader = crate::DataLoader::builder()
            .stream("x", std::sync::Arc::clone(&store))
            .batch_size(100)
            .seed(3)
            .epochs(2)
            .workers(2)
            .read_mode(mode)
            .build()
            .unwrap();
        let out = loader
            .map(|b| b.unwrap().column("x").unwrap().bytes().to_vec())
            .collect();
        (out, store)
    };
    let (mapped, _) = batches(ReadMode::Mapped);
    let (direct, store) = batches(ReadMode::Direct);
    assert_eq!(mapped.len(), 80);
    assert_eq!(direct, mapped);
    if o_direct_here(store.engine()) {
        // A finite loader's look-ahead reads only what its gathers take, and
        // nothing twice: every record gathered was read once, ahead or by
        // its own gather.
        let (ahead, hits, own) = ahead_counted(store.engine());
        assert!(ahead > 0, "read ahead");
        assert_eq!(hits + own, 2 * n as u64, "every record of two epochs");
        assert!(
            ahead <= hits,
            "nothing read ahead was left: {ahead} > {hits}"
        );
    }
}
