//! All three adapters over a URL: stores pushed to a real S3-compatible
//! server (moto on 127.0.0.1, started and stopped by the test) give burn's,
//! candle's and tch's loaders the same tensors as the local stores, step by
//! step, and those hold the values that were written.
//!
//! It lives in this crate because only this crate's build script links
//! libtorch into test binaries; burn and candle are plain dev-dependencies.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use burn::data::dataloader::DataLoader as _;
use burn::tensor::{Device as BurnDevice, Int};
use loaderx_burn::{BurnDataLoader, BurnLoaderExt, HostBatch};
use loaderx_candle::CandleLoaderExt;
use loaderx_core::{
    Codec, CreateOptions, DataLoader, DataLoaderBuilder, DenseWriter, DynDense, DynRagged,
    RaggedWriter, RemoteOptions, SamplerMode, Stream, push,
};
use loaderx_tch::TchLoaderExt;
use loaderx_tests::S3Server;

/// A prime number of records: the last batch of the pass is partial.
const N: usize = 211;
const BATCH: usize = 16;

/// `x`: f32 [3] = (i, i + 0.5, -i), zstd over 3 shards; `y`: u8 = i % 7,
/// raw; `tok`: Ragged i32 `[i; 1 + i % 5]`, zstd.
fn write(dir: &Path) {
    let x: Vec<f32> = (0..N)
        .flat_map(|i| [i as f32, i as f32 + 0.5, -(i as f32)])
        .collect();
    let mut w = DenseWriter::<f32>::create_with(
        dir.join("x"),
        &[3],
        &CreateOptions::new(Codec::Zstd).data_shards(3),
    )
    .unwrap();
    w.append_slice(&x, N).unwrap();
    w.close().unwrap();
    let mut w = DenseWriter::<u8>::create(dir.join("y"), &[], Codec::Raw).unwrap();
    w.append_slice(&(0..N).map(|i| (i % 7) as u8).collect::<Vec<_>>(), N)
        .unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<i32>::create(dir.join("tok"), 1, Codec::Zstd).unwrap();
    w.append((0..N).map(|i| vec![i as i32; 1 + i % 5])).unwrap();
    w.close().unwrap();
}

/// What one step delivered, read back from an adapter's tensors.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    indices: Vec<u64>,
    x: Vec<f32>,
    y: Vec<i64>,
    /// Padded token values, row-major `(B, longest)`.
    tok: Vec<i64>,
    /// Each record's token count.
    lengths: Vec<i64>,
}

impl Seen {
    /// The values written for these indices (padding with zeros).
    fn check_written(&self) {
        let longest = self.lengths.iter().copied().max().unwrap_or(0) as usize;
        for (k, &i) in self.indices.iter().enumerate() {
            let f = i as f32;
            assert_eq!(self.x[3 * k..3 * k + 3], [f, f + 0.5, -f], "x of {i}");
            assert_eq!(self.y[k], (i % 7) as i64, "y of {i}");
            let len = 1 + (i as usize) % 5;
            assert_eq!(self.lengths[k], len as i64, "length of {i}");
            let row = &self.tok[k * longest..(k + 1) * longest];
            assert!(row[..len].iter().all(|&v| v == i as i64), "tok of {i}");
            assert!(row[len..].iter().all(|&v| v == 0), "padding of {i}");
        }
    }
}

