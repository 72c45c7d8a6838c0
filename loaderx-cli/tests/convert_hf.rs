//! `loaderx_convert::hf::convert_hf` and `loaderx convert hf` against a local stand-in for the
//! Hugging Face Hub: the real `hf-hub` client talks to
//! `tests/python/hf_mock_server.py` on 127.0.0.1, which serves parquet files
//! written by the real `datasets` library (`tests/python/make_hf_fixtures.py`).
//! Store contents are compared with digests the fixture script computed with
//! numpy from the same data.
//!
//! Needs `LOADERX_PYTHON` (a python with `datasets`, `pillow`, `tokenizers`,
//! `soundfile` and `loaderx==2.4.6`); the
//! README's test command installs one. `LOADERX_SKIP_PYTHON=1` skips.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use loaderx_convert::hf::{ColumnSource, HfSource, HfSummary, convert_hf};
use loaderx_core::{DynDense, Generation, Store, StoreKind, digest};
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

fn python() -> Option<PathBuf> {
    if std::env::var_os("LOADERX_SKIP_PYTHON").is_some() {
        eprintln!("SKIPPED: LOADERX_SKIP_PYTHON is set");
        return None;
    }
    Some(
        std::env::var_os("LOADERX_PYTHON")
            .map(PathBuf::from)
            .expect("set LOADERX_PYTHON to a python with `datasets`, `pillow`, `tokenizers`, `soundfile` and loaderx 2.4.6 (./scripts/test installs one), or LOADERX_SKIP_PYTHON=1"),
    )
}

/// Generates the fixtures once per test process.
fn fixtures() -> Option<&'static Fixtures> {
    static FIXTURES: OnceLock<Option<Fixtures>> = OnceLock::new();
    FIXTURES
        .get_or_init(|| {
            let py = python()?;
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hf-fixtures");
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap();
            }
            // Offline, with the datasets library's caches inside the fixtures.
            let out = Command::new(&py)
                .arg(repo_root().join("tests/python/make_hf_fixtures.py"))
                .arg(&dir)
                .env("HF_HOME", dir.join("hf-home"))
                .env("HF_DATASETS_OFFLINE", "1")
                .env("HF_HUB_OFFLINE", "1")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "make_hf_fixtures.py failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let expected =
                serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
            Some(Fixtures { dir, expected })
        })
        .as_ref()
}

/// The fixtures, a mock Hub serving them and a temporary directory; `None`
/// when the Python-backed tests are skipped.
fn setup() -> Option<(&'static Fixtures, Mock, tempfile::TempDir)> {
    let fx = fixtures()?;
    Some((fx, Mock::start(fx), tempfile::tempdir().unwrap()))
}

/// The mock Hub, killed when dropped.
struct Mock {
    child: Child,
    url: String,
    port: u16,
}

impl Mock {
    fn start(fx: &Fixtures) -> Mock {
        let mut child = Command::new(python().unwrap())
            .arg(repo_root().join("tests/python/hf_mock_server.py"))
            .arg(&fx.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .trim()
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("mock server said {line:?}"))
            .parse()
            .unwrap();
        Mock {
            child,
            url: format!("http://127.0.0.1:{port}"),
            port,
        }
    }

    /// Request counts by kind (`api`, `resolve`, `cdn`, `unauthorized`).
    fn stats(&self) -> Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET /_mock/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = text.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str(body).unwrap()
    }

    fn source(&self, repo: &str, cache: &Path) -> HfSource {
        HfSource::new(repo).endpoint(&self.url).cache_dir(cache)
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `loaderx convert hf REPO -o OUT ARGS...` (`args`: REPO, OUT,
/// ARGS...) with a clean Hub environment plus `env`.
fn cli(mock: &Mock, home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loaderx"));
    cmd.args(["convert", "hf"])
        .args(&args[..1])
        .arg("-o")
        .args(&args[1..])
        .env("HF_ENDPOINT", &mock.url)
        .env("HF_HOME", home)
        .env_remove("HF_TOKEN")
        .env_remove("HF_TOKEN_PATH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Runs `loaderx convert hf ARGS` (a clean Hub environment, home `home`),
/// checks that it succeeded, and returns what it printed.
fn cli_ok(mock: &Mock, home: &Path, args: &[&str]) -> String {
    let run = cli(mock, home, args, &[]);
    assert!(
        run.status.success(),
        "loaderx convert hf {args:?} failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

/// Converts `source` to `out`, expecting a failure that leaves nothing at
/// `out`; returns the message.
fn convert_err(source: &HfSource, out: &Path) -> String {
    let e = convert_hf(source, out).unwrap_err().to_string();
    assert!(!out.exists(), "{} left behind after: {e}", out.display());
    e
}

/// Asserts that `text` contains every needle.
fn assert_contains_all(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "{n:?} missing from: {text}");
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The stores of the split directory `dir`, in name order: its
/// directories (beside them, `.source_columns.json` and `classes.json`).
fn store_names(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| dir.join(n).is_dir())
        .collect()
}

fn sorted_keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

/// Checks every store under `out` against the fixture script's expectations.
fn check_stores(fx: &Fixtures, out: &Path, case: &Value, splits: &[&str]) {
    let mut want_splits: Vec<String> = splits.iter().map(|s| s.to_string()).collect();
    want_splits.sort();
    assert_eq!(names(out), want_splits, "{}", out.display());
    for split in splits {
        let expect = &case["splits"][split];
        let columns = &expect["columns"];
        assert_eq!(
            store_names(&out.join(split)),
            sorted_keys(columns),
            "{split}"
        );
        for (name, col) in columns.as_object().unwrap() {
            let path = out.join(split).join(name);
            let what = format!("{split}/{name}");
            let store = Store::open(&path).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(store.len(), col["records"].as_u64().unwrap(), "{what}");
            assert_eq!(store.len(), expect["records"].as_u64().unwrap(), "{what}");
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
                    assert_eq!(r.ndim() as u64, col["ndim"].as_u64().unwrap(), "{what}")
                }
                (s, k) => panic!("{what}: store is {:?}, expected {k}", s.kind()),
            }
            if let Some(d) = col.get("digest") {
                assert_eq!(
                    digest(&store).unwrap().sha256,
                    d.as_str().unwrap(),
                    "{what}: contents differ from the source"
                );
            }
            if let Some(samples) = col.get("samples") {
                check_samples(fx, &store, samples, col, &what);
            }
            if let Some(pixels) = col.get("pixels") {
                // JPEG: decoders may round differently; allow a small error.
                let want = std::fs::read(fx.dir.join(pixels.as_str().unwrap())).unwrap();
                let ds = DynDense::open(&path).unwrap();
                let all: Vec<u64> = (0..ds.len()).collect();
                let got = ds.gather_bytes(&all).unwrap();
                assert_eq!(got.len(), want.len(), "{what}");
                let diffs: Vec<u32> = got
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| u32::from(a.abs_diff(*b)))
                    .collect();
                let max = diffs.iter().copied().max().unwrap();
                let mean = diffs.iter().sum::<u32>() as f64 / diffs.len() as f64;
                assert!(max <= 8 && mean < 1.0, "{what}: max {max}, mean {mean}");
            }
        }
    }
}

/// Compares the f32 records of `store` with the expected `samples` file
/// (records concatenated), within the case's tolerance, and their shapes.
fn check_samples(fx: &Fixtures, store: &Store, samples: &Value, col: &Value, what: &str) {
    let want: Vec<f32> = std::fs::read(fx.dir.join(samples.as_str().unwrap()))
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let (mut got, mut shapes) = (Vec::new(), Vec::new());
    store
        .for_each_record(|_, shape, bytes| {
            shapes.push(shape.to_vec());
            got.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap())),
            );
            Ok(())
        })
        .unwrap();
    let want_shapes: Vec<Vec<usize>> = serde_json::from_value(col["shapes"].clone()).unwrap();
    assert_eq!(shapes, want_shapes, "{what}");
    assert_eq!(got.len(), want.len(), "{what}");
    let tolerance = col["tolerance"].as_f64().unwrap() as f32;
    let max = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        max <= tolerance,
        "{what}: max difference {max} > {tolerance}"
    );
}

