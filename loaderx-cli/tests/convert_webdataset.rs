//! `loaderx convert webdataset` against shards real producers wrote
//! (`tests/python/make_webdataset_fixtures.py`): the `webdataset`
//! package's `TarWriter` (plain and gzipped), Python's `tarfile` (`w:gz`,
//! GNU and pax formats), GNU tar. Gzipped shards convert to the stores of
//! the plain ones, brace ranges name shards as listing them does, `.webp`
//! members are images, and the unusual-but-valid tar features real
//! producers write (long names, pax records, `./` prefixes, upper-case
//! extensions, dotted directories, global headers, hard links) convert.
//!
//! Needs a python with `pillow`, `numpy` and `webdataset`: `LOADERX_PYTHON`,
//! else `$HOME/.cache/loaderx/venv/bin/python`. Without one the tests are
//! skipped, unless `CI` is set (then they fail); `LOADERX_SKIP_PYTHON=1`
//! skips.

#![allow(clippy::unwrap_used)]

mod support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;
use support::{failed, loaderx, ok};

use loaderx_core::{Store, digest};

/// The fixtures' directory, written once per test process.
fn fixtures() -> Option<&'static Path> {
    static FIXTURES: OnceLock<Option<PathBuf>> = OnceLock::new();
    FIXTURES
        .get_or_init(|| {
            let py = support::python(&["PIL", "numpy", "webdataset"])?;
            Some(support::write_fixtures(
                &py,
                "make_webdataset_fixtures.py",
                "webdataset-fixtures",
            ))
        })
        .as_deref()
}

/// Converts `inputs` (and `extra` arguments) to `out`, with `--text bytes`.
fn convert(inputs: &[&Path], out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&OsStr> = vec![OsStr::new("convert"), OsStr::new("webdataset")];
    args.extend(inputs.iter().map(|p| p.as_os_str()));
    args.extend([OsStr::new("-o"), out.as_os_str(), OsStr::new("--text")]);
    args.push(OsStr::new("bytes"));
    args.extend(extra.iter().map(OsStr::new));
    loaderx(&args)
}

/// The canonical digest of every store of `out/train`, by name.
fn digests(out: &Path) -> Vec<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir(out.join("train"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let store = Store::open(out.join("train").join(&n)).unwrap();
            let d = digest(&store).unwrap().sha256;
            (n, d)
        })
        .collect()
}

/// Every record of `out/train/<name>`, as bytes.
fn records(out: &Path, name: &str) -> Vec<Vec<u8>> {
    let store = Store::open(out.join("train").join(name)).unwrap();
    let mut got = Vec::new();
    store
        .for_each_record(|_, _, b| {
            got.push(b.to_vec());
            Ok(())
        })
        .unwrap();
    got
}

#[test]
fn gzipped_shards_convert_to_the_plain_shards_stores() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    ok(&convert(&[&fx.join("plain")], &plain, &[]));
    let want = digests(&plain);
    assert_eq!(
        want.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["cls", "npy", "png", "txt"]
    );
    // TarWriter's .tar.gz (a directory of them), tarfile's .tgz (a glob).
    let gz = tmp.path().join("gz");
    let text = ok(&convert(&[&fx.join("gz")], &gz, &[]));
    assert!(text.contains("train: 9 records"), "{text}");
    assert_eq!(digests(&gz), want, "TarWriter .tar.gz");
    let tgz = tmp.path().join("tgz");
    ok(&convert(&[&fx.join("tgz/*.tgz")], &tgz, &[]));
    assert_eq!(digests(&tgz), want, "tarfile w:gz .tgz");
    // Decoded images, parts of a gzipped split: the same stores.
    let parts = tmp.path().join("parts");
    for i in ["0", "1"] {
        ok(&convert(
            &[&fx.join("gz")],
            &parts,
            &["--part", i, "--parts", "2"],
        ));
    }
    let dir = parts.join("train");
    ok(&loaderx(&[
        OsStr::new("dataset"),
        OsStr::new("merge"),
        dir.as_os_str(),
        OsStr::new("--parts"),
        OsStr::new("2"),
    ]));
    let merged = ok(&loaderx(&[
        OsStr::new("dataset"),
        OsStr::new("digest"),
        dir.as_os_str(),
    ]));
    let mut got: Vec<(String, String)> = merged
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [sha, _len, stream] = fields.as_slice() else {
                panic!("{line}")
            };
            ((*stream).to_owned(), (*sha).to_owned())
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "parts of gzipped shards, merged");
}

