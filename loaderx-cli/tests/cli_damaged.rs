//! `loaderx verify` and `loaderx digest` on damaged stores, under a 3 GiB
//! address-space limit (`prlimit --as`): each prints one clean error line
//! and exits non-zero, never by a signal (an abort, a failed allocation, a
//! stack overflow) and never hanging.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use loaderx_core::format::RecordLoc;
use loaderx_core::{Codec, CreateOptions, DenseWriter, RaggedWriter, train_dict};

const LIMIT: u64 = 3 << 30;

fn patch(file: &Path, at: u64, bytes: &[u8]) {
    let f = fs::OpenOptions::new().write(true).open(file).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

fn dense(path: &Path, codec: Codec) {
    let mut opts = CreateOptions::new(codec).data_shards(2);
    if codec == Codec::ZstdDict {
        let recs: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| (0..64).map(|j| ((i % 11) * 13 + j * 5) as u8).collect())
            .collect();
        opts = opts.dict_bytes(train_dict(&recs).unwrap());
    }
    let mut w = DenseWriter::<u8>::create_with(path, &[64], &opts).unwrap();
    let data: Vec<u8> = (0..64 * 64).map(|i| (i % 251) as u8).collect();
    w.append_slice(&data, 64).unwrap();
    w.close().unwrap();
}

fn ragged(path: &Path, codec: Codec) {
    let opts = CreateOptions::new(codec).data_shards(1);
    let mut w = RaggedWriter::<u16>::create_with(path, 1, &opts).unwrap();
    w.append((0..64u16).map(|i| vec![i; 1 + i as usize % 9]))
        .unwrap();
    w.close().unwrap();
}

fn set_loc(store: &Path, index: u64, loc: RecordLoc) {
    patch(&store.join("meta.zr"), 4096 + 16 * index, &loc.encode());
}

fn loc(store: &Path, index: u64) -> RecordLoc {
    let mut b = [0u8; 16];
    fs::File::open(store.join("meta.zr"))
        .unwrap()
        .read_exact_at(&mut b, 4096 + 16 * index)
        .unwrap();
    RecordLoc::decode(&b)
}

/// Builds or damages the store at a path.
type Step = fn(&Path);

/// Damaged stores of every class: what is damaged, how it was built, how.
fn cases() -> Vec<(&'static str, Step, Step)> {
    let d_raw: Step = |p| dense(p, Codec::Raw);
    let d_zstd: Step = |p| dense(p, Codec::Zstd);
    let d_dict: Step = |p| dense(p, Codec::ZstdDict);
    let r_zstd: Step = |p| ragged(p, Codec::Zstd);
    let r_raw: Step = |p| ragged(p, Codec::Raw);
    vec![
        ("meta.zr truncated", d_raw, |p| {
            fs::OpenOptions::new()
                .write(true)
                .open(p.join("meta.zr"))
                .unwrap()
                .set_len(100)
                .unwrap()
        }),
        ("never published", d_zstd, |p| {
            patch(&p.join("meta.zr"), 0, &[0; 4096])
        }),
        ("2^62 records claimed", r_raw, |p| {
            patch(&p.join("meta.zr"), 0, &(1u64 << 62).to_le_bytes())
        }),
        ("schema garbage", d_raw, |p| {
            patch(&p.join("meta.zr"), 2056, &[0xc1; 64])
        }),
        ("payload shard missing", d_zstd, |p| {
            fs::remove_file(p.join("data_1.zr")).unwrap()
        }),
        ("payload shard truncated", r_zstd, |p| {
            fs::OpenOptions::new()
                .write(true)
                .open(p.join("data_0.zr"))
                .unwrap()
                .set_len(10)
                .unwrap()
        }),
        ("dictionary truncated to 64 bytes", d_dict, |p| {
            let d = fs::read(p.join("dict.zr")).unwrap();
            fs::write(p.join("dict.zr"), &d[..64]).unwrap();
        }),
        ("dictionary is a FIFO", d_dict, |p| {
            fs::remove_file(p.join("dict.zr")).unwrap();
            assert!(
                Command::new("mkfifo")
                    .arg(p.join("dict.zr"))
                    .status()
                    .unwrap()
                    .success()
            );
        }),
        ("dictionary is a sparse 64 GiB file", d_dict, |p| {
            fs::OpenOptions::new()
                .write(true)
                .open(p.join("dict.zr"))
                .unwrap()
                .set_len(64 << 30)
                .unwrap()
        }),
        ("frames forged to claim 2 GiB each", r_zstd, |p| {
            // Magic, single-segment descriptor with an 8-byte content size,
            // then one empty last raw block: 16 bytes that "hold" 2 GiB.
            let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0xE0];
            frame.extend_from_slice(&((1u64 << 31) - 8).to_le_bytes());
            frame.extend_from_slice(&[1, 0, 0]);
            let shard = p.join("data_0.zr");
            let at = fs::metadata(&shard).unwrap().len();
            patch(&shard, at, &frame);
            patch(&p.join("meta.zr"), 16, &(at + 16).to_le_bytes());
            for i in 0..64 {
                set_loc(
                    p,
                    i,
                    RecordLoc {
                        offset: at,
                        phys_length: 16,
                        logic_length: (1 << 31) - 8,
                    },
                );
            }
        }),
        ("raw locations claiming 2 GiB", r_raw, |p| {
            for i in 0..64 {
                let l = loc(p, i);
                set_loc(
                    p,
                    i,
                    RecordLoc {
                        logic_length: 1 << 31,
                        ..l
                    },
                );
            }
        }),
        ("zstd payload bytes overwritten", d_zstd, |p| {
            let l = loc(p, 5);
            patch(&p.join("data_1.zr"), l.offset, &[0xff; 8]);
        }),
        ("ragged shape header wrong", r_raw, |p| {
            let l = loc(p, 3);
            patch(&p.join("data_0.zr"), l.offset, &u64::MAX.to_le_bytes());
        }),
    ]
}

#[test]
fn verify_and_digest_fail_cleanly_on_every_damaged_store() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (what, build, damage)) in cases().into_iter().enumerate() {
        let store = dir.path().join(format!("s{i}"));
        build(&store);
        damage(&store);
        for command in ["verify", "digest"] {
            let started = Instant::now();
            let mut child = Command::new("prlimit")
                .arg(format!("--as={LIMIT}"))
                .arg(env!("CARGO_BIN_EXE_loaderx"))
                .arg(command)
                .arg(&store)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            while child.try_wait().unwrap().is_none() {
                if started.elapsed() > Duration::from_secs(60) {
                    let _ = child.kill();
                    panic!("{what}: loaderx {command} still running after 60 s");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let code = out.status.code();
            assert!(
                code.is_some_and(|c| c != 0),
                "{what}: loaderx {command} ended with {:?}\n{stderr}",
                out.status
            );
            assert_eq!(
                stderr.trim_end().lines().count(),
                1,
                "{what}: {command}: {stderr}"
            );
            assert!(
                stderr.starts_with("loaderx: "),
                "{what}: {command}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{what}: {command}: {stderr}");
        }
    }
}
