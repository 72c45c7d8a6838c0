//! The `loaderx` binary: `info`, `digest` and `verify` on sound and damaged stores.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Output};

use loaderx_core::DigestBuilder;
use loaderx_core::{Codec, CreateOptions, DenseWriter, Generation, RaggedWriter};

fn loaderx(args: &[&str], store: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(args)
        .arg(store)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn info_digest_verify() {
    let dir = tempfile::tempdir().unwrap();
    let dense = dir.path().join("dense");
    let rows: Vec<u16> = (0..600).collect();
    let mut w = DenseWriter::<u16>::create_with(
        &dense,
        &[2, 3],
        &CreateOptions::new(Codec::Zstd).data_shards(3),
    )
    .unwrap();
    w.append_slice(&rows, 100).unwrap();
    w.close().unwrap();

    let info = stdout(&loaderx(&["info"], &dense));
    for line in [
        "class: dense",
        "dtype: u16 (uint16)",
        "format: 2.8.19 (written by Python loaderx 2.8.19; read by Python loaderx 2.8.18 and 2.8.19)",
        "item_shape: [2, 3]",
        "codec: zstd",
        "data_shards: 3",
        "length: 100",
        "logical_bytes: 1200",
    ] {
        assert!(info.contains(line), "{line:?} missing from:\n{info}");
    }

    let mut expect = DigestBuilder::new();
    for rec in rows.chunks(6) {
        let bytes: Vec<u8> = rec.iter().flat_map(|v| v.to_le_bytes()).collect();
        expect.push(&[2, 3], &bytes);
    }
    assert_eq!(
        stdout(&loaderx(&["digest"], &dense)),
        format!("{}\n", expect.finish())
    );
    assert!(stdout(&loaderx(&["verify"], &dense)).contains("100 records"));

    let ragged = dir.path().join("ragged");
    // The 2.4.6 generation, to migrate to 2.8.19 below (the default is 2.8.19).
    let mut w = RaggedWriter::<i8>::create_with(
        &ragged,
        1,
        &CreateOptions::new(Codec::Raw).generation(Generation::V2_4_6),
    )
    .unwrap();
    w.append([vec![1i8, 2, 3], vec![4]]).unwrap();
    w.close().unwrap();
    let info = stdout(&loaderx(&["info"], &ragged));
    assert!(
        info.contains("class: ragged") && info.contains("ndim: 1"),
        "{info}"
    );
    assert!(info.contains("logical_bytes: 4"), "{info}");

    // migrate to 2.8.19 and back: the same digest, the generation in info.
    let new = dir.path().join("ragged.2819");
    let out = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["migrate", "--format", "2.8.19"])
        .arg(&ragged)
        .arg(&new)
        .output()
        .unwrap();
    assert!(stdout(&out).contains("(2.4.6) to"), "{out:?}");
    let info = stdout(&loaderx(&["info"], &new));
    assert!(
        info.contains(
            "format: 2.8.19 (written by Python loaderx 2.8.19; read by Python loaderx 2.8.19)"
        ),
        "{info}"
    );
    assert_eq!(
        stdout(&loaderx(&["digest"], &new)),
        stdout(&loaderx(&["digest"], &ragged))
    );
    let out = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["migrate", "--format", "2.8.18"])
        .arg(&ragged)
        .arg(dir.path().join("no"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2.8.19"),
        "{out:?}"
    );

    // Damage the second record's stored dims: verify names the record.
    let data = std::fs::OpenOptions::new()
        .write(true)
        .open(ragged.join("data_1.zr"))
        .unwrap();
    data.write_all_at(&9u64.to_le_bytes(), 0).unwrap();
    let out = loaderx(&["verify"], &ragged);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("record 1"), "{err}");

    let out = loaderx(&["digest"], &dir.path().join("missing"));
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "loaderx: {}: no such file or directory\n",
            dir.path().join("missing").display()
        )
    );
}

#[test]
fn urls_with_credentials_or_queries_are_never_printed() {
    // Nothing listens on 127.0.0.1:9: every command fails, and its message
    // names the store by its URL without the password or the query string.
    let url = "http://reader:hunter2@127.0.0.1:9/data/store?X-Amz-Signature=deadbeef";
    for command in ["info", "digest", "verify"] {
        let out = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args([command, url])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{command}");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for secret in ["hunter2", "deadbeef", "reader:", "Signature"] {
            assert!(
                !printed.contains(secret),
                "{command} printed {secret}: {printed}"
            );
        }
        assert!(
            printed.contains("http://127.0.0.1:9/data/store"),
            "{command}: {printed}"
        );
    }
}

