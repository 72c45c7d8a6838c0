//! `loaderx convert jsonl` and `loaderx_convert::jsonl::convert_jsonl`
//! against JSON Lines written by Python's `json` module
//! (`tests/python/make_jsonl_fixtures.py`), whose expected digests NumPy
//! computed from the same values; parts merged with `loaderx dataset merge`;
//! hostile files (truncated, not objects, a type mismatch, an overlong line,
//! empty) failing with their file and line and leaving nothing.
//!
//! Python: `LOADERX_PYTHON`, else `~/.cache/loaderx/venv/bin/python` (with
//! NumPy); `LOADERX_SKIP_PYTHON=1` skips the tests that need it. Without
//! that python they are skipped, except under `CI`, where they fail.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use loaderx_convert::jsonl::{JsonlOptions, convert_jsonl, parse_schema};
use loaderx_convert::local::LocalSource;
use loaderx_convert::table::TableOptions;
use loaderx_core::{DType, Store, StoreKind, digest};
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn python() -> Option<PathBuf> {
    if std::env::var_os("LOADERX_SKIP_PYTHON").is_some() {
        eprintln!("SKIPPED: LOADERX_SKIP_PYTHON is set");
        return None;
    }
    let py = std::env::var_os("LOADERX_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/loaderx/venv/bin/python"))
        })?;
    if py.exists() {
        return Some(py);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but there is no python at {} (set LOADERX_PYTHON to a python with numpy, \
         ./scripts/test installs one)",
        py.display()
    );
    eprintln!("SKIPPED: no python at {}", py.display());
    None
}

struct Fixtures {
    dir: PathBuf,
    expected: Value,
}

/// The Python-written file and its digests, made once per test process.
fn fixtures() -> Option<&'static Fixtures> {
    static FIXTURES: OnceLock<Option<Fixtures>> = OnceLock::new();
    FIXTURES
        .get_or_init(|| {
            let py = python()?;
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("jsonl-fixtures");
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap();
            }
            std::fs::create_dir_all(&dir).unwrap();
            let out = Command::new(py)
                .arg(repo_root().join("tests/python/make_jsonl_fixtures.py"))
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "make_jsonl_fixtures.py failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let expected =
                serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
            Some(Fixtures { dir, expected })
        })
        .as_ref()
}