/// [`check_stores`], then [`check_python_reads`]: the stores hold the
/// expected records and the reference package reads them alike.
fn check_stores_read_by_python(fx: &Fixtures, out: &Path, case: &Value, splits: &[&str]) {
    check_stores(fx, out, case, splits);
    check_python_reads(out);
}

fn check_summary(summary: &HfSummary, case: &Value, splits: &[&str]) {
    assert_eq!(summary.repo, case["repo"].as_str().unwrap());
    assert_eq!(summary.commit, case["commit"].as_str().unwrap());
    assert_eq!(
        summary.parquet_commit,
        case["parquet_commit"].as_str().unwrap()
    );
    assert_eq!(summary.config, case["config"].as_str().unwrap());
    let got: Vec<&str> = summary.splits.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(got, splits);
    for s in &summary.splits {
        let expect = &case["splits"][&s.name];
        assert_eq!(s.records, expect["records"].as_u64().unwrap());
        let mut cols: Vec<String> = s.columns.iter().map(|c| c.name.clone()).collect();
        cols.sort();
        assert_eq!(cols, sorted_keys(&expect["columns"]));
        for c in &s.columns {
            let e = &expect["columns"][&c.name];
            let kind = match c.kind {
                StoreKind::Dense => "dense",
                StoreKind::Ragged => "ragged",
            };
            assert_eq!(kind, e["kind"].as_str().unwrap(), "{}", c.name);
            assert_eq!(c.dtype.name(), e["dtype"].as_str().unwrap(), "{}", c.name);
        }
    }
}

#[test]
fn mnist_like_images_from_the_parquet_branch() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let case = &fx.expected["mnist"];
    let cache = tmp.path().join("cache");

    // Small write batches: many flushes, crossing row groups and files.
    let out = tmp.path().join("out").join("mnist");
    let summary = convert_hf(
        &mock
            .source("test/mnist-like", &cache)
            .batch_limits(100, 64 << 10),
        &out,
    )
    .unwrap();
    assert!(summary.from_parquet_branch);
    assert_eq!(summary.revision, "main");
    assert_eq!(summary.root, out);
    assert_eq!(
        summary.files,
        [
            "mnist/train/0000.parquet",
            "mnist/train/0001.parquet",
            "mnist/test/0000.parquet"
        ]
    );
    check_summary(&summary, case, &["train", "test"]);
    // The ClassLabel's names, beside each split.
    let digits: Vec<String> = (0..10).map(|d| d.to_string()).collect();
    for split in ["train", "test"] {
        let classes = loaderx_core::classes(out.join(split)).unwrap();
        assert_eq!(classes.get("label").unwrap(), digits, "{split}");
    }
    let image = &summary.splits[0].columns[0];
    assert_eq!(image.name, "image");
    assert_eq!(image.source, ColumnSource::Image);
    assert_eq!(image.item_shape.as_deref(), Some(&[28usize, 28][..]));
    check_stores_read_by_python(fx, &out, case, &["train", "test"]);
    let text = summary.to_string();
    assert!(text.contains(case["commit"].as_str().unwrap()), "{text}");
    assert!(text.contains("refs/convert/parquet"), "{text}");
    // Only the published root is left next to it.
    assert_eq!(names(&tmp.path().join("out")), ["mnist"]);

    // A second conversion at the same commit reads hf-hub's cache.
    let downloads = mock.stats()["cdn"].as_u64().unwrap();
    assert!(downloads >= 3);
    let out2 = tmp.path().join("out").join("test-only");
    let summary = convert_hf(
        &mock.source("test/mnist-like", &cache).splits(["test"]),
        &out2,
    )
    .unwrap();
    check_summary(&summary, case, &["test"]);
    check_stores(fx, &out2, case, &["test"]);
    assert_eq!(mock.stats()["cdn"].as_u64().unwrap(), downloads);

    // Refuses an existing output; unknown split and config are named.
    let e = convert_hf(&mock.source("test/mnist-like", &cache), &out).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    let e = convert_hf(
        &mock.source("test/mnist-like", &cache).splits(["dev"]),
        tmp.path().join("x"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no split \"dev\""), "{e}");
    let e = convert_hf(
        &mock.source("test/mnist-like", &cache).config("other"),
        tmp.path().join("x"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no config \"other\""), "{e}");
    // The parquet branch converts `main`, not an older tag.
    let e = convert_hf(
        &mock.source("test/mnist-like", &cache).revision("v0"),
        tmp.path().join("x"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("not this revision"), "{e}");
    assert!(!tmp.path().join("x").exists());
}

