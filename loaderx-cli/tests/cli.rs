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
    assert!(String::from_utf8_lossy(&out.stderr).contains("no store"));
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
