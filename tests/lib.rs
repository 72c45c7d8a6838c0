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

/// The directory of per-release Python loaderx installs, from
/// `LOADERX_PY_RELEASES`: one `pip install --target` folder per release,
/// named by its version (`2.4.6`, `2.8.12`, `2.8.18`, `2.8.19`).
///
/// `None` under `LOADERX_SKIP_PYTHON=1`; otherwise a missing variable fails
/// loudly, as [`python`] does.
pub fn py_releases() -> Option<PathBuf> {
    if std::env::var_os("LOADERX_SKIP_PYTHON").is_some() {
        return None;
    }
    let dir = std::env::var_os("LOADERX_PY_RELEASES")
        .map(PathBuf::from)
        .expect(
            "set LOADERX_PY_RELEASES to a directory with one `pip install --target` folder per \
             loaderx release (2.4.6, 2.8.12, 2.8.18, 2.8.19; see README), or LOADERX_SKIP_PYTHON=1",
        );
    Some(dir)
}

/// A `Command` running `$LOADERX_PYTHON` with Python loaderx `version`
/// (`"2.8.19"`) importable: `PYTHONPATH=$LOADERX_PY_RELEASES/<version>`.
///
/// `None` under `LOADERX_SKIP_PYTHON=1`; panics when either variable is
/// missing or the release's folder does not exist.
pub fn python_release(version: &str) -> Option<Command> {
    let py = python()?;
    let dir = py_releases()?.join(version);
    assert!(
        dir.join("loaderx").is_dir(),
        "{}: no loaderx {version} here (pip install --no-deps --target {} loaderx=={version})",
        dir.display(),
        dir.display()
    );
    let mut cmd = Command::new(py);
    cmd.env("PYTHONPATH", dir)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    Some(cmd)
}

/// Writes a version 1.0 `.npy` file: `data` (little-endian elements, C
/// order) with NumPy dtype string `descr` (e.g. `"<i4"`) and `shape`.
///
/// # Errors
///
/// When the file cannot be written.
pub fn write_npy(
    path: &std::path::Path,
    descr: &str,
    shape: &[usize],
    data: &[u8],
) -> std::io::Result<()> {
    use std::io::Write;
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    let tuple = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let len = u16::try_from(header.len()).map_err(std::io::Error::other)?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&len.to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    f.write_all(data)?;
    f.flush()
}

/// Path of `tests/python/generations.py`, the fixture kit that runs under
/// every Python release.
pub fn generations_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/generations.py")
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

/// A real S3-compatible server (moto, from the test venv) on 127.0.0.1,
/// started on a free port and killed when dropped.
pub struct S3Server {
    child: std::process::Child,
    port: u16,
}