#[test]
fn numeric_lists_and_arrays_through_the_cli() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let case = &fx.expected["numeric"];
    let out = tmp.path().join("numeric");

    // Default batches: train (40000 rows) needs two flushes of 32768.
    let run = cli(
        &mock,
        &tmp.path().join("hf"),
        &["test/numeric", out.to_str().unwrap(), "--shards", "3"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stdout.contains(case["commit"].as_str().unwrap()),
        "{stdout}"
    );
    assert!(stdout.contains("tokens: ragged i32 (rank 1)"), "{stdout}");
    assert!(stdout.contains("mat: dense f32 [3, 4]"), "{stdout}");
    // No terminal: no progress bar.
    assert!(stderr.is_empty(), "{stderr}");
    check_stores_read_by_python(fx, &out, case, &["test", "train"]);
    let Store::Dense(u64s) = Store::open(out.join("train/u64")).unwrap() else {
        panic!("u64 is not dense")
    };
    assert_eq!(u64s.data_shards(), 3);
    // The hf-hub cache went where HF_HOME says.
    assert!(tmp.path().join("hf/hub/datasets--test--numeric").is_dir());

    // The library with tiny batches writes the same records.
    let out2 = tmp.path().join("numeric-small-batches");
    let summary = convert_hf(
        &mock
            .source("test/numeric", &tmp.path().join("cache"))
            .splits(["test"])
            .batch_limits(7, 1 << 10),
        &out2,
    )
    .unwrap();
    check_summary(&summary, case, &["test"]);
    check_stores(fx, &out2, case, &["test"]);
}

#[test]
fn images_of_different_sizes_are_encoded_or_with_decoded_ragged() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    // By default the column of several sizes keeps its files' bytes; the
    // column of one size is decoded.
    let plain = convert_hf(
        &mock.source("test/images", &tmp.path().join("c")),
        tmp.path().join("images-encoded"),
    )
    .unwrap();
    let cols = &plain.splits[0].columns;
    assert_eq!(cols[0].source, ColumnSource::EncodedImage);
    assert_eq!((cols[0].kind, cols[0].ndim), (StoreKind::Ragged, 1));
    assert!(
        cols[0]
            .note
            .as_deref()
            .is_some_and(|n| n.contains("--decoded")),
        "{:?}",
        cols[0].note
    );
    assert_eq!(cols[1].item_shape.as_deref(), Some(&[16usize, 16, 3][..]));
    // Decoded pixels when asked for: Ragged, each image its own shape.
    let case = &fx.expected["images"];
    let out = tmp.path().join("images");
    let summary = convert_hf(
        &mock
            .source("test/images", &tmp.path().join("c"))
            .decoded_images(true),
        &out,
    )
    .unwrap();
    check_summary(&summary, case, &["train"]);
    let cols = &summary.splits[0].columns;
    assert_eq!(cols[0].kind, StoreKind::Ragged);
    assert_eq!(cols[0].ndim, 3);
    assert_eq!(cols[1].item_shape.as_deref(), Some(&[16usize, 16, 3][..]));
    check_stores_read_by_python(fx, &out, case, &["train"]);
}

#[test]
fn lossy_columns_fail_naming_the_column_and_leave_nothing() {
    let Some((_, mock, tmp)) = setup() else {
        return;
    };
    let cache = tmp.path().join("cache");
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // Strings are no longer refused: their UTF-8 bytes by default.
    let strings = convert_hf(
        &mock.source("test/bad", &cache).config("strings"),
        work.join("strings"),
    )
    .unwrap();
    let text = &strings.splits[0].columns[1];
    assert_eq!((text.kind, text.dtype.name()), (StoreKind::Ragged, "u8"));
    let store = Store::open(work.join("strings/train/text")).unwrap();
    let mut got = Vec::new();
    store
        .for_each_record(|_, _, b| {
            got.push(String::from_utf8(b.to_vec()).unwrap());
            Ok(())
        })
        .unwrap();
    assert_eq!(got, ["a", "b", "c", "d", "e"]);
    std::fs::remove_dir_all(work.join("strings")).unwrap();
    for (config, needles) in [
        ("nulls", &["\"maybe\"", "row 2: holds a null"][..]),
        ("empty", &["\"seq\"", "row 2: the record is empty"][..]),
        (
            "mixed",
            &[
                "\"picture\"",
                "row 1 is RGB but the first image, row 0, is L",
                "--image-mode RGB",
            ][..],
        ),
    ] {
        let e = convert_err(
            &mock.source("test/bad", &cache).config(config),
            &work.join("out"),
        );
        assert_contains_all(&e, needles);
        assert!(names(&work).is_empty(), "{config}: left {:?}", names(&work));
    }
    // Several configs and none chosen.
    let e = convert_hf(&mock.source("test/bad", &cache), work.join("out")).unwrap_err();
    assert!(e.to_string().contains("several configs"), "{e}");

    // The CLI exits non-zero with the message.
    let run = cli(
        &mock,
        &tmp.path().join("hf"),
        &[
            "test/bad",
            work.join("out").to_str().unwrap(),
            "--config",
            "nulls",
        ],
        &[],
    );
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("column \"maybe\""), "{stderr}");
    assert!(names(&work).is_empty());
}

