//! The typed staging hands candle its own buffers: a Dense batch in
//! candle's element type becomes the tensor's storage with no copy, and
//! every copy (a column core built on the host, a type candle widens) is
//! counted. One test in its own binary: the counters are process-wide.

#![allow(clippy::unwrap_used)]

use candle_core::Device;
use loaderx_candle::{CandleLoaderExt, staging_stats};
use loaderx_core::sequence::PackOptions;
use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, Ragged, RaggedWriter};

#[test]
fn only_what_is_not_in_candle_memory_is_copied_and_every_copy_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[4], Codec::Raw).unwrap();
    w.append_slice(&(0..400).map(|v| v as f32).collect::<Vec<_>>(), 100)
        .unwrap();
    w.close().unwrap();
    let mut w = DenseWriter::<u16>::create(dir.path().join("w"), &[], Codec::Raw).unwrap();
    w.append_slice(&(0..100).collect::<Vec<u16>>(), 100)
        .unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<u32>::create(dir.path().join("t"), 1, Codec::Zstd).unwrap();
    w.append((0..100u32).map(|i| vec![i; 1 + i as usize % 9]))
        .unwrap();
    w.close().unwrap();
    let x = || Dense::<f32>::open(dir.path().join("x")).unwrap();

    // f32 is candle's own type: 10 batches, no copy.
    let before = staging_stats().copied;
    let loader = DataLoader::builder()
        .stream("x", x())
        .batch_size(10)
        .workers(0) // nothing made ahead: the counts are exact
        .build_candle(&Device::Cpu)
        .unwrap();
    for batch in loader.take(10) {
        assert_eq!(batch.unwrap().dense("x").unwrap().dims(), &[10, 4]);
    }
    assert_eq!(staging_stats().copied, before);

    // u16 is widened to u32 (a copy each batch).
    let loader = DataLoader::builder()
        .stream("w", Dense::<u16>::open(dir.path().join("w")).unwrap())
        .batch_size(10)
        .workers(0) // nothing made ahead: the counts are exact
        .build_candle(&Device::Cpu)
        .unwrap();
    for batch in loader.take(5) {
        batch.unwrap();
    }
    assert_eq!(staging_stats().copied, before + 5);

    // Packing builds its token rows on the host: four Dense columns per
    // batch that candle copies; `x` still moves.
    let loader = DataLoader::builder()
        .stream("x", x())
        .stream("t", Ragged::<u32>::open(dir.path().join("t")).unwrap())
        .batch_size(10)
        .workers(0)
        .pack("t", PackOptions::new(16))
        .build_candle(&Device::Cpu)
        .unwrap();
    for batch in loader.take(3) {
        batch.unwrap();
    }
    assert_eq!(staging_stats().copied, before + 5 + 3 * 4);
}
