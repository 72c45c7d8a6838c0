//! Locking and concurrency: a live writer makes its store busy (in this
//! process and in another), a fork does not keep a writer's lock alive,
//! threads share one reader, and processes read one store at once.
//!
//! The tests that need a second process re-execute this test binary with
//! one `#[ignore]`d child test selected; the children do nothing unless
//! `LOADERX_CHILD_STORE` is set.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use loaderx_core::DigestBuilder;
use loaderx_core::{
    Codec, Dense, DenseWriter, DynDense, DynRagged, ErrorKind, Ragged, RaggedWriter, Store, digest,
};
use support::*;

// ---------------------------------------------------------------------------
// Locking.
// ---------------------------------------------------------------------------

#[test]
fn a_live_writer_makes_its_store_busy() {
    let dir = tempfile::tempdir().unwrap();

    let dense = dir.path().join("dense");
    let mut w =
        DenseWriter::<u32>::create_with(&dense, &[WIDTH], &options(Codec::Zstd, 2)).unwrap();
    assert_err!(Store::open(&dense), ErrorKind::Busy { path } if *path == dense);
    w.append(&dense_batch(0..10, WIDTH)).unwrap();
    assert_err!(Store::open(&dense), ErrorKind::Busy { .. });
    assert_err!(Dense::<u32>::open(&dense), ErrorKind::Busy { .. });
    assert_err!(DynDense::open(&dense), ErrorKind::Busy { .. });
    w.close().unwrap();

    let ragged = dir.path().join("ragged");
    let mut w = RaggedWriter::<u16>::create_with(&ragged, 1, &options(Codec::Raw, 3)).unwrap();
    w.append((0..10).map(ragged_record)).unwrap();
    assert_err!(Ragged::<u16>::open(&ragged), ErrorKind::Busy { .. });
    assert_err!(DynRagged::open(&ragged), ErrorKind::Busy { .. });
    w.close().unwrap();

    // After close, any number of readers at once.
    let a = Store::open(&dense).unwrap();
    let b = Dense::<u32>::open(&dense).unwrap();
    let c = DynDense::open(&dense).unwrap();
    assert_eq!(
        digest(&a).unwrap(),
        digest(&Store::open(&dense).unwrap()).unwrap()
    );
    assert_eq!(
        b.gather(&[9]).unwrap(),
        dense_batch(9..10, WIDTH).into_dyn()
    );
    assert_eq!(c.len(), 10);
    let r1 = Ragged::<u16>::open(&ragged).unwrap();
    let r2 = Ragged::<u16>::open(&ragged).unwrap();
    assert_eq!(
        r1.gather(&[7]).unwrap().data(0),
        r2.gather(&[7]).unwrap().data(0)
    );
}

/// How long the forked child of the next test keeps our descriptors before `exec`.
const FORK_HOLD: Duration = Duration::from_millis(1500);

#[test]
fn a_writer_releases_its_lock_while_a_fork_holds_its_descriptors() {
    use std::os::unix::process::CommandExt;

    let dir = tempfile::tempdir().unwrap();
    let dropped = dir.path().join("dropped");
    let closed = dir.path().join("closed");
    let mut wd =
        DenseWriter::<u32>::create_with(&dropped, &[WIDTH], &options(Codec::Raw, 1)).unwrap();
    let mut wc =
        DenseWriter::<u32>::create_with(&closed, &[WIDTH], &options(Codec::Zstd, 2)).unwrap();
    wd.append(&dense_batch(0..10, WIDTH)).unwrap();
    wc.append(&dense_batch(0..10, WIDTH)).unwrap();

    // A child forked now shares every open file description of this process
    // (the writers' locked meta.zr included) until it execs, as any
    // `Command::spawn` on another thread does for a moment; this one lingers.
    let spawner = std::thread::spawn(|| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child_reader_process", "--ignored", "-q"])
            .env_remove(CHILD_STORE_ENV)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: the hook runs in the forked child before exec and only
        // sleeps (nanosleep is async-signal-safe; it takes no lock and does
        // not allocate).
        unsafe {
            cmd.pre_exec(|| {
                std::thread::sleep(FORK_HOLD);
                Ok(())
            });
        }
        cmd.status().unwrap()
    });
    std::thread::sleep(FORK_HOLD / 5);

    // Dropping or closing a writer must release its lock at once all the same.
    drop(wd);
    wc.close().unwrap();
    assert_err!(Store::open(&dropped), ErrorKind::NotPublished { .. });
    assert_eq!(Dense::<u32>::open(&closed).unwrap().len(), 10);
    assert!(spawner.join().unwrap().success());
}

