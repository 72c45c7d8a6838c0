//! `loaderx push`, `info|digest|verify URL` and `convert idx DIR URL`
//! against a real S3-compatible server (moto) on 127.0.0.1, configured
//! through the standard AWS environment of each child process.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use loaderx_core::{Codec, CreateOptions, RaggedWriter};
use loaderx_tests::S3Server;

/// Runs `loaderx args` with the server's AWS environment, and nothing else
/// of AWS's: the child can reach only that server.
fn loaderx(server: &S3Server, args: &[&str], extra: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loaderx"));
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") || k.starts_with("LOADERX_CACHE") {
            c.env_remove(k);
        }
    }
    c.args(args)
        .env("AWS_ENDPOINT_URL", server.endpoint())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ALLOW_HTTP", "true");
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn push_then_info_digest_verify_a_url() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tokens");
    let mut w = RaggedWriter::<i32>::create_with(
        &store,
        1,
        &CreateOptions::new(Codec::Zstd).data_shards(3),
    )
    .unwrap();
    let recs: Vec<Vec<i32>> = (0..500).map(|i| (0..1 + i % 37).collect()).collect();
    w.append(&recs).unwrap();
    w.close().unwrap();
    let s = store.to_str().unwrap();
    let url = "s3://bkt/data/tokens";
    let pushed = stdout(&loaderx(&server, &["push", s, url], &[]));
    assert!(pushed.contains("5 objects"), "{pushed}");
    let cache = dir.path().join("cache");
    let env = [("LOADERX_CACHE_DIR", cache.as_path())];
    assert_eq!(
        stdout(&loaderx(&server, &["digest", url], &env)),
        stdout(&loaderx(&server, &["digest", s], &[]))
    );
    assert!(
        std::fs::read_dir(&cache).unwrap().count() > 0,
        "the cache directory was used"
    );
    let info = stdout(&loaderx(&server, &["info", url], &env));
    assert!(
        info.contains("length: 500") && info.contains("codec: zstd"),
        "{info}"
    );
    assert!(info.contains(url), "{info}");
    let verify = stdout(&loaderx(&server, &["verify", url], &env));
    assert_eq!(verify.trim(), "ok: 500 records verified");
    // Pushing again is refused: a published store is immutable.
    let again = loaderx(&server, &["push", s, url], &[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    // No store at a URL is the same error as locally.
    let none = loaderx(&server, &["info", "s3://bkt/data/none"], &[]);
    assert!(!none.status.success());
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("no store here"), "{err}");
}

/// `loaderx migrate SRC URL` migrates in a private staging directory and
/// pushes the result: the store at the URL is in the new generation with
/// the same digest, and nothing is left in the staging base.
#[test]
fn migrate_to_a_url_pushes_the_migrated_store() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let mut w = RaggedWriter::<i32>::create(&src, 1, Codec::Zstd).unwrap();
    w.append([vec![1, 2, 3], vec![4], vec![5, 6]]).unwrap();
    w.close().unwrap();
    let staging = dir.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    let env = [("LOADERX_STAGING_DIR", staging.as_path())];
    let s = src.to_str().unwrap();
    let url = "s3://bkt/migrated";
    let out = stdout(&loaderx(
        &server,
        &["migrate", "--format", "2.4.6", s, url],
        &env,
    ));
    assert!(
        out.contains("(2.8.19) to s3://bkt/migrated (2.4.6): pushed"),
        "{out}"
    );
    assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
    let info = stdout(&loaderx(&server, &["info", url], &[]));
    assert!(info.contains("format: 2.4.6"), "{info}");
    assert_eq!(
        stdout(&loaderx(&server, &["digest", url], &[])),
        stdout(&loaderx(&server, &["digest", s], &[]))
    );
    // A URL that holds a store is refused, as by push.
    let again = loaderx(&server, &["migrate", "--format", "2.4.6", s, url], &env);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
}

#[test]
fn convert_idx_writes_straight_to_a_url() {
    let src = Path::new("/usr/share/datasets/fashion-mnist");
    if !src.join("t10k-images-idx3-ubyte.gz").exists() {
        eprintln!("SKIPPED: Debian's dataset-fashion-mnist is absent (./scripts/test installs it)");
        return;
    }
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    let env = [("LOADERX_STAGING_DIR", staging.as_path())];
    let out = stdout(&loaderx(
        &server,
        &[
            "convert",
            "idx",
            src.to_str().unwrap(),
            "s3://bkt/fashion",
            "--codec",
            "raw",
        ],
        &env,
    ));
    assert!(out.contains("pushed 4 stores to s3://bkt/fashion"), "{out}");
    assert_eq!(
        std::fs::read_dir(&staging).unwrap().count(),
        0,
        "staging left behind"
    );
    let local = dir.path().join("local");
    stdout(&loaderx(
        &server,
        &[
            "convert",
            "idx",
            src.to_str().unwrap(),
            local.to_str().unwrap(),
            "--codec",
            "raw",
        ],
        &[],
    ));
    for split in ["train", "test"] {
        for column in ["image", "label"] {
            let url = format!("s3://bkt/fashion/{split}/{column}");
            let l = local.join(split).join(column);
            assert_eq!(
                stdout(&loaderx(&server, &["digest", &url], &[])),
                stdout(&loaderx(&server, &["digest", l.to_str().unwrap()], &[])),
                "{url}"
            );
        }
    }
}