#[test]
fn a_truncated_gzipped_shard_is_named() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let cut = fx.join("truncated.tar.gz");
    let e = failed(&convert(&[&cut], &out, &[]));
    assert!(
        e.contains(&cut.display().to_string()) && e.contains("gzip"),
        "{e}"
    );
    assert!(!out.exists(), "a failed conversion leaves nothing");
}

#[test]
fn a_brace_range_converts_like_its_shards_listed() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let listed = tmp.path().join("listed");
    let shards: Vec<PathBuf> = (0..3)
        .map(|i| fx.join(format!("plain/train-{i:06}.tar")))
        .collect();
    let refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    ok(&convert(&refs, &listed, &[]));
    let braced = tmp.path().join("braced");
    let pattern = fx.join("plain/train-{000000..000002}.tar");
    ok(&convert(&[&pattern], &braced, &[]));
    assert_eq!(digests(&braced), digests(&listed));
    // --split-glob takes braces too; lists and several braces in one pattern.
    let split = tmp.path().join("split");
    let two = format!(
        "train={}",
        fx.join("{plain,gz}/train-{000000..000002}.tar{,.gz}")
            .display()
    );
    let e = failed(&loaderx(&[
        OsStr::new("convert"),
        OsStr::new("webdataset"),
        OsStr::new("--split-glob"),
        OsStr::new(&two),
        OsStr::new("-o"),
        split.as_os_str(),
    ]));
    // plain/train-000000.tar.gz does not exist: named, with the pattern.
    assert!(
        e.contains(&fx.join("plain/train-000000.tar.gz").display().to_string())
            && e.contains("{plain,gz}"),
        "{e}"
    );
    let sum = format!(
        "train={}",
        fx.join("plain/train-{000000..000002}.tar").display()
    );
    ok(&loaderx(&[
        OsStr::new("convert"),
        OsStr::new("webdataset"),
        OsStr::new("--split-glob"),
        OsStr::new(&sum),
        OsStr::new("-o"),
        split.as_os_str(),
        OsStr::new("--text"),
        OsStr::new("bytes"),
    ]));
    assert_eq!(digests(&split), digests(&listed));
}

/// Needs the image layer's WebP support (`folder::check_image_bytes`,
/// `table::images`, branch r5-images): without it the member reaches the
/// image layer (as this converter routes it) and is refused there.
#[test]
fn webp_members_are_stored_encoded_as_written() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    ok(&convert(&[&fx.join("webp/webp.tar")], &out, &["--encoded"]));
    let bytes = std::fs::read(fx.join("webp/expected.bin")).unwrap();
    let lengths: Vec<usize> =
        serde_json::from_slice(&std::fs::read(fx.join("webp/lengths.json")).unwrap()).unwrap();
    let mut want = Vec::new();
    let mut at = 0;
    for n in lengths {
        want.push(bytes[at..at + n].to_vec());
        at += n;
    }
    assert_eq!(records(&out, "webp"), want);
}

/// Converts the quirk shard `name` and checks its two samples' records.
fn quirk_converts(name: &str) {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    ok(&convert(&[&fx.join("quirks").join(name)], &out, &[]));
    let cls: Vec<i64> = records(&out, "cls")
        .iter()
        .map(|b| i64::from_le_bytes(b.as_slice().try_into().unwrap()))
        .collect();
    assert_eq!(cls, [0, 1], "{name}");
    assert_eq!(
        records(&out, "txt"),
        [b"text 0".to_vec(), b"text 1".to_vec()],
        "{name}"
    );
}

#[test]
fn gnu_long_names_convert() {
    quirk_converts("gnu_long.tar");
}

#[test]
fn pax_long_and_non_ascii_names_convert() {
    quirk_converts("pax_long.tar");
}

#[test]
fn gnu_tar_dot_slash_members_convert() {
    quirk_converts("gnu_tar_dotslash.tar");
}

#[test]
fn upper_case_extensions_convert() {
    quirk_converts("upper.tar");
}

#[test]
fn dotted_directories_keep_their_dots_in_the_key() {
    quirk_converts("dotted_dirs.tar");
}

#[test]
fn a_pax_global_header_is_skipped() {
    quirk_converts("pax_global.tar");
}

#[test]
fn a_hard_link_member_holds_its_targets_data() {
    let Some(fx) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    ok(&convert(&[&fx.join("quirks/hardlink.tar")], &out, &[]));
    let cls: Vec<Vec<u8>> = records(&out, "cls");
    assert_eq!(
        cls,
        [1i64.to_le_bytes().to_vec(), 1i64.to_le_bytes().to_vec()]
    );
}
