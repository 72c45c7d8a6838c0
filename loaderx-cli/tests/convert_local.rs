//! `loaderx convert parquet|arrow`, `loaderx_convert::local` and
//! `loaderx_convert::table::convert_record_batches` against files their
//! real producers wrote (`tests/python/make_local_fixtures.py`: pyarrow,
//! `datasets`' `save_to_disk`, Pillow, soundfile), with digests computed by
//! numpy from the source data, and against Python loaderx 2.8.19's own
//! converter on the same `save_to_disk` dataset.
//!
//! Needs `LOADERX_PYTHON` (with `datasets`, `pillow`, `soundfile`) and
//! `LOADERX_PY_RELEASES` (loaderx 2.8.19); `LOADERX_SKIP_PYTHON=1` skips.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef, Float32Array, Int64Array, ListArray, RecordBatch, StructArray};
use arrow_schema::{DataType, Field};
use loaderx_convert::local::{LocalSource, convert_arrow, convert_parquet};
use loaderx_convert::table::{ColumnSource, TableOptions, convert_record_batches};
use loaderx_core::{Codec, Store, digest};
use serde_json::Value;

struct Fixtures {
    dir: PathBuf,
    expected: Value,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Generates the fixtures once per test process; `None` when the Python
/// tests are skipped.
fn fixtures() -> Option<&'static Fixtures> {
    static FIXTURES: OnceLock<Option<Fixtures>> = OnceLock::new();
    FIXTURES
        .get_or_init(|| {
            let py = loaderx_tests::python()?;
            let release = loaderx_tests::py_releases()?.join("2.8.19");
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("local-fixtures");
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap();
            }
            let out = Command::new(py)
                .arg(repo_root().join("tests/python/make_local_fixtures.py"))
                .arg(&dir)
                .env("PYTHONPATH", &release)
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .env("HF_HOME", dir.with_extension("hf-home"))
                .env("HF_DATASETS_OFFLINE", "1")
                .env("HF_HUB_OFFLINE", "1")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "make_local_fixtures.py failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let expected =
                serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
            Some(Fixtures { dir, expected })
        })
        .as_ref()
}

/// The stores of `dir` (its visible directories), in name order.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && dir.join(n).is_dir())
        .collect();
    v.sort();
    v
}

