//! burn's epochs on core's passes: finite epochs that read every record once
//! (`drop_last(false)`), exact resume, slices at whole batches, and a user's
//! own burn `Batcher` on the native path.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::split::split_dataloader;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::Dataset;
use burn::tensor::{Device, Int, Tensor, TensorData};
use loaderx_burn::{BurnDataLoader, BurnLoaderExt, Error, HostBatch, ZrecordDataset};
use loaderx_core::SamplerMode;
use loaderx_core::{Codec, DenseWriter, RaggedWriter};

/// A prime number of records: no batch size above 1 divides it.
const N: usize = 1009;

/// `x`: f32 [2] = (i, -i); `y`: u8 = i % 10; `tok`: ragged i32 [i; 1 + i % 3].
fn write_root(dir: &Path) {
    let x: Vec<f32> = (0..N).flat_map(|i| [i as f32, -(i as f32)]).collect();
    let mut w = DenseWriter::<f32>::create(dir.join("x"), &[2], Codec::Raw).unwrap();
    w.append_slice(&x, N).unwrap();
    w.close().unwrap();
    let mut w = DenseWriter::<u8>::create(dir.join("y"), &[], Codec::Zstd).unwrap();
    w.append_slice(&(0..N).map(|i| (i % 10) as u8).collect::<Vec<_>>(), N)
        .unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<i32>::create(dir.join("tok"), 1, Codec::Zstd).unwrap();
    w.append((0..N).map(|i| vec![i as i32; 1 + i % 3])).unwrap();
    w.close().unwrap();
}

fn builder(dir: &Path, batch: usize, mode: SamplerMode) -> loaderx_core::DataLoaderBuilder {
    BurnDataLoader::builder()
        .dataset(&ZrecordDataset::open_dir(dir).unwrap())
        .batch_size(batch)
        .mode(mode)
        .seed(5)
        .workers(3)
}

/// One delivered batch: step, indices, and `x` / `y` as read back from tensors.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    step: u64,
    indices: Vec<u64>,
    x: Vec<f32>,
    y: Vec<i64>,
}

fn seen(b: HostBatch) -> Result<Seen, Error> {
    Ok(Seen {
        step: b.step().unwrap(),
        indices: b.indices().to_vec(),
        x: b.float::<2>("x")?.into_data().try_to_vec::<f32>().unwrap(),
        y: b.int::<1>("y")?
            .into_data()
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap(),
    })
}

fn epoch(l: &dyn DataLoader<Seen>) -> Vec<Seen> {
    let mut it = l.iter();
    let mut out = Vec::new();
    while let Some(b) = it.next() {
        out.push(b.unwrap());
        assert_eq!(
            it.progress().items_processed,
            out.iter().map(|s| s.indices.len()).sum::<usize>()
        );
    }
    assert!(it.progress().is_completed());
    out
}

fn sorted_indices(batches: &[Seen]) -> Vec<u64> {
    let mut all: Vec<u64> = batches.iter().flat_map(|b| b.indices.clone()).collect();
    all.sort_unstable();
    all
}

fn check_streams(b: &Seen) {
    for (r, &i) in b.indices.iter().enumerate() {
        assert_eq!(&b.x[2 * r..2 * r + 2], &[i as f32, -(i as f32)]);
        assert_eq!(b.y[r], (i % 10) as i64);
    }
}

