//! The typed staging hands libtorch its own tensors: a Dense batch and a
//! packed Ragged batch's values are gathered into the tensors delivered,
//! and every copy (a column core built on the host) is counted. One test in
//! its own binary: the counters are process-wide.

#![allow(clippy::unwrap_used)]

use loaderx_core::adapter::RaggedMode;
use loaderx_core::sequence::PackOptions;
use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, Ragged, RaggedWriter};
use loaderx_tch::{TchLoaderExt, staging_stats};
use tch::Device;

#[test]
fn only_what_is_not_in_a_tensor_is_copied_and_every_copy_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[4], Codec::Raw).unwrap();
    w.append_slice(&(0..400).map(|v| v as f32).collect::<Vec<_>>(), 100)
        .unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<i32>::create(dir.path().join("t"), 1, Codec::Zstd).unwrap();
    w.append((0..100i32).map(|i| vec![i; 1 + i as usize % 9]))
        .unwrap();
    w.close().unwrap();
    let builder = || {
        DataLoader::builder()
            .stream("x", Dense::<f32>::open(dir.path().join("x")).unwrap())
            .stream("t", Ragged::<i32>::open(dir.path().join("t")).unwrap())
            .batch_size(10)
            .workers(0) // nothing made ahead: the counts are exact
    };

    // Dense and packed values: gathered into their tensors, no copy.
    let before = staging_stats().copied;
    let loader = builder()
        .build_tch_ragged(Device::Cpu, RaggedMode::Packed)
        .unwrap();
    for batch in loader.take(10) {
        let batch = batch.unwrap();
        assert_eq!(batch.dense("x").unwrap().size(), [10, 4]);
        assert_eq!(batch.packed("t").unwrap().shapes.size(), [10, 1]);
    }
    assert_eq!(staging_stats().copied, before);

    // Packing builds its token rows on the host: four Dense columns per
    // batch that libtorch copies; `x` still moves.
    let loader = builder()
        .pack("t", PackOptions::new(16))
        .build_tch(Device::Cpu)
        .unwrap();
    for batch in loader.take(3) {
        batch.unwrap();
    }
    assert_eq!(staging_stats().copied, before + 3 * 4);
}