/// Tiny MNIST-format IDX files (2 images of 2x2 per split) in `dir`.
fn tiny_idx(dir: &Path) {
    for prefix in ["train", "t10k"] {
        let mut images = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2];
        images.extend([1u8, 2, 3, 4, 5, 6, 7, 8]);
        std::fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), images).unwrap();
        let labels = [0u8, 0, 8, 1, 0, 0, 0, 2, 3, 4];
        std::fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), labels).unwrap();
    }
}

/// Every command that writes stores, given a URL as its output: a store
/// URL is staged and pushed (here to a server that is not there, so the
/// command fails), another scheme is refused by name; none writes a local
/// directory `s3:/…` or `ftp:/…` (in the child's working directory), leaves
/// its staging directory behind, or prints the password or query string.
#[test]
fn url_destinations_are_pushed_or_refused_never_written_as_local_paths() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let mut w = RaggedWriter::<i8>::create(&src, 1, Codec::Raw).unwrap();
    w.append([vec![1i8, 2, 3], vec![4]]).unwrap();
    w.close().unwrap();
    let idx = dir.path().join("idx");
    std::fs::create_dir(&idx).unwrap();
    tiny_idx(&idx);
    let cwd = dir.path().join("cwd");
    let staging = dir.path().join("staging");
    std::fs::create_dir(&cwd).unwrap();
    std::fs::create_dir(&staging).unwrap();
    let (s, i) = (src.to_str().unwrap(), idx.to_str().unwrap());
    for url in [
        "s3://reader:hunter2@bucket/x?X-Amz-Signature=deadbeef",
        "http://reader:hunter2@127.0.0.1:9/x?sig=deadbeef",
        "ftp://reader:hunter2@host/x?sig=deadbeef",
    ] {
        for args in [
            vec!["migrate", "--format", "2.4.6", s, url],
            vec![
                "convert", "idx", i, "-o", url, "--codec", "raw", "--shards", "1",
            ],
            vec!["push", url, "s3://bucket/y"],
            vec!["push", s, url],
        ] {
            let mut c = Command::new(env!("CARGO_BIN_EXE_loaderx"));
            for (k, _) in std::env::vars() {
                if k.starts_with("AWS_") {
                    c.env_remove(k);
                }
            }
            let out = c
                .args(&args)
                .current_dir(&cwd)
                .env("LOADERX_STAGING_DIR", &staging)
                .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
                .env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .env("AWS_REGION", "us-east-1")
                .env("AWS_ALLOW_HTTP", "true")
                .output()
                .unwrap();
            let printed = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!out.status.success(), "{args:?}: {printed}");
            for secret in ["hunter2", "deadbeef", "reader"] {
                assert!(
                    !printed.contains(secret),
                    "{args:?} printed {secret}: {printed}"
                );
            }
            let shown = loaderx_core::redact_url(url);
            assert!(printed.contains(&shown), "{args:?}: {printed}");
            let left: Vec<_> = std::fs::read_dir(&cwd)
                .unwrap()
                .chain(std::fs::read_dir(&staging).unwrap())
                .map(|e| e.unwrap().path())
                .collect();
            assert!(left.is_empty(), "{args:?} left {left:?}: {printed}");
        }
    }
}

#[test]
fn info_says_a_store_holds_encoded_images() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../loaderx-core/tests/fixtures/vision");
    let jpg = std::fs::read(fixtures.join("eval_src.jpg")).unwrap();
    let png = std::fs::read(fixtures.join("eval_src.png")).unwrap();
    let store = dir.path().join("image");
    let mut w = RaggedWriter::<u8>::create(&store, 1, Codec::Raw).unwrap();
    w.append([&jpg[..], &png[..], &jpg[..]]).unwrap();
    w.close().unwrap();
    let info = stdout(&loaderx(&["info"], &store));
    assert!(
        info.contains(
            "content: encoded images: JPEG 2, PNG 1 of 3 records sampled; 97 x 75 x 3, 97 x 75 x 3, 97 x 75 x 3"
        ),
        "{info}"
    );
    // Bytes that are not images: no content line.
    let bytes = dir.path().join("bytes");
    let mut w = RaggedWriter::<u8>::create(&bytes, 1, Codec::Raw).unwrap();
    w.append([&b"hello"[..], b"world"]).unwrap();
    w.close().unwrap();
    assert!(!stdout(&loaderx(&["info"], &bytes)).contains("content:"));
}