#[test]
fn a_finite_epoch_reads_every_record_once_with_a_partial_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let everything: Vec<u64> = (0..N as u64).collect();
    for mode in [SamplerMode::Sequential, SamplerMode::Cyclic] {
        for batch in [1usize, 3, 100, N] {
            let l = builder(dir.path(), batch, mode)
                .drop_last(false)
                .build_burn(&Device::flex(), seen)
                .unwrap();
            let steps = N.div_ceil(batch) as u64;
            assert_eq!(l.steps_per_epoch(), steps, "{mode:?} B={batch}");
            assert_eq!(l.num_items(), N);
            let mut orders = Vec::new();
            for e in 0..2u64 {
                let batches = epoch(&l);
                assert_eq!(batches.len() as u64, steps);
                assert_eq!(sorted_indices(&batches), everything, "{mode:?} B={batch}");
                let last = batches.last().unwrap();
                assert_eq!(last.indices.len(), N - (steps as usize - 1) * batch);
                for (k, b) in batches.iter().enumerate() {
                    assert_eq!(b.step, e * steps + k as u64);
                    check_streams(b);
                }
                orders.push(batches);
            }
            if mode == SamplerMode::Cyclic && batch < N {
                assert_ne!(orders[0], orders[1], "a fresh permutation every epoch");
            }
        }
    }
    // drop_last(true): full batches only, the remainder left out, no record twice.
    let l = builder(dir.path(), 100, SamplerMode::Cyclic)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    assert_eq!((l.steps_per_epoch(), l.num_items()), (10, 1000));
    let batches = epoch(&l);
    assert!(batches.iter().all(|b| b.indices.len() == 100));
    let mut all = sorted_indices(&batches);
    all.dedup();
    assert_eq!(all.len(), 1000);
    // Iid has no passes.
    let e = builder(dir.path(), 100, SamplerMode::Iid)
        .drop_last(false)
        .build_burn(&Device::flex(), seen)
        .unwrap_err();
    assert!(matches!(e, Error::Core(_)), "{e}");
}

#[test]
fn sharded_finite_epochs_cover_every_record_once_across_ranks() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    for world in [2usize, 3] {
        let mut all = Vec::new();
        let mut steps = Vec::new();
        for rank in 0..world {
            let l = builder(dir.path(), 100, SamplerMode::Cyclic)
                .shard(rank, world)
                .drop_last(false)
                .build_burn(&Device::flex(), seen)
                .unwrap();
            let batches = epoch(&l);
            assert!(batches.iter().all(|b| !b.indices.is_empty()));
            assert_eq!(
                l.num_items(),
                batches.iter().map(|b| b.indices.len()).sum::<usize>()
            );
            steps.push(batches.len());
            all.extend(sorted_indices(&batches));
        }
        all.sort_unstable();
        assert_eq!(all, (0..N as u64).collect::<Vec<_>>(), "world {world}");
        let (lo, hi) = (steps.iter().min().unwrap(), steps.iter().max().unwrap());
        assert!(hi - lo <= 1, "{steps:?}");
    }
}

#[test]
fn resume_mid_epoch_is_bit_identical() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let build = || {
        builder(dir.path(), 100, SamplerMode::Cyclic)
            .drop_last(false)
            .workers(2)
    };
    let whole = build().build_burn(&Device::flex(), seen).unwrap();
    let reference: Vec<Vec<Seen>> = (0..3).map(|_| epoch(&whole)).collect();
    // After one finished epoch.
    let resumed = build()
        .build_burn(&Device::flex(), seen)
        .and_then(|l| l.start_epoch(1))
        .unwrap();
    assert_eq!(epoch(&resumed), reference[1]);
    assert_eq!(epoch(&resumed), reference[2]);
    // Mid-epoch, at the last (partial) batch and just before it.
    for k in [4u64, 10] {
        let mid = build()
            .start_step(k)
            .build_burn(&Device::flex(), seen)
            .and_then(|l| l.start_epoch(1))
            .unwrap();
        let mut it = mid.iter();
        assert_eq!(it.progress().items_processed, 100 * k as usize);
        let rest: Vec<Seen> = it.by_ref().map(|b| b.unwrap()).collect();
        assert!(it.progress().is_completed());
        drop(it);
        assert_eq!(rest, reference[1][k as usize..], "start_step({k})");
        assert_eq!(epoch(&mid), reference[2]);
    }
    // start_step counts from the start of training: 11 + 3 is epoch 1, step 3.
    let by_step = build()
        .start_step(14)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    assert_eq!(by_step.next_epoch(), 1);
    let rest: Vec<Seen> = by_step.iter().map(|b| b.unwrap()).collect();
    assert_eq!(rest, reference[1][3..]);
}