#[test]
fn names_from_remote_data_cannot_escape() {
    let Some((_, mock, tmp)) = setup() else {
        return;
    };
    let work = tmp.path().join("a").join("b");
    std::fs::create_dir_all(&work).unwrap();
    // A column name is mapped to a plain stream name (`/` and a leading
    // `.` become `_`): its store stays inside the root.
    let s = convert_hf(
        &mock.source("test/evil-column", &tmp.path().join("c")),
        work.join("evil"),
    )
    .unwrap();
    assert_eq!(s.splits[0].columns[0].name, "_._.._escaped");
    assert_eq!(s.splits[0].columns[0].column, "../../escaped");
    assert_eq!(
        names(&work.join("evil/train")),
        [".source_columns.json", "_._.._escaped"]
    );
    std::fs::remove_dir_all(work.join("evil")).unwrap();
    let e = convert_hf(
        &mock.source("test/evil-listing", &tmp.path().join("c")),
        work.join("out"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("not a plain relative path"), "{e}");
    // Files must come from the pinned commit.
    let e = convert_hf(
        &mock.source("test/liar", &tmp.path().join("c")),
        work.join("out"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("from another commit"), "{e}");
    assert!(names(&work).is_empty());
    assert_eq!(names(tmp.path()), ["a", "c"]);
    assert_eq!(names(&tmp.path().join("a")), ["b"]);
}

#[test]
fn gated_repos_need_the_token_which_is_never_printed() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let case = &fx.expected["gated"];
    let token = case["token"].as_str().unwrap();
    let home = tmp.path().join("hf");
    let out = |name: &str| tmp.path().join(name).to_str().unwrap().to_owned();

    // No token at all, and a wrong one: 401, named as such.
    let run = cli(&mock, &home, &["test/gated", &out("a")], &[]);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("401"), "{stderr}");
    let wrong = "hf_wrong_token_0000";
    let run = cli(
        &mock,
        &home,
        &["test/gated", &out("a"), "--token", wrong],
        &[],
    );
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("401"), "{stderr}");
    assert!(!stderr.contains(wrong), "{stderr}");
    assert!(!tmp.path().join("a").exists());

    // HF_TOKEN, --token, and the token file of `huggingface-cli login`.
    let run = cli(
        &mock,
        &home,
        &["test/gated", &out("b")],
        &[("HF_TOKEN", token)],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let run2 = cli(
        &mock,
        &home,
        &["test/gated", &out("c"), "--token", token],
        &[],
    );
    assert!(run2.status.success());
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("token"), format!("{token}\n")).unwrap();
    let run3 = cli(&mock, &home, &["test/gated", &out("d")], &[]);
    assert!(
        run3.status.success(),
        "{}",
        String::from_utf8_lossy(&run3.stderr)
    );
    for r in [&run, &run2, &run3] {
        for stream in [&r.stdout, &r.stderr] {
            assert!(!String::from_utf8_lossy(stream).contains(token));
        }
    }
    for name in ["b", "c", "d"] {
        check_stores(fx, &tmp.path().join(name), case, &["train"]);
    }
    assert!(mock.stats()["unauthorized"].as_u64().unwrap() >= 2);

    // The library: an explicit token works; errors never show it.
    let e = convert_hf(
        &mock
            .source("test/gated", &tmp.path().join("c2"))
            .token(wrong),
        tmp.path().join("e"),
    )
    .unwrap_err();
    assert!(!format!("{e} {e:?}").contains(wrong));
    let summary = convert_hf(
        &mock
            .source("test/gated", &tmp.path().join("c2"))
            .token(token),
        tmp.path().join("f"),
    )
    .unwrap();
    check_summary(&summary, case, &["train"]);
}

#[test]
fn revisions_resolve_to_pinned_commits() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let old = &fx.expected["moving_old"];
    let new = &fx.expected["moving_new"];
    let old_sha = old["commit"].as_str().unwrap();
    let cache = tmp.path().join("cache");

    // `main` has moved on to the new commit.
    let s = convert_hf(&mock.source("test/moving", &cache), tmp.path().join("main")).unwrap();
    check_summary(&s, new, &["train"]);
    check_stores(fx, &tmp.path().join("main"), new, &["train"]);

    // The old commit, by sha and by tag, gives the old data.
    for (rev, dir) in [(old_sha, "by-sha"), ("v1", "by-tag")] {
        let s = convert_hf(
            &mock.source("test/moving", &cache).revision(rev),
            tmp.path().join(dir),
        )
        .unwrap();
        assert_eq!(s.revision, rev);
        assert_eq!(s.commit, old_sha);
        check_summary(&s, old, &["train"]);
        check_stores(fx, &tmp.path().join(dir), old, &["train"]);
    }
    let stdout = cli_ok(
        &mock,
        &tmp.path().join("hf"),
        &[
            "test/moving",
            tmp.path().join("cli").to_str().unwrap(),
            "--revision",
            old_sha,
        ],
    );
    assert!(stdout.contains(&format!("commit {old_sha}")), "{stdout}");
    check_stores(fx, &tmp.path().join("cli"), old, &["train"]);

    // Unknown revisions and repos are errors, with nothing written.
    let e = convert_hf(
        &mock
            .source("test/moving", &cache)
            .revision("no-such-branch"),
        tmp.path().join("x"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("404"), "{e}");
    let e = convert_hf(&mock.source("test/absent", &cache), tmp.path().join("x")).unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");
    let e = convert_hf(&mock.source("../escape", &cache), tmp.path().join("x")).unwrap_err();
    assert!(e.to_string().contains("not a Hub dataset id"), "{e}");
    assert!(!tmp.path().join("x").exists());
}

