//! Contract tests: burn's `Dataset`, `Batcher` and `DataLoader` traits over
//! Zrecord stores — shapes, kinds, alignment across streams, `slice`,
//! `to_device`, progress, determinism and resume, errors.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use burn::data::dataloader::split::split_dataloader;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::Dataset;
use burn::data::dataset::transform::{PartialDataset, ShuffledDataset};
use burn::tensor::kind::Kind;
use burn::tensor::{Bool, Device, Float, Int, Tensor};
use loaderx_burn::{
    BurnConverter, BurnDataLoader, BurnLoaderExt, Error, HostBatch, HostBatcher, RecordBatcher,
    TensorBatch, ZrecordDataset,
};
use loaderx_core::adapter::{RaggedMode, TensorColumn, VecStaging};
use loaderx_core::{Codec, DType, Dense, DenseWriter, DynDense, ErrorKind, RaggedWriter};
use loaderx_core::{Sampler, SamplerMode};

const N: usize = 50;

/// `x`: f32 [3] = (i, i + 0.5, -i); `y`: u8 label i % 10; `flag`: bool i % 2;
/// `tok`: ragged i32 rank 1, record i = [i; 1 + i % 4].
fn write_root(dir: &Path) {
    let x: Vec<f32> = (0..N)
        .flat_map(|i| [i as f32, i as f32 + 0.5, -(i as f32)])
        .collect();
    let mut w = DenseWriter::<f32>::create(dir.join("x"), &[3], Codec::Zstd).unwrap();
    w.append_slice(&x, N).unwrap();
    w.close().unwrap();
    let mut w = DenseWriter::<u8>::create(dir.join("y"), &[], Codec::Raw).unwrap();
    w.append_slice(&(0..N).map(|i| (i % 10) as u8).collect::<Vec<_>>(), N)
        .unwrap();
    w.close().unwrap();
    let mut w = DenseWriter::<bool>::create(dir.join("flag"), &[], Codec::Raw).unwrap();
    w.append_slice(&(0..N).map(|i| i % 2 == 1).collect::<Vec<_>>(), N)
        .unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<i32>::create(dir.join("tok"), 1, Codec::Zstd).unwrap();
    w.append((0..N).map(|i| vec![i as i32; 1 + i % 4])).unwrap();
    w.close().unwrap();
}

fn floats<const D: usize>(t: Tensor<D, Float>) -> Vec<f32> {
    t.into_data().try_into_vec_as::<f32>().unwrap()
}

fn ints<const D: usize>(t: Tensor<D, Int>) -> Vec<i64> {
    t.into_data().try_into_vec_as::<i64>().unwrap()
}

fn bools<const D: usize>(t: Tensor<D, Bool>) -> Vec<bool> {
    t.into_data().try_into_vec::<bool>().unwrap()
}

/// Whether `e` is core's error of kind `kind` (directly or for a stream).
fn is_core(e: &Error, kind: fn(&ErrorKind) -> bool) -> bool {
    e.core_kind().is_some_and(kind)
}

/// Checks every stream of a host batch, as tensors, against the record indices.
fn check_tensor_batch(b: &HostBatch) {
    let n = b.len();
    assert_eq!(b.dtype("x").unwrap(), DType::F32);
    assert_eq!(b.dtype("y").unwrap(), DType::U8);
    assert_eq!(b.dtype("flag").unwrap(), DType::Bool);
    assert_eq!(b.dtype("tok").unwrap(), DType::I32);
    let x = b.float::<2>("x").unwrap();
    assert_eq!(x.dims(), [n, 3]);
    let x = floats(x);
    let y = ints(b.int::<1>("y").unwrap());
    let flag = bools(b.bool::<1>("flag").unwrap());
    let tok = b.padded::<2, Int>("tok").unwrap();
    let lengths = ints(tok.lengths.clone());
    let max = tok.values.dims()[1];
    let values = ints(tok.values);
    let mask = bools(tok.mask);
    for (r, &i) in b.indices().iter().enumerate() {
        let i = i as usize;
        assert_eq!(
            &x[r * 3..r * 3 + 3],
            &[i as f32, i as f32 + 0.5, -(i as f32)]
        );
        assert_eq!(y[r], (i % 10) as i64);
        assert_eq!(flag[r], i % 2 == 1);
        let len = 1 + i % 4;
        assert_eq!(lengths[r], len as i64);
        for c in 0..max {
            let inside = c < len;
            assert_eq!(mask[r * max + c], inside);
            assert_eq!(values[r * max + c], if inside { i as i64 } else { 0 });
        }
    }
}

