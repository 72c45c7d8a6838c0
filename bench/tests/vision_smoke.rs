//! A `--quick` run of the `vision` and `profile` sections on a corpus of
//! 300 images: the corpus is made (PIL through `LOADERX_PYTHON`, the stores
//! by the `loaderx` CLI built beside this binary), every loaderx contender
//! runs and reports, every prediction of the profile section is made and
//! compared, and the quick corpus is removed again. No time is asserted. Skipped,
//! saying why, without a Python or the CLI binary.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn quick_vision_and_profile_sections() {
    let Some(python) = std::env::var_os("LOADERX_PYTHON") else {
        eprintln!("skipped: no LOADERX_PYTHON (scripts/test sets it)");
        return;
    };
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_loaderx-bench"));
    let cli = bench.with_file_name("loaderx");
    if !cli.exists() {
        eprintln!(
            "skipped: no loaderx CLI at {} (a workspace test build makes it)",
            cli.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(&bench)
        .args(["--quick", "--sections", "vision,profile", "--dir"])
        .arg(dir.path())
        .arg("--vision-python")
        .arg(&python)
        .arg("--loaderx-cli")
        .arg(&cli)
        .output()
        .unwrap_or_else(|e| panic!("cannot run loaderx-bench: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "loaderx-bench failed:\n{stdout}\n{stderr}"
    );
    for needle in [
        "#### Vision: decode + augment, 300 images",
        "**loaderx-rs DataLoader + vision stage**",
        "reduced_decode(false)",
        "pixel store + flip + normalise",
        "| train | PNG |",
        "| eval | JPEG |",
        "FFCV, published",
        "~1600×1200 JPEG q90",
        "images per CPU-second vs 500",
        "#### Profile: predictions against measurements",
        "| 1 → 2 workers (imagenet_train, JPEG) |",
        "| 2 → 1 workers (imagenet_train, JPEG) |",
        "| crop-first on → off (2 workers) |",
        "| crop-first off → on (2 workers) |",
        "The warm profile of the page-cache check",
        "profile: 1 → 2 workers (imagenet_train, JPEG), 1 − |predicted/measured − 1|",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    // The cold half needs root (it drops the page cache).
    assert!(
        stdout.contains("| page cache warm → cold") || stdout.contains("cold half was not run"),
        "no page-cache check in:\n{stdout}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
