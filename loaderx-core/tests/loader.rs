//! The DataLoader: step order, exact resume, bounded memory, failures, shutdown.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use loaderx_core::adapter::{StageRequest, StagedBuffer, Staging};
use loaderx_core::{Batch, DataLoader};
use loaderx_core::{
    Codec, Dense, DenseWriter, DigestBuilder, DynDense, Error, ErrorKind, Ragged, RaggedWriter,
};
use loaderx_core::{Sampler, SamplerMode};

const N: u64 = 1000;

/// Dense `x` (u32[3] = [i, 2i, 3i]), Dense `y` (u8 scalar = i % 251), Ragged
/// `tok` (u16 record of length 1 + i % 7, all equal to i).
fn stores(dir: &Path) {
    let x: Vec<u32> = (0..N as u32).flat_map(|i| [i, 2 * i, 3 * i]).collect();
    let mut w = DenseWriter::<u32>::create(dir.join("x"), &[3], Codec::Zstd).unwrap();
    w.append_slice(&x, N as usize).unwrap();
    w.close().unwrap();
    let y: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
    let mut w = DenseWriter::<u8>::create(dir.join("y"), &[], Codec::Raw).unwrap();
    w.append_slice(&y, N as usize).unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<u16>::create(dir.join("tok"), 1, Codec::Zstd).unwrap();
    w.append((0..N).map(|i| vec![i as u16; 1 + i as usize % 7]))
        .unwrap();
    w.close().unwrap();
}

fn builder(dir: &Path) -> loaderx_core::DataLoaderBuilder {
    DataLoader::builder()
        .stream("x", Dense::<u32>::open(dir.join("x")).unwrap())
        .stream("y", Dense::<u8>::open(dir.join("y")).unwrap())
        .stream("tok", Ragged::<u16>::open(dir.join("tok")).unwrap())
        .batch_size(32)
        .seed(9)
}

/// A fingerprint of everything a batch holds.
fn fingerprint<B: StagedBuffer>(b: &Batch<B>) -> (u64, Vec<u64>, String) {
    let mut d = DigestBuilder::new();
    for c in b.columns() {
        d.push(c.shape().unwrap_or(&[]), c.bytes());
    }
    (b.step(), b.indices().to_vec(), d.finish().sha256)
}

fn check_alignment<B: StagedBuffer>(b: &Batch<B>) {
    let x = b.dense::<u32>("x").unwrap();
    let y = b.dense::<u8>("y").unwrap();
    let tok = b.ragged::<u16>("tok").unwrap();
    assert_eq!(x.shape(), &[32, 3]);
    for (k, &i) in b.indices().iter().enumerate() {
        assert_eq!(x[[k, 2]], 3 * i as u32);
        assert_eq!(y[[k]], (i % 251) as u8);
        assert_eq!(tok[k].len(), 1 + i as usize % 7);
        assert!(tok[k].iter().all(|&t| t == i as u16));
    }
}

#[test]
fn step_order_and_exact_resume_for_any_worker_count() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let reference: Vec<_> = builder(dir.path())
        .workers(1)
        .build()
        .unwrap()
        .take(40)
        .map(|b| {
            let b = b.unwrap();
            check_alignment(&b);
            fingerprint(&b)
        })
        .collect();
    for (k, f) in reference.iter().enumerate() {
        assert_eq!(f.0, k as u64);
    }
    let sampler = Sampler::new(N, 32, SamplerMode::Cyclic, 9).unwrap();
    assert_eq!(reference[17].1, sampler.clone().nth(17).unwrap());
    for workers in [1, 2, 4] {
        let full: Vec<_> = builder(dir.path())
            .workers(workers)
            .prefetch(3)
            .build()
            .unwrap()
            .take(40)
            .map(|b| fingerprint(&b.unwrap()))
            .collect();
        assert_eq!(full, reference, "{workers} workers");
        let resumed = builder(dir.path())
            .workers(workers)
            .start_step(23)
            .build()
            .unwrap();
        assert_eq!(resumed.step(), 23);
        let resumed: Vec<_> = resumed.take(17).map(|b| fingerprint(&b.unwrap())).collect();
        assert_eq!(resumed, reference[23..], "resume with {workers} workers");
    }
}