/// `loaderx push PART_DIR URL` pushes a dataset part (a directory of
/// stores) as one publication; two parts pushed so, each from its own
/// machine, merge on the URL into the dataset of both.
#[test]
fn part_directories_push_as_one_and_merge_on_the_url() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    for (p, n) in [(0usize, 70usize), (1, 33)] {
        let part = dir.path().join(format!("part-0000{p}"));
        for (stream, width) in [("a", 1usize), ("b", 3)] {
            let mut w = RaggedWriter::<i32>::create_with(
                part.join(stream),
                1,
                &CreateOptions::new(Codec::Zstd),
            )
            .unwrap();
            let recs: Vec<Vec<i32>> = (0..n)
                .map(|i| vec![i as i32; 1 + (i * width) % 5])
                .collect();
            w.append(&recs).unwrap();
            w.close().unwrap();
        }
        let url = format!("s3://bkt/ds/part-0000{p}");
        let pushed = stdout(&loaderx(
            &server,
            &["push", part.to_str().unwrap(), &url],
            &[],
        ));
        assert!(pushed.contains("pushed 2 stores under"), "{pushed}");
    }
    let merged = stdout(&loaderx(&server, &["dataset", "merge", "s3://bkt/ds"], &[]));
    assert!(
        merged.contains("103 records in 2 parts, streams a, b"),
        "{merged}"
    );
    // A push over a published part is refused, naming the store.
    let again = loaderx(
        &server,
        &[
            "push",
            dir.path().join("part-00000").to_str().unwrap(),
            "s3://bkt/ds/part-00000",
        ],
        &[],
    );
    assert!(!again.status.success());
    let e = String::from_utf8_lossy(&again.stderr);
    assert!(e.contains("s3://bkt/ds/part-00000/a"), "{e}");
}

/// A merged dataset directory pushed whole: its stores and `dataset.json`
/// travel, a crashed writer's hidden staging directory (holding a whole
/// store) does not, and the URL opens as the dataset.
#[test]
fn a_merged_dataset_directory_pushes_with_its_manifest_and_without_staging() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &Path, n: usize| {
        let mut w =
            RaggedWriter::<i32>::create_with(path, 1, &CreateOptions::new(Codec::Zstd)).unwrap();
        let recs: Vec<Vec<i32>> = (0..n).map(|i| vec![i as i32; 1 + i % 4]).collect();
        w.append(&recs).unwrap();
        w.close().unwrap();
    };
    write(&dir.path().join("part-00000").join("a"), 40);
    write(&dir.path().join("part-00001").join("a"), 21);
    loaderx_core::Dataset::merge(dir.path(), Some(2)).unwrap();
    write(&dir.path().join(".part-00002.staged").join("a"), 5);
    let pushed = stdout(&loaderx(
        &server,
        &["push", dir.path().to_str().unwrap(), "s3://bkt/whole"],
        &[],
    ));
    assert!(server.exists("bkt", "whole/dataset.json"), "{pushed}");
    assert!(
        server.exists("bkt", "whole/part-00001/a/meta.zr"),
        "{pushed}"
    );
    assert!(
        !server.exists("bkt", "whole/.part-00002.staged/a/meta.zr"),
        "{pushed}"
    );
    let ds = loaderx_core::Dataset::open_url("s3://bkt/whole", &server.options()).unwrap();
    assert_eq!(ds.len(), 61);
}