#[test]
fn dataset_items_line_up_across_streams() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let ds = ZrecordDataset::open_dir(dir.path()).unwrap();
    assert_eq!(ds.len(), N);
    assert_eq!(ds.names().collect::<Vec<_>>(), ["flag", "tok", "x", "y"]);
    for i in [0usize, 7, 49] {
        let r = ds.get(i).unwrap();
        assert_eq!(r.index(), i as u64);
        assert_eq!(r.scalar::<u8>("y").unwrap(), (i % 10) as u8);
        assert_eq!(r.scalar::<bool>("flag").unwrap(), i % 2 == 1);
        assert_eq!(
            r.array::<f32>("x").unwrap().as_slice().unwrap(),
            &[i as f32, i as f32 + 0.5, -(i as f32)]
        );
        assert_eq!(r.field("tok").unwrap().shape(), &[1 + i % 4]);
        assert_eq!(r.field("x").unwrap().dtype(), DType::F32);
    }
    // get_many gathers once per store and agrees with get.
    let many = ds.get_many(vec![9, 2, 9]).unwrap();
    assert_eq!(
        many.iter().map(|r| r.index()).collect::<Vec<_>>(),
        [9, 2, 9]
    );
    assert_eq!(
        many[0].array::<i32>("tok").unwrap(),
        ds.get(9).unwrap().array::<i32>("tok").unwrap()
    );
    // Out of range is an error, not a panic.
    assert!(ds.get(N).is_err());
    assert!(ds.get_many(vec![0, N]).is_err());
    assert!(matches!(
        ds.get(0).unwrap().array::<u8>("x"),
        Err(Error::Core(_))
    ));
    assert!(matches!(
        ds.get(0).unwrap().field("nope"),
        Err(Error::MissingStream(_))
    ));
}

#[test]
fn dataset_refuses_mismatched_streams() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let mut w = DenseWriter::<u8>::create(dir.path().join("short"), &[], Codec::Raw).unwrap();
    w.append_slice(&[1, 2, 3], 3).unwrap();
    w.close().unwrap();
    let e = ZrecordDataset::open_dir(dir.path()).unwrap_err();
    assert!(e.to_string().contains("same number of records"), "{e}");
    let x = || Dense::<f32>::open(dir.path().join("x")).unwrap();
    let e = ZrecordDataset::builder()
        .stream("a", x())
        .stream("a", x())
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
    assert!(ZrecordDataset::builder().build().is_err());
}

#[test]
fn burn_dataset_transforms_work_on_zrecord_data() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let ds = ZrecordDataset::open_dir(dir.path()).unwrap();

    let shuffled = ShuffledDataset::new(ds.clone(), 3);
    let seen: BTreeSet<u64> = (0..N).map(|i| shuffled.get(i).unwrap().index()).collect();
    assert_eq!(seen.len(), N);

    let part = PartialDataset::new(ds.clone(), 10, 20);
    assert_eq!(part.len(), 10);
    assert_eq!(part.get(0).unwrap().index(), 10);

    #[derive(Debug, Clone, PartialEq)]
    struct Item {
        x0: f32,
        label: u8,
    }
    let items = ds.map(|r| {
        Ok::<_, Error>(Item {
            x0: r.array::<f32>("x")?[[0]],
            label: r.scalar("y")?,
        })
    });
    assert_eq!(items.len(), N);
    assert_eq!(items.get(13).unwrap(), Item { x0: 13.0, label: 3 });
    let failing = ZrecordDataset::open_dir(dir.path())
        .unwrap()
        .map(|r| r.scalar::<u16>("y"));
    let e = failing.get(0).unwrap_err();
    assert!(e.to_string().contains("mapping failed"), "{e}");
}

#[test]
fn burns_dataloader_builder_batches_records_with_host_batcher() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let ds = ZrecordDataset::open_dir(dir.path()).unwrap();
    for workers in [0, 2] {
        let loader = DataLoaderBuilder::new(HostBatcher)
            .batch_size(8)
            .shuffle(5)
            .num_workers(workers)
            .set_device(Device::flex())
            .build(ds.clone());
        assert_eq!(loader.num_items(), N);
        let mut seen = Vec::new();
        for batch in loader.iter() {
            let batch = batch.unwrap();
            check_tensor_batch(&batch);
            assert_eq!(batch.step(), None);
            seen.extend_from_slice(batch.indices());
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..N as u64).collect::<Vec<_>>());
    }
}

#[test]
fn record_batcher_builds_the_models_batch_type() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let ds = ZrecordDataset::open_dir(dir.path()).unwrap();

    #[derive(Debug, Clone)]
    struct Example {
        x: Tensor<2>,
        y: Tensor<1, Int>,
        indices: Vec<u64>,
    }
    // burn's batchers cannot fail: the closure decides (here, a test, it panics).
    let batcher = RecordBatcher::new(|b: HostBatch| Example {
        x: b.float::<2>("x").unwrap(),
        y: b.int::<1>("y").unwrap(),
        indices: b.indices().to_vec(),
    });
    let loader = DataLoaderBuilder::new(batcher)
        .batch_size(16)
        .build(PartialDataset::new(ds, 0, 20));
    let batches: Vec<_> = loader.iter().map(|b| b.unwrap()).collect();
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[1].x.dims(), [4, 3]);
    assert_eq!(ints(batches[1].y.clone()), [6, 7, 8, 9]);
    assert_eq!(batches[1].indices, [16, 17, 18, 19]);
}