fn sha(path: &Path) -> String {
    digest(&Store::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap()
        .sha256
}

/// Checks the stores of `split` under `out` against `expect` (the fixture
/// script's `{"records", "columns": {name: {kind, dtype, digest, ...}}}`).
fn check_split(out: &Path, split: &str, expect: &Value) {
    let columns = expect["columns"].as_object().unwrap();
    let mut want: Vec<String> = columns.keys().cloned().collect();
    want.sort();
    assert_eq!(names(&out.join(split)), want, "{split}");
    for (name, col) in columns {
        let path = out.join(split).join(name);
        let store = Store::open(&path).unwrap();
        let what = format!("{split}/{name}");
        assert_eq!(store.len(), col["records"].as_u64().unwrap(), "{what}");
        assert_eq!(
            store.dtype().name(),
            col["dtype"].as_str().unwrap(),
            "{what}"
        );
        match (&store, col["kind"].as_str().unwrap()) {
            (Store::Dense(d), "dense") => {
                let shape: Vec<usize> = serde_json::from_value(col["shape"].clone()).unwrap();
                assert_eq!(d.item_shape(), shape.as_slice(), "{what}");
            }
            (Store::Ragged(r), "ragged") => {
                assert_eq!(r.ndim() as u64, col["ndim"].as_u64().unwrap(), "{what}");
            }
            (s, k) => panic!("{what}: {:?}, expected {k}", s.kind()),
        }
        assert_eq!(
            digest(&store).unwrap().sha256,
            col["digest"].as_str().unwrap(),
            "{what}: contents differ from the source"
        );
    }
}

fn loaderx(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loaderx"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn ok(run: &Output) -> String {
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

#[test]
fn parquet_and_arrow_files_and_streams_written_by_pyarrow() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let expect = &fx.expected["table"]["train"];
    let mut outs = Vec::new();
    for (command, file) in [
        ("parquet", "table.parquet"),
        ("arrow", "table.arrow"),
        ("arrow", "table.arrows"),
    ] {
        let out = tmp.path().join(file);
        let stdout = ok(&loaderx(
            &[
                "convert",
                command,
                fx.dir.join(file).to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "--text",
                "bytes",
                "--codec",
                "raw",
            ],
            &[],
        ));
        assert!(stdout.contains("shaped: ragged f32 (rank 2)"), "{stdout}");
        assert!(stdout.contains("fixed: dense i16 [3]"), "{stdout}");
        check_split(&out, "train", expect);
        outs.push(out);
    }
    // Small batches and a part's row ranges start inside the files'
    // batches and row groups.
    for file in ["table.parquet", "table.arrow", "table.arrows"] {
        let dir = tmp.path().join(format!("parts-{file}"));
        let source = |part: u64| {
            LocalSource::new([fx.dir.join(file)]).options(
                TableOptions::new()
                    .text_bytes()
                    .batch_limits(3, 1 << 12)
                    .part(part, 4),
            )
        };
        for part in 0..4 {
            if file.ends_with(".parquet") {
                convert_parquet(&source(part), &dir).unwrap();
            } else {
                convert_arrow(&source(part), &dir).unwrap();
            }
        }
        let merged = loaderx_core::Dataset::merge(dir.join("train"), Some(4)).unwrap();
        assert_eq!(merged.len(), 50);
        for (name, joined) in merged.streams() {
            assert_eq!(
                digest(joined).unwrap().sha256,
                expect["columns"][name]["digest"].as_str().unwrap(),
                "{file} parts: {name}"
            );
        }
    }
}

#[test]
fn a_save_to_disk_dataset_dict_converts_with_its_features() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dict");
    let saved = fx.dir.join("saved_dict");
    // Decoded pixels (the images have several sizes); strings as UTF-8
    // bytes without asking.
    let summary = convert_arrow(
        &LocalSource::new([&saved]).options(TableOptions::new().decoded_images(true)),
        &out,
    )
    .unwrap();
    let splits: Vec<&str> = summary.splits.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(splits, ["train", "test"]);
    assert_eq!(summary.files.len(), 4);
    let sources: Vec<ColumnSource> = summary.splits[0].columns.iter().map(|c| c.source).collect();
    assert_eq!(
        sources,
        [
            ColumnSource::Image,
            ColumnSource::Audio,
            ColumnSource::SamplingRate,
            ColumnSource::Numeric,
            ColumnSource::TextBytes,
            ColumnSource::Numeric
        ]
    );
    for split in ["train", "test"] {
        check_split(&out, split, &fx.expected["saved_dict"][split]);
        // The features' ClassLabel names, beside the split's stores.
        let classes = loaderx_core::classes(out.join(split)).unwrap();
        assert_eq!(classes.get("label").unwrap(), ["cat", "dog", "emu"]);
        assert_eq!(classes.len(), 1);
    }

    // Encoded: the image files' own bytes, asked for or (images of
    // several sizes) by default.
    for (name, flag) in [("encoded", Some("--encoded")), ("default", None)] {
        let encoded = tmp.path().join(name);
        let mut args = vec![
            "convert",
            "arrow",
            saved.to_str().unwrap(),
            "-o",
            encoded.to_str().unwrap(),
            "--columns",
            "image,label",
        ];
        args.extend(flag);
        ok(&loaderx(&args, &[]));
        for split in ["train", "test"] {
            let want = &fx.expected["saved_dict_encoded"][split];
            assert_eq!(
                sha(&encoded.join(split).join("image")),
                want["digest"].as_str().unwrap(),
                "{name} {split}"
            );
        }
    }

    // Three pods of a Kubernetes Indexed Job (JOB_COMPLETION_INDEX), then
    // a merge: the single conversion's digests.
    let parts = tmp.path().join("parts");
    for index in ["0", "1", "2"] {
        ok(&loaderx(
            &[
                "convert",
                "arrow",
                saved.to_str().unwrap(),
                "-o",
                parts.to_str().unwrap(),
                "--text",
                "bytes",
                "--decoded",
                "--parts",
                "3",
            ],
            &[("JOB_COMPLETION_INDEX", index)],
        ));
    }
    for split in ["train", "test"] {
        ok(&loaderx(
            &["dataset", "merge", parts.join(split).to_str().unwrap()],
            &[],
        ));
        let merged = loaderx_core::Dataset::open(parts.join(split)).unwrap();
        for (name, joined) in merged.streams() {
            assert_eq!(
                digest(joined).unwrap().sha256,
                sha(&out.join(split).join(name)),
                "{split}/{name}"
            );
        }
    }
    // A bad index is refused by name.
    let run = loaderx(
        &[
            "convert",
            "arrow",
            saved.to_str().unwrap(),
            "-o",
            tmp.path().join("bad").to_str().unwrap(),
            "--parts",
            "3",
        ],
        &[("JOB_COMPLETION_INDEX", "x1")],
    );
    assert!(!run.status.success());
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("JOB_COMPLETION_INDEX"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn save_to_disk_converts_as_python_loaderx_2_8_19_does() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("numeric");
    convert_arrow(
        &LocalSource::new([fx.dir.join("saved_numeric")])
            .options(TableOptions::new().codec(Codec::Raw)),
        &out,
    )
    .unwrap();
    let python = fx.dir.join("py2819");
    let streams: Vec<String> =
        serde_json::from_value(fx.expected["py2819"]["streams"].clone()).unwrap();
    assert_eq!(fx.expected["py2819"]["loaderx"], "2.8.19");
    assert_eq!(names(&out.join("train")), streams);
    for name in &streams {
        let (ours, theirs) = (out.join("train").join(name), python.join(name));
        let (a, b) = (Store::open(&ours).unwrap(), Store::open(&theirs).unwrap());
        assert_eq!(a.kind(), b.kind(), "{name}");
        assert_eq!(a.dtype(), b.dtype(), "{name}");
        assert_eq!(
            sha(&ours),
            sha(&theirs),
            "{name}: differs from loaderx 2.8.19's"
        );
    }
}

/// A `struct{values, shape}` column (2.8.19's multi-dimensional Ragged
/// contract) of the given shapes, each record counting up from its row
/// (`first_row` on) times 100; the record at `lie_at` holds one value too
/// many for its shape.
fn shaped(shapes: &[[u32; 2]], first_row: usize, lie_at: Option<usize>) -> ArrayRef {
    let mut values: Vec<Option<Vec<Option<f32>>>> = Vec::new();
    for (k, s) in shapes.iter().enumerate() {
        let row = first_row + k;
        let n = (s[0] * s[1]) as usize + usize::from(lie_at == Some(row));
        values.push(Some((0..n).map(|i| Some((row * 100 + i) as f32)).collect()));
    }
    let values = ListArray::from_iter_primitive::<arrow_array::types::Float32Type, _, _>(values);
    let dims: Vec<Option<Vec<Option<u32>>>> = shapes
        .iter()
        .map(|s| Some(s.iter().map(|&d| Some(d)).collect()))
        .collect();
    let shape = arrow_array::FixedSizeListArray::from_iter_primitive::<
        arrow_array::types::UInt32Type,
        _,
        _,
    >(dims, 2);
    Arc::new(StructArray::from(vec![
        (
            Arc::new(Field::new(
                "values",
                DataType::List(Arc::new(Field::new("item", DataType::Float32, true))),
                true,
            )),
            Arc::new(values) as ArrayRef,
        ),
        (
            Arc::new(Field::new(
                "shape",
                DataType::FixedSizeList(Arc::new(Field::new("item", DataType::UInt32, true)), 2),
                true,
            )),
            Arc::new(shape) as ArrayRef,
        ),
    ]))
}

#[test]
fn any_record_batch_reader_converts() {
    let tmp = tempfile::tempdir().unwrap();
    let shapes = [[1u32, 2], [2, 2], [3, 1], [1, 1], [2, 3]];
    let batches: Vec<RecordBatch> = [0..3usize, 3..5]
        .into_iter()
        .map(|rows| {
            let ids: Vec<i64> = rows.clone().map(|r| r as i64).collect();
            let x: Vec<f32> = rows.clone().map(|r| r as f32 / 2.0).collect();
            RecordBatch::try_from_iter([
                ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
                ("x", Arc::new(Float32Array::from(x)) as ArrayRef),
                ("vol", shaped(&shapes[rows.clone()], rows.start, None)),
            ])
            .unwrap()
        })
        .collect();
    let schema = batches[0].schema();
    let reader = arrow_array::RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    let out = tmp.path().join("out");
    let summary =
        convert_record_batches(vec![("train", reader)], &out, &TableOptions::new()).unwrap();
    assert_eq!(summary.splits[0].records, 5);
    // No spool is left beside the output.
    assert_eq!(names(tmp.path()), ["out"]);
    let Store::Ragged(vol) = Store::open(out.join("train/vol")).unwrap() else {
        panic!("vol is not ragged")
    };
    assert_eq!(vol.ndim(), 2);
    let mut seen = Vec::new();
    Store::Ragged(vol)
        .for_each_record(|i, shape, bytes| {
            let values: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let want: Vec<f32> = (0..values.len())
                .map(|k| (i as usize * 100 + k) as f32)
                .collect();
            assert_eq!(values, want);
            seen.push(shape.to_vec());
            Ok(())
        })
        .unwrap();
    let want: Vec<Vec<usize>> = shapes
        .iter()
        .map(|s| s.iter().map(|&d| d as usize).collect())
        .collect();
    assert_eq!(seen, want);

    // A record whose values do not fill its shape: an error naming the
    // column and the row, nothing left behind.
    let bad = RecordBatch::try_from_iter([("vol", shaped(&shapes, 0, Some(3)))]).unwrap();
    let schema = bad.schema();
    let reader = arrow_array::RecordBatchIterator::new([Ok(bad)], schema);
    let out = tmp.path().join("bad");
    let e = convert_record_batches(vec![("train", reader)], &out, &TableOptions::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"vol\"") && e.contains("row 3"), "{e}");
    assert!(!out.exists());
    assert_eq!(names(tmp.path()), ["out"]);

    // A stream that fails midway: the error names the split and the batch.
    let good =
        RecordBatch::try_from_iter([("x", Arc::new(Float32Array::from(vec![1.0f32])) as ArrayRef)])
            .unwrap();
    let schema = good.schema();
    let reader = arrow_array::RecordBatchIterator::new(
        [
            Ok(good),
            Err(arrow_schema::ArrowError::IoError(
                "connection reset".into(),
                std::io::Error::other("reset"),
            )),
        ],
        schema,
    );
    let e = convert_record_batches(vec![("valid", reader)], &out, &TableOptions::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"valid\"") && e.contains("batch 1"), "{e}");
    assert!(!out.exists());
}

