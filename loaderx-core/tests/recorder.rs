//! The loader's flight recorder: the stage accounting (a batch's stages
//! add up to its wall time), the bottleneck it names, the stats of a
//! period, the trace file (valid JSON, a lane per worker and the
//! consumer's) and the `tracing` spans. Behaviour only, never speed.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loaderx_core::{
    Batch, Bottleneck, Codec, DataLoader, DataLoaderBuilder, Dense, DenseWriter, Ragged,
    RaggedWriter, Stage,
};

const N: u64 = 600;

/// Dense `x` (u32[4], raw) and Ragged `tok` (u16, zstd).
fn stores(dir: &Path) {
    let x: Vec<u32> = (0..N as u32 * 4).collect();
    let mut w = DenseWriter::<u32>::create(dir.join("x"), &[4], Codec::Raw).unwrap();
    w.append_slice(&x, N as usize).unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<u16>::create(dir.join("tok"), 1, Codec::Zstd).unwrap();
    w.append((0..N).map(|i| vec![i as u16; 1 + i as usize % 9]))
        .unwrap();
    w.close().unwrap();
}

fn builder(dir: &Path) -> DataLoaderBuilder {
    DataLoader::builder()
        .stream("x", Dense::<u32>::open(dir.join("x")).unwrap())
        .stream("tok", Ragged::<u16>::open(dir.join("tok")).unwrap())
        .batch_size(8)
}

fn slow_collate(batch: Batch) -> Result<Batch, std::convert::Infallible> {
    std::thread::sleep(Duration::from_millis(2));
    Ok(batch)
}

#[test]
fn a_slow_stage_is_named_the_bottleneck_and_every_batch_adds_up() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let mut loader = builder(dir.path())
        .workers(2)
        .build_with(slow_collate)
        .unwrap();
    for b in loader.by_ref().take(40) {
        b.unwrap();
    }
    let stats = loader.stats();
    assert!(stats.recorded && !stats.synchronous);
    assert!(stats.batches >= 40, "{stats:?}");
    assert_eq!(stats.per_worker.len(), 2);
    assert_eq!(
        stats.bottleneck(),
        Some(Bottleneck::Stage(Stage::Collate)),
        "{stats}"
    );
    // Every batch's stages add up to its wall time: per worker, the
    // batch totals are the stage totals.
    for w in &stats.per_worker {
        assert_eq!(w.batch.total, w.stages.busy(), "worker {}", w.worker);
        assert!(w.batches > 0, "both workers made batches");
    }
    assert_eq!(stats.batch.total, stats.stages.busy());
    assert!(stats.batch.total >= Duration::from_millis(2 * 40));
    // The stages each part of the pipeline ran in were timed.
    for stage in [Stage::Sample, Stage::Locate, Stage::Read, Stage::Decompress] {
        assert_eq!(stats.stages[stage].count, stats.batches, "{stage}");
    }
    assert!(stats.stages[Stage::Collate].p50 >= Duration::from_millis(1));
    assert_eq!(stats.stages[Stage::WaitBatch].count, 40);
    assert!(stats.bytes_read > 0 && stats.bytes_delivered > 0);
    let table = stats.to_string();
    assert!(table.contains("bottleneck: collate"), "{table}");
    for name in [
        "stage",
        "total",
        "share",
        "p50",
        "p95",
        "p99",
        "read",
        "wait_batch",
    ] {
        assert!(table.contains(name), "{name} in {table}");
    }
}

#[test]
fn a_slow_consumer_is_the_bottleneck() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let mut loader = builder(dir.path()).workers(2).prefetch(2).build().unwrap();
    // The workers fill the window first: the consumer never waits after.
    std::thread::sleep(Duration::from_millis(50));
    for b in loader.by_ref().take(20) {
        b.unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = loader.stats();
    assert_eq!(stats.bottleneck(), Some(Bottleneck::Consumer), "{stats}");
    assert!(stats.stages[Stage::WaitConsumer].total > Duration::ZERO);
    assert!(stats.queue_depth >= 1.0, "{stats}");
}

