//! What the CLI tests that write their fixtures with Python share: the
//! repository root, the python to use (or why the tests skip), running a
//! fixture script once, running `loaderx` and reading its outcome, a
//! store's records.
//!
//! Each test file includes it with `#[macro_use] mod support;` and uses
//! what it needs (hence `dead_code` allowed here).

#![allow(dead_code, unused_macros)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `std::ffi::OsStr` arguments from string literals and expressions.
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        &[$(std::ffi::OsStr::new($a)),*]
    };
}

/// The workspace root.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("loaderx-cli lies in the workspace")
        .to_path_buf()
}

/// The python to write fixtures with, one that imports every module of
/// `imports`: `LOADERX_PYTHON`, else `$HOME/.cache/loaderx/venv/bin/python`
/// (the test command installs it). `None` to skip: without one, or with
/// `LOADERX_SKIP_PYTHON` set; never under `CI`, where a missing python
/// fails the test.
pub(crate) fn python(imports: &[&str]) -> Option<PathBuf> {
    if std::env::var_os("LOADERX_SKIP_PYTHON").is_some() {
        eprintln!("SKIPPED: LOADERX_SKIP_PYTHON is set");
        return None;
    }
    let import = format!("import {}", imports.join(", "));
    let py = std::env::var_os("LOADERX_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/loaderx/venv/bin/python"))
        })
        .filter(|p| {
            Command::new(p)
                .args(["-c", &import])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if py.is_none() {
        let names = imports.join(", ");
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but no python that imports {names} was found: set LOADERX_PYTHON \
             (./scripts/test installs one)"
        );
        eprintln!("SKIPPED: no python that imports {names} (set LOADERX_PYTHON)");
    }
    py
}

/// Runs `tests/python/<script> DIR` with `py` into a fresh `name` folder of
/// the test target's scratch directory, and returns that folder.
pub(crate) fn write_fixtures(py: &Path, script: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    let out = Command::new(py)
        .arg(repo_root().join("tests/python").join(script))
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// The `loaderx` binary built with these tests, as a command (outside any
/// Kubernetes Indexed Job, whatever the environment).
pub(crate) fn command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loaderx"));
    cmd.env_remove("JOB_COMPLETION_INDEX");
    cmd
}

/// Runs the `loaderx` binary built with these tests.
pub(crate) fn loaderx(args: &[&std::ffi::OsStr]) -> Output {
    command()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run loaderx: {e}"))
}

/// The standard output of a run that must have succeeded.
pub(crate) fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "loaderx failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The standard error of a run that must have failed.
pub(crate) fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "loaderx succeeded:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every record of `store`: its shape and bytes.
pub(crate) fn records(store: &loaderx_core::Store) -> Vec<(Vec<usize>, Vec<u8>)> {
    let mut out = Vec::new();
    store
        .for_each_record(|_, shape, bytes| {
            out.push((shape.to_vec(), bytes.to_vec()));
            Ok(())
        })
        .unwrap();
    out
}
