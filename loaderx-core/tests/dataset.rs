//! Multi-part datasets: parts written by separate writers, merged into a
//! manifest, read as one sequence of records equal to a single store's;
//! merges that extend; and bad input — a part of another schema, an
//! unpublished part, a gap, a manifest that lies, a part missing after
//! merge, racing merges — each a clear error with nothing half-written.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use loaderx_core::{
    Codec, DataLoader, Dataset, DenseWriter, ErrorKind, MANIFEST_FILE, RaggedWriter, Store, digest,
};

/// Part `index` of a dataset of `records` records in total, written as
/// writer `index` of `parts` would: streams `x` (Dense u32 [2]) and `t`
/// (Ragged u16).
fn write_part(dir: &Path, records: u64, index: u64, parts: u64) {
    let range = Dataset::part_range(records, index, parts);
    let part = dir.join(Dataset::part_name(index));
    write_stores(&part, range);
}

fn write_stores(dir: &Path, range: std::ops::Range<u64>) {
    let n = (range.end - range.start) as usize;
    let mut w = DenseWriter::<u32>::create(dir.join("x"), &[2], Codec::Zstd).unwrap();
    let flat: Vec<u32> = range.clone().flat_map(|i| [i as u32, 7]).collect();
    if n > 0 {
        w.append_slice(&flat, n).unwrap();
    }
    w.close().unwrap();
    let mut w = RaggedWriter::<u16>::create(dir.join("t"), 1, Codec::Raw).unwrap();
    if n > 0 {
        w.append(range.map(|i| vec![i as u16; 1 + (i % 5) as usize]))
            .unwrap();
    }
    w.close().unwrap();
}

#[test]
fn parts_written_apart_read_as_the_one_store_of_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    // Four writers on four threads, at once.
    std::thread::scope(|s| {
        for i in 0..4 {
            let ds = ds.clone();
            s.spawn(move || write_part(&ds, 1001, i, 4));
        }
    });
    let merged = Dataset::merge(&ds, Some(4)).unwrap();
    assert_eq!(merged.len(), 1001);
    assert_eq!(merged.part_starts(), [0, 250, 500, 750, 1001]);
    write_stores(&dir.path().join("one"), 0..1001);
    let dataset = Dataset::open(&ds).unwrap();
    assert_eq!(dataset.stream_names(), ["t", "x"]);
    for (name, stream) in dataset.streams() {
        let one = Store::open(dir.path().join("one").join(name)).unwrap();
        assert_eq!(digest(stream).unwrap(), digest(&one).unwrap(), "{name}");
    }
    // A loader over the dataset's streams, as over one store's.
    let batches = |streams: Vec<(String, Store)>| {
        let mut b = DataLoader::builder()
            .batch_size(100)
            .seed(2)
            .drop_last(false)
            .epochs(1);
        for (n, s) in streams {
            b = b.stream(n, s);
        }
        b.build()
            .unwrap()
            .map(|b| {
                let b = b.unwrap();
                (
                    b.column("x").unwrap().bytes().to_vec(),
                    b.column("t").unwrap().bytes().to_vec(),
                )
            })
            .collect::<Vec<_>>()
    };
    let one = Store::open_dir(dir.path().join("one")).unwrap();
    assert_eq!(batches(dataset.into_streams()), batches(one));
}

#[test]
fn merging_again_extends_the_dataset_and_keeps_every_record_id() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        write_part(dir.path(), 300, i, 3);
    }
    let first = Dataset::merge(dir.path(), None).unwrap();
    let before = first.streams()[1]
        .1
        .as_dense()
        .unwrap()
        .gather_bytes(&[0, 150, 299])
        .unwrap();
    // A fourth part, records 300..400.
    write_stores(&dir.path().join(Dataset::part_name(3)), 300..400);
    let extended = Dataset::merge(dir.path(), None).unwrap();
    assert_eq!(extended.len(), 400);
    let x = extended.streams()[1].1.as_dense().unwrap();
    assert_eq!(x.gather_bytes(&[0, 150, 299]).unwrap(), before);
    assert_eq!(
        x.gather_bytes(&[399]).unwrap(),
        [399u32, 7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
    // A merged part that changed: refused, the manifest untouched.
    let manifest = std::fs::read(dir.path().join(MANIFEST_FILE)).unwrap();
    std::fs::remove_dir_all(dir.path().join(Dataset::part_name(1))).unwrap();
    write_stores(&dir.path().join(Dataset::part_name(1)), 100..150);
    let err = Dataset::merge(dir.path(), None).unwrap_err();
    assert!(err.to_string().contains("changed"), "{err}");
    assert_eq!(
        std::fs::read(dir.path().join(MANIFEST_FILE)).unwrap(),
        manifest
    );
    // Opening it now: the part holds fewer records than the manifest says.
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("the manifest says 100"), "{err}");
}