#[test]
fn stacking_records_that_disagree_fails_on_access_only() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let ds = ZrecordDataset::open_dir(dir.path()).unwrap();
    let x = ZrecordDataset::builder()
        .stream("x", Dense::<f32>::open(dir.path().join("x")).unwrap())
        .build()
        .unwrap();
    let mut records = ds.get_many(vec![0, 1]).unwrap();
    records.push(x.get(2).unwrap());
    let batch =
        burn::data::dataloader::batcher::Batcher::batch(&HostBatcher, records, &Device::flex());
    // The first record's streams are the batch's; "flag" is missing from the third.
    assert!(matches!(batch.bool::<1>("flag"), Err(Error::Stack { .. })));
    assert!(batch.float::<2>("x").is_err());
}

/// One loader batch: the step, the record indices and the aligned streams.
#[derive(Debug, Clone)]
struct Seen {
    step: u64,
    indices: Vec<u64>,
    x: Tensor<2>,
    y: Tensor<1, Int>,
}

fn seen(b: HostBatch) -> Result<Seen, Error> {
    Ok(Seen {
        step: b.step().unwrap(),
        indices: b.indices().to_vec(),
        x: b.float::<2>("x")?,
        y: b.int::<1>("y")?,
    })
}

fn loader(dir: &Path, batch: usize, workers: usize) -> loaderx_core::DataLoaderBuilder {
    BurnDataLoader::builder()
        .stream("x", Dense::<f32>::open(dir.join("x")).unwrap())
        .stream("y", DynDense::open(dir.join("y")).unwrap())
        .batch_size(batch)
        .seed(11)
        .workers(workers)
}

fn epoch(l: &dyn DataLoader<Seen>) -> Vec<Seen> {
    l.iter().map(|b| b.unwrap()).collect()
}

fn indices(batches: &[Seen]) -> Vec<u64> {
    batches.iter().flat_map(|b| b.indices.clone()).collect()
}

#[test]
fn an_epoch_is_one_cycle_of_the_sampler_in_step_order() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let l = loader(dir.path(), 8, 3)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    assert_eq!(l.steps_per_epoch(), 6);
    assert_eq!(l.num_items(), 48);
    let sampler = Sampler::new(N as u64, 8, SamplerMode::Cyclic, 11).unwrap();
    for e in 0..3u64 {
        assert_eq!(l.next_epoch(), e);
        let mut it = l.iter();
        assert_eq!(it.progress().items_processed, 0);
        assert_eq!(it.progress().items_total, 48);
        let mut batches = Vec::new();
        while let Some(b) = it.next() {
            batches.push(b.unwrap());
            assert_eq!(it.progress().items_processed, 8 * batches.len());
        }
        assert!(it.progress().is_completed());
        assert_eq!(batches.len(), 6);
        for (k, b) in batches.iter().enumerate() {
            let step = e * 6 + k as u64;
            assert_eq!(b.step, step);
            let mut want = vec![0u64; 8];
            sampler.fill(step, &mut want).unwrap();
            assert_eq!(b.indices, want);
            // Streams line up with the indices.
            let x = floats(b.x.clone());
            let y = ints(b.y.clone());
            for (r, &i) in b.indices.iter().enumerate() {
                assert_eq!(x[r * 3], i as f32);
                assert_eq!(y[r], (i % 10) as i64);
            }
        }
        let unique: BTreeSet<u64> = indices(&batches).into_iter().collect();
        assert_eq!(unique.len(), 48, "no record twice in an epoch");
    }
    // Consecutive epochs reuse one pipeline.
    let stats = l.stats();
    assert_eq!(stats.pipelines, 1);
    assert_eq!(stats.batches, 18);
    assert_eq!(stats.items, 144);
}

#[test]
fn order_does_not_depend_on_workers_and_resume_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let one = loader(dir.path(), 8, 1)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    let reference: Vec<Vec<u64>> = (0..3).map(|_| indices(&epoch(&one))).collect();
    let four = loader(dir.path(), 8, 4)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    for want in &reference {
        assert_eq!(&indices(&epoch(&four)), want);
    }
    // Resume after two epochs.
    let resumed = loader(dir.path(), 8, 2)
        .build_burn(&Device::flex(), seen)
        .and_then(|l| l.start_epoch(2))
        .unwrap();
    assert_eq!(resumed.next_epoch(), 2);
    assert_eq!(indices(&epoch(&resumed)), reference[2]);
    // Resume mid-epoch: the first iter() finishes epoch 1, the next is epoch 2.
    let mid = loader(dir.path(), 8, 2)
        .start_step(2)
        .build_burn(&Device::flex(), seen)
        .and_then(|l| l.start_epoch(1))
        .unwrap();
    let mut it = mid.iter();
    assert_eq!(it.progress().items_processed, 16);
    let rest: Vec<Seen> = it.by_ref().map(|b| b.unwrap()).collect();
    assert_eq!(rest.first().unwrap().step, 8);
    assert_eq!(indices(&rest), reference[1][16..]);
    drop(it);
    assert_eq!(indices(&epoch(&mid)), reference[2]);
    // An iterator dropped early does not shift the next epoch.
    let early = loader(dir.path(), 8, 2)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    assert_eq!(early.iter().take(2).count(), 2);
    assert_eq!(indices(&epoch(&early)), reference[1]);
}