#[test]
fn an_arrow_file_read_by_arrow_ipc_converts_like_the_cli() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let file = std::fs::File::open(fx.dir.join("table.arrow")).unwrap();
    let reader = arrow_ipc::reader::FileReader::try_new(file, None).unwrap();
    let out = tmp.path().join("out");
    convert_record_batches(
        vec![("train", reader)],
        &out,
        &TableOptions::new().text_bytes(),
    )
    .unwrap();
    check_split(&out, "train", &fx.expected["table"]["train"]);
}

#[test]
fn hostile_local_inputs_fail_by_name_and_leave_nothing() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let fail = |source: &LocalSource, arrow: bool| -> String {
        let e = if arrow {
            convert_arrow(source, &out)
        } else {
            convert_parquet(source, &out)
        }
        .unwrap_err()
        .to_string();
        assert!(!out.exists(), "left behind after: {e}");
        e
    };
    // Truncated files.
    for (file, arrow) in [
        ("table.parquet", false),
        ("table.arrow", true),
        ("table.arrows", true),
    ] {
        let bytes = std::fs::read(fx.dir.join(file)).unwrap();
        let cut = tmp.path().join(format!("cut-{file}"));
        std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
        let e = fail(
            &LocalSource::new([&cut]).options(TableOptions::new().text_bytes()),
            arrow,
        );
        assert!(e.contains(&format!("cut-{file}")), "{file}: {e}");
        // Garbage.
        let junk = tmp.path().join(format!("junk-{file}"));
        std::fs::write(&junk, b"not a table at all, just some bytes").unwrap();
        let e = fail(&LocalSource::new([&junk]), arrow);
        assert!(e.contains(&format!("junk-{file}")), "{file}: {e}");
    }
    // A symbolic link to a directory inside a walked directory.
    let dir = tmp.path().join("tree");
    std::fs::create_dir_all(dir.join("train")).unwrap();
    std::fs::copy(fx.dir.join("table.parquet"), dir.join("train/a.parquet")).unwrap();
    std::os::unix::fs::symlink(dir.join("train"), dir.join("test")).unwrap();
    let e = fail(&LocalSource::new([&dir]), false);
    assert!(e.contains("symbolic link") && e.contains("test"), "{e}");
    // A save_to_disk description naming a file outside its directory.
    let saved = tmp.path().join("saved");
    std::fs::create_dir_all(&saved).unwrap();
    std::fs::write(
        saved.join("state.json"),
        r#"{"_data_files": [{"filename": "../table.arrow"}]}"#,
    )
    .unwrap();
    let e = fail(&LocalSource::new([&saved]), true);
    assert!(
        e.contains("state.json") && e.contains("../table.arrow"),
        "{e}"
    );
    // Nothing to convert, and a glob matching nothing.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let e = fail(&LocalSource::new([&empty]), false);
    assert!(e.contains("no parquet"), "{e}");
    let pattern = format!("{}/*.parquet", empty.display());
    let e = fail(
        &LocalSource::new(Vec::<PathBuf>::new()).split_glob("train", pattern.as_str()),
        false,
    );
    assert!(e.contains("no file matches"), "{e}");
    // Files of one split whose columns differ.
    let mixed = tmp.path().join("mixed");
    std::fs::create_dir_all(&mixed).unwrap();
    std::fs::copy(fx.dir.join("table.arrow"), mixed.join("a.arrow")).unwrap();
    std::fs::copy(
        fx.dir.join("saved_numeric/data-00000-of-00002.arrow"),
        mixed.join("b.arrow"),
    )
    .unwrap();
    let e = fail(
        &LocalSource::new([&mixed]).options(TableOptions::new().text_bytes()),
        true,
    );
    assert!(e.contains("b.arrow") && e.contains("columns differ"), "{e}");
}