/// The three streams, from the local directory or from the bucket.
fn streams(dir: &Path, remote: Option<&RemoteOptions>) -> [(&'static str, Stream); 3] {
    let (x, y, tok) = match remote {
        None => (
            DynDense::open(dir.join("x")).unwrap(),
            DynDense::open(dir.join("y")).unwrap(),
            DynRagged::open(dir.join("tok")).unwrap(),
        ),
        Some(o) => (
            DynDense::open_url(&url("x"), o).unwrap(),
            DynDense::open_url(&url("y"), o).unwrap(),
            DynRagged::open_url(&url("tok"), o).unwrap(),
        ),
    };
    [("x", x.into()), ("y", y.into()), ("tok", tok.into())]
}

/// One shuffled pass in batches of `BATCH`, the last one partial.
fn core_builder(streams: [(&'static str, Stream); 3]) -> DataLoaderBuilder {
    streams
        .into_iter()
        .fold(DataLoader::builder(), |b, (n, s)| b.stream(n, s))
        .batch_size(BATCH)
        .mode(SamplerMode::Cyclic)
        .seed(11)
        .workers(2)
        .drop_last(false)
        .epochs(1)
}

fn url(name: &str) -> String {
    format!("s3://adapters/stores/{name}")
}

fn via_tch(streams: [(&'static str, Stream); 3]) -> Vec<Seen> {
    core_builder(streams)
        .build_tch(tch::Device::Cpu)
        .unwrap()
        .map(|t| {
            let t = t.unwrap();
            let tok = t.padded("tok").unwrap();
            Seen {
                indices: t.indices.clone(),
                x: Vec::<f32>::try_from(&t.dense("x").unwrap().flatten(0, -1)).unwrap(),
                y: Vec::<i64>::try_from(&t.dense("y").unwrap().to_kind(tch::Kind::Int64)).unwrap(),
                tok: Vec::<i64>::try_from(&tok.values.flatten(0, -1).to_kind(tch::Kind::Int64))
                    .unwrap(),
                lengths: Vec::<i64>::try_from(&tok.lengths.flatten(0, -1)).unwrap(),
            }
        })
        .collect()
}

fn via_candle(streams: [(&'static str, Stream); 3]) -> Vec<Seen> {
    use candle_core::DType;
    core_builder(streams)
        .build_candle(&candle_core::Device::Cpu)
        .unwrap()
        .map(|t| {
            let t = t.unwrap();
            let tok = t.padded("tok").unwrap();
            let ints = |v: &candle_core::Tensor| {
                v.flatten_all()
                    .unwrap()
                    .to_dtype(DType::I64)
                    .unwrap()
                    .to_vec1::<i64>()
                    .unwrap()
            };
            Seen {
                indices: t.indices.clone(),
                x: t.dense("x")
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap(),
                y: ints(t.dense("y").unwrap()),
                tok: ints(&tok.values),
                lengths: ints(&tok.lengths),
            }
        })
        .collect()
}

fn via_burn(streams: [(&'static str, Stream); 3]) -> Vec<Seen> {
    let seen = |b: HostBatch| -> Result<Seen, loaderx_burn::Error> {
        let tok = b.padded::<2, Int>("tok")?;
        Ok(Seen {
            indices: b.indices().to_vec(),
            x: b.float::<2>("x")?.into_data().try_to_vec::<f32>().unwrap(),
            y: b.int::<1>("y")?
                .into_data()
                .convert::<i64>()
                .try_to_vec::<i64>()
                .unwrap(),
            tok: tok
                .values
                .into_data()
                .convert::<i64>()
                .try_to_vec::<i64>()
                .unwrap(),
            lengths: tok
                .lengths
                .into_data()
                .convert::<i64>()
                .try_to_vec::<i64>()
                .unwrap(),
        })
    };
    // burn's loader is built from core's builder; one burn epoch is one pass.
    let loader = streams
        .into_iter()
        .fold(BurnDataLoader::builder(), |b, (n, s)| b.stream(n, s))
        .batch_size(BATCH)
        .mode(SamplerMode::Cyclic)
        .seed(11)
        .workers(2)
        .drop_last(false)
        .build_burn(&BurnDevice::flex(), seen)
        .unwrap();
    let out: Vec<Seen> = loader.iter().map(|s| s.unwrap()).collect();
    out
}

#[test]
fn burn_candle_and_tch_read_a_store_over_a_url_as_they_read_it_locally() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("adapters");
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let o = server.options();
    for name in ["x", "y", "tok"] {
        push(dir.path().join(name), &url(name), &o).unwrap();
    }
    // With the block cache and without it (every gather a ranged GET).
    for o in [o.clone(), o.clone().no_cache()] {
        type Run = fn([(&'static str, Stream); 3]) -> Vec<Seen>;
        let adapters: [(&str, Run); 3] =
            [("tch", via_tch), ("candle", via_candle), ("burn", via_burn)];
        let mut first: Option<Vec<Seen>> = None;
        for (name, run) in adapters {
            let local = run(streams(dir.path(), None));
            let remote = run(streams(dir.path(), Some(&o)));
            assert_eq!(remote, local, "{name}: over a URL vs locally");
            // One pass: every record once, the last batch partial.
            assert_eq!(remote.len(), N.div_ceil(BATCH), "{name}");
            let mut all: Vec<u64> = remote.iter().flat_map(|s| s.indices.clone()).collect();
            all.sort_unstable();
            assert_eq!(all, (0..N as u64).collect::<Vec<_>>(), "{name}");
            for s in &remote {
                s.check_written();
            }
            // The three adapters deliver the same numbers.
            match &first {
                None => first = Some(remote),
                Some(f) => assert_eq!(&remote, f, "{name} vs tch"),
            }
        }
    }
}