#[test]
fn slices_split_every_epoch_into_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let whole = loader(dir.path(), 8, 2)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    // A batch goes to the slice holding its first record.
    let a = whole.slice(0, 13);
    let b = whole.slice(13, 40);
    let c = whole.slice(40, 1000);
    assert_eq!((a.num_items(), b.num_items(), c.num_items()), (16, 24, 8));
    for e in 0..2 {
        let reference = epoch(&whole);
        let (ea, eb, ec) = (epoch(&*a), epoch(&*b), epoch(&*c));
        let sizes = |v: &[Seen]| v.iter().map(|s| s.indices.len()).collect::<Vec<_>>();
        assert_eq!(sizes(&ea), [8, 8], "epoch {e}");
        assert_eq!(sizes(&eb), [8, 8, 8]);
        assert_eq!(sizes(&ec), [8]);
        let steps: Vec<u64> = ea.iter().chain(&eb).chain(&ec).map(|s| s.step).collect();
        assert_eq!(steps, reference.iter().map(|s| s.step).collect::<Vec<_>>());
        let mut joined = indices(&ea);
        joined.extend(indices(&eb));
        joined.extend(indices(&ec));
        assert_eq!(joined, indices(&reference), "epoch {e}");
    }
    // A slice of a slice is relative to it; out-of-range bounds are clamped.
    let bb = b.slice(3, 11);
    assert_eq!(bb.num_items(), 8);
    let mut it = bb.iter();
    assert_eq!(it.progress().items_total, 8);
    let only: Vec<Seen> = it.by_ref().map(|s| s.unwrap()).collect();
    assert!(it.progress().is_completed());
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].step % 6, 3);
    assert_eq!(whole.slice(30, 10).num_items(), 0);
    assert_eq!(whole.slice(30, 10).iter().count(), 0);
}

#[test]
fn burns_split_dataloader_and_to_device_work() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let whole: Arc<dyn DataLoader<Seen>> = Arc::new(
        loader(dir.path(), 8, 2)
            .build_burn(&Device::flex(), seen)
            .unwrap(),
    );
    let reference = indices(&epoch(&*whole)); // epoch 0
    let devices = [Device::flex(), Device::flex().autodiff()];
    let parts = split_dataloader(Arc::clone(&whole), &devices);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].num_items() + parts[1].num_items(), 48);
    // The parts continue where the whole was: epoch 1.
    let second = indices(&epoch(&*whole));
    let p0 = epoch(&*parts[0]);
    let p1 = epoch(&*parts[1]);
    let mut joined = indices(&p0);
    joined.extend(indices(&p1));
    assert_eq!(joined, second);
    assert_ne!(joined, reference);
    // Each part builds its tensors on its own device.
    assert!(!p0[0].x.device().is_autodiff());
    assert!(p1[0].x.device().is_autodiff());
}

#[test]
fn to_device_keeps_the_epoch() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let l = loader(dir.path(), 8, 2)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    let first = indices(&epoch(&l));
    let moved = l.to_device(&Device::flex().autodiff());
    assert_eq!(moved.num_items(), l.num_items());
    let batches = epoch(&*moved);
    assert!(batches[0].x.device().is_autodiff());
    assert_eq!(batches[0].step, 6, "continues with epoch 1");
    assert_ne!(indices(&batches), first);
    // The original is unaffected by the copy's iteration.
    assert_eq!(l.next_epoch(), 1);
    // The copy's pipeline counts in the original's stage table, also once
    // the copy is dropped (as burn's Learner drops its copies).
    let wait = loaderx_core::Stage::WaitBatch;
    assert_eq!(l.loader_stats().stages[wait].count, 12);
    drop(moved);
    let stats = l.loader_stats();
    assert_eq!(stats.stages[wait].count, 12);
    assert!(
        stats.batches >= 12 && stats.per_worker.len() == 2,
        "{stats}"
    );
}

#[test]
fn mapping_errors_reach_burn_and_the_next_epoch_recovers() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let l = loader(dir.path(), 8, 2)
        .build_burn(&Device::flex(), |b: HostBatch| {
            if b.step() == Some(2) {
                return Err(Error::Map("step two is bad".into()));
            }
            seen(b)
        })
        .unwrap();
    let results: Vec<_> = l.iter().collect();
    assert_eq!(results.len(), 3, "the epoch ends at its error");
    let e = results[2].as_ref().unwrap_err();
    assert!(e.to_string().contains("step two is bad"), "{e}");
    let next = epoch(&l);
    assert_eq!(next.len(), 6);
    assert_eq!(next[0].step, 6);
    // Kind and rank errors come back the same way.
    let l = loader(dir.path(), 8, 1)
        .build_burn(&Device::flex(), |b: HostBatch| b.int::<2>("x"))
        .unwrap();
    let e = l.iter().next().unwrap().unwrap_err();
    assert!(e.to_string().contains("cannot hold"), "{e}");
}

