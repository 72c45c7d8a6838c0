//! `loaderx convert npy` against files NumPy itself wrote
//! (`tests/python/make_npy_fixtures.py`): every element type a store holds,
//! in C order, Fortran order and big-endian, `np.savez` and
//! `np.savez_compressed` archives; each store compared element by element
//! with NumPy's bytes, and its digest with the digest of the store Python
//! loaderx 2.8.19's `DenseWriter.append(np.load(...))` wrote. Hostile files
//! (truncated, a lying shape, pickled objects, a length that disagrees) are
//! errors naming the file that leave nothing behind; parts merge to the
//! single conversion's digests.
//!
//! Needs `LOADERX_PYTHON` (default `~/.cache/loaderx/venv/bin/python`, with
//! NumPy) and `LOADERX_PY_RELEASES` (default
//! `~/.cache/loaderx/loaderx-py`, holding `2.8.19/loaderx`); the README's
//! test command installs both. Without them the tests fail under `CI=true`
//! and are skipped otherwise (also with `LOADERX_SKIP_PYTHON=1`, outside
//! CI).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use loaderx_core::{Store, digest};
use serde_json::Value;

struct Fixtures {
    dir: PathBuf,
    manifest: Value,
    /// `arrays`, `stored`, `compressed` → the converted root.
    converted: BTreeMap<&'static str, PathBuf>,
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips outside CI, fails in CI.
fn missing(what: &str) -> Option<PathBuf> {
    assert!(
        !in_ci(),
        "{what}; CI=true: the NumPy interoperability tests must run"
    );
    eprintln!("SKIPPED: {what}");
    None
}

fn home_cache(rel: &str) -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/loaderx").join(rel))
}

/// `$LOADERX_PYTHON` with loaderx 2.8.19 importable.
fn python_2_8_19() -> Option<Command> {
    if std::env::var_os("LOADERX_SKIP_PYTHON").is_some() {
        missing("LOADERX_SKIP_PYTHON is set")?;
    }
    let python = std::env::var_os("LOADERX_PYTHON")
        .map(PathBuf::from)
        .or_else(|| home_cache("venv/bin/python"))?;
    if !python.exists() {
        missing(&format!(
            "no Python at {} (set LOADERX_PYTHON)",
            python.display()
        ))?;
    }
    let releases = std::env::var_os("LOADERX_PY_RELEASES")
        .map(PathBuf::from)
        .or_else(|| home_cache("loaderx-py"))?;
    let release = releases.join("2.8.19");
    if !release.join("loaderx").is_dir() {
        missing(&format!(
            "no Python loaderx 2.8.19 in {} (set LOADERX_PY_RELEASES)",
            release.display()
        ))?;
    }
    let mut cmd = Command::new(python);
    cmd.env("PYTHONPATH", release)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    Some(cmd)
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn loaderx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(args)
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "loaderx failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Writes the fixtures and converts them, once per test process.
fn fixtures() -> Option<&'static Fixtures> {
    static FIXTURES: OnceLock<Option<Fixtures>> = OnceLock::new();
    FIXTURES
        .get_or_init(|| {
            let mut python = python_2_8_19()?;
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("npy-fixtures");
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap();
            }
            let out = python
                .arg(repo_root().join("tests/python/make_npy_fixtures.py"))
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "make_npy_fixtures.py failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let manifest: Value =
                serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
            let mut converted = BTreeMap::new();
            // Every .npy at once: one stream per file.
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("arrays"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            let root = dir.join("out-arrays");
            let mut args = vec!["convert", "npy"];
            args.extend(files.iter().map(|f| s(f)));
            args.extend(["-o", s(&root), "--codec", "zstd", "--shards", "3"]);
            let text = ok(loaderx(&args));
            assert!(text.contains("(train: 10 records;"), "{text}");
            assert!(text.contains("f_float32: f32 [3, 2]"), "{text}");
            converted.insert("arrays", root);
            for archive in ["stored", "compressed"] {
                let root = dir.join(format!("out-{archive}"));
                let npz = dir.join(format!("{archive}.npz"));
                let text = ok(loaderx(&[
                    "convert",
                    "npy",
                    s(&npz),
                    "--out",
                    s(&root),
                    "--split",
                    "test",
                    "--codec",
                    "raw",
                ]));
                assert!(text.contains("(test: 10 records;"), "{text}");
                converted.insert(archive, root);
            }
            Some(Fixtures {
                dir,
                manifest,
                converted,
            })
        })
        .as_ref()
}