// ---------------------------------------------------------------------------
// Concurrency.
// ---------------------------------------------------------------------------

const THREADS: u64 = 8;

#[test]
fn threads_share_one_dense_reader() {
    const N: u64 = 4096;
    const W: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense");
    build_dense(&path, Codec::Zstd, N, W, 4);
    let reader = Dense::<u32>::open(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let reader = &reader;
            s.spawn(move || {
                let mut state = 0x2545_F491_4F6C_DD1D ^ (t + 1);
                let mut buf = Vec::new();
                for round in 0..12 {
                    // Up to 2048 records of 256 bytes: large gathers go parallel.
                    let idx = random_indices(&mut state, N, 2048);
                    let batch = reader.gather(&idx).unwrap();
                    assert_eq!(batch.shape(), &[idx.len(), W]);
                    for (row, &i) in batch.outer_iter().zip(&idx) {
                        for (j, &v) in row.iter().enumerate() {
                            assert_eq!(v, dense_value(i, j), "thread {t} round {round} record {i}");
                        }
                    }
                    buf.resize(idx.len() * W, 0);
                    reader.gather_into(&idx, &mut buf).unwrap();
                    assert_eq!(buf, batch.into_raw_vec_and_offset().0);
                }
            });
        }
    });
}

#[test]
fn threads_share_one_ragged_reader() {
    const N: u64 = 3000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ragged");
    let mut w = RaggedWriter::<u16>::create_with(&path, 1, &options(Codec::ZstdDict, 5)).unwrap();
    let long = |i: u64| -> Vec<u16> {
        let len = 1 + (i * 37 % 200) as usize;
        (0..len)
            .map(|j| (i as u16) ^ (j as u16).rotate_left(5))
            .collect()
    };
    w.append((0..N).map(long)).unwrap();
    w.close().unwrap();
    let reader = Ragged::<u16>::open(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let reader = &reader;
            let long = &long;
            s.spawn(move || {
                let mut state = 0x9E37_79B9_7F4A_7C15 ^ (t + 1);
                for _ in 0..12 {
                    let idx = random_indices(&mut state, N, 2048);
                    let batch = reader.gather(&idx).unwrap();
                    assert_eq!(batch.len(), idx.len());
                    for (k, &i) in idx.iter().enumerate() {
                        let expect = long(i);
                        assert_eq!(batch.shape(k), &[expect.len()]);
                        assert_eq!(batch.data(k), &expect[..], "thread {t} record {i}");
                    }
                }
            });
        }
    });
}

/// The digest every reader of the cross-process store must print.
fn cross_process_expected_digest() -> loaderx_core::StoreDigest {
    let mut d = DigestBuilder::new();
    let batch = dense_batch(0..CROSS_RECORDS, 64);
    for row in batch.outer_iter() {
        let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        d.push(&[64], &bytes);
    }
    d.finish()
}

const CROSS_RECORDS: u64 = 2048;

#[test]
fn a_second_process_reads_while_this_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared");
    build_dense(&path, Codec::Zstd, CROSS_RECORDS, 64, 4);
    let expected = cross_process_expected_digest();

    // Held open (with its shared lock) until the child has finished.
    let store = Store::open(&path).unwrap();
    let mut child = ChildTest::spawn("child_reader_process", &path);
    let ours = digest(&store).unwrap();
    let line = child.wait_for(DIGEST_PREFIX);
    let status = child.wait();
    let stderr = child.stderr();
    assert!(
        status.success(),
        "child reader failed: {status:?}\n{stderr}"
    );
    let line = line.unwrap_or_else(|| panic!("child printed no digest\n{stderr}"));
    let theirs = &line[line.find(DIGEST_PREFIX).unwrap() + DIGEST_PREFIX.len()..];
    assert_eq!(ours, expected);
    assert_eq!(theirs.trim(), expected.to_string());
    drop(store);
}