/// Every store under `out` (`split/column`) as the Python loaderx of its
/// generation digests it (2.8.19, the default, through
/// `tests/python/generations.py`; 2.4.6 through `interop.py`) must equal the
/// Rust digest: the reference package reads what the converter wrote.
fn check_python_reads(out: &Path) {
    let mut stores = Vec::new();
    for split in names(out) {
        for column in store_names(&out.join(&split)) {
            stores.push(out.join(&split).join(column));
        }
    }
    for generation in [Generation::V2_4_6, Generation::V2_8_19] {
        let ours: Vec<&PathBuf> = stores
            .iter()
            .filter(|s| Store::open(s).unwrap().generation() == generation)
            .collect();
        if ours.is_empty() {
            continue;
        }
        let mut cmd = match generation {
            Generation::V2_4_6 => {
                let mut c = Command::new(python().unwrap());
                c.arg(repo_root().join("tests/python/interop.py"));
                c
            }
            _ => {
                let Some(mut c) = loaderx_tests::python_release(generation.version()) else {
                    return;
                };
                c.arg(loaderx_tests::generations_script());
                c
            }
        };
        let py = cmd.arg("digest").args(&ours).output().unwrap();
        assert!(
            py.status.success(),
            "Python loaderx {generation} digest failed:\n{}",
            String::from_utf8_lossy(&py.stderr)
        );
        let lines: Vec<String> = String::from_utf8(py.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(lines.len(), ours.len());
        for (store, line) in ours.iter().zip(lines) {
            let rust = digest(&Store::open(store).unwrap()).unwrap().to_string();
            assert_eq!(line, rust, "{}", store.display());
        }
    }
}

#[test]
fn text_columns_selected_as_bytes_and_as_tokens() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let cache = tmp.path().join("cache");
    let home = tmp.path().join("hf");
    let out = |name: &str| tmp.path().join(name);
    let src = || mock.source("test/text", &cache);
    let tokenizer = fx.dir.join("tokenizer/tokenizer.json");

    // Only the label: the strings (with their null and empty row) stay out.
    let case = &fx.expected["text_labels"];
    let stdout = cli_ok(
        &mock,
        &home,
        &[
            "test/text",
            out("labels").to_str().unwrap(),
            "--columns",
            "label",
        ],
    );
    assert!(
        stdout.contains("train: 300 records [label: dense i64 []]"),
        "{stdout}"
    );
    check_stores(fx, &out("labels"), case, &["test", "train"]);
    // --drop does the same.
    let s = convert_hf(&src().drop(["text"]), out("labels2")).unwrap();
    check_summary(&s, case, &["train", "test"]);

    // Refusals name the column, the row and the flag that helps. Strings
    // are stored as their UTF-8 bytes without a flag (`--text bytes`
    // changes nothing): the null of row 3 is what fails.
    for (source, needles) in [
        (
            src(),
            &["column \"text\": row 3", "null", "--drop-null-rows"][..],
        ),
        (
            src().columns(["label", "nope"]),
            &[
                "--columns names no column \"nope\"",
                "(columns: text, label)",
            ][..],
        ),
        (
            src().drop(["nope"]),
            &["--drop names no column \"nope\""][..],
        ),
        (
            src().text_bytes(),
            &["column \"text\": row 3", "null", "--drop-null-rows"][..],
        ),
        (
            src().text_bytes().drop_null_rows(true),
            &[
                "column \"text\": row 5",
                "empty string",
                "--drop-empty-rows",
            ][..],
        ),
        (
            src().tokenizer(fx.dir.join("missing.json").to_str().unwrap()),
            &["missing.json", "no such file"][..],
        ),
    ] {
        assert_contains_all(&convert_err(&source, &out("x")), needles);
    }

    // UTF-8 bytes, dropping the null and the empty row from both columns.
    let case = &fx.expected["text_bytes"];
    let stdout = cli_ok(
        &mock,
        &home,
        &[
            "test/text",
            out("bytes").to_str().unwrap(),
            "--text",
            "bytes",
            "--drop-empty-rows",
            "--drop-null-rows",
        ],
    );
    assert!(
        stdout.contains(
            "train: 298 records (of 300 rows; dropped 1 rows with nulls and 1 rows with empty values) \
             [text: ragged u8 (rank 1), label: dense i64 []]"
        ),
        "{stdout}"
    );
    check_stores_read_by_python(fx, &out("bytes"), case, &["test", "train"]);

    // Token ids from a tokenizer.json, equal to Python tokenizers' ids.
    let case = &fx.expected["text_tokens"];
    let stdout = cli_ok(
        &mock,
        &home,
        &[
            "test/text",
            out("tokens").to_str().unwrap(),
            "--tokenizer",
            tokenizer.to_str().unwrap(),
            "--drop-empty-rows",
            "--drop-null-rows",
            "--columns",
            "text,label",
        ],
    );
    assert!(stdout.contains("tokenized with"), "{stdout}");
    assert!(stdout.contains("text: ragged u32 (rank 1)"), "{stdout}");
    check_stores_read_by_python(fx, &out("tokens"), case, &["test", "train"]);

    // Special tokens and EOS; small batches so tokenization spans many flushes.
    let case = &fx.expected["text_tokens_special"];
    let s = convert_hf(
        &src()
            .tokenizer(tokenizer.to_str().unwrap())
            .add_special_tokens(true)
            .append_eos(true, None)
            .drop_empty_rows(true)
            .drop_null_rows(true)
            .batch_limits(7, 1 << 10),
        out("special"),
    )
    .unwrap();
    let info = s.tokenizer.as_ref().unwrap();
    assert_eq!(info.eos_id, case["eos_id"].as_u64().map(|v| v as u32));
    assert_eq!(s.splits[0].dropped_null_rows, 1);
    assert_eq!(s.splits[0].dropped_empty_rows, 1);
    assert_eq!(s.splits[0].columns[0].source, ColumnSource::Tokens);
    check_summary(&s, case, &["train", "test"]);
    check_stores(fx, &out("special"), case, &["test", "train"]);

    // The same tokenizer from a Hub model repo, pinned to its commit (its
    // tokenizer_config.json names the EOS).
    let model = &fx.expected["tok_model"];
    let s = convert_hf(
        &src()
            .tokenizer("test/tok-model")
            .add_special_tokens(true)
            .append_eos(true, None)
            .drop_empty_rows(true)
            .drop_null_rows(true),
        out("hub-tokenizer"),
    )
    .unwrap();
    let info = s.tokenizer.as_ref().unwrap();
    assert_eq!(
        info.hub,
        Some((
            "main".to_owned(),
            model["commit"].as_str().unwrap().to_owned()
        ))
    );
    assert!(
        s.to_string().contains(&format!(
            "tokenized with test/tok-model at revision main = commit {}",
            model["commit"].as_str().unwrap()
        )),
        "{s}"
    );
    check_stores(fx, &out("hub-tokenizer"), case, &["test", "train"]);
}

#[test]
fn mixed_image_modes_convert_to_one_mode_as_pil_does() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let case = &fx.expected["mixed_rgb"];
    let cache = tmp.path().join("cache");

    // Without --image-mode: refused, naming the flag.
    let e = convert_err(
        &mock.source("test/mixed-modes", &cache),
        &tmp.path().join("x"),
    );
    assert_contains_all(
        &e,
        &["column \"picture\"", "different modes", "--image-mode"],
    );

    // With it: every image is RGB, pixels equal PIL's convert("RGB")
    // (within JPEG decoders' rounding).
    let out = tmp.path().join("rgb");
    let stdout = cli_ok(
        &mock,
        &tmp.path().join("hf"),
        &[
            "test/mixed-modes",
            out.to_str().unwrap(),
            "--image-mode",
            "RGB",
        ],
    );
    assert!(stdout.contains("picture: dense u8 [10, 12, 3]"), "{stdout}");
    check_stores_read_by_python(fx, &out, case, &["train"]);
}

