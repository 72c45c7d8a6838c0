//! `loaderx_convert::lazy`: parquet datasets opened where they live, their
//! row groups converted as batches need them into a bounded cache, read
//! through the loader in a part-windowed order that resumes exactly, and
//! frozen into the dataset `convert` writes. Local files (written by the
//! parquet crate), and an S3 prefix (moto) when it is installed.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use loaderx_convert::lazy::{OpenOptions, open};
use loaderx_convert::local::{LocalSource, convert_parquet};
use loaderx_core::{DataLoader, Dataset, DynDense, SamplerMode, Store, Stream, digest};
use loaderx_tests::S3Server;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

/// Rows of every file.
const ROWS: usize = 500;
/// Rows of a full row group.
const GROUP: usize = 64;

/// Writes `files` parquet files of `ROWS` rows in row groups of `GROUP`:
/// `label` (the row's global index, plus `shift`), `text` (a string of the
/// row's own length) and `x` (three floats); returns their paths.
fn write_files(dir: &Path, files: usize, shift: i64) -> Vec<PathBuf> {
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let schema = Arc::new(Schema::new(vec![
        Field::new("label", DataType::Int64, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("x", DataType::FixedSizeList(Arc::clone(&item), 3), false),
    ]));
    std::fs::create_dir_all(dir).unwrap();
    (0..files)
        .map(|f| {
            let first = (f * ROWS) as i64;
            let rows: Vec<i64> = (first..first + ROWS as i64).collect();
            let label = Int64Array::from(rows.iter().map(|r| r + shift).collect::<Vec<_>>());
            let text = StringArray::from(
                rows.iter()
                    .map(|r| "ab".repeat((*r % 9) as usize + 1))
                    .collect::<Vec<_>>(),
            );
            let values = Float32Array::from(
                rows.iter()
                    .flat_map(|&r| [r as f32, r as f32 + 0.5, -(r as f32)])
                    .collect::<Vec<_>>(),
            );
            let x =
                FixedSizeListArray::try_new(Arc::clone(&item), 3, Arc::new(values), None).unwrap();
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(label) as ArrayRef,
                    Arc::new(text) as ArrayRef,
                    Arc::new(x) as ArrayRef,
                ],
            )
            .unwrap();
            let path = dir.join(format!("train-{f:05}.parquet"));
            let props = WriterProperties::builder()
                .set_max_row_group_row_count(Some(GROUP))
                .build();
            let mut w = ArrowWriter::try_new(
                std::fs::File::create(&path).unwrap(),
                schema.clone(),
                Some(props),
            )
            .unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
            path
        })
        .collect()
}

/// Every stream's digest line, by name.
fn digests(streams: &[(String, Store)]) -> Vec<(String, String)> {
    let mut d: Vec<(String, String)> = streams
        .iter()
        .map(|(n, s)| (n.clone(), digest(s).unwrap().to_string()))
        .collect();
    d.sort();
    d
}