#[test]
fn transform_runs_on_workers_and_keeps_order() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let main = std::thread::current().id();
    let loader = builder(dir.path())
        .workers(3)
        .build_with(move |b: Batch| {
            assert_ne!(std::thread::current().id(), main);
            // Uneven work so workers finish out of order.
            if b.step().is_multiple_of(3) {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok::<_, Error>((b.step(), b.dense::<u32>("x")?.sum()))
        })
        .unwrap();
    for (k, r) in loader.take(30).enumerate() {
        assert_eq!(r.unwrap().0, k as u64);
    }
}

/// Counts live staged buffers, to prove the memory bound by accounting.
#[derive(Default)]
struct Counting {
    live: Arc<AtomicUsize>,
    max_live: Arc<AtomicUsize>,
    fail_at: Option<u64>,
    panic_at: Option<u64>,
}

struct CountedBuf {
    bytes: Vec<u64>,
    len: usize,
    live: Arc<AtomicUsize>,
}

impl StagedBuffer for CountedBuf {
    fn as_bytes(&self) -> &[u8] {
        &bytemuck_bytes(&self.bytes)[..self.len]
    }
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut bytemuck_bytes_mut(&mut self.bytes)[..len]
    }
}

impl Drop for CountedBuf {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

fn bytemuck_bytes(v: &[u64]) -> &[u8] {
    bytemuck::cast_slice(v)
}

fn bytemuck_bytes_mut(v: &mut [u64]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

impl Staging for Counting {
    type Buffer = CountedBuf;

    fn stage(&self, r: &StageRequest<'_>) -> Result<CountedBuf, Error> {
        if Some(r.step) == self.fail_at {
            return Err(Error::from(ErrorKind::InvalidArgument {
                message: "staging refused".into(),
            }));
        }
        if Some(r.step) == self.panic_at {
            panic!("staging hook panicked at step {}", r.step);
        }
        let now = self.live.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_live.fetch_max(now, Ordering::SeqCst);
        Ok(CountedBuf {
            bytes: vec![0; r.bytes.div_ceil(8)],
            len: r.bytes,
            live: Arc::clone(&self.live),
        })
    }
}

#[test]
fn memory_is_bounded_by_workers_plus_prefetch() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    for (workers, prefetch) in [(1, 1), (2, 3), (4, 2)] {
        let staging = Counting::default();
        let (live, max_live) = (Arc::clone(&staging.live), Arc::clone(&staging.max_live));
        let mut loader = builder(dir.path())
            .workers(workers)
            .prefetch(prefetch)
            .staging(staging)
            .build()
            .unwrap();
        // A slow consumer that keeps the last 2 batches alive.
        let mut held = std::collections::VecDeque::new();
        for _ in 0..60 {
            held.push_back(loader.next().unwrap().unwrap());
            if held.len() > 2 {
                held.pop_front();
            }
            std::thread::yield_now();
        }
        let cap = workers + prefetch;
        assert!(loader.stats().max_in_flight <= cap, "{:?}", loader.stats());
        assert!(loader.stats().max_in_flight >= 1);
        // 3 streams per batch; in flight plus the 2 the consumer holds plus
        // the one being handed over.
        let bound = 3 * (cap + 3);
        assert!(
            max_live.load(Ordering::SeqCst) <= bound,
            "{} > {bound}",
            max_live.load(Ordering::SeqCst)
        );
        drop(held);
        drop(loader);
        assert_eq!(live.load(Ordering::SeqCst), 0, "buffers leaked");
    }
    // The default pool recycles: 200 steps allocate no more than the window holds.
    let mut loader = builder(dir.path()).workers(2).prefetch(2).build().unwrap();
    for _ in 0..200 {
        drop(loader.next().unwrap().unwrap());
    }
    let stats = loader.stats();
    assert!(stats.pool_allocations <= 3 * (4 + 2) as u64, "{stats:?}");
}

#[test]
fn failures_reach_the_consumer_then_the_iterator_ends() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    // Transform error at step 5.
    let mut loader = builder(dir.path())
        .workers(3)
        .build_with(|b: Batch| {
            if b.step() == 5 {
                Err("bad batch".to_string())
            } else {
                Ok(b.step())
            }
        })
        .unwrap();
    for k in 0..5 {
        assert_eq!(loader.next().unwrap().unwrap(), k);
    }
    let e = loader.next().unwrap().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Transform { step: 5, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("bad batch"));
    assert!(loader.next().is_none());