#[test]
fn slices_get_whole_batches_that_concatenate_to_the_epoch() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    for (mode, drop_last) in [
        (SamplerMode::Sequential, false),
        (SamplerMode::Cyclic, false),
        (SamplerMode::Cyclic, true),
    ] {
        let build = || {
            builder(dir.path(), 100, mode)
                .drop_last(drop_last)
                .build_burn(&Device::flex(), seen)
                .unwrap()
        };
        let reference = epoch(&build());
        for devices in [2usize, 3, 4, 7, 13] {
            let whole: Arc<dyn DataLoader<Seen>> = Arc::new(build());
            let parts = split_dataloader(whole, &vec![Device::flex(); devices]);
            assert_eq!(parts.len(), devices);
            let mut joined: Vec<Seen> = Vec::new();
            for part in &parts {
                let batches = epoch(&**part);
                assert_eq!(
                    part.num_items(),
                    batches.iter().map(|b| b.indices.len()).sum::<usize>()
                );
                // No slice starts (or ends) mid-batch: every batch is a whole
                // batch of the unsliced epoch.
                for b in &batches {
                    let k = reference.iter().position(|r| r.step == b.step).unwrap();
                    assert_eq!(b, &reference[k], "{mode:?} {devices} devices");
                }
                joined.extend(batches);
            }
            assert_eq!(
                joined, reference,
                "{mode:?} drop_last({drop_last}) {devices}"
            );
        }
    }
}

#[test]
fn split_batches_give_every_device_its_view_of_every_batch() {
    // burn's split under the placement rule: each device has every step,
    // with its contiguous part of the global batch.
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    for (mode, drop_last, batch, devices) in [
        (SamplerMode::Cyclic, true, 120, 4),
        (SamplerMode::Sequential, false, 100, 1),
        (SamplerMode::Iid, true, 90, 3),
    ] {
        let build = |split: usize| {
            builder(dir.path(), batch, mode)
                .drop_last(drop_last)
                .build_burn(&Device::flex(), seen)
                .and_then(|l| l.split_batches(split))
                .unwrap()
        };
        let reference = epoch(&build(0));
        let whole: Arc<dyn DataLoader<Seen>> = Arc::new(build(devices));
        let parts = split_dataloader(whole, &vec![Device::flex(); devices]);
        let epochs: Vec<Vec<Seen>> = parts.iter().map(|p| epoch(&**p)).collect();
        for (part, batches) in parts.iter().zip(&epochs) {
            assert_eq!(batches.len(), reference.len(), "{mode:?}: every step");
            assert_eq!(
                part.num_items(),
                reference.iter().map(|b| b.indices.len()).sum::<usize>() / devices
            );
        }
        for (k, r) in reference.iter().enumerate() {
            let mut joined = Seen {
                step: r.step,
                indices: vec![],
                x: vec![],
                y: vec![],
            };
            for e in &epochs {
                assert_eq!(e[k].step, r.step);
                assert_eq!(e[k].indices.len(), r.indices.len() / devices);
                joined.indices.extend_from_slice(&e[k].indices);
                joined.x.extend_from_slice(&e[k].x);
                joined.y.extend_from_slice(&e[k].y);
            }
            assert_eq!(&joined, r, "{mode:?} step {}", r.step);
        }
    }
    // A batch that does not split over the devices is refused when built.
    let e = builder(dir.path(), 100, SamplerMode::Cyclic)
        .build_burn(&Device::flex(), seen)
        .and_then(|l| l.split_batches(3))
        .unwrap_err();
    assert!(e.to_string().contains("3 equal views"), "{e}");
}