#[test]
fn dataset_card_configs_decide_the_files() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let cache = tmp.path().join("cache");
    let src = || mock.source("test/card", &cache);

    // No --config: the card's default config, whose files sit off the
    // default layout (and the decoy in data/ is not read).
    let case = &fx.expected["card_main"];
    let s = convert_hf(&src(), tmp.path().join("main")).unwrap();
    assert!(s.from_card);
    assert_eq!(
        s.files,
        [
            "weird/dir/train-00000.parquet",
            "weird/dir/train-00001.parquet",
            "other/eval.parquet"
        ]
    );
    check_summary(&s, case, &["train", "test"]);
    assert!(
        s.to_string().contains("configs from the dataset card"),
        "{s}"
    );
    check_stores_read_by_python(fx, &s.root, case, &["test", "train"]);

    // The other config through the CLI (a `**` glob).
    let home = tmp.path().join("hf");
    let out = tmp.path().join("extra");
    let args = ["test/card", out.to_str().unwrap(), "--config", "extra"];
    assert!(cli_ok(&mock, &home, &args).contains("(config extra)"));
    check_stores(fx, &out, &fx.expected["card_extra"], &["train"]);

    // A config the card does not declare: the error lists those it does.
    let e = convert_err(&src().config("nope"), &tmp.path().join("x"));
    assert_contains_all(&e, &["no config \"nope\"", "(configs: extra, main)"]);
    let run = cli(
        &mock,
        &tmp.path().join("hf"),
        &["test/card", "x", "--config", "default"],
        &[],
    );
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("(configs: extra, main)"), "{stderr}");
}

#[test]
fn audio_columns_decode_to_samples_and_rates() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let cache = tmp.path().join("cache");

    // WAV and FLAC, mono and stereo, many rates: samples equal soundfile's
    // float32 decoding bit for bit (digests), rates equal.
    let out = tmp.path().join("audio");
    let args = ["test/audio", out.to_str().unwrap(), "--config", "default"];
    assert_contains_all(
        &cli_ok(&mock, &tmp.path().join("hf"), &args),
        &[
            "speech: ragged f32 (rank 1)",
            "speech.sampling_rate: dense u32 []",
            "music: ragged f32 (rank 2)",
        ],
    );
    check_stores_read_by_python(fx, &out, &fx.expected["audio"], &["train"]);

    // Small batches: the same stores; the summary names the sources.
    let s = convert_hf(
        &mock
            .source("test/audio", &cache)
            .config("default")
            .columns(["music", "label"])
            .batch_limits(3, 1 << 10),
        tmp.path().join("small"),
    )
    .unwrap();
    let sources: Vec<(&str, ColumnSource)> = s.splits[0]
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.source))
        .collect();
    assert_eq!(
        sources,
        [
            ("music", ColumnSource::Audio),
            ("music.sampling_rate", ColumnSource::SamplingRate),
            ("label", ColumnSource::Numeric)
        ]
    );
    for column in ["music", "music.sampling_rate", "label"] {
        let store =
            |root: &str| Store::open(tmp.path().join(root).join("train").join(column)).unwrap();
        assert_eq!(
            digest(&store("small")).unwrap(),
            digest(&store("audio")).unwrap(),
            "{column}"
        );
    }

    // Lossy OGG/Vorbis: within a tolerance of libvorbis' decoding.
    let case = &fx.expected["audio_lossy"];
    let out = tmp.path().join("lossy");
    let s = convert_hf(&mock.source("test/audio", &cache).config("lossy"), &out).unwrap();
    check_summary(&s, case, &["train"]);
    check_stores_read_by_python(fx, &out, case, &["train"]);
}

/// The `test/parts` fixture converted by one `loaderx convert hf` (raw) under
/// `tmp/single`, with Hub home `tmp/home`: what the parted conversions must
/// equal. Returns `(home, single)`.
fn single_parts_conversion(mock: &Mock, tmp: &Path) -> (PathBuf, PathBuf) {
    let home = tmp.join("home");
    let single = tmp.join("single");
    cli_ok(
        mock,
        &home,
        &["test/parts", single.to_str().unwrap(), "--codec", "raw"],
    );
    (home, single)
}

/// Four `loaderx convert hf --part I --parts 4` processes at once, then
/// `loaderx dataset merge`: the dataset's digests are those of a single
/// conversion, stream by stream.
#[test]
fn four_writers_at_once_merge_into_the_single_conversion() {
    let Some((_fx, mock, tmp)) = setup() else {
        return;
    };
    let (home, single) = single_parts_conversion(&mock, tmp.path());
    let parted = tmp.path().join("parted");
    let children: Vec<_> = (0..4)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_loaderx"))
                .args(["convert", "hf", "test/parts", "-o"])
                .arg(&parted)
                .args(["--part", &i.to_string(), "--parts", "4", "--shards", "2"])
                .env("HF_ENDPOINT", &mock.url)
                .env("HF_HOME", &home)
                .env_remove("HF_TOKEN")
                .env_remove("HF_TOKEN_PATH")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let c = c.wait_with_output().unwrap();
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    }
    let ds = parted.join("train");
    let merge = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["dataset", "merge"])
        .arg(&ds)
        .args(["--parts", "4"])
        .output()
        .unwrap();
    assert!(
        merge.status.success(),
        "{}",
        String::from_utf8_lossy(&merge.stderr)
    );
    let dataset = loaderx_core::Dataset::open(&ds).unwrap();
    assert_eq!(dataset.len(), 1001);
    // Four parts, each a quarter of the rows.
    assert_eq!(dataset.part_starts().len(), 5);
    let one = Store::open_dir(single.join("train")).unwrap();
    assert_eq!(
        dataset.stream_names(),
        one.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
    );
    for ((name, joined), (_, store)) in dataset.streams().iter().zip(&one) {
        assert_eq!(
            loaderx_core::digest(joined).unwrap(),
            loaderx_core::digest(store).unwrap(),
            "{name}"
        );
    }
    // The split is cut by rows, not files: five and seven writers for its
    // four files (of 251, 250, 250 and 250 rows) each get their share
    // (five used to leave writer 2 without a file, an error), and merge
    // into the single conversion too.
    for n in [5u64, 7] {
        let dir = tmp.path().join(format!("parts-{n}"));
        for i in 0..n {
            let s = convert_hf(
                &mock
                    .source("test/parts", &home.join("cache"))
                    .codec(loaderx_core::Codec::Raw)
                    .part(i, n),
                &dir,
            )
            .unwrap_or_else(|e| panic!("part {i} of {n}: {e}"));
            let want = loaderx_core::Dataset::part_range(1001, i, n);
            assert_eq!(s.splits[0].records, want.end - want.start);
        }
        assert_eq!(names(&dir), ["train"]);
        let dataset = loaderx_core::Dataset::merge(dir.join("train"), Some(n)).unwrap();
        assert_eq!(dataset.len(), 1001);
        for ((name, joined), (_, store)) in dataset.streams().iter().zip(&one) {
            assert_eq!(
                loaderx_core::digest(joined).unwrap(),
                loaderx_core::digest(store).unwrap(),
                "{n} parts: {name}"
            );
        }
    }
}

