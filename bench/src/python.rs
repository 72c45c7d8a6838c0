//! The Python loaderx 2.4.6 peer: `bench/python/peers.py`, run as a child
//! process with the interpreter from `--python` / `LOADERX_PYTHON`; each
//! result is one JSON object on its stdout.

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
    let out = Command::new(python).arg(script()).args(args).output()?;
    if !out.status.success() {
        return Err(format!(
            "peers.py {} failed ({}): {}",
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
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    use std::io::Write;
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&(header.len() as u16).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    f.write_all(data)?;
    f.flush()?;
    Ok(())
}