fn loaderx(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loaderx"));
    c.args(args).env_remove("JOB_COMPLETION_INDEX");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = loaderx(args, env);
    assert!(
        out.status.success(),
        "loaderx {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = loaderx(args, &[]);
    assert!(!out.status.success(), "loaderx {args:?} succeeded");
    String::from_utf8(out.stderr).unwrap()
}

const COLUMNS: [&str; 8] = ["i", "f", "b", "s", "tok", "xy", "grid", "nest"];

/// Every store under `split` has the digest Python computed.
fn check_digests(fx: &Fixtures, split: &Path) {
    for c in COLUMNS {
        let store = Store::open(split.join(c)).unwrap();
        let d = digest(&store).unwrap();
        let want = &fx.expected[c];
        assert_eq!(d.sha256, want[0].as_str().unwrap(), "column {c}");
        assert_eq!(d.length, want[1].as_u64().unwrap(), "column {c}");
    }
}

#[test]
fn python_written_jsonl_converts_to_the_digests_numpy_computed() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let data = fx.dir.join("data.jsonl");
    let text = ok(
        &[
            "convert",
            "jsonl",
            data.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--text",
            "bytes",
            "--codec",
            "raw",
        ],
        &[],
    );
    assert!(text.contains("train: 10 records"), "{text}");
    let split = out.join("train");
    check_digests(fx, &split);
    // The stores' kinds: scalars Dense, fixed lists Dense, others Ragged.
    let kind = |c: &str| {
        let s = Store::open(split.join(c)).unwrap();
        let rank = match &s {
            Store::Dense(d) => d.item_shape().len(),
            Store::Ragged(r) => r.ndim(),
        };
        (s.kind(), s.dtype(), rank)
    };
    assert_eq!(kind("i"), (StoreKind::Dense, DType::I64, 0));
    assert_eq!(kind("f"), (StoreKind::Dense, DType::F64, 0));
    assert_eq!(kind("b"), (StoreKind::Dense, DType::Bool, 0));
    assert_eq!(kind("s"), (StoreKind::Ragged, DType::U8, 1));
    assert_eq!(kind("tok"), (StoreKind::Ragged, DType::I64, 1));
    assert_eq!(kind("xy"), (StoreKind::Dense, DType::F64, 1));
    assert_eq!(kind("grid"), (StoreKind::Dense, DType::I64, 2));
    assert_eq!(kind("nest"), (StoreKind::Ragged, DType::I64, 2));

    // Three writers (one choosing its part by JOB_COMPLETION_INDEX), then
    // `loaderx dataset merge`: the single conversion's digests.
    let parted = tmp.path().join("parted");
    for i in 0..3 {
        let index = i.to_string();
        let mut args = vec![
            "convert",
            "jsonl",
            data.to_str().unwrap(),
            "-o",
            parted.to_str().unwrap(),
            "--text",
            "bytes",
            "--parts",
            "3",
        ];
        let env: Vec<(&str, &str)> = if i == 1 {
            vec![("JOB_COMPLETION_INDEX", index.as_str())]
        } else {
            args.extend(["--part", index.as_str()]);
            vec![]
        };
        let text = ok(&args, &env);
        let range = loaderx_core::Dataset::part_range(10, i, 3);
        assert!(
            text.contains(&format!("train: {} records", range.end - range.start)),
            "{text}"
        );
    }
    let merged = ok(
        &[
            "dataset",
            "merge",
            parted.join("train").to_str().unwrap(),
            "--parts",
            "3",
        ],
        &[],
    );
    assert!(merged.contains("10 records in 3 parts"), "{merged}");
    let dataset = loaderx_core::Dataset::open(parted.join("train")).unwrap();
    for (name, joined) in dataset.streams() {
        let one = Store::open(split.join(name)).unwrap();
        assert_eq!(
            digest(joined).unwrap(),
            digest(&one).unwrap(),
            "stream {name}"
        );
    }
}

#[test]
fn a_given_schema_narrows_types_through_the_rust_api() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let schema = parse_schema(
        r#"{"tok": "list<int32>", "xy": "list<float64, 2>", "grid": "list<list<int64, 3>, 2>",
            "b": "bool", "nest": "list<list<int16, 2>>"}"#,
    )
    .unwrap();
    let source = LocalSource::new([fx.dir.join("data.jsonl")])
        .split_name("all")
        .options(TableOptions::new().codec(loaderx_core::Codec::Raw));
    let summary = convert_jsonl(&source, &JsonlOptions::new().schema(schema), &out).unwrap();
    let names: Vec<&str> = summary.splits[0]
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["tok", "xy", "grid", "b", "nest"]);
    let split = out.join("all");
    let tok = Store::open(split.join("tok")).unwrap();
    assert_eq!((tok.kind(), tok.dtype()), (StoreKind::Ragged, DType::I32));
    let nest = Store::open(split.join("nest")).unwrap();
    assert_eq!((nest.kind(), nest.dtype()), (StoreKind::Ragged, DType::I16));
    // The unnarrowed columns keep Python's digests.
    for c in ["xy", "grid", "b"] {
        let d = digest(&Store::open(split.join(c)).unwrap()).unwrap();
        assert_eq!(d.sha256, fx.expected[c][0].as_str().unwrap(), "{c}");
    }
    // A schema file through the CLI: a value out of a narrowed range is an
    // error naming its line (the sixth line is blank: row 7 is line 8).
    let schema_file = tmp.path().join("schema.json");
    std::fs::write(&schema_file, r#"{"i": "int8"}"#).unwrap();
    let out2 = tmp.path().join("out2");
    let e = fails(&[
        "convert",
        "jsonl",
        fx.dir.join("data.jsonl").to_str().unwrap(),
        "-o",
        out2.to_str().unwrap(),
        "--schema",
        schema_file.to_str().unwrap(),
    ]);
    assert!(e.contains("data.jsonl: line 3:"), "{e}");
    assert!(e.contains("9007199254740993 does not fit"), "{e}");
    assert!(!out2.exists());
}

