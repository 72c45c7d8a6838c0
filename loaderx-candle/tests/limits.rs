//! Limits: a batch larger than memory is core's `ErrorKind::Buffer` through
//! candle's staging too, not an abort. The batches run in a child process
//! under an address-space limit (`prlimit --as`), so an infallible
//! allocation aborts the child instead of passing (overcommit would let it
//! pass otherwise). The child is this test binary re-executed with the
//! `#[ignore]`d test selected; it does nothing unless `LOADERX_LIMITS_CHILD`
//! is set.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use candle_core::Device;
use loaderx_candle::{CandleLoaderExt, Error};
use loaderx_core::ndarray::Array2;
use loaderx_core::{
    Codec, CreateOptions, DataLoader, Dense, DenseWriter, ErrorKind, Ragged, RaggedWriter,
    SamplerMode,
};
use tempfile::TempDir;

const CHILD_ENV: &str = "LOADERX_LIMITS_CHILD";
/// The children's address-space limit: far below the 4 GiB batches below.
const CHILD_AS_BYTES: u64 = 2 << 30;

fn run_limited(name: &str, dir: &Path) {
    let out = Command::new("prlimit")
        .arg(format!("--as={CHILD_AS_BYTES}"))
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} under --as={CHILD_AS_BYTES}: {:?}\n{log}",
        out.status
    );
    assert!(log.contains("1 passed"), "{log}");
}

fn child_dir() -> Option<PathBuf> {
    std::env::var_os(CHILD_ENV).map(PathBuf::from)
}

#[test]
fn batches_larger_than_memory_are_buffer_errors_under_an_address_space_limit() {
    let dir = TempDir::new().unwrap();
    // Two records of 16 MiB each, drawn with replacement 256 at a time: a
    // 4 GiB batch from a store of a few KiB (zeros compress to nothing).
    let opts = CreateOptions::new(Codec::Zstd).data_shards(1);
    let mut w = RaggedWriter::<u8>::create_with(dir.path().join("ragged"), 1, &opts).unwrap();
    w.append((0..2).map(|_| vec![0u8; 16 << 20])).unwrap();
    w.close().unwrap();
    let mut w =
        DenseWriter::<u8>::create(dir.path().join("dense"), &[1 << 20], Codec::Zstd).unwrap();
    w.append(&Array2::<u8>::zeros((2, 1 << 20))).unwrap();
    w.close().unwrap();
    run_limited("child_huge_batches", dir.path());
}

fn is_buffer(e: &loaderx_core::Error) -> bool {
    matches!(e.kind(), ErrorKind::Buffer { .. })
}

#[test]
#[ignore = "child of batches_larger_than_memory_are_buffer_errors_under_an_address_space_limit"]
fn child_huge_batches() {
    let Some(dir) = child_dir() else { return };
    let ragged = || Ragged::<u8>::open(dir.join("ragged")).unwrap();
    let dense = || Dense::<u8>::open(dir.join("dense")).unwrap();
    let builder = |stream: &str, batch: usize| {
        let b = DataLoader::builder()
            .batch_size(batch)
            .mode(SamplerMode::Iid)
            .workers(1)
            .prefetch(0);
        match stream {
            "ragged" => b.stream("r", ragged()),
            _ => b.stream("d", dense()),
        }
    };
    // A Ragged batch of 256 × 16 MiB and a Dense one of 4096 × 1 MiB, both
    // through candle's staging (padded, per-record and Dense conversions).
    for (stream, batch) in [("ragged", 256), ("dense", 4096)] {
        let mut loader = builder(stream, batch).build_candle(&Device::Cpu).unwrap();
        let e = loader.next().unwrap().unwrap_err();
        assert!(is_buffer(&e), "{stream}: {e}");
        let mut loader = builder(stream, batch)
            .build_candle_with(&Device::Cpu, |b| Ok::<_, Error>(b.len()))
            .unwrap();
        let e = loader.next().unwrap().unwrap_err();
        assert!(is_buffer(&e), "{stream}: {e}");
    }
    // The same loaders with batches that fit work within the limit.
    let mut loader = builder("ragged", 4).build_candle(&Device::Cpu).unwrap();
    let b = loader.next().unwrap().unwrap();
    assert_eq!(b.len(), 4);
    let mut loader = builder("dense", 8).build_candle(&Device::Cpu).unwrap();
    let b = loader.next().unwrap().unwrap();
    assert_eq!(b.dense("d").unwrap().dims(), &[8, 1 << 20]);
}