#[test]
fn bad_parts_are_refused_by_merge_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_part(root, 100, 0, 2);
    // A part of another schema: x is u16 there.
    let other = root.join(Dataset::part_name(1));
    let mut w = DenseWriter::<u16>::create(other.join("x"), &[2], Codec::Raw).unwrap();
    w.append_slice(&[1, 2], 1).unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<u16>::create(other.join("t"), 1, Codec::Raw).unwrap();
    w.append([vec![1u16]]).unwrap();
    w.close().unwrap();
    let err = Dataset::merge(root, None).unwrap_err();
    assert!(
        err.to_string().contains("part-00001") && err.to_string().contains("uint16"),
        "{err}"
    );
    assert!(!root.join(MANIFEST_FILE).exists());
    std::fs::remove_dir_all(&other).unwrap();
    // An unpublished part: its writer is still open.
    let mut open = DenseWriter::<u32>::create(other.join("x"), &[2], Codec::Raw).unwrap();
    open.append_slice(&[1, 2], 1).unwrap();
    let err = Dataset::merge(root, None).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Busy { .. } | ErrorKind::NotPublished { .. }
        ),
        "{err}"
    );
    assert!(!root.join(MANIFEST_FILE).exists());
    drop(open);
    std::fs::remove_dir_all(&other).unwrap();
    // A gap: parts 0 and 2.
    write_part(root, 100, 2, 3);
    let err = Dataset::merge(root, None).unwrap_err();
    assert!(err.to_string().contains("part-00001 is missing"), "{err}");
    std::fs::remove_dir_all(root.join(Dataset::part_name(2))).unwrap();
    // Fewer parts than the writers' count.
    let err = Dataset::merge(root, Some(2)).unwrap_err();
    assert!(
        err.to_string().contains("1 parts found, 2 expected"),
        "{err}"
    );
    // Streams of different lengths in one part.
    let odd = root.join(Dataset::part_name(1));
    write_stores(&odd, 0..3);
    std::fs::remove_dir_all(odd.join("t")).unwrap();
    let mut w = RaggedWriter::<u16>::create(odd.join("t"), 1, Codec::Raw).unwrap();
    w.append([vec![1u16]]).unwrap();
    w.close().unwrap();
    let err = Dataset::merge(root, None).unwrap_err();
    assert!(
        err.to_string().contains("holds 3 records, stream \"t\" 1"),
        "{err}"
    );
    assert!(!root.join(MANIFEST_FILE).exists());
}

#[test]
fn racing_merges_one_wins_the_other_is_busy_and_the_manifest_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        write_part(dir.path(), 90, i, 3);
    }
    // Another merge holding the lock: this one is refused as busy.
    let lock = std::fs::File::create(dir.path().join(".dataset.lock")).unwrap();
    lock.lock().unwrap();
    let err = Dataset::merge(dir.path(), None).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Busy { .. }), "{err}");
    assert!(!dir.path().join(MANIFEST_FILE).exists());
    drop(lock);
    // Eight at once: each succeeds or is busy; what is left opens.
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Dataset::merge(dir.path(), None).map(|d| d.len())))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.iter().any(|r| matches!(r, Ok(90))));
    for r in &results {
        assert!(
            matches!(r, Ok(90)) || matches!(r.as_ref().unwrap_err().kind(), ErrorKind::Busy { .. }),
            "{r:?}"
        );
    }
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 90);
}

#[test]
fn a_manifest_that_lies_or_a_missing_part_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2 {
        write_part(dir.path(), 50, i, 2);
    }
    Dataset::merge(dir.path(), None).unwrap();
    let path = dir.path().join(MANIFEST_FILE);
    let good = std::fs::read_to_string(&path).unwrap();
    for (bad, why) in [
        (
            good.replace("\"records\": 50", "\"records\": 51"),
            "its parts hold 50",
        ),
        (
            good.replacen("\"records\": 25", "\"records\": 24", 1),
            "its parts hold 49",
        ),
        (
            good.replace("\"loaderx_dataset\": 1", "\"loaderx_dataset\": 2"),
            "version 2",
        ),
        (good.replace("part-00001", "../../etc"), "not part-00001"),
        (
            good.replace("\"name\": \"x\"", "\"name\": \"../x\""),
            "plain path component",
        ),
        (
            good.replace("\"dtype\": \"uint32\"", "\"dtype\": \"uint33\""),
            "unknown dtype",
        ),
        (
            good.replace("\"records\": 50", "\"records\": 50, \"extra\": 1"),
            "unknown field",
        ),
        ("{".to_owned(), "not a dataset manifest"),
    ] {
        std::fs::write(&path, &bad).unwrap();
        let err = Dataset::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains(why), "{why}: {err}");
    }
    // A manifest whose lengths agree with each other but not the parts.
    let lying = good.replace("\"records\": 50", "\"records\": 52").replacen(
        "\"records\": 25",
        "\"records\": 27",
        1,
    );
    std::fs::write(&path, lying).unwrap();
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("the manifest says 27"), "{err}");
    std::fs::write(&path, &good).unwrap();
    // A part gone after the merge.
    std::fs::remove_dir_all(dir.path().join(Dataset::part_name(1)).join("t")).unwrap();
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotAStore { .. }), "{err}");
    assert!(err.to_string().contains("part-00001"), "{err}");
}

