//! `loaderx convert csv` against files written by Python's `csv` module
//! (`tests/python/make_csv_fixtures.py`): every store's records checked
//! value by value; a TSV, quoted fields with delimiters, quotes and line
//! breaks, `--schema`, a ragged row's error naming file and line, and
//! splits from `--split-glob`. Also the converter grammar every converter
//! shares: `-o OUT` (and the deprecated positional OUT of idx), `--split`,
//! `--split-glob` and the legacy `--split NAME=GLOB`, an unknown
//! converter, a CSV given to another converter.
//!
//! Python: `LOADERX_PYTHON`, else `~/.cache/loaderx/venv/bin/python`;
//! `LOADERX_SKIP_PYTHON=1` skips the tests that need it.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use loaderx_core::{DType, Store};
use serde_json::Value;
use support::{failed, loaderx, ok, python, write_fixtures};

/// The Python-written fixtures, made once per test process.
fn fixtures() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let py = python(&["csv"])?;
        Some(write_fixtures(&py, "make_csv_fixtures.py", "csv-fixtures"))
    })
    .as_ref()
}

fn expected(fx: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(fx.join("expected.json")).unwrap()).unwrap()
}

/// Every record of the store at `path`: its dtype and each record's bytes.
fn records(path: &Path) -> (DType, Vec<Vec<u8>>) {
    let s = Store::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    s.for_each_record(|_, _, bytes| {
        out.push(bytes.to_vec());
        Ok(())
    })
    .unwrap();
    (s.dtype(), out)
}

fn i64s(path: &Path) -> Vec<i64> {
    let (dtype, r) = records(path);
    assert_eq!(dtype, DType::I64, "{}", path.display());
    r.iter()
        .map(|b| i64::from_le_bytes(b[..].try_into().unwrap()))
        .collect()
}

fn f64s(path: &Path) -> Vec<f64> {
    let (dtype, r) = records(path);
    assert_eq!(dtype, DType::F64, "{}", path.display());
    r.iter()
        .map(|b| f64::from_le_bytes(b[..].try_into().unwrap()))
        .collect()
}

fn bools(path: &Path) -> Vec<bool> {
    let (dtype, r) = records(path);
    assert_eq!(dtype, DType::Bool, "{}", path.display());
    r.iter().map(|b| b == &[1]).collect()
}

fn texts(path: &Path) -> Vec<String> {
    let (dtype, r) = records(path);
    assert_eq!(dtype, DType::U8, "{}", path.display());
    r.into_iter()
        .map(|b| String::from_utf8(b).unwrap())
        .collect()
}

fn convert(args: &[&OsStr]) -> String {
    let mut all: Vec<&OsStr> = vec![OsStr::new("convert")];
    all.extend_from_slice(args);
    ok(&loaderx(&all))
}

/// The `basic` rows of expected.json checked against OUT/train.
fn check_basic(fx: &Path, out: &Path) {
    let rows = expected(fx)["basic"].as_array().unwrap().clone();
    let train = out.join("train");
    // 9007199254740993 (2^53 + 1) is kept exactly: an int64 column.
    let ids: Vec<i64> = rows.iter().map(|r| r[0].as_i64().unwrap()).collect();
    assert_eq!(i64s(&train.join("id")), ids);
    let scores: Vec<f64> = rows.iter().map(|r| r[1].as_f64().unwrap()).collect();
    assert_eq!(f64s(&train.join("score")), scores);
    let names: Vec<String> = rows
        .iter()
        .map(|r| r[2].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts(&train.join("name")), names);
    let oks: Vec<bool> = rows.iter().map(|r| r[3].as_bool().unwrap()).collect();
    assert_eq!(bools(&train.join("ok")), oks);
}