#[test]
fn tensor_loader_yields_every_kind_and_pads_ragged_streams() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let l = BurnDataLoader::builder()
        .dataset(&ZrecordDataset::open_dir(dir.path()).unwrap())
        .batch_size(10)
        .mode(SamplerMode::Sequential)
        .workers(2)
        .build_burn(&Device::flex(), Ok::<_, Error>)
        .unwrap();
    assert_eq!(l.num_items(), N);
    let batches: Vec<HostBatch> = l.iter().map(|b| b.unwrap()).collect();
    assert_eq!(batches.len(), 5);
    for (k, b) in batches.iter().enumerate() {
        assert_eq!(b.step(), Some(k as u64));
        assert_eq!(
            b.indices(),
            (k as u64 * 10..k as u64 * 10 + 10).collect::<Vec<_>>()
        );
        check_tensor_batch(b);
    }
    // Lossless cross-kind reads; lossy ones refused.
    let b = &batches[0];
    assert_eq!(floats(b.float::<1>("y").unwrap())[3], 3.0);
    assert_eq!(ints(b.int::<1>("flag").unwrap())[3], 1);
    assert!(matches!(b.int::<2>("x"), Err(Error::Kind { .. })));
    assert!(matches!(b.bool::<1>("y"), Err(Error::Kind { .. })));
    let column_kind = |e: &ErrorKind| matches!(e, ErrorKind::ColumnKind { .. });
    assert!(is_core(&b.float::<2>("tok").unwrap_err(), column_kind));
    assert!(is_core(&b.padded::<2, Int>("x").unwrap_err(), column_kind));
    assert!(matches!(b.float::<3>("x"), Err(Error::Rank { .. })));
    assert!(matches!(b.float::<1>("nope"), Err(Error::MissingStream(_))));
}

#[test]
fn host_batch_views_and_padding_helpers() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let l = BurnDataLoader::builder()
        .dataset(&ZrecordDataset::open_dir(dir.path()).unwrap())
        .batch_size(5)
        .mode(SamplerMode::Sequential)
        .build_burn(&Device::flex(), |b: HostBatch| {
            assert_eq!(b.kind("tok")?, loaderx_core::StoreKind::Ragged);
            assert_eq!(b.dtype("x")?, DType::F32);
            let x = b.dense::<f32>("x")?;
            assert_eq!(x.shape(), &[5, 3]);
            let tok = b.records::<i32>("tok")?;
            let padded = b.padded::<2, Float>("tok")?;
            let lengths = b.padded::<2, Int>("tok")?.lengths;
            let e = b.tensor::<2, Int>("tok").unwrap_err();
            assert!(is_core(&e, |k| matches!(k, ErrorKind::ColumnKind { .. })));
            assert!(e.to_string().contains("\"tok\""), "{e}");
            assert!(matches!(b.padded::<3, Int>("tok"), Err(Error::Rank { .. })));
            assert!(matches!(b.bool::<1>("y"), Err(Error::Kind { .. })));
            Ok::<_, Error>((
                x[[4, 0]],
                tok.iter().map(|t| t.len()).collect::<Vec<_>>(),
                padded,
                lengths,
            ))
        })
        .unwrap();
    let (x, tok_lens, padded, lengths) = l.iter().nth(1).unwrap().unwrap();
    assert_eq!(x, 9.0);
    assert_eq!(tok_lens, [2, 3, 4, 1, 2]);
    assert_eq!(padded.values.dims(), [5, 4]);
    assert_eq!(padded.mask.dims(), [5, 4]);
    assert_eq!(ints(lengths), [2, 3, 4, 1, 2]);
    assert_eq!(floats(padded.values)[..4], [5.0, 5.0, 0.0, 0.0]);
}