#[test]
fn a_dataset_of_many_parts_holds_no_descriptor_per_store() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..200 {
        write_part(dir.path(), 400, i, 200);
    }
    Dataset::merge(dir.path(), Some(200)).unwrap();
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let before = fds();
    let dataset = Dataset::open(dir.path()).unwrap();
    let after = fds();
    // 400 stores open: without releasing their locks, 400 descriptors.
    assert!(
        after < before + 20,
        "{before} descriptors before, {after} after"
    );
    assert_eq!(dataset.len(), 400);
    let x = dataset.streams()[1].1.as_dense().unwrap();
    assert_eq!(x.part_starts().len(), 201);
    assert_eq!(
        x.gather_bytes(&[399, 0]).unwrap()[..4],
        399u32.to_le_bytes()
    );
}

/// Part `index` of `parts` at `dir` with the streams `names` (each Dense
/// u32 [2]).
fn write_named(dir: &Path, records: u64, index: u64, parts: u64, names: &[&str]) {
    let range = Dataset::part_range(records, index, parts);
    let part = dir.join(Dataset::part_name(index));
    for name in names {
        let mut w = DenseWriter::<u32>::create(part.join(name), &[2], Codec::Raw).unwrap();
        let flat: Vec<u32> = range.clone().flat_map(|i| [i as u32, 1]).collect();
        w.append_slice(&flat, flat.len() / 2).unwrap();
        w.close().unwrap();
    }
}

#[test]
fn a_stream_name_the_manifest_cannot_hold_is_refused_before_anything_is_written() {
    for bad in ["my col", "caf\u{e9}", "a+b"] {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..2 {
            write_named(dir.path(), 20, i, 2, &["x", bad]);
        }
        let err = Dataset::merge(dir.path(), None).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::InvalidArgument { .. }),
            "{bad:?}: {err}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("{bad:?}"))
                && text.contains("part-00000")
                && text.contains("ASCII letters, digits, '_', '-' and '.'"),
            "{text}"
        );
        // Nothing written: a later merge or open is not spoiled.
        assert!(!dir.path().join(MANIFEST_FILE).exists(), "{bad:?}");
        for i in 0..2 {
            std::fs::remove_dir_all(dir.path().join(Dataset::part_name(i)).join(bad)).unwrap();
        }
        assert_eq!(Dataset::merge(dir.path(), None).unwrap().len(), 20);
    }
    assert!(Dataset::check_stream_name("label_0.v-2").is_ok());
    for bad in ["", ".x", "a/b", "my col", "\u{e9}"] {
        let err = Dataset::check_stream_name(bad).unwrap_err();
        assert!(err.to_string().contains("ASCII letters"), "{err}");
    }
}