/// Writes `text` to `dir/name`.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `loaderx convert jsonl FILE -o OUT EXTRA...` fails; OUT is not left.
fn convert_fails(file: &Path, extra: &[&str]) -> String {
    let out = file.with_extension("out");
    let mut args = vec![
        "convert",
        "jsonl",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--text",
        "bytes",
    ];
    args.extend(extra);
    let e = fails(&args);
    assert!(!out.exists(), "{} was left behind", out.display());
    let parent = out.parent().unwrap();
    for entry in std::fs::read_dir(parent).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(!name.contains(".out"), "{name} was left behind");
    }
    e
}

fn good_lines(n: usize) -> String {
    (0..n)
        .map(|k| format!("{{\"a\": {k}, \"t\": \"r{k}\", \"v\": [{k}, 1]}}\n"))
        .collect()
}

#[test]
fn hostile_files_fail_naming_file_and_line_and_leave_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A truncated last line (a writer killed mid-line).
    let f = write(
        d,
        "truncated.jsonl",
        &(good_lines(60) + "{\"a\": 60, \"t\": \"r"),
    );
    let e = convert_fails(&f, &["--infer-rows", "10"]);
    assert!(e.contains("truncated.jsonl: line 61:"), "{e}");
    assert!(e.contains("not a complete JSON value"), "{e}");
    // In the sample too.
    let e = convert_fails(&f, &[]);
    assert!(e.contains("truncated.jsonl: line 61:"), "{e}");
    // A line that is not an object.
    let f = write(
        d,
        "array.jsonl",
        &(good_lines(4) + "[1, 2]\n" + &good_lines(4)),
    );
    let e = convert_fails(&f, &[]);
    assert!(e.contains("array.jsonl: line 5: not a JSON object"), "{e}");
    let e = convert_fails(&f, &["--infer-rows", "2"]);
    assert!(e.contains("array.jsonl: line 5:"), "{e}");
    // A type mismatch at line 57, past the sample and in it.
    let mut lines: Vec<String> = good_lines(100).lines().map(str::to_owned).collect();
    lines[56] = "{\"a\": \"fifty-six\", \"t\": \"r\", \"v\": [1, 1]}".to_owned();
    let f = write(d, "mismatch.jsonl", &(lines.join("\n") + "\n"));
    let e = convert_fails(&f, &["--infer-rows", "10"]);
    assert!(e.contains("mismatch.jsonl: line 57:"), "{e}");
    assert!(e.contains("fifty-six"), "{e}");
    assert!(e.contains("--infer-rows"), "{e}");
    let e = convert_fails(&f, &[]);
    assert!(e.contains("mismatch.jsonl: line 57:"), "{e}");
    assert!(e.contains("holds a string, but a number on line 1"), "{e}");
    lines[56] = "{\"a\": 56.5, \"t\": \"r\", \"v\": [1, 1]}".to_owned();
    let f = write(d, "fraction.jsonl", &(lines.join("\n") + "\n"));
    let e = convert_fails(&f, &["--infer-rows", "10"]);
    assert!(
        e.contains("fraction.jsonl: line 57:") && e.contains("56.5 is not an integer"),
        "{e}"
    );
    // An overlong line (a small limit stands for a 10 GB line).
    let long = format!(
        "{{\"a\": 1, \"t\": \"{}\", \"v\": [1, 1]}}\n",
        "x".repeat(5000)
    );
    let f = write(d, "long.jsonl", &(good_lines(2) + &long + &good_lines(2)));
    let e = convert_fails(&f, &["--max-line-bytes", "1000"]);
    assert!(
        e.contains("long.jsonl: line 3: longer than 1000 bytes"),
        "{e}"
    );
    let e = convert_fails(&f, &["--max-line-bytes", "1000", "--infer-rows", "1"]);
    assert!(e.contains("long.jsonl: line 3: longer"), "{e}");
    // An empty file.
    let f = write(d, "empty.jsonl", "");
    let e = convert_fails(&f, &[]);
    assert!(e.contains("empty.jsonl: holds no JSON object"), "{e}");
    // A good file converts, row numbers of table errors counting rows.
    let f = write(d, "good.jsonl", &good_lines(5));
    let out = d.join("good");
    ok(
        &[
            "convert",
            "jsonl",
            f.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--text",
            "bytes",
        ],
        &[],
    );
    assert_eq!(
        Store::open(out.join("train/v")).unwrap().kind(),
        StoreKind::Dense
    );
}