#[test]
fn integers_that_do_not_fit_the_device_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DenseWriter::<u64>::create(dir.path().join("big"), &[], Codec::Raw).unwrap();
    w.append_slice(&[1, 1 << 40, 3, 4], 4).unwrap();
    w.close().unwrap();
    let ds = ZrecordDataset::open_dir(dir.path()).unwrap();
    let device = Device::flex();
    let r = ds.get(1).unwrap();
    let e = r
        .field("big")
        .unwrap()
        .tensor::<1, Int>(&device)
        .unwrap_err();
    // flex holds Int tensors as i32: 2^40 does not fit and is not truncated.
    assert!(
        is_core(&e, |k| matches!(k, ErrorKind::OutOfRange { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("1099511627776"), "{e}");
    // burn has no rank-0 tensors: a scalar record is one element of rank 1.
    let e = r
        .field("big")
        .unwrap()
        .tensor::<0, Float>(&device)
        .unwrap_err();
    assert!(e.to_string().contains("rank 1 or more"), "{e}");
    // As Float it is fine, and small values fit as Int.
    let f = r.field("big").unwrap().tensor::<1, Float>(&device).unwrap();
    assert_eq!(floats(f), [(1u64 << 40) as f32]);
    let small = ds
        .get(3)
        .unwrap()
        .field("big")
        .unwrap()
        .tensor::<1, Int>(&device);
    assert_eq!(ints(small.unwrap()), [4]);
    // Through a HostBatcher the error is kept in the batch.
    let batch = burn::data::dataloader::batcher::Batcher::batch(
        &HostBatcher,
        ds.get_many(vec![0, 1]).unwrap(),
        &device,
    );
    let e = batch.int::<1>("big").unwrap_err();
    assert!(e.to_string().contains("does not fit"), "{e}");
}

#[test]
fn bf16_stores_are_burn_bf16_data_and_float8_and_complex_are_refused_by_name() {
    use loaderx_core::{CreateOptions, DynDenseWriter, Generation, bf16};
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    let options = CreateOptions::new(Codec::Zstd).generation(Generation::V2_8_19);
    // Every finite bf16 bit pattern, two per record.
    let values: Vec<bf16> = (0..=u16::MAX)
        .map(bf16::from_bits)
        .filter(|v| v.is_finite())
        .collect();
    let n = values.len() / 2;
    let bytes: Vec<u8> = values[..2 * n]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let path = dir.path().join("bf16");
    let mut w = DynDenseWriter::create(&path, DType::BF16, &[2], &options).unwrap();
    w.append_bytes(&bytes, n).unwrap();
    w.close().unwrap();
    assert_eq!(
        loaderx_burn::burn_dtype(DType::BF16).unwrap(),
        burn::tensor::DType::BF16
    );
    let ds = ZrecordDataset::builder()
        .stream("v", DynDense::open(&path).unwrap())
        .build()
        .unwrap();
    let batch = burn::data::dataloader::batcher::Batcher::batch(
        &HostBatcher,
        ds.get_many((0..n).collect()).unwrap(),
        &device,
    );
    assert_eq!(
        loaderx_burn::natural_kind(batch.dtype("v").unwrap()).unwrap(),
        Kind::Float
    );
    // On flex the float type is f32: every bf16 value converts exactly.
    let got = floats(batch.float::<2>("v").unwrap());
    let want: Vec<f32> = values[..2 * n].iter().map(|v| v.to_f32()).collect();
    assert_eq!(got.len(), want.len());
    assert!(
        got.iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits())
    );
    assert!(batch.int::<2>("v").is_err(), "bf16 is not an integer kind");
    // burn 0.22 has no float8 or complex type.
    for dtype in [
        DType::F8E4M3Fn,
        DType::F8E4M3Fnuz,
        DType::F8E5M2,
        DType::F8E5M2Fnuz,
        DType::F8E8M0Fnu,
        DType::C64,
        DType::C128,
    ] {
        let e = loaderx_burn::burn_dtype(dtype).unwrap_err();
        assert!(e.to_string().contains(dtype.name()), "{e}");
        assert!(!loaderx_burn::holds(Kind::Float, dtype));
        let path = dir.path().join(dtype.name());
        let mut w = DynDenseWriter::create(&path, dtype, &[2], &options).unwrap();
        w.append_bytes(&vec![0u8; 4 * dtype.size()], 2).unwrap();
        w.close().unwrap();
        let ds = ZrecordDataset::builder()
            .stream("v", DynDense::open(&path).unwrap())
            .build()
            .unwrap();
        let batch = burn::data::dataloader::batcher::Batcher::batch(
            &HostBatcher,
            ds.get_many(vec![0, 1]).unwrap(),
            &device,
        );
        let e = batch.float::<2>("v").unwrap_err();
        assert!(e.to_string().contains(dtype.name()), "{dtype}: {e}");
    }
}

#[test]
fn every_dtype_converts_by_the_table() {
    use loaderx_core::{CreateOptions, DynDenseWriter};
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    // The classic types; bf16, float8 and complex are refused by name
    // until the adapters map them.
    for dtype in DType::CLASSIC {
        let path = dir.path().join(dtype.name());
        // Values 0..6 in every type (bool: 0/1).
        let bytes: Vec<u8> = (0..6u8)
            .flat_map(|v| {
                let v = if dtype == DType::Bool { v % 2 } else { v };
                match dtype {
                    DType::Bool | DType::U8 | DType::I8 => vec![v],
                    DType::U16 | DType::I16 => u16::from(v).to_le_bytes().to_vec(),
                    DType::F16 => loaderx_core::f16::from(v).to_le_bytes().to_vec(),
                    DType::U32 | DType::I32 => u32::from(v).to_le_bytes().to_vec(),
                    DType::F32 => f32::from(v).to_le_bytes().to_vec(),
                    DType::F64 => f64::from(v).to_le_bytes().to_vec(),
                    _ => u64::from(v).to_le_bytes().to_vec(),
                }
            })
            .collect();
        let mut w =
            DynDenseWriter::create(&path, dtype, &[2], &CreateOptions::new(Codec::Raw)).unwrap();
        w.append_bytes(&bytes, 3).unwrap();
        w.close().unwrap();
        let ds = ZrecordDataset::builder()
            .stream("v", DynDense::open(&path).unwrap())
            .build()
            .unwrap();
        let batch = burn::data::dataloader::batcher::Batcher::batch(
            &HostBatcher,
            ds.get_many(vec![0, 1, 2]).unwrap(),
            &device,
        );
        let kind = loaderx_burn::natural_kind(dtype).unwrap();
        assert_eq!(batch.dtype("v").unwrap(), dtype, "{dtype}");
        let want: Vec<f32> = (0..6)
            .map(|v| {
                if dtype == DType::Bool {
                    (v % 2) as f32
                } else {
                    v as f32
                }
            })
            .collect();
        assert_eq!(floats(batch.float::<2>("v").unwrap()), want, "{dtype}");
        match kind {
            Kind::Int => assert_eq!(
                ints(batch.int::<2>("v").unwrap()),
                want.iter().map(|&v| v as i64).collect::<Vec<_>>()
            ),
            Kind::Bool => assert_eq!(
                bools(batch.bool::<2>("v").unwrap()),
                want.iter().map(|&v| v == 1.0).collect::<Vec<_>>()
            ),
            Kind::Float => assert!(batch.int::<2>("v").is_err()),
        }
        assert_eq!(
            loaderx_burn::burn_dtype(dtype).unwrap().size(),
            dtype.size()
        );
        assert!(loaderx_burn::holds(kind, dtype), "{dtype}");
        assert!(loaderx_burn::holds(Kind::Float, dtype), "{dtype}");
    }
    assert!(!loaderx_burn::holds(Kind::Int, DType::F32));
    assert!(!loaderx_burn::holds(Kind::Bool, DType::U8));
    assert!(loaderx_burn::holds(Kind::Int, DType::Bool));
}

#[test]
fn configuration_errors_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let e = BurnDataLoader::builder()
        .build_burn(&Device::flex(), |_: HostBatch| Ok::<_, Error>(()))
        .unwrap_err();
    assert!(matches!(e, Error::Core(_)), "{e}");
    assert!(e.to_string().contains("stream"), "{e}");
    let e = loader(dir.path(), 64, 1)
        .build_burn(&Device::flex(), seen)
        .unwrap_err();
    assert!(matches!(e, Error::Core(_)), "{e}");
    // No workers: core's synchronous loader, the same batches as with workers.
    let sync = loader(dir.path(), 8, 0)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    let threaded = loader(dir.path(), 8, 2)
        .build_burn(&Device::flex(), seen)
        .unwrap();
    let (a, b) = (epoch(&sync), epoch(&threaded));
    assert_eq!(indices(&a), indices(&b));
    for (a, b) in a.into_iter().zip(b) {
        assert_eq!(a.step, b.step);
        assert_eq!(floats(a.x), floats(b.x));
        assert_eq!(ints(a.y), ints(b.y));
    }
    // Sharded: every rank the same number of steps, disjoint records.
    let ranks: Vec<Vec<u64>> = (0..2)
        .map(|r| {
            let l = loader(dir.path(), 8, 1)
                .shard(r, 2)
                .build_burn(&Device::flex(), seen)
                .unwrap();
            assert_eq!(l.steps_per_epoch(), 3);
            indices(&epoch(&l))
        })
        .collect();
    let union: BTreeSet<u64> = ranks.concat().into_iter().collect();
    assert_eq!(union.len(), 48);
}