#[test]
fn linked_parts_and_streams_are_followed_by_merge_and_open_never_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let disk2 = dir.path().join("disk2");
    write_part(&ds, 90, 0, 3);
    // Part 1 on another disk, linked; part 2's stream `t` too.
    write_part(&disk2, 90, 1, 3);
    std::os::unix::fs::symlink(
        disk2.join(Dataset::part_name(1)),
        ds.join(Dataset::part_name(1)),
    )
    .unwrap();
    let range = Dataset::part_range(90, 2, 3);
    write_stores(&disk2.join("p2"), range);
    let p2 = ds.join(Dataset::part_name(2));
    std::fs::create_dir_all(&p2).unwrap();
    std::fs::rename(disk2.join("p2").join("x"), p2.join("x")).unwrap();
    std::os::unix::fs::symlink(disk2.join("p2").join("t"), p2.join("t")).unwrap();
    let merged = Dataset::merge(&ds, None).unwrap();
    assert_eq!(merged.len(), 90);
    assert_eq!(merged.part_starts(), [0, 30, 60, 90]);
    let opened = Dataset::open(&ds).unwrap();
    write_stores(&dir.path().join("one"), 0..90);
    for (name, stream) in opened.streams() {
        let one = Store::open(dir.path().join("one").join(name)).unwrap();
        assert_eq!(digest(stream).unwrap(), digest(&one).unwrap(), "{name}");
    }
    // A part name that is a dangling link or a file: refused, not skipped.
    std::fs::remove_file(ds.join(MANIFEST_FILE)).unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone"), ds.join(Dataset::part_name(3))).unwrap();
    let err = Dataset::merge(&ds, None).unwrap_err();
    assert!(err.to_string().contains("part-00003"), "{err}");
    std::fs::remove_file(ds.join(Dataset::part_name(3))).unwrap();
    std::fs::write(ds.join(Dataset::part_name(3)), b"not a part").unwrap();
    let err = Dataset::merge(&ds, None).unwrap_err();
    assert!(
        err.to_string().contains("part-00003") && err.to_string().contains("directory"),
        "{err}"
    );
    assert!(!ds.join(MANIFEST_FILE).exists());
}

#[test]
fn directories_in_a_part_that_are_not_stores_are_refused_and_hidden_ones_ignored() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2 {
        write_part(dir.path(), 40, i, 2);
    }
    let part = dir.path().join(Dataset::part_name(1));
    // A crashed writer's staging directory (an unpublished store in it)
    // and a hidden directory: not streams.
    let mut w = DenseWriter::<u32>::create(part.join("probe"), &[2], Codec::Raw).unwrap();
    w.append_slice(&[1, 2], 1).unwrap();
    drop(w);
    std::fs::rename(part.join("probe"), part.join(".x.creating-1-0")).unwrap();
    std::fs::create_dir_all(part.join(".cache/y")).unwrap();
    std::fs::write(part.join("README"), b"a file is not a stream").unwrap();
    assert_eq!(Dataset::merge(dir.path(), None).unwrap().len(), 40);
    // A directory that is no store: refused as on object storage.
    std::fs::create_dir(part.join("notes")).unwrap();
    let err = Dataset::merge(dir.path(), None).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::NotPublished { path } if path.ends_with("part-00001/notes")),
        "{err}"
    );
}

/// The 2.8.18 generation's Ragged `i16` rank-1 store of `records` at
/// `path`: what Python loaderx 2.8.18 writes (`u64` dims as 2.4.6, JSON
/// schema `{"dtype": "int16", "ndim": 1}`).
fn ragged_2_8_18(path: &Path, records: &[Vec<i16>]) {
    let options =
        loaderx_core::CreateOptions::new(Codec::Raw).generation(loaderx_core::Generation::V2_4_6);
    let mut w = RaggedWriter::<i16>::create_with(path, 1, &options).unwrap();
    if !records.is_empty() {
        w.append(records.iter().cloned()).unwrap();
    }
    w.close().unwrap();
    let mut meta = std::fs::read(path.join("meta.zr")).unwrap();
    let schema = br#"{"dtype": "int16", "ndim": 1}"#;
    meta[8..10].copy_from_slice(&(schema.len() as u16).to_le_bytes());
    meta[2056..4096].fill(0);
    meta[2056..2056 + schema.len()].copy_from_slice(schema);
    std::fs::write(path.join("meta.zr"), &meta).unwrap();
}

#[test]
fn an_empty_part_of_the_2_8_18_generation_merges_with_its_siblings() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<i16>> = (0..10).map(|i| vec![i; 1 + i as usize % 3]).collect();
    // Part 0 empty (a writer that got no record), then two full parts.
    ragged_2_8_18(&dir.path().join("part-00000/t"), &[]);
    ragged_2_8_18(&dir.path().join("part-00001/t"), &records[..4]);
    ragged_2_8_18(&dir.path().join("part-00002/t"), &records[4..]);
    let merged = Dataset::merge(dir.path(), None).unwrap();
    assert_eq!(merged.len(), 10);
    let manifest = std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
    assert!(manifest.contains("\"dim_bytes\": 8"), "{manifest}");
    let dataset = Dataset::open(dir.path()).unwrap();
    let (name, t) = &dataset.streams()[0];
    assert_eq!(name, "t");
    assert_eq!(
        t.as_ragged().unwrap().generation(),
        loaderx_core::Generation::V2_8_18
    );
    let one = dir.path().join("one");
    ragged_2_8_18(&one, &records);
    assert_eq!(
        digest(t).unwrap(),
        digest(&Store::open(&one).unwrap()).unwrap()
    );
    // An empty part after them, merged again: the dataset extends.
    ragged_2_8_18(&dir.path().join("part-00003/t"), &[]);
    assert_eq!(Dataset::merge(dir.path(), Some(4)).unwrap().len(), 10);
}

