//! Helpers for the cross-crate tests: locating the Python loaderx venv.

use std::path::PathBuf;
use std::process::Command;

/// The Python interpreter that has `loaderx==2.4.6`, from `LOADERX_PYTHON`.
///
/// The test command (`.ci/test`) installs it; a plain `cargo test` without it
/// set fails loudly rather than skipping, unless `LOADERX_SKIP_PYTHON=1`.
pub fn python() -> Option<PathBuf> {
    if std::env::var_os("LOADERX_SKIP_PYTHON").is_some() {
        return None;
    }
    let py = std::env::var_os("LOADERX_PYTHON")
        .map(PathBuf::from)
        .expect("set LOADERX_PYTHON to a python with loaderx==2.4.6 (see README), or LOADERX_SKIP_PYTHON=1");
    Some(py)
}

/// Path of `tests/python/interop.py`.
pub fn interop_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/interop.py")
}

/// Runs `interop.py` with `args`, returning stdout; panics with stderr on failure.
pub fn run_interop(py: &std::path::Path, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(py)
        .arg(interop_script())
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "interop.py {:?} failed:\n{}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}
