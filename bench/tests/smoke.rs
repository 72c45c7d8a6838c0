//! A smoke run of the whole suite on tiny workloads: every section and
//! contender runs, checks the bytes it returns, and reports. No time is
//! asserted; the measurements in `bench/README.md` are made with the full run.

use std::process::Command;

#[test]
fn quick_run_prints_every_table() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loaderx-bench"));
    cmd.args(["--quick", "--workloads", "b,d,e", "--dir"])
        .arg(dir.path());
    // With LOADERX_PYTHON set (scripts/test sets it) the Python peers run too.
    let python = std::env::var_os("LOADERX_PYTHON").is_some();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run loaderx-bench: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "loaderx-bench failed:\n{stdout}\n{stderr}"
    );
    for needle in [
        "(b) dense Fashion-MNIST",
        "(d) ragged tokens",
        "(e) ragged images",
        "loaderx-rs zrecord zstd_dict",
        "memcpy",
        "bare zstd loop",
        "LMDB (heed) zstd",
        "Arrow IPC",
        "Parquet",
        "#### Sampler",
        "#### Small records",
        "(s8) small records i64",
        "reversed runs of 64",
        "every record moved",
        "ms per million records",
        "#### Loader end to end",
        "#### Two-stream loader",
        "burn DataLoaderBuilder",
        "#### Targets",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    if python {
        assert!(stdout.contains("Python loaderx 2.4.6 zstd"), "{stdout}");
        assert!(stdout.contains("NumPy mmap fancy index"), "{stdout}");
        // Stores Python loaderx wrote with many writer lanes, read by us.
        assert!(
            stdout.contains("over Python 2.4.6's store (24 lanes"),
            "{stdout}"
        );
        assert!(stdout.contains("written out of order"), "{stdout}");
    }
    // With LOADERX_PY_RELEASES too, Python loaderx 2.8.19's own Loader.
    if python && std::env::var_os("LOADERX_PY_RELEASES").is_some() {
        for needle in [
            "Python loaderx 2.8.19 Loader, workers=0",
            "Python loaderx 2.8.19 zstd_dict",
            "Python loaderx 2.8.19 raw (RaggedBatch)",
            "loaderx-rs zrecord raw, 2.8.19 store, packed",
            "loaderx-rs DataLoader, packed(true)",
            "(d) raw gather vs Python loaderx 2.8.19",
            "over Python 2.8.19's store (24 lanes",
            "loader (d) zstd vs Python loaderx 2.8.19",
        ] {
            assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
        }
    }
    // Everything it wrote is gone again.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