#[test]
fn token_budget_epochs_count_the_records_their_batches_hold() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    // `tok` records of 1, 2 and 3 tokens: batches of 24, 12 and 8 records,
    // fewer than `batch_size` apart from the shortest records'.
    let mode = SamplerMode::TokenBudget {
        max_tokens: 24,
        buckets: 3,
    };
    let build = || {
        builder(dir.path(), 24, mode)
            .drop_last(false)
            .build_burn(&Device::flex(), seen)
            .unwrap()
    };
    let l = build();
    assert_eq!(l.num_items(), N);
    // `epoch` checks `progress()` against the records delivered.
    let reference = epoch(&l);
    assert!(reference.iter().any(|b| b.indices.len() < 24));
    assert_eq!(
        sorted_indices(&reference),
        (0..N as u64).collect::<Vec<_>>()
    );
    for devices in [2usize, 3, 7] {
        let whole: Arc<dyn DataLoader<Seen>> = Arc::new(build());
        let mut joined: Vec<Seen> = Vec::new();
        let mut start = 0;
        for part in split_dataloader(whole, &vec![Device::flex(); devices]) {
            let items = part.num_items();
            let batches = epoch(&*part);
            assert_eq!(
                items,
                batches.iter().map(|b| b.indices.len()).sum::<usize>()
            );
            // Each slice starts with a whole batch, right after the records
            // of the slices before it.
            if let Some(first) = batches.first() {
                let k = reference.iter().position(|r| r.step == first.step).unwrap();
                let before: usize = reference[..k].iter().map(|b| b.indices.len()).sum();
                assert_eq!(before, start, "{devices} devices");
            }
            start += items;
            joined.extend(batches);
        }
        assert_eq!(joined, reference, "{devices} devices");
    }
}

/// A user's item and batch types and burn `Batcher`, as in burn's examples.
#[derive(Debug, Clone)]
struct Item {
    x: [f32; 2],
    y: u8,
}

#[derive(Debug, Clone)]
struct Pair {
    x: Tensor<2>,
    y: Tensor<1, Int>,
}

#[derive(Clone)]
struct PairBatcher;

impl Batcher<Item, Pair> for PairBatcher {
    fn batch(&self, items: Vec<Item>, device: &Device) -> Pair {
        let n = items.len();
        let x: Vec<f32> = items.iter().flat_map(|i| i.x).collect();
        let y: Vec<i64> = items.iter().map(|i| i64::from(i.y)).collect();
        Pair {
            x: Tensor::from_data(TensorData::new(x, [n, 2]), device),
            y: Tensor::from_data(TensorData::new(y, [n]), device),
        }
    }
}

fn decode(r: loaderx_burn::Record) -> Result<Item, Error> {
    let x = r.array::<f32>("x")?;
    Ok(Item {
        x: [x[[0]], x[[1]]],
        y: r.scalar("y")?,
    })
}

fn pair_data(p: Pair) -> (Vec<f32>, Vec<i64>) {
    (
        p.x.into_data().try_to_vec::<f32>().unwrap(),
        p.y.into_data()
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap(),
    )
}

#[test]
fn a_users_batcher_gives_the_native_paths_tensors() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let items = ZrecordDataset::open_dir(dir.path()).unwrap().map(decode);
    let device = Device::flex();
    for mode in [SamplerMode::Sequential, SamplerMode::Cyclic] {
        let config = || {
            BurnDataLoader::builder()
                .batch_size(100)
                .mode(mode)
                .seed(9)
                .drop_last(false)
                .workers(2)
        };
        let batcher = config()
            .build_burn_batcher(&device, &items, PairBatcher)
            .unwrap();
        let native = config()
            .dataset(items.records())
            .build_burn(&device, |b: HostBatch| {
                Ok::<_, Error>(Pair {
                    x: b.float::<2>("x")?,
                    y: b.int::<1>("y")?,
                })
            })
            .unwrap();
        assert_eq!(batcher.num_items(), N);
        for _ in 0..2 {
            let got: Vec<_> = batcher.iter().map(|b| pair_data(b.unwrap())).collect();
            let want: Vec<_> = native.iter().map(|b| pair_data(b.unwrap())).collect();
            assert_eq!(got.len(), 11);
            assert_eq!(got, want, "{mode:?}");
        }
    }
    // The one-line switch: burn's own loader over the same items and batcher,
    // in order, gives the same batches as the finite Sequential pass.
    let burns = DataLoaderBuilder::new(PairBatcher)
        .batch_size(100)
        .set_device(device.clone())
        .build(items.clone());
    let ours = BurnDataLoader::builder()
        .batch_size(100)
        .mode(SamplerMode::Sequential)
        .drop_last(false)
        .build_burn_batcher(&device, &items, PairBatcher)
        .unwrap();
    assert_eq!(ours.num_items(), burns.num_items());
    let want: Vec<_> = burns.iter().map(|b| pair_data(b.unwrap())).collect();
    let got: Vec<_> = ours.iter().map(|b| pair_data(b.unwrap())).collect();
    assert_eq!(got, want);
    // A decoding error reaches burn as an error of its step.
    let failing = ZrecordDataset::open_dir(dir.path())
        .unwrap()
        .map(|r| r.scalar::<u16>("y").map(|_| Item { x: [0.0; 2], y: 0 }));
    let l = BurnDataLoader::builder()
        .batch_size(100)
        .build_burn_batcher(&device, &failing, PairBatcher)
        .unwrap();
    let e = l.iter().next().unwrap().unwrap_err();
    assert!(e.to_string().contains("mapping failed"), "{e}");
}