#[test]
fn header_and_inferred_columns_from_csv_and_tsv() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for (file, name) in [("basic.csv", "csv"), ("basic.tsv", "tsv")] {
        let out = tmp.path().join(name);
        let text = convert(args![
            "csv",
            fx.join(file).as_os_str(),
            "-o",
            out.as_os_str(),
            "--text",
            "bytes"
        ]);
        assert!(text.contains("train: 4 records"), "{text}");
        check_basic(fx, &out);
    }
}

#[test]
fn quoted_fields_keep_delimiters_quotes_and_line_breaks() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("quoted");
    convert(args![
        "csv",
        fx.join("quoted.csv").as_os_str(),
        "-o",
        out.as_os_str(),
        "--text",
        "bytes",
        "--split",
        "all"
    ]);
    let rows = expected(fx)["quoted"].as_array().unwrap().clone();
    let col = |k: usize| -> Vec<String> {
        rows.iter()
            .map(|r| r[k].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(texts(&out.join("all/text")), col(0));
    assert_eq!(texts(&out.join("all/other")), col(1));
    assert_eq!(i64s(&out.join("all/n")), [1, 2, 3]);
}

#[test]
fn a_schema_gives_types_order_and_columns() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("typed");
    convert(args![
        "csv",
        fx.join("typed.csv").as_os_str(),
        "-o",
        out.as_os_str(),
        "--schema",
        fx.join("schema.json").as_os_str()
    ]);
    let (dtype, x) = records(&out.join("train/x"));
    assert_eq!(dtype, DType::F32);
    let x: Vec<f32> = x
        .iter()
        .map(|b| f32::from_le_bytes(b[..].try_into().unwrap()))
        .collect();
    assert_eq!(x, [1.5, -2.0]);
    assert_eq!(
        records(&out.join("train/small")),
        (DType::U8, vec![vec![200], vec![7]])
    );
    assert!(!out.join("train/skip").exists());
}

#[test]
fn a_ragged_row_is_named_by_file_and_line() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ragged");
    let file = fx.join("ragged.csv");
    let e = failed(&loaderx(args![
        "convert",
        "csv",
        file.as_os_str(),
        "-o",
        out.as_os_str(),
        "--text",
        "bytes"
    ]));
    // Line 1 the header, 2 and 3 rows, 4-5 a quoted line break, 6 the
    // ragged row.
    let want = format!("{}: line 6: 3 fields, but the header has 2", file.display());
    assert!(e.contains(&want), "{e}");
    assert!(!out.exists());
}

#[test]
fn split_globs_form_splits_and_the_legacy_form_still_works() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let train = format!("train={}", fx.join("splits/*-train.csv").display());
    let test = format!("test={}", fx.join("splits/*-test.csv").display());
    let check = |out: &Path| {
        assert_eq!(i64s(&out.join("train/v")), [1, 2, 3]);
        assert_eq!(i64s(&out.join("test/v")), [10, 20, 30]);
    };
    let out = tmp.path().join("globs");
    let run = loaderx(args![
        "convert",
        "csv",
        "--split-glob",
        &train,
        "--split-glob",
        &test,
        "-o",
        out.as_os_str()
    ]);
    ok(&run);
    assert!(!String::from_utf8_lossy(&run.stderr).contains("note"));
    check(&out);
    // `--split NAME=GLOB` is read as --split-glob, with a note.
    let out = tmp.path().join("legacy");
    let run = loaderx(args![
        "convert",
        "csv",
        "--split",
        &train,
        "--split-glob",
        &test,
        "-o",
        out.as_os_str()
    ]);
    ok(&run);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains(&format!(
            "loaderx: note: --split NAME=GLOB is deprecated, write \"--split-glob {train}\""
        )),
        "{stderr}"
    );
    check(&out);
}