/// The converted store of manifest stream `arrays/c_int8`, `stored/image`.
fn store_of(f: &Fixtures, stream: &str) -> PathBuf {
    let (group, name) = stream.split_once('/').unwrap();
    let split = if group == "arrays" { "train" } else { "test" };
    f.converted[group].join(split).join(name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_numpy_type_order_and_byte_order_converts_element_by_element() {
    let Some(f) = fixtures() else { return };
    let streams = f.manifest["streams"].as_object().unwrap();
    // 14 types in C and Fortran order, 11 multi-byte ones big-endian, the
    // labels; 4 members in each archive.
    assert_eq!(streams.len(), 14 * 2 + 11 + 1 + 4 * 2);
    for (stream, want) in streams {
        let path = store_of(f, stream);
        let store = Store::open(&path).unwrap_or_else(|e| panic!("{stream}: {e}"));
        assert_eq!(store.len(), 10, "{stream}");
        assert_eq!(
            store.dtype().numpy_name(),
            want["dtype"].as_str().unwrap(),
            "{stream}"
        );
        let Store::Dense(dense) = &store else {
            panic!("{stream}: not Dense")
        };
        let shape: Vec<usize> = want["item_shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(dense.item_shape(), &shape[..], "{stream}");
        let mut bytes = Vec::new();
        store
            .for_each_record(|_, _, b| {
                bytes.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        assert_eq!(hex(&bytes), want["hex"].as_str().unwrap(), "{stream}");
    }
    // Only the published roots: no staging, no spool files.
    let mut names: Vec<String> = std::fs::read_dir(&f.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') || n.starts_with("out-"))
        .collect();
    names.sort();
    assert_eq!(names, ["out-arrays", "out-compressed", "out-stored"]);
}

#[test]
fn digests_equal_python_loaderx_2_8_19_writing_np_load() {
    let Some(f) = fixtures() else { return };
    let refs = f.manifest["reference"].as_object().unwrap();
    assert_eq!(refs.len(), 14 * 2 + 11 + 1 + 4 * 2);
    for (name, stream) in refs {
        let theirs = f.dir.join("reference").join(name);
        let ours = store_of(f, stream.as_str().unwrap());
        let a = ok(loaderx(&["digest", s(&theirs)]));
        let b = ok(loaderx(&["digest", s(&ours)]));
        assert_eq!(a, b, "{name} vs {stream}");
        assert_eq!(
            digest(&Store::open(&theirs).unwrap()).unwrap(),
            digest(&Store::open(&ours).unwrap()).unwrap()
        );
    }
}

#[test]
fn hostile_files_are_errors_naming_the_file_and_leave_nothing() {
    let Some(f) = fixtures() else { return };
    let hostile = f.dir.join("hostile");
    let labels = f.dir.join("arrays/labels.npy");
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    for (file, why) in [
        (
            "truncated.npy",
            "truncated: shape [10, 6] of <f4 elements needs 240 bytes of data, the file holds 235",
        ),
        ("huge.npy", "overflows the address space"),
        (
            "objects.npy",
            "element type \"|O\" (Python objects, pickled) is not one a store holds",
        ),
        ("short.npy", "9 records (axis 0) but"),
    ] {
        let path = hostile.join(file);
        let run = loaderx(&["convert", "npy", s(&labels), s(&path), "-o", s(&out)]);
        assert!(!run.status.success(), "{file}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains(s(&path)), "{file}: {err}");
        assert!(err.contains(why), "{file}: {err} (expected {why})");
        assert!(!err.contains("panicked"), "{file}: {err}");
        if file == "short.npy" {
            // Both files and both lengths.
            assert!(err.contains(&format!("{} has 10", s(&labels))), "{err}");
        }
        assert_eq!(
            std::fs::read_dir(scratch.path()).unwrap().count(),
            0,
            "{file}"
        );
    }
    // A part writer of a hostile file leaves no part either.
    let run = loaderx(&[
        "convert",
        "npy",
        s(&hostile.join("truncated.npy")),
        "-o",
        s(&out),
        "--part",
        "0",
        "--parts",
        "2",
    ]);
    assert!(!run.status.success());
    assert!(!out.join("train").exists());
}

#[test]
fn parts_cut_by_rows_merge_to_the_single_conversion() {
    let Some(f) = fixtures() else { return };
    let inputs = [
        f.dir.join("arrays/f_float64.npy"),
        f.dir.join("arrays/be_int32.npy"),
        f.dir.join("arrays/labels.npy"),
    ];
    let scratch = tempfile::tempdir().unwrap();
    let whole = scratch.path().join("whole");
    let mut args = vec!["convert", "npy"];
    args.extend(inputs.iter().map(|p| s(p)));
    let mut whole_args = args.clone();
    whole_args.extend(["-o", s(&whole)]);
    ok(loaderx(&whole_args));
    let parts = scratch.path().join("parts");
    let mut records = Vec::new();
    for part in ["2", "0", "1"] {
        let mut part_args = args.clone();
        part_args.extend(["-o", s(&parts), "--parts", "3"]);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_loaderx"));
        cmd.args(&part_args);
        // Part 1 as a Kubernetes Indexed Job's pod runs it: no --part.
        if part == "1" {
            cmd.env("JOB_COMPLETION_INDEX", "1");
        } else {
            cmd.args(["--part", part]).env("JOB_COMPLETION_INDEX", "7");
        }
        let text = ok(cmd.output().unwrap());
        assert!(text.contains(&format!("part {part} of 3")), "{text}");
        let store = parts.join(format!("train/part-0000{part}/labels"));
        records.push(Store::open(store).unwrap().len());
    }
    assert_eq!(records, [4, 3, 3]);
    // A bad job index is a clear error.
    let mut bad = Command::new(env!("CARGO_BIN_EXE_loaderx"));
    bad.args(&args)
        .args(["-o", s(&parts), "--parts", "3"])
        .env("JOB_COMPLETION_INDEX", "three");
    let run = bad.output().unwrap();
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("JOB_COMPLETION_INDEX=\"three\" is not a part index"),
        "{err}"
    );

    let merged = ok(loaderx(&["dataset", "merge", s(&parts.join("train"))]));
    assert!(merged.contains("10 records in 3 parts"), "{merged}");
    let digests = ok(loaderx(&["dataset", "digest", s(&parts.join("train"))]));
    for stream in ["f_float64", "be_int32", "labels"] {
        let one = ok(loaderx(&["digest", s(&whole.join("train").join(stream))]));
        let line = format!("{}  {stream}", one.trim_end());
        assert!(digests.lines().any(|l| l == line), "{stream}: {digests}");
    }
}

/// `np.savez` stores its members uncompressed (mapped in place, so only
/// their CRC-32 tells a damaged byte), `np.savez_compressed` deflates them:
/// one bit flipped in member `x.npy`'s bytes is an error naming the archive
/// and the member, never other records; the undamaged archives convert.
#[test]
fn a_damaged_npz_member_is_an_error_naming_it() {
    let Some(mut python) = python_2_8_19() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let script = r#"
import sys, zipfile
import numpy as np
d = sys.argv[1]
x = (np.arange(4096, dtype='<i4') % 251).reshape(1024, 4)
y = np.arange(1024, dtype='<f8')
np.savez(d + '/stored.npz', x=x, y=y)
np.savez_compressed(d + '/compressed.npz', x=x, y=y)
for name in ['stored', 'compressed']:
    raw = bytearray(open(f'{d}/{name}.npz', 'rb').read())
    info = zipfile.ZipFile(f'{d}/{name}.npz').getinfo('x.npy')
    o = info.header_offset
    start = o + 30 + int.from_bytes(raw[o + 26:o + 28], 'little') + int.from_bytes(raw[o + 28:o + 30], 'little')
    # The last element's data, or the middle of the deflated stream.
    at = start + info.file_size - 2 if name == 'stored' else start + info.compress_size // 2
    raw[at] ^= 0x10
    open(f'{d}/{name}-bad.npz', 'wb').write(raw)
"#;
    let run = python.arg("-c").arg(script).arg(d).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for name in ["stored", "compressed"] {
        let out = d.join(format!("{name}-out"));
        let text = ok(loaderx(&[
            "convert",
            "npy",
            s(&d.join(format!("{name}.npz"))),
            "-o",
            s(&out),
        ]));
        assert!(text.contains("1024 records"), "{text}");
        let bad = d.join(format!("{name}-bad.npz"));
        let out = d.join(format!("{name}-bad-out"));
        let run = loaderx(&["convert", "npy", s(&bad), "-o", s(&out)]);
        assert!(!run.status.success(), "{name}: converted a damaged archive");
        let e = String::from_utf8_lossy(&run.stderr);
        assert!(
            e.contains(&format!("{name}-bad.npz")) && e.contains("member \"x.npy\""),
            "{e}"
        );
        if name == "stored" {
            assert!(e.contains("damaged"), "{e}");
        }
        assert!(!out.exists());
    }
}