    // Transform panic at step 2.
    let mut loader = builder(dir.path())
        .workers(2)
        .build_with(|b: Batch| -> Result<u64, Error> {
            assert!(b.step() != 2, "boom at two");
            Ok(b.step())
        })
        .unwrap();
    assert!(loader.next().unwrap().is_ok());
    assert!(loader.next().unwrap().is_ok());
    let e = loader.next().unwrap().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::WorkerPanicked { step: 2, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("boom at two"));
    assert!(loader.next().is_none());

    // Staging error and staging panic.
    let staging = Counting {
        fail_at: Some(3),
        ..Counting::default()
    };
    let results: Vec<_> = builder(dir.path())
        .staging(staging)
        .build()
        .unwrap()
        .collect();
    assert_eq!(results.len(), 4);
    assert!(results[3].is_err());
    let staging = Counting {
        panic_at: Some(0),
        ..Counting::default()
    };
    let results: Vec<_> = builder(dir.path())
        .staging(staging)
        .build()
        .unwrap()
        .collect();
    assert_eq!(results.len(), 1);

    // Gather error: damage a record's stored dims in the ragged stream.
    let damaged = tempfile::tempdir().unwrap();
    stores(damaged.path());
    // 2.4.6 (12-byte records, dims read at gather time, not at open).
    let opts =
        loaderx_core::CreateOptions::new(Codec::Raw).generation(loaderx_core::Generation::V2_4_6);
    let mut w = RaggedWriter::<u16>::create_with(damaged.path().join("bad"), 1, &opts).unwrap();
    w.append((0..N).map(|i| vec![i as u16; 2])).unwrap();
    w.close().unwrap();
    std::fs::write(
        damaged.path().join("bad").join("data_0.zr"),
        vec![0xff; 12 * 250],
    )
    .unwrap();
    let results: Vec<_> = builder(damaged.path())
        .stream(
            "bad",
            Ragged::<u16>::open(damaged.path().join("bad")).unwrap(),
        )
        .build()
        .unwrap()
        .collect();
    let e = results.last().unwrap().as_ref().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Gather { step: 0, stream, .. } if stream == "bad"),
        "{e}"
    );
}

/// Runs `f` on another thread and fails if it takes more than 20 s.
fn within_watchdog(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("loader did not shut down in time");
}

#[test]
fn dropping_stops_and_joins_promptly() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    for consumed in [0, 1, 7] {
        let loader = builder(dir.path()).workers(4).prefetch(3).build().unwrap();
        within_watchdog(move || {
            let mut loader = loader;
            for _ in 0..consumed {
                loader.next().unwrap().unwrap();
            }
            // Let the workers fill the window before dropping.
            std::thread::sleep(Duration::from_millis(50));
            joins_within_a_second(loader);
        });
    }
    // Under load: large batches, every worker busy gathering and decoding.
    for workers in [1, 2, 4] {
        let loader = builder(dir.path())
            .batch_size(N as usize)
            .workers(workers)
            .prefetch(4)
            .build()
            .unwrap();
        within_watchdog(move || {
            let mut loader = loader;
            loader.next().unwrap().unwrap();
            joins_within_a_second(loader);
        });
    }
    // Slow transform: drop waits only for batches already being made.
    let loader = builder(dir.path())
        .workers(2)
        .build_with(|b: Batch| {
            std::thread::sleep(Duration::from_millis(30));
            Ok::<_, Error>(b.step())
        })
        .unwrap();
    within_watchdog(move || joins_within_a_second(loader));
}

