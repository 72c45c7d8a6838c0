//! The Python loaderx peers: `bench/python/peers.py` (2.4.6, importable
//! by the interpreter from `--python` / `LOADERX_PYTHON`) and
//! `bench/python/peer_2_8_19.py` (2.8.19, from a release folder of
//! `--py-releases` on `PYTHONPATH`), run as child processes; each result is
//! one JSON object on its stdout.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::stores::Result;

/// The peer script, next to this crate.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/peers.py")
}

/// Runs `peers.py args...` with `python`; every JSON line it printed.
pub fn run(python: &Path, args: &[String]) -> Result<Vec<Value>> {
    run_script(Command::new(python).arg(script()), "peers.py", args)
}

/// True when `releases` holds an install of Python loaderx `release`.
pub fn has_release(releases: &Path, release: &str) -> bool {
    releases.join(release).join("loaderx").is_dir()
}

/// Runs `peer_2_8_19.py args...` with `python` and loaderx `release` from
/// `releases` first on `PYTHONPATH`; every JSON line it printed.
pub fn run_release(
    python: &Path,
    releases: &Path,
    release: &str,
    args: &[String],
) -> Result<Vec<Value>> {
    run_release_in(Command::new(python), releases, release, args)
}

/// [`run_release`] with `python` as `cmd` starts it (inside a cgroup, for
/// the `cold` section).
pub fn run_release_in(
    mut cmd: Command,
    releases: &Path,
    release: &str,
    args: &[String],
) -> Result<Vec<Value>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/peer_2_8_19.py");
    cmd.env("PYTHONPATH", releases.join(release))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(script);
    run_script(&mut cmd, "peer_2_8_19.py", args)
}

fn run_script(cmd: &mut Command, name: &str, args: &[String]) -> Result<Vec<Value>> {
    let out = cmd.args(args).output()?;
    if !out.status.success() {
        return Err(format!(
            "{name} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| serde_json::from_str(l).map_err(Into::into))
        .collect()
}

/// Field `key` of a JSON result as a number.
pub fn num(v: &Value, key: &str) -> Result<f64> {
    v.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("peers.py result lacks {key}: {v}").into())
}

/// Writes `w`'s source for the Python peer: `data.npy` (Dense) or
/// `flat.npy` + `shapes.npy` (Ragged).
pub fn write_source(w: &crate::workload::Workload, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let descr = match w.dtype {
        loaderx_core::DType::U8 => "|u1",
        loaderx_core::DType::U16 => "<u2",
        loaderx_core::DType::I32 => "<i4",
        loaderx_core::DType::I64 => "<i8",
        loaderx_core::DType::F32 => "<f4",
        other => return Err(format!("no npy writer for {other}").into()),
    };
    match &w.dense {
        Some(shape) => {
            let mut full = vec![w.len()];
            full.extend_from_slice(shape);
            write_npy(&dir.join("data.npy"), descr, &full, &w.flat)
        }
        None => {
            let elements = w.flat.len() / w.dtype.size();
            write_npy(&dir.join("flat.npy"), descr, &[elements], &w.flat)?;
            let shapes: Vec<u8> = w
                .shapes
                .iter()
                .flat_map(|&d| (d as u64).to_le_bytes())
                .collect();
            write_npy(&dir.join("shapes.npy"), "<u8", &[w.len(), w.ndim], &shapes)
        }
    }
}

/// A version 1.0 `.npy` file.
fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> Result<()> {
    Ok(loaderx_tests::write_npy(path, descr, shape, data)?)
}