/// The `label` values at `indices`.
fn labels(store: &DynDense, indices: &[u64]) -> loaderx_core::Result<Vec<i64>> {
    Ok(store
        .gather_bytes(indices)?
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

fn converted(files: &[PathBuf], out: &Path) -> Vec<(String, String)> {
    convert_parquet(&LocalSource::new(files.to_vec()), out).unwrap();
    digests(&Store::open_dir(out.join("train")).unwrap())
}

#[test]
fn a_local_parquet_dataset_opens_lazily_and_freezes_into_what_convert_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let files = write_files(&tmp.path().join("data"), 3, 0);
    let cache = tmp.path().join("cache");
    let dataset = open(
        tmp.path().join("data").to_str().unwrap(),
        &OpenOptions::new().cache_dir(&cache),
    )
    .unwrap();
    assert_eq!(dataset.len(), 3 * ROWS as u64);
    // Eight row groups a file: seven of 64 rows and one of 52.
    assert_eq!(dataset.parts().len(), 24);
    assert_eq!(dataset.parts()[7].1, 52);
    let stats = dataset.lazy_stats().unwrap();
    assert_eq!((stats.parts, stats.converted), (24, 1), "{stats:?}");
    assert_eq!(dataset.stream_names(), ["label", "text", "x"]);

    // A gather converts only the row groups it needs.
    let label = dataset.streams()[0].1.as_dense().unwrap();
    assert_eq!(labels(label, &[1499, 3, 700]).unwrap(), [1499, 3, 700]);
    assert_eq!(dataset.lazy_stats().unwrap().converted, 3);

    let expected = converted(&files, &tmp.path().join("out"));
    assert_eq!(digests(dataset.streams()), expected);
    assert_eq!(dataset.lazy_stats().unwrap().converted, 24);

    // Frozen: a dataset on its own, digest for digest the conversion.
    let frozen = dataset.freeze(tmp.path().join("frozen")).unwrap();
    assert_eq!(digests(frozen.streams()), expected);
    let reopened = Dataset::open(tmp.path().join("frozen")).unwrap();
    assert_eq!(digests(reopened.streams()), expected);
    assert!(dataset.freeze(tmp.path().join("frozen")).is_err());

    // Reopened over the same cache: nothing is converted again.
    drop(dataset);
    let again = open(
        tmp.path().join("data").to_str().unwrap(),
        &OpenOptions::new().cache_dir(&cache),
    )
    .unwrap();
    assert_eq!(digests(again.streams()), expected);
    let stats = again.lazy_stats().unwrap();
    assert_eq!((stats.converted, stats.reopened), (0, 24), "{stats:?}");
    drop(again);

    // Reopened with a smaller bound: the row groups an earlier run left
    // count against it, and the least recently needed go first.
    let bound = 60_000;
    let small = open(
        tmp.path().join("data").to_str().unwrap(),
        &OpenOptions::new().cache_dir(&cache).cache_bytes(bound),
    )
    .unwrap();
    let stats = small.lazy_stats().unwrap();
    assert!(stats.evicted > 0, "{stats:?}");
    assert!(stats.cached_bytes <= bound, "{stats:?}");
    let on_disk = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("part-"))
        .count();
    assert!(on_disk < 24, "{on_disk} row groups left on disk");
    assert_eq!(digests(small.streams()), expected);
}

/// A batch's indices and label bytes.
type Batch = (Vec<u64>, Vec<u8>);

/// The loader's batches (indices and the label bytes) for `steps` steps
/// from `start`, part-windowed over `dataset`'s row groups, and what its
/// cache did.
fn batches(
    dataset: Dataset,
    start: u64,
    steps: usize,
) -> (Vec<Batch>, loaderx_core::lazy::LazyStats) {
    let mut b = DataLoader::builder();
    let streams: Vec<(String, Stream)> = dataset
        .into_streams()
        .into_iter()
        .map(|(n, s)| (n, Stream::from(s)))
        .collect();
    let first = streams[0].1.clone();
    for (name, stream) in streams {
        b = b.stream(name, stream);
    }
    let run = b
        .batch_size(50)
        .mode(SamplerMode::PartWindowed { window: 4 })
        .seed(7)
        .workers(2)
        .start_step(start)
        .build()
        .unwrap()
        .take(steps)
        .map(|batch| {
            let batch = batch.unwrap();
            (
                batch.indices().to_vec(),
                batch.column("label").unwrap().bytes().to_vec(),
            )
        })
        .collect();
    (run, first.store().lazy_stats().unwrap())
}