/// Drops `loader` and checks that its workers were joined within a second.
fn joins_within_a_second<T>(loader: DataLoader<T>) {
    let started = Instant::now();
    drop(loader);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "drop took {took:?}");
}

#[test]
fn shards_read_disjoint_indices() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let a: Vec<Vec<u64>> = builder(dir.path())
        .shard(0, 2)
        .build()
        .unwrap()
        .take(15)
        .map(|b| b.unwrap().indices().to_vec())
        .collect();
    let b: Vec<Vec<u64>> = builder(dir.path())
        .shard(1, 2)
        .build()
        .unwrap()
        .take(15)
        .map(|b| b.unwrap().indices().to_vec())
        .collect();
    let loader = builder(dir.path()).shard(1, 2).build().unwrap();
    assert_eq!(loader.steps_per_epoch(), N / 64);
    let mut seen = std::collections::HashSet::new();
    for batch in a.iter().chain(&b) {
        for &i in batch {
            assert!(seen.insert(i), "index {i} read twice within a cycle");
        }
    }
}

#[test]
fn bad_configurations_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    assert!(DataLoader::builder().build().is_err());
    let mut w = DenseWriter::<u8>::create(dir.path().join("short"), &[], Codec::Raw).unwrap();
    w.append_slice(&[1, 2, 3], 3).unwrap();
    w.close().unwrap();
    let e = builder(dir.path())
        .stream("short", DynDense::open(dir.path().join("short")).unwrap())
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("same number of records"), "{e}");
    assert!(
        builder(dir.path())
            .stream("x", DynDense::open(dir.path().join("x")).unwrap())
            .build()
            .is_err()
    );
    assert!(builder(dir.path()).batch_size(0).build().is_err());
    assert!(builder(dir.path()).shard(2, 2).build().is_err());
    assert!(
        builder(dir.path())
            .sampler(Sampler::new(5, 2, SamplerMode::Iid, 0).unwrap())
            .build()
            .is_err()
    );
    // A caller-built sampler drives the loader.
    let s = Sampler::new(N, 8, SamplerMode::Sequential, 0).unwrap();
    let mut l = builder(dir.path()).sampler(s).build().unwrap();
    assert_eq!(
        l.next().unwrap().unwrap().indices(),
        &[0, 1, 2, 3, 4, 5, 6, 7]
    );
}

#[test]
fn a_start_step_at_the_end_of_u64_wraps() {
    // Workers claim steps past u64::MAX: they wrap like the sampler's.
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let steps: Vec<u64> = builder(dir.path())
        .workers(2)
        .start_step(u64::MAX - 1)
        .build()
        .unwrap()
        .take(4)
        .map(|b| b.unwrap().step())
        .collect();
    assert_eq!(steps, vec![u64::MAX - 1, u64::MAX, 0, 1]);
}

#[test]
fn a_sought_sampler_starts_the_loader_at_its_step() {
    // A custom sampler that was `seek`ed used to have its step ignored.
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let sampler = || Sampler::new(N, 10, SamplerMode::Cyclic, 9).unwrap();
    let mut sought = sampler();
    sought.seek(37);
    let mut from_sampler = builder(dir.path()).sampler(sought.clone()).build().unwrap();
    let mut from_start = builder(dir.path())
        .sampler(sampler())
        .start_step(37)
        .build()
        .unwrap();
    for _ in 0..3 {
        let (a, b) = (
            from_sampler.next().unwrap().unwrap(),
            from_start.next().unwrap().unwrap(),
        );
        assert_eq!(fingerprint(&a), fingerprint(&b));
    }
    assert_eq!(from_sampler.step(), 40);
    // Agreeing positions are fine; conflicting ones are refused.
    assert!(
        builder(dir.path())
            .sampler(sought.clone())
            .start_step(37)
            .build()
            .is_ok()
    );
    let e = builder(dir.path())
        .sampler(sought)
        .start_step(5)
        .build()
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
}