#[test]
fn plain_loaderx_loaders_can_use_the_tensor_helpers() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let device = Device::flex();
    let mut loader = loaderx_core::DataLoader::builder()
        .stream("x", Dense::<f32>::open(dir.path().join("x")).unwrap())
        .stream("y", DynDense::open(dir.path().join("y")).unwrap())
        .stream("flag", DynDense::open(dir.path().join("flag")).unwrap())
        .stream(
            "tok",
            loaderx_core::DynRagged::open(dir.path().join("tok")).unwrap(),
        )
        .batch_size(7)
        .workers(2)
        .staging(VecStaging)
        .build_with(move |b| Ok::<_, Error>(HostBatch::from_batch(b, &device)))
        .unwrap();
    for _ in 0..3 {
        let batch = loader.next().unwrap().unwrap();
        assert_eq!(batch.len(), 7);
        check_tensor_batch(&batch);
    }
}

#[test]
fn packed_ragged_streams_are_burn_tensors_gathered_or_packed_from_segments() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let device = Device::flex();
    let store = loaderx_core::DynRagged::open(dir.path().join("tok")).unwrap();
    for gathered_packed in [true, false] {
        let loader = BurnDataLoader::builder()
            .dataset(&ZrecordDataset::open_dir(dir.path()).unwrap())
            .batch_size(8)
            .packed(gathered_packed)
            .build_burn(&device, |b: HostBatch| {
                let p = b.packed::<Int>("tok")?;
                Ok::<_, Error>((b.indices().to_vec(), p))
            })
            .unwrap();
        let mut batches = 0;
        for batch in loader.iter() {
            let (indices, p) = batch.unwrap();
            let want = store.gather_packed(&indices).unwrap().packed().unwrap();
            let cu: Vec<i64> = ints(p.cu_seqlens);
            let expect_cu: Vec<i64> = want
                .cu_seqlens
                .as_slice::<i32>()
                .unwrap()
                .iter()
                .map(|&c| i64::from(c))
                .collect();
            assert_eq!(cu, expect_cu);
            assert_eq!(p.shapes.dims(), [indices.len(), 1]);
            let lens: Vec<i64> = indices.iter().map(|&i| 1 + i as i64 % 4).collect();
            assert_eq!(ints(p.shapes), lens);
            let values: Vec<i64> = indices
                .iter()
                .flat_map(|&i| std::iter::repeat_n(i as i64, 1 + i as usize % 4))
                .collect();
            assert_eq!(ints(p.values), values);
            batches += 1;
        }
        assert_eq!(batches, N / 8);
        // A Dense stream is not packed.
        let loader = BurnDataLoader::builder()
            .dataset(&ZrecordDataset::open_dir(dir.path()).unwrap())
            .batch_size(8)
            .build_burn(&device, |b: HostBatch| b.packed::<Float>("x").map(|_| ()))
            .unwrap();
        let e = loader.iter().next().unwrap().unwrap_err();
        assert!(e.to_string().contains("column is dense"), "{e}");
    }
}