#[test]
fn host_batch_records_match_the_datasets() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let ds = ZrecordDataset::open_dir(dir.path()).unwrap();
    let l = BurnDataLoader::builder()
        .dataset(&ds)
        .batch_size(7)
        .seed(3)
        .build_burn(&Device::flex(), |b: HostBatch| b.to_records())
        .unwrap();
    let records = l.iter().next().unwrap().unwrap();
    assert_eq!(records.len(), 7);
    for r in &records {
        let want = ds.get(r.index() as usize).unwrap();
        assert_eq!(r.fields().len(), want.fields().len());
        for (a, b) in r.fields().iter().zip(want.fields()) {
            assert_eq!(
                (a.name(), a.dtype(), a.kind(), a.shape(), a.bytes()),
                (b.name(), b.dtype(), b.kind(), b.shape(), b.bytes())
            );
        }
    }
}

#[test]
fn every_core_option_reaches_burn_packing_and_bucketing_included() {
    // burn's loader is built from core's builder, so core's sequence
    // options apply with no burn-side code.
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let packed = BurnDataLoader::builder()
        .stream(
            "tok",
            loaderx_core::Ragged::<i32>::open(dir.path().join("tok")).unwrap(),
        )
        .batch_size(16)
        .seed(3)
        .pack("tok", loaderx_core::sequence::PackOptions::new(8))
        .build_burn(&Device::flex(), |b: HostBatch| {
            let rows = b.int::<2>("tok")?;
            let segments = b.int::<2>("tok.segment_ids")?;
            Ok::<_, Error>((rows.dims(), segments.dims(), b.len()))
        })
        .unwrap();
    let mut it = packed.iter();
    let (rows, segments, len) = it.next().unwrap().unwrap();
    assert_eq!((rows[1], segments, len), (8, rows, 16));
    // 16 records of 1 to 3 tokens fit in rows of 8: fewer rows than records.
    assert!(rows[0] < 16, "{rows:?}");
    drop(it);

    let bucketed = BurnDataLoader::builder()
        .stream(
            "tok",
            loaderx_core::Ragged::<i32>::open(dir.path().join("tok")).unwrap(),
        )
        .batch_size(24)
        .mode(SamplerMode::Bucketed { window: 8 })
        .build_burn(&Device::flex(), |b: HostBatch| {
            let p = b.padded::<2, burn::tensor::Int>("tok")?;
            Ok::<_, Error>(p.values.dims()[1])
        })
        .unwrap();
    // Sorted windows: most batches hold records of one length.
    let widths: Vec<usize> = bucketed.iter().map(Result::unwrap).collect();
    assert_eq!(widths.len() as u64, bucketed.steps_per_epoch());
    assert!(widths.iter().filter(|&&w| w == 1).count() >= widths.len() / 4);
}