#[test]
fn a_batch_size_beyond_memory_is_a_buffer_error_not_a_panic() {
    // `Iid` takes any batch size; the step's indices were allocated with an
    // infallible `vec!`, which panics (capacity overflow) or aborts here.
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    for batch in [usize::MAX / 8, usize::MAX / 16 + 1] {
        let mut loader = DataLoader::builder()
            .stream("y", Dense::<u8>::open(dir.path().join("y")).unwrap())
            .batch_size(batch)
            .mode(SamplerMode::Iid)
            .workers(1)
            .prefetch(0)
            .build()
            .unwrap();
        let e = loader.next().unwrap().unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Buffer { .. }), "{batch}: {e}");
    }
}

/// Every sampling mode, finite and endless, resumed and sharded: a loader
/// without workers delivers exactly the threaded loader's batches, makes
/// them in the caller's thread, and never holds one ahead.
#[test]
fn a_synchronous_loader_delivers_the_threaded_batches_in_the_callers_thread() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let modes = [
        SamplerMode::Sequential,
        SamplerMode::Iid,
        SamplerMode::Cyclic,
        SamplerMode::Bucketed { window: 3 },
        SamplerMode::TokenBudget {
            max_tokens: 96,
            buckets: 4,
        },
    ];
    let caller = std::thread::current().id();
    for mode in modes {
        for (start, epochs, shard) in [(0, None, None), (7, Some(2), None), (3, None, Some((1, 3)))]
        {
            let configure = |workers: usize| {
                let mut b = builder(dir.path())
                    .mode(mode)
                    .workers(workers)
                    .start_step(start);
                if let Some(e) = epochs {
                    b = b.epochs(e);
                }
                if let Some((rank, world)) = shard {
                    b = b.shard(rank, world);
                }
                b
            };
            // A finite loader is run to its end, an endless one for 70 steps.
            let steps = if epochs.is_some() { usize::MAX } else { 70 };
            let threaded: Vec<_> = configure(3)
                .build()
                .unwrap()
                .take(steps)
                .map(|b| fingerprint(&b.unwrap()))
                .collect();
            let ran_on = Arc::new(std::sync::Mutex::new(Vec::new()));
            let seen = Arc::clone(&ran_on);
            let mut sync = configure(0)
                .build_with(move |b: Batch| -> Result<_, Error> {
                    seen.lock().unwrap().push(std::thread::current().id());
                    Ok(fingerprint(&b))
                })
                .unwrap();
            let mut got = Vec::new();
            for (k, b) in sync.by_ref().take(steps).enumerate() {
                got.push(b.unwrap());
                // Nothing is made ahead of what the caller asked for.
                assert_eq!(ran_on.lock().unwrap().len(), k + 1, "{mode:?}");
            }
            assert_eq!(
                got, threaded,
                "{mode:?} start {start} epochs {epochs:?} shard {shard:?}"
            );
            assert!(
                ran_on.lock().unwrap().iter().all(|&t| t == caller),
                "{mode:?}"
            );
            assert_eq!(sync.stats().max_in_flight, 0);
            if epochs.is_some() {
                assert!(
                    got.len() > 40,
                    "{mode:?}: two passes of 1000 records from step 7"
                );
                assert!(sync.next().is_none(), "{mode:?}: past the last epoch");
            }
        }
    }
}