/// A retried `convert hf --part I` (the same part run again, as an
/// orchestrator does after a timeout) fails at once, saying the part is
/// published, and leaves nothing behind; a killed writer's staging does
/// not block the next run of its part.
#[test]
fn a_retried_part_writer_says_so_and_leaves_nothing() {
    let Some((_fx, mock, tmp)) = setup() else {
        return;
    };
    let home = tmp.path().join("home");
    let out = tmp.path().join("parted");
    let part = |i: &str| {
        let o = out.to_str().unwrap();
        cli(
            &mock,
            &home,
            &["test/parts", o, "--part", i, "--parts", "2"],
            &[],
        )
    };
    assert!(part("0").status.success());
    for _ in 0..2 {
        let again = part("0");
        assert!(!again.status.success());
        let e = String::from_utf8_lossy(&again.stderr);
        assert_contains_all(
            &e,
            &["part-00000: path already exists", "a part is written once"],
        );
        // It used to leave a full staged copy in OUT/.part-00000.staged,
        // and every later run failed on that.
        assert_eq!(names(&out), ["train"]);
        assert_eq!(names(&out.join("train")), ["part-00000"]);
    }
    // What a killed writer of part 1 leaves: its staging; the next run
    // removes it.
    std::fs::create_dir_all(out.join(".part-00001.tmp-99999-0/train/label")).unwrap();
    std::fs::create_dir_all(out.join(".part-00001.staged/train/label")).unwrap();
    let run = part("1");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(names(&out), ["train"]);
    assert_eq!(names(&out.join("train")), ["part-00000", "part-00001"]);
    let dataset = loaderx_core::Dataset::merge(out.join("train"), Some(2)).unwrap();
    assert_eq!(dataset.len(), 1001);
}

/// `loaderx` with `server`'s AWS environment (and no other AWS variable).
fn with_s3(server: &loaderx_tests::S3Server, mut c: Command) -> Command {
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") || k.starts_with("LOADERX_CACHE") {
            c.env_remove(k);
        }
    }
    c.env("AWS_ENDPOINT_URL", server.endpoint())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ALLOW_HTTP", "true");
    c
}

