//! [`TraceFile`]: the Chrome / Perfetto trace a loader writes itself
//! ([`trace`](super::DataLoaderBuilder::trace) or `LOADERX_TRACE`), in the
//! Trace Event Format's JSON array form: one lane (`tid`) for the consumer
//! and one per worker, complete events (`"ph":"X"`) in microseconds since
//! the loader started.
//!
//! Events are written through a 64 KiB buffer as they come (the memory
//! held is bounded, whatever the run's length); dropping the loader writes
//! the closing bracket. A file cut short by a crash still opens in
//! ui.perfetto.dev, which reads an array without its end.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Error;

/// The environment variable naming the trace file of every loader the
/// process starts (a builder's [`trace`](super::DataLoaderBuilder::trace)
/// wins over it).
pub(crate) const TRACE_ENV: &str = "LOADERX_TRACE";

/// Loaders of this process that took their trace path from
/// [`TRACE_ENV`]: the first writes the path itself, later ones number it.
static ENV_TRACES: AtomicUsize = AtomicUsize::new(0);

/// The trace path [`TRACE_ENV`] gives the next loader: the path itself for
/// the first, then `stem.1.ext`, `stem.2.ext`... (so that loaders started
/// one after another, as an epoch loader's, do not overwrite each other).
pub(crate) fn env_trace_path() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os(TRACE_ENV).filter(|p| !p.is_empty())?);
    let n = ENV_TRACES.fetch_add(1, Ordering::Relaxed);
    Some(numbered(&path, n))
}

fn numbered(path: &Path, n: usize) -> PathBuf {
    if n == 0 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_os_string());
    let mut name = stem;
    name.push(format!(".{n}"));
    if let Some(ext) = path.extension() {
        name.push(".");
        name.push(ext);
    }
    path.with_file_name(name)
}

/// An open trace file.
pub(crate) struct TraceFile {
    out: BufWriter<File>,
    path: PathBuf,
    pid: u32,
    /// No event was written yet (no comma before the next).
    first: bool,
    /// A write failed: nothing more is written.
    failed: bool,
}

impl std::fmt::Debug for TraceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceFile")
            .field("path", &self.path)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// A JSON string literal of `s`.
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

impl TraceFile {
    /// Creates (or truncates) `path` and names the lanes: `(tid, name)`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Io`](crate::ErrorKind::Io) when the file cannot be
    /// created or written.
    pub(crate) fn create(path: &Path, lanes: &[(u32, String)]) -> Result<TraceFile, Error> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let mut trace = TraceFile {
            out: BufWriter::with_capacity(64 << 10, file),
            path: path.to_path_buf(),
            pid: std::process::id(),
            first: true,
            failed: false,
        };
        trace.write_raw("[\n");
        trace.event(&format!(
            r#"{{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":"loaderx"}}}}"#,
            trace.pid
        ));
        for (tid, name) in lanes {
            let (pid, name) = (trace.pid, quoted(name));
            trace.event(&format!(
                r#"{{"name":"thread_name","ph":"M","pid":{pid},"tid":{tid},"args":{{"name":{name}}}}}"#
            ));
            trace.event(&format!(
                r#"{{"name":"thread_sort_index","ph":"M","pid":{pid},"tid":{tid},"args":{{"sort_index":{tid}}}}}"#
            ));
        }
        if trace.failed {
            return Err(Error::io(
                path,
                std::io::Error::other("cannot write the trace file"),
            ));
        }
        Ok(trace)
    }

    fn write_raw(&mut self, s: &str) {
        if !self.failed && self.out.write_all(s.as_bytes()).is_err() {
            self.failed = true;
        }
    }

    fn event(&mut self, json: &str) {
        if !self.first {
            self.write_raw(",\n");
        }
        self.first = false;
        self.write_raw(json);
    }

    /// A complete event on lane `tid`: `name` (a stage or `batch`), from
    /// `ts` for `dur` microseconds, with `args` (a JSON object) if any.
    pub(crate) fn complete(&mut self, tid: u32, name: &str, ts: f64, dur: f64, args: &str) {
        let mut e = String::with_capacity(96 + args.len());
        let _ = write!(
            e,
            r#"{{"name":"{name}","cat":"loaderx","ph":"X","pid":{},"tid":{tid},"ts":{ts:.3},"dur":{dur:.3}"#,
            self.pid
        );
        if !args.is_empty() {
            let _ = write!(e, r#","args":{args}"#);
        }
        e.push('}');
        self.event(&e);
    }

    /// Writes the closing bracket and flushes; nothing is written after.
    pub(crate) fn finish(&mut self) {
        self.write_raw("\n]\n");
        if !self.failed && self.out.flush().is_err() {
            self.failed = true;
        }
        self.failed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_file_is_a_json_array_of_events_with_named_lanes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let mut t = TraceFile::create(&path, &[(0, "consumer".into()), (1, "worker \"0\"".into())])
            .unwrap();
        t.complete(1, "read", 1.5, 2.25, r#"{"step":3}"#);
        t.complete(0, "wait_batch", 0.0, 1.0, "");
        t.finish();
        t.complete(0, "late", 0.0, 1.0, "");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let events = v.as_array().unwrap();
        let x: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 2);
        assert_eq!(x[0]["args"]["step"], 3);
        assert_eq!(x[0]["dur"], 2.25);
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["consumer", "worker \"0\""]);
    }

    #[test]
    fn later_loaders_number_the_path() {
        assert_eq!(numbered(Path::new("/t/x.json"), 0), Path::new("/t/x.json"));
        assert_eq!(
            numbered(Path::new("/t/x.json"), 2),
            Path::new("/t/x.2.json")
        );
        assert_eq!(numbered(Path::new("x"), 1), Path::new("x.1"));
    }
}