#[test]
fn stats_since_the_last_snapshot_cover_only_their_period() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    // Synchronous: the batches made are exactly those taken.
    let mut loader = builder(dir.path()).workers(0).build().unwrap();
    for b in loader.by_ref().take(10) {
        b.unwrap();
    }
    let first = loader.stats_since_last();
    assert!(first.synchronous);
    assert_eq!(first.batches, 10);
    assert_eq!(first.per_worker.len(), 1);
    assert_eq!(first.per_worker[0].batches, 10);
    assert_eq!(first.stages[Stage::Sample].count, 10);
    for b in loader.by_ref().take(5) {
        b.unwrap();
    }
    let second = loader.stats_since_last();
    assert_eq!(second.batches, 5);
    assert_eq!(second.stages[Stage::Sample].count, 5);
    assert_eq!(second.batch.total, second.stages.busy());
    assert!(second.wall <= loader.stats().wall);
    let empty = loader.stats_since_last();
    assert_eq!(empty.batches, 0);
    assert_eq!(empty.stages.busy(), Duration::ZERO);
    assert_eq!(empty.bottleneck(), None);
    // Since the start, always everything.
    let all = loader.stats();
    assert_eq!(all.batches, 15);
    assert_eq!(
        all.stages[Stage::Read].total,
        first.stages[Stage::Read].total + second.stages[Stage::Read].total
    );
}

#[test]
fn recording_off_records_nothing_and_writes_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let path = dir.path().join("off.json");
    let mut loader = builder(dir.path())
        .workers(2)
        .record_stages(false)
        .trace(&path)
        .build()
        .unwrap();
    for b in loader.by_ref().take(10) {
        b.unwrap();
    }
    let stats = loader.stats();
    assert!(!stats.recorded);
    assert_eq!(stats.batches, 0);
    assert_eq!(stats.bottleneck(), None);
    assert!(stats.to_string().contains("recording was off"));
    drop(loader);
    assert!(!path.exists());
}

/// The trace's complete events by lane: `(name, ts, dur, args)`.
type Lanes = BTreeMap<u64, Vec<(String, f64, f64, serde_json::Value)>>;

fn read_trace(path: &Path) -> (BTreeMap<u64, String>, Lanes) {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut names = BTreeMap::new();
    let mut lanes = Lanes::new();
    for e in v.as_array().unwrap() {
        let tid = e["tid"].as_u64().unwrap();
        match e["ph"].as_str().unwrap() {
            "M" if e["name"] == "thread_name" => {
                names.insert(tid, e["args"]["name"].as_str().unwrap().to_owned());
            }
            "X" => lanes.entry(tid).or_default().push((
                e["name"].as_str().unwrap().to_owned(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
                e["args"].clone(),
            )),
            _ => {}
        }
    }
    (names, lanes)
}

#[test]
fn the_trace_file_is_json_with_a_lane_per_worker_and_the_consumers() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let path = dir.path().join("trace.json");
    let mut loader = builder(dir.path())
        .workers(3)
        .trace(&path)
        .build_with(slow_collate)
        .unwrap();
    for b in loader.by_ref().take(30) {
        b.unwrap();
    }
    drop(loader);
    let (names, lanes) = read_trace(&path);
    assert_eq!(
        names.values().map(String::as_str).collect::<Vec<_>>(),
        ["consumer", "worker 0", "worker 1", "worker 2"]
    );
    assert!(
        lanes[&0].iter().all(|e| e.0 == "wait_batch"),
        "the consumer's lane holds its waits"
    );
    let mut steps = BTreeSet::new();
    for tid in 1..=3 {
        let events = &lanes[&tid];
        let batches: Vec<_> = events.iter().filter(|e| e.0 == "batch").collect();
        assert!(!batches.is_empty(), "worker {}", tid - 1);
        for (_, ts, dur, args) in batches {
            steps.insert(args["step"].as_u64().unwrap());
            assert_eq!(args["worker"].as_u64(), Some(tid - 1));
            // Its stages lie inside it, one after another, and add up to it
            // (each rounded to a nanosecond).
            let stages: Vec<_> = events
                .iter()
                .filter(|e| e.0 != "batch" && e.0 != "wait_consumer")
                .filter(|e| e.1 >= ts - 1e-3 && e.1 < ts + dur)
                .collect();
            let sum: f64 = stages.iter().map(|e| e.2).sum();
            assert!(
                (sum - dur).abs() < 0.01 * stages.len() as f64 + 0.01,
                "{sum} vs {dur}"
            );
            assert!(stages.iter().any(|e| e.0 == "collate"));
        }
    }
    assert!(
        (0..30).all(|s| steps.contains(&s)),
        "every step taken was made"
    );
}

/// A span's or an event's fields, by name.
type FieldMap = BTreeMap<String, String>;