#[test]
fn tensor_batches_are_cores_with_burn_host_data_in_every_ragged_mode() {
    let dir = tempfile::tempdir().unwrap();
    write_root(dir.path());
    let device = Device::flex();
    let converter = BurnConverter::new(&device);
    for mode in [
        RaggedMode::Padded,
        RaggedMode::Packed,
        RaggedMode::PerRecord,
    ] {
        let l = BurnDataLoader::builder()
            .dataset(&ZrecordDataset::open_dir(dir.path()).unwrap())
            .batch_size(10)
            .mode(SamplerMode::Sequential)
            .packed(mode == RaggedMode::Packed)
            .workers(2)
            .build_burn_tensors(&device, mode)
            .unwrap();
        let batches: Vec<TensorBatch> = l.iter().map(|b| b.unwrap()).collect();
        assert_eq!(batches.len(), 5);
        for (k, b) in batches.iter().enumerate() {
            assert_eq!(b.step, k as u64);
            let indices: Vec<u64> = (k as u64 * 10..k as u64 * 10 + 10).collect();
            assert_eq!(b.indices, indices);
            // Dense streams are burn host data in the store's own type.
            let x = b.dense("x").unwrap();
            assert_eq!(x.dtype(), burn::tensor::DType::F32);
            assert_eq!(x.shape().as_slice(), [10, 3]);
            let y = b.dense("y").unwrap();
            assert_eq!(
                y.as_slice::<u8>().unwrap(),
                indices.iter().map(|&i| (i % 10) as u8).collect::<Vec<_>>()
            );
            let flag =
                converter.tensor::<1, Bool>("flag", DType::Bool, b.dense("flag").unwrap().clone());
            assert_eq!(
                bools(flag.unwrap()),
                indices.iter().map(|&i| i % 2 == 1).collect::<Vec<_>>()
            );
            let x = converter
                .tensor::<2, Float>("x", DType::F32, x.clone())
                .unwrap();
            assert_eq!(
                floats(x)[3..6],
                [
                    indices[1] as f32,
                    indices[1] as f32 + 0.5,
                    -(indices[1] as f32)
                ]
            );
            assert!(matches!(
                converter.tensor::<2, Int>("x", DType::F32, b.dense("x").unwrap().clone()),
                Err(Error::Kind { .. })
            ));
            let lens: Vec<usize> = indices.iter().map(|&i| 1 + i as usize % 4).collect();
            let values: Vec<i32> = indices
                .iter()
                .flat_map(|&i| std::iter::repeat_n(i as i32, 1 + i as usize % 4))
                .collect();
            match b.column("tok").unwrap() {
                TensorColumn::Padded(p) => {
                    assert_eq!(mode, RaggedMode::Padded);
                    let max = *lens.iter().max().unwrap();
                    assert_eq!(p.values.shape().as_slice(), [10, max]);
                    let got: Vec<i64> = p.lengths.as_slice::<i64>().unwrap().to_vec();
                    assert_eq!(got, lens.iter().map(|&l| l as i64).collect::<Vec<_>>());
                }
                TensorColumn::Packed(p) => {
                    assert_eq!(mode, RaggedMode::Packed);
                    assert_eq!(p.values.as_slice::<i32>().unwrap(), values);
                    let cu = p.cu_seqlens.as_slice::<i32>().unwrap();
                    assert_eq!((cu.len(), cu[10] as usize), (11, values.len()));
                }
                TensorColumn::Records(r) => {
                    assert_eq!(mode, RaggedMode::PerRecord);
                    let shapes: Vec<usize> = r.iter().map(|t| t.shape().as_slice()[0]).collect();
                    assert_eq!(shapes, lens);
                }
                other => panic!("{mode:?}: {other:?}"),
            }
        }
    }
}