#[test]
fn streams_cut_short_batches_off_schema_and_shaped_rows_to_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let shapes = [[1u32, 2], [2, 2], [3, 1]];
    let batch = RecordBatch::try_from_iter([("vol", shaped(&shapes, 0, None))]).unwrap();
    // An Arrow IPC stream whose writer died after a whole batch: no
    // end-of-stream marker, refused (not converted as a shorter table).
    let cut = tmp.path().join("cut.arrows");
    let mut w = arrow_ipc::writer::StreamWriter::try_new(
        std::fs::File::create(&cut).unwrap(),
        &batch.schema(),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.flush().unwrap();
    drop(w);
    let out = tmp.path().join("out");
    let e = convert_arrow(&LocalSource::new([&cut]), &out)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cut.arrows") && e.contains("end-of-stream"),
        "{e}"
    );
    assert!(!out.exists());

    // A batch whose column type is not the stream's: refused by name.
    let x32 = Arc::new(arrow_schema::Schema::new(vec![Field::new(
        "x",
        DataType::Float32,
        false,
    )]));
    let x64 = RecordBatch::try_from_iter([(
        "x",
        Arc::new(arrow_array::Float64Array::from(vec![1.0, 2.0])) as ArrayRef,
    )])
    .unwrap();
    let reader = arrow_array::RecordBatchIterator::new([Ok(x64)], x32);
    let e = convert_record_batches(vec![("train", reader)], &out, &TableOptions::new())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("batch 0") && e.contains("\"x\"") && e.contains("Float64"),
        "{e}"
    );
    assert!(!out.exists());

    // --drop-empty-rows and --drop-null-rows reach into struct{values,
    // shape} records: an empty record (shape [0, 3]) is dropped.
    let values = ListArray::from_iter_primitive::<arrow_array::types::Float32Type, _, _>(vec![
        Some(vec![Some(1.0), Some(2.0)]),
        Some(vec![]),
        Some(vec![Some(3.0)]),
    ]);
    let dims = arrow_array::FixedSizeListArray::from_iter_primitive::<
        arrow_array::types::UInt32Type,
        _,
        _,
    >(
        vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(0), Some(3)]),
            Some(vec![Some(1), Some(1)]),
        ],
        2,
    );
    let vol = StructArray::from(vec![
        (
            Arc::new(Field::new("values", values.data_type().clone(), true)),
            Arc::new(values) as ArrayRef,
        ),
        (
            Arc::new(Field::new("shape", dims.data_type().clone(), true)),
            Arc::new(dims) as ArrayRef,
        ),
    ]);
    let batch = RecordBatch::try_from_iter([("vol", Arc::new(vol) as ArrayRef)]).unwrap();
    let schema = batch.schema();
    let reader = arrow_array::RecordBatchIterator::new([Ok(batch.clone())], schema.clone());
    let e = convert_record_batches(vec![("train", reader)], &out, &TableOptions::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("row 1") && e.contains("empty"), "{e}");
    let reader = arrow_array::RecordBatchIterator::new([Ok(batch)], schema);
    let summary = convert_record_batches(
        vec![("train", reader)],
        &out,
        &TableOptions::new()
            .drop_empty_rows(true)
            .drop_null_rows(true),
    )
    .unwrap();
    assert_eq!(summary.splits[0].records, 2);
    assert_eq!(summary.splits[0].dropped_empty_rows, 1);
}

#[test]
fn a_file_in_two_split_globs_is_refused() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["train-a.parquet", "test-a.parquet"] {
        std::fs::copy(fx.dir.join("table.parquet"), dir.join(name)).unwrap();
    }
    let all = format!("{}/*.parquet", dir.display());
    let test = format!("{}/test-*.parquet", dir.display());
    let e = convert_parquet(
        &LocalSource::new(Vec::<PathBuf>::new())
            .split_glob("train", all.as_str())
            .split_glob("test", test.as_str()),
        tmp.path().join("out"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("test-a.parquet") && e.contains("two splits"),
        "{e}"
    );
}