/// A `tracing` subscriber that keeps the spans' names and fields, and the
/// events' messages.
#[derive(Default, Clone)]
struct Spans {
    spans: Arc<Mutex<Vec<(String, FieldMap)>>>,
    events: Arc<Mutex<Vec<BTreeMap<String, String>>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl tracing::Subscriber for Spans {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push((attrs.metadata().name().to_owned(), fields));
        tracing::span::Id::from_u64(spans.len() as u64)
    }
    fn record(&self, id: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some((_, fields)) = spans.get_mut(id.into_u64() as usize - 1) {
            values.record(&mut Fields(fields));
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn tracing_sees_a_span_per_batch_and_stage_and_a_slow_batchs_records() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path());
    let subscriber = Spans::default();
    let seen = subscriber.clone();
    // Synchronous: the batches are made on this thread, where the
    // subscriber is the default.
    tracing::subscriber::with_default(subscriber, || {
        // A test running beside this one may have met the loader's span
        // callsites first, while this subscriber was not yet registered,
        // and cached "never" for them: computed again now.
        tracing::callsite::rebuild_interest_cache();
        let loader = builder(dir.path())
            .workers(0)
            .build_with(|b: Batch| {
                if b.step() == 12 {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok::<_, std::convert::Infallible>(b.indices().to_vec())
            })
            .unwrap();
        let batches: Vec<Vec<u64>> = loader.take(16).map(Result::unwrap).collect();
        let spans = seen.spans.lock().unwrap();
        let batch_spans: Vec<_> = spans.iter().filter(|s| s.0 == "batch").collect();
        assert_eq!(batch_spans.len(), 16);
        for (k, (_, f)) in batch_spans.iter().enumerate() {
            assert_eq!(f["step"], k.to_string());
            assert_eq!(f["rank"], "0");
            assert_eq!(f["worker"], "0");
        }
        assert_eq!(
            batch_spans[12].1.get("slow").map(String::as_str),
            Some("true")
        );
        let stages: BTreeSet<&str> = spans
            .iter()
            .filter(|s| s.0 == "stage")
            .map(|s| s.1["stage"].as_str())
            .collect();
        for s in ["sample", "read", "locate", "decompress", "collate"] {
            assert!(stages.contains(s), "{s} in {stages:?}");
        }
        let events = seen.events.lock().unwrap();
        let slow: Vec<_> = events
            .iter()
            .filter(|e| e.get("message").is_some_and(|m| m == "slow batch"))
            .collect();
        assert_eq!(slow.len(), 1, "{events:?}");
        assert_eq!(slow[0]["step"], "12");
        assert_eq!(slow[0]["records"], format!("{:?}", batches[12]));
    });
}

#[cfg(feature = "vision")]
#[test]
fn the_vision_steps_are_stages_of_their_own() {
    use loaderx_core::vision::Pipeline;
    let dir = tempfile::tempdir().unwrap();
    let jpegs: Vec<Vec<u8>> = (0..12u32)
        .map(|k| {
            let (w, h) = (40 + k, 30 + 2 * k);
            let px: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 + k) as u8).collect();
            let mut out = Vec::new();
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
                .encode(&px, w, h, image::ExtendedColorType::Rgb8)
                .unwrap();
            out
        })
        .collect();
    let mut w = RaggedWriter::<u8>::create(dir.path().join("image"), 1, Codec::Raw).unwrap();
    w.append(jpegs).unwrap();
    w.close().unwrap();
    let mut loader = DataLoader::builder()
        .stream(
            "image",
            Ragged::<u8>::open(dir.path().join("image")).unwrap(),
        )
        .batch_size(4)
        .workers(0)
        .augment(
            "image",
            Pipeline::new()
                .random_resized_crop(16, (0.5, 1.0), (0.75, 1.33))
                .hflip(0.5)
                .color_jitter(0.2, 0.2, 0.2),
        )
        .build()
        .unwrap();
    for b in loader.by_ref().take(5) {
        b.unwrap();
    }
    let stats = loader.stats();
    for stage in [
        Stage::Decode,
        Stage::CropResize,
        Stage::Flip,
        Stage::Jitter,
        Stage::Convert,
        Stage::Read,
        Stage::Collate,
    ] {
        assert_eq!(stats.stages[stage].count, 5, "{stage}: {stats}");
    }
    assert_eq!(stats.batch.total, stats.stages.busy());
}