#[test]
fn part_windowed_batches_depend_on_seed_and_step_only_whatever_the_cache_holds() {
    let tmp = tempfile::tempdir().unwrap();
    write_files(&tmp.path().join("data"), 3, 1000);
    let location = tmp.path().join("data");
    let location = location.to_str().unwrap();
    // A cache of about two row groups: parts are evicted and converted
    // again as the windows move.
    let small = open(
        location,
        &OpenOptions::new()
            .cache_dir(tmp.path().join("small"))
            .cache_bytes(4 << 10)
            .concurrency(2),
    )
    .unwrap();
    // Two passes of 30 steps (1500 records, batches of 50).
    let starts = small.part_starts();
    let (run, stats) = batches(small, 0, 60);
    assert!(stats.evicted > 0, "{stats:?}");
    for (k, (indices, labels)) in run.iter().enumerate() {
        // Every label is its row's index plus 1000: the right records.
        let labels: Vec<i64> = labels
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let want: Vec<i64> = indices.iter().map(|&i| i as i64 + 1000).collect();
        assert_eq!(labels, want, "step {k}");
        // A batch draws from one window (or two, across a window's end):
        // at most eight row groups.
        let mut parts: Vec<usize> = indices
            .iter()
            .map(|&i| starts.partition_point(|&s| s <= i) - 1)
            .collect();
        parts.sort_unstable();
        parts.dedup();
        assert!(parts.len() <= 8, "step {k}: {parts:?}");
    }
    for pass in run.chunks(30) {
        let mut all: Vec<u64> = pass.iter().flat_map(|(i, _)| i.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..1500).collect::<Vec<u64>>());
    }
    assert_ne!(run[..30], run[30..], "each pass has its own order");

    // The same batches from an unbounded cache, and from a run resumed at
    // step 37 over a fresh cache.
    let big = open(
        location,
        &OpenOptions::new().cache_dir(tmp.path().join("big")),
    )
    .unwrap();
    let (again, stats) = batches(big, 0, 60);
    assert_eq!(again, run);
    assert_eq!((stats.converted, stats.evicted), (24, 0), "{stats:?}");
    let resumed = open(
        location,
        &OpenOptions::new().cache_dir(tmp.path().join("resumed")),
    )
    .unwrap();
    assert_eq!(batches(resumed, 37, 23).0, run[37..]);
}

#[test]
fn a_changed_source_is_an_error_never_new_data() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let files = write_files(&data, 2, 0);
    let cache = tmp.path().join("cache");
    let options = OpenOptions::new().cache_dir(&cache);
    let dataset = open(data.to_str().unwrap(), &options).unwrap();
    let label = dataset.streams()[0].1.as_dense().unwrap();
    // Rewritten with other values after the open.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::remove_file(&files[1]).unwrap();
    write_files(&data, 2, 5);
    let e = labels(label, &[ROWS as u64 + 1]).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("changed"), "{text}");
    assert!(text.contains("part 8"), "{text}");
    // What was converted before still reads; the cache is pinned to the
    // old files, so reopening it with the new ones is refused.
    assert_eq!(labels(label, &[2]).unwrap(), [2]);
    let e = open(data.to_str().unwrap(), &options)
        .unwrap_err()
        .to_string();
    assert!(e.contains("another version"), "{e}");
}

#[test]
fn an_s3_prefix_opens_lazily_and_a_replaced_object_is_an_error() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("lazy");
    let tmp = tempfile::tempdir().unwrap();
    let files = write_files(&tmp.path().join("data"), 2, 0);
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        server.put_object("lazy", &format!("data/{name}"), &std::fs::read(f).unwrap());
    }
    // A file that is not parquet beside them is not listed.
    server.put_object("lazy", "data/README.md", b"# not parquet");
    let options = OpenOptions::new()
        .cache_dir(tmp.path().join("cache"))
        .remote(server.options());
    let dataset = open("s3://lazy/data/", &options).unwrap();
    assert_eq!(dataset.len(), 2 * ROWS as u64);
    let label = dataset.streams()[0].1.as_dense().unwrap();
    assert_eq!(labels(label, &[999, 0]).unwrap(), [999, 0]);
    // A glob names the same files.
    let globbed = open(
        "s3://lazy/data/train-*.parquet",
        &options.clone().cache_dir(tmp.path().join("glob")),
    )
    .unwrap();
    let expected = converted(&files, &tmp.path().join("out"));
    assert_eq!(digests(globbed.streams()), expected);

    // Replaced under the open dataset: its unconverted row groups fail.
    let other = write_files(&tmp.path().join("other"), 1, 9);
    server.put_object(
        "lazy",
        "data/train-00000.parquet",
        &std::fs::read(&other[0]).unwrap(),
    );
    let e = labels(label, &[200]).unwrap_err().to_string();
    assert!(e.contains("changed"), "{e}");
}