/// A CSV given to jsonl or parquet: refused, naming the converter to use.
#[test]
fn a_csv_given_to_another_converter_names_convert_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("data.csv");
    std::fs::write(&file, "a,b\n1,2\n").unwrap();
    for converter in ["jsonl", "parquet", "arrow"] {
        let out = tmp.path().join(converter);
        let e = failed(&loaderx(args![
            "convert",
            converter,
            file.as_os_str(),
            "-o",
            out.as_os_str()
        ]));
        assert!(
            e.contains(&file.display().to_string()) && e.contains("use \"loaderx convert csv\""),
            "{converter}: {e}"
        );
        assert!(!out.exists());
    }
    // The other way round too.
    let jsonl = tmp.path().join("data.jsonl");
    std::fs::write(&jsonl, "{\"a\": 1}\n").unwrap();
    let e = failed(&loaderx(args![
        "convert",
        "csv",
        jsonl.as_os_str(),
        "-o",
        tmp.path().join("x").as_os_str()
    ]));
    assert!(e.contains("use \"loaderx convert jsonl\""), "{e}");
}

#[test]
fn an_unknown_converter_lists_the_converters() {
    let e = failed(&loaderx(args!["convert", "foo", "x", "-o", "y"]));
    assert!(
        e.contains(
            "unknown converter \"foo\"; the converters: npy, parquet, arrow, jsonl, csv, \
             images, webdataset, hf, idx"
        ),
        "{e}"
    );
}

/// An IDX file of `u8` elements with `dims`.
fn idx(path: &Path, dims: &[u32], data: &[u8]) {
    let mut bytes = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        bytes.extend_from_slice(&d.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// MNIST-format files of 5 training and 3 test images of 2×2.
fn idx_dir(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (prefix, n) in [("train", 5u32), ("t10k", 3)] {
        let images: Vec<u8> = (0..n * 4).map(|i| i as u8).collect();
        let labels: Vec<u8> = (0..n).map(|i| i as u8).collect();
        idx(
            &dir.join(format!("{prefix}-images-idx3-ubyte")),
            &[n, 2, 2],
            &images,
        );
        idx(
            &dir.join(format!("{prefix}-labels-idx1-ubyte")),
            &[n],
            &labels,
        );
    }
}

#[test]
fn idx_takes_dash_o_and_still_the_positional_out_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    idx_dir(&src);
    let new = tmp.path().join("new");
    let run = loaderx(args![
        "convert",
        "idx",
        src.as_os_str(),
        "-o",
        new.as_os_str()
    ]);
    ok(&run);
    assert!(!String::from_utf8_lossy(&run.stderr).contains("note"));
    let old = tmp.path().join("old");
    let run = loaderx(args!["convert", "idx", src.as_os_str(), old.as_os_str()]);
    ok(&run);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("loaderx: note: the positional OUT is deprecated, write \"-o OUT\""),
        "{stderr}"
    );
    for split in ["train", "test"] {
        for stream in ["image", "label"] {
            assert_eq!(
                records(&new.join(split).join(stream)),
                records(&old.join(split).join(stream))
            );
        }
    }
    assert_eq!(
        records(&new.join("train/label")),
        (DType::U8, (0..5).map(|i| vec![i]).collect())
    );
    // Both: refused; neither: refused, naming -o.
    let both = tmp.path().join("both");
    let e = failed(&loaderx(args![
        "convert",
        "idx",
        src.as_os_str(),
        both.as_os_str(),
        "-o",
        both.as_os_str()
    ]));
    assert!(e.contains("cannot be used with"), "{e}");
    assert!(!both.exists());
    let e = failed(&loaderx(args!["convert", "idx", src.as_os_str()]));
    assert!(e.contains("give -o OUT"), "{e}");
    // Another converter without -o: clap refuses it.
    let e = failed(&loaderx(args!["convert", "csv", "x.csv"]));
    assert!(e.contains("--out <OUT>"), "{e}");
}

#[test]
fn hf_refuses_split_and_names_splits() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("hf");
    let e = failed(&loaderx(args![
        "convert",
        "hf",
        "owner/name",
        "-o",
        out.as_os_str(),
        "--split",
        "train"
    ]));
    assert!(
        e.contains("convert hf chooses the Hub splits with --splits: write --splits train"),
        "{e}"
    );
    assert!(!out.exists());
}