/// The bytes of object `bucket/key`, read with an unsigned GET (the
/// test buckets are public-read).
fn get_object(server: &S3Server, bucket: &str, key: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let host = server.endpoint().trim_start_matches("http://").to_string();
    let mut s = std::net::TcpStream::connect(&host).unwrap();
    write!(
        s,
        "GET /{bucket}/{key} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..at]);
    assert!(head.starts_with("HTTP/1.1 200"), "GET {key}: {head}");
    assert!(!head.to_ascii_lowercase().contains("chunked"), "{head}");
    raw[at + 4..].to_vec()
}

/// A converted root's files beside its stores (`.source_columns.json`,
/// the mapping of store names to source column names; `classes.json`, an
/// image folder's class names) are published with the stores, by `push`
/// of the root and by `convert … URL`, with the local bytes.
#[test]
fn a_converted_root_is_pushed_with_the_files_beside_its_stores() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    // Column names that are not stream names: a mapping is written.
    let data = dir.path().join("data.jsonl");
    let lines: String = (0..20)
        .map(|i| format!("{{\"my col\": {i}, \"é\": [{i}, 1]}}\n"))
        .collect();
    std::fs::write(&data, lines).unwrap();
    let images = dir.path().join("images");
    for (class, n) in [("cat", 3u8), ("dog", 2)] {
        let d = images.join(class);
        std::fs::create_dir_all(&d).unwrap();
        for i in 0..n {
            let png = loaderx_tests::solid_png(4, 3, [i, 7, 9]);
            std::fs::write(d.join(format!("{i}.png")), png).unwrap();
        }
    }
    let (tables, folder) = (dir.path().join("tables"), dir.path().join("folder"));
    let path = |p: &Path| p.to_str().unwrap().to_string();
    stdout(&loaderx(
        &server,
        &["convert", "jsonl", &path(&data), "-o", &path(&tables)],
        &[],
    ));
    stdout(&loaderx(
        &server,
        &["convert", "images", &path(&images), "-o", &path(&folder)],
        &[],
    ));
    let mapping = std::fs::read(tables.join("train/.source_columns.json")).unwrap();
    assert!(String::from_utf8_lossy(&mapping).contains("my col"));
    let classes = std::fs::read(folder.join("train/classes.json")).unwrap();
    for (root, url) in [
        (&tables, "s3://bkt/pushed/t"),
        (&folder, "s3://bkt/pushed/f/"),
    ] {
        let out = stdout(&loaderx(&server, &["push", &path(root), url], &[]));
        assert!(out.contains("pushed 2 stores"), "{out}");
    }
    let key = "pushed/t/train/.source_columns.json";
    assert_eq!(get_object(&server, "bkt", key), mapping);
    assert_eq!(
        get_object(&server, "bkt", "pushed/f/train/classes.json"),
        classes
    );
    // Converted straight to a URL: staged locally, pushed the same way.
    let staging = dir.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    stdout(&loaderx(
        &server,
        &["convert", "jsonl", &path(&data), "-o", "s3://bkt/direct"],
        &[("LOADERX_STAGING_DIR", staging.as_path())],
    ));
    let key = "direct/train/.source_columns.json";
    assert_eq!(get_object(&server, "bkt", key), mapping);
    // The stores it names read back from the URL as locally.
    let local = stdout(&loaderx(
        &server,
        &["digest", &path(&tables.join("train/my_col"))],
        &[],
    ));
    let remote = stdout(&loaderx(
        &server,
        &["digest", "s3://bkt/direct/train/my_col"],
        &[],
    ));
    assert_eq!(local, remote);
}

/// `push` of a directory of stores: a path with spaces and non-ASCII
/// letters is pushed under that key and reads back; one with `#` (a URL
/// fragment, which would drop the rest of the path and write the store
/// under another key) is refused before anything is uploaded.
#[test]
fn pushed_paths_keep_their_keys_or_are_refused_before_any_upload() {
    let Some(server) = S3Server::start() else {
        return;
    };
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let store = |p: &Path| {
        let mut w = RaggedWriter::<i32>::create(p, 1, Codec::Zstd).unwrap();
        w.append([vec![1, 2, 3], vec![4]]).unwrap();
        w.close().unwrap();
    };
    let good = dir.path().join("good");
    store(&good.join("my split é/tokens"));
    let out = stdout(&loaderx(
        &server,
        &["push", good.to_str().unwrap(), "s3://bkt/good"],
        &[],
    ));
    assert!(out.contains("pushed 1 stores"), "{out}");
    assert_eq!(
        stdout(&loaderx(
            &server,
            &["digest", "s3://bkt/good/my split é/tokens"],
            &[]
        )),
        stdout(&loaderx(
            &server,
            &["digest", good.join("my split é/tokens").to_str().unwrap()],
            &[]
        ))
    );
    let bad = dir.path().join("bad");
    store(&bad.join("a/tokens"));
    store(&bad.join("x#1/tokens"));
    let o = loaderx(
        &server,
        &["push", bad.to_str().unwrap(), "s3://bkt/bad"],
        &[],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("x#1/tokens: a path with '?', '#' or '%'"),
        "{err}"
    );
    for key in ["bad/x/meta.zr", "bad/x/data_0.zr", "bad/a/data_0.zr"] {
        assert!(!server.exists("bkt", key), "{key} was uploaded");
    }
}