#[test]
fn a_synchronous_loader_reports_failures_at_their_step_then_ends() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let mut loader = builder(dir.path())
        .workers(0)
        .build_with(|b: Batch| {
            if b.step() == 3 {
                Err("bad batch".to_string())
            } else {
                Ok(b.step())
            }
        })
        .unwrap();
    for k in 0..3 {
        assert_eq!(loader.next().unwrap().unwrap(), k);
    }
    let e = loader.next().unwrap().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Transform { step: 3, .. }),
        "{e}"
    );
    assert!(loader.next().is_none());
    assert_eq!(loader.remaining_steps(), Some(0));

    // A panic in the caller's transform is the step's error, not an unwind
    // through the training loop.
    let mut loader = builder(dir.path())
        .workers(0)
        .build_with(|b: Batch| -> Result<u64, Error> {
            assert!(b.step() != 1, "boom at one");
            Ok(b.step())
        })
        .unwrap();
    assert_eq!(loader.next().unwrap().unwrap(), 0);
    let e = loader.next().unwrap().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::WorkerPanicked { step: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("boom at one"));
    assert!(loader.next().is_none());

    // A staging hook's error at step 2.
    let staging = Counting {
        fail_at: Some(2),
        ..Counting::default()
    };
    let results: Vec<_> = builder(dir.path())
        .workers(0)
        .staging(staging)
        .build()
        .unwrap()
        .collect();
    assert_eq!(results.len(), 3);
    assert!(results[2].is_err());
}

/// Records the step and shape of each Ragged request, staging in plain
/// memory.
#[derive(Default, Clone)]
#[allow(clippy::type_complexity)]
struct RaggedShapes(Arc<std::sync::Mutex<Vec<(u64, Option<Vec<usize>>)>>>);

impl Staging for RaggedShapes {
    type Buffer = loaderx_core::adapter::AlignedBuf;

    fn stage(&self, r: &StageRequest<'_>) -> Result<loaderx_core::adapter::AlignedBuf, Error> {
        if r.kind == loaderx_core::StoreKind::Ragged {
            self.0
                .lock()
                .unwrap()
                .push((r.step, r.shape.map(<[usize]>::to_vec)));
        }
        loaderx_core::adapter::AlignedBuf::zeroed(r.bytes)
    }
}

#[test]
fn a_packed_loader_delivers_the_same_records_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    for workers in [0, 2] {
        let plain: Vec<Batch> = builder(dir.path()).workers(workers).take_steps(40);
        let shapes = RaggedShapes::default();
        let packed = builder(dir.path())
            .workers(workers)
            .packed(true)
            .staging(shapes.clone())
            .take_steps(40);
        for (a, b) in plain.iter().zip(&packed) {
            assert_eq!(a.indices(), b.indices());
            check_alignment(b);
            let (ta, tb) = (a.column("tok").unwrap(), b.column("tok").unwrap());
            let layout = tb.ragged_layout().unwrap();
            assert!(layout.is_packed());
            assert!(!ta.ragged_layout().unwrap().is_packed());
            // The column's bytes are the values, end to end.
            assert_eq!(tb.bytes().len(), layout.packed_bytes());
            let p = tb.packed().unwrap();
            assert_eq!(p, ta.packed().unwrap());
            assert_eq!(p.values.bytes(), tb.bytes());
            assert_eq!(
                tb.padded(loaderx_core::adapter::PadValue::ZERO).unwrap(),
                ta.padded(loaderx_core::adapter::PadValue::ZERO).unwrap()
            );
            // Dense streams are untouched.
            assert_eq!(
                a.column("x").unwrap().bytes(),
                b.column("x").unwrap().bytes()
            );
            let staged = shapes.0.lock().unwrap().clone();
            assert!(
                staged
                    .iter()
                    .all(|(_, s)| s.as_ref().is_some_and(|s| s.len() == 1))
            );
        }
        // Step 0's request (workers stage steps in any order) asked for its
        // values as one array.
        let staged = shapes.0.lock().unwrap();
        let first = staged.iter().find(|(step, _)| *step == 0).unwrap();
        let want = packed[0].column("tok").unwrap().bytes().len() / 2;
        assert_eq!(first.1.as_deref(), Some(&[want][..]));
    }
}