impl S3Server {
    /// Starts `$LOADERX_PYTHON -m moto.server` on a free loopback port and
    /// waits until it answers; `None` when `LOADERX_SKIP_PYTHON` is set.
    pub fn start() -> Option<S3Server> {
        let py = python()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = Command::new(py)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start moto (scripts/test installs moto[server] into the venv)");
        let server = S3Server { child, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while server.request("GET", "/").is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "moto did not answer on port {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Some(server)
    }

    /// The server's port on 127.0.0.1 (a [`ThrottledLink`]'s target).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates bucket `name`, readable without signatures (moto accepts
    /// unsigned requests to create it; the tests' probes read unsigned).
    pub fn create_bucket(&self, name: &str) {
        let status = self
            .request_with("PUT", &format!("/{name}"), "x-amz-acl: public-read\r\n")
            .expect("create bucket");
        assert!(
            status.starts_with("HTTP/1.1 200"),
            "create bucket: {status}"
        );
    }

    /// One plain HTTP/1.1 request; returns the status line.
    fn request(&self, method: &str, path: &str) -> std::io::Result<String> {
        self.request_with(method, path, "")
    }

    /// [`Self::request`] with extra header lines (each ending in CRLF).
    fn request_with(&self, method: &str, path: &str, headers: &str) -> std::io::Result<String> {
        use std::io::{BufRead, BufReader, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line)?;
        if line.is_empty() {
            return Err(std::io::Error::other("no answer"));
        }
        Ok(line.trim_end().to_string())
    }

    /// Options that reach this server, and nothing else: endpoint, dummy
    /// credentials, region, plain HTTP; short retries.
    pub fn options(&self) -> loaderx_core::RemoteOptions {
        loaderx_core::RemoteOptions::default()
            .config("aws_endpoint", self.endpoint())
            .config("aws_access_key_id", "testing")
            .config("aws_secret_access_key", "testing")
            .config("aws_region", "us-east-1")
            .config("aws_allow_http", "true")
            .config("aws_virtual_hosted_style_request", "false")
            .retries(2)
            .backoff(std::time::Duration::from_millis(50))
            .retry_timeout(std::time::Duration::from_secs(5))
            .timeouts(
                std::time::Duration::from_secs(10),
                std::time::Duration::from_secs(2),
            )
    }

    /// Stops the server now (as if it went away mid-run).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

impl S3Server {
    /// Writes object `bucket/key` with an unsigned PUT (moto accepts them):
    /// lets tests plant damaged objects that `push` would refuse to upload.
    pub fn put_object(&self, bucket: &str, key: &str, body: &[u8]) {
        use std::io::{BufRead, BufReader, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        write!(
            s,
            "PUT /{bucket}/{key} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )
        .expect("write");
        s.write_all(body).expect("write body");
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).expect("read");
        assert!(line.starts_with("HTTP/1.1 200"), "put {key}: {line}");
    }

    /// Deletes object `bucket/key` with an unsigned DELETE (as if a part
    /// were lost after a merge, or its upload never finished).
    pub fn delete_object(&self, bucket: &str, key: &str) {
        let status = self
            .request("DELETE", &format!("/{bucket}/{key}"))
            .expect("delete");
        assert!(status.starts_with("HTTP/1.1 204"), "delete {key}: {status}");
    }

    /// True when object `bucket/key` exists.
    pub fn exists(&self, bucket: &str, key: &str) -> bool {
        self.request("HEAD", &format!("/{bucket}/{key}"))
            .is_ok_and(|s| s.starts_with("HTTP/1.1 200"))
    }
}

/// Path of `tests/python/throttle_proxy.py`, the throttling TCP proxy.
pub fn throttle_proxy_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/throttle_proxy.py")
}

/// A measured link in front of a local test server: `throttle_proxy.py` on
/// a free loopback port, forwarding every connection to the server with a
/// one-way latency on every chunk and a bandwidth each way shared by all
/// connections (a link, not a per-connection limit); killed when dropped.
pub struct ThrottledLink {
    child: std::process::Child,
    port: u16,
}

impl ThrottledLink {
    /// Starts `$LOADERX_PYTHON tests/python/throttle_proxy.py` in front of
    /// `127.0.0.1:target_port` with `latency_ms` milliseconds each way and
    /// `mbit` Mbit/s each way (0: no limit), and waits until it listens;
    /// `None` when `LOADERX_SKIP_PYTHON` is set. The proxy also exits when
    /// this process does (its standard input closes).
    pub fn start(target_port: u16, latency_ms: u32, mbit: u32) -> Option<ThrottledLink> {
        use std::io::{BufRead, BufReader};
        let py = python()?;
        let mut child = Command::new(py)
            .arg(throttle_proxy_script())
            .arg("--target")
            .arg(format!("127.0.0.1:{target_port}"))
            .arg("--latency-ms")
            .arg(latency_ms.to_string())
            .arg("--mbit")
            .arg(mbit.to_string())
            .arg("--exit-on-stdin-close")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start tests/python/throttle_proxy.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("the proxy's stdout"))
            .read_line(&mut line)
            .expect("read the proxy's port");
        let port: u16 = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("throttle_proxy.py said {line:?}"));
        Some(ThrottledLink { child, port })
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The proxy as an endpoint, `http://127.0.0.1:PORT`: the server's
    /// endpoint, through the link.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for ThrottledLink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A solid `w` x `h` RGB PNG of one colour: the adapters' vision tests'
/// records.
pub fn solid_png(w: u32, h: u32, rgb: [u8; 3]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, w, h);
    e.set_color(png::ColorType::Rgb);
    let px: Vec<u8> = (0..w * h).flat_map(|_| rgb).collect();
    e.write_header()
        .and_then(|mut h| h.write_image_data(&px))
        .expect("a PNG in memory");
    out
}

/// Writes `dir/image`, `n` PNG records of sizes 20–28 x 18–22 whose red is
/// `10 * i`, green 7 and blue 200, and `dir/label`, `i` as `i64`: the
/// adapters' vision tests tell a record's pixels from its label.
pub fn write_labelled_pngs(dir: &std::path::Path, n: u32) -> loaderx_core::Result<()> {
    use loaderx_core::{Codec, DenseWriter, RaggedWriter};
    let mut w = RaggedWriter::<u8>::create(dir.join("image"), 1, Codec::Raw)?;
    w.append((0..n).map(|i| solid_png(20 + i % 9, 18 + i % 5, [i as u8 * 10, 7, 200])))?;
    w.close()?;
    let mut w = DenseWriter::<i64>::create(dir.join("label"), &[], Codec::Raw)?;
    w.append_slice(&(0..i64::from(n)).collect::<Vec<_>>(), n as usize)?;
    w.close()?;
    Ok(())
}