#[test]
fn a_remerge_notices_a_part_rewritten_with_other_records_of_the_same_count() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2 {
        write_part(dir.path(), 50, i, 2);
    }
    Dataset::merge(dir.path(), None).unwrap();
    let path = dir.path().join(MANIFEST_FILE);
    let manifest = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        manifest.matches("\"table_digest\"").count(),
        2,
        "{manifest}"
    );
    // Part 1 rewritten: 25 records again, other ones.
    let part = dir.path().join(Dataset::part_name(1));
    std::fs::remove_dir_all(&part).unwrap();
    write_stores(&part, 26..51);
    let err = Dataset::merge(dir.path(), None).unwrap_err();
    assert!(err.to_string().contains("changed"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), manifest);
    // A manifest written before parts had digests still opens, and a
    // merge over it compares names and lengths, and adds the digests.
    let old: String = manifest
        .lines()
        .filter(|l| !l.contains("table_digest"))
        .map(|l| l.replace("\"records\": 25,", "\"records\": 25") + "\n")
        .collect();
    std::fs::write(&path, &old).unwrap();
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 50);
    Dataset::merge(dir.path(), None).unwrap();
    let new = std::fs::read_to_string(&path).unwrap();
    assert_eq!(new.matches("\"table_digest\"").count(), 2, "{new}");
}

#[test]
fn a_remerge_notices_a_raw_part_rewritten_with_records_of_the_same_lengths() {
    // A Raw Dense store's location table is the same for any records of
    // its count: only its payload tells a rewrite.
    let dir = tempfile::tempdir().unwrap();
    let write = |part: u64, values: std::ops::Range<u32>| {
        let path = dir.path().join(Dataset::part_name(part)).join("x");
        let _ = std::fs::remove_dir_all(&path);
        let mut w = DenseWriter::<u32>::create(&path, &[3], Codec::Raw).unwrap();
        let flat: Vec<u32> = values.flat_map(|v| [v, v + 1, v + 2]).collect();
        w.append_slice(&flat, flat.len() / 3).unwrap();
        w.close().unwrap();
    };
    write(0, 0..40);
    write(1, 40..80);
    Dataset::merge(dir.path(), None).unwrap();
    let path = dir.path().join(MANIFEST_FILE);
    let manifest = std::fs::read_to_string(&path).unwrap();
    // The same records written again: the same digest, the merge passes.
    write(1, 40..80);
    Dataset::merge(dir.path(), None).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), manifest);
    // Other records of the same count and lengths: refused, unchanged.
    write(1, 1000..1040);
    let err = Dataset::merge(dir.path(), None).unwrap_err();
    assert!(err.to_string().contains("changed"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), manifest);
}

/// A manifest of `parts` parts of 0 records and the streams `streams`
/// (Dense uint8 scalars named `s<k>`).
fn big_manifest(parts: usize, streams: impl Iterator<Item = String>) -> String {
    let streams: Vec<String> = streams
        .map(|n| format!(r#"{{"name":"{n}","kind":"dense","dtype":"uint8","item_shape":[]}}"#))
        .collect();
    let parts: Vec<String> = (0..parts as u64)
        .map(|i| format!(r#"{{"name":"{}","records":0}}"#, Dataset::part_name(i)))
        .collect();
    format!(
        r#"{{"loaderx_dataset":1,"records":0,"streams":[{}],"parts":[{}]}}"#,
        streams.join(","),
        parts.join(",")
    )
}

#[test]
fn a_huge_manifest_is_refused_in_linear_time_and_never_sizes_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(MANIFEST_FILE);
    // 10^5 stream names (6 MB), the last one twice: every pair compared
    // took minutes.
    let names = (0..100_000)
        .map(|k| format!("s{k}"))
        .chain(["s99999".to_owned()]);
    std::fs::write(&path, big_manifest(1, names)).unwrap();
    let started = std::time::Instant::now();
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("listed twice"), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // 2·10^5 parts × 2·10^4 streams (9 MB): 4·10^9 stores, which opening
    // reserved up front (and aborted); the first one is missing.
    let names = (0..20_000).map(|k| format!("s{k}"));
    std::fs::write(&path, big_manifest(200_000, names)).unwrap();
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::NotAStore { path } if path.ends_with("part-00000/s0")),
        "{err}"
    );
}