trait TakeSteps {
    type Buffer;
    fn take_steps(self, n: usize) -> Vec<Batch<Self::Buffer>>;
}

impl<S: Staging> TakeSteps for loaderx_core::DataLoaderBuilder<S> {
    type Buffer = S::Buffer;
    fn take_steps(self, n: usize) -> Vec<Batch<S::Buffer>> {
        self.build().unwrap().take(n).map(Result::unwrap).collect()
    }
}

/// A converter whose "tensors" say where their bytes came from.
struct Origins;

#[derive(Debug, PartialEq)]
enum Origin {
    /// The staged buffer, handed over.
    Buffer(Vec<usize>, Vec<u8>),
    /// Copied from bytes.
    Copied(Vec<usize>, Vec<u8>),
}

impl loaderx_core::adapter::ColumnConverter for Origins {
    type Tensor = Origin;
    type Error = Error;
    type Staging = loaderx_core::adapter::BufferPool;
    fn staging(&self) -> loaderx_core::adapter::BufferPool {
        loaderx_core::adapter::BufferPool::new(0)
    }
    fn tensor_from_bytes(
        &self,
        _: loaderx_core::DType,
        bytes: &[u8],
        shape: &[usize],
    ) -> Result<Origin, Error> {
        Ok(Origin::Copied(shape.to_vec(), bytes.to_vec()))
    }
    fn buffer_tensor(
        &self,
        column: loaderx_core::Column<loaderx_core::adapter::PooledBuffer>,
        shape: &[usize],
    ) -> Result<Origin, Error> {
        let n = shape.iter().product::<usize>() * column.dtype().size();
        Ok(Origin::Buffer(shape.to_vec(), column.bytes()[..n].to_vec()))
    }
}

#[test]
fn packed_tensor_batches_take_the_gathered_buffer_as_their_values() {
    use loaderx_core::adapter::{ColumnConverter, RaggedMode, TensorColumn};
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    for workers in [0, 2] {
        let mut loader = builder(dir.path())
            .workers(workers)
            .build_tensors(Origins, RaggedMode::Packed, Ok)
            .unwrap();
        let batch = loader.next().unwrap().unwrap();
        let p = batch.packed("tok").unwrap();
        let Origin::Buffer(shape, values) = &p.values else {
            panic!("packed values were copied: {:?}", p.values);
        };
        let cu = match &p.cu_seqlens {
            Origin::Copied(s, b) => {
                assert_eq!(s, &[33]);
                b.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                    .collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(shape, &[*cu.last().unwrap() as usize]);
        for (k, &i) in batch.indices.iter().enumerate() {
            let (a, b) = (cu[k] as usize, cu[k + 1] as usize);
            assert_eq!(b - a, 1 + i as usize % 7);
            let tokens: Vec<u16> = values[2 * a..2 * b]
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            assert!(tokens.iter().all(|&t| t == i as u16));
        }
        assert!(matches!(p.shapes, Origin::Copied(ref s, _) if s == &[32, 1]));
        assert!(batch.padded("tok").is_err());
        assert!(matches!(
            batch.column("x").unwrap(),
            TensorColumn::Dense(Origin::Buffer(..))
        ));
    }
    // A column gathered in segments is packed by a copy.
    let batch = builder(dir.path())
        .workers(0)
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let (_, tok) = batch.into_columns().into_iter().nth(2).unwrap();
    let p = Origins.packed(tok).unwrap();
    assert!(matches!(p.values, Origin::Copied(..)));
    let (_, x) = builder(dir.path())
        .workers(0)
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .into_columns()
        .into_iter()
        .next()
        .unwrap();
    let e = Origins.packed(x).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ColumnKind { .. }), "{e}");
}