#[test]
fn integers_out_of_range_fail_naming_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Inferred float64 before, which rounded 9007199254740993 to ...992.
    let f = write(
        d,
        "ids.jsonl",
        "{\"id\": 1}\n{\"id\": 9007199254740993}\n{\"id\": 100000000000000000000}\n{\"id\": 3}\n",
    );
    let e = convert_fails(&f, &[]);
    assert!(
        e.contains(
            "ids.jsonl: line 3: the field \"id\" holds the integer 100000000000000000000, \
             beyond int64 and uint64"
        ),
        "{e}"
    );
    // Given float64, an integer it cannot hold exactly is refused too.
    let schema = write(d, "schema.json", r#"{"id": "float64"}"#);
    let e = convert_fails(&f, &["--schema", schema.to_str().unwrap()]);
    assert!(e.contains("ids.jsonl: line 2:"), "{e}");
    assert!(
        e.contains("9007199254740993 is not exactly a Float64"),
        "{e}"
    );
}

/// A split of two files; `b.jsonl` holds `bad` on line 5 (after a blank
/// line), its fourth row, the split's eighth (row 7).
fn split_with(d: &Path, bad: &str) -> (PathBuf, PathBuf) {
    let a = write(d, "a.jsonl", &good_lines(4));
    let b = write(
        d,
        "b.jsonl",
        &format!(
            "{}\n{}{bad}\n{}",
            good_lines(1),
            good_lines(2),
            good_lines(2)
        ),
    );
    (a, b)
}