/// Four `loaderx convert hf --part I --parts 4 s3://…` processes at once,
/// each pushing its part to the S3 test server independently, then
/// `loaderx dataset merge s3://…` and `dataset digest|info|verify` on the
/// URL: the digests are those of a single local conversion.
#[test]
fn four_writers_push_their_parts_to_s3_and_merge_there() {
    let Some((_fx, mock, tmp)) = setup() else {
        return;
    };
    let Some(server) = loaderx_tests::S3Server::start() else {
        return;
    };
    server.create_bucket("corpus");
    let (home, single) = single_parts_conversion(&mock, tmp.path());
    let url = "s3://corpus/parts";
    let children: Vec<_> = (0..4)
        .map(|i| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_loaderx"));
            c.args(["convert", "hf", "test/parts", "-o", url])
                .args(["--part", &i.to_string(), "--parts", "4"])
                .env("HF_ENDPOINT", &mock.url)
                .env("HF_HOME", &home)
                .env("LOADERX_STAGING_DIR", tmp.path())
                .env_remove("HF_TOKEN")
                .env_remove("HF_TOKEN_PATH")
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            with_s3(&server, c).spawn().unwrap()
        })
        .collect();
    for c in children {
        let c = c.wait_with_output().unwrap();
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    }
    let loaderx = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_loaderx"));
        c.args(args);
        let out = with_s3(&server, c).output().unwrap();
        assert!(
            out.status.success(),
            "loaderx {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let ds = format!("{url}/train");
    let merged = loaderx(&["dataset", "merge", &ds, "--parts", "4"]);
    assert!(merged.contains("1001 records in 4 parts"), "{merged}");
    let info = loaderx(&["dataset", "info", &ds]);
    assert!(
        info.contains("length: 1001") && info.contains("parts: 4"),
        "{info}"
    );
    let verified = loaderx(&["dataset", "verify", &ds]);
    assert!(verified.starts_with("ok: 1001 records"), "{verified}");
    let digests = loaderx(&["dataset", "digest", &ds]);
    let one = Store::open_dir(single.join("train")).unwrap();
    let want: Vec<String> = one
        .iter()
        .map(|(name, s)| format!("{}  {name}", digest(s).unwrap()))
        .collect();
    assert_eq!(digests.trim_end(), want.join("\n"));
    // Staging directories were removed after each push.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("loaderx-staging-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Every store's digest under `a` equals the same store's under `b`, and
/// both hold the same splits and stores.
fn same_digests(a: &Path, b: &Path) {
    assert_eq!(names(a), names(b));
    for split in names(a) {
        assert_eq!(names(&a.join(&split)), names(&b.join(&split)), "{split}");
        for store in store_names(&a.join(&split)) {
            let (x, y) = (a.join(&split).join(&store), b.join(&split).join(&store));
            assert_eq!(
                digest(&Store::open(&x).unwrap()).unwrap().sha256,
                digest(&Store::open(&y).unwrap()).unwrap().sha256,
                "{split}/{store}"
            );
        }
    }
}

#[test]
fn local_parquet_converts_as_the_hub_does() {
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    // A Hub repo as downloaded (`data/<split>-0000K-of-0000N.parquet`):
    // `convert parquet DIR` lays it out as `convert hf` does.
    let case = &fx.expected["numeric"];
    let hub = tmp.path().join("hub-numeric");
    convert_hf(&mock.source("test/numeric", &tmp.path().join("c")), &hub).unwrap();
    let local = tmp.path().join("local-numeric");
    let run = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["convert", "parquet"])
        .arg(fx.dir.join("files/numeric"))
        .arg("-o")
        .arg(&local)
        .args(["--shards", "2"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("tokens: ragged i32 (rank 1)"), "{stdout}");
    check_stores(fx, &local, case, &["test", "train"]);
    same_digests(&hub, &local);

    // Images, audio and text (strings as bytes), each split named by a
    // glob, through the library.
    use loaderx_convert::local::{LocalSource, convert_parquet};
    use loaderx_convert::table::TableOptions;
    for (name, repo, file) in [
        ("images", "test/images", "images/train.parquet"),
        ("audio", "test/audio", "audio/train.parquet"),
    ] {
        // Decoded pixels, as the expected stores hold (the images have
        // several sizes).
        let hub = tmp.path().join(format!("hub-{name}"));
        convert_hf(
            &mock
                .source(repo, &tmp.path().join("c"))
                .config("default")
                .decoded_images(true),
            &hub,
        )
        .unwrap();
        let local = tmp.path().join(format!("local-{name}"));
        let glob = fx.dir.join("files").join(file);
        let source = LocalSource::new(Vec::<PathBuf>::new())
            .split_glob("train", glob.to_str().unwrap())
            .options(
                TableOptions::new()
                    .batch_limits(5, 1 << 16)
                    .decoded_images(true),
            );
        let summary = convert_parquet(&source, &local).unwrap();
        assert_eq!(summary.files, [glob]);
        check_stores(fx, &local, &fx.expected[name], &["train"]);
        same_digests(&hub, &local);
    }
    let hub = tmp.path().join("hub-text");
    convert_hf(
        &mock
            .source("test/text", &tmp.path().join("c"))
            .text_bytes()
            .drop_null_rows(true)
            .drop_empty_rows(true),
        &hub,
    )
    .unwrap();
    let local = tmp.path().join("local-text");
    convert_parquet(
        &LocalSource::new([fx.dir.join("files/text")]).options(
            TableOptions::new()
                .text_bytes()
                .drop_null_rows(true)
                .drop_empty_rows(true),
        ),
        &local,
    )
    .unwrap();
    same_digests(&hub, &local);

    // Parts of the local conversion merge into the single conversion.
    let parts = tmp.path().join("parts");
    for index in 0..3 {
        let run = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["convert", "parquet"])
            .arg(fx.dir.join("files/numeric"))
            .arg("-o")
            .arg(&parts)
            .args(["--shards", "2", "--parts", "3"])
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let local = tmp.path().join("local-numeric");
    for split in ["test", "train"] {
        let merged = loaderx_core::Dataset::merge(parts.join(split), Some(3)).unwrap();
        assert_eq!(
            merged.len(),
            case["splits"][split]["records"].as_u64().unwrap()
        );
        for (name, joined) in merged.streams() {
            let single = Store::open(local.join(split).join(name)).unwrap();
            assert_eq!(
                digest(joined).unwrap(),
                digest(&single).unwrap(),
                "{split}/{name}"
            );
        }
    }
}

/// Every stream's digest, by name, checked against the case's expected
/// digests of split `split`.
fn check_lazy_digests(streams: &[(String, Store)], case: &Value, split: &str) {
    let columns = &case["splits"][split]["columns"];
    let mut names: Vec<String> = streams.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    assert_eq!(names, sorted_keys(columns), "{split}");
    for (name, store) in streams {
        if let Some(d) = columns[name].get("digest") {
            assert_eq!(
                digest(store).unwrap().sha256,
                d.as_str().unwrap(),
                "{split}/{name}: contents differ from the source"
            );
        }
    }
}

#[test]
fn hub_datasets_open_where_they_live_with_the_conversions_digests() {
    use loaderx_convert::lazy::{OpenOptions, open};
    let Some((fx, mock, tmp)) = setup() else {
        return;
    };
    let options = |cache: &str| {
        OpenOptions::new()
            .endpoint(&mock.url)
            .hub_cache(tmp.path().join("hf"))
            .cache_dir(tmp.path().join(cache))
    };
    // The numeric case's test split: row groups of 128 rows written by
    // `datasets`; only footers are read at open, and one row group converted.
    let case = &fx.expected["numeric"];
    let before = mock.stats()["cdn"].as_u64().unwrap();
    let d = open(
        "hf://datasets/test/numeric",
        &options("numeric").split("test"),
    )
    .unwrap();
    let records = case["splits"]["test"]["records"].as_u64().unwrap();
    assert_eq!(d.len(), records);
    assert_eq!(d.parts().len() as u64, records.div_ceil(128));
    let stats = d.lazy_stats().unwrap();
    assert_eq!((stats.parts, stats.converted), (d.parts().len() as u64, 1));
    // HEAD, the footer, and the first row group's bytes.
    let fetched = mock.stats()["cdn"].as_u64().unwrap() - before;
    assert!(fetched <= 4, "{fetched} requests to open");
    check_lazy_digests(d.streams(), case, "test");
    let frozen = d.freeze(tmp.path().join("frozen")).unwrap();
    check_lazy_digests(frozen.streams(), case, "test");

    // Pinned revisions: a tag and `main` (moved on) give their commits' data.
    for (rev, name) in [("@v1", "moving_old"), ("", "moving_new")] {
        let d = open(&format!("hf://datasets/test/moving{rev}"), &options(name)).unwrap();
        check_lazy_digests(d.streams(), &fx.expected[name], "train");
    }
    // A cache filled from one commit is not reused for another.
    let e = open("hf://datasets/test/moving", &options("moving_old"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("another version"), "{e}");

    // A gated dataset needs its token, which no message shows.
    let gated = &fx.expected["gated"];
    let token = gated["token"].as_str().unwrap();
    let e = open(
        "hf://datasets/test/gated",
        &options("gated").token("hf_wrong_token_0000"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("401"), "{e}");
    assert!(!e.contains("hf_wrong_token"), "{e}");
    let d = open("hf://datasets/test/gated", &options("gated").token(token)).unwrap();
    check_lazy_digests(d.streams(), gated, "train");

    // The CLI: info reads footers, freeze writes the dataset.
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(args)
            .env("HF_ENDPOINT", &mock.url)
            .env("HF_HOME", tmp.path().join("hf"))
            .env("LOADERX_CACHE_DIR", tmp.path().join("cli-cache"))
            .env_remove("HF_TOKEN")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "loaderx {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let info = cli(&[
        "dataset",
        "info",
        "hf://datasets/test/numeric",
        "--split",
        "test",
    ]);
    assert!(info.contains(&format!("length: {records}")), "{info}");
    assert!(info.contains("opened where it lives"), "{info}");
    let out = tmp.path().join("cli-frozen");
    let said = cli(&[
        "dataset",
        "freeze",
        "hf://datasets/test/numeric",
        "--split",
        "test",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(said.contains("froze"), "{said}");
    check_lazy_digests(
        loaderx_core::Dataset::open(&out).unwrap().streams(),
        case,
        "test",
    );
}