/// Child of `a_second_process_reads_while_this_one_does`: digests the store
/// and checks it against the expected contents.
#[test]
#[ignore = "child process, run by a_second_process_reads_while_this_one_does"]
fn child_reader_process() {
    let Some(path) = std::env::var_os(CHILD_STORE_ENV) else {
        return;
    };
    let store = Store::open(&path).unwrap();
    let d = digest(&store).unwrap();
    assert_eq!(d, cross_process_expected_digest());
    println!("{DIGEST_PREFIX}{d}");
    std::io::stdout().flush().unwrap();
}

#[test]
fn readers_open_and_close_while_others_gather() {
    const N: u64 = 2048;
    const W: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense");
    build_dense(&path, Codec::ZstdDict, N, W, 3);
    let shared = Dense::<u32>::open(&path).unwrap();
    let expected = open_and_digest(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let shared = &shared;
            s.spawn(move || {
                let mut state = 0x51_7CC1_B727_220A ^ (t + 1);
                for _ in 0..40 {
                    let idx = random_indices(&mut state, N, 512);
                    let batch = shared.gather(&idx).unwrap();
                    for (row, &i) in batch.outer_iter().zip(&idx) {
                        assert_eq!(row[W - 1], dense_value(i, W - 1));
                    }
                }
            });
        }
        for t in 0..3u64 {
            let path = &path;
            let expected = &expected;
            s.spawn(move || {
                let mut state = 0x3C6E_F372_FE94_F82B ^ (t + 1);
                for round in 0..25 {
                    let store = Store::open(path).unwrap();
                    if round % 5 == 0 {
                        assert_eq!(&digest(&store).unwrap(), expected);
                    } else if let Store::Dense(d) = &store {
                        let idx = random_indices(&mut state, N, 64);
                        assert_eq!(d.gather_bytes(&idx).unwrap().len(), idx.len() * W * 4);
                    }
                    drop(store);
                }
            });
        }
    });
}

#[test]
fn a_writer_in_another_process_excludes_readers_and_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held");
    let mut child = ChildTest::spawn("child_holding_writer", &path);
    if child.wait_for(APPENDED).is_none() {
        let _ = child.kill();
        panic!("the child writer never appended: {}", child.stderr());
    }
    assert_err!(Store::open(&path), ErrorKind::Busy { path: p } if *p == path);
    assert_err!(Dense::<u32>::open(&path), ErrorKind::Busy { .. });
    assert_err!(
        DenseWriter::<u32>::create(&path, &[WIDTH], Codec::Raw),
        ErrorKind::AlreadyExists { .. }
    );
    // Its published neighbour stays readable by both processes meanwhile.
    let other = dir.path().join("other");
    build_dense(&other, Codec::Raw, RECORDS, WIDTH, 2);
    assert_eq!(Dense::<u32>::open(&other).unwrap().len(), RECORDS);
    let status = child.kill();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    // The lock dies with the process; what is left is not published.
    assert_err!(Store::open(&path), ErrorKind::NotPublished { .. });
}

/// Child of `a_writer_in_another_process_excludes_readers_and_writers`:
/// creates a store, appends once and holds the writer open until killed.
#[test]
#[ignore = "child process, run by a_writer_in_another_process_excludes_readers_and_writers"]
fn child_holding_writer() {
    let Some(path) = std::env::var_os(CHILD_STORE_ENV) else {
        return;
    };
    let mut w = DenseWriter::<u32>::create_with(&path, &[WIDTH], &options(Codec::Zstd, 2)).unwrap();
    w.append(&dense_batch(0..100, WIDTH)).unwrap();
    println!("{APPENDED}");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(30));
    drop(w);
}