#[test]
fn rows_the_stores_cannot_hold_are_named_by_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = d.join("out");
    for (bad, column, why) in [
        (r#"{"a": null, "t": "r", "v": [1, 1]}"#, "a", "holds a null"),
        (r#"{"t": "r", "v": [1, 1]}"#, "a", "holds a null"),
        (r#"{"a": 1, "t": "r", "v": [1, null]}"#, "v", "holds a null"),
        (
            r#"{"a": 1, "t": "", "v": [1, 1]}"#,
            "t",
            "is an empty string",
        ),
    ] {
        let (a, b) = split_with(d, bad);
        for extra in [&[][..], &["--parts", "2", "--part", "1"][..]] {
            let mut args = vec![
                "convert",
                "jsonl",
                a.to_str().unwrap(),
                b.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "--text",
                "bytes",
            ];
            args.extend(extra);
            let e = fails(&args);
            let want = format!("b.jsonl: line 5: column {column:?}: {why}");
            assert!(e.contains(&want), "{bad} {extra:?}: {e}");
            assert!(!e.contains("row 7"), "{e}");
        }
        assert!(!out.join("train").exists());
        std::fs::remove_dir_all(&out).ok();
    }
    // A Ragged list of lists that is not rectangular.
    let ragged = |k: usize| format!("{{\"g\": [[{k}], [1]]}}\n{{\"g\": [[1, 2], [3, 4]]}}\n");
    let a = write(d, "a.jsonl", &ragged(1));
    let b = write(
        d,
        "b.jsonl",
        &format!("{}\n{}", ragged(2), "{\"g\": [[1, 2], [3]]}\n"),
    );
    let e = fails(&[
        "convert",
        "jsonl",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        e.contains("b.jsonl: line 4: column \"g\": not rectangular"),
        "{e}"
    );
    // Dropped when asked: every other row converts.
    let (a, b) = split_with(d, r#"{"a": null, "t": "r", "v": [1, 1]}"#);
    let text = ok(
        &[
            "convert",
            "jsonl",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--text",
            "bytes",
            "--drop-null-rows",
        ],
        &[],
    );
    assert!(text.contains("train: 9 records (of 10 rows"), "{text}");
}

#[test]
fn bad_utf8_past_the_sample_is_named_by_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut bytes = good_lines(4).into_bytes();
    bytes.extend_from_slice(b"{\"a\": 4, \"t\": \"\xff\xfe\", \"v\": [1, 1]}\n");
    let f = tmp.path().join("utf8.jsonl");
    std::fs::write(&f, bytes).unwrap();
    for extra in [&[][..], &["--infer-rows", "2"][..]] {
        let e = convert_fails(&f, extra);
        assert!(e.contains("utf8.jsonl: line 5:"), "{extra:?}: {e}");
    }
}

/// The hidden entries beside `out` in `dir` (staging and lock files).
fn staging_of(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".out."))
        .collect();
    v.sort();
    v
}

#[test]
fn a_killed_conversion_leaves_staging_that_the_next_one_removes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Large enough to be killed midway.
    let mut text = String::new();
    for k in 0..300_000 {
        text.push_str(&format!(
            "{{\"a\": {k}, \"v\": [{k}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}}\n"
        ));
    }
    let f = write(d, "big.jsonl", &text);
    let out = d.join("out");
    let args = [
        "convert",
        "jsonl",
        f.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--codec",
        "raw",
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(args)
        .env_remove("JOB_COMPLETION_INDEX")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed (SIGKILL: no cleanup runs) once its staging holds a store.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let staged = staging_of(d)
            .iter()
            .any(|n| !n.ends_with(".lock") && d.join(n).join("train/v").exists());
        if staged {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the conversion ended before it could be killed"
        );
        assert!(std::time::Instant::now() < deadline, "no staging appeared");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let left = staging_of(d);
    assert!(!left.is_empty() && !out.exists(), "{left:?}");
    // The rerun converts, and removes what the killed run left.
    let text = ok(&args, &[]);
    assert!(text.contains("train: 300000 records"), "{text}");
    assert!(staging_of(d).is_empty(), "left behind: {:?}", staging_of(d));
    // A live writer's staging (a run still converting) is kept by another
    // writer of the root that starts meanwhile.
    std::fs::remove_dir_all(&out).unwrap();
    let mut live = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(args)
        .env_remove("JOB_COMPLETION_INDEX")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let staged = loop {
        let staged: Vec<String> = staging_of(d)
            .into_iter()
            .filter(|n| !n.ends_with(".lock") && d.join(n).join("train/v").exists())
            .collect();
        if !staged.is_empty() {
            break staged;
        }
        assert!(live.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let other = loaderx_convert::output::StagedRoot::new(&out).unwrap();
    assert!(
        live.try_wait().unwrap().is_none(),
        "the run ended too early to test"
    );
    assert!(staged.iter().all(|n| d.join(n).exists()), "{staged:?}");
    drop(other);
    assert!(live.wait().unwrap().success());
    assert!(staging_of(d).is_empty(), "{:?}", staging_of(d));
    assert_eq!(Store::open(out.join("train/v")).unwrap().len(), 300_000);
}
